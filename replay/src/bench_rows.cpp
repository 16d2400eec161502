// The benchmark targets' constructors and their readable form.
#include "dsv4/cases/bench_rows.hpp"

#include <cstdio>

namespace dsv4::cases {

namespace {
std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
}  // namespace

std::string BenchTarget::text() const {
  switch (kind) {
    case Kind::kMaxUs:
      return "<= " + num(value) + " us";
    case Kind::kMinOfCopy:
      return ">= " + num(100 * value) + "% of copy";
    case Kind::kMinTflops:
      return ">= " + num(value) + " TFLOP/s";
    case Kind::kMinSpeedup:
      return ">= " + num(value) + "x torch " + peer;
    case Kind::kMaxTimesRow:
      return "<= " + num(value) + "x " + row;
    case Kind::kMaxPlusRow:
      return "<= " + row + " + " + num(value) + " us";
  }
  return "?";
}

std::string bench_row_id(const std::string& family, const fx::Vars& v) {
  return family + ":" + v.spec();
}

namespace target {
BenchTarget max_us(double us) { return {.kind = BenchTarget::Kind::kMaxUs, .value = us}; }
BenchTarget of_copy(double fraction) {
  return {.kind = BenchTarget::Kind::kMinOfCopy, .value = fraction};
}
BenchTarget tflops(double rate) { return {.kind = BenchTarget::Kind::kMinTflops, .value = rate}; }
BenchTarget speedup(double factor, const std::string& peer) {
  return {.kind = BenchTarget::Kind::kMinSpeedup, .value = factor, .peer = peer};
}
BenchTarget times_row(const std::string& family, const fx::Vars& row, double factor) {
  return {
      .kind = BenchTarget::Kind::kMaxTimesRow, .value = factor, .row = bench_row_id(family, row)};
}
BenchTarget plus_row(const std::string& family, const fx::Vars& row, double us) {
  return {.kind = BenchTarget::Kind::kMaxPlusRow, .value = us, .row = bench_row_id(family, row)};
}
}  // namespace target

}  // namespace dsv4::cases

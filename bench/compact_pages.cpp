// bench compact_pages: quantise (bf16 rows -> MXFP8-528 / NVFP4-288 page rows at slots) and
// dequantise (page rows -> bf16 / fp32) against the device-to-device copy ceiling measured in the
// same run, with the target: quantise and dequantise >= 60% of copy at 65536 rows.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/kernels/compact_pages.hpp"
#include "dsv4/ref/compact_pages.hpp"

namespace {

using namespace dsv4;
using bench::Dev;
namespace kc = kernels::compact_pages;

constexpr size_t kRotateBytes = size_t(256) << 20;  // several times any current L2
constexpr int kMaxSets = 64;
constexpr double kTarget = 0.60;  // of the copy bandwidth, at 65536 rows
constexpr int64_t kTargetRows = 65536;

enum class Op { kQuantize, kDequantizeBf16, kDequantizeF32 };

struct Result {
  std::string kernel;
  int64_t T;
  double bytes, us, copy_gbps;
  std::string target;
  bool met;
};

std::string label(Op op, PageFormat f, int lanes) {
  const std::string fmt = page_format_name(f);
  if (op == Op::kQuantize)
    return "quantize " + fmt + (lanes ? " L" + std::to_string(lanes) : std::string());
  return "dequantize " + fmt + (op == Op::kDequantizeBf16 ? " -> bf16" : " -> fp32");
}

// Rows of N(0,1) bf16 values at a random scale per row (what a KV row looks like after norm).
std::vector<bf16> rows(fx::Rng& rng, int64_t T) {
  std::vector<float> v(size_t(T) * 512);
  for (int64_t t = 0; t < T; ++t) {
    const float s = std::ldexp(1.0f, int(rng.range(-6, 6)));
    for (size_t i = 0; i < 512; ++i) v[size_t(t) * 512 + i] = float(rng.normal()) * s;
  }
  return fx::to_bf16(v);
}

// Inputs rotated across calls so that the large cases stream from memory, not from the cache:
// bf16 rows (quantise) or filled page pools (dequantise), and distinct random slots in a pool of
// 2T rows.
Result run(Op op, PageFormat f, int64_t T, int lanes, gpu::Stream s) {
  fx::Rng rng(uint64_t(T) * 131 + uint64_t(op) * 7 + uint64_t(f));
  const int64_t R = std::max<int64_t>(2 * T, 1024);
  const size_t rb = size_t(page_row_bytes(f));
  const size_t out_bytes = op == Op::kDequantizeF32 ? 4 : 2;
  const size_t set_bytes =
      op == Op::kQuantize ? size_t(T) * 1024 + size_t(T) * 8 : size_t(R) * rb + size_t(T) * 8;
  const int sets = int(std::clamp<size_t>(kRotateBytes / set_bytes, 2, kMaxSets));
  std::vector<std::unique_ptr<Dev<bf16>>> src;
  std::vector<std::unique_ptr<Dev<uint8_t>>> pools;
  std::vector<std::unique_ptr<Dev<int64_t>>> slots;
  Dev<int64_t> errors(1);
  kernels::reset_errors(errors.p, s);
  const std::vector<bf16> x = rows(rng, std::min<int64_t>(R, 65536));
  std::vector<uint8_t> page_rows;  // real page rows, quantised on the host once
  if (op != Op::kQuantize) {
    page_rows.resize(size_t(R) * rb);
    for (int64_t r = 0; r < R; ++r)
      ref::compact_pages::quantize_row(f, x.data() + size_t(r % 65536) * 512,
                                       page_rows.data() + size_t(r) * rb);
  }
  for (int i = 0; i < sets; ++i) {
    slots.push_back(std::make_unique<Dev<int64_t>>(fx::distinct_indices(rng, size_t(T), R)));
    if (op == Op::kQuantize)
      src.push_back(
          std::make_unique<Dev<bf16>>(std::vector<bf16>(x.begin(), x.begin() + long(T) * 512)));
    else
      pools.push_back(std::make_unique<Dev<uint8_t>>(page_rows));
  }
  Dev<uint8_t> pool(size_t(R) * rb);
  Dev<uint8_t> out(size_t(T) * 512 * out_bytes);

  const double us = bench::median_us(
      [&](int i, gpu::Stream st) {
        const int k = i % sets;
        if (op == Op::kQuantize)
          kc::quantize(f, src[size_t(k)]->p, 0, slots[size_t(k)]->p, T, pool.p, R, errors.p, st,
                       {.lanes_per_block = lanes});
        else if (op == Op::kDequantizeBf16)
          kc::dequantize(f, pools[size_t(k)]->p, R, slots[size_t(k)]->p, T,
                         reinterpret_cast<bf16*>(out.p), 0, errors.p, st);
        else
          kc::dequantize(f, pools[size_t(k)]->p, R, slots[size_t(k)]->p, T,
                         reinterpret_cast<float*>(out.p), 0, errors.p, st);
      },
      s);
  if (kernels::read_errors(errors.p, s) != 0) std::printf("warning: rows rejected\n");

  // Bytes each call must move: the bf16 side, the page rows, the slots.
  const double row_side = double(T) * 512 * double(op == Op::kQuantize ? 2 : out_bytes);
  const double bytes = row_side + double(T) * double(rb) + double(T) * 8;
  Result r{
      label(op, f, lanes), T, bytes, us, bench::copy_ceiling_gbps(size_t(row_side), s), "", true};
  if (T == kTargetRows && lanes == 0) {
    r.target = ">= 60% of copy";
    r.met = bytes / (us * 1e3) / r.copy_gbps >= kTarget;
  }
  return r;
}

}  // namespace

int main() {
  if (!bench::require_gpu("bench_compact_pages")) return 0;
  gpu::StreamHandle stream;
  std::vector<Result> results;
  for (PageFormat f : {PageFormat::kMxfp8, PageFormat::kNvfp4}) {
    for (int64_t T : {64, 4096, 65536}) results.push_back(run(Op::kQuantize, f, T, 0, stream));
    for (int lanes : {2, 4})  // the other lane counts (the default is one lane per block)
      if (kc::lanes_supported(f, lanes))
        results.push_back(run(Op::kQuantize, f, 65536, lanes, stream));
    for (Op op : {Op::kDequantizeBf16, Op::kDequantizeF32})
      for (int64_t T : {64, 4096, 65536}) results.push_back(run(op, f, T, 0, stream));
  }

  bench::Table table(
      {"kernel", "rows", "MB moved", "us", "GB/s", "copy GB/s", "of copy", "target", ""});
  int missed = 0;
  for (const Result& r : results) {
    const double gbps = r.bytes / (r.us * 1e3);
    table.row({r.kernel, std::to_string(r.T), bench::fmt("%.2f", r.bytes / 1e6),
               bench::fmt("%.2f", r.us), bench::fmt("%.0f", gbps), bench::fmt("%.0f", r.copy_gbps),
               bench::fmt("%.0f%%", 100 * gbps / r.copy_gbps), r.target,
               r.target.empty() ? ""
               : r.met          ? "met"
                                : "MISSED"});
    missed += !r.met;
  }
  table.print();
  std::printf("targets: %s\n", missed ? "some MISSED (see the table)" : "all met");
  return 0;
}

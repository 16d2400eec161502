// dsv4-bench's timing: event-timed medians, the device copy ceiling, and a table streamed by row.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "dsv4/gpu/runtime.hpp"

namespace dsv4::bench {

// Median over `reps` samples of the time per call, each sample timing `batch` back-to-back calls
// with device events (so launch gaps of tiny kernels are amortised). run(i) receives a running
// call index so callers can rotate among input sets larger than the cache. Warms up first.
inline double median_us(const std::function<void(int, gpu::Stream)>& run, gpu::Stream s,
                        int reps = 30, int batch = 20, int warmup = 10) {
  int call = 0;
  for (int i = 0; i < warmup; ++i) run(call++, s);
  gpu::synchronize(s);
  gpu::EventTimer timer;
  std::vector<double> samples;
  for (int r = 0; r < reps; ++r) {
    timer.start(s);
    for (int b = 0; b < batch; ++b) run(call++, s);
    samples.push_back(1000.0 * timer.stop(s) / batch);
  }
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

// Device-to-device copy bandwidth in GB/s (bytes read + bytes written), over `bytes` per copy.
inline double copy_ceiling_gbps(size_t bytes, gpu::Stream s) {
  void* a = gpu::malloc_bytes(bytes);
  void* b = gpu::malloc_bytes(bytes);
  gpu::fill_bytes(a, 1, bytes, s);
  const double us = median_us(
      [&](int i, gpu::Stream st) {
        if (i % 2)
          gpu::copy_on_device(a, b, bytes, st);
        else
          gpu::copy_on_device(b, a, bytes, st);
      },
      s, 20, 5, 5);
  gpu::free_bytes(a);
  gpu::free_bytes(b);
  return 2.0 * double(bytes) / (us * 1e3);
}

// Device write-only bandwidth in GB/s: a fill of `bytes` (the runtime's memset), the ceiling of a
// kernel whose traffic is mostly writes.
inline double write_ceiling_gbps(size_t bytes, gpu::Stream s) {
  void* a = gpu::malloc_bytes(bytes);
  const double us = median_us(
      [&](int i, gpu::Stream st) { gpu::fill_bytes(a, i & 0xff, bytes, st); }, s, 20, 5, 5);
  gpu::free_bytes(a);
  return double(bytes) / (us * 1e3);
}

// A table streamed as it is measured: the header first, then each row as soon as row() gets it
// (flushed, so a run that stops or hangs keeps every row measured before), Markdown-ready. Columns
// take the header's width (at least 8) and widen for a longer cell. While a row is being measured
// the thread's activity names it, so a wait past the launch deadline reports which row hung:
// measuring(label) names it exactly; otherwise it is "row <n> of <table>, after <last row>".
class Table {
 public:
  explicit Table(std::vector<std::string> header, std::string title = "")
      : header_(std::move(header)), title_(std::move(title)) {
    for (const auto& h : header_) w_.push_back(std::max<size_t>(h.size(), 8));
    begin_row();
  }
  void row(std::vector<std::string> cells, FILE* out = stdout) {
    if (!printed_header_) print_header(out);
    line(cells, out);
    last_ = cells.empty() ? "" : cells[0];
    for (size_t c = 1; c < cells.size() && c < 4; ++c) last_ += " " + cells[c];
    ++rows_;
    begin_row();
  }
  // The header alone when no row came (a table whose rows all failed still shows its columns).
  void print(FILE* out = stdout) {
    if (!printed_header_) print_header(out);
    std::fflush(out);
  }
  size_t rows() const { return rows_; }

 private:
  void begin_row() {
    gpu::set_activity("row " + std::to_string(rows_ + 1) + " of " +
                      (title_.empty() ? std::string("the table") : title_) +
                      (rows_ ? ", after the row \"" + last_ + "\"" : std::string(", the first")));
  }
  void print_header(FILE* out) {
    line(header_, out);
    std::fprintf(out, "|");
    for (size_t c = 0; c < w_.size(); ++c)
      std::fprintf(out, "%s|", std::string(w_[c] + 2, '-').c_str());
    std::fprintf(out, "\n");
    std::fflush(out);
    printed_header_ = true;
  }
  void line(const std::vector<std::string>& r, FILE* out) {
    std::fprintf(out, "|");
    for (size_t c = 0; c < w_.size(); ++c)
      std::fprintf(out, " %*s |", int(w_[c]), c < r.size() ? r[c].c_str() : "");
    std::fprintf(out, "\n");
    std::fflush(out);
  }
  std::vector<std::string> header_;
  std::string title_;
  std::vector<size_t> w_;
  bool printed_header_ = false;
  size_t rows_ = 0;
  std::string last_;
};

inline std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace dsv4::bench

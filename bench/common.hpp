// Benchmark helpers: event-timed medians, the device copy ceiling, and a plain-text table.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "dsv4/gpu/runtime.hpp"

namespace dsv4::bench {

// A device allocation (no poison, no canaries: benchmarks only), filled from a host vector or
// left uninitialised, freed at scope exit.
template <class T>
struct Dev {
  T* p = nullptr;
  explicit Dev(const std::vector<T>& v) {
    p = static_cast<T*>(gpu::malloc_bytes(v.size() * sizeof(T)));
    gpu::copy_to_device(p, v.data(), v.size() * sizeof(T));
  }
  explicit Dev(size_t n) { p = static_cast<T*>(gpu::malloc_bytes(n * sizeof(T))); }
  ~Dev() { gpu::free_bytes(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
};

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

// The table's last line: "targets: all met" only when every judged row met its target and no row
// whose target needs a PyTorch peer went without one (a missing peer file is not a pass).
inline void print_targets(int missed, int unjudged) {
  if (missed)
    std::printf("targets: some MISSED (see the table)\n");
  else if (unjudged)
    std::printf(
        "targets: %d rows not judged (no PyTorch peer: run bench/torch_peers.py and pass "
        "--torch FILE); the others met\n",
        unjudged);
  else
    std::printf("targets: all met\n");
  std::fflush(stdout);
}

// Names the row about to be measured in the deadline's report (the Table's label otherwise).
inline void measuring(const std::string& what) { gpu::set_activity(what); }

inline std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Traffic cells of a table row, after the header cells kTrafficHeader: the bytes a call moves
// (KB), the achieved GB/s, the copy ceiling's GB/s measured in the same run, and the fraction of
// it.
inline const std::vector<std::string> kTrafficHeader = {"KB moved", "GB/s", "copy GB/s", "of copy"};
inline std::vector<std::string> traffic_cells(double bytes, double us, double copy_gbps) {
  const double gbps = bytes / (us * 1e3);
  return {fmt("%.0f", bytes / 1e3), fmt("%.0f", gbps), fmt("%.0f", copy_gbps),
          fmt("%.0f%%", 100.0 * gbps / copy_gbps)};
}
// `head` followed by `tail` (a row or a header with traffic cells spliced in).
inline std::vector<std::string> joined(std::vector<std::string> head,
                                       const std::vector<std::string>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

// False, with a note, when the build or the machine has no GPU (the caller exits 0: a benchmark
// is not a test); else prints the table's first line: the benchmark, the device and the backend.
inline bool require_gpu(const char* name) {
  std::string why;
  if (!gpu::available(&why)) {
    std::printf("%s: not run: %s\n", name, why.c_str());
    return false;
  }
  const gpu::DeviceInfo d = gpu::device_info();
  std::printf("%s on %s (%s), %d compute units, backend %s\n", name, d.name.c_str(), d.arch.c_str(),
              d.compute_units, gpu::backend());
  return true;
}

// PyTorch peer timings written by bench/torch_peers.py in the same device session (CSV lines
// `peer,B,n,us`), read by `--torch FILE`; a missing file or line leaves the cell "n/a".
class Peers {
 public:
  Peers(int argc, char** argv) {
    for (int i = 1; i + 1 < argc; ++i)
      if (std::string(argv[i]) == "--torch") load(argv[i + 1]);
  }
  std::optional<double> us(const std::string& peer, int64_t B, int64_t n) const {
    const auto it = us_.find({peer, B, n});
    if (it == us_.end()) return std::nullopt;
    return it->second;
  }
  std::string cell(const std::string& peer, int64_t B, int64_t n) const {
    const auto v = us(peer, B, n);
    return v ? fmt("%.2f", *v) : "n/a";
  }

 private:
  void load(const std::string& path) {
    std::ifstream in(path);
    if (!in) std::printf("warning: --torch %s cannot be read\n", path.c_str());
    std::string line;
    while (std::getline(in, line)) {
      std::stringstream ss(line);
      std::string peer, b, n, us;
      if (std::getline(ss, peer, ',') && std::getline(ss, b, ',') && std::getline(ss, n, ',') &&
          std::getline(ss, us))
        us_[{peer, std::stoll(b), std::stoll(n)}] = std::stod(us);
    }
  }
  std::map<std::tuple<std::string, int64_t, int64_t>, double> us_;
};

}  // namespace dsv4::bench

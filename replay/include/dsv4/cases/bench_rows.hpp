// A family's benchmark rows: the shapes dsv4-bench times and the targets each row must meet.
#pragma once

// An adapter declares its rows with `static std::vector<cases::BenchRow> bench_rows()` beside its
// sweeps: the shapes users care about (SGLang's decode batch sizes, DeepSeek-V4's dimensions), each
// drawn through the adapter, checked against the reference and timed by dsv4-bench. A target is a
// bound on the row's time, its share of the copy ceiling, its math rate, its speed-up over the
// PyTorch peers, or its time against another row (of any family) measured in the same run.

#include <string>
#include <vector>

#include "dsv4/fixtures/case_sweep.hpp"

namespace dsv4::cases {

struct BenchTarget {
  enum class Kind {
    kMaxUs,        // us <= value
    kMinOfCopy,    // achieved GB/s >= value x the copy ceiling measured beside it
    kMinTflops,    // flops / time >= value TFLOP/s
    kMinSpeedup,   // the peer's time >= value x ours (peer: "eager", "compile" or "best")
    kMaxTimesRow,  // us <= value x the time of `row`
    kMaxPlusRow,   // us <= the time of `row` + value
  };
  Kind kind = Kind::kMaxUs;
  double value = 0;
  std::string peer = "best";  // kMinSpeedup: whose time (best: the faster of eager and compile)
  std::string row = {};       // kMaxTimesRow / kMaxPlusRow: "family:spec" of the other row
  // "<= 40 us", ">= 50% of copy", ">= 250 TFLOP/s", ">= 3x torch (best)", "<= 2x indexer_topk:..."
  std::string text() const;
};

// The targets' constructors.
namespace target {
BenchTarget max_us(double us);
BenchTarget of_copy(double fraction);
BenchTarget tflops(double rate);
BenchTarget speedup(double factor, const std::string& peer = "best");
BenchTarget times_row(const std::string& family, const fx::Vars& row, double factor);
BenchTarget plus_row(const std::string& family, const fx::Vars& row, double us);
}  // namespace target

struct BenchRow {
  fx::Vars vars;                          // the shape (dsv4-replay --draw --shape takes its spec())
  std::vector<BenchTarget> targets = {};  // none: the row is measured, not judged
  std::string note = {};                  // what the row stands for ("SGLang decode, B=1")
};

// "family:spec", the row's name in targets and results.
std::string bench_row_id(const std::string& family, const fx::Vars& v);

}  // namespace dsv4::cases

// indexer_topk's benchmark rows and a launch's work: the top 512 of a decode step's scores.
#include "dsv4/cases/indexer_topk.hpp"

namespace dsv4::cases {

IndexerTopkShape indexer_bench_shape(int64_t B, int64_t len, bool sorted) {
  return {.B = B, .width = len, .K = 512, .len = len, .sorted = sorted};
}

std::vector<BenchRow> IndexerTopkCase::bench_rows() {
  std::vector<BenchRow> rows;
  for (int64_t B : {1, 32, 128})
    for (int64_t len : {1024, 8192, 32768}) {
      const fx::Vars unsorted = indexer_bench_shape(B, len, false).vars();
      rows.push_back({unsorted});
      // Sorted: no slower than torch.topk, and the sort adds at most 4 us to the unsorted select.
      rows.push_back({indexer_bench_shape(B, len, true).vars(),
                      {target::speedup(1.0), target::plus_row("indexer_topk", unsorted, 4.0)}});
    }
  return rows;
}

fx::Work scored_rows_work(const fx::Tensors& in, const fx::Tensors& want,
                          const std::string& family) {
  fx::Work w;
  double read = 0;
  for (int32_t l : fx::input_of(in, "lens", family).values<int32_t>("in.lens")) read += l;
  w.bytes = read * 4;
  for (const auto& [name, t] : want) w.bytes += double(t.data.size());
  return w;
}

// The scores of each row's length read once, K indices written (twice with a raw output).
fx::Work IndexerTopkCase::work(const fx::Tensors& in, const fx::Tensors& want) const {
  return scored_rows_work(in, want, family());
}

}  // namespace dsv4::cases

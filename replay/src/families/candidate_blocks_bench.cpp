// candidate_blocks's benchmark rows and a launch's work: block maxima, top blocks, top keys.
#include "dsv4/cases/candidate_blocks.hpp"
#include "dsv4/cases/indexer_topk.hpp"

namespace dsv4::cases {

IndexerTopkShape indexer_bench_shape(int64_t B, int64_t len, bool sorted);  // indexer_topk_bench

std::vector<BenchRow> CandidateBlocksCase::bench_rows() {
  std::vector<BenchRow> rows;
  for (int64_t B : {1, 32, 128})
    for (int64_t len : {8192, 32768})
      // At most twice the indexer's sorted top-k of the same scores.
      rows.push_back(
          {CandidateBlocksShape{.B = B, .width = len, .len = len}.vars(),
           {target::times_row("indexer_topk", indexer_bench_shape(B, len, true).vars(), 2.0)}});
  return rows;
}

// The scores of each row's length read once, the blocks and keys written.
fx::Work CandidateBlocksCase::work(const fx::Tensors& in, const fx::Tensors& want) const {
  fx::Work w;
  double read = 0;
  for (int32_t l : fx::input_of(in, "lens", family()).values<int32_t>("in.lens")) read += l;
  w.bytes = read * 4;
  for (const auto& [name, t] : want) w.bytes += double(t.data.size());
  return w;
}

}  // namespace dsv4::cases

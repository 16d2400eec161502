// candidate_blocks's benchmark rows and a launch's work: block maxima, top blocks, top keys.
#include "dsv4/cases/candidate_blocks.hpp"
#include "dsv4/cases/indexer_topk.hpp"

namespace dsv4::cases {

// indexer_topk_bench.cpp: the indexer's bench shape, and the work of a launch over scored rows
// (each row's scores up to its length read once, every output written).
IndexerTopkShape indexer_bench_shape(int64_t B, int64_t len, bool sorted);
fx::Work scored_rows_work(const fx::Tensors& in, const fx::Tensors& want,
                          const std::string& family);

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
  return scored_rows_work(in, want, family());
}

}  // namespace dsv4::cases

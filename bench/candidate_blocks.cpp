// bench candidate_blocks: the two-level indexer (16 blocks of 64 keys, then the top 512 keys,
// sorted) against SGLang's torch expression, eager and torch.compile, timed on the same card in the
// same session (bench/torch_peers.py candidate_blocks), with its traffic (scores read for the rows'
// lengths, lengths, blocks and keys written) against the copy ceiling of the scores array measured
// in the same run. The issue sets no target for this family.
#include <cstdio>
#include <string>
#include <vector>

#include "common.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/kernels/candidate_blocks.hpp"

namespace {

using namespace dsv4;
using bench::Dev;
namespace kc = kernels::candidate_blocks;

constexpr int64_t kBs = 64, kNb = 16, kK = 512;

}  // namespace

int main(int argc, char** argv) {
  if (!bench::require_gpu("bench_candidate_blocks")) return 0;
  const bench::Peers torch(argc, argv);
  gpu::StreamHandle stream;
  bench::Table table(bench::joined(bench::joined({"B", "len", "ours us"}, bench::kTrafficHeader),
                                   {"torch eager", "torch.compile", "vs eager", "vs compile"}));
  for (int64_t B : {1, 32, 128}) {
    for (int64_t len : {8192, 32768}) {
      fx::Rng rng{uint64_t(B) * 5 + uint64_t(len)};
      const Dev<float> scores(fx::normal_f32(rng, size_t(B * len)));
      const Dev<int32_t> lens{std::vector<int32_t>(size_t(B), int32_t(len))};
      Dev<int32_t> blocks(size_t(B * kNb)), keys(size_t(B * kK));
      const kc::Args a{.scores = scores.p,
                       .stride = len,
                       .width = len,
                       .lens = lens.p,
                       .B = B,
                       .bs = kBs,
                       .nb = kNb,
                       .K = kK,
                       .blocks_out = blocks.p,
                       .keys_out = keys.p};
      const double us = bench::median_us([&](int, gpu::Stream st) { kc::select(a, st); }, stream);
      const auto eager = torch.us("eager candidate_blocks", B, len);
      const auto comp = torch.us("compile candidate_blocks", B, len);
      const double bytes = 4.0 * double(B) * double(len + 1 + kNb + kK);
      const double copy = bench::copy_ceiling_gbps(size_t(B * len) * 4, stream);
      table.row(bench::joined(
          bench::joined({std::to_string(B), std::to_string(len), bench::fmt("%.2f", us)},
                        bench::traffic_cells(bytes, us, copy)),
          {torch.cell("eager candidate_blocks", B, len),
           torch.cell("compile candidate_blocks", B, len),
           eager ? bench::fmt("%.1fx", *eager / us) : "n/a",
           comp ? bench::fmt("%.1fx", *comp / us) : "n/a"}));
    }
  }
  std::printf(
      "bs = %lld, nb = %lld, K = %lld, fp32 scores N(0,1); times in us (median); copy GB/s: a "
      "copy of the [B, len] scores in the same run\n",
      (long long)kBs, (long long)kNb, (long long)kK);
  table.print();
  return 0;
}

// bench indexer_topk: top-512 of fp32 scores, unsorted and sorted in the kernel, against
// torch.topk and torch.sort timed on the same card in the same session (bench/torch_peers.py),
// with the targets: sorted <= torch.topk unsorted alone, and the sort adds <= 4 us; the
// sorted kernel's traffic (scores read for the rows' lengths, lengths, K indices written) against
// the copy ceiling of the scores array measured in the same run.
#include <cstdio>
#include <string>
#include <vector>

#include "common.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/kernels/indexer_topk.hpp"

namespace {

using namespace dsv4;
using bench::Dev;
namespace ki = kernels::indexer_topk;

constexpr int64_t kK = 512;
constexpr double kSortBudgetUs = 4.0;

double time_topk(const Dev<float>& scores, const Dev<int32_t>& lens, Dev<int32_t>& out, int64_t B,
                 int64_t len, bool sorted, gpu::Stream s) {
  const ki::Args a{.scores = scores.p,
                   .stride = len,
                   .width = len,
                   .lens = lens.p,
                   .B = B,
                   .K = kK,
                   .out = out.p,
                   .sorted = sorted};
  return bench::median_us([&](int, gpu::Stream st) { ki::topk(a, st); }, s);
}

}  // namespace

int main(int argc, char** argv) {
  if (!bench::require_gpu("bench_indexer_topk")) return 0;
  const bench::Peers torch(argc, argv);
  gpu::StreamHandle stream;
  bench::Table table(
      bench::joined({"B", "len", "ours unsorted", "ours sorted", "sort adds"},
                    bench::joined(bench::kTrafficHeader,
                                  {"torch.topk", "torch.sort K", "eager topk+sort",
                                   "compile topk+sort", "sorted <= torch.topk", "sort <= 4 us"})));
  int missed = 0, unjudged = 0;
  for (int64_t B : {1, 32, 128}) {
    for (int64_t len : {1024, 8192, 32768}) {
      fx::Rng rng(uint64_t(B) * 7 + uint64_t(len));
      const Dev<float> scores(fx::normal_f32(rng, size_t(B * len)));
      const Dev<int32_t> lens{std::vector<int32_t>(size_t(B), int32_t(len))};
      Dev<int32_t> out(size_t(B * kK));
      const double un = time_topk(scores, lens, out, B, len, false, stream);
      const double so = time_topk(scores, lens, out, B, len, true, stream);
      const auto peer = torch.us("torch.topk unsorted", B, len);
      std::string vs_torch = "n/a";
      if (peer) {
        vs_torch = so <= *peer ? "met" : "MISSED";
        missed += so > *peer;
      } else {
        ++unjudged;
      }
      const bool sort_ok = so - un <= kSortBudgetUs;
      missed += !sort_ok;
      const double bytes = 4.0 * double(B) * double(len + 1 + kK);  // scores, len, indices
      const double copy = bench::copy_ceiling_gbps(size_t(B * len) * 4, stream);
      table.row(bench::joined({std::to_string(B), std::to_string(len), bench::fmt("%.2f", un),
                               bench::fmt("%.2f", so), bench::fmt("%.2f", so - un)},
                              bench::joined(bench::traffic_cells(bytes, so, copy),
                                            {torch.cell("torch.topk unsorted", B, len),
                                             torch.cell("torch.sort of the K indices", B, len),
                                             torch.cell("eager topk+sort", B, len),
                                             torch.cell("compile topk+sort", B, len), vs_torch,
                                             sort_ok ? "met" : "MISSED"})));
    }
  }
  std::printf(
      "K = %lld, fp32 scores N(0,1), every row of length len; times in us (median); traffic and "
      "GB/s of ours sorted, copy GB/s: a copy of the [B, len] scores in the same run\n",
      (long long)kK);
  table.print();
  bench::print_targets(missed, unjudged);
  return 0;
}

// bench split_combine: the merge of split-KV partials against the device copy ceiling measured in
// the same run, beside the PyTorch expression (eager and torch.compile) timed in the same device
// session: python3 bench/torch_peers.py split_combine > peers.csv; bench_split_combine --torch
// peers.csv.
// Targets (issue 13): >= 60% of copy at B=64 S=8 H=128 D=512, <= 10 us at B=1 S=16 H=128 D=512.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/kernels/split_combine.hpp"
#include "dsv4/ref/kv_store.hpp"

namespace {

using namespace dsv4;
using bench::Dev;
namespace ksc = kernels::split_combine;

constexpr size_t kRotateBytes = size_t(256) << 20;  // several times the H200's L2

struct Case {
  int64_t B, S, H, D;
  bool sink, rope;
  std::string target;  // "" or the target
  int variant = 0;     // ksc::Args::variant: 0 weights staged per split (default), 1 per lane
};

struct Result {
  Case c;
  double bytes, us, copy_gbps;
  bool met = true;
};

// Partials rotated across calls so that every call reads them from memory, not from the L2.
Result run(const Case& c, gpu::Stream s) {
  fx::Rng rng(uint64_t(c.B * 131 + c.S));
  const size_t n_o = size_t(c.B * c.S * c.H * c.D), n_lse = size_t(c.B * c.S * c.H);
  const size_t set_bytes = (n_o + n_lse) * 4;
  const int sets = int(std::clamp<size_t>(kRotateBytes / set_bytes, 1, 16));
  std::vector<std::unique_ptr<Dev<float>>> o, lse;
  for (int i = 0; i < sets; ++i) {
    o.push_back(std::make_unique<Dev<float>>(fx::normal_f32(rng, n_o)));
    lse.push_back(std::make_unique<Dev<float>>(fx::uniform_f32(rng, n_lse, -10, 10)));
  }
  Dev<int32_t> n_splits(std::vector<int32_t>(size_t(c.B), int32_t(c.S)));
  Dev<float> sink(fx::uniform_f32(rng, size_t(c.H), -2, 2));
  const std::vector<float> table = ref::kv_store::rope_table(4096, 64);
  Dev<float> cos_sin(table);
  std::vector<int64_t> pos(size_t(c.B));
  for (auto& p : pos) p = rng.range(0, 4095);
  Dev<int64_t> positions(pos);
  Dev<bf16> out(size_t(c.B * c.H * c.D));
  Dev<float> out_lse(size_t(c.B * c.H));
  Dev<int64_t> errors(1);
  kernels::reset_errors(errors.p, s);

  ksc::Args a;
  a.B = c.B, a.S = c.S, a.H = c.H, a.D = c.D;
  a.n_splits = n_splits.p;
  a.sink = c.sink ? sink.p : nullptr;
  if (c.rope) a.rope = {cos_sin.p, 4096, 64, positions.p};
  a.out = out.p;
  a.out_lse = out_lse.p;
  a.errors = errors.p;
  a.variant = c.variant;
  const double us = bench::median_us(
      [&](int i, gpu::Stream st) {
        a.o = o[size_t(i % sets)]->p;
        a.lse = lse[size_t(i % sets)]->p;
        ksc::combine(a, st);
      },
      s);
  if (kernels::read_errors(errors.p, s) != 0) std::printf("warning: positions rejected\n");
  const double bytes = double(set_bytes) + double(c.B * c.H) * double(c.D * 2 + 4);
  Result r{c, bytes, us, bench::copy_ceiling_gbps(set_bytes, s)};
  const double of_copy = bytes / (us * 1e3) / r.copy_gbps;
  if (c.target == ">= 60% of copy") r.met = of_copy >= 0.60;
  if (c.target == "<= 10 us") r.met = us <= 10.0;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (!bench::require_gpu("bench_split_combine")) return 0;
  const bench::Peers torch(argc, argv);
  gpu::StreamHandle stream;
  const std::vector<Case> cases = {
      {1, 16, 128, 512, true, false, "<= 10 us"}, {1, 16, 128, 512, true, true, ""},
      {8, 8, 128, 512, true, false, ""},          {64, 8, 128, 512, true, false, ">= 60% of copy"},
      {64, 8, 128, 512, true, true, ""},          {64, 16, 64, 512, false, false, ""},
  };
  std::vector<Result> results;
  for (const Case& c : cases) {
    results.push_back(run(c, stream));
    Case per_lane = c;  // the same shape with every lane computing every weight
    per_lane.variant = 1;
    per_lane.target.clear();
    results.push_back(run(per_lane, stream));
  }

  bench::Table table({"B", "S", "H", "D", "sink", "rope", "weights", "MB moved", "us", "GB/s",
                      "copy GB/s", "of copy", "torch eager us", "torch.compile us", "vs compile",
                      "target", ""});
  int missed = 0;
  for (const Result& r : results) {
    const double gbps = r.bytes / (r.us * 1e3);
    const std::string peer =
        "split_combine S" + std::to_string(r.c.S) + " H" + std::to_string(r.c.H);
    const auto compiled = torch.us("compile " + peer, r.c.B, r.c.D);
    table.row(
        {std::to_string(r.c.B), std::to_string(r.c.S), std::to_string(r.c.H), std::to_string(r.c.D),
         r.c.sink ? "yes" : "no", r.c.rope ? "yes" : "no",
         r.c.variant == 0 ? "staged (default)" : "per lane", bench::fmt("%.2f", r.bytes / 1e6),
         bench::fmt("%.2f", r.us), bench::fmt("%.0f", gbps), bench::fmt("%.0f", r.copy_gbps),
         bench::fmt("%.1f%%", 100 * gbps / r.copy_gbps), torch.cell("eager " + peer, r.c.B, r.c.D),
         torch.cell("compile " + peer, r.c.B, r.c.D),
         compiled ? bench::fmt("%.1fx", *compiled / r.us) : "n/a", r.c.target,
         r.c.target.empty() ? ""
         : r.met            ? "met"
                            : "MISSED"});
    missed += !r.met;
  }
  table.print();
  std::printf("torch peer: the same expression for every row (sink always; no inverse RoPE)\n");
  bench::print_targets(missed, 0);
  return 0;
}

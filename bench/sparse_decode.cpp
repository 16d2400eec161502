// bench sparse_decode: sparse decode attention over SGLang's V4.1 pages (v41, v41_fp4), time and
// bandwidth over the bytes it must gather (K token rows per query, q, out) against the device copy
// ceiling measured in the same run, beside the PyTorch peer (gather + dequantise + explicit
// softmax with the sink, eager and torch.compile) timed in the same device session:
// python3 bench/torch_peers.py sparse_decode > peers.csv; bench_sparse_decode --torch peers.csv.
// Compute beside it: the 4 * B * Hq * K * 512 flops of the two products (q k^T and P V) as TFLOP/s
// and as a share of the card's dense bf16 matrix peak (published figure, where the card is known),
// so a row shows whether it is bound by the gather or by the matrix units.
// Targets: >= 40% of copy at B=64, Hq=128, K=2048 (both layouts); >= 3x the faster torch
// column; decode() choosing its own splits at B=1, Hq=128, K=2048 within 40 us. The decode()
// rows show the split count it chose for B = 1 .. 64 on this card.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common.hpp"
#include "dsv4/fixtures/attention_inputs.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/kernels/sparse_decode.hpp"
#include "dsv4/kernels/split_combine.hpp"

namespace {

using namespace dsv4;
using bench::Dev;
namespace ksd = kernels::sparse_decode;

struct Case {
  KvLayout layout;
  int64_t B, H, K, P, splits;  // 0: the unsplit kernel; -1: decode()'s own split choice (its
                               // workspace); else that many partials + split_combine
};

struct Result {
  Case c;
  double bytes, us, copy_gbps;
  int64_t chosen = 0;  // decode()'s split count (splits -1)
};

// Dense bf16 matrix peak of the card in TFLOP/s from its vendor's data sheet (half the figure
// quoted with 2:4 sparsity), 0 where this table does not know the card.
double bf16_peak_tflops(const gpu::DeviceInfo& d) {
  if (d.name.find("H200") != std::string::npos) return 989.5;  // H200 SXM
  if (d.name.find("H100") != std::string::npos && d.name.find("PCIe") == std::string::npos)
    return 989.5;  // H100 SXM
  if (d.name.find("MI300X") != std::string::npos) return 1307.4;
  return 0;
}

Result run(const Case& c, gpu::Stream s) {
  fx::Rng rng(uint64_t(c.B * 7 + c.K + int(c.layout)));
  const int64_t pages = (2 * c.B * c.K + c.P - 1) / c.P;
  const fx::CacheData cache = fx::sparse_cache(
      rng, c.layout, c.P, size_t(c.B), size_t(c.K), pages,
      {.valid = 1.0, .minus_one = 0, .hostile = 0, .repeats = false, .poison_unused = false});
  std::vector<int32_t> lengths(size_t(c.B), int32_t(c.K));
  Dev<uint8_t> pool(cache.pool);
  Dev<int32_t> idx(cache.indices), len(lengths);
  Dev<bf16> q(fx::to_bf16(fx::normal_f32(rng, size_t(c.B * c.H * 512))));
  Dev<float> sink(fx::uniform_f32(rng, size_t(c.H), -2, 2));
  Dev<bf16> out(size_t(c.B * c.H * 512));
  Dev<float> lse(size_t(c.B * c.H));
  const int64_t S = std::max<int64_t>(c.splits, 1);
  Dev<float> part_o(size_t(c.B * S * c.H * 512)), part_lse(size_t(c.B * S * c.H));
  Dev<int64_t> errors(1);
  kernels::reset_errors(errors.p, s);
  ksd::Args a;
  a.B = c.B, a.H = c.H;
  a.q = q.p;
  a.main = {c.layout, c.P, pages, pool.p, idx.p, c.K, len.p};
  a.sm_scale = 0.044194173824159216f;
  a.sink = sink.p;
  a.errors = errors.p;
  const int64_t chosen = c.splits == -1 ? ksd::decode_splits(a) : 0;
  const size_t ws_bytes = c.splits == -1 ? ksd::decode_workspace_bytes(a) : 0;
  Dev<uint8_t> ws(std::max<size_t>(ws_bytes, 16));
  kernels::split_combine::Args m;
  m.B = c.B, m.S = S, m.H = c.H, m.D = 512;
  m.o = part_o.p, m.lse = part_lse.p, m.sink = sink.p, m.out = out.p, m.out_lse = lse.p;
  const double us = bench::median_us(
      [&](int, gpu::Stream st) {
        if (c.splits == 0) {
          ksd::decode(a, out.p, lse.p, st);
        } else if (c.splits == -1) {
          ksd::decode(a, out.p, lse.p, ws.p, ws_bytes, st);
        } else {
          ksd::decode_partials(a, S, part_o.p, part_lse.p, st);
          kernels::split_combine::combine(m, st);
        }
      },
      s, 10, 5, 3);
  if (kernels::read_errors(errors.p, s) != 0) std::printf("warning: error columns counted\n");
  const double token = page_layout(c.layout).token_bytes();
  const double bytes = double(c.B * c.K) * token + double(c.B * c.H * 512) * 2 * 2;
  return {c, bytes, us, bench::copy_ceiling_gbps(size_t(bytes / 2), s), chosen};
}

}  // namespace

int main(int argc, char** argv) {
  if (!bench::require_gpu("bench_sparse_decode")) return 0;
  const bench::Peers torch(argc, argv);
  gpu::StreamHandle stream;
  std::vector<Case> cases;
  for (KvLayout l : {KvLayout::kV41, KvLayout::kV41Fp4}) {
    cases.push_back({l, 1, 128, 2048, 64, 0});
    cases.push_back({l, 1, 128, 2048, 64, 16});
    cases.push_back({l, 1, 128, 2048, 64, 64});
    cases.push_back({l, 64, 128, 2048, 64, 0});
    cases.push_back({l, 64, 128, 2048, 64, 2});
  }
  // decode() choosing its splits, at SGLang's decode batch sizes.
  for (int64_t B : {1, 2, 4, 8, 16, 32, 64})
    cases.push_back({KvLayout::kV41, B, 128, 2048, 64, -1});
  std::vector<Result> results;
  for (const Case& c : cases) results.push_back(run(c, stream));

  const double peak = bf16_peak_tflops(gpu::device_info());
  bench::Table table({"layout", "B", "Hq", "K", "P", "splits", "MB gathered", "us", "GB/s",
                      "copy GB/s", "of copy", "TFLOP/s", "of bf16 peak", "torch eager us",
                      "torch.compile us", "vs best torch", "targets", ""});
  int missed = 0;
  for (const Result& r : results) {
    const double gbps = r.bytes / (r.us * 1e3);
    const double tflops = 4.0 * double(r.c.B * r.c.H * r.c.K) * 512 / (r.us * 1e6);
    const std::string peer = std::string("sparse_decode ") + kv_layout_name(r.c.layout) + " H" +
                             std::to_string(r.c.H) + " P" + std::to_string(r.c.P);
    double best = 0;
    for (const char* m : {"eager ", "compile "})
      if (const auto v = torch.us(m + peer, r.c.B, r.c.K))
        best = best == 0 ? *v : std::min(best, *v);
    std::string target, verdict;
    if (r.c.splits == -1 && r.c.B == 1) {
      target = "decode() <= 40 us";
      const bool met = r.us <= 40.0;
      verdict = met ? "met" : "MISSED";
      missed += !met;
    } else if (r.c.B == 64 && r.c.splits != -1) {
      target = ">= 40% of copy, >= 3x torch";
      const bool met = gbps / r.copy_gbps >= 0.40 && best > 0 && best / r.us >= 3.0;
      verdict = met ? "met" : "MISSED";
      missed += !met;
    }
    table.row(
        {kv_layout_name(r.c.layout), std::to_string(r.c.B), std::to_string(r.c.H),
         std::to_string(r.c.K), std::to_string(r.c.P),
         r.c.splits == -1  ? "decode(): " + std::to_string(r.chosen)
         : r.c.splits != 0 ? std::to_string(r.c.splits) + " + combine"
                           : "-",
         bench::fmt("%.2f", r.bytes / 1e6), bench::fmt("%.2f", r.us), bench::fmt("%.0f", gbps),
         bench::fmt("%.0f", r.copy_gbps), bench::fmt("%.0f%%", 100 * gbps / r.copy_gbps),
         bench::fmt("%.1f", tflops), peak > 0 ? bench::fmt("%.1f%%", 100 * tflops / peak) : "n/a",
         torch.cell("eager " + peer, r.c.B, r.c.K), torch.cell("compile " + peer, r.c.B, r.c.K),
         best > 0 ? bench::fmt("%.1fx", best / r.us) : "n/a", target, verdict});
  }
  table.print();
  std::printf("torch peer: the same shapes, every index a key, the sink included\n");
  std::printf("bf16 peak: %s\n", peak > 0
                                     ? bench::fmt("%.1f TFLOP/s dense (data sheet)", peak).c_str()
                                     : "not known for this card");
  bench::print_targets(missed, 0);
  return 0;
}

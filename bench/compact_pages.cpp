// bench compact_pages: quantise (bf16 rows -> SGLang's paged layouts at slots) and dequantise
// (slots -> bf16 / fp32 rows) at 65536 tokens in pages of 64, against the device-to-device copy
// ceiling measured in the same run and PyTorch (eager and torch.compile of the same expression,
// timed on the same card by bench/compact_pages_torch.py, whose table this program reads), with the
// issue's targets: every row >= 70% of copy and >= 1.5x torch.compile.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/kernels/compact_pages.hpp"
#include "dsv4/ref/compact_pages.hpp"

namespace {

using namespace dsv4;
using bench::Dev;
namespace kc = kernels::compact_pages;

constexpr size_t kRotateBytes = size_t(256) << 20;  // several times any current L2
constexpr int kMaxSets = 64;
constexpr double kTargetCopy = 0.70;  // of the copy bandwidth
constexpr double kTargetTorch = 1.5;  // times faster than torch.compile
constexpr int64_t kTokens = 65536;
constexpr int64_t kPage = 64;
constexpr KvLayout kLayouts[] = {KvLayout::kV41, KvLayout::kV41Fp4, KvLayout::kV4,
                                 KvLayout::kV4Fnuz};

enum class Op { kQuantize, kDequantizeBf16, kDequantizeF32 };

struct Result {
  std::string kernel, key;  // key: the torch JSON's name for the same operation
  int64_t T;
  double bytes, us, copy_gbps, write_gbps;
  bool targeted;
};

const char* const kQuantizeVariantNames[kc::kQuantVariants] = {"", " var1 (integer encoder)"};
const char* const kDequantVariantNames[kc::kDequantVariants] = {"", " var1 (8 values per lane)"};

std::string key_of(Op op, KvLayout l) {
  const std::string name = kv_layout_name(l);
  return op == Op::kQuantize         ? "quantize " + name
         : op == Op::kDequantizeBf16 ? "dequantize " + name + " bf16"
                                     : "dequantize " + name + " fp32";
}

// Rows of N(0,1) bf16 values at a random scale per row (what a KV row looks like after norm).
std::vector<bf16> rows(fx::Rng& rng, int64_t T) {
  std::vector<float> v(size_t(T) * 512);
  for (int64_t t = 0; t < T; ++t) {
    const float s = std::ldexp(1.0f, int(rng.range(-6, 6)));
    for (size_t i = 0; i < 512; ++i) v[size_t(t) * 512 + i] = float(rng.normal()) * s;
  }
  return fx::to_bf16(v);
}

// Inputs rotated across calls so that the large cases stream from memory, not from the cache:
// bf16 rows (quantise) or filled pools (dequantise), and distinct random slots in a pool of 2T
// slots (pages of 64). One row per kernel variant in `variants` (the inputs made once).
std::vector<Result> run(Op op, KvLayout l, int64_t T, int V, gpu::Stream s,
                        const std::vector<int>& variants = {0}) {
  fx::Rng rng(uint64_t(T) * 131 + uint64_t(op) * 7 + uint64_t(l));
  const PageLayout L = page_layout(l);
  const int64_t pages = std::max<int64_t>(2 * T, 1024) / kPage;
  const size_t pool_bytes = size_t(pages * L.page_bytes(kPage));
  const size_t out_bytes = op == Op::kDequantizeF32 ? 4 : 2;
  const size_t set_bytes =
      op == Op::kQuantize ? size_t(T) * 1024 + size_t(T) * 8 : pool_bytes + size_t(T) * 8;
  const int sets = int(std::clamp<size_t>(kRotateBytes / set_bytes, 2, kMaxSets));
  std::vector<std::unique_ptr<Dev<bf16>>> src;
  std::vector<std::unique_ptr<Dev<uint8_t>>> pools;
  std::vector<std::unique_ptr<Dev<int64_t>>> slots;
  Dev<int64_t> errors(1);
  kernels::reset_errors(errors.p, s);
  const std::vector<bf16> x = rows(rng, T);
  std::vector<uint8_t> filled;  // real pages, quantised on the host once
  if (op != Op::kQuantize) {
    std::vector<bf16> all(size_t(pages * kPage) * 512);
    for (size_t i = 0; i < all.size(); ++i) all[i] = x[i % x.size()];
    filled = ref::compact_pages::quantize_pages(l, kPage, all);
  }
  for (int i = 0; i < sets; ++i) {
    slots.push_back(
        std::make_unique<Dev<int64_t>>(fx::distinct_indices(rng, size_t(T), pages * kPage)));
    if (op == Op::kQuantize)
      src.push_back(std::make_unique<Dev<bf16>>(x));
    else
      pools.push_back(std::make_unique<Dev<uint8_t>>(filled));
  }
  Dev<uint8_t> pool(pool_bytes);
  Dev<uint8_t> out(size_t(T) * 512 * out_bytes);

  // Bytes each call must move: the row side, each token's data and written scale bytes, slots.
  const double row_side = double(T) * 512 * double(op == Op::kQuantize ? 2 : out_bytes);
  const double bytes = row_side + double(T) * double(L.data_bytes + L.scales) + double(T) * 8;
  const double copy_gbps = bench::copy_ceiling_gbps(size_t(row_side), s);
  const double write_gbps = bench::write_ceiling_gbps(size_t(row_side), s);
  std::vector<Result> results;
  for (int variant : variants) {
    const double us = bench::median_us(
        [&](int i, gpu::Stream st) {
          const int k = i % sets;
          if (op == Op::kQuantize)
            kc::quantize(l, kPage, src[size_t(k)]->p, 0, slots[size_t(k)]->p, T, pool.p, pages,
                         errors.p, st, {.values_per_lane = V, .variant = variant});
          else if (op == Op::kDequantizeBf16)
            kc::dequantize(l, kPage, pools[size_t(k)]->p, pages, slots[size_t(k)]->p, T,
                           reinterpret_cast<bf16*>(out.p), 0, errors.p, st, {.variant = variant});
          else
            kc::dequantize(l, kPage, pools[size_t(k)]->p, pages, slots[size_t(k)]->p, T,
                           reinterpret_cast<float*>(out.p), 0, errors.p, st, {.variant = variant});
        },
        s);
    if (kernels::read_errors(errors.p, s) != 0) std::printf("warning: rows rejected\n");
    std::string name = key_of(op, l);
    if (op == Op::kQuantize)
      name += " V" + std::to_string(V ? V : kc::default_values_per_lane(l)) +
              (V ? "" : " (default)") + kQuantizeVariantNames[variant];
    else
      name += kDequantVariantNames[variant];
    results.push_back(Result{name, key_of(op, l), T, bytes, us, copy_gbps, write_gbps,
                             T == kTokens && V == 0 && variant == 0});
  }
  return results;
}

// "name<TAB>eager_us<TAB>compile_us" lines from the torch script; a missing file or entry leaves
// the columns empty (and the torch target unmet); "nan" marks a failed torch.compile.
std::map<std::string, std::pair<double, double>> read_torch(const char* path) {
  std::map<std::string, std::pair<double, double>> m;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    const size_t a = line.find('\t'), b = line.find('\t', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    m[line.substr(0, a)] = {std::strtod(line.c_str() + a + 1, nullptr),
                            std::strtod(line.c_str() + b + 1, nullptr)};
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (!bench::require_gpu("bench_compact_pages")) return 0;
  const auto torch = read_torch(argc > 1 ? argv[1] : "compact_pages_torch.tsv");
  if (torch.empty())
    std::printf("no torch timings (run bench/compact_pages_torch.py --out FILE, pass FILE)\n");
  gpu::StreamHandle stream;
  std::vector<Result> results;
  auto add = [&](std::vector<Result> r) { results.insert(results.end(), r.begin(), r.end()); };
  for (KvLayout l : kLayouts) {
    for (int64_t T : {int64_t(4096), kTokens}) add(run(Op::kQuantize, l, T, 0, stream));
    for (int V : {8, 16, 32, 64})  // the other values-per-lane choices
      if (kc::values_per_lane_supported(l, V) && V != kc::default_values_per_lane(l))
        add(run(Op::kQuantize, l, kTokens, V, stream));
    if (l == KvLayout::kV41Fp4)  // the other encoder
      for (int V : {16, 32}) add(run(Op::kQuantize, l, kTokens, V, stream, {1}));
    add(run(Op::kDequantizeBf16, l, kTokens, 0, stream));
    add(run(Op::kDequantizeF32, l, kTokens, 0, stream, {0, 1}));
  }

  bench::Table table({"kernel", "tokens", "MB moved", "us", "GB/s", "copy GB/s", "of copy",
                      "write-only GB/s", "torch eager us", "torch.compile us", "speedup", "target",
                      ""});
  int missed = 0;
  for (const Result& r : results) {
    const double gbps = r.bytes / (r.us * 1e3);
    const auto it = r.T == kTokens ? torch.find(r.key) : torch.end();
    const double eager = it == torch.end() ? NAN : it->second.first;
    const double comp = it == torch.end() ? NAN : it->second.second;
    // Where torch.compile could not build the expression, eager PyTorch is the peer.
    const double peer = std::isnan(comp) ? eager : comp;
    const bool met =
        !r.targeted || (gbps / r.copy_gbps >= kTargetCopy && peer / r.us >= kTargetTorch);
    missed += !met;
    table.row({r.kernel, std::to_string(r.T), bench::fmt("%.2f", r.bytes / 1e6),
               bench::fmt("%.2f", r.us), bench::fmt("%.0f", gbps), bench::fmt("%.0f", r.copy_gbps),
               bench::fmt("%.0f%%", 100 * gbps / r.copy_gbps), bench::fmt("%.0f", r.write_gbps),
               std::isnan(eager) ? "" : bench::fmt("%.1f", eager),
               std::isnan(comp) ? (std::isnan(eager) ? "" : "failed") : bench::fmt("%.1f", comp),
               std::isnan(peer)   ? ""
               : std::isnan(comp) ? bench::fmt("%.2fx eager", peer / r.us)
                                  : bench::fmt("%.2fx", peer / r.us),
               r.targeted ? ">= 70% copy, >= 1.5x compile" : "",
               r.targeted ? (met ? "met" : "MISSED") : ""});
  }
  table.print();
  bench::print_targets(missed, 0);
  return 0;
}

// compact_pages' named sweeps: the GPU test's shapes, which dsv4-replay --draw draws too.
#include "dsv4/cases/compact_pages.hpp"
#include "dsv4/kernels/compact_pages.hpp"

namespace dsv4::cases {
namespace {

namespace kc = kernels::compact_pages;
using fx::Launch;
using Point = fx::Sweep<CompactPagesShape>;

constexpr KvLayout kLayouts[] = {KvLayout::kV41, KvLayout::kV41Fp4, KvLayout::kV4,
                                 KvLayout::kV4Fnuz};
constexpr int64_t kPageSizes[] = {1, 2, 7, 64, 128, 256};
constexpr CompactOp kOps[] = {CompactOp::kQuantize, CompactOp::kDequantizeBf16,
                              CompactOp::kDequantizeF32};

// Enough pages for T distinct slots with room to spare.
int64_t pages_for(int64_t T, int64_t P) { return (T + T / 2 + 3 + P - 1) / P; }

// The slot form: T rows of `op` over pages of P tokens; V values per lane (0: the default),
// a row stride (0: 512), a kernel variant.
Point point(CompactOp op, KvLayout l, int64_t P, int64_t T, int V = 0, int64_t stride = 0,
            Launch launch = Launch::kEager, int variant = 0) {
  return {{.op = op,
           .layout = l,
           .page_size = P,
           .T = T,
           .num_pages = pages_for(T, P),
           .stride = stride,
           .values_per_lane = V,
           .variant = variant},
          launch};
}

}  // namespace

std::vector<Point> compact_pages_gpu_sweep() {
  std::vector<Point> v;
  for (KvLayout l : kLayouts)
    for (CompactOp op : kOps)
      for (int64_t P : kPageSizes)
        for (int64_t T : {int64_t(0), int64_t(1), int64_t(300), int64_t(4096)})
          if (T != 0 || P == 64) v.push_back(point(op, l, P, T));
  return v;
}

std::vector<Point> compact_pages_options_sweep() {
  std::vector<Point> v;
  for (KvLayout l : kLayouts) {
    for (int V : {8, 16, 32, 64})
      if (kc::values_per_lane_supported(l, V))
        for (int64_t T : {int64_t(1), int64_t(777), int64_t(65536)})
          v.push_back(point(CompactOp::kQuantize, l, 64, T, V));
    v.push_back(point(CompactOp::kQuantize, l, 7, 1000, 0, 576));
    v.push_back(point(CompactOp::kDequantizeBf16, l, 7, 1000, 0, 520));
    v.push_back(point(CompactOp::kDequantizeF32, l, 7, 1000, 0, 528));
    v.push_back(point(CompactOp::kDequantizeBf16, l, 64, 65536));
    for (CompactOp op : kOps) v.push_back(point(op, l, 2, 999, 0, 0, Launch::kGraph));
    // The other fp4 quantise encoder (variant 1) at every values-per-lane choice, and in a graph.
    if (l == KvLayout::kV41Fp4) {
      for (int V : {8, 16, 32, 64})
        for (int64_t T : {int64_t(777), int64_t(65536)})
          v.push_back(point(CompactOp::kQuantize, l, 64, T, V, 0, Launch::kEager, 1));
      v.push_back(point(CompactOp::kQuantize, l, 7, 1000, 0, 576, Launch::kEager, 1));
      v.push_back(point(CompactOp::kQuantize, l, 2, 999, 0, 0, Launch::kGraph, 1));
    }
    // The other fp32 dequantise kernel (variant 1): odd pages and a stride, a large batch, a graph.
    v.push_back(point(CompactOp::kDequantizeF32, l, 7, 1000, 0, 528, Launch::kEager, 1));
    v.push_back(point(CompactOp::kDequantizeF32, l, 64, 4096, 0, 0, Launch::kEager, 1));
    v.push_back(point(CompactOp::kDequantizeF32, l, 2, 999, 0, 0, Launch::kGraph, 1));
    // The other bf16 reader (variant 1; v41 has two): odd pages and a stride, a large batch, a
    // graph.
    v.push_back(point(CompactOp::kDequantizeBf16, l, 7, 1000, 0, 520, Launch::kEager, 1));
    v.push_back(point(CompactOp::kDequantizeBf16, l, 64, 4096, 0, 0, Launch::kEager, 1));
    v.push_back(point(CompactOp::kDequantizeBf16, l, 2, 999, 0, 0, Launch::kGraph, 1));
  }
  return v;
}

std::vector<Point> compact_pages_soak_sweep() {
  std::vector<Point> v;
  for (KvLayout l : kLayouts) {
    for (int lane : {8, 16, 32, 64})
      if (kc::values_per_lane_supported(l, lane))
        v.push_back({{.op = CompactOp::kQuantize,
                      .layout = l,
                      .page_size = 64,
                      .T = 300,
                      .num_pages = 8,
                      .values_per_lane = lane}});
    for (int variant = 0; variant < kc::kQuantVariants; ++variant)
      v.push_back({{.op = CompactOp::kQuantize,
                    .layout = l,
                    .page_size = 64,
                    .T = 3 * 64,
                    .num_pages = 3,
                    .variant = variant,
                    .whole_pages = true}});
    for (CompactOp op : {CompactOp::kDequantizeBf16, CompactOp::kDequantizeF32})
      for (int variant = 0; variant < kc::kDequantVariants; ++variant)
        v.push_back({{.op = op,
                      .layout = l,
                      .page_size = 64,
                      .T = 300,
                      .num_pages = 8,
                      .variant = variant}});
  }
  return v;
}

}  // namespace dsv4::cases

// compact_pages's benchmark rows and a launch's work: the page writer and reader at 65536 tokens.
#include <algorithm>

#include "dsv4/cases/compact_pages.hpp"
#include "dsv4/kernels/compact_pages.hpp"

namespace dsv4::cases {

std::vector<BenchRow> CompactPagesCase::bench_rows() {
  namespace kc = kernels::compact_pages;
  constexpr int64_t kTokens = 65536, kPage = 64;
  auto shape = [](CompactOp op, KvLayout l, int64_t T, int V, int variant) {
    return CompactPagesShape{.op = op,
                             .layout = l,
                             .page_size = kPage,
                             .T = T,
                             .num_pages = std::max<int64_t>(2 * T, 1024) / kPage,
                             .values_per_lane = V,
                             .variant = variant}
        .vars();
  };
  // The default path at 65536 tokens: >= 70% of copy and >= 1.5x torch.compile.
  const std::vector<BenchTarget> targets = {target::of_copy(0.70), target::speedup(1.5, "compile")};
  std::vector<BenchRow> rows;
  for (KvLayout l : {KvLayout::kV41, KvLayout::kV41Fp4, KvLayout::kV4, KvLayout::kV4Fnuz}) {
    rows.push_back({shape(CompactOp::kQuantize, l, 4096, 0, 0)});
    rows.push_back({shape(CompactOp::kQuantize, l, kTokens, 0, 0), targets});
    for (int V : {8, 16, 32, 64})  // the other values-per-lane choices
      if (kc::values_per_lane_supported(l, V) && V != kc::default_values_per_lane(l))
        rows.push_back({shape(CompactOp::kQuantize, l, kTokens, V, 0), {}, "values per lane"});
    if (l == KvLayout::kV41Fp4)  // the other encoder
      for (int V : {16, 32})
        rows.push_back({shape(CompactOp::kQuantize, l, kTokens, V, 1), {}, "the other encoder"});
    rows.push_back({shape(CompactOp::kDequantizeBf16, l, kTokens, 0, 0), targets});
    if (l == KvLayout::kV41)  // the per-word bf16 reader
      rows.push_back({shape(CompactOp::kDequantizeBf16, l, kTokens, 0, 1), {}, "variant 1"});
    rows.push_back({shape(CompactOp::kDequantizeF32, l, kTokens, 0, 0), targets});
    rows.push_back({shape(CompactOp::kDequantizeF32, l, kTokens, 0, 1), {}, "variant 1"});
  }
  return rows;
}

// Per slot in the pool: its row side (bf16 read by the writer, bf16 or f32 written by the
// reader), its token's data and the scale bytes a writer writes, and the slot itself.
fx::Work CompactPagesCase::work(const fx::Tensors& in, const fx::Tensors& want) const {
  const CompactPagesShape& s = shape_;
  const PageLayout L = page_layout(s.layout);
  if (s.whole_pages) return KernelCase::work(in, want);
  const std::vector<int64_t> slots = fx::input_of(in, "slots", family()).values<int64_t>();
  const int64_t n_slots = s.num_pages * s.page_size;
  double valid = 0;
  for (int64_t x : slots) valid += (x >= 0 && x < n_slots) ? 1 : 0;
  const double row_side = s.op == CompactOp::kDequantizeF32 ? 4 : 2;
  return {.bytes = valid * (512 * row_side + L.data_bytes + L.scales) + double(slots.size()) * 8};
}

}  // namespace dsv4::cases

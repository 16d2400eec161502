// split_combine kernel: one block per (batch row, head). The row's weights are computed in the
// reference's fp32 order: with S <= kStagedSplits the block's lanes take one split each (its lse
// and its two exp2 into shared memory) and every lane then sums them in split order; with more
// splits every lane computes them all itself. Then four consecutive values of o per chunk are
// merged, splits in ascending order.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "dsv4/gpu/gpu.hpp"
#include "dsv4/kernels/split_combine.hpp"
#include "split_combine_row.hpp"

namespace dsv4::kernels::split_combine {
namespace {

// The merge of row (b, h) = blockIdx.x over its n_splits[b] partials.
template <bool kStaged>
__global__ void __launch_bounds__(kThreads) combine_kernel(Args a) {
  const int64_t row = blockIdx.x;  // b * H + h
  const int64_t b = row / a.H, h = row - b * a.H;
  int64_t n = a.n_splits ? a.n_splits[b] : a.S;
  n = n < 0 ? 0 : (n > a.S ? a.S : n);
  merge_row<kStaged>(a, b, h, b * a.S, n);
}

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("split_combine::combine: " + what);
}

bool aligned(const void* p, uintptr_t n) { return (reinterpret_cast<uintptr_t>(p) % n) == 0; }

}  // namespace

void combine(const Args& a, gpu::Stream s) {
  if (a.B < 0 || a.H < 0 || a.S < 0)
    bad("B=" + std::to_string(a.B) + " S=" + std::to_string(a.S) + " H=" + std::to_string(a.H) +
        " must be >= 0");
  if (a.D <= 0 || a.D % 4 != 0)
    bad("D=" + std::to_string(a.D) + " must be a positive multiple of 4");
  if (a.B * a.H > INT32_MAX) bad("B*H=" + std::to_string(a.B * a.H) + " must be < 2^31");
  if (a.B * a.H == 0) return;
  if (a.S == 0) bad("S=0: no partials to read (pass S >= 1 and n_splits = 0 for empty rows)");
  if (!a.o || !a.lse || !a.out || !a.out_lse)
    bad(std::string(!a.o ? "o" : !a.lse ? "lse" : !a.out ? "out" : "out_lse") + " is null");
  if (!aligned(a.o, 16)) bad("o is not 16-byte aligned");
  if (!aligned(a.out, 8)) bad("out is not 8-byte aligned");
  if (a.rope.cos_sin) {
    if (a.rope.rope_dim <= 0 || a.rope.rope_dim % 2 != 0 || a.rope.rope_dim > a.D)
      bad("rope.rope_dim=" + std::to_string(a.rope.rope_dim) +
          " must be even, > 0 and <= D=" + std::to_string(a.D));
    if (a.rope.n_pos < 0) bad("rope.n_pos=" + std::to_string(a.rope.n_pos) + " must be >= 0");
    if (!a.rope.positions) bad("rope.positions is null");
    if (!a.errors) bad("errors is null (needed with rope)");
  }
  if (a.variant != 0 && a.variant != 1)
    bad("variant=" + std::to_string(a.variant) + " must be 0 (by S) or 1 (weights per lane)");
  const bool staged = a.variant == 0 && a.S <= kStagedSplits;
  gpu::launch(staged ? combine_kernel<true> : combine_kernel<false>, dim3(unsigned(a.B * a.H)),
              dim3(kThreads), 0, static_cast<hipStream_t>(s), a);
}

}  // namespace dsv4::kernels::split_combine

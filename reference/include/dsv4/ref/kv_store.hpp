// kv_store reference: the specification of the bf16 KV row scatter and of the fused RMSNorm + RoPE
// + bf16 cast + scatter that writes each new token's KV row into the pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "dsv4/ref/formats/bf16.hpp"
#include "dsv4/ref/slots.hpp"

namespace dsv4::ref::kv_store {

// Semantics. Row t of kv (T rows of `width` bf16, `width` a multiple of 8) goes to pool row loc[t]
// of a pool of `pool_rows` rows. loc[t] < 0 means "no slot" (padding): the row is skipped and
// nothing of it is read. loc[t] >= pool_rows is an error: nothing is written for that row and it is
// counted as rejected (the kernel adds it to its device error counter). Every other pool value,
// including the gaps of a strided pool, is left as it was. T = 0 does nothing. In-range locs are
// distinct in real use (the allocator hands out distinct slots, and SGLang's DSV4 store requires
// it); if several rows name one slot, the reference keeps the last of them, and the kernel leaves
// each value of that pool row equal to the same value of one of them (which one, per value, is
// unspecified: rows are written in parallel pieces).
//
// norm_rope_store computes, per row, in fp32:
//   x_j = float(kv[t, j]);  ss = sum_j x_j^2 (order below);  inv = 1 / sqrtf(ss / width + eps)
//   y_j = (x_j * inv) * weight[j]
// then interleaved RoPE on the last `rope_dim` values (pairs (2i, 2i+1) counted from the start of
// the RoPE part): r' = r*cos_i - m*sin_i, m' = r*sin_i + m*cos_i, with cos_i = cos_sin[p, 2i] and
// sin_i = cos_sin[p, 2i+1] for the row's position p. The design leaves the table open; this is the
// layout SGLang's DSV4 KV store reads: freqs_cis, complex64 [max_pos, rope_dim/2], viewed as fp32
// [max_pos, rope_dim] of (cos, sin) pairs. Then one round-to-nearest-even bf16 cast of every value,
// then the same scatter.
// A row whose position is outside [0, n_pos) is rejected like an out-of-range loc (counted, not
// written); a skipped row (loc < 0) is not checked. The sum of squares is accumulated as the kernel
// does it with L lanes per row: lane l owns the 8-value chunks c = l, l+L, l+2L, ... (in that
// order) and accumulates acc = fmaf(x, x, acc) over each chunk's 8 values from 0.0f; the L partial
// sums are then combined by a butterfly: for off = L/2, L/4, ..., 1 every lane adds the partial of
// lane (l xor off). Every product and sum is one rounded fp32 operation (no contraction except the
// fmaf written above); division and sqrt are correctly rounded.

inline constexpr size_t kRopeDim = 64;

// Rows of `width` values, consecutive rows `stride` values apart; a stride of 0 means `width`.
struct RowLayout {
  size_t width = 0;
  size_t src_stride = 0;   // between rows of kv
  size_t pool_stride = 0;  // between rows of the pool
  size_t src() const { return src_stride ? src_stride : width; }
  size_t pool() const { return pool_stride ? pool_stride : width; }
};

// What a store did with each of its T rows (slots.hpp); norm_rope_store also rejects a row whose
// position lies outside the table.
using Outcome = SlotOutcome;

// The fused variant's parameters.
struct NormRope {
  std::span<const float> weight;       // [width]
  std::span<const float> cos_sin;      // [n_pos, rope_dim]: (cos, sin) per pair
  std::span<const int64_t> positions;  // [T], the position of each row
  float eps = 1e-6f;
  size_t rope_dim = kRopeDim;  // even part of the row, a multiple of 8, <= width
  size_t n_pos() const { return rope_dim ? cos_sin.size() / rope_dim : 0; }
};

// Throws std::invalid_argument naming the field when the layout does not fit the buffers: width
// not a positive multiple of 8, a stride smaller than width or not a multiple of 8, kv smaller than
// T rows, pool smaller than pool_rows rows.
void check_layout(size_t kv_size, size_t T, size_t pool_size, size_t pool_rows,
                  const RowLayout& layout);

// The scatter, exactly. T = loc.size().
Outcome scatter_rows(std::span<const bf16> kv, std::span<const int64_t> loc, std::span<bf16> pool,
                     size_t pool_rows, const RowLayout& layout);

// One row in the kernel's fp32 operation order with `lanes` lanes per row (a power of two, 1..64):
// out[width] receives the values before the bf16 cast. The position must be inside the table.
void norm_rope_row_f32(const bf16* x, size_t width, const NormRope& p, int64_t pos, size_t lanes,
                       float* out);

// The same row in fp64 (the mathematical value the stored bf16 approximates).
void norm_rope_row_f64(const bf16* x, size_t width, const NormRope& p, int64_t pos, double* out);

// The fused store in the kernel's fp32 order (bitwise specification of the kernel).
Outcome norm_rope_store(std::span<const bf16> kv, std::span<const int64_t> loc,
                        std::span<bf16> pool, size_t pool_rows, const RowLayout& layout,
                        const NormRope& p, size_t lanes);

// fp64 rows [T, width] of the fused computation (before any cast); rows whose position is outside
// the table are NaN.
std::vector<double> norm_rope_rows_f64(std::span<const bf16> kv, size_t T, const RowLayout& layout,
                                       const NormRope& p);

// The (cos, sin) table of plain RoPE in the layout above: theta_i(p) = p * base^(-2i / rope_dim),
// computed in fp64 and rounded to fp32. [n_pos, rope_dim].
std::vector<float> rope_table(size_t n_pos, size_t rope_dim, double base = 10000.0);

// Agreement with fp64, derived (not stated). u = 2^-24 is fp32's unit roundoff, b = 2^-8 bf16's.
// Element j of a row, with fp64 value f_j, and n = width/2 + 10:
//   fp32-order value v_j:   |v_j - f_j| <= e_j = n*u/(1 - n*u) * m_j
//   stored bf16 s_j:        |s_j - f_j| <= b*(|f_j| + e_j) + e_j + 2^-134
// where m_j = |f_j| outside the RoPE part and, inside it, the magnitudes of the two products the
// value sums (|r*c| + |m*s| for r' = r*c - m*s, |r*s| + |m*c| for m' = r*s + m*c; fp64).
// Why n: the sum of squares is a chain of at most width fmaf steps plus log2(lanes) <= 6 butterfly
// additions (relative error <= (width + 6)u); /width and +eps add 2u; sqrt halves the relative
// error and adds u, the division adds u: inv is within (width/2 + 6)u; the two products of y add
// 2u; RoPE's two products and its sum add at most 2u relative to |r*c| + |m*s| (the cancellation
// is why m_j is not |f_j| there). RNE to bf16 moves a value by at most b of itself (2^-134 covers
// bf16's subnormal range). The fp32 bound is a worst case; the stored bound is reached to within
// a factor of about two by ordinary inputs (RNE errors near half a bf16 ulp), which the GPU test
// shows on every run (the largest |s - f| / bound is recorded and must exceed 1/2).
// Whether a row's sum of squares ss (exact, in fp64) overflows fp32 when summed in fp32: in every
// order (kAlways: the fp64 reference then takes inv = 0, as the fp32 order does), in none, or
// depending on the order (within the fp32 sum's relative error of FLT_MAX: the bound admits both).
enum class Overflow { kNever, kOrderDependent, kAlways };
Overflow ss_overflows_f32(double ss, size_t width);

struct Fp64Bounds {
  std::vector<double> value;   // fp64 rows [T, width] (NaN for rows whose position is outside)
  std::vector<double> f32;     // e_j
  std::vector<double> stored;  // the stored bound
};
Fp64Bounds norm_rope_bounds(std::span<const bf16> kv, size_t T, const RowLayout& layout,
                            const NormRope& p);

// Special rows, as the fp32 order above computes them (the fp64 reference: the same, with NaN for
// NaN). A row holding a NaN: ss is NaN, every stored value of the row is a NaN (sign and payload
// are the platform's: a comparison treats all NaNs as equal). A row holding an infinity, or whose
// sum of squares overflows fp32 (|x| above about 2^63 / sqrt(width)): ss = +inf, inv = 0, every
// finite value stores +-0 (signs by IEEE rules), an infinite one NaN, and in the RoPE part a NaN
// makes its pair NaN. An all-zero row: ss = 0, inv = 1/sqrtf(eps), every value stores +-0.
// Subnormal inputs are not flushed to zero: their squares underflow to 0 in ss, but they are
// scaled like any value (a row of subnormals stores x/sqrtf(eps)*w, normal numbers).
}  // namespace dsv4::ref::kv_store

// kv_store reference: row scatter, and the fused RMSNorm + RoPE + bf16 store in fp32 (the
// kernel's order) and fp64.
#include "dsv4/ref/kv_store.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace dsv4::ref::kv_store {
namespace {

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("kv_store: " + what); }

void check_norm_rope(const NormRope& p, size_t T, size_t width) {
  if (p.rope_dim == 0 || p.rope_dim % 8 != 0 || p.rope_dim > width)
    bad("rope_dim=" + std::to_string(p.rope_dim) +
        " must be a positive multiple of 8 <= width=" + std::to_string(width));
  if (p.weight.size() < width)
    bad("weight has " + std::to_string(p.weight.size()) +
        " values, width=" + std::to_string(width));
  if (p.cos_sin.size() % p.rope_dim != 0)
    bad("cos_sin has " + std::to_string(p.cos_sin.size()) +
        " values, not a multiple of rope_dim=" + std::to_string(p.rope_dim));
  if (p.positions.size() < T)
    bad("positions has " + std::to_string(p.positions.size()) + " entries, T=" + std::to_string(T));
}

void check_lanes(size_t lanes) {
  if (lanes == 0 || lanes > 64 || (lanes & (lanes - 1)) != 0)
    bad("lanes=" + std::to_string(lanes) + " must be a power of two in [1, 64]");
}

bool position_ok(const NormRope& p, int64_t pos) { return pos >= 0 && uint64_t(pos) < p.n_pos(); }

}  // namespace

void check_layout(size_t kv_size, size_t T, size_t pool_size, size_t pool_rows,
                  const RowLayout& layout) {
  const size_t w = layout.width;
  if (w == 0 || w % 8 != 0) bad("width=" + std::to_string(w) + " must be a positive multiple of 8");
  if (layout.src() < w || layout.src() % 8 != 0)
    bad("src_stride=" + std::to_string(layout.src_stride) +
        " must be 0 or a multiple of 8 >= width=" + std::to_string(w));
  if (layout.pool() < w || layout.pool() % 8 != 0)
    bad("pool_stride=" + std::to_string(layout.pool_stride) +
        " must be 0 or a multiple of 8 >= width=" + std::to_string(w));
  // The last row only needs `width` values, not a whole stride.
  if (T > 0 && kv_size < (T - 1) * layout.src() + w)
    bad("kv has " + std::to_string(kv_size) + " values, too few for T=" + std::to_string(T) +
        " rows of stride " + std::to_string(layout.src()));
  if (pool_rows > 0 && pool_size < (pool_rows - 1) * layout.pool() + w)
    bad("pool has " + std::to_string(pool_size) + " values, too few for pool_rows=" +
        std::to_string(pool_rows) + " rows of stride " + std::to_string(layout.pool()));
  if (pool_rows > size_t(std::numeric_limits<int64_t>::max()))
    bad("pool_rows=" + std::to_string(pool_rows) + " does not fit int64");
}

Outcome scatter_rows(std::span<const bf16> kv, std::span<const int64_t> loc, std::span<bf16> pool,
                     size_t pool_rows, const RowLayout& layout) {
  const size_t T = loc.size();
  check_layout(kv.size(), T, pool.size(), pool_rows, layout);
  return for_each_slot(loc, pool_rows, [&](size_t t, size_t dst) {
    const bf16* src = kv.data() + t * layout.src();
    bf16* row = pool.data() + dst * layout.pool();
    for (size_t j = 0; j < layout.width; ++j) row[j] = src[j];
    return true;
  });
}

void norm_rope_row_f32(const bf16* x, size_t width, const NormRope& p, int64_t pos, size_t lanes,
                       float* out) {
  check_lanes(lanes);
  check_norm_rope(p, 0, width);
  if (!position_ok(p, pos))
    bad("position " + std::to_string(pos) + " outside the table of " + std::to_string(p.n_pos()));
  // Sum of squares: per-lane fmaf accumulation over strided chunks, then the xor butterfly.
  const size_t chunks = width / 8;
  float part[64];
  for (size_t l = 0; l < lanes; ++l) {
    float acc = 0.0f;
    for (size_t c = l; c < chunks; c += lanes)
      for (size_t e = 0; e < 8; ++e) {
        const float v = bf16_to_f32(x[8 * c + e]);
        acc = std::fmaf(v, v, acc);
      }
    part[l] = acc;
  }
  for (size_t off = lanes / 2; off > 0; off /= 2) {
    float next[64];
    for (size_t l = 0; l < lanes; ++l) next[l] = part[l] + part[l ^ off];
    for (size_t l = 0; l < lanes; ++l) part[l] = next[l];
  }
  const float ss = part[0];
  const float mean = ss / float(width);
  const float inv = 1.0f / std::sqrt(mean + p.eps);
  for (size_t j = 0; j < width; ++j) out[j] = (bf16_to_f32(x[j]) * inv) * p.weight[j];

  const size_t base = width - p.rope_dim, half = p.rope_dim / 2;
  const float* cs = p.cos_sin.data() + size_t(pos) * p.rope_dim;
  for (size_t i = 0; i < half; ++i) {
    const float r = out[base + 2 * i], m = out[base + 2 * i + 1];
    const float c = cs[2 * i], s = cs[2 * i + 1];
    out[base + 2 * i] = r * c - m * s;
    out[base + 2 * i + 1] = r * s + m * c;
  }
}

Overflow ss_overflows_f32(double ss, size_t width) {
  // The fp32 sum is within a relative (width + 6)u of ss (ref/kv_store.hpp, "Why n"); it rounds
  // to +inf past FLT_MAX plus half an ulp.
  const double g = (double(width) + 6) * std::ldexp(1.0, -24);
  const double limit = double(std::numeric_limits<float>::max()) + std::ldexp(1.0, 103);
  if (!(ss < std::numeric_limits<double>::infinity())) return Overflow::kAlways;
  if (ss * (1 - g) > limit) return Overflow::kAlways;
  if (ss * (1 + g) < limit) return Overflow::kNever;
  return Overflow::kOrderDependent;
}

void norm_rope_row_f64(const bf16* x, size_t width, const NormRope& p, int64_t pos, double* out) {
  check_norm_rope(p, 0, width);
  if (!position_ok(p, pos))
    bad("position " + std::to_string(pos) + " outside the table of " + std::to_string(p.n_pos()));
  double ss = 0;
  for (size_t j = 0; j < width; ++j) {
    const double v = bf16_to_f32(x[j]);
    ss += v * v;
  }
  // A sum of squares that overflows fp32 in every order gives inv = 0 there, as in the fp32
  // order (the rule of the special rows, ref/kv_store.hpp): the fp64 row follows it.
  const double inv = ss_overflows_f32(ss, width) == Overflow::kAlways
                         ? 0.0
                         : 1.0 / std::sqrt(ss / double(width) + double(p.eps));
  for (size_t j = 0; j < width; ++j) out[j] = double(bf16_to_f32(x[j])) * inv * double(p.weight[j]);
  const size_t base = width - p.rope_dim, half = p.rope_dim / 2;
  const float* cs = p.cos_sin.data() + size_t(pos) * p.rope_dim;
  for (size_t i = 0; i < half; ++i) {
    const double r = out[base + 2 * i], m = out[base + 2 * i + 1];
    const double c = cs[2 * i], s = cs[2 * i + 1];
    out[base + 2 * i] = r * c - m * s;
    out[base + 2 * i + 1] = r * s + m * c;
  }
}

Outcome norm_rope_store(std::span<const bf16> kv, std::span<const int64_t> loc,
                        std::span<bf16> pool, size_t pool_rows, const RowLayout& layout,
                        const NormRope& p, size_t lanes) {
  const size_t T = loc.size();
  check_layout(kv.size(), T, pool.size(), pool_rows, layout);
  check_norm_rope(p, T, layout.width);
  check_lanes(lanes);
  std::vector<float> row(layout.width);
  return for_each_slot(loc, pool_rows, [&](size_t t, size_t dst) {
    if (!position_ok(p, p.positions[t])) return false;
    norm_rope_row_f32(kv.data() + t * layout.src(), layout.width, p, p.positions[t], lanes,
                      row.data());
    bf16* dst_row = pool.data() + dst * layout.pool();
    for (size_t j = 0; j < layout.width; ++j) dst_row[j] = f32_to_bf16(row[j]);
    return true;
  });
}

std::vector<double> norm_rope_rows_f64(std::span<const bf16> kv, size_t T, const RowLayout& layout,
                                       const NormRope& p) {
  check_layout(kv.size(), T, 0, 0, layout);
  check_norm_rope(p, T, layout.width);
  std::vector<double> out(T * layout.width, std::numeric_limits<double>::quiet_NaN());
  for (size_t t = 0; t < T; ++t)
    if (position_ok(p, p.positions[t]))
      norm_rope_row_f64(kv.data() + t * layout.src(), layout.width, p, p.positions[t],
                        out.data() + t * layout.width);
  return out;
}

Fp64Bounds norm_rope_bounds(std::span<const bf16> kv, size_t T, const RowLayout& layout,
                            const NormRope& p) {
  Fp64Bounds b;
  b.value = norm_rope_rows_f64(kv, T, layout, p);
  const size_t W = layout.width, base = W - p.rope_dim;
  const double n = double(W) / 2 + 10, u = std::ldexp(1.0, -24);
  const double gamma = n * u / (1 - n * u), bf = std::ldexp(1.0, -8), tiny = std::ldexp(1.0, -134);
  b.f32.assign(b.value.size(), std::numeric_limits<double>::quiet_NaN());
  b.stored = b.f32;
  std::vector<double> y(W);
  for (size_t t = 0; t < T; ++t) {
    if (!position_ok(p, p.positions[t])) continue;
    // The pre-RoPE values, for the pair magnitudes |r*c| + |m*s|.
    const bf16* x = kv.data() + t * layout.src();
    double ss = 0;
    for (size_t j = 0; j < W; ++j) ss += double(bf16_to_f32(x[j])) * double(bf16_to_f32(x[j]));
    const Overflow over = ss_overflows_f32(ss, W);
    const double inv =
        over == Overflow::kAlways ? 0.0 : 1.0 / std::sqrt(ss / double(W) + double(p.eps));
    for (size_t j = 0; j < W; ++j) y[j] = double(bf16_to_f32(x[j])) * inv * double(p.weight[j]);
    const float* cs = p.cos_sin.data() + size_t(p.positions[t]) * p.rope_dim;
    for (size_t j = 0; j < W; ++j) {
      const double f = b.value[t * W + j];
      double m = std::fabs(f);
      if (j >= base) {
        const size_t i = (j - base) / 2, r = base + 2 * i;
        const double c = cs[2 * i], sn = cs[2 * i + 1];
        m = j == r ? std::fabs(y[r] * c) + std::fabs(y[r + 1] * sn)   // r*c - m*s
                   : std::fabs(y[r] * sn) + std::fabs(y[r + 1] * c);  // r*s + m*c
      }
      const double e = gamma * m;
      b.f32[t * W + j] = e;
      // Where the fp32 sum may or may not overflow, depending on its order, both outcomes
      // (the fp64 value and +-0) are within the bound.
      b.stored[t * W + j] = bf * (std::fabs(f) + e) + e + tiny +
                            (over == Overflow::kOrderDependent ? std::fabs(f) : 0);
    }
  }
  return b;
}

std::vector<float> rope_table(size_t n_pos, size_t rope_dim, double base) {
  if (rope_dim == 0 || rope_dim % 2 != 0)
    bad("rope_dim=" + std::to_string(rope_dim) + " must be a positive even number");
  std::vector<float> t(n_pos * rope_dim);
  for (size_t p = 0; p < n_pos; ++p)
    for (size_t i = 0; i < rope_dim / 2; ++i) {
      const double theta = double(p) * std::pow(base, -double(2 * i) / double(rope_dim));
      t[p * rope_dim + 2 * i] = float(std::cos(theta));
      t[p * rope_dim + 2 * i + 1] = float(std::sin(theta));
    }
  return t;
}

}  // namespace dsv4::ref::kv_store

// split_combine reference: the merge of split-KV partials in the kernel's fp32 order and in fp64.
#include "dsv4/ref/split_combine.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "dsv4/ref/fp32_math.hpp"

namespace dsv4::ref::split_combine {
namespace {

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("split_combine: " + what);
}

void check_size(const char* field, size_t got, size_t want, const char* shape) {
  if (got != want)
    bad(std::string(field) + " has " + std::to_string(got) + " values, " + shape + " needs " +
        std::to_string(want));
}

size_t splits_of(const Inputs& in, size_t b) {
  return size_t(std::clamp<int64_t>(in.n_splits[b], 0, int64_t(in.shape.S)));
}

bool position_ok(const Rope& r, int64_t p) { return p >= 0 && uint64_t(p) < r.n_pos(); }

}  // namespace

void check(const Inputs& in) {
  const Shape& s = in.shape;
  if (s.D == 0 || s.D % 4 != 0)
    bad("D=" + std::to_string(s.D) + " must be a positive multiple of 4");
  if (in.un) {
    check_size("acc", in.un->acc.size(), s.B * s.S * s.H * s.D, "[B, S, H, D]");
    check_size("m", in.un->m.size(), s.B * s.S * s.H, "[B, S, H]");
    check_size("l", in.un->l.size(), s.B * s.S * s.H, "[B, S, H]");
  } else {
    check_size("o", in.o.size(), s.B * s.S * s.H * s.D, "[B, S, H, D]");
    check_size("lse", in.lse.size(), s.B * s.S * s.H, "[B, S, H]");
  }
  check_size("n_splits", in.n_splits.size(), s.B, "[B]");
  if (!in.sink.empty()) check_size("sink", in.sink.size(), s.H, "[H]");
  if (in.rope) {
    const Rope& r = *in.rope;
    if (r.rope_dim == 0 || r.rope_dim % 2 != 0 || r.rope_dim > s.D)
      bad("rope_dim=" + std::to_string(r.rope_dim) +
          " must be even, > 0 and <= D=" + std::to_string(s.D));
    if (r.cos_sin.size() % r.rope_dim != 0)
      bad("rope cos_sin has " + std::to_string(r.cos_sin.size()) +
          " values, not a multiple of rope_dim=" + std::to_string(r.rope_dim));
    check_size("rope positions", r.positions.size(), s.B, "[B]");
  }
}

namespace {

// The inverse RoPE of a row's bf16 tail, in SGLang's order.
void rotate_tail(const Rope& rp, int64_t pos, bf16* out, size_t D) {
  const float* cs = rp.cos_sin.data() + size_t(pos) * rp.rope_dim;
  bf16* tail = out + (D - rp.rope_dim);
  for (size_t i = 0; i < rp.rope_dim; i += 2) {
    const float x0 = bf16_to_f32(tail[i]), x1 = bf16_to_f32(tail[i + 1]);
    const float c = cs[i], sn = cs[i + 1];
    tail[i] = f32m::to_bf16_canonical(std::fmaf(x0, c, x1 * sn));
    tail[i + 1] = f32m::to_bf16_canonical(std::fmaf(x1, c, -(x0 * sn)));
  }
}

// SGLang's partials, merged in the HIP reducer's fp32 order; returns false for an empty row.
bool merge_unnormalised(const Inputs& in, size_t b, size_t h, size_t n, float* lse_out, bf16* out,
                        std::vector<float>& acc) {
  const auto [B, S, H, D] = in.shape;
  const Unnormalised& u = *in.un;
  auto at = [&](size_t s) { return (b * S + s) * H + h; };
  auto m2_at = [&](size_t s) { return u.m2 ? u.m[at(s)] : u.m[at(s)] * f32m::kLog2e; };
  auto empty = [&](size_t s) { return !(u.l[at(s)] != 0.0f) || m2_at(s) == -f32m::inf(); };
  float M = -f32m::inf();
  for (size_t s = 0; s < n; ++s)
    if (!empty(s)) M = std::fmax(M, m2_at(s));
  if (M == -f32m::inf()) return false;
  float sum = 0.0f;
  for (size_t s = 0; s < n; ++s)
    if (!empty(s)) sum = sum + u.l[at(s)] * f32m::exp2(m2_at(s) - M);
  *lse_out = (f32m::log2(sum) + M) / f32m::kLog2e;
  const float sink = in.sink.empty() ? -f32m::inf() : in.sink[h];
  if (sink == f32m::inf()) return true;  // zeros
  const float sk = sink * f32m::kLog2e;
  const float ms = std::fmax(M, sk);
  float den = 0.0f;
  std::fill(acc.begin(), acc.end(), 0.0f);
  for (size_t s = 0; s < n; ++s) {
    if (empty(s)) continue;
    const float w = f32m::exp2(m2_at(s) - ms);
    den = std::fmaf(w, u.l[at(s)], den);
    const float* a = u.acc.data() + at(s) * D;
    for (size_t d = 0; d < D; ++d) acc[d] = std::fmaf(w, a[d], acc[d]);
  }
  den = den + f32m::exp2(sk - ms);
  for (size_t d = 0; d < D; ++d) out[d] = f32m::to_bf16_canonical(acc[d] / den);
  return true;
}

}  // namespace

Outputs combine_f32(const Inputs& in) {
  check(in);
  const auto [B, S, H, D] = in.shape;
  Outputs r;
  r.out.assign(B * H * D, bf16{0});
  r.lse.assign(B * H, 0.0f);
  std::vector<float> acc(D);
  for (size_t b = 0; b < B; ++b) {
    const size_t n = splits_of(in, b);
    const bool rope_ok = in.rope && position_ok(*in.rope, in.rope->positions[b]);
    if (in.rope && !rope_ok) ++r.errors;
    for (size_t h = 0; h < H; ++h) {
      bf16* out = r.out.data() + (b * H + h) * D;
      // Whether the row computed values (else it is zeros: no key, or a +inf sink).
      bool computed = false;
      if (in.un) {
        if (!merge_unnormalised(in, b, h, n, &r.lse[b * H + h], out, acc)) {
          r.lse[b * H + h] = f32m::inf();
        } else {
          const float sink = in.sink.empty() ? -f32m::inf() : in.sink[h];
          computed = sink != f32m::inf();
        }
      } else {
        auto lse_at = [&](size_t s) { return in.lse[(b * S + s) * H + h]; };
        float m = -f32m::inf();
        for (size_t s = 0; s < n; ++s) m = std::fmax(m, lse_at(s));
        if (m == -f32m::inf()) {
          r.lse[b * H + h] = f32m::inf();
        } else {
          float sum = 0.0f;
          for (size_t s = 0; s < n; ++s) sum = sum + f32m::exp2(lse_at(s) - m);
          r.lse[b * H + h] = (f32m::log2(sum) + m) / f32m::kLog2e;
          const float sink = in.sink.empty() ? -f32m::inf() : in.sink[h];
          if (sink != f32m::inf()) {
            computed = true;
            const float sk = sink * f32m::kLog2e;
            const float ms = std::fmax(m, sk);
            float den = 0.0f;
            std::fill(acc.begin(), acc.end(), 0.0f);
            for (size_t s = 0; s < n; ++s) {
              const float a = f32m::exp2(lse_at(s) - ms);
              if (a == 0.0f) continue;  // contributes nothing, whatever its o holds
              den = den + a;
              const float* o = in.o.data() + ((b * S + s) * H + h) * D;
              for (size_t d = 0; d < D; ++d) acc[d] = acc[d] + a * o[d];
            }
            den = den + f32m::exp2(sk - ms);
            for (size_t d = 0; d < D; ++d) out[d] = f32m::to_bf16_canonical(acc[d] / den);
          }
        }
      }
      if (rope_ok && (computed || in.rotate_empty))
        rotate_tail(*in.rope, in.rope->positions[b], out, D);
    }
  }
  return r;
}

void inverse_rope_f64(const float* cs, size_t rope_dim, double* out, size_t D) {
  double* tail = out + (D - rope_dim);
  for (size_t i = 0; i < rope_dim; i += 2) {
    const double x0 = tail[i], x1 = tail[i + 1], c = cs[i], sn = cs[i + 1];
    tail[i] = x0 * c + x1 * sn;
    tail[i + 1] = x1 * c - x0 * sn;
  }
}

OutputsF64 combine_f64(const Inputs& in) {
  check(in);
  const auto [B, S, H, D] = in.shape;
  const double kInf = std::numeric_limits<double>::infinity();
  OutputsF64 r;
  r.out.assign(B * H * D, 0.0);
  r.lse.assign(B * H, 0.0);
  for (size_t b = 0; b < B; ++b) {
    const size_t n = splits_of(in, b);
    const bool rope_ok = in.rope && position_ok(*in.rope, in.rope->positions[b]);
    if (in.rope && !rope_ok) ++r.errors;
    for (size_t h = 0; h < H; ++h) {
      // The split's base-2 lse and normalised value; SGLang's partials converted exactly.
      auto at = [&](size_t s) { return (b * S + s) * H + h; };
      auto lse_at = [&](size_t s) -> double {
        if (!in.un) return double(in.lse[at(s)]);
        const double l = in.un->l[at(s)], m = in.un->m[at(s)];
        if (!(l != 0) || m == -kInf) return -kInf;
        return (in.un->m2 ? m : m / std::log(2.0)) + std::log2(l);
      };
      auto o_at = [&](size_t s, size_t d) -> double {
        if (!in.un) return double(in.o[at(s) * D + d]);
        return double(in.un->acc[at(s) * D + d]) / double(in.un->l[at(s)]);
      };
      double m = -kInf;
      for (size_t s = 0; s < n; ++s)
        if (!std::isnan(lse_at(s))) m = std::max(m, lse_at(s));
      double* out = r.out.data() + (b * H + h) * D;
      if (m == -kInf) {
        r.lse[b * H + h] = kInf;
        continue;
      }
      // Natural-log scores x_s = lse_s * ln 2 (an empty split contributes nothing).
      double sum = 0;
      for (size_t s = 0; s < n; ++s) sum += std::exp2(lse_at(s) - m);
      r.lse[b * H + h] = (std::log2(sum) + m) * std::log(2.0);
      const double sink = in.sink.empty() ? -kInf : double(in.sink[h]);
      if (sink == kInf) continue;
      const double sk = sink / std::log(2.0);
      const double ms = std::max(m, sk);
      double den = std::exp2(sk - ms);
      for (size_t s = 0; s < n; ++s) den += std::exp2(lse_at(s) - ms);
      for (size_t s = 0; s < n; ++s) {
        const double a = std::exp2(lse_at(s) - ms) / den;
        if (a == 0) continue;
        for (size_t d = 0; d < D; ++d) out[d] += a * o_at(s, d);
      }
      if (rope_ok) {
        const Rope& rp = *in.rope;
        inverse_rope_f64(rp.cos_sin.data() + size_t(rp.positions[b]) * rp.rope_dim, rp.rope_dim,
                         out, D);
      }
    }
  }
  return r;
}

}  // namespace dsv4::ref::split_combine

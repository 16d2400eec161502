// split_combine reference: the specification of the merge of split-KV attention partials (each
// normalised by its own sum, with a base-2 lse) into one bf16 output and a natural-log lse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "dsv4/ref/formats/bf16.hpp"

namespace dsv4::ref::split_combine {

// Semantics (DESIGN.md section 5, "split_combine"; SGLang's split reducers for the DSV4 decode, see
// the notes at the end). Row (b, h) has n = clamp(n_splits[b], 0, S) partials s = 0..n-1:
// o[b,s,h,:] (D fp32 values, normalised by the split's own sum) and lse[b,s,h] = log2 of the
// split's sum of exp2-scaled scores (-inf: an empty split). Partials s >= n are never read. With
// the scores of all splits together, the output is sum e^x v / (sum e^x + e^sink):
//   m = max_s lse_s (-inf when n = 0 or every split is empty: the row is empty)
//   empty row: out = 0, lse_out = +inf, whatever the sink.
//   lse_out = (log2(sum_s exp2(lse_s - m)) + m) / log2(e)   (natural log, the sink excluded)
//   sink (natural-log units, per head): +inf gives out = 0 (lse_out as above); -inf or no sink
//   adds nothing; otherwise ms = max(m, sink*log2e) and the sink adds exp2(sink*log2e - ms) to
//   the denominator.
//   out[d] = bf16((sum_s a_s * o_s[d]) / den),  a_s = exp2(lse_s - ms),  den = sum_s a_s (+ sink)
// (ms = m without a finite sink). The quotient form keeps SGLang's order: accumulate, then divide.
// A split whose weight a_s is 0 (lse -inf, or 2^(lse_s - ms) below the fp32 range) contributes
// nothing, whatever its o holds (an empty split's o may be anything, NaN included).
// Optional inverse RoPE of the last rope_dim values at the row's position p (table cos_sin
// [n_pos, rope_dim] of (cos, sin) pairs, SGLang's freqs_cis viewed as fp32, as in kv_store):
// SGLang rotates the bf16 output, so for each pair (x0, x1) = (out[2i], out[2i+1]) of the tail,
//   out[2i] = bf16(fmaf(x0, c, x1 * s)),  out[2i+1] = bf16(fmaf(x1, c, -(x0 * s)))
// with c = cos_sin[p, 2i], s = cos_sin[p, 2i+1]. A position outside [0, n_pos) is an error: the
// row's tail stays unrotated and the row is counted (once per batch row b).
//
// fp32 operation order of the kernel (the bitwise specification): m = fmaxf over s ascending
// (fmaxf skips NaN); sum = sum of exp2(lse_s - m) in s order from 0.0f; G = log2(sum) + m;
// lse_out = G / log2e (fp32 constants, f32m::kLog2e); sink term sk = sink * log2e; ms = fmaxf(m,
// sk); den = sum of a_s in s order from 0.0f, then den + exp2(sk - ms); acc[d] = acc[d] + a_s *
// o_s[d] in s order from 0.0f (a split with a_s = 0 skipped); out = bf16(acc / den) with NaN
// written as 0x7fc0. exp2 and log2 are dsv4::f32m's (fp32_math.hpp), identical on host and device.
//
// SGLang's HIP reducer (aiter_sparse_split_reduce) writes NaN for an empty row (exp2(-inf - -inf))
// and for a +inf sink (exp2(inf - inf)); its SM100 _combine and its tests write 0, the rule here.
// SGLang's reducers return no lse: out_lse is this project's extension.
//
// SGLang notes. compact_attention_hip.py (V4.1 pages on HIP) and aiter_sparse_decode_reduce.py
// keep unnormalised partials (m, l, acc) and add the sink as exp2(sink*log2e - m_final) with
// m_final = max(m, sink*log2e), then out = acc / l; the inverse RoPE runs on the bf16 output
// (fmaf(x, cos, swapped * sin), swapped = (x1, -x0)) and rounds to bf16 again. Here the partials
// are the FlashMLA form (normalised o, base-2 lse); the sink and RoPE rules are
// SGLang's. SGLang divides 0/0 on an empty row without a sink; here an empty row is zeros and lse
// +inf, as DESIGN.md (and FlashMLA) define it.

struct Shape {
  size_t B = 0, S = 0, H = 0, D = 0;
};

struct Rope {
  std::span<const float> cos_sin;      // [n_pos, rope_dim]
  std::span<const int64_t> positions;  // [B]
  size_t rope_dim = 64;                // even, <= D
  size_t n_pos() const { return rope_dim ? cos_sin.size() / rope_dim : 0; }
};

// SGLang's unnormalised partials, the layout its split kernels store: acc [B, S, H, D] = sum_j
// p_j v_j, m [B, S, H] the split's running maximum, l [B, S, H] = sum_j p_j, p_j = base^(x_j - m)
// with base 2 and m in the base-2 exponent domain (m2 = true: compact_attention_hip.py and
// aiter_sparse_decode_reduce.py) or base e and m natural (m2 = false: decode_attention_sm100.py's
// _combine). A split is empty when l = 0 or m = -inf (its acc is never read). They stand for the
// normalised form o = acc / l, lse = m + log2(l) (base 2; natural m converted by log2(e)).
// fp32 order of the merge (the HIP reducer's, bit for bit; SM100's natural exp is not copied):
// m2_s = m2 ? m_s : m_s * log2e; M = fmaxf over the non-empty splits; sum = sum of l_s *
// exp2(m2_s - M) from 0.0f in s order (the out_lse extension: lse_out = (log2(sum) + M) /
// log2e); ms = fmaxf(M, sink * log2e); w_s = exp2(m2_s - ms); den = fmaf(w_s, l_s, den) and
// acc[d] = fmaf(w_s, acc_s[d], acc[d]) in s order from 0.0f (empty splits skipped); den = den +
// exp2(sink * log2e - ms); out = bf16(acc / den).
struct Unnormalised {
  std::span<const float> acc;  // [B, S, H, D]
  std::span<const float> m;    // [B, S, H]
  std::span<const float> l;    // [B, S, H]
  bool m2 = true;              // m in the base-2 domain (HIP), else natural (SM100)
};

struct Inputs {
  Shape shape;
  std::span<const float> o;           // [B, S, H, D] (empty with `un`)
  std::span<const float> lse;         // [B, S, H], base 2 (empty with `un`)
  std::span<const int32_t> n_splits;  // [B]
  std::span<const float> sink;        // [H] or empty (no sink)
  const Rope* rope = nullptr;         // null: no inverse RoPE
  const Unnormalised* un = nullptr;   // SGLang's partials in place of o and lse
  // A row with no key or a +inf sink is 0; with rotate_empty its zeros go through the inverse
  // RoPE like any row, as SGLang rotates them (a zero times a negative cos or sin gives -0),
  // else they stay +0 (the project's kernel).
  bool rotate_empty = false;
};

struct Outputs {
  std::vector<bf16> out;   // [B, H, D]
  std::vector<float> lse;  // [B, H], natural log
  int64_t errors = 0;      // batch rows whose position is outside the table
};

// Throws std::invalid_argument naming the field when a size does not match the shape.
void check(const Inputs& in);

// The kernel's fp32 order, bit for bit.
Outputs combine_f32(const Inputs& in);

// The same mathematics in fp64 (exp2/log2 of <cmath>, no intermediate rounding, the inverse RoPE
// on the unrounded value): out [B, H, D] and lse [B, H] as doubles.
struct OutputsF64 {
  std::vector<double> out, lse;
  int64_t errors = 0;
};
OutputsF64 combine_f64(const Inputs& in);

// The inverse RoPE of combine_f64 (and of the sparse_decode reference's fp64 output): the last
// `rope_dim` values of `out` [D] rotated back by one position's (cos, sin) pairs `cs` [rope_dim],
// for each pair (x0, x1) with c = cs[2i], s = cs[2i+1]: x0 * c + x1 * s, x1 * c - x0 * s, in fp64
// with nothing rounded. rope_dim is even and <= D (the callers check it).
void inverse_rope_f64(const float* cs, size_t rope_dim, double* out, size_t D);

// Stated agreement of combine_f32 with combine_f64, for partial values of order one and any S the
// kernel takes (the GPU sweep reaches S = 300):
// out: |got - want| <= kOutAtolOfMax * max|want of the case| + kOutRtol * |want|;
// lse: |got - want| <= kLseAtol + kLseRtol * |want|.
// Derivation. Each exp2 / log2 errs by at most 4 ulp (measured bound 2 ulp, test_split_combine);
// den and acc are sums of S positive (den) or mixed (acc) terms: relative error of den <= (S + 4)
// 2^-24 and acc errs by <= (S + 4) 2^-24 * sum |a_s o_s|, i.e. with |o| <= 1 and a_s/den <= 1
// about 4e-6 of max|o|. The bf16 cast adds 2^-9 relative (the dominant term, rtol 2^-8 with room).
// The inverse RoPE rotates values already rounded to bf16 (errors up to 2^-9 of each of the pair)
// and rounds again: |err| <= 2^-9 (|x0| + |x1|) + 2^-9 |rotated| <= 2^-7.3 * max|value|, hence the
// absolute term 2^-7 of the case's largest value. lse: |G| errs by 4 ulp of log2(sum) + 1 ulp of
// m + (S + 4) 2^-24 / ln 2, then one division: below 1e-5 for |lse| < 64 while S <= 64, and
// lse_atol(S) adds the sum's (S + 4) 2^-24 / ln 2 beyond that (out's bound holds for S < 2^15:
// the bf16 term dominates).
inline constexpr double kOutAtolOfMax = 1.0 / 128, kOutRtol = 1.0 / 256;
inline constexpr double kLseAtol = 1e-5, kLseRtol = 1e-6;
// kLseAtol, widened by the sum's rounding of S terms past S = 64.
inline double lse_atol(int64_t S) {
  constexpr double kSumUlpOverLn2 = 5.9604644775390625e-08 / 0.6931471805599453;  // 2^-24 / ln 2
  return S <= 64 ? kLseAtol : kLseAtol + double(S + 4) * kSumUlpOverLn2;
}

}  // namespace dsv4::ref::split_combine

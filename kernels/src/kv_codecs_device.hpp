// The e4m3fn page codecs (v41, v4) and the v41_fp4 reader as the kernels run them: through the
// device's fp8 and bf16 conversions where it has them (dsv4/gpu/fp8.hpp), the bf16 readers of v41
// and v41_fp4 through bf16 multiplies where the device has those (kv_tiles.hpp's *_scaled_words),
// else the shared integer codecs of formats/kv_tiles.hpp. The bytes are the integer codecs' (and
// so the reference's) on every path.
//
// Why the conversions give the same bytes: a bf16 value times a power of two (the tile's scale)
// is exact in fp32 wherever the result is an fp32 normal, and a quotient below 2^-126 rounds to
// +-0 in e4m3 either way; an e4m3 value times 2^(sc - 127) (sc <= 254) is exact in fp32, since its
// lowest bit (>= 2^-136) is above fp32's quantum 2^-149. So the single rounding (to e4m3, or to
// bf16) is the one the integer codecs perform. What the conversions cannot say is selects around
// them: non-finite tiles, NaN values, e4m3fnuz's codes that e4m3fn lacks, the patterns of NaN
// results (those of the reference); the NaN scale byte stays with the integer codecs. Private to
// kernels/src.
#pragma once

#include <cstdint>

#include "dsv4/gpu/fp8.hpp"
#include "dsv4/gpu/gpu.hpp"
#include "dsv4/ref/formats/kv_tiles.hpp"

namespace dsv4::kernels::kv_device {

// q[i] = the codes code(h) of the four bf16 values h of words w[2i], w[2i+1] (value k in byte k).
template <int n, class F>
DSV4_HD void codes_by_value(const uint32_t* w, uint32_t* q, F code) {
  DSV4_FMT_UNROLL
  for (int i = 0; i < n; ++i) {
    uint32_t c = 0;
    DSV4_FMT_UNROLL
    for (int k = 0; k < 4; ++k)
      c |= uint32_t(code(uint16_t(w[2 * i + k / 2] >> (16 * (k % 2))))) << (8 * k);
    q[i] = c;
  }
}

#if DSV4_GPU_FP8_CVT
// 2^e as fp32, e in [-149, 127] (below -126 an fp32 subnormal).
__device__ __forceinline__ float pow2f(int e) {
  return __uint_as_float(e >= -126 ? uint32_t(e + 127) << 23 : 0x00400000u >> (-127 - e));
}
__device__ __forceinline__ float lo_f32(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi_f32(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }
// Value k (0..3) of words w[0], w[1] as fp32, and its bf16 bits.
__device__ __forceinline__ float value_f32(const uint32_t* w, int k) {
  return k % 2 ? hi_f32(w[k / 2]) : lo_f32(w[k / 2]);
}

// The codes of words w[0..2n) (two bf16 values each) times m, word i of q holding values 4i..4i+3.
template <int n>
__device__ __forceinline__ void e4m3_scaled_codes(const uint32_t* w, float m, uint32_t* q) {
  DSV4_FMT_UNROLL
  for (int i = 0; i < n; ++i)
    q[i] = gpu::fp8::e4m3_from_f32x4(lo_f32(w[2 * i]) * m, hi_f32(w[2 * i]) * m,
                                     lo_f32(w[2 * i + 1]) * m, hi_f32(w[2 * i + 1]) * m);
}

// Bit 15 / 31 of the result where the low / high half of the bf16 word w is a NaN: |x| + 0x7f
// reaches 0x8000 exactly then, and never carries into the other half.
__device__ __forceinline__ uint32_t nan_halves(uint32_t w) {
  return ((w & 0x7fff7fffu) + 0x007f007fu) & 0x80008000u;
}
// Bit 7 of byte k where byte k of x is zero, exact per byte (no borrow from a lower byte).
__device__ __forceinline__ uint32_t zero_bytes(uint32_t x) {
  return ~((((x & 0x7f7f7f7fu) + 0x7f7f7f7fu) | x)) & 0x80808080u;
}

// Byte k of the result set to `code` where value k of words w[0], w[1] is a NaN, the other bytes
// kept from q.
__device__ __forceinline__ uint32_t nan_patched_codes(uint32_t q, const uint32_t* w,
                                                      uint32_t code) {
  DSV4_FMT_UNROLL
  for (int k = 0; k < 4; ++k)
    if ((nan_halves(w[k / 2]) >> (15 + 16 * (k % 2))) & 1u)
      q = (q & ~(0xffu << (8 * k))) | (code << (8 * k));
  return q;
}
#endif

// v41 writer: the codes of 2 n bf16 words of one tile (q[i]: values 4i..4i+3), kv::v41_encode's.
// Finite tiles through the conversions (x * 2^(127 - sc), sc <= 247 there); a NaN tile is all
// 0x7f, an inf tile 0x7f for +-inf and the signed zero for the rest (x / inf): selects.
template <int n>
DSV4_HD void v41_encode_words(const uint32_t* w, const kv::V41Tile& t, uint32_t* q) {
#if DSV4_GPU_FP8_CVT
  if (t.kind == kv::kFinite) return e4m3_scaled_codes<n>(w, pow2f(127 - int(t.sc)), q);
  codes_by_value<n>(w, q, [&](uint16_t h) { return kv::v41_nonfinite_encode(h, t); });
#else
  codes_by_value<n>(w, q, [&](uint16_t h) { return kv::v41_encode(h, t); });
#endif
}

// v4 writer, the same for kv::v4_encode. Finite tiles through the conversions: e4m3fn of
// x * 2^-e; e4m3fnuz of 2 x * 2^-e, whose e4m3fn code is the e4m3fnuz code of x * 2^-e (every
// e4m3fnuz value is half the e4m3fn value of its bits) but for the top code: e4m3fn has no 480,
// so a doubled quotient above 464 (the midpoint of 448 and 480, a tie going to 448's even code)
// takes 0x7f, 240; e4m3fnuz's zero has no sign. NaN values give -M (patched), and an inf tile
// -M for +-inf and zero (e4m3fn: signed) for the rest: selects.
template <int n>
DSV4_HD void v4_encode_words(const uint32_t* w, const kv::V4Tile& t, uint32_t* q) {
#if DSV4_GPU_FP8_CVT
  const bool fnuz = t.fp8 == Fp8Flavour::kE4m3fnuz;
  const uint32_t neg_max = kv::v4_neg_max(t.fp8);
  if (t.kind == kv::kFinite) {
    uint32_t nan = 0;
    DSV4_FMT_UNROLL
    for (int i = 0; i < 2 * n; ++i) nan |= nan_halves(w[i]);
    if (!fnuz) {
      e4m3_scaled_codes<n>(w, pow2f(-t.e), q);
    } else {
      const float m = pow2f(1 - t.e);
      DSV4_FMT_UNROLL
      for (int i = 0; i < n; ++i) {
        float y[4];
        DSV4_FMT_UNROLL
        for (int k = 0; k < 4; ++k) y[k] = value_f32(w + 2 * i, k) * m;
        const uint32_t c = gpu::fp8::e4m3_from_f32x4(y[0], y[1], y[2], y[3]);
        const uint32_t mag = c & 0x7f7f7f7fu;
        uint32_t r = c & ~zero_bytes(mag);                         // no sign on a zero
        if (const uint32_t top = zero_bytes(mag ^ 0x7e7e7e7eu)) {  // 448: 224, or 240 above 464
          DSV4_FMT_UNROLL
          for (int k = 0; k < 4; ++k)
            if (((top >> (8 * k + 7)) & 1u) && fabsf(y[k]) > 464.0f) r |= 1u << (8 * k);
        }
        q[i] = r;
      }
    }
    if (nan) {
      DSV4_FMT_UNROLL
      for (int i = 0; i < n; ++i) q[i] = nan_patched_codes(q[i], w + 2 * i, neg_max);
    }
    return;
  }
  codes_by_value<n>(w, q, [&](uint16_t h) { return kv::v4_inf_tile_encode(h, t.fp8); });
#else
  codes_by_value<n>(w, q, [&](uint16_t h) { return kv::v4_encode(h, t); });
#endif
}

#if DSV4_GPU_FP8_CVT
// Bit 7 of byte k where code k is the format's NaN: e4m3fn 0x7f / 0xff, e4m3fnuz 0x80.
template <bool kFnuz>
__device__ __forceinline__ uint32_t nan_codes(uint32_t codes) {
  return kFnuz ? zero_bytes(codes ^ 0x80808080u) : mxfp8::nan_code_bits(codes);
}

// Codes of one word (byte k: code k) as fp32 values times 2^(sc - 127), sc <= 254, exact but for
// the NaN codes (nan_codes), which the callers patch. e4m3fnuz: each code's e4m3fn value times
// 2^(sc - 128), but 0x7f / 0xff (e4m3fn NaN) are +-240 * 2^(sc - 127).
template <bool kFnuz>
__device__ __forceinline__ void e4m3_scaled_f32x4(uint32_t codes, uint8_t sc, float* f) {
  gpu::fp8::e4m3_to_f32x4(codes, f);
  if (kFnuz) {
    if (const uint32_t top = mxfp8::nan_code_bits(codes)) {  // 0x7f / 0xff: e4m3fnuz's +-240
      DSV4_FMT_UNROLL
      for (int k = 0; k < 4; ++k)
        if ((top >> (8 * k + 7)) & 1u) f[k] = (codes >> (8 * k + 7)) & 1u ? -480.0f : 480.0f;
    }
  }
  const float m = pow2f(int(sc) - (kFnuz ? 128 : 127));
  DSV4_FMT_UNROLL
  for (int k = 0; k < 4; ++k) f[k] *= m;
}

// e4m3fn / e4m3fnuz codes (word i: codes 4i..4i+3) times 2^(sc - 127), sc <= 254, as fp32 bits
// (out[4i+k]) or bf16 pairs (out[2i+j]); NaN codes give the reference's NaN.
template <bool kFnuz, int n>
__device__ __forceinline__ void e4m3_scaled_bits(const uint32_t* codes, uint8_t sc, uint32_t* out) {
  DSV4_FMT_UNROLL
  for (int i = 0; i < n; ++i) {
    float f[4];
    e4m3_scaled_f32x4<kFnuz>(codes[i], sc, f);
    DSV4_FMT_UNROLL
    for (int k = 0; k < 4; ++k) out[4 * i + k] = __float_as_uint(f[k]);
    mxfp8::nan_patch_bits4(nan_codes<kFnuz>(codes[i]), out + 4 * i);
  }
}
template <bool kFnuz, int n>
__device__ __forceinline__ void e4m3_scaled_bf16(const uint32_t* codes, uint8_t sc, uint32_t* out) {
  uint32_t nan = 0;
  DSV4_FMT_UNROLL
  for (int i = 0; i < n; ++i) nan |= nan_codes<kFnuz>(codes[i]);
  DSV4_FMT_UNROLL
  for (int i = 0; i < n; ++i) {
    float f[4];
    e4m3_scaled_f32x4<kFnuz>(codes[i], sc, f);
    out[2 * i] = gpu::fp8::bf16x2_from_f32(f[0], f[1]);
    out[2 * i + 1] = gpu::fp8::bf16x2_from_f32(f[2], f[3]);
  }
  if (nan) {  // a page a writer wrote has NaN codes only in NaN tiles
    DSV4_FMT_UNROLL
    for (int i = 0; i < n; ++i) {
      const uint32_t b = nan_codes<kFnuz>(codes[i]);
      out[2 * i] = mxfp8::nan_patched_pair(out[2 * i], b, 0);
      out[2 * i + 1] = mxfp8::nan_patched_pair(out[2 * i + 1], b, 1);
    }
  }
}
#endif

// v41 readers: kv::v41_decode_words_bf16's pairs and mxfp8::decode4_bits' fp32 bits. The pairs
// take the bf16 multiply path (kv::v41_scaled_words_bf16) where the device multiplies bf16 pairs
// (NVIDIA sm_80 and later): four integer or bf16 instructions a pair, where the conversions take
// two fp8 and two bf16 conversions, four fp32 multiplies and four f16 -> f32 moves per four codes,
// most of them on the conversion pipe (a quarter of the ALU rate). kOperand: the pairs are a matrix
// product's operand (sparse_decode's key tiles), where a NaN's payload is any, so the multiply
// path is kv::v41_operand_words_bf16 (no per-word selects); elsewhere the same readers (0x7fc0).
template <int n, bool kOperand = false>
DSV4_HD void v41_decode_words_bf16(const uint32_t* codes, uint8_t sc, uint32_t* out) {
#if DSV4_FMT_BF16X2_MUL
  if constexpr (kOperand) return kv::v41_operand_words_bf16<n>(codes, sc, out);
  return kv::v41_scaled_words_bf16<n>(codes, sc, out);
#else
#if DSV4_GPU_FP8_CVT
  if (sc != kUe8m0NaN) return e4m3_scaled_bf16<false, n>(codes, sc, out);
#endif
  kv::v41_decode_words_bf16<n>(codes, sc, out);
#endif
}

// v41_fp4 reader: n words of nibbles (8 values each) under one e4m3fn scale byte as bf16 pairs
// (out[4i + j]: values 8i + 2j, 8i + 2j + 1), nvfp4::decode_bf16's. With a bf16 multiply each
// pair is a fixed-table lookup times the scale (kv::fp4_scaled_words_bf16); elsewhere through the
// scale's own table (nvfp4::pair_table: eight decodes per scale byte, then byte_perm lookups).
// kOperand as for v41 (kv::fp4_operand_words_bf16 on the multiply path).
template <int n, bool kOperand = false>
DSV4_HD void fp4_decode_words_bf16(const uint32_t* nibbles, uint8_t sc, uint32_t* out) {
#if DSV4_FMT_BF16X2_MUL
  if constexpr (kOperand)
    kv::fp4_operand_words_bf16<n>(nibbles, sc, out);
  else
    kv::fp4_scaled_words_bf16<n>(nibbles, sc, out);
#else
  const nvfp4::PairTable t = nvfp4::pair_table(sc);
  DSV4_FMT_UNROLL
  for (int i = 0; i < n; ++i) nvfp4::decode8_bf16(nibbles[i], t, out + 4 * i);
#endif
}

DSV4_HD void v41_decode4_bits(uint32_t codes, uint8_t sc, uint32_t* out) {
#if DSV4_GPU_FP8_CVT
  if (sc != kUe8m0NaN) return e4m3_scaled_bits<false, 1>(&codes, sc, out);
#endif
  mxfp8::decode4_bits(codes, sc, out);
}

// v4 readers: kv::v4_decode4_bits / v4_decode4_bf16 (the scale byte 0xff, an inf scale, stays
// there).
DSV4_HD void v4_decode4_bits(uint32_t codes, uint8_t sc, Fp8Flavour f, uint32_t* out) {
#if DSV4_GPU_FP8_CVT
  if (sc != 0xff) {
    if (f == Fp8Flavour::kE4m3fnuz) return e4m3_scaled_bits<true, 1>(&codes, sc, out);
    return e4m3_scaled_bits<false, 1>(&codes, sc, out);
  }
#endif
  kv::v4_decode4_bits(codes, sc, f, out);
}

DSV4_HD void v4_decode4_bf16(uint32_t codes, uint8_t sc, Fp8Flavour f, uint32_t* out) {
#if DSV4_GPU_FP8_CVT
  if (sc != 0xff) {
    if (f == Fp8Flavour::kE4m3fnuz) return e4m3_scaled_bf16<true, 1>(&codes, sc, out);
    return e4m3_scaled_bf16<false, 1>(&codes, sc, out);
  }
#endif
  kv::v4_decode4_bf16(codes, sc, f, out);
}

}  // namespace dsv4::kernels::kv_device

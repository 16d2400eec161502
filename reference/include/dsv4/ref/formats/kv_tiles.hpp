// The tile rules of SGLang's paged KV writers and readers (v41, v41_fp4, v4 / v4_fnuz): scale of a
// tile from its maximum, element codes, decoding. One host-and-device definition that the
// compact_pages reference and kernels both call. C++17.
#pragma once

#include <cstdint>

#include "dsv4/ref/formats/bf16.hpp"
#include "dsv4/ref/formats/e4m3.hpp"
#include "dsv4/ref/formats/e4m3fnuz.hpp"
#include "dsv4/ref/formats/minifloat.hpp"
#include "dsv4/ref/formats/mxfp8.hpp"
#include "dsv4/ref/formats/nvfp4.hpp"
#include "dsv4/ref/formats/page_layout.hpp"
#include "dsv4/ref/formats/ue8m0.hpp"

namespace dsv4::kv {

// Every tile's maximum is taken over bf16 magnitude bits (minifloat::Bf16Amax: NaN excluded and
// flagged, +-inf is 0x7f80). Every decoded NaN is the quiet fp32 NaN 0x7fc00000 (bf16 0x7fc0), as
// PyTorch and Triton on a GPU produce it.
inline constexpr uint32_t kNaN32 = 0x7fc00000u;
inline constexpr uint32_t kInfBits = 0x7f80u;  // bf16 magnitude bits of infinity

// ---- v41: 32 e4m3fn values per ue8m0 scale (SGLang's quantize_k_cache_v41) -------------------
// scale = 2^ceil(log2(max(amax / 448, 1e-4))), exact on the IEEE bits: the fp32 1e-4 lies in
// (2^-14, 2^-13], so the exponent never goes below -13 (byte 114). amax / 448 never rounds onto a
// power of two it is not equal to (a bf16 amax has 8 significant bits), so the exponent is
// max(-13, ceil(log2(amax / 448))) of the exact quotient. A NaN amax (torch.amax propagates NaN)
// or an infinite one passes through to the ue8m0 NaN byte 0xff. Data = e4m3fn(x / scale), round
// to nearest even: finite tiles never exceed 448; a NaN tile divides every value by NaN (all
// 0x7f); an infinite tile divides by inf (finite values give +-0, 0x00 / 0x80, and +-inf gives
// NaN 0x7f).
inline constexpr int kV41FloorExp = -13;

enum TileKind : uint8_t { kFinite = 0, kInfTile = 1, kNaNTile = 2 };

struct V41Tile {
  uint8_t sc;    // ue8m0 scale byte
  uint8_t kind;  // TileKind
  uint32_t b;    // minifloat::fp8_code_from_bf16's exponent shift: sc - 7 (finite tiles)
  uint32_t lim;  // magnitudes from lim on take a select (NaN, or a finite tile's saturated inf)
};

DSV4_HD V41Tile v41_tile(const minifloat::Bf16Amax& m) {
  V41Tile t;
  t.kind = m.nan ? kNaNTile : m.bits >= kInfBits ? kInfTile : kFinite;
  if (t.kind != kFinite) {
    t.sc = kUe8m0NaN;
  } else {
    const int e = mxfp8::scale_exponent(minifloat::bf16_amax_value(m));
    t.sc = ue8m0_from_exp(e < kV41FloorExp ? kV41FloorExp : e);
  }
  // x / NaN is NaN everywhere; x / inf is +-0 (a shift past every code) but NaN for +-inf; a
  // finite tile saturates +-inf and keeps the sign of a NaN's code.
  t.b = t.kind == kFinite ? uint32_t(t.sc) - 7u : 300u;
  t.lim = t.kind == kNaNTile ? 0u : kInfBits;
  return t;
}

// The reference encoder: the exact core in finite tiles, x / NaN and x / inf otherwise.
DSV4_HD uint8_t v41_encode_exact(uint16_t h, const V41Tile& t) {
  if (t.kind == kFinite) return mxfp8::encode_exact(h, t.sc);
  if (t.kind == kNaNTile || (h & 0x7fffu) >= kInfBits) return kE4m3NaN;
  return uint8_t((h >> 8) & 0x80u);
}

// The e4m3fn code of bf16 h (bit pattern) in a tile, v41_encode_exact's for every h and tile:
// branch-free (minifloat::fp8_code_from_bf16, zeros and subnormal quotients included; the NaN
// codes of NaN values and of non-finite tiles are a select).
DSV4_HD uint8_t v41_encode(uint16_t h, const V41Tile& t) {
  const uint32_t a = h & 0x7fffu, sign = (uint32_t(h) >> 8) & 0x80u;
  const uint32_t code = sign | minifloat::fp8_code_from_bf16(a, t.b, kE4m3MaxCode);
  const uint32_t special =
      t.kind == kFinite ? sign | (a > kInfBits ? kE4m3NaN : kE4m3MaxCode) : kE4m3NaN;
  return uint8_t(a >= t.lim ? special : code);
}

// v41_encode in a non-finite tile (t.kind != kFinite), without the finite formula: a NaN tile is
// all NaN codes; an inf tile gives the NaN code for +-inf and the signed zero (x / inf) otherwise.
DSV4_HD uint8_t v41_nonfinite_encode(uint16_t h, const V41Tile& t) {
  return uint8_t(t.kind == kNaNTile || (h & 0x7fffu) >= kInfBits ? kE4m3NaN : (h >> 8) & 0x80u);
}

// Reader: e4m3fn(c) * 2^(sc-127) exactly in fp32 (0x00 is 2^-127, 0xff NaN); a product past fp32
// is inf.
DSV4_HD uint32_t v41_decode_bits(uint8_t c, uint8_t sc) { return mxfp8::decode_bits(c, sc); }

// The readers' reference: four codes under one scale, each mxfp8::decode_exact rounded once to
// bf16: values 2j and 2j+1 in word j (low half first), word j in bits [32 j, +32) of the result.
DSV4_HD uint64_t v41_decode4_bf16_exact(uint32_t codes, uint8_t sc) {
  uint32_t h[4];
  DSV4_FMT_UNROLL
  for (int k = 0; k < 4; ++k)
    h[k] = f32_to_bf16(f32_from_bits(mxfp8::decode_exact(uint8_t(codes >> (8 * k)), sc))).bits;
  return uint64_t(h[0] | h[1] << 16) | uint64_t(h[2] | h[3] << 16) << 32;
}

// x + y for two pairs of bf16 (bit patterns) whose sums are exact bf16 values: one bf16x2 fma on
// NVIDIA, fp32 adds elsewhere (exact: the sum is a bf16, its fp32 bits end in 16 zeros).
DSV4_HD uint32_t bf16x2_add_exact(uint32_t x, uint32_t y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t r;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(0x3f803f80u), "r"(y));
  return r;
#else
  const uint32_t lo = f32_bits(f32_from_bits(x << 16) + f32_from_bits(y << 16)) >> 16;
  const uint32_t hi = f32_bits(f32_from_bits(x & 0xffff0000u) + f32_from_bits(y & 0xffff0000u));
  return lo | (hi & 0xffff0000u);
#endif
}

// Four codes under one scale (byte k is code k) as bf16 pairs: out[j] holds codes 2j (low half)
// and 2j+1, each v41_decode_bits rounded once to bf16. Short path for scale bytes 10..246, every
// code, two values per word, branch-free: a normal code's exponent and fraction move into bf16's
// fields, plus sc - 7 in the exponent (exact: 4 significant bits). A subnormal code f * 2^-9
// (f < 8) is built the same way with the exponent of the code of exponent 1, 2^(sc - 133) (1 +
// f / 8), from which 2^(sc - 133) is subtracted in bf16 (exact, Sterbenz; zero for f = 0): f *
// 2^(sc - 136), a bf16 normal for sc >= 10. The sign is put back last, so 0x80 gives -0; the
// halves of NaN codes take 0x7fc0 through a mask. Other scale bytes take mxfp8::decode4_bf16
// (branch-free too).
// The short path with the scale's terms given: bias = (sc - 7) << 7 in both halves, scm6 = sc - 6.
// kNaN false: the caller knows no code is a NaN, and the mask is left out.
template <bool kNaN = true>
DSV4_HD void v41_short4_bf16(uint32_t codes, uint32_t bias, uint32_t scm6, uint32_t* out) {
  const uint32_t nan = kNaN ? mxfp8::nan_code_bits(codes) : 0u;
  DSV4_FMT_UNROLL
  for (int j = 0; j < 2; ++j) {
    const uint32_t c2 = (codes >> (16 * j)) & 0xffffu;                // codes 2j and 2j+1
    const uint32_t x = ((c2 & 0xffu) << 8) | ((c2 & 0xff00u) << 16);  // at bits 8..15 of a half
    const uint32_t mag = (x >> 4) & 0x07f007f0u;  // exponent and fraction at bf16's places
    // 0x80 in each half whose code has exponent 0 (the carry of 0x780 + exponent bits is 0).
    const uint32_t sub = ((((mag & 0x07800780u) + 0x07800780u) & 0x08000800u) ^ 0x08000800u) >> 4;
    const uint32_t v = mag + bias + sub;  // below 0x8000 in each half
    // -2^(sc - 133) in those halves (0x80 (sc - 6) and the sign bit), +0 in the others.
    const uint32_t minus = sub * scm6 | ((sub << 8) & 0x80008000u);
    const uint32_t r = (x & 0x80008000u) | bf16x2_add_exact(v, minus);
    out[j] = kNaN ? mxfp8::nan_patched_pair(r, nan, j) : r;
  }
}

DSV4_HD bool v41_short_scale(uint8_t sc) { return sc >= 10 && sc <= 246; }

DSV4_HD void v41_decode4_bf16(uint32_t codes, uint8_t sc, uint32_t* out) {
  if (!v41_short_scale(sc)) return mxfp8::decode4_bf16(codes, sc, out);
  v41_short4_bf16(codes, (uint32_t(sc - 7) << 7) * 0x00010001u, uint32_t(sc - 6), out);
}

// 4 n codes under one scale (word i holds codes 4i..4i+3) as 2 n bf16 pairs, the same values as
// v41_decode4_bf16 on each word: one check of the scale byte and of the codes for the whole group,
// the scale's terms computed once, then the short path per word, its NaN mask only in a group
// holding a NaN code (a page a writer wrote has none outside NaN tiles: on an H200 the mask on
// every word cost sparse_decode's v41 reader 8%); mxfp8::decode4_bf16 per word for the other
// scale bytes.
template <int n>
DSV4_HD void v41_decode_words_bf16(const uint32_t* codes, uint8_t sc, uint32_t* out) {
  if (!v41_short_scale(sc)) {
    DSV4_FMT_UNROLL
    for (int i = 0; i < n; ++i) mxfp8::decode4_bf16(codes[i], sc, out + 2 * i);
    return;
  }
  const uint32_t bias = (uint32_t(sc - 7) << 7) * 0x00010001u, scm6 = uint32_t(sc - 6);
  uint32_t nan = 0;
  DSV4_FMT_UNROLL
  for (int i = 0; i < n; ++i) nan |= mxfp8::nan_code_bits(codes[i]);
  if (nan) {
    DSV4_FMT_UNROLL
    for (int i = 0; i < n; ++i) v41_short4_bf16<true>(codes[i], bias, scm6, out + 2 * i);
    return;
  }
  DSV4_FMT_UNROLL
  for (int i = 0; i < n; ++i) v41_short4_bf16<false>(codes[i], bias, scm6, out + 2 * i);
}

// x * y in each half of two bf16 pairs, rounded once to nearest even (subnormals kept, overflow
// to inf): one bf16x2 fma with -0 on NVIDIA (sm_80 and later; -0 keeps the product's zero
// sign), the fp32 product rounded to bf16 elsewhere (the same: a product of two bf16 values is
// exact in fp32 wherever the callers below use it).
// 1 in device code with a one-instruction bf16x2 multiply (NVIDIA sm_80 and later), which the
// kernels' readers then take (kernels/src/kv_codecs_device.hpp); 0 elsewhere.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define DSV4_FMT_BF16X2_MUL 1
#else
#define DSV4_FMT_BF16X2_MUL 0
#endif

DSV4_HD uint32_t bf16x2_mul(uint32_t x, uint32_t y) {
#if DSV4_FMT_BF16X2_MUL
  uint32_t r;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(0x80008000u));
  return r;
#else
  const uint32_t lo = f32_to_bf16(f32_from_bits(x << 16) * f32_from_bits(y << 16)).bits;
  const uint32_t hi =
      f32_to_bf16(f32_from_bits(x & 0xffff0000u) * f32_from_bits(y & 0xffff0000u)).bits;
  return lo | hi << 16;
#endif
}

// 2^e as bf16 in both halves, e in [-126, 127].
DSV4_HD constexpr uint32_t bf16x2_pow2(int e) { return (uint32_t(e + 127) << 7) * 0x00010001u; }

// Codes 2j and 2j + 1 of a word (e4m3fn bits s eeee mmm) as a bf16 pair of their values times
// 2^-120, exactly: eeee mmm moves to bits 4..10 of a half and the sign to bit 15, so the code's
// exponent field becomes the low bits of bf16's (bias 127 for 7) and its fraction the top of
// bf16's; a subnormal code (eeee = 0, value m 2^-9) reads as the bf16 subnormal m 2^-129. NaN
// codes read as finite values (callers patch them). byte_perm_sx makes each half the code
// sign-extended to 16 bits (code 2j + j' in byte 2j' as is, its sign replicated in byte 2j' + 1),
// so bit 11 of a half is the sign; keeping bits 0..6 and 11 and shifting by 4 places both.
DSV4_HD uint32_t e4m3_pair_scaled_down(uint32_t codes, int j) {
  const uint32_t a = minifloat::byte_perm_sx(codes, 0u, j ? 0xb3a2u : 0x9180u);
  return (a & 0x087f087fu) << 4;
}

// The multiply path of v41_decode_words_bf16, the same values for every code and scale byte (the
// devices with a bf16 multiply take it: no conversion instruction, four integer or bf16
// instructions per pair): each pair scaled down (e4m3_pair_scaled_down) and multiplied by 2^(sc
// - 7), one rounding of the exact product; where 2^(sc - 7) is past bf16 (sc > 134), by 2^127
// (exact: the values times 2^7) and then 2^(sc - 134). The NaN scale byte gives NaN pairs, NaN
// codes are patched as on the short path.
// Its steps: the first multiplier 2^min(sc - 7, 127); every pair scaled down and multiplied by
// m1; then (v41_scaled_rest) the second multiply and the NaN codes' patches, where they apply.
DSV4_HD uint32_t v41_first_multiplier(uint8_t sc) {
  const int e = int(sc) - 7;
  return bf16x2_pow2(e < 127 ? e : 127);
}
template <int n>
DSV4_HD void v41_scaled_products(const uint32_t* codes, uint32_t m1, uint32_t* out) {
  DSV4_FMT_UNROLL
  for (int i = 0; i < n; ++i) {
    out[2 * i] = bf16x2_mul(e4m3_pair_scaled_down(codes[i], 0), m1);
    out[2 * i + 1] = bf16x2_mul(e4m3_pair_scaled_down(codes[i], 1), m1);
  }
}
template <int n>
DSV4_HD void v41_scaled_rest(const uint32_t* codes, uint8_t sc, uint32_t nan, uint32_t* out) {
  const int e = int(sc) - 7;
  if (e > 127) {
    const uint32_t m2 = bf16x2_pow2(e - 127);
    DSV4_FMT_UNROLL
    for (int i = 0; i < 2 * n; ++i) out[i] = bf16x2_mul(out[i], m2);
  }
  if (nan) {
    DSV4_FMT_UNROLL
    for (int i = 0; i < n; ++i) {
      const uint32_t b = mxfp8::nan_code_bits(codes[i]);
      out[2 * i] = mxfp8::nan_patched_pair(out[2 * i], b, 0);
      out[2 * i + 1] = mxfp8::nan_patched_pair(out[2 * i + 1], b, 1);
    }
  }
}
template <int n>
DSV4_HD uint32_t nan_codes_of(const uint32_t* codes) {
  uint32_t nan = 0;
  DSV4_FMT_UNROLL
  for (int i = 0; i < n; ++i) nan |= mxfp8::nan_code_bits(codes[i]);
  return nan;
}
template <int n>
DSV4_HD void v41_scaled_words_bf16(const uint32_t* codes, uint8_t sc, uint32_t* out) {
  if (sc == kUe8m0NaN) {
    DSV4_FMT_UNROLL
    for (int i = 0; i < 2 * n; ++i) out[i] = 0x7fc07fc0u;
    return;
  }
  v41_scaled_products<n>(codes, v41_first_multiplier(sc), out);
  v41_scaled_rest<n>(codes, sc, nan_codes_of<n>(codes), out);
}

// ---- v41_fp4: 16 e2m1 values per e4m3fn scale (SGLang's quantize_k_cache_v41_fp4) -------------
// amax = max of nan_to_num(|x|, nan=inf): torch.nan_to_num also turns +inf into the fp32 maximum
// (its posinf default), so only a NaN makes amax infinite. scale = e4m3fn(clamp(amax / 6, 2^-9,
// 448)), round to nearest even of the exact quotient (the fp32 product amax * fp32(1/6) =
// (amax/6)(1 + 2^-25) never crosses an e4m3 rounding boundary), so the scale byte is in [0x01,
// 0x7e] and never zero; a tile holding a NaN gets the NaN scale 0x7f, and one holding +-inf but no
// NaN the scale 448 (0x7e). Codes are e2m1(x / scale): round to nearest even, saturating at 6
// (+-inf gives +-6), the sign kept on zero (-0 and small negatives give 0x8); a NaN scale gives
// code 0 everywhere.
DSV4_HD uint8_t fp4_scale(const minifloat::Bf16Amax& m) {
  if (m.nan) return kE4m3NaN;
  const uint8_t c = nvfp4::scale_code_bf16(m.bits >= kInfBits ? 0x7f7fu : m.bits);
  return c == 0 ? uint8_t(1) : c;
}

// fp4_scale as one fp32 product and one e4m3fn rounding, for a device that converts fp32 to
// e4m3fn itself: for a tile without NaN the scale byte is e4m3fn(fp4_scale_product(m)) (round to
// nearest even, saturating at 448), 0 taken to 1. The product is amax * fp32(1/6) with an infinite
// amax as bf16's largest value; for every bf16 amax it gives fp4_scale's byte (checked on the CPU
// for each one, and the e4m3 rounding itself by the device tests).
DSV4_HD float fp4_scale_product(const minifloat::Bf16Amax& m) {
  return f32_from_bits((m.bits >= kInfBits ? 0x7f7fu : m.bits) << 16) * (1.0f / 6.0f);
}

// Reader: e2m1(nibble) * e4m3fn(sc) in fp32 (exact; sign = xor), NaN scale gives NaN.
DSV4_HD uint32_t fp4_decode_bits(uint8_t nibble, uint8_t sc) {
  return nvfp4::decode_bits(nibble, sc);
}

// The multiply path of the v41_fp4 reader: 8 n values (n words of nibbles, value k of a word
// in nibble k) under one scale byte as bf16 pairs (out[j]: values 2j, 2j + 1), fp4_decode_bits'
// values rounded to bf16 for every nibble and scale byte. Each nibble's e2m1 magnitude comes
// from a fixed table of the eight magnitudes' bf16 bytes (lo / hi, picked by byte_perm), gets
// the nibble's sign, and is multiplied by the scale as bf16 (exact, with its sign): the product
// has at most 5 significant bits and lies in [2^-10, 2688] or is zero, so the bf16 multiply is
// exact and its sign the xor, as the reference's. A NaN scale gives 0x7fc0 everywhere.
// Its steps: the scale in both halves (fp4_scale_pair: its code scaled down, e4m3_pair_scaled_down,
// times 2^120, exact), then every value's magnitude times it (fp4_scaled_products).
DSV4_HD uint32_t fp4_scale_pair(uint8_t sc) {
  return bf16x2_mul(e4m3_pair_scaled_down(uint32_t(sc) * 0x0101u, 0), bf16x2_pow2(120));
}
template <int n>
DSV4_HD void fp4_scaled_products(const uint32_t* nibbles, uint32_t s2, uint32_t* out) {
  // bf16 of 0, 0.5, 1, 1.5 (lo0, hi0) and 2, 3, 4, 6 (lo1, hi1), byte k for magnitude code k
  constexpr uint32_t kLo0 = 0xc0800000u, kLo1 = 0xc0804000u;
  constexpr uint32_t kHi0 = 0x3f3f3f00u, kHi1 = 0x40404040u;
  DSV4_FMT_UNROLL
  for (int i = 0; i < n; ++i) {
    const uint32_t w = nibbles[i], mags = w & 0x77777777u;
    DSV4_FMT_UNROLL
    for (int h = 0; h < 2; ++h) {
      const uint32_t sel = mags >> (16 * h);  // byte_perm reads the low four selector nibbles
      const uint32_t lo = minifloat::byte_perm(kLo0, kLo1, sel);
      const uint32_t hi = minifloat::byte_perm(kHi0, kHi1, sel);
      DSV4_FMT_UNROLL
      for (int j = 0; j < 2; ++j) {
        const int k = 2 * h + j;  // byte k of w: values 2k, 2k + 1
        const uint32_t mag = minifloat::byte_perm(lo, hi, j ? 0x7362u : 0x5140u);
        // byte k times 2^12 + 2^24: its bit 3 (the sign of value 2k) lands on bit 15, its bit 7
        // on bit 31 (the two shifted copies do not overlap)
        const uint32_t sg = minifloat::byte_perm(w, 0u, 0x4440u + uint32_t(k)) * 0x01001000u;
        out[4 * i + k] = bf16x2_mul(mag ^ (sg & 0x80008000u), s2);
      }
    }
  }
}
template <int n>
DSV4_HD void fp4_scaled_words_bf16(const uint32_t* nibbles, uint8_t sc, uint32_t* out) {
  if (e4m3_is_nan(sc)) {
    DSV4_FMT_UNROLL
    for (int i = 0; i < 4 * n; ++i) out[i] = 0x7fc07fc0u;
    return;
  }
  fp4_scaled_products<n>(nibbles, fp4_scale_pair(sc), out);
}

// The multiply paths as a matrix product's operand (sparse_decode's key tiles), where a value's
// bits matter but for a NaN's payload: a NaN key makes every score and product it meets NaN,
// whatever its payload. Every value is the reader's (v41_scaled_words_bf16, fp4_scaled_words_bf16)
// but where that is NaN, which stays a NaN of any payload: the NaN scale byte enters as a NaN
// multiplier, and v41's rare cases (a scale past 2^127, NaN codes) take one branch after the
// common products, so a device runs no per-word select on the common path.
template <int n>
DSV4_HD void v41_operand_words_bf16(const uint32_t* codes, uint8_t sc, uint32_t* out) {
  const uint32_t m1 = sc == kUe8m0NaN ? 0x7fc07fc0u : v41_first_multiplier(sc);
  v41_scaled_products<n>(codes, m1, out);
  const uint32_t nan = nan_codes_of<n>(codes);
  if (sc > 134 || nan) v41_scaled_rest<n>(codes, sc, nan, out);  // 2^(sc - 7) past bf16, NaN codes
}
template <int n>
DSV4_HD void fp4_operand_words_bf16(const uint32_t* nibbles, uint8_t sc, uint32_t* out) {
  fp4_scaled_products<n>(nibbles, e4m3_is_nan(sc) ? 0x7fc07fc0u : fp4_scale_pair(sc), out);
}

// ---- v4 / v4_fnuz: 448 fp8 values in tiles of 64 per ue8m0 scale, then 64 raw bf16 ------------
// SGLang's V4 writer (quant_k_cache.py, a Triton kernel) with M = finfo(fp8).max, 448 for e4m3fn
// and 240 for e4m3fnuz: scale = 2^ceil(log2(max(amax, 1e-8) / M)); the fp32 1e-8 floors the
// exponent at -35 (e4m3fn) or -34 (e4m3fnuz). amax is tl.max, which skips NaN. Data =
// fp8(clamp(x * 2^-e, -M, M)): round to nearest even (|x| <= amax keeps it within M); the clamp
// (maxnum / minnum) turns NaN into -M. An infinite amax makes the scale inf and its reciprocal 0:
// finite values give +-0 (e4m3fnuz: 0x00) and +-inf (0 * inf = NaN) gives -M; the scale byte is
// the saturating float-to-int32 conversion of +inf plus 127, wrapped to 8 bits: 0x7e. The 8th
// scale byte and the page padding are not written.
inline constexpr uint32_t kV4EpsBits = 0x322bcc77u;  // fp32(1e-8)
inline constexpr uint8_t kV4InfTileScale = 0x7e;

DSV4_HD float v4_fp8_max(Fp8Flavour f) { return f == Fp8Flavour::kE4m3fnuz ? 240.0f : 448.0f; }

// -M as a code.
DSV4_HD uint8_t v4_neg_max(Fp8Flavour f) { return f == Fp8Flavour::kE4m3fnuz ? 0xff : 0xfe; }

// ceil(log2(max(amax, 1e-8) / M)) for a finite amax given as fp32 bits (sign clear). With
// a = 1.f * 2^k: M = 1.75 * 2^8 (e4m3fn) or 1.875 * 2^7 (e4m3fnuz), so the exponent is k - 8 (or
// k - 7), plus one when 1.f > 1.75 (or 1.875).
DSV4_HD int v4_scale_exponent(uint32_t amax_f32_bits, Fp8Flavour f) {
  const uint32_t a = amax_f32_bits < kV4EpsBits ? kV4EpsBits : amax_f32_bits;
  const bool fnuz = f == Fp8Flavour::kE4m3fnuz;
  const int k = int(a >> 23) - 127;
  return k - (fnuz ? 7 : 8) + ((a & 0x7fffffu) > (fnuz ? 0x700000u : 0x600000u) ? 1 : 0);
}

struct V4Tile {
  uint8_t sc;    // ue8m0 scale byte
  uint8_t kind;  // kFinite or kInfTile
  Fp8Flavour fp8;
  int e;         // scale exponent (finite tiles)
  uint32_t b;    // minifloat::fp8_code_from_bf16's exponent shift (see v4_tile)
  uint32_t lim;  // magnitudes from lim on give -M
};

DSV4_HD V4Tile v4_tile(const minifloat::Bf16Amax& m, Fp8Flavour f) {
  V4Tile t;
  t.fp8 = f;
  t.kind = m.bits >= kInfBits ? kInfTile : kFinite;
  t.e = t.kind == kFinite ? v4_scale_exponent(m.bits << 16, f) : 0;
  t.sc = t.kind == kFinite ? uint8_t(t.e + 127) : kV4InfTileScale;
  // The quotient x * 2^-e has fp8 biased exponent (bf16 exponent) - (e + 127 - bias): b = e + 120
  // for e4m3fn, e + 119 for e4m3fnuz, >= 85 since e >= -35. An inf tile multiplies finite values
  // by 0 (a shift past every code) and gives -M for +-inf; NaN gives -M in every tile. (A finite
  // tile never holds +-inf, its amax would be inf; like the exact core, the code takes it as
  // 2^128.)
  t.b = t.kind == kFinite ? uint32_t(t.e + (f == Fp8Flavour::kE4m3fnuz ? 119 : 120)) : 300u;
  t.lim = t.kind == kFinite ? kInfBits + 1u : kInfBits;
  return t;
}

// The reference encoder: NaN gives -M, an inf tile +-0 (e4m3fnuz: 0) and -M for +-inf, the rest
// the exact core.
// (Scalars, not the tile: an out-of-line call taking a reference would put the tile in memory.)
DSV4_FMT_NOINLINE DSV4_HD uint8_t v4_encode_exact(uint16_t h, int e, uint8_t kind, Fp8Flavour f) {
  const uint32_t a = h & 0x7fffu;
  const bool fnuz = f == Fp8Flavour::kE4m3fnuz;
  if (a > kInfBits || (kind == kInfTile && a == kInfBits)) return v4_neg_max(f);
  if (kind == kInfTile) return fnuz ? 0 : uint8_t((h >> 8) & 0x80u);
  const uint32_t sig = a < 0x80u ? a : (0x80u | (a & 0x7fu));
  const int exp = (a < 0x80u ? -133 : int(a >> 7) - 134) - e;
  if (fnuz) return e4m3fnuz_signed(uint32_t(h) >> 15, e4m3fnuz_round(sig, exp));
  return uint8_t(((uint32_t(h) >> 8) & 0x80u) | e4m3_round(sig, exp));
}
DSV4_HD uint8_t v4_encode_exact(uint16_t h, const V4Tile& t) {
  return v4_encode_exact(h, t.e, t.kind, t.fp8);
}

// The fp8 code of bf16 h (bit pattern) in a tile, v4_encode_exact's for every h and tile:
// branch-free (minifloat::fp8_code_from_bf16, zeros and subnormal quotients included; e4m3fnuz's
// zero has no sign; -M for NaN values and an inf tile's +-inf is a select).
DSV4_HD uint8_t v4_encode(uint16_t h, const V4Tile& t) {
  const uint32_t a = h & 0x7fffu, sign = (uint32_t(h) >> 8) & 0x80u;
  const bool fnuz = t.fp8 == Fp8Flavour::kE4m3fnuz;
  const uint32_t max_code = fnuz ? kE4m3fnuzMaxCode : kE4m3MaxCode;
  const uint32_t m = minifloat::fp8_code_from_bf16(a, t.b, max_code);
  const uint32_t code = fnuz && m == 0u ? 0u : sign | m;
  return uint8_t(a >= t.lim ? uint32_t(v4_neg_max(t.fp8)) : code);
}

// v4_encode in an inf tile (t.kind == kInfTile), without the finite formula: -M for +-inf and NaN,
// zero (e4m3fn: signed, x * 0) otherwise.
DSV4_HD uint8_t v4_inf_tile_encode(uint16_t h, Fp8Flavour f) {
  if ((h & 0x7fffu) >= kInfBits) return v4_neg_max(f);
  return f == Fp8Flavour::kE4m3fnuz ? uint8_t(0) : uint8_t((h >> 8) & 0x80u);
}

// Reader (SGLang's V4 dequantize, a Triton kernel): fp8(c) * exp2(sc - 127) in fp32, so 0x00 is
// 2^-127 and 0xff is +inf (a zero code times inf is NaN); the fp8 NaN (e4m3fn 0x7f / 0xff,
// e4m3fnuz 0x80) gives NaN. Exact but for products past fp32 (inf).
DSV4_FMT_NOINLINE DSV4_HD uint32_t v4_decode_exact(uint8_t c, uint8_t sc, Fp8Flavour f) {
  const bool fnuz = f == Fp8Flavour::kE4m3fnuz;
  if (fnuz ? e4m3fnuz_is_nan(c) : e4m3_is_nan(c)) return kNaN32;
  const minifloat::Parts p = fnuz ? e4m3fnuz_parts(c) : e4m3_parts(c);
  if (sc == 0xff) return p.sig == 0 ? kNaN32 : (p.sign << 31) | 0x7f800000u;
  return f32_bits(minifloat::pack_f32(p.sign, p.sig, p.exp + int(sc) - 127));
}

// v4_decode_exact(c, sc, f) for every code, scale and flavour, branch-free:
// minifloat::fp8_scaled_bits (code 0x08 is 2^(sc - 133) for e4m3fn, 2^(sc - 134) for e4m3fnuz),
// the sign, then selects for the NaN code and the scale byte 0xff (inf, NaN for zero).
DSV4_HD uint32_t v4_decode_bits(uint8_t c, uint8_t sc, Fp8Flavour f) {
  const bool fnuz = f == Fp8Flavour::kE4m3fnuz;
  const uint32_t m = c & 0x7fu;
  const uint32_t mag =
      sc == 0xff ? 0x7f800000u : minifloat::fp8_scaled_bits(m, int(sc) - (fnuz ? 7 : 6));
  const bool nan = (fnuz ? c == kE4m3fnuzNaN : m == 0x7fu) || (sc == 0xff && m == 0u);
  return nan ? kNaN32 : (uint32_t(c & 0x80u) << 24) | mag;
}

// The same rounded once to bf16, as bits.
DSV4_HD uint32_t v4_decode_bf16_bits(uint8_t c, uint8_t sc, Fp8Flavour f) {
  const uint32_t u = v4_decode_bits(c, sc, f);
  return u == kNaN32 ? 0x7fc0u
                     : ((u >> 16) & 0x8000u) | minifloat::f32_bits_to_bf16_rne(u & 0x7fffffffu);
}

// Four codes under one scale (byte k is code k): out[k] = v4_decode_bits(code k). Short path when
// the scale keeps every product of a normal code an fp32 normal and every code has a nonzero
// exponent field (for e4m3fn the NaN 0x7f / 0xff included, its values then replaced by the NaN;
// e4m3fnuz's NaN 0x80 has exponent 0): each code's exponent and fraction move into fp32's fields.
// Otherwise v4_decode_bits per code (branch-free too).
DSV4_HD bool v4_short_scale(uint8_t sc, Fp8Flavour f) {
  const uint32_t r = f == Fp8Flavour::kE4m3fnuz ? 8u : 7u;
  return sc >= r && sc <= 239u + r;
}

// The NaN codes of a word on the short path: bit 7 of byte k for a NaN code k (none for e4m3fnuz
// there).
DSV4_HD uint32_t v4_short_nan_bits(uint32_t codes, Fp8Flavour f) {
  return f == Fp8Flavour::kE4m3fnuz ? 0u : mxfp8::nan_code_bits(codes);
}

DSV4_HD void v4_decode4_bits(uint32_t codes, uint8_t sc, Fp8Flavour f, uint32_t* out) {
  const uint32_t rebias = f == Fp8Flavour::kE4m3fnuz ? 8u : 7u;
  if (v4_short_scale(sc, f) && mxfp8::four_exponent_codes(codes)) {
    mxfp8::move4_bits(codes, sc - rebias, out);
    mxfp8::nan_patch_bits4(v4_short_nan_bits(codes, f), out);
    return;
  }
  DSV4_FMT_UNROLL
  for (int k = 0; k < 4; ++k) out[k] = v4_decode_bits(uint8_t(codes >> (8 * k)), sc, f);
}

// The same as bf16 pairs: out[j] holds values 2j (low half) and 2j+1, each the fp32 value rounded
// once to bf16 (on the short path the value has 4 significant bits: its bf16 is its top half).
DSV4_HD void v4_decode4_bf16(uint32_t codes, uint8_t sc, Fp8Flavour f, uint32_t* out) {
  const uint32_t rebias = f == Fp8Flavour::kE4m3fnuz ? 8u : 7u;
  if (v4_short_scale(sc, f) && mxfp8::four_exponent_codes(codes)) {
    mxfp8::move4_bf16(codes, sc - rebias, out);
    const uint32_t nan = v4_short_nan_bits(codes, f);
    DSV4_FMT_UNROLL
    for (int j = 0; j < 2; ++j) out[j] = mxfp8::nan_patched_pair(out[j], nan, j);
    return;
  }
  DSV4_FMT_UNROLL
  for (int j = 0; j < 2; ++j)
    out[j] = v4_decode_bf16_bits(uint8_t(codes >> (16 * j)), sc, f) |
             (v4_decode_bf16_bits(uint8_t(codes >> (16 * j + 8)), sc, f) << 16);
}

}  // namespace dsv4::kv

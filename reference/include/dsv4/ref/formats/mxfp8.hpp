// MXFP8 blocks of compact page rows: 32 e4m3 values sharing one ue8m0 power-of-two scale. The
// block rules (scale choice, element rounding, NaN and infinity, decoding) as one host-and-device
// definition that the reference and the kernels both call. C++17.
#pragma once

#include <cstdint>

#include "dsv4/ref/formats/bf16.hpp"
#include "dsv4/ref/formats/e4m3.hpp"
#include "dsv4/ref/formats/minifloat.hpp"
#include "dsv4/ref/formats/ue8m0.hpp"

namespace dsv4::mxfp8 {

inline constexpr int kBlock = 32;

// Block rules. amax is the largest |x| of the block's values, NaN values ignored (a block of NaNs
// and zeros has amax 0). The scale is 2^e with e = ceil(log2(amax / 448)), the smallest power of
// two that brings amax into e4m3 range, clamped to [-127, 127]; amax 0 (and any amax below 448 *
// 2^-128) gives 2^-127, an infinite amax gives 2^127. Each element is e4m3(x / 2^e): round to
// nearest even of the exact quotient, saturating at +-448 (only an infinite element can exceed it,
// since |x| <= amax <= 448 * 2^e for finite blocks). NaN elements keep a NaN code (0x7f | sign);
// the other elements of their block are quantised as if the NaN were absent. With bf16 inputs,
// ceil(log2(amax / 448)) computed in fp32 (amax / 448.0f, then the exponent of the quotient rounded
// up) gives the same e: a bf16 amax has 8 significant bits, so the quotient never rounds onto a
// power of two it is not equal to.
//
// Every function below is exact integer arithmetic. The element codecs are branch-free formulas
// on the bit patterns (minifloat::fp8_code_from_bf16, minifloat::fp8_scaled_bits); the word
// readers add a shorter path for words of normal codes. The exact cores (*_exact) are the
// references: the unit tests check that every path gives their result on every input.

// Exponent e for a block maximum amax >= 0 (not NaN). With amax = 1.f * 2^k, amax / 448 =
// (1.f / 1.75) * 2^(k-8), whose ceil-log2 is k - 8, plus one when 1.f > 1.75.
DSV4_HD int scale_exponent(float amax) {
  if (minifloat::f32_is_inf(amax)) return kUe8m0MaxExp;
  const uint32_t u = f32_bits(amax) & 0x7fffffffu;
  const int be = int(u >> 23);
  if (be == 0) return kUe8m0MinExp;  // zero and fp32 subnormals: below 448 * 2^-128
  const int e = be - 127 - 8 + ((u & 0x7fffffu) > 0x600000u ? 1 : 0);
  return e < kUe8m0MinExp ? kUe8m0MinExp : e > kUe8m0MaxExp ? kUe8m0MaxExp : e;
}

DSV4_HD uint8_t scale_code(float amax) { return ue8m0_from_exp(scale_exponent(amax)); }

// The scale code of a block from its maximum (NaN elements do not take part).
DSV4_HD uint8_t block_scale(const minifloat::Bf16Amax& m) {
  return scale_code(minifloat::bf16_amax_value(m));
}

// The e4m3 code of the bf16 value h (bit pattern) divided by the block scale 2^(sc-127), through
// the exact core: NaN keeps a NaN code, infinity saturates.
DSV4_FMT_NOINLINE DSV4_HD uint8_t encode_exact(uint16_t h, uint8_t sc) {
  const uint32_t sign = (uint32_t(h) >> 8) & 0x80u;
  const uint32_t a = minifloat::bf16_magnitude(h);
  if (a >= 0x7f80u) return uint8_t(sign | (a == 0x7f80u ? kE4m3MaxCode : kE4m3NaN));
  const uint32_t sig = a < 0x80u ? a : (0x80u | (a & 0x7fu));  // zero and subnormals: E = 0
  const int exp = a < 0x80u ? -133 : int(a >> 7) - 134;
  return uint8_t(sign | e4m3_round(sig, exp - (int(sc) - 127)));
}

// encode_exact(h, sc) for every h and scale code. Scales from 7 on: branch-free
// (minifloat::fp8_code_from_bf16 with b = sc - 7, zeros and subnormal quotients included; NaN
// keeps a NaN code and inf saturates, selects). Below 7 a bf16 subnormal can be an e4m3
// normal (never in a block that holds one: its amax gives a scale of at least 2^-127): the exact
// core.
DSV4_HD uint8_t encode(uint16_t h, uint8_t sc) {
  if (sc < 7) return encode_exact(h, sc);
  const uint32_t a = h & 0x7fffu, sign = (uint32_t(h) >> 8) & 0x80u;
  const uint32_t m = minifloat::fp8_code_from_bf16(a, sc - 7u, kE4m3MaxCode);
  return uint8_t(sign | (a > 0x7f80u ? kE4m3NaN : a == 0x7f80u ? kE4m3MaxCode : m));
}

// Quantises one block of 32 bf16 bit patterns: q receives the 32 e4m3 codes, the return value is
// the ue8m0 scale code. (The kernels split a block over lanes and call the same pieces.)
DSV4_HD uint8_t quantize_block(const uint16_t* x, uint8_t* q) {
  minifloat::Bf16Amax m = minifloat::bf16_amax_init();
  DSV4_FMT_UNROLL
  for (int i = 0; i < kBlock; ++i) minifloat::bf16_amax_add(m, x[i]);
  const uint8_t sc = block_scale(m);
  DSV4_FMT_UNROLL
  for (int i = 0; i < kBlock; ++i) q[i] = encode(x[i], sc);
  return sc;
}

// The value of e4m3 code c under scale code sc, as fp32 bits: exact, except that a product past the
// fp32 range is infinity and one below it rounds into the fp32 subnormals (to nearest even). A NaN
// code or a NaN scale (0xff) gives the quiet NaN 0x7fc00000 (as a GPU's arithmetic gives it).
// Integer arithmetic only, so no flush-to-zero mode changes it.
DSV4_FMT_NOINLINE DSV4_HD uint32_t decode_exact(uint8_t c, uint8_t sc) {
  if (sc == kUe8m0NaN || e4m3_is_nan(c)) return 0x7fc00000u;
  const minifloat::Parts p = e4m3_parts(c);
  return f32_bits(minifloat::pack_f32(p.sign, p.sig, p.exp + int(sc) - 127));
}

// decode_exact(c, sc) for every code and scale, branch-free: minifloat::fp8_scaled_bits (exact,
// fp32 subnormals and inf included), the sign, and NaN selected for a NaN code or the NaN scale.
DSV4_HD uint32_t decode_bits(uint8_t c, uint8_t sc) {
  const uint32_t m = c & 0x7fu;
  const uint32_t v = (uint32_t(c & 0x80u) << 24) | minifloat::fp8_scaled_bits(m, int(sc) - 6);
  return sc == kUe8m0NaN || m == 0x7fu ? 0x7fc00000u : v;
}

DSV4_HD float decode(uint8_t c, uint8_t sc) { return f32_from_bits(decode_bits(c, sc)); }

// decode_bits(c, sc) rounded once to bf16 (exact but for fp32 subnormals), as bits.
DSV4_HD uint32_t decode_bf16_bits(uint8_t c, uint8_t sc) {
  const uint32_t m = c & 0x7fu;
  const uint32_t v = (uint32_t(c & 0x80u) << 8) |
                     minifloat::f32_bits_to_bf16_rne(minifloat::fp8_scaled_bits(m, int(sc) - 6));
  return sc == kUe8m0NaN || m == 0x7fu ? 0x7fc0u : v;
}
DSV4_HD bf16 decode_bf16(uint8_t c, uint8_t sc) { return bf16{uint16_t(decode_bf16_bits(c, sc))}; }

// The word-at-a-time readers' short path: scales in [7, 246], where a normal e4m3 code (exponent
// field 1..15, the NaN 0x7f / 0xff included) is an fp32 normal whose exponent is the code's plus
// sc - 7 (rebiased) and whose fraction is the code's.
DSV4_HD bool decode_short_scale(uint8_t sc) { return sc >= 7 && sc <= 246; }

// Bit 7 of byte k is set where code k (byte k of the word) is a NaN, 0x7f or 0xff:
// (c & 0x7f) + 1 reaches bit 7 exactly then, and never carries into the next byte.
DSV4_HD uint32_t nan_code_bits(uint32_t codes) {
  return ((codes & 0x7f7f7f7fu) + 0x01010101u) & 0x80808080u;
}

// Whether every code of the word has a nonzero exponent field (normal or NaN): byte-wise,
// (c & 0x78) + 0x78 reaches bit 7 exactly then.
DSV4_HD bool four_exponent_codes(uint32_t codes) {
  return (((codes & 0x78787878u) + 0x78787878u) & 0x80808080u) == 0x80808080u;
}

// The short paths of the word-at-a-time readers: four normal fp8 codes (byte k is code k, 3
// fraction bits) with their exponent and fraction fields moved into fp32's (out[k]) or bf16's
// (out[j]: values 2j and 2j+1), plus `rebias` = (scale code - the format's bias) in the exponent
// field. The caller ensures every result is a normal.
DSV4_HD void move4_bits(uint32_t codes, uint32_t rebias, uint32_t* out) {
  DSV4_FMT_UNROLL
  for (int k = 0; k < 4; ++k) {
    // Code k moved to the top byte, then an arithmetic shift by 4: the sign lands in bit 31 (and
    // copies of it in bits 27..30, masked off), exponent and fraction in bits 20..26.
    const int32_t top = int32_t(codes << (24 - 8 * k));
    out[k] = (uint32_t(top >> 4) & 0x87f00000u) + (rebias << 23);
  }
}

DSV4_HD void move4_bf16(uint32_t codes, uint32_t rebias, uint32_t* out) {
  const uint32_t bias = (rebias << 7) * 0x00010001u;
  DSV4_FMT_UNROLL
  for (int j = 0; j < 2; ++j) {
    const uint32_t c2 = (codes >> (16 * j)) & 0xffffu;  // codes 2j and 2j+1
    const uint32_t x =
        ((c2 & 0xffu) << 8) | ((c2 & 0xff00u) << 16);  // each at bits 8..15 of a half
    out[j] = (x & 0x80008000u) | (((x >> 4) & 0x07f007f0u) + bias);
  }
}

// The bf16 pairs of a word's NaN codes: 0xffff in half h of the result where code 2 j + h is NaN
// (nan = nan_code_bits of the word).
DSV4_HD uint32_t nan_half_mask(uint32_t nan, int j) {
  const uint32_t b = nan >> (16 * j);  // bit 7: code 2j, bit 15: code 2j + 1
  return (((b >> 7) & 1u) | ((b & 0x8000u) << 1)) * 0xffffu;
}

// Word j of a word's bf16 pairs with the halves of its NaN codes set to the NaN 0x7fc0 (nan =
// nan_code_bits of the word; every reader of pairs patches its short path's result this way).
DSV4_HD uint32_t nan_patched_pair(uint32_t pair, uint32_t nan, int j) {
  const uint32_t mask = nan_half_mask(nan, j);
  return (pair & ~mask) | (0x7fc07fc0u & mask);
}

// A word's four fp32 values with those of its NaN codes set to the NaN 0x7fc00000 (nan =
// nan_code_bits of the word, or 0 where the format's NaN cannot reach the short path).
DSV4_HD void nan_patch_bits4(uint32_t nan, uint32_t* out) {
  DSV4_FMT_UNROLL
  for (int k = 0; k < 4; ++k) out[k] = (nan >> (8 * k + 7)) & 1u ? 0x7fc00000u : out[k];
}

// Four codes (byte k is code k) under one scale: out[k] = decode_bits(code k, sc). Short path for
// the scales of decode_short_scale when every exponent field is nonzero: move4_bits, then the NaN
// codes' values replaced by the NaN (selects). Otherwise decode_bits per code (branch-free too).
DSV4_HD void decode4_bits(uint32_t codes, uint8_t sc, uint32_t* out) {
  if (decode_short_scale(sc) && four_exponent_codes(codes)) {
    move4_bits(codes, sc - 7u, out);
    nan_patch_bits4(nan_code_bits(codes), out);
    return;
  }
  DSV4_FMT_UNROLL
  for (int k = 0; k < 4; ++k) out[k] = decode_bits(uint8_t(codes >> (8 * k)), sc);
}

// Four codes under one scale as bf16: out[j] holds values 2j (low half) and 2j+1 (high half), each
// decode_bf16(code, sc). On the short path the fp32 value has 4 significant bits, so its bf16 is
// its top half: sign, then exponent and fraction shifted into place, for two values at once; the
// halves of NaN codes then take 0x7fc0 through a mask.
DSV4_HD void decode4_bf16(uint32_t codes, uint8_t sc, uint32_t* out) {
  if (decode_short_scale(sc) && four_exponent_codes(codes)) {
    move4_bf16(codes, sc - 7u, out);
    const uint32_t nan = nan_code_bits(codes);
    DSV4_FMT_UNROLL
    for (int j = 0; j < 2; ++j) out[j] = nan_patched_pair(out[j], nan, j);
    return;
  }
  DSV4_FMT_UNROLL
  for (int j = 0; j < 2; ++j)
    out[j] = decode_bf16_bits(uint8_t(codes >> (16 * j)), sc) |
             (decode_bf16_bits(uint8_t(codes >> (16 * j + 8)), sc) << 16);
}

}  // namespace dsv4::mxfp8

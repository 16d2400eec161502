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
// Every function below is exact integer arithmetic. The common cases take a short path (a few
// integer operations on the bit patterns); everything else goes through the exact core; the unit
// tests check that both give the same result on every input.

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

// The per-block constant of the short path: v = |h| - bias = (e8 << 7) | f, with e8 the biased e4m3
// exponent of the quotient and f the 7 bf16 fraction bits. For scales outside [7, 246] a bf16 zero,
// subnormal, infinity or NaN could land in the short path's range, so those scales never take it.
DSV4_HD uint32_t encode_bias(uint8_t sc) {
  return sc >= 7 && sc <= 246 ? uint32_t(sc - 7) << 7 : 0x80000000u;
}

// encode_exact(h, sc), with bias = encode_bias(sc). Short path: the quotient is an e4m3 normal
// below 464 (v in [0x80, 0x7e8]), so the code is v with 3 of its 7 fraction bits kept, rounded to
// nearest even (a carry moves into the exponent).
DSV4_HD uint8_t encode(uint16_t h, uint8_t sc, uint32_t bias) {
  const uint32_t v = (h & 0x7fffu) - bias;
  if (v - 0x80u <= 0x768u)
    return uint8_t(((uint32_t(h) >> 8) & 0x80u) | ((v + 7u + ((v >> 4) & 1u)) >> 4));
  return encode_exact(h, sc);
}

DSV4_HD uint8_t encode(uint16_t h, uint8_t sc) { return encode(h, sc, encode_bias(sc)); }

// Quantises one block of 32 bf16 bit patterns: q receives the 32 e4m3 codes, the return value is
// the ue8m0 scale code. (The kernels split a block over lanes and call the same pieces.)
DSV4_HD uint8_t quantize_block(const uint16_t* x, uint8_t* q) {
  minifloat::Bf16Amax m = minifloat::bf16_amax_init();
  DSV4_FMT_UNROLL
  for (int i = 0; i < kBlock; ++i) minifloat::bf16_amax_add(m, x[i]);
  const uint8_t sc = block_scale(m);
  const uint32_t bias = encode_bias(sc);
  DSV4_FMT_UNROLL
  for (int i = 0; i < kBlock; ++i) q[i] = encode(x[i], sc, bias);
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

// Short path of decoding: for scales in [7, 246] a normal e4m3 code (magnitude 0x08..0x7e) is an
// fp32 normal whose exponent is the code's plus sc - 7 (rebiased) and whose fraction is the code's.
DSV4_HD bool decode_short_scale(uint8_t sc) { return sc >= 7 && sc <= 246; }

DSV4_HD uint32_t decode_bits(uint8_t c, uint8_t sc) {
  if (decode_short_scale(sc) && uint32_t(c & 0x7fu) - 8u <= 0x76u)
    return (uint32_t(c & 0x80u) << 24) | ((uint32_t(c & 0x7fu) << 20) + (uint32_t(sc - 7) << 23));
  return decode_exact(c, sc);
}

DSV4_HD float decode(uint8_t c, uint8_t sc) { return f32_from_bits(decode_bits(c, sc)); }
// The bf16 output is the fp32 value rounded once to bf16 (exact but for fp32 subnormals).
DSV4_HD bf16 decode_bf16(uint8_t c, uint8_t sc) { return f32_to_bf16(decode(c, sc)); }

// Whether all four codes of a word (byte k is code k) are e4m3 normals that are not NaN: byte-wise,
// (c & 0x78) + 0x78 reaches bit 7 exactly when the exponent is not 0, and (c & 0x7f) + 1 reaches it
// exactly when the magnitude is 0x7f; neither carries into the next byte.
DSV4_HD bool four_normal_codes(uint32_t codes) {
  const bool normal = (((codes & 0x78787878u) + 0x78787878u) & 0x80808080u) == 0x80808080u;
  const bool nan = (((codes & 0x7f7f7f7fu) + 0x01010101u) & 0x80808080u) != 0;
  return normal && !nan;
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

// Four codes (byte k is code k) under one scale: out[k] = decode_bits(code k, sc).
DSV4_HD void decode4_bits(uint32_t codes, uint8_t sc, uint32_t* out) {
  if (decode_short_scale(sc) && four_normal_codes(codes)) return move4_bits(codes, sc - 7u, out);
  DSV4_FMT_UNROLL
  for (int k = 0; k < 4; ++k) out[k] = decode_bits(uint8_t(codes >> (8 * k)), sc);
}

// Four codes under one scale as bf16: out[j] holds values 2j (low half) and 2j+1 (high half), each
// decode_bf16(code, sc). On the short path the fp32 value has 4 significant bits, so its bf16 is
// its top half: sign, then exponent and fraction shifted into place, for two values at once.
DSV4_HD void decode4_bf16(uint32_t codes, uint8_t sc, uint32_t* out) {
  if (decode_short_scale(sc) && four_normal_codes(codes)) return move4_bf16(codes, sc - 7u, out);
  DSV4_FMT_UNROLL
  for (int j = 0; j < 2; ++j)
    out[j] = uint32_t(decode_bf16(uint8_t(codes >> (16 * j)), sc).bits) |
             (uint32_t(decode_bf16(uint8_t(codes >> (16 * j + 8)), sc).bits) << 16);
}

}  // namespace dsv4::mxfp8

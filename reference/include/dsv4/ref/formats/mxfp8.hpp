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

// Exponent e for a block maximum amax >= 0 (not NaN). Integer arithmetic: with amax = 1.f * 2^k,
// amax / 448 = (1.f / 1.75) * 2^(k-8), whose ceil-log2 is k - 8, plus one when 1.f > 1.75.
DSV4_HD int scale_exponent(float amax) {
  if (minifloat::f32_is_inf(amax)) return kUe8m0MaxExp;
  const uint32_t u = f32_bits(amax) & 0x7fffffffu;
  const int be = int(u >> 23);
  if (be == 0) return kUe8m0MinExp;  // zero and fp32 subnormals: below 448 * 2^-128
  const int e = be - 127 - 8 + ((u & 0x7fffffu) > 0x600000u ? 1 : 0);
  return e < kUe8m0MinExp ? kUe8m0MinExp : e > kUe8m0MaxExp ? kUe8m0MaxExp : e;
}

DSV4_HD uint8_t scale_code(float amax) { return ue8m0_from_exp(scale_exponent(amax)); }

// The e4m3 code of the bf16 value h (bit pattern) divided by the block scale 2^(sc-127). For the
// common case, a normal bf16 whose quotient is an e4m3 normal, the code is the bf16 exponent and
// fraction rebiased and rounded (3 of 7 fraction bits kept, ties to even); the rare cases go
// through the exact core (e4m3_round). Integer arithmetic only; equal to e4m3_round on every input.
DSV4_HD uint8_t encode(uint16_t h, uint8_t sc) {
  const uint32_t sign = (uint32_t(h) >> 8) & 0x80u;
  const uint32_t a = minifloat::bf16_magnitude(h);
  if (a >= 0x7f80u) return uint8_t(sign | (a == 0x7f80u ? kE4m3MaxCode : kE4m3NaN));
  if (a < 0x80u) return uint8_t(sign | e4m3_round(a, -133 - (int(sc) - 127)));  // 0, subnormal
  const int e8 = int(a >> 7) - int(sc) + 7;  // biased e4m3 exponent of the quotient
  uint32_t code;
  if (e8 >= 1) {
    if (e8 > 15) return uint8_t(sign | kE4m3MaxCode);
    const uint32_t v = (uint32_t(e8) << 7) | (a & 0x7fu);
    code = (v + 7u + ((v >> 4) & 1u)) >> 4;  // a carry moves into the exponent
    if (code > kE4m3MaxCode) code = kE4m3MaxCode;
  } else {
    // e4m3 subnormal: n = (128 + f) * 2^(e8 - 5), the multiple of 2^-9, rounded to nearest even.
    const int r = 5 - e8;
    const uint32_t sig = 0x80u | (a & 0x7fu);
    code = r > 8 ? 0u : (sig + (1u << (r - 1)) - 1u + ((sig >> r) & 1u)) >> r;
  }
  return uint8_t(sign | code);
}

// Quantises one block of 32 bf16 bit patterns: q receives the 32 e4m3 codes, the return value is
// the ue8m0 scale code.
DSV4_HD uint8_t quantize_block(const uint16_t* x, uint8_t* q) {
  uint32_t amax = 0;
  DSV4_UNROLL
  for (int i = 0; i < kBlock; ++i) {
    const uint32_t a = minifloat::bf16_magnitude(x[i]);
    if (a <= 0x7f80u && a > amax) amax = a;
  }
  const uint8_t sc = scale_code(f32_from_bits(amax << 16));
  DSV4_UNROLL
  for (int i = 0; i < kBlock; ++i) q[i] = encode(x[i], sc);
  return sc;
}

// The value of e4m3 code c under scale code sc, as fp32 bits: exact, except that a product past the
// fp32 range is infinity and one below it rounds into the fp32 subnormals (to nearest even). A NaN
// code gives 0x7fc00000 with the code's sign; a NaN scale (0xff) gives 0x7fc00000. Integer
// arithmetic only, so no flush-to-zero mode changes it.
DSV4_HD uint32_t decode_bits(uint8_t c, uint8_t sc) {
  if (sc == kUe8m0NaN) return 0x7fc00000u;
  const uint32_t sign = uint32_t(c >> 7) << 31;
  if (e4m3_is_nan(c)) return 0x7fc00000u | sign;
  const uint32_t m = c & 0x7fu;
  if (m >= 8u) {
    const int e = int(m >> 3) + int(sc) - 7;  // biased fp32 exponent of 1.f * 2^(E-7) * 2^(sc-127)
    if (e >= 1 && e <= 254) return sign | (uint32_t(e) << 23) | ((m & 7u) << 20);
  }
  const minifloat::Parts p = e4m3_parts(c);
  return f32_bits(minifloat::pack_f32(p.sign, p.sig, p.exp + int(sc) - 127));
}

DSV4_HD float decode(uint8_t c, uint8_t sc) { return f32_from_bits(decode_bits(c, sc)); }
// The bf16 output is the fp32 value rounded once to bf16 (exact but for fp32 subnormals).
DSV4_HD bf16 decode_bf16(uint8_t c, uint8_t sc) { return f32_to_bf16(decode(c, sc)); }

}  // namespace dsv4::mxfp8

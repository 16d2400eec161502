// fp4 e2m1 (OCP MX FP4): exact decode, round-to-nearest-even saturating encode, nibble packing.
// Host and device, C++17.
#pragma once

#include <cstdint>

#include "dsv4/ref/formats/minifloat.hpp"

namespace dsv4 {

// Layout (low 4 bits of a code): sign | 2 exponent bits (bias 1) | 1 fraction bit. Magnitudes by
// code 0..7: 0, 0.5, 1, 1.5, 2, 3, 4, 6. No infinity and no NaN.
inline constexpr uint8_t kE2m1MaxCode = 0x7;  // +6
inline constexpr float kE2m1Max = 6.0f;

// Magnitude code c (0..7) as n * 2^exp with n an integer (exact).
DSV4_HD minifloat::Parts e2m1_parts(uint8_t c) {
  minifloat::Parts p;
  p.sign = (c >> 3) & 1u;
  const uint32_t e = (c >> 1) & 3u, m = c & 1u;
  p.sig = e == 0 ? m : (2u | m);
  p.exp = e == 0 ? -1 : int(e) - 2;
  return p;
}

// fp32 bits of the magnitude of code c (0..7): 0.5 for 1; from 2 on the exponent and fraction
// fields move up into fp32's, rebiased from 1 to 127.
DSV4_HD uint32_t e2m1_magnitude_bits(uint8_t c) {
  c &= 7u;
  return c >= 2 ? (uint32_t(c) << 22) + (126u << 23) : c == 1 ? 0x3f000000u : 0u;
}

// Exact value of the low nibble of c.
DSV4_HD float e2m1_to_f32(uint8_t c) {
  return f32_from_bits(e2m1_magnitude_bits(c) | (uint32_t((c >> 3) & 1u) << 31));
}

// Magnitude code of RNE(sig * 2^exp / div), saturating at 6.
DSV4_HD uint8_t e2m1_round(uint32_t sig, int exp, uint32_t div = 1) {
  return uint8_t(minifloat::round_to_code<1, 0>(sig, exp, div, kE2m1MaxCode));
}

// Round to nearest, ties to even (0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4,
// 5 -> 4); values past 6 and +-inf saturate to +-6. e2m1 has no NaN: NaN encodes as +0 (block
// formats that must keep a NaN visible carry it in their scale, as NVFP4 pages do).
DSV4_HD uint8_t f32_to_e2m1(float x) {
  if (minifloat::f32_is_nan(x)) return 0;
  const minifloat::Parts p = minifloat::f32_parts(x);
  const uint8_t sign = uint8_t(p.sign << 3);
  if (minifloat::f32_is_inf(x)) return sign | kE2m1MaxCode;
  return sign | e2m1_round(p.sig, p.exp);
}

// Two codes in one byte: element 2i in the low nibble, element 2i+1 in the high nibble.
DSV4_HD uint8_t e2m1_pack(uint8_t even, uint8_t odd) {
  return uint8_t((even & 0xfu) | ((odd & 0xfu) << 4));
}
DSV4_HD uint8_t e2m1_lo(uint8_t byte) { return byte & 0xfu; }
DSV4_HD uint8_t e2m1_hi(uint8_t byte) { return byte >> 4; }

}  // namespace dsv4

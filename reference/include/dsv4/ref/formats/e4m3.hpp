// fp8 e4m3 in the OCP "fn" variant: exact decode, round-to-nearest-even saturating encode. Host and
// device, C++17.
#pragma once

#include <cstdint>

#include "dsv4/ref/formats/minifloat.hpp"

namespace dsv4 {

// Layout: sign | 4 exponent bits (bias 7) | 3 fraction bits. Exponent 0 holds the subnormals
// m * 2^-9; S.1111.111 (0x7f, 0xff) is NaN, the only special pattern: there is no infinity, and
// S.1111.110 is the largest finite value, 448. Smallest normal 2^-6, smallest subnormal 2^-9.
inline constexpr uint8_t kE4m3MaxCode = 0x7e;  // +448
inline constexpr uint8_t kE4m3NaN = 0x7f;
inline constexpr float kE4m3Max = 448.0f;

DSV4_HD bool e4m3_is_nan(uint8_t c) { return (c & 0x7fu) == 0x7fu; }

// Magnitude code c (0..126) as n * 2^exp with n an integer (exact).
DSV4_HD minifloat::Parts e4m3_parts(uint8_t c) {
  minifloat::Parts p;
  p.sign = c >> 7;
  const uint32_t e = (c >> 3) & 0xfu, m = c & 7u;
  p.sig = e == 0 ? m : (8u | m);
  p.exp = e == 0 ? -9 : int(e) - 10;
  return p;
}

// Exact value; NaN codes give a quiet fp32 NaN with the code's sign (0x7fc00000 | sign).
DSV4_HD float e4m3_to_f32(uint8_t c) {
  const uint32_t sign = uint32_t(c >> 7) << 31;
  if (e4m3_is_nan(c)) return f32_from_bits(0x7fc00000u | sign);
  // Normal: the exponent and fraction fields move up into fp32's, rebiased from 7 to 127.
  if (c & 0x78u) return f32_from_bits(sign | ((uint32_t(c & 0x7fu) << 20) + (120u << 23)));
  const minifloat::Parts p = e4m3_parts(c);
  return minifloat::pack_f32(p.sign, p.sig, p.exp);
}

// Magnitude code of RNE(sig * 2^exp / div), saturating at 448 (what the OCP MX specification asks
// of a conversion whose result is out of range). Integer arithmetic only.
DSV4_HD uint8_t e4m3_round(uint32_t sig, int exp, uint32_t div = 1) {
  return uint8_t(minifloat::round_to_code<3, -6>(sig, exp, div, kE4m3MaxCode));
}

// Round to nearest, ties to even. Finite values past 448 after rounding and +-inf saturate to
// +-448; NaN gives the NaN pattern with the input's sign; -0 and negative values that round to
// zero give 0x80.
DSV4_HD uint8_t f32_to_e4m3(float x) {
  const minifloat::Parts p = minifloat::f32_parts(x);
  const uint8_t sign = uint8_t(p.sign << 7);
  if (minifloat::f32_is_nan(x)) return sign | kE4m3NaN;
  if (minifloat::f32_is_inf(x)) return sign | kE4m3MaxCode;
  return sign | e4m3_round(p.sig, p.exp);
}

}  // namespace dsv4

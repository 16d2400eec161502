// fp8 e4m3 in the "fnuz" variant of AMD gfx942 (torch.float8_e4m3fnuz): exact decode and
// round-to-nearest-even encode. Host and device, C++17.
#pragma once

#include <cstdint>

#include "dsv4/ref/formats/minifloat.hpp"

namespace dsv4 {

// Layout: sign | 4 exponent bits (bias 8) | 3 fraction bits. Exponent 0 holds the subnormals
// m * 2^-10; 0x80 (negative zero's pattern) is the only NaN; there is no infinity and no -0.
// Largest value 0x7f = 240, smallest normal 2^-7, smallest subnormal 2^-10.
inline constexpr uint8_t kE4m3fnuzMaxCode = 0x7f;  // +240
inline constexpr uint8_t kE4m3fnuzNaN = 0x80;
inline constexpr float kE4m3fnuzMax = 240.0f;

DSV4_HD bool e4m3fnuz_is_nan(uint8_t c) { return c == kE4m3fnuzNaN; }

// Magnitude code c (0..127) as n * 2^exp with n an integer (exact).
DSV4_HD minifloat::Parts e4m3fnuz_parts(uint8_t c) {
  minifloat::Parts p;
  p.sign = c >> 7;
  const uint32_t e = (c >> 3) & 0xfu, m = c & 7u;
  p.sig = e == 0 ? m : (8u | m);
  p.exp = e == 0 ? -10 : int(e) - 11;
  return p;
}

// Exact value; 0x80 gives the quiet fp32 NaN 0x7fc00000.
DSV4_HD float e4m3fnuz_to_f32(uint8_t c) {
  if (e4m3fnuz_is_nan(c)) return f32_from_bits(0x7fc00000u);
  const minifloat::Parts p = e4m3fnuz_parts(c);
  return minifloat::pack_f32(p.sign, p.sig, p.exp);
}

// Magnitude code of RNE(sig * 2^exp / div), saturating at 240. Integer arithmetic only.
DSV4_HD uint8_t e4m3fnuz_round(uint32_t sig, int exp, uint32_t div = 1) {
  return uint8_t(minifloat::round_to_code<3, -7>(sig, exp, div, kE4m3fnuzMaxCode));
}

// A sign and a magnitude code as a byte: zero has no sign (0x80 is NaN).
DSV4_HD uint8_t e4m3fnuz_signed(uint32_t sign, uint32_t mag) {
  return uint8_t(mag == 0 ? 0u : (sign << 7) | mag);
}

// Round to nearest, ties to even; past 240 and +-inf saturate to +-240; NaN gives 0x80; -0 and
// negative values that round to zero give 0x00.
DSV4_HD uint8_t f32_to_e4m3fnuz(float x) {
  if (minifloat::f32_is_nan(x)) return kE4m3fnuzNaN;
  const minifloat::Parts p = minifloat::f32_parts(x);
  if (minifloat::f32_is_inf(x)) return e4m3fnuz_signed(p.sign, kE4m3fnuzMaxCode);
  return e4m3fnuz_signed(p.sign, e4m3fnuz_round(p.sig, p.exp));
}

}  // namespace dsv4

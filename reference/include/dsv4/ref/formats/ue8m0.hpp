// ue8m0: the OCP MX shared scale, a bare biased exponent 2^(code-127); exact decode and the
// floor / ceil / nearest encoders. Host and device, C++17.
#pragma once

#include <cstdint>

#include "dsv4/ref/formats/minifloat.hpp"

namespace dsv4 {

// Codes 0..254 are 2^-127 .. 2^127 (0 is the fp32 subnormal 0x00400000); 0xff is NaN. There is no
// zero, no sign and no infinity.
inline constexpr uint8_t kUe8m0NaN = 0xff;
inline constexpr int kUe8m0MinExp = -127;
inline constexpr int kUe8m0MaxExp = 127;

DSV4_HD float ue8m0_to_f32(uint8_t c) {
  if (c == kUe8m0NaN) return f32_from_bits(0x7fc00000u);
  return f32_from_bits(c == 0 ? 0x00400000u : uint32_t(c) << 23);
}

// The code of 2^e, e clamped to [-127, 127] (saturation).
DSV4_HD uint8_t ue8m0_from_exp(int e) {
  e = e < kUe8m0MinExp ? kUe8m0MinExp : e > kUe8m0MaxExp ? kUe8m0MaxExp : e;
  return uint8_t(e + 127);
}

DSV4_HD int ue8m0_exp(uint8_t c) { return int(c) - 127; }

// Encoders of |x| (a scale has no sign; the sign of x is ignored). NaN gives 0xff, +-inf and values
// past 2^127 saturate to 2^127 (254), zero and values below 2^-127 clamp to 2^-127 (0).
enum class Ue8m0Round { kFloor, kCeil, kNearest };

// floor: the largest 2^e <= |x|; ceil: the smallest 2^e >= |x|; nearest: the closer of the two
// (linear distance; at |x| = 1.5 * 2^k, exactly between, the even code wins).
DSV4_HD uint8_t f32_to_ue8m0(float x, Ue8m0Round mode) {
  if (minifloat::f32_is_nan(x)) return kUe8m0NaN;
  if (minifloat::f32_is_inf(x)) return ue8m0_from_exp(kUe8m0MaxExp);
  const minifloat::Parts p = minifloat::f32_parts(x);
  if (p.sig == 0) return ue8m0_from_exp(kUe8m0MinExp);
  const int msb = minifloat::msb_index(p.sig);
  const int fl = msb + p.exp;                 // floor(log2 |x|)
  const uint32_t frac = p.sig - (1u << msb);  // |x| = (2^msb + frac) * 2^exp
  const bool pow2 = frac == 0;
  int e = fl;
  if (mode == Ue8m0Round::kCeil && !pow2) e = fl + 1;
  if (mode == Ue8m0Round::kNearest && msb > 0) {
    const uint32_t half = 1u << (msb - 1);  // 1.5 * 2^fl is 2^msb + half
    if (frac > half) e = fl + 1;
    if (frac == half && ((fl + 127) & 1)) e = fl + 1;  // tie: the even code
  }
  return ue8m0_from_exp(e);
}

}  // namespace dsv4

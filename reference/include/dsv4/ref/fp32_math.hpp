// exp2 and log2 in fp32 written with +, -, *, / and bit operations only, so host references and
// device kernels compute them bit for bit alike (contraction off on both sides). Host and device.
#pragma once

#include <math.h>

#include <cstdint>

#include "dsv4/ref/formats/bf16.hpp"
#include "dsv4/ref/formats/hd.hpp"

namespace dsv4::f32m {

inline constexpr float kLog2e = 1.44269504088896340736f;  // log2(e), rounded to fp32
inline constexpr uint32_t kQuietNaN = 0x7fc00000u;

DSV4_HD float inf() { return f32_from_bits(0x7f800000u); }
DSV4_HD float nan() { return f32_from_bits(kQuietNaN); }

// 2^x. NaN gives the quiet NaN 0x7fc00000, x >= 128 gives +inf, x < -150 gives +0. Otherwise
// x = n + f with n = floor(x + 0.5) and f = x - n (exact, |f| <= 0.5 + 2^-24), 2^f by the
// degree-7 Taylor polynomial of e^(f ln 2) in Horner form (truncation below 6e-9 relative), and
// the product with 2^n formed from bits (two steps below 2^-126, so a subnormal result rounds
// once, and at n = 128). Error against the exact value: a few ulp (bounded in
// unit/reference/test_split_combine).
DSV4_HD float exp2(float x) {
  if (!(x == x)) return nan();
  if (x >= 128.0f) return inf();
  if (x < -150.0f) return 0.0f;
  const float n = floorf(x + 0.5f);
  const float f = x - n;
  float p = 1.5252733804059840e-05f;  // ln2^7 / 7!
  p = p * f + 1.5403530393381610e-04f;
  p = p * f + 1.3333558146428443e-03f;
  p = p * f + 9.6181291076284772e-03f;
  p = p * f + 5.5504108664821580e-02f;
  p = p * f + 2.4022650695910071e-01f;
  p = p * f + 6.9314718055994531e-01f;
  p = p * f + 1.0f;
  const int e = int(n);
  if (e == 128) return (p * 2.0f) * f32_from_bits(uint32_t(127 + 127) << 23);  // x in [127.5, 128)
  if (e >= -126) return p * f32_from_bits(uint32_t(e + 127) << 23);
  return (p * f32_from_bits(uint32_t(e + 64 + 127) << 23)) *
         f32_from_bits(uint32_t(127 - 64) << 23);
}

// log2(x). NaN or x < 0 gives the quiet NaN, +-0 gives -inf, +inf gives +inf. Otherwise
// x = 2^e * m with m in [sqrt(1/2), sqrt(2)] (subnormals scaled by 2^23 first), s = (m-1)/(m+1)
// (m - 1 exact, one correctly rounded division), ln m = 2s + 2s * s^2 * (1/3 + s^2/5 + s^2^2/7 +
// s^2^3/9 + s^2^4/11) (truncation below 1e-9 relative for |s| <= 0.1716), log2 x = e + ln m *
// log2(e). Error: a few ulp of the result, or of 2^-24 when the result is near 0.
DSV4_HD float log2(float x) {
  if (!(x == x) || x < 0.0f) return nan();
  if (x == 0.0f) return -inf();
  uint32_t u = f32_bits(x);
  if (u == 0x7f800000u) return inf();
  int e = 0;
  if (u < 0x00800000u) {
    x = x * 8388608.0f;  // 2^23, exact
    u = f32_bits(x);
    e = -23;
  }
  e += int(u >> 23) - 127;
  float m = f32_from_bits((u & 0x007fffffu) | 0x3f800000u);
  if (m > 1.41421356f) {
    m = m * 0.5f;
    e += 1;
  }
  const float s = (m - 1.0f) / (m + 1.0f);
  const float s2 = s * s;
  float p = 1.0f / 11.0f;
  p = p * s2 + 1.0f / 9.0f;
  p = p * s2 + 1.0f / 7.0f;
  p = p * s2 + 1.0f / 5.0f;
  p = p * s2 + 1.0f / 3.0f;
  const float two_s = s + s;
  const float ln_m = two_s + (two_s * s2) * p;
  return float(e) + ln_m * kLog2e;
}

// f32 -> bf16 with every NaN written as 0x7fc0 (devices differ in the NaN bits they produce).
DSV4_HD bf16 to_bf16_canonical(float v) {
  if (!(v == v)) return bf16{0x7fc0};
  return f32_to_bf16(v);
}

}  // namespace dsv4::f32m

// fp64 codec oracles: definitions and nearest-value searches (see dsv4/ref/formats/fp64.hpp).
#include "dsv4/ref/formats/fp64.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace dsv4::fp64 {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Nearest magnitude code in [0, max_code] of |x| / scale, given the magnitude of each code.
template <class Value>
uint8_t nearest_code(double ax, double scale, int max_code, Value value) {
  int lo = 0;  // the largest code whose value * scale <= ax
  for (int k = 1; k <= max_code; ++k)
    if (value(k) * scale <= ax) lo = k;
  if (lo == max_code) return uint8_t(max_code);  // at or past the largest value: saturate
  // ax lies in [v_lo, v_lo+1) and v_lo+1 <= 2 v_lo (or v_lo = 0): both differences are exact.
  const double d_lo = ax - value(lo) * scale, d_hi = value(lo + 1) * scale - ax;
  if (d_lo < d_hi) return uint8_t(lo);
  if (d_hi < d_lo) return uint8_t(lo + 1);
  return uint8_t(lo % 2 == 0 ? lo : lo + 1);
}

}  // namespace

double bf16_value(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return double(f);
}

double e4m3_value(uint8_t c) {
  const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return kNaN;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

double e2m1_value(uint8_t c) {
  const int s = (c >> 3) & 1, e = (c >> 1) & 3, m = c & 1;
  const double mag = e == 0 ? m / 2.0 : std::ldexp(1.0 + m / 2.0, e - 1);
  return s ? -mag : mag;
}

double e4m3fnuz_value(uint8_t c) {
  if (c == 0x80) return kNaN;
  const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -7) : std::ldexp(1.0 + m / 8.0, e - 8);
  return s ? -mag : mag;
}

double ue8m0_value(uint8_t c) { return c == 0xff ? kNaN : std::ldexp(1.0, int(c) - 127); }

uint8_t e4m3_nearest(double x, double scale) {
  static const auto table = [] {  // the definition, evaluated once per code
    struct T {
      double v[0x7f];
    } t;
    for (int k = 0; k < 0x7f; ++k) t.v[k] = e4m3_value(uint8_t(k));
    return t;
  }();
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return sign | 0x7f;
  if (std::isinf(x)) return sign | 0x7e;
  return sign | nearest_code(std::fabs(x), scale, 0x7e, [](int k) { return table.v[k]; });
}

uint8_t e2m1_nearest(double x, double scale) {
  if (std::isnan(x)) return 0;
  const uint8_t sign = std::signbit(x) ? 0x8 : 0;
  if (std::isinf(x)) return sign | 0x7;
  return sign | nearest_code(std::fabs(x), scale, 7, [](int k) { return e2m1_value(k); });
}

uint8_t e4m3fnuz_nearest(double x, double scale) {
  if (std::isnan(x)) return 0x80;
  const uint8_t mag =
      std::isinf(x) ? uint8_t(0x7f) : nearest_code(std::fabs(x), scale, 0x7f, [](int k) {
        return e4m3fnuz_value(uint8_t(k));
      });
  return mag == 0 ? 0 : uint8_t((std::signbit(x) ? 0x80 : 0) | mag);
}

uint8_t ue8m0_floor(double x) {
  if (std::isnan(x)) return 0xff;
  const double ax = std::fabs(x);
  int best = 0;
  for (int c = 0; c <= 254; ++c)
    if (ue8m0_value(c) <= ax) best = c;
  return uint8_t(best);
}

uint8_t ue8m0_ceil(double x) {
  if (std::isnan(x)) return 0xff;
  const double ax = std::fabs(x);
  for (int c = 0; c <= 254; ++c)
    if (ue8m0_value(c) >= ax) return uint8_t(c);
  return 254;
}

uint8_t ue8m0_nearest(double x) {
  if (std::isnan(x)) return 0xff;
  return nearest_code(std::fabs(x), 1.0, 254, [](int k) { return ue8m0_value(k); });
}

int mxfp8_scale_exponent(double amax) {
  if (std::isinf(amax)) return 127;
  if (amax == 0) return -127;
  const double e = std::ceil(std::log2(amax / 448.0));
  return e < -127 ? -127 : e > 127 ? 127 : int(e);
}

uint8_t nvfp4_scale_code(double amax) { return e4m3_nearest(amax, 6.0); }

}  // namespace dsv4::fp64

// Independent fp64 formulations of the codecs: value tables written from each format's definition
// and nearest-value searches with explicit ties. Slow, host only; the oracles the exact integer
// codecs (and the compact_pages fp64 reference) are checked against.
#pragma once

#include <cstdint>

namespace dsv4::fp64 {

// Values from the definitions (NaN patterns give NaN).
double bf16_value(uint16_t h);
double e4m3_value(uint8_t c);      // (-1)^s * 2^(E-7) * (1 + m/8); E = 0: (-1)^s * 2^-6 * m/8
double e2m1_value(uint8_t c);      // low nibble: (-1)^s * 2^(E-1) * (1 + m/2); E = 0: (-1)^s * m/2
double ue8m0_value(uint8_t c);     // 2^(c-127)
double e4m3fnuz_value(uint8_t c);  // 0x80 NaN; (-1)^s * 2^(E-8) * (1 + m/8); E = 0: 2^-7 * m/8

// The magnitude code k minimising | |x| - value_k * scale | over the finite codes (scale > 0,
// value_k * scale exact in fp64), found by a linear search; at equal distance the even code. This
// is round-to-nearest-even of |x| / scale with saturation at the largest finite value. Signs, NaN
// and infinity follow the format: e4m3 NaN -> 0x7f | sign, +-inf -> +-448; e2m1 NaN -> 0, +-inf ->
// +-6.
uint8_t e4m3_nearest(double x, double scale = 1.0);
uint8_t e2m1_nearest(double x, double scale = 1.0);
// e4m3fnuz: NaN -> 0x80, +-inf -> +-240, a result of magnitude 0 has no sign (0x00).
uint8_t e4m3fnuz_nearest(double x, double scale = 1.0);

// ue8m0 encoders of |x| by search over 2^-127 .. 2^127 (NaN -> 0xff; 0 -> code 0).
uint8_t ue8m0_floor(double x);
uint8_t ue8m0_ceil(double x);
uint8_t ue8m0_nearest(double x);  // linear distance; a tie gives the even code

// Block scales: MXFP8 e = ceil(log2(amax / 448)) through std::log2 and std::ceil, clamped to
// [-127, 127] (amax 0 -> -127, inf -> 127); NVFP4 e4m3_nearest(amax, 6).
int mxfp8_scale_exponent(double amax);
uint8_t nvfp4_scale_code(double amax);

}  // namespace dsv4::fp64

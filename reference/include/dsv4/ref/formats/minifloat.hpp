// Exact integer core of the small-float codecs: fp32 decomposition, round-to-nearest-even of an
// exact rational onto a minifloat grid, and exact packing into fp32. Host and device, C++17.
#pragma once

#include <cstdint>

#include "dsv4/ref/formats/bf16.hpp"
#include "dsv4/ref/formats/hd.hpp"

// Unrolls a fixed-trip loop in device code (the host compiler of a GPU build, like GCC in a host
// build, would warn about the pragma).
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define DSV4_FMT_UNROLL _Pragma("unroll")
#else
#define DSV4_FMT_UNROLL
#endif

// Keeps a rare, long fallback out of line, so the common path of a loop stays small.
#define DSV4_FMT_NOINLINE __attribute__((noinline))

namespace dsv4::minifloat {

// Every function here works on integers only, so its result does not depend on the floating-point
// environment (flush-to-zero, contraction, division accuracy) of the compiler or device.

// Index of the highest set bit of v (v != 0).
DSV4_HD int msb_index(uint32_t v) {
  int r = 0;
  if (v >> 16) v >>= 16, r += 16;
  if (v >> 8) v >>= 8, r += 8;
  if (v >> 4) v >>= 4, r += 4;
  if (v >> 2) v >>= 2, r += 2;
  if (v >> 1) r += 1;
  return r;
}

// Byte k of the result is byte (s >> 4k) & 7 of the 8 bytes y:x, or where bit 3 of that selector
// nibble is set, that byte's top bit replicated (0x00 or 0xff): PTX prmt's default mode. On NVIDIA
// one PRMT written as PTX (CUDA's __byte_perm masks the sign bit off), elsewhere shifts.
DSV4_HD uint32_t byte_perm_sx(uint32_t x, uint32_t y, uint32_t s) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(s));
  return r;
#else
  const uint64_t xy = (uint64_t(y) << 32) | x;
  uint32_t r = 0;
  for (int k = 0; k < 4; ++k) {
    const uint32_t nib = (s >> (4 * k)) & 0xfu;
    const uint32_t b = uint32_t(xy >> (8 * (nib & 7u))) & 0xffu;
    r |= (nib & 8u ? (b & 0x80u ? 0xffu : 0u) : b) << (8 * k);
  }
  return r;
#endif
}

// The same without the sign mode: byte k is byte (s >> 4k) & 7 of y:x (CUDA's __byte_perm, one
// PRMT the compiler can fold). Elsewhere shifts (HIP's __byte_perm indexes a byte array, which
// the compiler keeps in LDS).
DSV4_HD uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(x, y, s);
#else
  return byte_perm_sx(x, y, s & 0x7777u);
#endif
}

// |x| = sig * 2^exp for a finite fp32 x (sig < 2^24; sig = 0 for zero); sign is 0 or 1.
struct Parts {
  uint32_t sign;
  uint32_t sig;
  int exp;
};

DSV4_HD Parts f32_parts(float x) {
  const uint32_t u = f32_bits(x);
  const uint32_t e = (u >> 23) & 0xffu, m = u & 0x7fffffu;
  Parts p;
  p.sign = u >> 31;
  p.sig = e == 0 ? m : (m | 0x800000u);
  p.exp = e == 0 ? -149 : int(e) - 150;
  return p;
}

// A bf16 bit pattern's magnitude bits (sign cleared): ordered like the magnitudes, NaN above
// 0x7f80 (infinity).
DSV4_HD uint32_t bf16_magnitude(uint16_t h) { return h & 0x7fffu; }
DSV4_HD bool bf16_bits_nan(uint16_t h) { return (h & 0x7fffu) > 0x7f80u; }

// The largest magnitude of a block of bf16 values, NaN excluded, kept as bf16 magnitude bits, and
// whether a NaN was seen. Partial maxima (of the lanes sharing a block) combine with merge().
struct Bf16Amax {
  uint32_t bits;
  bool nan;
};
DSV4_HD Bf16Amax bf16_amax_init() { return Bf16Amax{0u, false}; }
DSV4_HD void bf16_amax_add(Bf16Amax& m, uint16_t h) {
  const uint32_t a = bf16_magnitude(h);
  if (a > 0x7f80u)
    m.nan = true;
  else if (a > m.bits)
    m.bits = a;
}
DSV4_HD void bf16_amax_merge(Bf16Amax& m, uint32_t other_bits, bool other_nan) {
  if (other_bits > m.bits) m.bits = other_bits;
  m.nan = m.nan || other_nan;
}
// The block maximum as an fp32 value (exact).
DSV4_HD float bf16_amax_value(const Bf16Amax& m) { return f32_from_bits(m.bits << 16); }

DSV4_HD bool f32_is_nan(float x) { return (f32_bits(x) & 0x7fffffffu) > 0x7f800000u; }
DSV4_HD bool f32_is_inf(float x) { return (f32_bits(x) & 0x7fffffffu) == 0x7f800000u; }

// Round to nearest, ties to even, of the exact value v = sig * 2^exp / div onto the non-negative
// grid of a binary format with kMant fraction bits whose smallest normal exponent is kEmin
// (unbiased; subnormals below it, as IEEE). Returns the magnitude code: the subnormal codes
// 0..2^kMant-1 and then (biased exponent << kMant) | fraction, so consecutive codes are consecutive
// grid values. A result above max_code saturates to max_code. Preconditions: sig < 2^25,
// div in [1, 15] (the odd part of a small divisor).
template <int kMant, int kEmin>
DSV4_HD uint32_t round_to_code(uint32_t sig, int exp, uint32_t div, uint32_t max_code) {
  if (sig == 0) return 0;
  // floor(log2(sig / div)) = t or t - 1, with t = msb(sig) - msb(div).
  const int t = msb_index(sig) - msb_index(div);
  const bool ge = t >= 0 ? sig >= (div << t) : (sig << -t) >= div;
  const int ue = exp + t - (ge ? 0 : 1);  // floor(log2 v)
  const int e = ue < kEmin ? kEmin : ue;  // binade of the result (kEmin for subnormals)
  if (e - kEmin > 24) return max_code;    // far above any format here; saturates
  const int s = exp - (e - kMant);        // v / quantum = sig * 2^s / div
  uint32_t num = sig, den = div;
  if (s >= 0) {
    num = sig << s;  // v < 2^(e+1) keeps num / div below 2^(kMant+1): no overflow
  } else {
    if (-s > 26) return 0;  // v / quantum < 2^25 / 2^27 < 1/2: rounds to zero, never a tie
    den = div << -s;        // < 15 * 2^26 < 2^30
  }
  uint32_t n = num / den;
  const uint32_t twice_rem = 2u * (num - n * den);
  if (twice_rem > den || (twice_rem == den && (n & 1u))) ++n;
  const uint32_t code = (uint32_t(e - kEmin) << kMant) + n;  // a carry moves to the next binade
  return code > max_code ? max_code : code;
}

// The two codecs of the fp8 formats with 3 fraction bits (e4m3fn, e4m3fnuz) that the paged KV
// writers and readers run per value: branch-free integer arithmetic (selects, no loop), exact.
// In both formats the subnormals m * 2^(1 - bias - 3) share the quantum of the first normal
// binade, so codes 0..15 are the integer multiples 0..15 of that quantum.

// Magnitude code of RNE(|x| * 2^-k) for the bf16 magnitude bits a (0..0x7f80, finite or inf),
// saturating at max_code, where b = (bf16 biased exponent) - (fp8 biased exponent) of the
// quotient, so b = k + 127 - bias; requires b >= 0 (bf16 subnormals then land among the first 16
// codes). With E = max(1, a >> 7) and sig the 8-bit significand (implicit bit for normals), the
// quotient is sig * 2^(E - b - 8) fp8 quanta: d = b + 1 - E >= 0 puts it in codes 0..16, RNE of
// sig >> (4 + d) (a carry to 16 is the next binade's first code, as it should be; sig >> 9 and
// beyond round to 0); d < 0 puts it in binade 1 - d, whose codes start at 8 (-d).
DSV4_HD uint32_t fp8_code_from_bf16(uint32_t a, uint32_t b, uint32_t max_code) {
  const uint32_t e = a >> 7;
  const uint32_t normal = e != 0u ? 1u : 0u;
  const uint32_t sig = (a & 0x7fu) | (normal << 7);
  const int d = int(b) + 1 - int(e + (1u - normal));
  const uint32_t up = d < 0 ? uint32_t(-d) : 0u;  // binades above the first
  const uint32_t down = d > 5 ? 5u : d > 0 ? uint32_t(d) : 0u;
  const uint32_t sh = 4u + down;  // 4..9
  const uint32_t r = (sig + (1u << (sh - 1u)) - 1u + ((sig >> sh) & 1u)) >> sh;
  const uint32_t code = (up << 3) + r;
  return code < max_code ? code : max_code;
}

// fp32 bits of the magnitude code c (0..0x7f) times a power of two, where ef1 is the biased fp32
// exponent that code 0x08 (the smallest normal) gets, -9 <= ef1 <= 249: exact, an fp32 subnormal
// where the product is one (the right shift, at most 13, drops only zero bits: the 4 significant
// bits sit at bits 20..23), inf past the fp32 range. A subnormal code is first normalised: s = 3 -
// msb(c) = [c < 2] + [c < 4] + [c < 8] shifts its leading bit to the implicit place (0 for normal
// codes).
DSV4_HD uint32_t fp8_scaled_bits(uint32_t c, int ef1) {
  const uint32_t s = uint32_t(c < 2u) + uint32_t(c < 4u) + uint32_t(c < 8u);
  const uint32_t n = c << s;                      // exponent field n >> 3 >= 1 (c != 0)
  const int ef = int(n >> 3) - 1 + ef1 - int(s);  // biased fp32 exponent of the product
  const uint32_t sh = ef < 1 ? uint32_t(1 - ef) : 0u;
  const uint32_t eb = ef > 1 ? uint32_t(ef - 1) : 0u;
  const uint32_t bits = ((((n & 7u) | 8u) << 20) >> sh) + (eb << 23);
  return c == 0u ? 0u : bits < 0x7f800000u ? bits : 0x7f800000u;
}

// fp32 bits (sign clear, not NaN) rounded to bf16 bits, nearest even (inf stays inf).
DSV4_HD uint32_t f32_bits_to_bf16_rne(uint32_t u) { return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; }

// sig * 2^exp (exact integers) as fp32 with sign, rounded to nearest even when it does not fit;
// overflow gives infinity, underflow rounds into the subnormals (and to zero).
DSV4_HD float pack_f32(uint32_t sign, uint32_t sig, int exp) {
  const uint32_t s = sign << 31;
  if (sig == 0) return f32_from_bits(s);
  const int p = msb_index(sig);
  const int ue = p + exp;
  if (ue > 127) return f32_from_bits(s | 0x7f800000u);
  int shift;         // bits of sig dropped (> 0) or added (< 0)
  uint32_t base;     // what the rounded significand is added to
  if (ue >= -126) {  // normal: 24 significant bits, hidden bit carried into the exponent
    shift = p - 23;
    base = uint32_t(ue + 126) << 23;
  } else {  // subnormal: multiples of 2^-149
    shift = -149 - exp;
    base = 0;
  }
  uint32_t n;
  if (shift <= 0) {
    n = sig << -shift;
  } else if (shift > 31) {
    n = 0;  // sig < 2^32 <= 2^(shift-1): below half a unit, rounds to zero
  } else {
    n = sig >> shift;
    const uint32_t rem = sig & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (n & 1u))) ++n;
  }
  return f32_from_bits(s | (base + n));  // a carry into the exponent (even to inf) is exact
}

}  // namespace dsv4::minifloat

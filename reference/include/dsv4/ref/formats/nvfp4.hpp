// NVFP4 blocks of compact page rows: 16 e2m1 values sharing one e4m3 scale. The block rules (scale
// choice, element rounding, zero scale, NaN and infinity, decoding) as one host-and-device
// definition that the reference and the kernels both call. C++17.
#pragma once

#include <cstdint>

#include "dsv4/ref/formats/bf16.hpp"
#include "dsv4/ref/formats/e2m1.hpp"
#include "dsv4/ref/formats/e4m3.hpp"
#include "dsv4/ref/formats/minifloat.hpp"

namespace dsv4::nvfp4 {

inline constexpr int kBlock = 16;

// Block rules. amax is the largest |x| of the block (NaN excluded). The scale is S = e4m3(amax /
// 6), round to nearest even of the exact quotient, saturating at 448 (an infinite amax gives 448).
// Each element is e2m1(x / S): round to nearest even of the exact quotient, saturating at +-6; the
// sign is the sign of x, also for results that round to zero. A zero scale (amax <= 6 * 2^-10)
// gives zeros (+-0 by the sign of x). e2m1 has no NaN, so a block holding a NaN keeps it in its
// scale: scale byte 0x7f (e4m3 NaN) and element codes 0; it dequantises to 16 NaNs.
//
// Every rounding below is exact; the common cases take short paths that the unit tests check
// against the exact core on every input.

// e4m3 code of amax / 6 for amax >= 0 (not NaN), exactly: amax = sig * 2^exp, so amax / 6 is
// sig * 2^(exp-1) / 3, rounded by the integer core.
DSV4_FMT_NOINLINE DSV4_HD uint8_t scale_code(float amax) {
  if (minifloat::f32_is_inf(amax)) return kE4m3MaxCode;
  const minifloat::Parts p = minifloat::f32_parts(amax);
  return e4m3_round(p.sig, p.exp - 1, 3);
}

// scale_code of a bf16 maximum given as magnitude bits (<= 0x7f80). Short path for a normal amax
// whose quotient is an unsaturated e4m3 normal: amax = X * 2^(E-134) with X = 128 + f, so
// amax / 6 = (X / 3) * 2^(E-135); q = floor(X / 3) in [42, 85] (the multiply-shift is exact for
// X < 256) and r = X mod 3. The 4 significant bits of the quotient are q's top 4; the rest, with
// r / 3 below it, decides the rounding (never a tie while r != 0).
DSV4_HD uint8_t scale_code_bf16(uint32_t amax_bits) {
  const uint32_t e = amax_bits >> 7;
  if (e >= 1 && e <= 254) {
    const uint32_t x = 0x80u | (amax_bits & 0x7fu);
    const uint32_t q = (x * 171u) >> 9, r = x - 3u * q;
    const uint32_t sh = q >= 64u ? 3u : 2u;  // q has 7 or 6 bits
    const uint32_t n = q >> sh, low3 = 3u * (q & ((1u << sh) - 1u)) + r, half3 = 3u << (sh - 1u);
    const uint32_t up = low3 > half3 || (low3 == half3 && (n & 1u)) ? 1u : 0u;
    // value = (n + up) * 2^(E - 135 + sh); e4m3 biased exponent of n * 2^k (n in [8, 16)) is k
    // + 10.
    const int be = int(e) - 135 + int(sh) + 10;
    if (be >= 1 && be <= 15) {
      const uint32_t code = (uint32_t(be) << 3) + n + up - 8u;  // a carry moves to the next binade
      if (code <= kE4m3MaxCode) return uint8_t(code);
    }
  }
  return scale_code(f32_from_bits(amax_bits << 16));
}

// The scale code of a block from its maximum: e4m3 NaN (0x7f) when the block holds a NaN.
DSV4_HD uint8_t block_scale(const minifloat::Bf16Amax& m) {
  return m.nan ? kE4m3NaN : scale_code_bf16(m.bits);
}

// Rounding |x| / S onto the e2m1 grid is deciding which of the 7 midpoints m_i (0.25, 0.75, 1.25,
// 1.75, 2.5, 3.5, 5) times S lie below |x|. Each t_i = m_i * S has at most 3 + 4 significant bits
// and lies in [2^-11, 2240], so it is an exact fp32 product and an exact bf16 value. At a tie
// (|x| = t_i) the even code wins: it stays at code i for even i and moves up for odd i, so odd
// thresholds are stored one bf16 step below t_i. The thresholds are kept as the fp32 values of
// those bf16 patterns: comparing |x| with them as floats orders exactly as comparing the bf16
// magnitude bits (all are non-negative), and a zero or NaN scale stores the NaN pattern 0xffff0000,
// which no comparison passes.
struct Thresholds {
  float t[7];
  uint32_t sign_mask;  // 8: codes carry the sign of x; 0 in a NaN block (all codes 0)
};

DSV4_HD Thresholds thresholds(uint8_t sc) {
  Thresholds th;
  const float s = e4m3_to_f32(sc & 0x7fu);
  const float mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const bool none = (sc & 0x7fu) == 0 || e4m3_is_nan(sc);
  DSV4_FMT_UNROLL
  for (int i = 0; i < 7; ++i) {
    const uint32_t t = f32_bits(mid[i] * s) >> 16;  // exact product, exact bf16
    th.t[i] = f32_from_bits((none ? 0xffffu : t - uint32_t(i & 1)) << 16);
  }
  th.sign_mask = e4m3_is_nan(sc) ? 0u : 8u;
  return th;
}

// The e2m1 code (sign in bit 3) of the bf16 value h (bit pattern) under the block's thresholds:
// the number of thresholds below |x|, found by a binary search over the increasing t_i.
DSV4_HD uint8_t encode(uint16_t h, const Thresholds& th) {
  const float a = f32_from_bits(uint32_t(h & 0x7fffu) << 16);
  const bool b2 = a > th.t[3];
  const bool b1 = a > (b2 ? th.t[5] : th.t[1]);
  const bool b0 = a > (b2 ? (b1 ? th.t[6] : th.t[4]) : (b1 ? th.t[2] : th.t[0]));
  const uint32_t n = (b2 ? 4u : 0u) | (b1 ? 2u : 0u) | (b0 ? 1u : 0u);
  return uint8_t(((uint32_t(h) >> 12) & th.sign_mask) | n);
}

// Two values at once, in the bf16 pair layout of memory: w holds value 2i in its low half and
// value 2i+1 in its high half; the result is the byte e2m1(2i) | e2m1(2i+1) << 4 (the packed page
// layout), the same codes as encode() for every pair a block can hold (a NaN only ever sits in a
// block whose scale is NaN). Each half of a = |w| | 0x8000 minus u_i = t_i + 1 keeps bit
// 15 set exactly when |x| > t_i (a half never borrows from the other: it stays >= 0x8000 - u_i >=
// 0), so the 7 comparisons of both values are 7 subtractions, and the binary search is a bitwise
// select on those bits (the comparisons are monotonic in i). A zero or NaN scale uses u_i = 0x8000,
// which no magnitude reaches.
struct PairThresholds {
  uint32_t u[7];       // u_i in both halves
  uint32_t sign_mask;  // 0x80008000, or 0 in a NaN block
};

DSV4_HD PairThresholds pair_thresholds(uint8_t sc) {
  PairThresholds p;
  const bool nan = e4m3_is_nan(sc);
  p.sign_mask = nan ? 0u : 0x80008000u;
  if (nan || (sc & 0x7fu) == 0) {
    DSV4_FMT_UNROLL
    for (int i = 0; i < 7; ++i) p.u[i] = 0x80008000u;
    return p;
  }
  const float s = e4m3_to_f32(sc & 0x7fu);
  const float mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  // u_i = t_i + 1, with the odd t_i already one step down: bits(m_i * S) (+1 for even i).
  DSV4_FMT_UNROLL
  for (int i = 0; i < 7; ++i)
    p.u[i] = (f32_bits(mid[i] * s) >> 16) * 0x00010001u + ((i & 1) ? 0u : 0x00010001u);
  return p;
}

// The two codes of word w as nibbles in place: e2m1(low half) at bits 12..15, e2m1(high half) at
// bits 28..31, every other bit zero.
DSV4_HD uint32_t encode_pair_nibbles(uint32_t w, const PairThresholds& p) {
  const uint32_t a = (w & 0x7fff7fffu) | 0x80008000u;
  uint32_t d[7];
  DSV4_FMT_UNROLL
  for (int i = 0; i < 7; ++i) d[i] = a - p.u[i];
  // Bit 15 (and 31) of: c2 = [|x| > t3], c1 = c2 ? [> t5] : [> t1], c0 = the last step.
  const uint32_t c2 = d[3];
  const uint32_t c1 = (d[3] & d[5]) | (~d[3] & d[1]);
  const uint32_t c0 =
      (d[3] & ((d[5] & d[6]) | (~d[5] & d[4]))) | (~d[3] & ((d[1] & d[2]) | (~d[1] & d[0])));
  // Each half's nibble at its bits 12..15: sign, c2, c1, c0.
  return (w & p.sign_mask) | ((c2 >> 1) & 0x40004000u) | ((c1 >> 2) & 0x20002000u) |
         ((c0 >> 3) & 0x10001000u);
}

DSV4_HD uint8_t encode_pair(uint32_t w, const PairThresholds& p) {
  const uint32_t n = encode_pair_nibbles(w, p);
  return uint8_t(((n >> 12) & 0xfu) | (n >> 24));
}

// Four words of encode_pair_nibbles as the 4 bytes of the page (pair k in byte k), each nibble
// shifted straight to its place.
DSV4_HD uint32_t pack_nibbles(uint32_t n0, uint32_t n1, uint32_t n2, uint32_t n3) {
  return ((n0 >> 12) & 0xfu) | (n0 >> 24) | ((n1 >> 4) & 0xf00u) | (n1 >> 16) | (n2 << 4) |
         ((n2 >> 8) & 0xf00000u) | (n3 << 12) | (n3 & 0xf0000000u);
}

// Quantises one block of 16 bf16 bit patterns: packed receives 8 bytes (value 2i in the low
// nibble of byte i), the return value is the e4m3 scale code. (The kernels split a block over
// lanes and call the same pieces.)
DSV4_HD uint8_t quantize_block(const uint16_t* x, uint8_t* packed) {
  minifloat::Bf16Amax m = minifloat::bf16_amax_init();
  DSV4_FMT_UNROLL
  for (int i = 0; i < kBlock; ++i) minifloat::bf16_amax_add(m, x[i]);
  const uint8_t sc = block_scale(m);
  const PairThresholds pt = pair_thresholds(sc);
  DSV4_FMT_UNROLL
  for (int j = 0; j < kBlock / 2; ++j)
    packed[j] = encode_pair(uint32_t(x[2 * j]) | (uint32_t(x[2 * j + 1]) << 16), pt);
  return sc;
}

// Decoding: value = e2m1(nibble) * e4m3(scale), sign = sign(nibble) xor sign(scale). The product
// has at most 2 + 4 significant bits and lies in [2^-10, 2688] or is zero, so the fp32
// multiplication is exact (no subnormal, no flush-to-zero effect), and so is its bf16 (the top
// half of its bits). A NaN scale gives 0x7fc00000 (bf16 0x7fc0).
struct Decoder {
  float scale;    // |S|
  uint32_t sign;  // sign bit of S, in bit 31
  bool nan;
};

DSV4_HD Decoder decoder(uint8_t sc) {
  Decoder d;
  d.scale = e4m3_to_f32(sc & 0x7fu);
  d.sign = uint32_t(sc >> 7) << 31;
  d.nan = e4m3_is_nan(sc);
  return d;
}

// The value of a nibble under a scale that is not NaN.
DSV4_HD uint32_t decode_bits_number(uint8_t nibble, const Decoder& d) {
  const float mag = f32_from_bits(e2m1_magnitude_bits(nibble)) * d.scale;
  return f32_bits(mag) | ((uint32_t(nibble & 8u) << 28) ^ d.sign);
}

DSV4_HD uint32_t decode_bits(uint8_t nibble, const Decoder& d) {
  return d.nan ? 0x7fc00000u : decode_bits_number(nibble, d);
}

DSV4_HD uint32_t decode_bits(uint8_t nibble, uint8_t sc) {
  return decode_bits(nibble, decoder(sc));
}
DSV4_HD float decode(uint8_t nibble, uint8_t sc) { return f32_from_bits(decode_bits(nibble, sc)); }
DSV4_HD bf16 decode_bf16(uint8_t nibble, uint8_t sc) {
  return bf16{uint16_t(decode_bits(nibble, sc) >> 16)};
}

// Eight nibbles at once as bf16, through a table: the bf16 of magnitude code i times the scale
// (with the scale's sign) for i = 0..7, split into its low bytes (lo0: codes 0..3, lo1: 4..7) and
// high bytes, so that byte_perm picks four values' bytes with one selector of four magnitudes.
// Each nibble's sign bit then flips its value's sign (the product's sign is the xor). A NaN scale
// gives 0x7fc0 everywhere (sign_mask 0). Equal to decode_bf16 value by value.
struct PairTable {
  uint32_t lo0, lo1, hi0, hi1;
  uint32_t sign_mask;  // 0x80008000, or 0 under a NaN scale
};

DSV4_HD PairTable pair_table(uint8_t sc) {
  const Decoder d = decoder(sc);
  uint32_t lo0 = 0, lo1 = 0, hi0 = 0, hi1 = 0;  // scalars: no array or reference to keep in memory
  DSV4_FMT_UNROLL
  for (int i = 0; i < 4; ++i) {
    const uint32_t a = d.nan ? 0x7fc0u : decode_bits_number(uint8_t(i), d) >> 16;
    const uint32_t b = d.nan ? 0x7fc0u : decode_bits_number(uint8_t(i + 4), d) >> 16;
    lo0 |= (a & 0xffu) << (8 * i), hi0 |= (a >> 8) << (8 * i);
    lo1 |= (b & 0xffu) << (8 * i), hi1 |= (b >> 8) << (8 * i);
  }
  return PairTable{lo0, lo1, hi0, hi1, d.nan ? 0u : 0x80008000u};
}

// Nibbles k = 0..7 of `nibbles` (value k) -> out[j] holds values 2j (low half) and 2j+1.
DSV4_HD void decode8_bf16(uint32_t nibbles, const PairTable& t, uint32_t* out) {
  const uint32_t mags = nibbles & 0x77777777u;
  DSV4_FMT_UNROLL
  for (int h = 0; h < 2; ++h) {
    const uint32_t sel = (mags >> (16 * h)) & 0xffffu;
    const uint32_t lo = minifloat::byte_perm(t.lo0, t.lo1, sel);
    const uint32_t hi = minifloat::byte_perm(t.hi0, t.hi1, sel);
    const uint32_t sg = (nibbles >> (16 * h)) & 0x8888u;
    const uint32_t s0 = ((sg & 0x8u) << 12) | ((sg & 0x80u) << 24);
    const uint32_t s1 = ((sg & 0x800u) << 4) | ((sg & 0x8000u) << 16);
    out[2 * h] = minifloat::byte_perm(lo, hi, 0x5140u) ^ (s0 & t.sign_mask);
    out[2 * h + 1] = minifloat::byte_perm(lo, hi, 0x7362u) ^ (s1 & t.sign_mask);
  }
}

}  // namespace dsv4::nvfp4

// Block-scaled formats (MXFP8 and NVFP4 blocks of compact page rows): scale choice for every bf16
// block maximum, element rounding for every bf16 value and scale, decoding of every code and scale,
// and the per-element error bounds, each against the independent fp64 formulation.
#include <gtest/gtest.h>

#include "dsv4/fixtures/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "dsv4/fixtures/seed.hpp"
#include "dsv4/ref/compact_pages.hpp"
#include "dsv4/ref/formats/fp64.hpp"
#include "dsv4/ref/formats/kv_tiles.hpp"
#include "dsv4/ref/formats/mxfp8.hpp"
#include "dsv4/ref/formats/nvfp4.hpp"

namespace dsv4 {
namespace {

using ref::compact_pages::error_bound;
constexpr KvLayout kMxTiles = KvLayout::kV41;     // 32 e4m3 values per ue8m0 scale
constexpr KvLayout kNvTiles = KvLayout::kV41Fp4;  // 16 e2m1 values per e4m3 scale

float bf(uint32_t h) { return bf16_to_f32(bf16{uint16_t(h)}); }
bool bf_nan(uint32_t h) { return (h & 0x7fff) > 0x7f80; }
bool bf_inf(uint32_t h) { return (h & 0x7fff) == 0x7f80; }

std::string hex(uint32_t v, int digits) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%0*x", digits, v);
  return b;
}

using fx::Misses;

// ---- MXFP8 -----------------------------------------------------------------------------------

TEST(Mxfp8Block, ScaleExponentMatchesFp64CeilLog2ForEveryBf16Amax) {
  Misses m;
  for (uint32_t h = 0; h <= 0x7f80; ++h) {
    const float amax = bf(h);
    const int got = mxfp8::scale_exponent(amax), want = fp64::mxfp8_scale_exponent(double(amax));
    if (got != want)
      m.add("amax=" + std::to_string(amax) + " (bf16 " + hex(h, 4) + "): e=" + std::to_string(got) +
            " want " + std::to_string(want));
    // The same e from fp32 arithmetic (amax / 448.0f, exponent rounded up): the claim of mxfp8.hpp.
    if (h != 0 && h != 0x7f80) {
      const float q = amax / 448.0f;
      int ex;
      const float mant = std::frexp(q, &ex);  // q = mant * 2^ex, mant in [0.5, 1)
      int e32 = mant == 0.5f ? ex - 1 : ex;
      e32 = std::clamp(e32, -127, 127);
      if (e32 != got) m.add("amax=" + hex(h, 4) + ": fp32 formula gives " + std::to_string(e32));
    }
  }
  EXPECT_EQ(m.count(), 0);
}

TEST(Mxfp8Block, WrittenScaleExponents) {
  EXPECT_EQ(mxfp8::scale_exponent(1.0f), -8);   // 1/448 = 2^-8.8
  EXPECT_EQ(mxfp8::scale_exponent(448.0f), 0);  // exactly in range
  EXPECT_EQ(mxfp8::scale_exponent(450.0f), 1);  // just past 448
  EXPECT_EQ(mxfp8::scale_exponent(896.0f), 1);  // 448 * 2
  EXPECT_EQ(mxfp8::scale_exponent(900.0f), 2);
  EXPECT_EQ(mxfp8::scale_exponent(31.0f), -3);  // 31/448 = 2^-3.85
  EXPECT_EQ(mxfp8::scale_exponent(0x1p-100f), -108);
  EXPECT_EQ(mxfp8::scale_exponent(0.0f), -127);  // a block of zeros: the smallest scale
  EXPECT_EQ(mxfp8::scale_exponent(1.75f * 0x1p-119f), -127);  // 448 * 2^-127 exactly
  EXPECT_EQ(mxfp8::scale_exponent(1.75f * 0x1p-120f), -127);  // -128, clamped
  EXPECT_EQ(mxfp8::scale_exponent(0x1p-130f), -127);          // fp32 subnormal amax
  EXPECT_EQ(mxfp8::scale_exponent(3.4028235e38f), 120);       // FLT_MAX
  EXPECT_EQ(mxfp8::scale_exponent(INFINITY), 127);
  EXPECT_EQ(int(mxfp8::scale_code(1.0f)), 119);
}

// The element encoder against the exact core on every bf16 and every scale code.
TEST(Mxfp8Block, EncodeMatchesTheExactCoreForEveryBf16AndScale) {
  Misses m;
  for (uint32_t sc = 0; sc <= 254; ++sc)
    for (uint32_t h = 0; h < 65536; ++h) {
      const float x = bf(h);
      uint8_t want;
      if (bf_nan(h)) {
        want = uint8_t((h >> 8 & 0x80) | 0x7f);
      } else if (bf_inf(h)) {
        want = uint8_t((h >> 8 & 0x80) | 0x7e);
      } else {
        const minifloat::Parts p = minifloat::f32_parts(x);
        want = uint8_t((p.sign << 7) | e4m3_round(p.sig, p.exp - (int(sc) - 127)));
      }
      const uint8_t got = mxfp8::encode(uint16_t(h), uint8_t(sc));
      if (got != want)
        m.add("x=" + hex(h, 4) + " sc=" + std::to_string(sc) + ": got " + hex(got, 2) + " want " +
              hex(want, 2));
    }
  EXPECT_EQ(m.count(), 0);
}

TEST(Mxfp8Block, EncodeMatchesTheFp64SearchForEveryBf16) {
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, "every bf16 x fixed and 6 random scale codes");
  fx::Rng rng(seed);
  std::vector<int> scales = {0, 1, 2, 60, 100, 119, 120, 127, 134, 160, 200, 246, 247, 253, 254};
  for (int i = 0; i < 6; ++i) scales.push_back(int(rng.range(0, 254)));
  Misses m;
  for (int sc : scales)
    for (uint32_t h = 0; h < 65536; ++h) {
      const uint8_t got = mxfp8::encode(uint16_t(h), uint8_t(sc));
      const uint8_t want = fp64::e4m3_nearest(double(bf(h)), std::ldexp(1.0, sc - 127));
      if (got != want)
        m.add("x=" + hex(h, 4) + " sc=" + std::to_string(sc) + ": got " + hex(got, 2) + " want " +
              hex(want, 2));
    }
  EXPECT_EQ(m.count(), 0);
}

TEST(Mxfp8Block, DecodeMatchesFp64ForEveryCodeAndScale) {
  Misses m;
  for (uint32_t sc = 0; sc < 256; ++sc)
    for (uint32_t c = 0; c < 256; ++c) {
      const float got = mxfp8::decode(uint8_t(c), uint8_t(sc));
      const double exact = fp64::e4m3_value(uint8_t(c)) * fp64::ue8m0_value(uint8_t(sc));
      const float want = float(exact);  // one rounding: fp32 subnormals and overflow to inf
      const bool ok = std::isnan(exact) ? std::isnan(got) : f32_bits(got) == f32_bits(want);
      if (!ok)
        m.add("c=" + hex(c, 2) + " sc=" + std::to_string(sc) + ": got " + hex(f32_bits(got), 8) +
              " want " + hex(f32_bits(want), 8));
      if (mxfp8::decode_bf16(uint8_t(c), uint8_t(sc)).bits != f32_to_bf16(got).bits)
        m.add("bf16 output of c=" + hex(c, 2) + " sc=" + std::to_string(sc));
    }
  EXPECT_EQ(m.count(), 0);
  // Written: NaN scale and NaN codes; 2^127 * 448 overflows; 2^-127 * 2^-9 is an fp32 subnormal.
  EXPECT_EQ(mxfp8::decode_bits(0x38, 0xff), 0x7fc00000u);
  EXPECT_EQ(mxfp8::decode_bits(0xff, 127), 0x7fc00000u);
  EXPECT_EQ(mxfp8::decode_bits(0x7e, 254), 0x7f800000u);
  EXPECT_EQ(mxfp8::decode_bits(0x01, 0), 0x00002000u);  // 2^-136 = 2^13 * 2^-149
  EXPECT_EQ(mxfp8::decode(0x78, 119), 1.0f);            // 256 * 2^-8
}

// The word-at-a-time decoders (short path when all four codes are normal) against decode_bits, for
// every code in every byte position under every scale, next to random normal codes (so the short
// path is taken whenever the code allows) and next to random bytes.
TEST(Mxfp8Block, FourCodeDecodersMatchTheOneCodeDecoder) {
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, "every (code, byte position, scale), other bytes random normal or random");
  fx::Rng rng(seed);
  Misses m;
  for (uint32_t sc = 0; sc < 256; ++sc)
    for (uint32_t c = 0; c < 256; ++c)
      for (int k = 0; k < 4; ++k)
        for (int others_normal = 0; others_normal < 2; ++others_normal) {
          uint32_t codes = 0;
          for (int j = 0; j < 4; ++j) {
            uint32_t b = uint32_t(rng.next()) & 0xffu;
            if (others_normal) b = (b & 0x80u) | uint32_t(rng.range(8, 0x7e));
            codes |= (j == k ? c : b) << (8 * j);
          }
          uint32_t f32[4], b16[2];
          mxfp8::decode4_bits(codes, uint8_t(sc), f32);
          mxfp8::decode4_bf16(codes, uint8_t(sc), b16);
          for (int j = 0; j < 4; ++j) {
            const uint8_t cj = uint8_t(codes >> (8 * j));
            const uint32_t want = mxfp8::decode_bits(cj, uint8_t(sc));
            const uint16_t want16 = mxfp8::decode_bf16(cj, uint8_t(sc)).bits;
            const uint16_t got16 = uint16_t(b16[j / 2] >> (16 * (j % 2)));
            if (f32[j] != want || got16 != want16)
              m.add("codes=" + hex(codes, 8) + " sc=" + std::to_string(sc) + " value " +
                    std::to_string(j) + ": fp32 " + hex(f32[j], 8) + " want " + hex(want, 8) +
                    ", bf16 " + hex(got16, 4) + " want " + hex(want16, 4));
          }
        }
  EXPECT_EQ(m.count(), 0);
}

// |decode(encode(x)) - x| <= |x|/16 + 2^(e-10) for every finite bf16 x below 1.9375 * 2^127 and
// every scale 2^e that a block containing x can have (|x| <= 448 * 2^e). From 1.9375 * 2^127 on,
// x rounds to 2^128, past fp32, and dequantises to inf.
TEST(Mxfp8Block, ErrorBoundHoldsForEveryBf16AndEveryAdmissibleScale) {
  Misses m;
  double worst = 0;  // largest error / bound seen
  for (uint32_t h = 0; h < 65536; ++h) {
    if (bf_nan(h) || bf_inf(h)) continue;
    const double x = double(bf(h));
    if (std::fabs(x) >= 0x1.fp127) {
      EXPECT_EQ(f32_bits(mxfp8::decode(mxfp8::encode(uint16_t(h), 247), 247)) & 0x7fffffffu,
                0x7f800000u)
          << "x=" << hex(h, 4) << " at its own scale 2^120 should overflow to inf";
      continue;
    }
    for (int sc = 0; sc <= 254; ++sc) {
      if (std::fabs(x) > 448.0 * std::ldexp(1.0, sc - 127)) continue;
      const double deq =
          double(mxfp8::decode(mxfp8::encode(uint16_t(h), uint8_t(sc)), uint8_t(sc)));
      const double err = std::fabs(deq - x), bound = error_bound(kMxTiles, x, uint8_t(sc));
      worst = std::max(worst, err / bound);
      if (!(err <= bound))
        m.add("x=" + hex(h, 4) + " sc=" + std::to_string(sc) + ": error " + std::to_string(err) +
              " > bound " + std::to_string(bound));
    }
  }
  EXPECT_EQ(m.count(), 0);
  ::testing::Test::RecordProperty("mxfp8_worst_error_over_bound", std::to_string(worst));
  EXPECT_GT(worst, 0.9) << "the bound is far from tight: recheck its derivation";
}

// ---- NVFP4 -----------------------------------------------------------------------------------

TEST(Nvfp4Block, ScaleMatchesFp64NearestForEveryBf16Amax) {
  Misses m;
  for (uint32_t h = 0; h <= 0x7f80; ++h) {
    const float amax = bf(h);
    const uint8_t got = nvfp4::scale_code(amax), want = fp64::nvfp4_scale_code(double(amax));
    if (got != want) m.add("amax=" + hex(h, 4) + ": got " + hex(got, 2) + " want " + hex(want, 2));
    // The short path for bf16 maxima gives the same code.
    if (nvfp4::scale_code_bf16(h) != got)
      m.add("amax=" + hex(h, 4) + ": scale_code_bf16 gives " + hex(nvfp4::scale_code_bf16(h), 2));
    // With bf16 maxima, e4m3(fp32(amax / 6)) rounds the same way (no harmful double rounding).
    if (f32_to_e4m3(amax / 6.0f) != got) m.add("amax=" + hex(h, 4) + ": fp32 division differs");
    // Nor does the product by fp32(1/6) the device writers take (kv::fp4_scale_product), with the
    // tile rule on top (a zero code is 1, +inf is bf16's largest value).
    const minifloat::Bf16Amax a{h, false};
    const uint8_t prod = f32_to_e4m3(kv::fp4_scale_product(a));
    if ((prod == 0 ? 1 : prod) != kv::fp4_scale(a))
      m.add("amax=" + hex(h, 4) + ": the fp32 product gives " + hex(prod, 2) + ", fp4_scale " +
            hex(kv::fp4_scale(a), 2));
  }
  EXPECT_EQ(m.count(), 0);
}

TEST(Nvfp4Block, WrittenScales) {
  EXPECT_EQ(int(nvfp4::scale_code(6.0f)), 0x38);          // 1.0
  EXPECT_EQ(int(nvfp4::scale_code(1.0f)), 0x23);          // 1/6 -> 11 * 2^-6 = 0.171875
  EXPECT_EQ(int(nvfp4::scale_code(15.0f)), 0x42);         // 2.5 exactly
  EXPECT_EQ(int(nvfp4::scale_code(0.0f)), 0x00);          // zero scale
  EXPECT_EQ(int(nvfp4::scale_code(0.005859375f)), 0x00);  // 6 * 2^-10: amax/6 = 2^-10, tie to 0
  EXPECT_EQ(int(nvfp4::scale_code(0.0060f)), 0x01);       // just above: 2^-9
  EXPECT_EQ(int(nvfp4::scale_code(2688.0f)), 0x7e);       // 448 exactly
  EXPECT_EQ(int(nvfp4::scale_code(2784.0f)), 0x7e);       // 464: tie, to 448
  EXPECT_EQ(int(nvfp4::scale_code(2000.0f)), 0x7a);       // 333.3 -> 320
  EXPECT_EQ(int(nvfp4::scale_code(1e30f)), 0x7e);         // saturates
  EXPECT_EQ(int(nvfp4::scale_code(INFINITY)), 0x7e);
}

TEST(Nvfp4Block, EncodeMatchesTheFp64SearchAndTheCoreForEveryBf16AndScale) {
  Misses m;
  for (uint32_t sc = 0; sc <= 0x7e; ++sc) {
    const nvfp4::Thresholds th = nvfp4::thresholds(uint8_t(sc));
    const double s = fp64::e4m3_value(uint8_t(sc));
    const minifloat::Parts sp = e4m3_parts(uint8_t(sc));
    for (uint32_t h = 0; h < 65536; ++h) {
      if (bf_nan(h)) continue;  // a NaN block never reaches the element encoder
      const double x = double(bf(h));
      const uint8_t got = nvfp4::encode(uint16_t(h), th);
      const uint8_t sign = std::signbit(x) ? 0x8 : 0;
      const uint8_t want = s == 0 ? sign : fp64::e2m1_nearest(x, s);
      uint8_t core = sign;  // the exact core on x / S, S = q * 2^b with q odd
      if (s != 0 && !bf_inf(h)) {
        uint32_t q = sp.sig;
        int b = sp.exp;
        while (q % 2 == 0) q /= 2, ++b;
        const minifloat::Parts xp = minifloat::f32_parts(float(x));
        core = uint8_t(sign | e2m1_round(xp.sig, xp.exp - b, q));
      } else if (s != 0) {
        core = uint8_t(sign | 7);
      }
      if (got != want || got != core)
        m.add("x=" + hex(h, 4) + " sc=" + hex(sc, 2) + ": got " + hex(got, 1) + " want " +
              hex(want, 1) + " core " + hex(core, 1));
    }
  }
  EXPECT_EQ(m.count(), 0);
}

TEST(Nvfp4Block, DecodeMatchesFp64ForEveryNibbleAndScale) {
  Misses m;
  for (uint32_t sc = 0; sc < 256; ++sc)
    for (uint32_t c = 0; c < 16; ++c) {
      const float got = nvfp4::decode(uint8_t(c), uint8_t(sc));
      const double exact = fp64::e2m1_value(uint8_t(c)) * fp64::e4m3_value(uint8_t(sc));
      const bool ok = std::isnan(exact) ? f32_bits(got) == 0x7fc00000u
                                        : f32_bits(got) == f32_bits(float(exact)) &&
                                              double(got) == exact;  // exact, no rounding at all
      if (!ok)
        m.add("c=" + hex(c, 1) + " sc=" + hex(sc, 2) + ": got " + hex(f32_bits(got), 8) + " want " +
              std::to_string(exact));
      if (nvfp4::decode_bf16(uint8_t(c), uint8_t(sc)).bits != f32_to_bf16(got).bits ||
          (!std::isnan(exact) &&
           double(bf16_to_f32(nvfp4::decode_bf16(uint8_t(c), uint8_t(sc)))) != exact))
        m.add("bf16 output of c=" + hex(c, 1) + " sc=" + hex(sc, 2) + " is not exact");
    }
  EXPECT_EQ(m.count(), 0);
  EXPECT_EQ(nvfp4::decode(0x7, 0x38), 6.0f);
  EXPECT_EQ(nvfp4::decode(0x7, 0x23), 1.03125f);  // 6 * 0.171875
  EXPECT_EQ(nvfp4::decode(0xf, 0x7e), -2688.0f);
  EXPECT_EQ(f32_bits(nvfp4::decode(0x8, 0x38)), 0x80000000u);  // -0 stays -0
  EXPECT_EQ(f32_bits(nvfp4::decode(0x2, 0xb8)), 0xbf800000u);  // a negative scale flips the sign
  EXPECT_EQ(f32_bits(nvfp4::decode(0x5, 0x7f)), 0x7fc00000u);  // NaN scale
  EXPECT_EQ(f32_bits(nvfp4::decode(0x5, 0x00)), 0x00000000u);  // zero scale
}

// The two-values-per-word encoder against encode(), for every bf16 value in both halves of the
// word under every scale, next to a random partner. NaN values only under NaN scales: a block
// holding a NaN always has one, so no other pairing reaches the encoders.
TEST(Nvfp4Block, PairEncoderMatchesTheOneValueEncoder) {
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, "every (value, half, scale code), random partner");
  fx::Rng rng(seed);
  Misses m;
  for (uint32_t sc = 0; sc < 256; ++sc) {
    const nvfp4::Thresholds th = nvfp4::thresholds(uint8_t(sc));
    const nvfp4::PairThresholds pt = nvfp4::pair_thresholds(uint8_t(sc));
    const bool nan_scale = e4m3_is_nan(uint8_t(sc));
    for (uint32_t h = 0; h < 65536; ++h) {
      if (bf_nan(h) && !nan_scale) continue;
      uint32_t partner = uint32_t(rng.next()) & 0xffffu;
      if (bf_nan(partner) && !nan_scale) partner &= 0x807fu;
      for (int half = 0; half < 2; ++half) {
        const uint32_t w = half ? (h << 16) | partner : (partner << 16) | h;
        const uint8_t want =
            e2m1_pack(nvfp4::encode(uint16_t(w), th), nvfp4::encode(uint16_t(w >> 16), th));
        const uint8_t got = nvfp4::encode_pair(w, pt);
        const uint32_t n = nvfp4::encode_pair_nibbles(w, pt);
        const uint32_t packed = nvfp4::pack_nibbles(n, n, n, n);
        if (got != want || (n & 0x0fff0fffu) != 0 || packed != want * 0x01010101u)
          m.add("w=" + hex(w, 8) + " sc=" + hex(sc, 2) + ": got " + hex(got, 2) + " want " +
                hex(want, 2));
      }
    }
  }
  EXPECT_EQ(m.count(), 0);
}

// |decode(encode(x)) - x| <= max(|x|, S)/4 (+ 3*2^-9 when S < 2^-6) for every finite bf16 x with
// |x| <= 2784 and every scale S that a block containing x can have (scale_code(|x|) <= S's code,
// the scale rounding being monotonic).
TEST(Nvfp4Block, ErrorBoundHoldsForEveryBf16AndEveryAdmissibleScale) {
  Misses m;
  double worst = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    if (bf_nan(h) || bf_inf(h)) continue;
    const double x = double(bf(h));
    if (std::fabs(x) > 2784.0) continue;
    const int lowest = nvfp4::scale_code(std::fabs(float(x)));
    for (int sc = lowest; sc <= 0x7e; ++sc) {
      const nvfp4::Thresholds th = nvfp4::thresholds(uint8_t(sc));
      const double deq = double(nvfp4::decode(nvfp4::encode(uint16_t(h), th), uint8_t(sc)));
      const double err = std::fabs(deq - x), bound = error_bound(kNvTiles, x, uint8_t(sc));
      worst = std::max(worst, err / bound);
      if (!(err <= bound))
        m.add("x=" + hex(h, 4) + " sc=" + hex(sc, 2) + ": error " + std::to_string(err) +
              " > bound " + std::to_string(bound));
    }
  }
  EXPECT_EQ(m.count(), 0);
  ::testing::Test::RecordProperty("nvfp4_worst_error_over_bound", std::to_string(worst));
  EXPECT_GT(worst, 0.9) << "the bound is far from tight: recheck its derivation";
}

TEST(Nvfp4Block, ThresholdsAreTheExactMidpointsTimesTheScale) {
  const float mids[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  for (int sc = 1; sc <= 0x7e; ++sc) {
    const nvfp4::Thresholds th = nvfp4::thresholds(uint8_t(sc));
    for (int i = 0; i < 7; ++i) {
      const double t = double(mids[i]) * fp64::e4m3_value(uint8_t(sc));
      const uint32_t want = (f32_bits(float(t)) >> 16) - uint32_t(i & 1);
      EXPECT_EQ(double(bf(f32_bits(float(t)) >> 16)), t) << "threshold not exact in bf16";
      EXPECT_EQ(f32_bits(th.t[i]), want << 16) << "sc=" << hex(sc, 2) << " i=" << i;
    }
  }
  for (float t : nvfp4::thresholds(0).t) EXPECT_EQ(f32_bits(t), 0xffff0000u);  // zero scale: all 0
  EXPECT_EQ(nvfp4::thresholds(0).sign_mask, 8u);  // ... with their sign
  // A NaN scale (a block holding a NaN): every code 0, whatever the value, NaN included.
  const nvfp4::Thresholds nan = nvfp4::thresholds(0x7f);
  for (uint32_t h = 0; h < 65536; ++h)
    ASSERT_EQ(nvfp4::encode(uint16_t(h), nan), 0) << "x=" << hex(h, 4);
}

}  // namespace
}  // namespace dsv4

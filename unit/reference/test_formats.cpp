// Scalar number-format codecs (bf16, e4m3, e2m1, ue8m0, the exact rounding core): every code point,
// every bf16 input against the fp64 oracles, and written-down ties, subnormals, saturation and NaN.
#include <gtest/gtest.h>

#include "dsv4/fixtures/compare.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include "dsv4/fixtures/seed.hpp"
#include "dsv4/ref/formats/bf16.hpp"
#include "dsv4/ref/formats/e2m1.hpp"
#include "dsv4/ref/formats/e4m3.hpp"
#include "dsv4/ref/formats/fp64.hpp"
#include "dsv4/ref/formats/ue8m0.hpp"

namespace dsv4 {
namespace {

float F(uint32_t bits) { return f32_from_bits(bits); }
float bf(uint16_t h) { return bf16_to_f32(bf16{h}); }

std::string hex(uint32_t v, int digits) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%0*x", digits, v);
  return b;
}

using fx::Misses;

// ---- bf16 ------------------------------------------------------------------------------------

TEST(Bf16, EveryPatternRoundTripsThroughF32) {
  Misses m;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf(uint16_t(h));
    const uint16_t back = f32_to_bf16(f).bits;
    const bool nan = (h & 0x7fff) > 0x7f80;
    // NaN comes back quiet (bit 6 set), with its sign and payload; every other pattern unchanged.
    const uint16_t want = nan ? uint16_t(h | 0x40) : uint16_t(h);
    if (back != want) m.add("bf16 " + hex(h, 4) + " came back as " + hex(back, 4));
    if (!nan && double(f) != fp64::bf16_value(uint16_t(h)))
      m.add("bf16 " + hex(h, 4) + " decodes to " + std::to_string(f));
  }
  EXPECT_EQ(m.count(), 0);
}

TEST(Bf16, RoundsToNearestEvenWithWrittenTies) {
  struct Case {
    uint32_t f32;
    uint16_t want;
    const char* what;
  } cases[] = {
      {0x3f808000, 0x3f80, "1 + 2^-8: tie, stays on the even 1.0"},
      {0x3f818000, 0x3f82, "1 + 3*2^-8: tie, up to the even 1 + 2^-6"},
      {0x3f808001, 0x3f81, "just above the tie rounds up"},
      {0x3f807fff, 0x3f80, "just below the tie rounds down"},
      {0x7f7fffff, 0x7f80, "FLT_MAX rounds to +inf"},
      {0xff7fffff, 0xff80, "-FLT_MAX rounds to -inf"},
      {0x7f7f7fff, 0x7f7f, "largest value that stays finite"},
      {0x7f800000, 0x7f80, "+inf"},
      {0xff800000, 0xff80, "-inf"},
      {0x7f800001, 0x7fc0, "signalling NaN is quietened"},
      {0xff812345, 0xffc1, "negative NaN keeps sign and top payload"},
      {0x00008000, 0x0000, "subnormal tie rounds to even 0"},
      {0x00018000, 0x0002, "subnormal tie rounds to even 2"},
      {0x007fffff, 0x0080, "largest fp32 subnormal rounds up to the smallest normal"},
      {0x80000000, 0x8000, "-0"},
  };
  for (const Case& c : cases)
    EXPECT_EQ(f32_to_bf16(F(c.f32)).bits, c.want) << c.what << " (f32 " << hex(c.f32, 8) << ")";
}

// ---- e4m3 ------------------------------------------------------------------------------------

TEST(E4m3, EveryCodeDecodesToItsDefinition) {
  Misses m;
  for (int c = 0; c < 256; ++c) {
    const float got = e4m3_to_f32(uint8_t(c));
    const double want = fp64::e4m3_value(uint8_t(c));
    if (std::isnan(want) ? !std::isnan(got)
                         : double(got) != want || std::signbit(got) != std::signbit(want))
      m.add("e4m3 " + hex(c, 2) + " decodes to " + std::to_string(got));
  }
  EXPECT_EQ(m.count(), 0);
  // Written down from the OCP definition (bias 7, 3 fraction bits, no infinity).
  EXPECT_EQ(e4m3_to_f32(0x00), 0.0f);
  EXPECT_EQ(f32_bits(e4m3_to_f32(0x80)), 0x80000000u);  // -0
  EXPECT_EQ(e4m3_to_f32(0x01), 0x1p-9f);                // smallest subnormal
  EXPECT_EQ(e4m3_to_f32(0x07), 7 * 0x1p-9f);            // largest subnormal
  EXPECT_EQ(e4m3_to_f32(0x08), 0x1p-6f);                // smallest normal
  EXPECT_EQ(e4m3_to_f32(0x09), 1.125f * 0x1p-6f);
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_f32(0x40), 2.0f);
  EXPECT_EQ(e4m3_to_f32(0x58), 16.0f);
  EXPECT_EQ(e4m3_to_f32(0x77), 240.0f);
  EXPECT_EQ(e4m3_to_f32(0x78), 256.0f);
  EXPECT_EQ(e4m3_to_f32(0x7d), 416.0f);
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);  // largest finite
  EXPECT_EQ(e4m3_to_f32(0xb8), -1.0f);
  EXPECT_EQ(e4m3_to_f32(0xfe), -448.0f);
  EXPECT_EQ(f32_bits(e4m3_to_f32(0x7f)), 0x7fc00000u);  // the NaN of each sign
  EXPECT_EQ(f32_bits(e4m3_to_f32(0xff)), 0xffc00000u);
}

TEST(E4m3, DecodeIsStrictlyIncreasingOverFiniteCodes) {
  for (int c = 0; c < 0x7e; ++c)
    EXPECT_LT(e4m3_to_f32(uint8_t(c)), e4m3_to_f32(uint8_t(c + 1))) << "code " << hex(c, 2);
}

TEST(E4m3, EveryFiniteCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    if (e4m3_is_nan(uint8_t(c))) continue;
    EXPECT_EQ(int(f32_to_e4m3(e4m3_to_f32(uint8_t(c)))), c) << "code " << hex(c, 2);
  }
  EXPECT_EQ(int(f32_to_e4m3(e4m3_to_f32(0x7f))), 0x7f);
  EXPECT_EQ(int(f32_to_e4m3(e4m3_to_f32(0xff))), 0xff);
}

TEST(E4m3, EncodesEveryBf16LikeTheNearestValueSearch) {
  Misses m;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float x = bf(uint16_t(h));
    const uint8_t got = f32_to_e4m3(x), want = fp64::e4m3_nearest(double(x));
    if (got != want)
      m.add("x=" + std::to_string(x) + " (bf16 " + hex(h, 4) + "): got " + hex(got, 2) + " want " +
            hex(want, 2));
  }
  EXPECT_EQ(m.count(), 0);
}

TEST(E4m3, EncodesMidpointsAndTheirNeighboursLikeTheSearch) {
  // Every midpoint between adjacent finite codes, and the fp32 values one step either side: the
  // cases where a rounding bug shows first.
  Misses m;
  for (int c = 0; c < 0x7e; ++c) {
    const float mid = float((fp64::e4m3_value(uint8_t(c)) + fp64::e4m3_value(uint8_t(c + 1))) / 2);
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), -mid}) {
      const uint8_t got = f32_to_e4m3(x), want = fp64::e4m3_nearest(double(x));
      if (got != want)
        m.add("x=" + hex(f32_bits(x), 8) + ": got " + hex(got, 2) + " want " + hex(want, 2));
    }
  }
  EXPECT_EQ(m.count(), 0);
}

TEST(E4m3, EncodesRandomF32LikeTheSearch) {
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, "1<<20 random fp32 bit patterns");
  fx::Rng rng(seed);
  Misses m;
  for (int i = 0; i < (1 << 20); ++i) {
    // Exponents spread over the range where e4m3 rounding happens, plus some from everywhere.
    uint32_t u = uint32_t(rng.next());
    if (i % 4) u = (u & 0x807fffffu) | (uint32_t(rng.range(127 - 14, 127 + 10)) << 23);
    const float x = F(u);
    const uint8_t got = f32_to_e4m3(x), want = fp64::e4m3_nearest(double(x));
    if (got != want) m.add("x=" + hex(u, 8) + ": got " + hex(got, 2) + " want " + hex(want, 2));
  }
  EXPECT_EQ(m.count(), 0);
}

TEST(E4m3, WrittenTiesSubnormalsSaturationAndNaN) {
  struct Case {
    float x;
    int want;
    const char* what;
  } cases[] = {
      {0x1p-10f, 0x00, "half the smallest subnormal: tie, to even 0"},
      {0x1.000002p-10f, 0x01, "just above it: smallest subnormal"},
      {3 * 0x1p-10f, 0x02, "1.5 * 2^-9: tie between codes 1 and 2, to 2"},
      {5 * 0x1p-10f, 0x02, "2.5 * 2^-9: tie between codes 2 and 3, to 2"},
      {15 * 0x1p-10f, 0x08, "7.5 * 2^-9: tie between the largest subnormal and 2^-6, to 2^-6"},
      {1.0625f, 0x38, "1 + 1/16: tie, to 1.0"},
      {1.1875f, 0x3a, "1 + 3/16: tie, to 1.25"},
      {17.0f, 0x58, "17: tie between 16 and 18, to 16"},
      {248.0f, 0x78, "248: tie between 240 and 256, to 256"},
      {432.0f, 0x7e, "432: tie between 416 and 448, to 448"},
      {464.0f, 0x7e, "464: tie between 448 and (NaN) 480: saturates to 448"},
      {470.0f, 0x7e, "past 448 saturates"},
      {1e30f, 0x7e, "far past 448 saturates"},
      {INFINITY, 0x7e, "+inf saturates to 448"},
      {-INFINITY, 0xfe, "-inf saturates to -448"},
      {NAN, 0x7f, "NaN"},
      {-NAN, 0xff, "negative NaN"},
      {-0.0f, 0x80, "-0"},
      {-0x1p-11f, 0x80, "negative value that rounds to zero keeps its sign"},
      {F(0x00000001), 0x00, "smallest fp32 subnormal"},
      {-448.0f, 0xfe, "-448"},
  };
  for (const Case& c : cases)
    EXPECT_EQ(int(f32_to_e4m3(c.x)), c.want) << c.what << " (x=" << hex(f32_bits(c.x), 8) << ")";
}

// ---- e2m1 ------------------------------------------------------------------------------------

TEST(E2m1, EveryCodeDecodesToItsDefinition) {
  const float want[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (int c = 0; c < 16; ++c) {
    EXPECT_EQ(f32_bits(e2m1_to_f32(uint8_t(c))), f32_bits(want[c])) << "code " << c;
    EXPECT_EQ(double(e2m1_to_f32(uint8_t(c))), fp64::e2m1_value(uint8_t(c))) << "code " << c;
    EXPECT_EQ(int(f32_to_e2m1(want[c])), c) << "code " << c << " round trip";
    // Only the low nibble is decoded.
    EXPECT_EQ(f32_bits(e2m1_to_f32(uint8_t(c | 0xa0))), f32_bits(want[c]));
  }
}

TEST(E2m1, EncodesEveryBf16LikeTheNearestValueSearch) {
  Misses m;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float x = bf(uint16_t(h));
    const uint8_t got = f32_to_e2m1(x), want = fp64::e2m1_nearest(double(x));
    if (got != want)
      m.add("x=" + std::to_string(x) + " (bf16 " + hex(h, 4) + "): got " + hex(got, 1) + " want " +
            hex(want, 1));
  }
  EXPECT_EQ(m.count(), 0);
}

TEST(E2m1, EncodesRandomF32AndMidpointNeighboursLikeTheSearch) {
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, "midpoints +-1 ulp, then 1<<18 random fp32 in [2^-4, 2^4)");
  fx::Rng rng(seed);
  Misses m;
  auto check = [&](float x) {
    const uint8_t got = f32_to_e2m1(x), want = fp64::e2m1_nearest(double(x));
    if (got != want)
      m.add("x=" + hex(f32_bits(x), 8) + ": got " + hex(got, 1) + " want " + hex(want, 1));
  };
  for (float mid : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f})
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 10.0f)})
      check(x), check(-x);
  for (int i = 0; i < (1 << 18); ++i)
    check(F((uint32_t(rng.next()) & 0x807fffffu) | (uint32_t(rng.range(123, 130)) << 23)));
  EXPECT_EQ(m.count(), 0);
}

TEST(E2m1, WrittenTiesSaturationNaNAndPacking) {
  struct Case {
    float x;
    int want;
    const char* what;
  } cases[] = {
      {0.25f, 0x0, "0.25: tie between 0 and 0.5, to 0"},
      {0.2500001f, 0x1, "just above 0.25"},
      {0.75f, 0x2, "0.75: tie between 0.5 and 1, to 1"},
      {1.25f, 0x2, "1.25: tie between 1 and 1.5, to 1"},
      {1.75f, 0x4, "1.75: tie between 1.5 and 2, to 2"},
      {2.5f, 0x4, "2.5: tie between 2 and 3, to 2"},
      {3.5f, 0x6, "3.5: tie between 3 and 4, to 4"},
      {5.0f, 0x6, "5: tie between 4 and 6, to 4"},
      {5.0001f, 0x7, "just above 5"},
      {7.0f, 0x7, "past 6 saturates"},
      {1e30f, 0x7, "far past 6 saturates"},
      {INFINITY, 0x7, "+inf saturates"},
      {-INFINITY, 0xf, "-inf saturates"},
      {NAN, 0x0, "NaN has no code: +0"},
      {-NAN, 0x0, "negative NaN: +0"},
      {-0.0f, 0x8, "-0"},
      {-0.1f, 0x8, "negative value that rounds to zero keeps its sign"},
      {0.7f, 0x1, "0.7 -> 0.5"},
      {2.9f, 0x5, "2.9 -> 3"},
      {-3.6f, 0xe, "-3.6 -> -4"},
  };
  for (const Case& c : cases)
    EXPECT_EQ(int(f32_to_e2m1(c.x)), c.want) << c.what << " (x=" << c.x << ")";
  EXPECT_EQ(int(e2m1_pack(0x3, 0xc)), 0xc3);  // element 2i in the low nibble
  EXPECT_EQ(int(e2m1_lo(0xc3)), 0x3);
  EXPECT_EQ(int(e2m1_hi(0xc3)), 0xc);
}

// ---- ue8m0 -----------------------------------------------------------------------------------

TEST(Ue8m0, EveryCodeDecodesToAPowerOfTwo) {
  for (int c = 0; c < 255; ++c) {
    EXPECT_EQ(double(ue8m0_to_f32(uint8_t(c))), std::ldexp(1.0, c - 127)) << "code " << c;
    EXPECT_EQ(double(ue8m0_to_f32(uint8_t(c))), fp64::ue8m0_value(uint8_t(c))) << "code " << c;
  }
  EXPECT_EQ(f32_bits(ue8m0_to_f32(0)), 0x00400000u);  // 2^-127, an fp32 subnormal
  EXPECT_EQ(f32_bits(ue8m0_to_f32(1)), 0x00800000u);  // 2^-126
  EXPECT_EQ(ue8m0_to_f32(127), 1.0f);
  EXPECT_EQ(ue8m0_to_f32(128), 2.0f);
  EXPECT_EQ(f32_bits(ue8m0_to_f32(254)), 0x7f000000u);  // 2^127
  EXPECT_TRUE(std::isnan(ue8m0_to_f32(255)));
  EXPECT_EQ(int(ue8m0_from_exp(0)), 127);
  EXPECT_EQ(int(ue8m0_from_exp(-200)), 0);  // clamped
  EXPECT_EQ(int(ue8m0_from_exp(200)), 254);
  EXPECT_EQ(ue8m0_exp(119), -8);
}

TEST(Ue8m0, EncodersMatchTheSearchOnEveryBf16AndEveryCode) {
  Misses m;
  auto check = [&](float x) {
    const int f = f32_to_ue8m0(x, Ue8m0Round::kFloor), c = f32_to_ue8m0(x, Ue8m0Round::kCeil),
              n = f32_to_ue8m0(x, Ue8m0Round::kNearest);
    const int wf = fp64::ue8m0_floor(x), wc = fp64::ue8m0_ceil(x), wn = fp64::ue8m0_nearest(x);
    if (f != wf || c != wc || n != wn)
      m.add("x=" + hex(f32_bits(x), 8) + ": floor/ceil/nearest " + std::to_string(f) + "/" +
            std::to_string(c) + "/" + std::to_string(n) + " want " + std::to_string(wf) + "/" +
            std::to_string(wc) + "/" + std::to_string(wn));
  };
  for (uint32_t h = 0; h < 65536; ++h) check(bf(uint16_t(h)));
  for (int c = 0; c < 255; ++c) check(ue8m0_to_f32(uint8_t(c)));  // powers of two stay put
  EXPECT_EQ(m.count(), 0);
}

TEST(Ue8m0, WrittenRoundingClampingAndNaN) {
  using R = Ue8m0Round;
  EXPECT_EQ(int(f32_to_ue8m0(1.0f, R::kFloor)), 127);
  EXPECT_EQ(int(f32_to_ue8m0(1.0f, R::kCeil)), 127);
  EXPECT_EQ(int(f32_to_ue8m0(3.0f, R::kFloor)), 128);
  EXPECT_EQ(int(f32_to_ue8m0(3.0f, R::kCeil)), 129);
  EXPECT_EQ(int(f32_to_ue8m0(3.0f, R::kNearest)), 128);  // 1.5*2: tie between 2 (128) and 4 (129)
  EXPECT_EQ(int(f32_to_ue8m0(6.0f, R::kNearest)), 130);  // 1.5*4: tie between 129 and 130
  EXPECT_EQ(int(f32_to_ue8m0(5.0f, R::kNearest)), 129);
  EXPECT_EQ(int(f32_to_ue8m0(7.0f, R::kNearest)), 130);
  EXPECT_EQ(int(f32_to_ue8m0(-4.0f, R::kCeil)), 129);  // sign ignored
  EXPECT_EQ(int(f32_to_ue8m0(0.0f, R::kCeil)), 0);     // no zero: the smallest scale
  EXPECT_EQ(int(f32_to_ue8m0(1e-40f, R::kNearest)), 0);
  EXPECT_EQ(int(f32_to_ue8m0(1e38f, R::kFloor)), 253);
  EXPECT_EQ(int(f32_to_ue8m0(1e38f, R::kCeil)), 254);
  EXPECT_EQ(int(f32_to_ue8m0(3.4e38f, R::kCeil)), 254);  // 2^128 does not exist: saturates
  EXPECT_EQ(int(f32_to_ue8m0(INFINITY, R::kFloor)), 254);
  EXPECT_EQ(int(f32_to_ue8m0(NAN, R::kNearest)), 255);
}

// ---- the exact core --------------------------------------------------------------------------

TEST(MinifloatCore, RoundsThirdsAndOtherOddQuotientsLikeTheSearch) {
  // e4m3_round and e2m1_round of sig * 2^exp / div for odd div: what NVFP4 scales and elements
  // need.
  Misses m;
  for (uint32_t div : {1u, 3u, 5u, 7u, 9u, 11u, 13u, 15u})
    for (uint32_t sig = 1; sig < 256; ++sig)
      for (int exp = -20; exp <= 12; ++exp) {
        const double scale = double(div);
        const double x = std::ldexp(double(sig), exp);
        const int got8 = e4m3_round(sig, exp, div), want8 = fp64::e4m3_nearest(x, scale);
        const int got4 = e2m1_round(sig, exp, div), want4 = fp64::e2m1_nearest(x, scale);
        if (got8 != want8 || got4 != want4)
          m.add(std::to_string(sig) + "*2^" + std::to_string(exp) + "/" + std::to_string(div) +
                ": e4m3 " + hex(got8, 2) + " want " + hex(want8, 2) + ", e2m1 " + hex(got4, 1) +
                " want " + hex(want4, 1));
      }
  EXPECT_EQ(m.count(), 0);
}

TEST(MinifloatCore, PacksIntoF32ExactlyAndRoundsSubnormalsToEven) {
  using minifloat::pack_f32;
  EXPECT_EQ(pack_f32(0, 3, -1), 1.5f);
  EXPECT_EQ(pack_f32(1, 1, 0), -1.0f);
  EXPECT_EQ(f32_bits(pack_f32(0, 1, -149)), 0x00000001u);
  EXPECT_EQ(f32_bits(pack_f32(0, 1, -150)), 0x00000000u);  // half the smallest subnormal: even 0
  EXPECT_EQ(f32_bits(pack_f32(0, 3, -150)), 0x00000002u);  // 1.5 units: to even 2
  EXPECT_EQ(f32_bits(pack_f32(0, 1, -127)), 0x00400000u);
  EXPECT_EQ(f32_bits(pack_f32(0, 0xffffff, 104)), 0x7f7fffffu);   // FLT_MAX exactly
  EXPECT_EQ(f32_bits(pack_f32(0, 0x1ffffff, 103)), 0x7f800000u);  // rounds past FLT_MAX: inf
  EXPECT_EQ(f32_bits(pack_f32(0, 1, 128)), 0x7f800000u);
  EXPECT_EQ(f32_bits(pack_f32(1, 0, 5)), 0x80000000u);
  EXPECT_EQ(f32_bits(pack_f32(0, 0x1000001, -24)), 0x3f800000u);  // 1 + 2^-24: tie, to 1.0
  EXPECT_EQ(f32_bits(pack_f32(0, 0x1000003, -24)), 0x3f800002u);  // 1 + 3*2^-24: tie, up
}

TEST(MinifloatCore, BytePermPicksBytesAndReplicatesSignsLikePrmt) {
  using minifloat::byte_perm, minifloat::byte_perm_sx;
  const uint32_t x = 0x8001ff7fu, y = 0x12345678u;  // bytes 0..3: 7f ff 01 80; 4..7: 78 56 34 12
  using Perm = uint32_t (*)(uint32_t, uint32_t, uint32_t);
  for (const Perm f : {Perm(&byte_perm), Perm(&byte_perm_sx)}) {
    EXPECT_EQ(f(x, y, 0x3210u), x);
    EXPECT_EQ(f(x, y, 0x7654u), y);
    EXPECT_EQ(f(x, y, 0x4567u), 0x78563412u);
  }
  // byte_perm (CUDA's __byte_perm) reads three bits of each selector nibble: 0x9180 is 0x1100
  EXPECT_EQ(byte_perm(x, y, 0x9180u), 0xffff7f7fu);
  // byte_perm_sx (PTX prmt): bit 3 replicates the picked byte's sign
  EXPECT_EQ(byte_perm_sx(x, y, 0x9180u), 0xffff007fu);  // bytes 0, sign of 0, 1, sign of 1
  EXPECT_EQ(byte_perm_sx(x, y, 0xbb8cu), 0xffff0000u);  // signs of bytes 4, 0, 3, 3
  EXPECT_EQ(byte_perm_sx(x, y, 0xf0e1u), 0x007f00ffu);  // 1, sign of 6, 0, sign of 7
}

}  // namespace
}  // namespace dsv4

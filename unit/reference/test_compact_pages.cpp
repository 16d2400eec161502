// compact_pages reference for SGLang's paged layouts (v41, v41_fp4, v4, v4_fnuz): page geometry,
// hand-computed hostile tiles (zero, below the floors, NaN, +-inf, -0, powers of two times the
// fp8 maximum, bf16 near the fp32 maximum), the e4m3fnuz codec over every code point, fp64
// agreement, error bounds at the bound, and the scatter / gather over pools of pages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "dsv4/fixtures/generators.hpp"
#include "dsv4/fixtures/seed.hpp"
#include "dsv4/ref/compact_pages.hpp"
#include "dsv4/ref/formats/e4m3fnuz.hpp"
#include "dsv4/ref/formats/fp64.hpp"
#include "dsv4/ref/formats/kv_tiles.hpp"

namespace dsv4 {
namespace {

namespace cp = ref::compact_pages;
using Bytes = std::vector<uint8_t>;

constexpr KvLayout kAll[] = {KvLayout::kV41, KvLayout::kV41Fp4, KvLayout::kV4, KvLayout::kV4Fnuz};
constexpr int64_t kPageSizes[] = {1, 2, 7, 64, 128, 256};
constexpr uint16_t kNaN = 0x7fc0, kNegNaN = 0xffc0, kInf = 0x7f80, kNegInf = 0xff80;

bf16 B(float v) { return f32_to_bf16(v); }
bf16 H(uint16_t bits) { return bf16{bits}; }

struct Token {
  Bytes data, scales;
};

Token quantize(KvLayout l, const std::vector<bf16>& x) {
  const PageLayout L = page_layout(l);
  Token t{Bytes(size_t(L.data_bytes), 0xee), Bytes(size_t(L.scale_bytes), 0xee)};
  cp::quantize_token(l, x.data(), t.data.data(), t.scales.data());
  return t;
}

std::vector<int> bytes(const Bytes& b, size_t begin, size_t n) {
  return std::vector<int>(b.begin() + long(begin), b.begin() + long(begin + n));
}
std::vector<int> repeat(int byte, size_t n) { return std::vector<int>(n, byte); }

// ---- geometry --------------------------------------------------------------------------------

TEST(CompactPagesLayouts, GeometryByHand) {
  // page_bytes = ceil(P * (data + scale) / align) * align, worked out per page size.
  struct Row {
    KvLayout l;
    int64_t p, page_bytes;
  };
  const Row rows[] = {
      {KvLayout::kV41, 1, 1024},       {KvLayout::kV41, 2, 1536},       // 528 -> 1024, 1056 -> 1536
      {KvLayout::kV41, 7, 4096},       {KvLayout::kV41, 64, 33792},     // 3696 -> 4096, 33792
      {KvLayout::kV41, 128, 67584},    {KvLayout::kV41, 256, 135168},   // exact multiples
      {KvLayout::kV41Fp4, 1, 512},     {KvLayout::kV41Fp4, 2, 768},     // 288 -> 512, 576 -> 768
      {KvLayout::kV41Fp4, 7, 2048},    {KvLayout::kV41Fp4, 64, 18432},  // 2016 -> 2048
      {KvLayout::kV41Fp4, 256, 73728}, {KvLayout::kV4, 1, 1152},        // 584 -> 1152
      {KvLayout::kV4, 2, 1728},        {KvLayout::kV4, 7, 4608},  // 1168 -> 1728, 4088 -> 4608
      {KvLayout::kV4, 64, 37440},      {KvLayout::kV4Fnuz, 256, 149760},  // 37376 -> 65 * 576
  };
  for (const Row& r : rows) {
    const PageLayout L = page_layout(r.l);
    EXPECT_EQ(L.page_bytes(r.p), r.page_bytes) << kv_layout_name(r.l) << " P=" << r.p;
    EXPECT_EQ(L.scale_offset(r.p), r.p * L.data_bytes);
    EXPECT_EQ(L.padding_bytes(r.p), r.page_bytes - r.p * L.token_bytes());
  }
  const PageLayout v4 = page_layout(KvLayout::kV4);
  EXPECT_EQ(v4.locate(130, 64).page, 2);
  EXPECT_EQ(v4.locate(130, 64).row, 2);
  EXPECT_EQ(v4.data_row_offset(130, 64), 2 * 37440 + 2 * 576);
  EXPECT_EQ(v4.scale_row_offset(130, 64), 2 * 37440 + 64 * 576 + 2 * 8);
  for (KvLayout l : kAll) {
    KvLayout back{};
    ASSERT_TRUE(parse_kv_layout(kv_layout_name(l), &back));
    EXPECT_EQ(back, l);
  }
  KvLayout unused{};
  EXPECT_FALSE(parse_kv_layout("v4_fn", &unused));
  EXPECT_FALSE(parse_kv_layout("", &unused));
}

// ---- e4m3fnuz, every code point --------------------------------------------------------------

TEST(CompactPagesLayouts, E4m3fnuzEveryCodeAndEveryBf16) {
  for (int c = 0; c < 256; ++c) {
    const double want = fp64::e4m3fnuz_value(uint8_t(c));
    const float got = e4m3fnuz_to_f32(uint8_t(c));
    if (std::isnan(want)) {
      EXPECT_EQ(c, 0x80);
      EXPECT_EQ(f32_bits(got), 0x7fc00000u);
    } else {
      EXPECT_EQ(double(got), want) << "code " << c;
    }
  }
  EXPECT_EQ(e4m3fnuz_to_f32(0x7f), 240.0f);
  EXPECT_EQ(e4m3fnuz_to_f32(0x01), std::ldexp(1.0f, -10));
  EXPECT_EQ(e4m3fnuz_to_f32(0x08), std::ldexp(1.0f, -7));
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float x = bf16_to_f32(bf16{uint16_t(h)});
    ASSERT_EQ(f32_to_e4m3fnuz(x), fp64::e4m3fnuz_nearest(double(x))) << "bf16 0x" << std::hex << h;
  }
  EXPECT_EQ(f32_to_e4m3fnuz(-0.0f), 0x00);
  EXPECT_EQ(f32_to_e4m3fnuz(248.0f), 0x7f);  // saturates
}

// ---- hand-computed tiles ---------------------------------------------------------------------

TEST(CompactPagesLayouts, V41TilesByHand) {
  std::vector<bf16> x(512, B(1.0f));  // tiles 8..15: amax 1 -> e = -8 (0x77), 1 * 2^8 = 256 -> 0x78
  auto tile = [&](int b, int i) -> bf16& { return x[size_t(32 * b + i)]; };
  for (int i = 0; i < 32; ++i) {
    tile(0, i) = B(0.0f);    // zeros: below the floor, scale 2^-13 (0x72)
    tile(1, i) = H(0x3c24);  // 0.010009765625: amax/448 < 1e-4, e = -13, y = 82 -> 80
    tile(2, i) = B(448.0f);  // amax 448 * 2^0: e = 0 (0x7f), 448 -> 0x7e
    tile(3, i) = H(0x43e1);  // 450, just above 448: e = 1 (0x80), 225 -> 224 (0x76)
    tile(4, i) = B(2.0f);    // a NaN poisons the tile: scale 0xff, data all 0x7f
    tile(5, i) = B(-3.0f);   // infinities: scale 0xff, finite -> -0, inf -> 0x7f
    tile(6, i) = H(0x7f7f);  // bf16 max 1.9921875 * 2^127: e = 120 (0xf7), 255 -> 256
    tile(7, i) = B(-2.0f);   // amax 2: e = -7 (0x78), -2 * 2^7 = -256 -> 0xf8
  }
  tile(0, 1) = B(-0.0f);
  tile(4, 3) = H(kNegNaN);
  tile(5, 0) = H(kInf), tile(5, 1) = H(kNegInf), tile(5, 2) = B(0.0f);
  tile(6, 1) = H(0xff7f);

  const Token t = quantize(KvLayout::kV41, x);
  EXPECT_EQ(bytes(t.scales, 0, 16),
            (std::vector<int>{0x72, 0x72, 0x7f, 0x80, 0xff, 0xff, 0xf7, 0x78, 0x77, 0x77, 0x77,
                              0x77, 0x77, 0x77, 0x77, 0x77}));
  std::vector<int> z = repeat(0x00, 32);
  z[1] = 0x80;
  EXPECT_EQ(bytes(t.data, 0, 32), z) << "zeros keep their sign";
  EXPECT_EQ(bytes(t.data, 32, 32), repeat(0x6a, 32)) << "82 rounds to 80";
  EXPECT_EQ(bytes(t.data, 64, 32), repeat(0x7e, 32));
  EXPECT_EQ(bytes(t.data, 96, 32), repeat(0x76, 32));
  EXPECT_EQ(bytes(t.data, 128, 32), repeat(0x7f, 32)) << "x / NaN";
  std::vector<int> inf_tile = repeat(0x80, 32);
  inf_tile[0] = 0x7f, inf_tile[1] = 0x7f, inf_tile[2] = 0x00;
  EXPECT_EQ(bytes(t.data, 160, 32), inf_tile) << "x / inf";
  std::vector<int> big = repeat(0x78, 32);
  big[1] = 0xf8;
  EXPECT_EQ(bytes(t.data, 192, 32), big);
  EXPECT_EQ(bytes(t.data, 224, 32), repeat(0xf8, 32));
  EXPECT_EQ(bytes(t.data, 256, 256), repeat(0x78, 256));

  // Reader: 0x7e * 2^0 = 448; 0x00 under 2^-13 is 0; the 0xff scale gives NaN, also in bf16.
  float f[512];
  bf16 h[512];
  cp::dequantize_token(KvLayout::kV41, t.data.data(), t.scales.data(), f);
  cp::dequantize_token(KvLayout::kV41, t.data.data(), t.scales.data(), h);
  EXPECT_EQ(f[64], 448.0f);
  EXPECT_EQ(f[33], 80.0f * std::ldexp(1.0f, -13));
  EXPECT_EQ(f32_bits(f[1]), 0x80000000u);
  EXPECT_EQ(f32_bits(f[130]), 0x7fc00000u);
  EXPECT_EQ(f32_bits(f[160]), 0x7fc00000u);
  EXPECT_EQ(h[165].bits, 0x7fc0);
  EXPECT_TRUE(std::isinf(f[192])) << "256 * 2^120 is past fp32";
}

TEST(CompactPagesLayouts, V41Fp4TilesByHand) {
  std::vector<bf16> x(512, B(0.0f));  // tiles 8..31: zeros, scale clamped to 2^-9 (0x01)
  auto tile = [&](int b, int i) -> bf16& { return x[size_t(16 * b + i)]; };
  for (int i = 0; i < 16; ++i) tile(0, i) = B(1.0f);
  // Tile 0, amax 6: scale 1 (0x38); 6 -> 7, 0.25 ties to 0, 0.75 ties up to 1 (code 2), -5 ties
  // down to -4 (0xe), 1 -> 2, -0 keeps its sign (0x8).
  tile(0, 0) = B(6.0f), tile(0, 1) = B(0.25f), tile(0, 2) = B(0.75f), tile(0, 3) = B(-5.0f);
  tile(0, 4) = B(-0.0f), tile(0, 5) = B(-0.1f);
  for (int i = 0; i < 16; ++i) {
    tile(1, i) = B(3000.0f);  // 3000/6 = 500 clamps to 448 (0x7e); 3000/448 saturates at 6
    tile(2, i) = B(-3.0f);    // NaN counts as inf: scale 0x7f, codes 0
    tile(3, i) = B(-3.0f);    // infinity counts as the fp32 max: scale 448 (0x7e); -inf -> -6
    tile(4, i) = H(0x3a83);   // 0.00099945...: amax/6 below 2^-9 -> scale 2^-9; 0.5117 -> 0.5
    tile(5, i) = B(6.375f);   // 6.375/6 = 1.0625, halfway 1 / 1.125: even 1.0; 6.375 -> 6
  }
  tile(2, 5) = H(kNaN);
  tile(3, 9) = H(kNegInf);
  const Token t = quantize(KvLayout::kV41Fp4, x);
  std::vector<int> sc = repeat(0x01, 32);
  sc[0] = 0x38, sc[1] = 0x7e, sc[2] = 0x7f, sc[3] = 0x7e, sc[4] = 0x01, sc[5] = 0x38;
  EXPECT_EQ(bytes(t.scales, 0, 32), sc);
  // Tile 0 codes 7, 0, 2, 0xe, 0x8, 0x8 (-0.1 rounds to -0), then 1.0 -> 2.
  EXPECT_EQ(bytes(t.data, 0, 8),
            (std::vector<int>{0x07, 0xe2, 0x88, 0x22, 0x22, 0x22, 0x22, 0x22}));
  EXPECT_EQ(bytes(t.data, 8, 8), repeat(0x77, 8));
  EXPECT_EQ(bytes(t.data, 16, 8), repeat(0x00, 8)) << "a NaN tile: zero codes";
  // -3 / 448 rounds to -0 (0x8); value 9, -inf, saturates to -6 (0xf).
  EXPECT_EQ(bytes(t.data, 24, 8),
            (std::vector<int>{0x88, 0x88, 0x88, 0x88, 0xf8, 0x88, 0x88, 0x88}));
  EXPECT_EQ(bytes(t.data, 32, 8), repeat(0x11, 8));
  EXPECT_EQ(bytes(t.data, 40, 8), repeat(0x77, 8));
  EXPECT_EQ(bytes(t.data, 48, 208), repeat(0x00, 208));

  float f[512];
  cp::dequantize_token(KvLayout::kV41Fp4, t.data.data(), t.scales.data(), f);
  EXPECT_EQ(f[0], 6.0f);
  EXPECT_EQ(f[3], -4.0f);
  EXPECT_EQ(f32_bits(f[4]), 0x80000000u);
  EXPECT_EQ(f[16], 6.0f * 448.0f);
  EXPECT_EQ(f32_bits(f[32]), 0x7fc00000u);
  EXPECT_EQ(f[64], std::ldexp(1.0f, -10));
}

TEST(CompactPagesLayouts, V4TilesByHandBothFlavours) {
  std::vector<bf16> x(512, B(0.0f));
  auto tile = [&](int b, int i) -> bf16& { return x[size_t(64 * b + i)]; };
  for (int i = 0; i < 64; ++i) {
    tile(1, i) = B(448.0f);  // e4m3fn: e = 0 (0x7f), 448 -> 0x7e; fnuz: e = 1, 224 -> 0x7e
    tile(2, i) = B(240.0f);  // e4m3fn: e = 0, 240 -> 0x77; fnuz: e = 0 (0x7f), 240 -> 0x7f
    tile(3, i) = B(-3.0f);   // inf tile: scale byte 0x7e, finite -> -0 (fnuz 0), inf -> -M
    tile(4, i) = B(1.0f);    // a NaN element gives -M; the rest as if it were absent
  }
  tile(0, 1) = B(-0.0f);  // tile 0: zeros, at the 1e-8 floor: e = -35 (0x5c) / -34 (0x5d)
  tile(3, 0) = H(kInf), tile(3, 1) = H(kNegInf), tile(3, 2) = H(kNaN);
  tile(4, 7) = H(kNegNaN);
  for (int i = 448; i < 512; ++i) x[size_t(i)] = H(uint16_t(0x8000 + 3 * i));  // raw bf16
  x[500] = H(kNaN);

  struct Want {
    KvLayout l;
    std::vector<int> scales;
    int zero_neg, max448, max240, inf_fin, neg_max, one;
  };
  // tile 4: amax 1 -> e4m3fn e = ceil(log2(1/448)) = -8 (0x77), 256 -> 0x78; fnuz
  // e = ceil(log2(1/240)) = -7 (0x78), 128 -> 0x78.
  const Want wants[] = {
      {KvLayout::kV4,
       {0x5c, 0x7f, 0x7f, 0x7e, 0x77, 0x5c, 0x5c},
       0x80,
       0x7e,
       0x77,
       0x80,
       0xfe,
       0x78},
      {KvLayout::kV4Fnuz,
       {0x5d, 0x80, 0x7f, 0x7e, 0x78, 0x5d, 0x5d},
       0x00,
       0x7e,
       0x7f,
       0x00,
       0xff,
       0x78},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(kv_layout_name(w.l));
    const Token t = quantize(w.l, x);
    EXPECT_EQ(bytes(t.scales, 0, 7), w.scales);
    EXPECT_EQ(t.scales[7], 0xee) << "the pad byte is not written";
    EXPECT_EQ(t.data[0], 0x00);
    EXPECT_EQ(t.data[1], w.zero_neg);
    EXPECT_EQ(bytes(t.data, 64, 64), repeat(w.max448, 64));
    EXPECT_EQ(bytes(t.data, 128, 64), repeat(w.max240, 64));
    std::vector<int> inf_tile = repeat(w.inf_fin, 64);
    inf_tile[0] = inf_tile[1] = inf_tile[2] = w.neg_max;
    EXPECT_EQ(bytes(t.data, 192, 64), inf_tile);
    std::vector<int> nan_tile = repeat(w.one, 64);
    nan_tile[7] = w.neg_max;
    EXPECT_EQ(bytes(t.data, 256, 64), nan_tile);
    for (int i = 448; i < 512; ++i) {
      const int j = 448 + 2 * (i - 448);
      ASSERT_EQ(t.data[size_t(j)] | t.data[size_t(j) + 1] << 8, x[size_t(i)].bits) << i;
    }
    bf16 h[512];
    float f[512];
    cp::dequantize_token(w.l, t.data.data(), t.scales.data(), h);
    cp::dequantize_token(w.l, t.data.data(), t.scales.data(), f);
    EXPECT_EQ(f[64], 448.0f);
    EXPECT_EQ(f[263], w.l == KvLayout::kV4 ? -448.0f / 256 : -240.0f / 128);
    EXPECT_EQ(h[500].bits, kNaN);
    EXPECT_EQ(h[449].bits, x[449].bits) << "raw bf16 values come back as stored";
    EXPECT_EQ(f32_bits(f[449]), uint32_t(x[449].bits) << 16);
  }
  // The reader takes scale byte 0xff as exp2(128) = inf: code 0 gives NaN, others +-inf.
  EXPECT_EQ(kv::v4_decode_bits(0x00, 0xff, Fp8Flavour::kE4m3fn), 0x7fc00000u);
  EXPECT_EQ(kv::v4_decode_bits(0x81, 0xff, Fp8Flavour::kE4m3fn), 0xff800000u);
  EXPECT_EQ(kv::v4_decode_bits(0x80, 0x7f, Fp8Flavour::kE4m3fnuz), 0x7fc00000u);
  EXPECT_EQ(f32_from_bits(kv::v4_decode_bits(0x01, 0x00, Fp8Flavour::kE4m3fnuz)),
            std::ldexp(1.0f, -137));
}

// The word-at-a-time readers the kernels use (v4: four codes, both flavours; v41: four codes, and
// a group of words under one scale, also by multiplication; v41_fp4: eight nibbles through a
// table, and pairs of words by multiplication) against the one-value readers, for every code in
// every position under every scale byte, next to random normal codes and random bytes.
TEST(CompactPagesLayouts, WordReadersMatchTheOneValueReaders) {
  fx::Rng rng(fx::test_seed());
  int bad = 0;
  for (uint32_t sc = 0; sc < 256; ++sc) {
    for (Fp8Flavour f : {Fp8Flavour::kE4m3fn, Fp8Flavour::kE4m3fnuz})
      for (uint32_t c = 0; c < 256; ++c)
        for (int k = 0; k < 4; ++k) {
          uint32_t codes = 0;
          for (int j = 0; j < 4; ++j) {
            uint32_t b = uint32_t(rng.next()) & 0xffu;
            if (rng.next() % 2) b = (b & 0x80u) | uint32_t(rng.range(8, 0x7e));
            codes |= (j == k ? c : b) << (8 * j);
          }
          uint32_t f32[4], b16[2], v41[2], v41w[4];
          kv::v4_decode4_bits(codes, uint8_t(sc), f, f32);
          kv::v4_decode4_bf16(codes, uint8_t(sc), f, b16);
          kv::v41_decode4_bf16(codes, uint8_t(sc), v41);
          // the group reader: this word first, then one of normal codes only (the short path
          // for both unless this word holds a NaN code or the scale byte is outside 10..246)
          const uint32_t group[2] = {codes, 0x3a2b1c0du};
          kv::v41_decode_words_bf16<2>(group, uint8_t(sc), v41w);
          bad += v41w[0] != v41[0] || v41w[1] != v41[1];
          uint32_t v41m[4];
          kv::v41_scaled_words_bf16<2>(group, uint8_t(sc), v41m);
          bad +=
              v41m[0] != v41w[0] || v41m[1] != v41w[1] || v41m[2] != v41w[2] || v41m[3] != v41w[3];
          uint32_t other[2];
          kv::v41_decode4_bf16(group[1], uint8_t(sc), other);
          bad += v41w[2] != other[0] || v41w[3] != other[1];
          for (int j = 0; j < 4; ++j) {
            const uint8_t code = uint8_t(codes >> (8 * j));
            const uint32_t want = kv::v4_decode_bits(code, uint8_t(sc), f);
            const uint16_t want16 = f32_to_bf16(f32_from_bits(want)).bits;
            const uint16_t want41 =
                f32_to_bf16(f32_from_bits(kv::v41_decode_bits(code, uint8_t(sc)))).bits;
            bad += f32[j] != want || uint16_t(b16[j / 2] >> (16 * (j % 2))) != want16;
            bad += uint16_t(v41[j / 2] >> (16 * (j % 2))) != want41;
          }
        }
    const nvfp4::PairTable t = nvfp4::pair_table(uint8_t(sc));
    for (int n = 0; n < 64; ++n) {
      const uint32_t nibbles = n < 16 ? 0x11111111u * uint32_t(n) : uint32_t(rng.next());
      uint32_t out[4], mul[8];
      nvfp4::decode8_bf16(nibbles, t, out);
      const uint32_t two[2] = {uint32_t(rng.next()), nibbles};  // the multiply path, a pair
      kv::fp4_scaled_words_bf16<2>(two, uint8_t(sc), mul);
      for (int j = 0; j < 8; ++j) {
        const uint16_t want =
            uint16_t(kv::fp4_decode_bits(uint8_t((nibbles >> (4 * j)) & 0xfu), uint8_t(sc)) >> 16);
        const uint16_t first =
            uint16_t(kv::fp4_decode_bits(uint8_t((two[0] >> (4 * j)) & 0xfu), uint8_t(sc)) >> 16);
        bad += uint16_t(out[j / 2] >> (16 * (j % 2))) != want;
        bad += uint16_t(mul[4 + j / 2] >> (16 * (j % 2))) != want;
        bad += uint16_t(mul[j / 2] >> (16 * (j % 2))) != first;
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

// ---- fp64 agreement and exhaustive tiles ----------------------------------------------------

// Rows mixing ordinary values, tiny and huge magnitudes, zeros of both signs, NaN and infinities.
std::vector<bf16> hostile_row(fx::Rng& rng) {
  std::vector<bf16> x(512);
  const int mode = int(rng.next() % 6);
  for (auto& v : x) {
    const uint64_t r = rng.next();
    const float scale = mode == 0 ? 1.0f : mode == 1 ? 1e-9f : mode == 2 ? 1e30f : 1e-3f;
    v = B(float(int64_t(r % 2001) - 1000) / 1000.0f * scale);
    if (mode >= 4 && r % 97 == 0) v = H(uint16_t(r >> 20));  // any bit pattern
    if (mode == 5 && r % 211 == 0) v = H(r % 2 ? kInf : kNegNaN);
  }
  return x;
}

TEST(CompactPagesLayouts, Fp64FormulationAgreesOnHostileRows) {
  fx::Rng rng(fx::test_seed());
  for (int n = 0; n < 400; ++n) {
    const std::vector<bf16> x = hostile_row(rng);
    for (KvLayout l : kAll) {
      const PageLayout L = page_layout(l);
      Token a{Bytes(size_t(L.data_bytes), 0), Bytes(size_t(L.scale_bytes), 0)};
      Token b = a;
      cp::quantize_token(l, x.data(), a.data.data(), a.scales.data());
      cp::quantize_token_fp64(l, x.data(), b.data.data(), b.scales.data());
      ASSERT_EQ(a.scales, b.scales) << kv_layout_name(l) << " row " << n;
      ASSERT_EQ(a.data, b.data) << kv_layout_name(l) << " row " << n;
    }
  }
}

TEST(CompactPagesLayouts, Fp64ReaderAgreesOnEveryBytePattern) {
  fx::Rng rng(fx::test_seed());
  for (KvLayout l : kAll) {
    const PageLayout L = page_layout(l);
    for (int n = 0; n < 64; ++n) {
      Bytes data(size_t(L.data_bytes)), scales(size_t(L.scale_bytes));
      // Row n: data bytes cycle through every value, scales through every value in turn.
      for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i + 37 * n);
      for (size_t i = 0; i < scales.size(); ++i) scales[i] = uint8_t(rng.next());
      scales[0] = uint8_t(4 * n), scales[1] = uint8_t(255 - n);
      float f[512];
      double d[512];
      cp::dequantize_token(l, data.data(), scales.data(), f);
      cp::dequantize_token_fp64(l, data.data(), scales.data(), d);
      for (int i = 0; i < 512; ++i) {
        if (!L.fp4 && i >= L.quant_values) {  // raw bf16, widened with its NaN payload
          const int j = L.quant_values + 2 * (i - L.quant_values);
          ASSERT_EQ(f32_bits(f[i]), uint32_t(data[size_t(j)] | data[size_t(j) + 1] << 8) << 16);
        } else if (std::isnan(d[i])) {
          ASSERT_EQ(f32_bits(f[i]), 0x7fc00000u) << kv_layout_name(l) << " value " << i;
        } else {
          ASSERT_EQ(f32_bits(f[i]), f32_bits(float(d[i]))) << kv_layout_name(l) << " value " << i;
        }
      }
    }
  }
}

// Calls check(token, positions) with tokens whose tiles each hold amax at their first value and,
// at the others, every bf16 pattern of magnitude <= amax in turn (both signs).
template <class Check>
void sweep_tiles(const PageLayout& L, float amax, Check check) {
  const uint16_t lim = B(amax).bits;
  std::vector<bf16> x(512, B(0.0f));
  uint32_t h = 0;
  while (h < 0x10000) {
    for (int b = 0; b < L.scales; ++b) {
      x[size_t(b * L.tile_values)] = B(amax);
      for (int i = 1; i < L.tile_values; ++i) {
        while (h < 0x10000 && (h & 0x7fff) > lim) ++h;
        x[size_t(b * L.tile_values + i)] = H(uint16_t(h < 0x10000 ? h++ : 0));
      }
    }
    check(x);
  }
}

// Every bf16 value whose magnitude fits a tile of maximum amax, quantised in that tile, against
// the fp64 nearest-value searches: the short paths and the exact core agree everywhere.
TEST(CompactPagesLayouts, EveryBf16InTilesOfManyScales) {
  const float amaxes[] = {0.0f, 1e-30f, 3e-6f, 0.0547f, 1.0f, 448.0f, 450.0f, 1e20f, 3.3e38f};
  for (KvLayout l : kAll) {
    const PageLayout L = page_layout(l);
    for (float amax : amaxes) {
      sweep_tiles(L, amax, [&](const std::vector<bf16>& x) {
        Token a{Bytes(size_t(L.data_bytes)), Bytes(size_t(L.scale_bytes))}, b = a;
        cp::quantize_token(l, x.data(), a.data.data(), a.scales.data());
        cp::quantize_token_fp64(l, x.data(), b.data.data(), b.scales.data());
        ASSERT_EQ(a.data, b.data) << kv_layout_name(l) << " amax " << amax;
        ASSERT_EQ(bytes(a.scales, 0, size_t(L.scales)), bytes(b.scales, 0, size_t(L.scales)));
      });
    }
  }
}

// ---- error bounds ----------------------------------------------------------------------------

// The bound holds for every bf16 value in tiles at many scales (the floors included), and is
// reached: the largest error / bound ratio is above 15/16 (the bound's |x|/16 is a worst case
// that a tie at 1 + 1/16 of a binade nearly reaches) or exactly 1 for fp4 (0.25 S ties to 0).
TEST(CompactPagesLayouts, ErrorBoundsHoldAndAreReached) {
  const float amaxes[] = {0.0f, 1e-9f, 1e-6f, 0.01f, 1.0f, 100.0f, 2784.0f, 1e30f};
  for (KvLayout l : kAll) {
    const PageLayout L = page_layout(l);
    double worst = 0;
    for (float amax : amaxes) {
      sweep_tiles(L, amax, [&](const std::vector<bf16>& x) {
        Token t{Bytes(size_t(L.data_bytes)), Bytes(size_t(L.scale_bytes))};
        cp::quantize_token(l, x.data(), t.data.data(), t.scales.data());
        float d[512];
        cp::dequantize_token(l, t.data.data(), t.scales.data(), d);
        for (int i = 0; i < L.quant_values; ++i) {
          const bf16* tile = x.data() + i / L.tile_values * L.tile_values;
          if (!cp::error_bound_applies(l, tile)) continue;
          const double v = fp64::bf16_value(x[size_t(i)].bits);
          const double bound = cp::error_bound(l, v, t.scales[size_t(i / L.tile_values)]);
          const double err = std::fabs(double(d[i]) - v);
          ASSERT_LE(err, bound) << kv_layout_name(l) << " amax " << amax << " value " << v;
          worst = std::max(worst, err / bound);
        }
      });
    }
    EXPECT_GT(worst, l == KvLayout::kV41Fp4 ? 0.999 : 15.0 / 16 * 0.99) << kv_layout_name(l);
  }
  // At the floors: a value of half the smallest subnormal step ties to zero, an error of
  // exactly 2^(e-10) (2^(e-11) for e4m3fnuz), which the bound allows.
  std::vector<bf16> x(512, B(0.0f));
  x[1] = B(std::ldexp(1.0f, -10 - 13));
  const Token t = quantize(KvLayout::kV41, x);
  EXPECT_EQ(t.scales[0], 114);
  EXPECT_EQ(t.data[1], 0x00);
  EXPECT_EQ(cp::error_bound(KvLayout::kV41, std::ldexp(1.0, -23), 114),
            std::ldexp(1.0, -23) + std::ldexp(1.0, -27));
}

// ---- pools of pages --------------------------------------------------------------------------

TEST(CompactPagesLayouts, ScatterAndGatherOverPagesWithHostileSlots) {
  fx::Rng rng(fx::test_seed());
  for (KvLayout l : kAll) {
    const PageLayout L = page_layout(l);
    for (int64_t p : kPageSizes) {
      SCOPED_TRACE(std::string(kv_layout_name(l)) + " P=" + std::to_string(p));
      const size_t num_pages = 3, slots_total = num_pages * size_t(p);
      const size_t pb = size_t(L.page_bytes(p));
      std::vector<int64_t> slots;
      for (size_t s = slots_total; s-- > 0;)
        if (s % 2 == 0 || p == 1) slots.push_back(int64_t(s));
      const size_t valid = slots.size();
      for (int64_t bad : {int64_t(-1), int64_t(-7), int64_t(slots_total), int64_t(2147483647),
                          std::numeric_limits<int64_t>::max()})
        slots.push_back(bad);
      std::vector<bf16> src(slots.size() * 512);
      for (size_t t = 0; t < slots.size(); ++t) {
        const std::vector<bf16> r = hostile_row(rng);
        std::copy(r.begin(), r.end(), src.begin() + long(t * 512));
      }
      Bytes pool(num_pages * pb, 0xa5);
      const cp::Outcome o = cp::quantize(l, p, src, 0, slots, pool, num_pages);
      EXPECT_EQ(o.written, int64_t(valid));
      EXPECT_EQ(o.skipped, 2);
      EXPECT_EQ(o.rejected, 3);
      // Every written slot holds its token at page s / P, row s % P; every other byte is as it
      // was (unwritten rows, the v4 pad byte, the page padding).
      Bytes want(num_pages * pb, 0xa5);
      for (size_t t = 0; t < valid; ++t) {
        const size_t s = size_t(slots[t]), page = s / size_t(p), row = s % size_t(p);
        cp::quantize_token(l, src.data() + t * 512,
                           want.data() + page * pb + row * size_t(L.data_bytes),
                           want.data() + page * pb + size_t(p) * size_t(L.data_bytes) +
                               row * size_t(L.scale_bytes));
      }
      ASSERT_EQ(pool, want);
      if (L.scales < L.scale_bytes) {
        EXPECT_EQ(pool[size_t(L.scale_row_offset(0, p)) + 7], 0xa5);
      }
      // Gather the same slots back: untouched rows for skipped and rejected slots.
      std::vector<float> out(slots.size() * 512, -1.0f);
      const cp::Outcome g = cp::dequantize(l, p, pool, num_pages, slots, out, 0);
      EXPECT_EQ(g.written, int64_t(valid));
      EXPECT_EQ(g.rejected, 3);
      for (size_t t = 0; t < slots.size(); ++t) {
        float row[512];
        if (t < valid) {
          const size_t s = size_t(slots[t]);
          cp::dequantize_token(l, pool.data() + L.data_row_offset(int64_t(s), p),
                               pool.data() + L.scale_row_offset(int64_t(s), p), row);
        } else {
          std::fill(row, row + 512, -1.0f);
        }
        ASSERT_EQ(std::memcmp(out.data() + t * 512, row, sizeof row), 0) << "row " << t;
      }
    }
  }
}

TEST(CompactPagesLayouts, WholePagesHaveZeroPaddingAndRoundTrip) {
  fx::Rng rng(fx::test_seed());
  for (KvLayout l : kAll) {
    const PageLayout L = page_layout(l);
    for (int64_t p : {int64_t(1), int64_t(7)}) {
      std::vector<bf16> k(2 * size_t(p) * 512);
      for (auto& v : k) v = B(float(int64_t(rng.next() % 201) - 100) / 7.0f);
      const Bytes pages = cp::quantize_pages(l, p, k);
      ASSERT_EQ(pages.size(), 2 * size_t(L.page_bytes(p)));
      for (size_t pg = 0; pg < 2; ++pg) {
        const size_t end = pg * size_t(L.page_bytes(p)) + size_t(L.page_bytes(p));
        for (size_t i = end - size_t(L.padding_bytes(p)); i < end; ++i) ASSERT_EQ(pages[i], 0);
        if (L.scales < L.scale_bytes) {
          for (int64_t r = 0; r < p; ++r)
            ASSERT_EQ(pages[size_t(L.scale_row_offset(int64_t(pg) * p + r, p)) + 7], 0);
        }
      }
      const std::vector<bf16> back = cp::dequantize_pages(l, p, pages);
      ASSERT_EQ(back.size(), k.size());
      for (size_t s = 0; s < 2 * size_t(p); ++s) {
        bf16 row[512];
        cp::dequantize_token(l, pages.data() + L.data_row_offset(int64_t(s), p),
                             pages.data() + L.scale_row_offset(int64_t(s), p), row);
        ASSERT_EQ(std::memcmp(back.data() + s * 512, row, sizeof row), 0);
      }
    }
  }
}

TEST(CompactPagesLayouts, BadArgumentsNameTheField) {
  std::vector<bf16> src(512);
  std::vector<int64_t> slots{0};
  Bytes pool(1024);
  auto message = [](auto f) -> std::string {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(
      message([&] { cp::quantize(KvLayout::kV41, 0, src, 0, slots, pool, 1); }).find("page_size=0"),
      std::string::npos);
  EXPECT_NE(message([&] { cp::quantize(KvLayout(9), 1, src, 0, slots, pool, 1); }).find("layout=9"),
            std::string::npos);
  EXPECT_NE(
      message([&] { cp::quantize(KvLayout::kV4, 1, src, 0, slots, pool, 1); }).find("num_pages=1"),
      std::string::npos);
  EXPECT_NE(message([&] { cp::quantize_pages(KvLayout::kV41, 2, src); }).find("k holds 512"),
            std::string::npos);
}

}  // namespace
}  // namespace dsv4

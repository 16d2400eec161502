// The branch-free fp8 codecs of the paged KV tiles (v41, v4, v4_fnuz) and of MXFP8 blocks against
// their exact reference functions: every bf16 value in a tile of every scale a tile can have, and
// every code byte under every scale byte, through the one-value and the word-at-a-time readers.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "dsv4/fixtures/compare.hpp"
#include "dsv4/ref/formats/kv_tiles.hpp"

namespace dsv4 {
namespace {

using fx::Misses;

std::string hex(uint32_t v, int digits) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%0*x", digits, v);
  return b;
}

const char* flavour_name(Fp8Flavour f) {
  return f == Fp8Flavour::kE4m3fnuz ? "e4m3fnuz" : "e4m3fn";
}

// The tile maxima a writer can see: every finite bf16 magnitude, +-inf, and (v41) a NaN.
std::vector<minifloat::Bf16Amax> every_amax(bool with_nan) {
  std::vector<minifloat::Bf16Amax> m;
  for (uint32_t a = 0; a <= kv::kInfBits; ++a) m.push_back({a, false});
  if (with_nan) m.push_back({0u, true});
  return m;
}

// ---- writers ---------------------------------------------------------------------------------

TEST(Fp8Paths, V41EncodeEqualsTheExactEncodeForEveryBf16AndEveryTile) {
  std::set<std::pair<int, int>> seen;  // (kind, scale byte)
  std::vector<kv::V41Tile> tiles;
  for (const auto& m : every_amax(true)) {
    const kv::V41Tile t = kv::v41_tile(m);
    if (seen.insert({t.kind, t.sc}).second) tiles.push_back(t);
  }
  // Finite tiles: 2^-13 (the 1e-4 floor, byte 114) up to 2^120 (bf16's largest / 448 > 2^119).
  std::set<int> finite;
  for (const auto& t : tiles)
    if (t.kind == kv::kFinite) finite.insert(t.sc);
  ASSERT_EQ(finite.size(), 134u);
  EXPECT_EQ(*finite.begin(), 114);
  EXPECT_EQ(*finite.rbegin(), 247);
  ASSERT_EQ(tiles.size(), 136u);  // and the NaN and inf tiles
  Misses miss;
  for (const auto& t : tiles)
    for (uint32_t h = 0; h < 0x10000; ++h) {
      const uint8_t got = kv::v41_encode(uint16_t(h), t),
                    want = kv::v41_encode_exact(uint16_t(h), t);
      if (got != want)
        miss.add("kind " + std::to_string(t.kind) + " sc " + std::to_string(t.sc) + " x " +
                 hex(h, 4) + ": got " + hex(got, 2) + " want " + hex(want, 2));
      // The selects the device writers take in non-finite tiles (kernels/src/kv_codecs_device.hpp).
      if (t.kind != kv::kFinite)
        if (const uint8_t sel = kv::v41_nonfinite_encode(uint16_t(h), t); sel != want)
          miss.add("v41_nonfinite_encode kind " + std::to_string(t.kind) + " x " + hex(h, 4) +
                   ": got " + hex(sel, 2) + " want " + hex(want, 2));
    }
  EXPECT_EQ(miss.count(), 0);
}

TEST(Fp8Paths, V4EncodeEqualsTheExactEncodeForEveryBf16AndEveryTileBothFlavours) {
  for (Fp8Flavour f : {Fp8Flavour::kE4m3fn, Fp8Flavour::kE4m3fnuz}) {
    const bool fnuz = f == Fp8Flavour::kE4m3fnuz;
    std::set<std::pair<int, int>> seen;  // (kind, exponent)
    std::vector<kv::V4Tile> tiles;
    for (const auto& m : every_amax(false)) {
      const kv::V4Tile t = kv::v4_tile(m, f);
      if (seen.insert({t.kind, t.e}).second) tiles.push_back(t);
    }
    // Exponents from the 1e-8 floor (-35, or -34) to bf16's largest / M (120, or 121), and inf.
    std::set<int> es;
    for (const auto& t : tiles)
      if (t.kind == kv::kFinite) es.insert(t.e);
    ASSERT_EQ(es.size(), 156u) << flavour_name(f);
    EXPECT_EQ(*es.begin(), fnuz ? -34 : -35) << flavour_name(f);
    EXPECT_EQ(*es.rbegin(), fnuz ? 121 : 120) << flavour_name(f);
    ASSERT_EQ(tiles.size(), 157u) << flavour_name(f);
    Misses miss;
    for (const auto& t : tiles)
      for (uint32_t h = 0; h < 0x10000; ++h) {
        const uint8_t got = kv::v4_encode(uint16_t(h), t);
        const uint8_t want = kv::v4_encode_exact(uint16_t(h), t);
        if (got != want)
          miss.add(std::string(flavour_name(f)) + " kind " + std::to_string(t.kind) + " e " +
                   std::to_string(t.e) + " x " + hex(h, 4) + ": got " + hex(got, 2) + " want " +
                   hex(want, 2));
        // The selects the device writers take in inf tiles (kernels/src/kv_codecs_device.hpp).
        if (t.kind == kv::kInfTile)
          if (const uint8_t sel = kv::v4_inf_tile_encode(uint16_t(h), f); sel != want)
            miss.add(std::string(flavour_name(f)) + " v4_inf_tile_encode x " + hex(h, 4) +
                     ": got " + hex(sel, 2) + " want " + hex(want, 2));
      }
    EXPECT_EQ(miss.count(), 0);
  }
}

// ---- readers ---------------------------------------------------------------------------------

uint16_t bf16_of(uint32_t f32) { return f32_to_bf16(f32_from_bits(f32)).bits; }

// The words a reader sees code c in: four copies (the short path where c allows it), and c at
// position k among normal codes (0x38 = 1, 0xc9 = -1.125 * 2, 0x70 = 256).
std::vector<uint32_t> words_with(uint32_t c) {
  std::vector<uint32_t> w = {c * 0x01010101u};
  for (int k = 0; k < 4; ++k) {
    uint32_t word = 0x70c93870u;
    word = (word & ~(0xffu << (8 * k))) | (c << (8 * k));
    w.push_back(word);
  }
  return w;
}

TEST(Fp8Paths, PairsScaleDownByTwoToTheMinus120) {
  // codes 0x38 (1), 0xb8 (-1), 0x01 (2^-9, subnormal), 0x7e (448): times 2^-120 as bf16
  // 0x0380, 0x8380, 0x0010 (the bf16 subnormal 16 * 2^-133), 0x07e0
  EXPECT_EQ(kv::e4m3_pair_scaled_down(0x7e01b838u, 0), 0x83800380u);
  EXPECT_EQ(kv::e4m3_pair_scaled_down(0x7e01b838u, 1), 0x07e00010u);
  EXPECT_EQ(kv::e4m3_pair_scaled_down(0x80000000u, 1), 0x80000000u);  // -0 keeps its sign
  EXPECT_EQ(kv::bf16x2_mul(0x83800380u, kv::bf16x2_pow2(120)), 0xbf803f80u);
}

TEST(Fp8Paths, Mxfp8AndV41ReadersEqualTheExactDecodeForEveryCodeAndScale) {
  Misses miss;
  for (uint32_t sc = 0; sc < 256; ++sc)
    for (uint32_t c = 0; c < 256; ++c) {
      const std::string at = "c " + hex(c, 2) + " sc " + std::to_string(sc);
      const uint32_t want = mxfp8::decode_exact(uint8_t(c), uint8_t(sc));
      if (mxfp8::decode_bits(uint8_t(c), uint8_t(sc)) != want) miss.add(at + ": decode_bits");
      if (mxfp8::decode_bf16_bits(uint8_t(c), uint8_t(sc)) != bf16_of(want))
        miss.add(at + ": decode_bf16_bits");
      for (uint32_t word : words_with(c)) {
        uint32_t f32[4], b16[2], v41[2], v41w[4], v41m[4];
        mxfp8::decode4_bits(word, uint8_t(sc), f32);
        mxfp8::decode4_bf16(word, uint8_t(sc), b16);
        kv::v41_decode4_bf16(word, uint8_t(sc), v41);
        const uint32_t group[2] = {0x3a2b1c0du, word};
        kv::v41_decode_words_bf16<2>(group, uint8_t(sc), v41w);
        kv::v41_scaled_words_bf16<2>(group, uint8_t(sc), v41m);
        const uint64_t exact16 = kv::v41_decode4_bf16_exact(word, uint8_t(sc));
        const uint64_t other16 = kv::v41_decode4_bf16_exact(group[0], uint8_t(sc));
        for (int k = 0; k < 4; ++k) {
          const uint32_t wk = mxfp8::decode_exact(uint8_t(word >> (8 * k)), uint8_t(sc));
          const uint16_t w16 = uint16_t(exact16 >> (16 * k));
          const auto half = [k](const uint32_t* p) { return uint16_t(p[k / 2] >> (16 * (k % 2))); };
          const std::string in = at + " word " + hex(word, 8) + " value " + std::to_string(k);
          if (f32[k] != wk)
            miss.add(in + ": decode4_bits " + hex(f32[k], 8) + " want " + hex(wk, 8));
          if (w16 != bf16_of(wk)) miss.add(in + ": v41_decode4_bf16_exact");
          if (half(b16) != w16) miss.add(in + ": decode4_bf16 " + hex(half(b16), 4));
          if (half(v41) != w16) miss.add(in + ": v41_decode4_bf16 " + hex(half(v41), 4));
          if (half(v41w + 2) != w16) miss.add(in + ": v41_decode_words_bf16");
          if (half(v41w) != uint16_t(other16 >> (16 * k)))
            miss.add(in + ": its group's other word");
          if (half(v41m + 2) != w16)
            miss.add(in + ": v41_scaled_words_bf16 " + hex(half(v41m + 2), 4));
          if (half(v41m) != uint16_t(other16 >> (16 * k)))
            miss.add(in + ": v41_scaled_words_bf16, its group's other word");
        }
      }
    }
  EXPECT_EQ(miss.count(), 0);
}

// A bf16 half that is a NaN (sparse_decode's operand readers keep NaN-ness, not the payload).
bool bf16_nan(uint16_t h) { return (h & 0x7fffu) > 0x7f80u; }

// The operand readers (kv::v41_operand_words_bf16, fp4_operand_words_bf16: sparse_decode's key
// tiles) give the reader's bits for every code and scale byte, but where the reader's is a NaN,
// where they give a NaN (of any payload); and the reader's NaN are exactly theirs.
TEST(Fp8Paths, OperandReadersEqualTheReadersButForNaNPayloads) {
  Misses miss;
  auto check = [&](const std::string& at, uint16_t got, uint16_t want) {
    if (bf16_nan(want) ? !bf16_nan(got) : got != want)
      miss.add(at + ": got " + hex(got, 4) + " want " + hex(want, 4));
  };
  int nan_scales = 0, nan_codes = 0;
  for (uint32_t sc = 0; sc < 256; ++sc) {
    for (uint32_t c = 0; c < 256; ++c)
      for (uint32_t word : words_with(c)) {
        const uint32_t group[2] = {0x3a2b1c0du, word};
        uint32_t want[4], got[4];
        kv::v41_scaled_words_bf16<2>(group, uint8_t(sc), want);
        kv::v41_operand_words_bf16<2>(group, uint8_t(sc), got);
        for (int h = 0; h < 8; ++h) {
          const auto half = [h](const uint32_t* p) { return uint16_t(p[h / 2] >> (16 * (h % 2))); };
          check("v41 sc " + std::to_string(sc) + " word " + hex(word, 8) + " half " +
                    std::to_string(h),
                half(got), half(want));
          nan_scales += sc == kUe8m0NaN && bf16_nan(half(want));
          nan_codes += sc != kUe8m0NaN && bf16_nan(half(want));
        }
      }
    for (uint32_t n = 0; n < 256; ++n) {  // every byte of nibbles, in both words of a pair
      const uint32_t two[2] = {n * 0x01010101u, (n ^ 0x5au) * 0x01010101u};
      uint32_t want[8], got[8];
      kv::fp4_scaled_words_bf16<2>(two, uint8_t(sc), want);
      kv::fp4_operand_words_bf16<2>(two, uint8_t(sc), got);
      for (int h = 0; h < 16; ++h)
        check("fp4 sc " + std::to_string(sc) + " nibbles " + hex(two[h / 8], 8) + " value " +
                  std::to_string(h),
              uint16_t(got[h / 2] >> (16 * (h % 2))), uint16_t(want[h / 2] >> (16 * (h % 2))));
    }
  }
  EXPECT_EQ(miss.count(), 0);
  EXPECT_GT(nan_scales, 0);  // both NaN sources were met
  EXPECT_GT(nan_codes, 0);
}

TEST(Fp8Paths, V4ReadersEqualTheExactDecodeForEveryCodeAndScaleBothFlavours) {
  Misses miss;
  for (Fp8Flavour f : {Fp8Flavour::kE4m3fn, Fp8Flavour::kE4m3fnuz})
    for (uint32_t sc = 0; sc < 256; ++sc)
      for (uint32_t c = 0; c < 256; ++c) {
        const std::string at =
            std::string(flavour_name(f)) + " c " + hex(c, 2) + " sc " + std::to_string(sc);
        const uint32_t want = kv::v4_decode_exact(uint8_t(c), uint8_t(sc), f);
        if (kv::v4_decode_bits(uint8_t(c), uint8_t(sc), f) != want) miss.add(at + ": decode_bits");
        if (kv::v4_decode_bf16_bits(uint8_t(c), uint8_t(sc), f) != bf16_of(want))
          miss.add(at + ": decode_bf16_bits");
        for (uint32_t word : words_with(c)) {
          uint32_t f32[4], b16[2];
          kv::v4_decode4_bits(word, uint8_t(sc), f, f32);
          kv::v4_decode4_bf16(word, uint8_t(sc), f, b16);
          for (int k = 0; k < 4; ++k) {
            const uint32_t wk = kv::v4_decode_exact(uint8_t(word >> (8 * k)), uint8_t(sc), f);
            const uint16_t got16 = uint16_t(b16[k / 2] >> (16 * (k % 2)));
            const std::string in = at + " word " + hex(word, 8) + " value " + std::to_string(k);
            if (f32[k] != wk)
              miss.add(in + ": decode4_bits " + hex(f32[k], 8) + " want " + hex(wk, 8));
            if (got16 != bf16_of(wk)) miss.add(in + ": decode4_bf16 " + hex(got16, 4));
          }
        }
      }
  EXPECT_EQ(miss.count(), 0);
}

}  // namespace
}  // namespace dsv4

// compact_pages kernels on every code point, on the device: every bf16 value a tile can hold at
// every scale a tile can have (the floors, NaN and infinite tiles included) and every tile maximum
// (each bf16 magnitude), quantised under every values-per-lane choice, and every (code, scale
// byte) pair of every layout dequantised to bf16 and fp32, each whole pool or output bit for bit
// against the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "dsv4/cases/compact_pages.hpp"
#include "dsv4/fixtures/gpu_test.hpp"
#include "dsv4/kernels/compact_pages.hpp"
#include "dsv4/ref/formats/e4m3.hpp"

namespace dsv4 {
namespace {

namespace kc = kernels::compact_pages;
using cases::CompactOp;
using cases::CompactPagesCase;
using cases::CompactPagesShape;

constexpr KvLayout kLayouts[] = {KvLayout::kV41, KvLayout::kV41Fp4, KvLayout::kV4,
                                 KvLayout::kV4Fnuz};
constexpr int64_t kP = 64;

// Tile maxima (bf16 bits) covering every scale a layout's tiles can have: the fp8 maximum times
// every power of two from below the floor to bf16's top, bf16 max, and +inf; for v41_fp4, 6 times
// every e4m3 scale, 0 and +inf. Followed by every magnitude up to each maximum, both signs.
std::vector<uint32_t> tile_maxima(KvLayout l) {
  std::vector<uint32_t> a;
  if (l == KvLayout::kV41Fp4) {
    a.push_back(0);
    for (int c = 1; c <= 0x7e; ++c) a.push_back(f32_bits(6.0f * e4m3_to_f32(uint8_t(c))) >> 16);
  } else {
    const float m = l == KvLayout::kV4Fnuz ? 240.0f : 448.0f;
    for (int e = -40; e <= 119; ++e) a.push_back(f32_bits(std::ldexp(m, e)) >> 16);
    a.push_back(0x7f7f);
  }
  a.push_back(0x7f80);
  return a;
}

// Tokens whose quantised tiles each open with a maximum, then hold every magnitude up to it
// (both signs); NaN-holding tiles at the end. A whole number of pages of kP tokens.
std::vector<bf16> admissible_tokens(KvLayout l) {
  const PageLayout L = page_layout(l);
  const size_t tv = size_t(L.tile_values);
  std::vector<bf16> tiles;
  for (uint32_t amax : tile_maxima(l)) {
    size_t in_tile = 0;
    for (uint32_t mag = 0; mag <= std::min(amax, 0x7f7fu); ++mag)
      for (uint32_t sign : {0u, 0x8000u}) {
        if (in_tile == 0) tiles.push_back(bf16{uint16_t(amax)}), in_tile = 1;
        tiles.push_back(bf16{uint16_t(mag | sign)});
        if (++in_tile == tv) in_tile = 0;
      }
    while (in_tile != 0 && in_tile < tv) tiles.push_back(bf16{0}), ++in_tile;
  }
  // Every maximum a tile can have (each bf16 magnitude up to +inf) once, with magnitudes below it
  // spread over the tile, both signs: every input of the scale rules.
  for (uint32_t amax = 0; amax <= 0x7f80u; ++amax) {
    tiles.push_back(bf16{uint16_t(amax)});
    for (size_t i = 1; i < tv; ++i)
      tiles.push_back(bf16{uint16_t(std::min(amax, 0x7f7fu) * i / tv | (i % 2 ? 0x8000u : 0u))});
  }
  for (int k = 0; k < 64; ++k) {  // NaN tiles: one NaN among values at many scales
    for (size_t i = 0; i < tv; ++i) tiles.push_back(f32_to_bf16(std::ldexp(1.5f, k - 32) * i));
    tiles[tiles.size() - tv + size_t(k) % tv] = bf16{uint16_t(k % 2 ? 0xffc1 : 0x7fc0)};
  }
  // Spread the tiles over the quantised part of tokens (v4's raw tail gets the next values too).
  const size_t per_token = size_t(L.quant_values);
  std::vector<bf16> v;
  for (size_t i = 0; i < tiles.size(); i += per_token) {
    const size_t n = std::min(per_token, tiles.size() - i);
    v.insert(v.end(), tiles.begin() + long(i), tiles.begin() + long(i + n));
    v.resize(v.size() + per_token - n, bf16{0});
    for (int j = L.quant_values; j < kTokenValues; ++j) v.push_back(bf16{uint16_t(i + j)});
  }
  v.resize((v.size() + kP * 512 - 1) / (kP * 512) * (kP * 512), bf16{0});
  return v;
}

// Pages holding every (code, scale byte) pair: tile g has scale byte g % 256 and codes that
// cycle through every code as g grows; v4's raw tail holds every bf16 pattern in turn.
std::vector<uint8_t> every_code_pages(KvLayout l, int64_t* num_pages) {
  const PageLayout L = page_layout(l);
  const int codes_per_tile = L.fp4 ? 16 : L.tile_values;
  const int tiles_per_scale = (L.fp4 ? 16 : 256) / codes_per_tile;
  const int64_t tiles = 256 * std::max(tiles_per_scale, 1);
  const int64_t tokens = (tiles + L.scales - 1) / L.scales;
  *num_pages = (tokens + kP - 1) / kP;
  const int64_t pb = L.page_bytes(kP);
  std::vector<uint8_t> pool(size_t(*num_pages * pb), 0);
  for (int64_t s = 0; s < *num_pages * kP; ++s) {
    uint8_t* data = pool.data() + L.data_row_offset(s, kP);
    uint8_t* scales = pool.data() + L.scale_row_offset(s, kP);
    for (int b = 0; b < L.scales; ++b) {
      const int64_t g = s * L.scales + b;
      scales[b] = uint8_t(g % 256);
      const int base = int((g / 256) % std::max(tiles_per_scale, 1)) * codes_per_tile;
      for (int i = 0; i < L.tile_values; ++i) {
        const int code = (base + i) % (L.fp4 ? 16 : 256);
        const int v = b * L.tile_values + i;
        if (L.fp4)
          data[v / 2] = uint8_t(v % 2 ? (data[v / 2] & 0x0f) | (code << 4) : code);
        else
          data[v] = uint8_t(code);
      }
    }
    if (!L.fp4)  // v4's raw bf16 tail
      for (int j = L.quant_values; j < L.data_bytes; ++j) data[j] = uint8_t(s * 131 + j);
  }
  return pool;
}

class CompactPagesCodecs : public fx::GpuTest {};

TEST_F(CompactPagesCodecs, EveryAdmissibleValueAndScaleQuantizesLikeTheReference) {
  const uint64_t seed = fx::test_seed();
  for (KvLayout l : kLayouts) {
    const std::vector<bf16> k = admissible_tokens(l);
    const int64_t pages = int64_t(k.size()) / (kP * 512);
    for (int V : {8, 16, 32, 64}) {
      if (!kc::values_per_lane_supported(l, V)) continue;
      const CompactPagesCase c({.op = CompactOp::kQuantize,
                                .layout = l,
                                .page_size = kP,
                                .num_pages = pages,
                                .values_per_lane = V,
                                .whole_pages = true});
      DSV4_CASE(seed, c.name());
      fx::Rng rng(seed);
      fx::Tensors in = c.draw(rng);
      in["k"] = fx::st::Tensor::of<bf16>({uint64_t(pages), uint64_t(kP), 512}, k);
      EXPECT_TRUE(fx::check_case(c, in, seed, stream()));
    }
  }
}

TEST_F(CompactPagesCodecs, EveryCodeAndScaleDequantizesLikeTheReference) {
  const uint64_t seed = fx::test_seed();
  for (KvLayout l : kLayouts)
    for (CompactOp op : {CompactOp::kDequantizeBf16, CompactOp::kDequantizeF32}) {
      int64_t pages = 0;
      const std::vector<uint8_t> pool = every_code_pages(l, &pages);
      const CompactPagesCase c(
          {.op = op, .layout = l, .page_size = kP, .T = pages * kP, .num_pages = pages});
      DSV4_CASE(seed, c.name());
      fx::Rng rng(seed);
      fx::Tensors in = c.draw(rng);
      in["pool"].data = pool;
      auto slots = fx::values_of<int64_t>(in.at("slots"));
      for (size_t t = 0; t < slots.size(); ++t) slots[t] = int64_t(t);
      EXPECT_TRUE(fx::check_case(c, in, seed, stream()));
    }
}

}  // namespace
}  // namespace dsv4

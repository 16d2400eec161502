// compact_pages reference on its own: hand-computed MXFP8-528 and NVFP4-288 rows (zeros, one huge
// value, subnormal-only, NaN and infinite blocks), fp64 agreement, error bounds and invariants,
// and the scatter / gather rules over a pool (skipped, rejected, untouched rows, strides).
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
#include "dsv4/ref/formats/e4m3.hpp"

namespace dsv4 {
namespace {

namespace cp = ref::compact_pages;
using Bytes = std::vector<uint8_t>;

constexpr PageFormat kMx = PageFormat::kMxfp8;
constexpr PageFormat kNv = PageFormat::kNvfp4;
constexpr uint16_t kNaN = 0x7fc0, kNegNaN = 0xffc0, kInf = 0x7f80, kNegInf = 0xff80;

bf16 B(float v) { return f32_to_bf16(v); }
bf16 H(uint16_t bits) { return bf16{bits}; }

Bytes quantize(PageFormat f, const std::vector<bf16>& x) {
  Bytes row(size_t(page_row_bytes(f)), 0xee);
  cp::quantize_row(f, x.data(), row.data());
  return row;
}

std::vector<float> dequantize(PageFormat f, const Bytes& row) {
  std::vector<float> v(512);
  cp::dequantize_row(f, row.data(), v.data());
  return v;
}

// Bytes [begin, begin + want.size()) of a row, compared as a list so a failure shows all of them.
void expect_bytes(const Bytes& row, size_t begin, const std::vector<int>& want, const char* what) {
  std::vector<int> got(row.begin() + long(begin), row.begin() + long(begin + want.size()));
  EXPECT_EQ(got, want) << what << " (bytes " << begin << ".." << begin + want.size() - 1 << ")";
}

std::vector<int> repeat(int byte, size_t n) { return std::vector<int>(n, byte); }

// ---- hand-computed rows ----------------------------------------------------------------------

// One MXFP8 row whose 16 blocks each exercise one rule; expected bytes worked out by hand.
TEST(CompactPagesRef, Mxfp8RowWorkedByHand) {
  std::vector<bf16> x(512, B(-2.0f));  // blocks 7..15: amax 2 -> e = -7 (sc 0x78), -256 -> 0xf8
  auto blk = [&](int b, int i) -> bf16& { return x[size_t(32 * b + i)]; };
  for (int i = 0; i < 32; ++i) {
    blk(0, i) = B(1.0f);             // amax 1: e = -8, 1/2^-8 = 256
    blk(1, i) = B(float(i));         // amax 31: e = -3, y = 8i
    blk(2, i) = B(1.0f);             // one huge value, below
    blk(3, i) = B(0.0f);             // zeros
    blk(4, i) = H(uint16_t(i + 1));  // bf16 subnormals (i+1) * 2^-133
    blk(5, i) = B(1.0f);             // NaN, below
    blk(6, i) = B(1.0f);             // infinity, below
  }
  blk(2, 0) = B(30000.0f);  // bf16 rounds it to 29952: e = 7, 29952/128 = 234 -> 240
  blk(3, 1) = B(-0.0f);
  blk(5, 0) = H(kNaN), blk(5, 1) = B(2.0f), blk(5, 3) = H(kNegNaN);
  blk(6, 0) = H(kInf), blk(6, 2) = H(0x7f7f);  // bf16 max 1.9921875 * 2^127
  ASSERT_EQ(blk(2, 0).bits, 0x46ea);

  const Bytes row = quantize(kMx, x);
  expect_bytes(row, 512,
               {0x77, 0x7c, 0x86, 0x00, 0x00, 0x78, 0xfe, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78,
                0x78, 0x78},
               "scales");
  expect_bytes(row, 0, repeat(0x78, 32), "block 0: 1.0 at 2^-8 is 256");
  expect_bytes(row, 32, {0x00, 0x50, 0x58, 0x5c, 0x60, 0x62, 0x64, 0x66, 0x68, 0x69, 0x6a,
                         0x6b, 0x6c, 0x6d, 0x6e, 0x6f, 0x70, 0x70, 0x71, 0x72, 0x72, 0x72,
                         0x73, 0x74, 0x74, 0x74, 0x75, 0x76, 0x76, 0x76, 0x77, 0x78},
               "block 1: 8i, ties 136/152/168/184/200/216/232/248 to even");
  std::vector<int> b2 = repeat(0x04, 32);
  b2[0] = 0x77;
  expect_bytes(row, 64, b2, "block 2: 29952/128 = 234 -> 240; 1/128 = 4 * 2^-9");
  std::vector<int> b3 = repeat(0x00, 32);
  b3[1] = 0x80;
  expect_bytes(row, 96, b3, "block 3: zeros keep their sign, scale 2^-127");
  expect_bytes(row, 128, {0x08, 0x10, 0x14, 0x18, 0x1a, 0x1c, 0x1e, 0x20, 0x21, 0x22, 0x23,
                          0x24, 0x25, 0x26, 0x27, 0x28, 0x28, 0x29, 0x2a, 0x2a, 0x2a, 0x2b,
                          0x2c, 0x2c, 0x2c, 0x2d, 0x2e, 0x2e, 0x2e, 0x2f, 0x30, 0x30},
               "block 4: subnormals k*2^-133 at 2^-127 are k*2^-6");
  std::vector<int> b5 = repeat(0x70, 32);
  b5[0] = 0x7f, b5[1] = 0x78, b5[3] = 0xff;
  expect_bytes(row, 160, b5, "block 5: NaN stays NaN (with its sign), amax 2 from the rest");
  std::vector<int> b6 = repeat(0x00, 32);
  b6[0] = 0x7e, b6[2] = 0x40;
  expect_bytes(row, 192, b6, "block 6: inf saturates at scale 2^127, 1.0 vanishes");
  expect_bytes(row, 224, repeat(0xf8, 32 * 9), "blocks 7-15: -2 at 2^-7 is -256");

  const std::vector<float> v = dequantize(kMx, row);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[32 + 17], 16.0f);  // 17 -> 128/8
  EXPECT_EQ(v[32 + 31], 32.0f);  // 31 -> 256/8
  EXPECT_EQ(v[64], 30720.0f);
  EXPECT_EQ(v[65], 1.0f);
  EXPECT_EQ(f32_bits(v[97]), 0x80000000u);
  EXPECT_EQ(v[128 + 16], 0x1p-129f);  // 17 * 2^-133 rounded to 16 * 2^-133
  EXPECT_EQ(f32_bits(v[160]), 0x7fc00000u);
  EXPECT_EQ(f32_bits(v[163]), 0xffc00000u);
  EXPECT_EQ(f32_bits(v[192]), 0x7f800000u);  // 448 * 2^127 is past fp32: inf
  EXPECT_EQ(f32_bits(v[194]), 0x7f800000u);  // so is 2 * 2^127
  EXPECT_EQ(v[193], 0.0f);
  EXPECT_EQ(v[511], -2.0f);
}

// One NVFP4 row whose 32 blocks each exercise one rule; expected bytes worked out by hand.
TEST(CompactPagesRef, Nvfp4RowWorkedByHand) {
  std::vector<bf16> x(512, B(-2.0f));  // blocks 10..31: amax 2, S = e4m3(1/3) = 0.34375 (0x2b),
                                       // -2/S = -5.8 -> -6 (0xf)
  auto blk = [&](int b, int i) -> bf16& { return x[size_t(16 * b + i)]; };
  const float ties[16] = {0.25f,  0.75f, 1.25f,       1.75f, 2.5f, 3.5f, 5.0f, 6.0f,
                          -0.25f, -6.0f, 0.30078125f, 1.0f,  3.0f, 0.5f, 4.0f, 0.0f};
  for (int i = 0; i < 16; ++i) {
    blk(0, i) = B(1.0f);          // S = e4m3(1/6) = 11 * 2^-6, 1/S = 5.8 -> 6
    blk(1, i) = B(ties[i]);       // amax 6: S = 1, every tie of e2m1
    blk(2, i) = B(float(i));      // amax 15: S = 2.5, y = 0.4 i
    blk(3, i) = B(1.0f);          // one huge value, scale not saturated
    blk(4, i) = B(-1.0f);         // one huge value, scale saturated
    blk(5, i) = B(0.0f);          // zeros
    blk(6, i) = B(0.005859375f);  // amax/6 = 2^-10 exactly: tie to a zero scale
    blk(7, i) = H(0x3bc5);        // 1.5390625 * 2^-8: S = 2^-9, y = 3.08 -> 3
    blk(8, i) = B(1.0f);          // NaN
    blk(9, i) = B(1.0f);          // infinities
  }
  blk(3, 0) = B(2000.0f);   // S = e4m3(333.3) = 320, 2000/320 = 6.25 saturates to 6
  blk(4, 0) = B(30000.0f);  // 29952/6 > 448: S = 448, -1/448 rounds to -0
  blk(5, 1) = B(-0.0f);
  blk(6, 3) = B(-0.005859375f);
  blk(8, 1) = H(kNaN);
  blk(9, 0) = H(kInf), blk(9, 2) = H(kNegInf);

  const Bytes row = quantize(kNv, x);
  std::vector<int> scales = {0x23, 0x38, 0x42, 0x7a, 0x7e, 0x00, 0x00, 0x01, 0x7f, 0x7e};
  for (int b = 10; b < 32; ++b) scales.push_back(0x2b);
  expect_bytes(row, 256, scales, "scales");
  expect_bytes(row, 0, repeat(0x77, 8), "block 0: 6 everywhere");
  expect_bytes(row, 8, {0x20, 0x42, 0x64, 0x76, 0xf8, 0x21, 0x15, 0x06},
               "block 1: ties 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4");
  expect_bytes(row, 16, {0x10, 0x22, 0x43, 0x54, 0x65, 0x66, 0x76, 0x77}, "block 2: 0.4 i");
  expect_bytes(row, 24, {0x07, 0, 0, 0, 0, 0, 0, 0}, "block 3: 6.25 saturates, 1/320 -> 0");
  expect_bytes(row, 32, {0x87, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88},
               "block 4: huge saturates, -1/448 -> -0");
  expect_bytes(row, 40, {0x80, 0, 0, 0, 0, 0, 0, 0}, "block 5: zeros with their sign");
  expect_bytes(row, 48, {0, 0x80, 0, 0, 0, 0, 0, 0}, "block 6: zero scale gives signed zeros");
  expect_bytes(row, 56, repeat(0x55, 8), "block 7: subnormal scale 2^-9, y = 3.08 -> 3");
  expect_bytes(row, 64, repeat(0x00, 8), "block 8: NaN block: codes 0, scale NaN");
  expect_bytes(row, 72, {0x07, 0x0f, 0, 0, 0, 0, 0, 0}, "block 9: +-inf saturate to +-6");
  expect_bytes(row, 80, repeat(0xff, 8 * 22), "blocks 10-31: -6");

  const std::vector<float> v = dequantize(kNv, row);
  EXPECT_EQ(v[0], 1.03125f);  // 6 * 0.171875
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(v[size_t(16 + i)], std::vector<float>({0, 1, 1, 2, 2, 4, 4, 6, -0.0f, -6, 0.5f, 1, 3,
                                                     0.5f, 4, 0})[size_t(i)])
        << "block 1 value " << i;
  EXPECT_EQ(v[48], 1920.0f);
  EXPECT_EQ(v[64], 2688.0f);
  EXPECT_EQ(f32_bits(v[65]), 0x80000000u);
  EXPECT_EQ(v[112], 3 * 0x1p-9f);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(f32_bits(v[size_t(128 + i)]), 0x7fc00000u) << i;
  EXPECT_EQ(v[144], 2688.0f);
  EXPECT_EQ(v[146], -2688.0f);
  EXPECT_EQ(v[511], -2.0625f);  // -6 * 0.34375
}

// ---- fp64 agreement, bounds and invariants on random rows ------------------------------------

// Rows drawn from several value distributions, with special values mixed in per block.
std::vector<bf16> random_row(fx::Rng& rng, int kind) {
  std::vector<bf16> x(512);
  for (int b = 0; b < 16; ++b) {
    // Block magnitude anywhere in bf16's range, sometimes the whole row at one scale.
    const double scale = kind == 0 ? 1.0 : std::ldexp(1.0, int(rng.range(-140, 120)));
    for (int i = 0; i < 32; ++i) {
      double v;
      switch (kind) {
        case 2:  // heavy tails: a Cauchy-like ratio
          v = rng.normal() / std::max(1e-3, std::fabs(rng.normal()));
          break;
        case 3:  // integers
          v = double(rng.range(-300, 300));
          break;
        default:
          v = rng.normal();
      }
      x[size_t(32 * b + i)] = B(float(v * scale));
    }
    const double u = rng.uniform();  // specials, one rule per block
    const size_t at = size_t(32 * b + rng.range(0, 31));
    if (u < 0.04)
      x[at] = H(rng.uniform() < 0.5 ? kNaN : kNegNaN);
    else if (u < 0.06)
      x[at] = H(rng.uniform() < 0.5 ? kInf : kNegInf);
    else if (u < 0.10)
      x[at] = H(uint16_t(rng.range(1, 127) | (rng.uniform() < 0.5 ? 0x8000 : 0)));
    else if (u < 0.14)
      for (int i = 0; i < 32; ++i) x[size_t(32 * b + i)] = B(0.0f);
  }
  return x;
}

bool same_value(float got, double want) {
  return std::isnan(want) ? std::isnan(got) : f32_bits(got) == f32_bits(float(want));
}

TEST(CompactPagesRef, Fp64FormulationAgreesBitForBit) {
  const uint64_t seed = fx::test_seed();
  for (PageFormat f : {kMx, kNv})
    for (int kind = 0; kind < 4; ++kind) {
      DSV4_CASE(seed, page_format_name(f) << " value kind " << kind << ", 200 rows");
      fx::Rng rng(seed + uint64_t(kind));
      for (int r = 0; r < 200; ++r) {
        const std::vector<bf16> x = random_row(rng, kind);
        const Bytes q = quantize(f, x);
        Bytes q64(q.size(), 0xee);
        cp::quantize_row_fp64(f, x.data(), q64.data());
        ASSERT_EQ(q, q64) << "row " << r;
        // Dequantisation, of the row and of a row of random bytes (every pattern decodes).
        Bytes noise(q.size());
        for (auto& b : noise) b = uint8_t(rng.next());
        for (const Bytes* src : std::initializer_list<const Bytes*>{&q, &noise}) {
          const std::vector<float> v = dequantize(f, *src);
          std::vector<double> v64(512);
          cp::dequantize_row_fp64(f, src->data(), v64.data());
          for (size_t i = 0; i < 512; ++i)
            ASSERT_TRUE(same_value(v[i], v64[i]))
                << "row " << r << (src == &q ? "" : " (random bytes)") << " value " << i << ": "
                << v[i] << " vs fp64 " << v64[i];
        }
      }
    }
}

TEST(CompactPagesRef, RoundTripStaysWithinTheDerivedBound) {
  const uint64_t seed = fx::test_seed();
  for (PageFormat f : {kMx, kNv}) {
    DSV4_CASE(seed, page_format_name(f) << ", 4 value kinds x 100 rows");
    fx::Rng rng(seed);
    const int bv = page_block_values(f);
    double worst = 0, err2 = 0, ref2 = 0;
    size_t checked = 0;
    for (int kind = 0; kind < 4; ++kind)
      for (int r = 0; r < 100; ++r) {
        const std::vector<bf16> x = random_row(rng, kind);
        const Bytes q = quantize(f, x);
        const std::vector<float> v = dequantize(f, q);
        for (int b = 0; b < page_row_blocks(f); ++b) {
          if (!cp::error_bound_applies(f, x.data() + b * bv)) continue;
          const uint8_t sc = cp::block_scale(f, q.data(), b);
          for (int i = b * bv; i < (b + 1) * bv; ++i) {
            const double xi = double(bf16_to_f32(x[size_t(i)]));
            if (std::isnan(xi)) {
              EXPECT_TRUE(std::isnan(v[size_t(i)])) << "NaN input must dequantise to NaN";
              continue;
            }
            const double err = std::fabs(double(v[size_t(i)]) - xi);
            const double bound = cp::error_bound(f, xi, sc);
            ASSERT_LE(err, bound) << "kind " << kind << " row " << r << " value " << i;
            worst = std::max(worst, err / bound);
            if (kind == 0) err2 += err * err, ref2 += xi * xi;
            ++checked;
          }
        }
      }
    EXPECT_GT(checked, 100000u);
    ::testing::Test::RecordProperty(std::string(page_format_name(f)) + "_worst_error_over_bound",
                                    std::to_string(worst));
    ::testing::Test::RecordProperty(std::string(page_format_name(f)) + "_normal_rel_l2",
                                    std::to_string(std::sqrt(err2 / ref2)));
  }
}

// Quantising a dequantised row gives the same values back (MXFP8 always; NVFP4 wherever the scale
// is an e4m3 normal, since a subnormal scale can lose its largest element's share).
TEST(CompactPagesRef, DequantisedRowsAreFixedPoints) {
  const uint64_t seed = fx::test_seed();
  fx::Rng rng(seed);
  for (PageFormat f : {kMx, kNv})
    for (int r = 0; r < 200; ++r) {
      DSV4_CASE(seed, page_format_name(f) << " row " << r);
      const std::vector<bf16> x = random_row(rng, r % 4);
      const Bytes q = quantize(f, x);
      std::vector<bf16> once(512);
      cp::dequantize_row(f, q.data(), once.data());
      std::vector<bf16> twice(512);
      cp::dequantize_row(f, quantize(f, once).data(), twice.data());
      const int bv = page_block_values(f);
      for (int b = 0; b < page_row_blocks(f); ++b) {
        const uint8_t sc = cp::block_scale(f, q.data(), b);
        if (!cp::error_bound_applies(f, x.data() + b * bv)) continue;
        if (f == kNv && (sc & 0x7f) < 0x08) continue;  // subnormal or zero scale
        for (int i = b * bv; i < (b + 1) * bv; ++i) {
          const float a = bf16_to_f32(once[size_t(i)]), c = bf16_to_f32(twice[size_t(i)]);
          ASSERT_TRUE(a == c || (std::isnan(a) && std::isnan(c))) << "value " << i;
        }
      }
    }
}

// Negating a row flips every element's sign bit and keeps every scale (blocks without NaN).
// Scaling by 2^k moves MXFP8 scales by k and keeps NVFP4 codes while its scale stays normal.
TEST(CompactPagesRef, SignAndPowerOfTwoSymmetries) {
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, "100 rows of N(0,1), both formats");
  fx::Rng rng(seed);
  for (int r = 0; r < 100; ++r) {
    std::vector<bf16> x(512), neg(512), up(512);
    const int k = int(rng.range(-20, 20));
    for (size_t i = 0; i < 512; ++i) {
      x[i] = B(float(rng.normal()));
      neg[i] = bf16{uint16_t(x[i].bits ^ 0x8000)};
      up[i] = B(std::ldexp(bf16_to_f32(x[i]), k));
    }
    const Bytes qm = quantize(kMx, x), qn = quantize(kNv, x);
    const Bytes qm_neg = quantize(kMx, neg), qn_neg = quantize(kNv, neg);
    const Bytes qm_up = quantize(kMx, up), qn_up = quantize(kNv, up);
    for (size_t i = 0; i < 512; ++i) {
      ASSERT_EQ(qm_neg[i], qm[i] ^ 0x80) << "mxfp8 element " << i;
      ASSERT_EQ(qm_up[i], qm[i]) << "mxfp8 element " << i << " k=" << k;
    }
    for (size_t b = 0; b < 16; ++b) {
      ASSERT_EQ(qm_neg[512 + b], qm[512 + b]);
      ASSERT_EQ(int(qm_up[512 + b]), int(qm[512 + b]) + k) << "mxfp8 scale " << b;
    }
    for (size_t i = 0; i < 256; ++i) ASSERT_EQ(qn_neg[i], qn[i] ^ 0x88) << "nvfp4 byte " << i;
    for (size_t b = 0; b < 32; ++b) {
      ASSERT_EQ(qn_neg[256 + b], qn[256 + b]);
      const double s = std::fabs(double(e4m3_to_f32(qn[256 + b])));
      const double s_up = std::ldexp(s, k);
      if (s < 0x1p-6 || s_up < 0x1p-6 || s_up > 448) continue;
      ASSERT_EQ(double(e4m3_to_f32(qn_up[256 + b])), s_up) << "nvfp4 scale " << b << " k=" << k;
      for (size_t j = 8 * b; j < 8 * b + 8; ++j) ASSERT_EQ(qn_up[j], qn[j]) << "nvfp4 byte " << j;
    }
  }
}

// ---- scatter and gather over a pool ----------------------------------------------------------

TEST(CompactPagesRef, QuantizeScattersWrittenRowsOnlyAndCountsRejections) {
  const uint64_t seed = fx::test_seed();
  for (PageFormat f : {kMx, kNv}) {
    const size_t rows = 64, T = 96, stride = 520, rb = size_t(page_row_bytes(f));
    DSV4_CASE(seed, page_format_name(f)
                        << " T=" << T << " pool_rows=" << rows << " src_stride=" << stride);
    fx::Rng rng(seed);
    const fx::HostileIndices slots = fx::hostile_indices(rng, T, int64_t(rows));
    std::vector<bf16> src(T * stride, H(kNaN));  // the gaps between rows must never be read
    for (size_t t = 0; t < T; ++t) {
      const std::vector<bf16> r = random_row(rng, int(t % 4));
      std::copy(r.begin(), r.end(), src.begin() + long(t * stride));
    }
    Bytes pool(rows * rb, 0xff);
    const cp::Outcome o = cp::quantize(f, src, stride, slots.idx, pool, rows);
    EXPECT_EQ(o.written, int64_t(slots.n_valid));
    EXPECT_EQ(o.skipped, int64_t(slots.n_negative));
    EXPECT_EQ(o.rejected, int64_t(slots.n_out_of_range));
    Bytes want(rows * rb, 0xff);
    for (size_t t = 0; t < T; ++t)
      if (slots.idx[t] >= 0 && slots.idx[t] < int64_t(rows))
        cp::quantize_row(f, src.data() + t * stride, want.data() + size_t(slots.idx[t]) * rb);
    EXPECT_EQ(pool, want);
    size_t untouched = 0;
    for (size_t r = 0; r < rows; ++r)
      untouched += std::all_of(pool.begin() + long(r * rb), pool.begin() + long((r + 1) * rb),
                               [](uint8_t b) { return b == 0xff; });
    EXPECT_EQ(untouched, rows - slots.n_valid) << "rows not named by a valid slot stay poisoned";
  }
}

TEST(CompactPagesRef, DequantizeGathersWrittenRowsOnlyAndCountsRejections) {
  const uint64_t seed = fx::test_seed();
  for (PageFormat f : {kMx, kNv}) {
    const size_t rows = 40, T = 64, stride = 528, rb = size_t(page_row_bytes(f));
    DSV4_CASE(seed, page_format_name(f)
                        << " T=" << T << " pool_rows=" << rows << " out_stride=" << stride);
    fx::Rng rng(seed);
    Bytes pool(rows * rb);
    for (auto& b : pool) b = uint8_t(rng.next());  // every byte pattern decodes
    fx::IndexMix mix;
    mix.unique_valid = false;  // a gather may read a row twice
    const fx::HostileIndices slots = fx::hostile_indices(rng, T, int64_t(rows), mix);
    const float poison = f32_from_bits(0x7fbadbadu);
    std::vector<float> out(T * stride, poison);
    std::vector<bf16> out16(T * stride, H(0x7fbd));
    const cp::Outcome o = cp::dequantize(f, pool, rows, slots.idx, out, stride);
    const cp::Outcome o16 = cp::dequantize(f, pool, rows, slots.idx, out16, stride);
    EXPECT_EQ(o.written, int64_t(slots.n_valid));
    EXPECT_EQ(o.skipped, int64_t(slots.n_negative));
    EXPECT_EQ(o.rejected, int64_t(slots.n_out_of_range));
    EXPECT_EQ(o16.rejected, o.rejected);
    for (size_t t = 0; t < T; ++t) {
      const int64_t s = slots.idx[t];
      const bool valid = s >= 0 && s < int64_t(rows);
      std::vector<float> want(512, poison);
      if (valid) cp::dequantize_row(f, pool.data() + size_t(s) * rb, want.data());
      for (size_t i = 0; i < stride; ++i) {
        const float w = i < 512 ? want[i] : poison;
        ASSERT_EQ(f32_bits(out[t * stride + i]), f32_bits(w)) << "row " << t << " value " << i;
        const uint16_t w16 = i < 512 && valid ? f32_to_bf16(w).bits : uint16_t(0x7fbd);
        ASSERT_EQ(out16[t * stride + i].bits, w16) << "bf16 row " << t << " value " << i;
      }
    }
  }
}

TEST(CompactPagesRef, DuplicateSlotsKeepTheLaterRowAndNoRowsDoNothing) {
  std::vector<bf16> src(1024);
  for (size_t i = 0; i < 1024; ++i) src[i] = B(i < 512 ? 1.0f : -3.0f);
  for (PageFormat f : {kMx, kNv}) {
    const size_t rb = size_t(page_row_bytes(f));
    Bytes pool(2 * rb, 0xff);
    const std::vector<int64_t> slots = {1, 1};
    EXPECT_EQ(cp::quantize(f, src, 0, slots, pool, 2).written, 2);
    EXPECT_EQ(Bytes(pool.begin() + long(rb), pool.end()),
              quantize(f, std::vector<bf16>(src.begin() + 512, src.end())));
    const Bytes before = pool;
    EXPECT_EQ(cp::quantize(f, {}, 0, {}, pool, 2).written, 0);
    EXPECT_EQ(pool, before);
  }
}

TEST(CompactPagesRef, BadArgumentsNameTheField) {
  std::vector<bf16> src(512);
  Bytes pool(528);
  std::vector<float> out(512);
  const std::vector<int64_t> one = {0}, two = {0, 1};
  auto message = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no exception";
  };
  EXPECT_NE(message([&] { cp::quantize(kMx, src, 0, two, pool, 1); }).find("src holds 512"),
            std::string::npos);
  EXPECT_NE(message([&] { cp::quantize(kMx, src, 100, one, pool, 1); }).find("src_stride=100"),
            std::string::npos);
  EXPECT_NE(message([&] { cp::quantize(kMx, src, 0, one, pool, 2); }).find("pool_rows=2"),
            std::string::npos);
  EXPECT_NE(message([&] { cp::dequantize(kNv, pool, 1, two, out, 0); }).find("out holds 512"),
            std::string::npos);
  EXPECT_NE(message([&] { cp::quantize(PageFormat(7), src, 0, one, pool, 1); }).find("format=7"),
            std::string::npos);
  EXPECT_NE(message([&] { cp::block_scale(kNv, pool.data(), 32); }).find("b=32"),
            std::string::npos);
}

}  // namespace
}  // namespace dsv4

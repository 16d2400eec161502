// kv_store reference on its own: hand-computed scatter and norm+RoPE rows, invariants (untouched
// rows, counts, scale invariance, RoPE at position 0), fp32-order against fp64 within the stated
// tolerance, and the argument checks.
#include "dsv4/ref/kv_store.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <vector>

#include "dsv4/fixtures/compare.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/fixtures/seed.hpp"

namespace dsv4 {
namespace {

using fx::Shape;
using ref::kv_store::NormRope;
using ref::kv_store::Outcome;
using ref::kv_store::RowLayout;
using ::testing::HasSubstr;

constexpr bf16 kSentinel{0xDEAD};  // an "untouched" pool value no test row ever holds

std::vector<bf16> values(std::initializer_list<float> v) { return fx::to_bf16(std::vector(v)); }

// Every bf16 bit pattern is a valid row value for a scatter, NaNs and infinities included.
std::vector<bf16> raw_bits(fx::Rng& rng, size_t n) {
  std::vector<bf16> v(n);
  for (auto& x : v) x.bits = uint16_t(rng.next());
  return v;
}

void expect_outcome(const Outcome& o, int64_t written, int64_t skipped, int64_t rejected) {
  EXPECT_EQ(o.written, written);
  EXPECT_EQ(o.skipped, skipped);
  EXPECT_EQ(o.rejected, rejected);
}

// ---- scatter ------------------------------------------------------------------------------

TEST(KvStoreScatter, HandCaseWritesOnlyTheNamedRow) {
  const size_t W = 8, R = 4;
  std::vector<bf16> kv(3 * W);
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = f32_to_bf16(float(i + 1));  // 1..24
  std::vector<bf16> pool(R * W, kSentinel);
  const std::vector<int64_t> loc = {2, -1, 7};  // row 0 -> 2, row 1 skipped, row 2 out of range
  expect_outcome(ref::kv_store::scatter_rows(kv, loc, pool, R, {.width = W}), 1, 1, 1);

  std::vector<bf16> want(R * W, kSentinel);
  for (size_t j = 0; j < W; ++j) want[2 * W + j] = f32_to_bf16(float(j + 1));
  EXPECT_TRUE(fx::bitwise_equal(pool, want, Shape{R, W}, {.name = "pool"}));
}

TEST(KvStoreScatter, StridedRowsLeaveTheGapsAlone) {
  // kv rows of 8 values 16 apart, pool rows 24 apart: only the first 8 of each pool row change.
  const size_t W = 8, R = 3, SS = 16, PS = 24;
  std::vector<bf16> kv(2 * SS, f32_to_bf16(-7.0f));  // the gaps of kv must never be copied
  for (size_t j = 0; j < W; ++j) {
    kv[j] = f32_to_bf16(float(j));
    kv[SS + j] = f32_to_bf16(float(100 + j));
  }
  std::vector<bf16> pool((R - 1) * PS + W, kSentinel);  // the last row needs only `width` values
  const RowLayout layout{.width = W, .src_stride = SS, .pool_stride = PS};
  expect_outcome(ref::kv_store::scatter_rows(kv, std::vector<int64_t>{2, 0}, pool, R, layout), 2, 0,
                 0);
  std::vector<bf16> want(pool.size(), kSentinel);
  for (size_t j = 0; j < W; ++j) {
    want[2 * PS + j] = f32_to_bf16(float(j));
    want[0 * PS + j] = f32_to_bf16(float(100 + j));
  }
  EXPECT_TRUE(fx::bitwise_equal(pool, want, Shape{pool.size()}, {.name = "pool"}));
}

TEST(KvStoreScatter, EmptyBatchChangesNothing) {
  std::vector<bf16> pool(4 * 8, kSentinel);
  expect_outcome(ref::kv_store::scatter_rows({}, {}, pool, 4, {.width = 8}), 0, 0, 0);
  EXPECT_TRUE(fx::bitwise_equal(pool, std::vector<bf16>(32, kSentinel), Shape{4, 8}));
}

TEST(KvStoreScatter, DuplicateSlotKeepsTheLaterRow) {
  const std::vector<bf16> kv = values({1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2});
  std::vector<bf16> pool(8, kSentinel);
  expect_outcome(ref::kv_store::scatter_rows(kv, std::vector<int64_t>{0, 0}, pool, 1, {.width = 8}),
                 2, 0, 0);
  EXPECT_TRUE(fx::bitwise_equal(pool, values({2, 2, 2, 2, 2, 2, 2, 2}), Shape{1, 8}));
}

// Random hostile loc sets: every targeted row holds its kv row bit for bit, every other pool row
// is untouched, and the counts match the generator's classification.
TEST(KvStoreScatter, HostileLocsInvariants) {
  const uint64_t seed = fx::test_seed();
  for (size_t W : {16, 64, 512, 576}) {
    DSV4_CASE(seed, "T=300 R=257 W=" << W);
    fx::Rng rng(seed + W);
    const size_t T = 300, R = 257;
    const fx::HostileIndices h = fx::hostile_indices(rng, T, R);
    const std::vector<bf16> kv = raw_bits(rng, T * W);
    std::vector<bf16> pool(R * W, kSentinel);
    expect_outcome(ref::kv_store::scatter_rows(kv, h.idx, pool, R, {.width = W}),
                   int64_t(h.n_valid), int64_t(h.n_negative), int64_t(h.n_out_of_range));
    std::map<int64_t, size_t> source;  // pool row -> kv row
    for (size_t t = 0; t < T; ++t)
      if (h.idx[t] >= 0 && h.idx[t] < int64_t(R)) source[h.idx[t]] = t;
    std::vector<bf16> want(R * W, kSentinel);
    for (auto [row, t] : source)
      for (size_t j = 0; j < W; ++j) want[size_t(row) * W + j] = kv[t * W + j];
    EXPECT_TRUE(fx::bitwise_equal(pool, want, Shape{R, W}, {.name = "pool"}));
  }
}

TEST(KvStoreScatter, RejectsLayoutsThatDoNotFit) {
  std::vector<bf16> kv(64), pool(64);
  const std::vector<int64_t> loc = {0, 1};
  auto message = [&](const RowLayout& l, size_t rows) {
    try {
      ref::kv_store::scatter_rows(kv, loc, pool, rows, l);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message({.width = 12}, 2), HasSubstr("width=12"));
  EXPECT_THAT(message({.width = 0}, 2), HasSubstr("width=0"));
  EXPECT_THAT(message({.width = 16, .src_stride = 8}, 2), HasSubstr("src_stride=8"));
  EXPECT_THAT(message({.width = 16, .pool_stride = 20}, 2), HasSubstr("pool_stride=20"));
  EXPECT_THAT(message({.width = 16}, 5), HasSubstr("pool_rows=5"));
  EXPECT_THAT(message({.width = 40}, 1), HasSubstr("kv has 64 values"));
}

// ---- norm + RoPE --------------------------------------------------------------------------

// width 16, rope_dim 8, eps 0, x = +-2 so mean(x^2) = 4 and inv = 0.5 exactly; weights and table
// values are exact, so every stored value is computed by hand below.
struct HandCase {
  std::vector<bf16> x = values({2, -2, 2, -2, 2, -2, 2, -2, 2, -2, 2, -2, 2, -2, 2, -2});
  std::vector<float> weight = {1, 2, 0.5f, 4, 1, 3, 0.25f, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  // position 1's four (cos, sin) pairs: identity, 90 degrees, (0.5, 0.75), 180 degrees.
  std::vector<float> table = {1, 0, 1, 0, 1,    0,     1,  0,  // position 0: identity
                              1, 0, 0, 1, 0.5f, 0.75f, -1, 0};
  std::vector<int64_t> positions = {1};
  NormRope params() const {
    return {.weight = weight, .cos_sin = table, .positions = positions, .eps = 0, .rope_dim = 8};
  }
};

TEST(KvStoreNormRope, HandComputedRow) {
  HandCase h;
  // y = (x * 0.5) * w: (1*w0, -1*w1, ...); the RoPE pairs start as (r, m) = (1, -1).
  const std::vector<float> want = {1,     -2,    0.5f, -4, 1, -3, 0.25f, -1,  // no-RoPE part
                                   1,     -1,                                 // identity
                                   1,     1,      // 90 degrees: (r, m) -> (-m, r)
                                   1.25f, 0.25f,  // r' = 0.5 + 0.75, m' = 0.75 - 0.5
                                   -1,    1};     // 180 degrees
  for (size_t lanes : {1, 2, 16, 32, 64}) {
    SCOPED_TRACE("lanes=" + std::to_string(lanes));
    std::vector<float> got(16);
    ref::kv_store::norm_rope_row_f32(h.x.data(), 16, h.params(), 1, lanes, got.data());
    EXPECT_TRUE(fx::bitwise_equal(got, want, Shape{16}, {.name = "row"}));
    std::vector<double> got64(16);
    ref::kv_store::norm_rope_row_f64(h.x.data(), 16, h.params(), 1, got64.data());
    EXPECT_TRUE(fx::close(got64, want, Shape{16}, {.atol = 0}));
  }
  std::vector<bf16> pool(2 * 16, kSentinel);
  expect_outcome(ref::kv_store::norm_rope_store(h.x, std::vector<int64_t>{1}, pool, 2,
                                                {.width = 16}, h.params(), 32),
                 1, 0, 0);
  std::vector<bf16> want_pool(16, kSentinel);
  const auto stored = fx::to_bf16(want);
  want_pool.insert(want_pool.end(), stored.begin(), stored.end());
  EXPECT_TRUE(fx::bitwise_equal(pool, want_pool, Shape{2, 16}, {.name = "pool"}));
}

TEST(KvStoreNormRope, ZeroRowWithEpsStoresZeros) {
  HandCase h;
  h.x.assign(16, bf16{0});
  NormRope p = h.params();
  p.eps = 1e-6f;
  std::vector<bf16> pool(16, kSentinel);
  ref::kv_store::norm_rope_store(h.x, std::vector<int64_t>{0}, pool, 1, {.width = 16}, p, 32);
  // Zeros, not NaN; signs follow IEEE: the 180-degree pair gives r' = 0*(-1) - 0*0 = -0.
  std::vector<bf16> want(16, bf16{0});
  want[14] = bf16{0x8000};
  EXPECT_TRUE(fx::bitwise_equal(pool, want, Shape{16}));
}

TEST(KvStoreNormRope, PositionsOutsideTheTableAreRejectedAndSkippedRowsAreNotChecked) {
  HandCase h;
  std::vector<bf16> x;
  for (int r = 0; r < 4; ++r) x.insert(x.end(), h.x.begin(), h.x.end());
  const std::vector<int64_t> positions = {2, -1, 1, 99};  // the table has positions 0 and 1
  const std::vector<int64_t> loc = {0, 1, 2, -1};         // row 3 is padding: its position is junk
  NormRope p = h.params();
  p.positions = positions;
  std::vector<bf16> pool(3 * 16, kSentinel);
  expect_outcome(ref::kv_store::norm_rope_store(x, loc, pool, 3, {.width = 16}, p, 32), 1, 1, 2);
  for (size_t j = 0; j < 32; ++j) EXPECT_EQ(pool[j].bits, kSentinel.bits) << "value " << j;
  EXPECT_NE(pool[32].bits, kSentinel.bits);
  const auto f64 = ref::kv_store::norm_rope_rows_f64(x, 4, {.width = 16}, p);
  EXPECT_TRUE(std::isnan(f64[0]) && std::isnan(f64[16]) && std::isnan(f64[48]));
  EXPECT_FALSE(std::isnan(f64[32]));
}

// RMSNorm without eps is invariant to scaling x by a power of two, bit for bit: the sum scales by
// 4^k, the square root and its reciprocal by 2^(-k), exactly.
TEST(KvStoreNormRope, PowerOfTwoScaleInvariance) {
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, "W=512 rows=16");
  fx::Rng rng(seed);
  const size_t W = 512;
  const auto table = ref::kv_store::rope_table(64, 64);
  const auto weight = fx::uniform_f32(rng, W, 0.5f, 1.5f);
  for (int row = 0; row < 16; ++row) {
    const auto x = fx::to_bf16(fx::normal_f32(rng, W));
    std::vector<bf16> x4(W);
    for (size_t j = 0; j < W; ++j) x4[j] = f32_to_bf16(4.0f * bf16_to_f32(x[j]));
    const int64_t pos[] = {int64_t(rng.range(0, 63))};
    const NormRope p{.weight = weight, .cos_sin = table, .positions = pos, .eps = 0};
    std::vector<float> a(W), b(W);
    ref::kv_store::norm_rope_row_f32(x.data(), W, p, pos[0], 32, a.data());
    ref::kv_store::norm_rope_row_f32(x4.data(), W, p, pos[0], 32, b.data());
    EXPECT_TRUE(fx::bitwise_equal(a, b, Shape{W}, {.name = "row of 4x"})) << "row " << row;
  }
}

// At position 0 every angle is 0: the RoPE part is the normalised row itself; elsewhere RoPE keeps
// each pair's length.
TEST(KvStoreNormRope, RopeIsARotation) {
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, "W=512");
  fx::Rng rng(seed);
  const size_t W = 512;
  const auto table = ref::kv_store::rope_table(4096, 64);
  const auto weight = fx::uniform_f32(rng, W, 0.5f, 1.5f);
  const auto x = fx::to_bf16(fx::normal_f32(rng, W));
  const int64_t pos[] = {0};
  const NormRope p{.weight = weight, .cos_sin = table, .positions = pos};
  std::vector<double> at0(W), at_p(W);
  ref::kv_store::norm_rope_row_f64(x.data(), W, p, 0, at0.data());
  const double inv = [&] {
    double ss = 0;
    for (auto v : x) ss += double(bf16_to_f32(v)) * bf16_to_f32(v);
    return 1 / std::sqrt(ss / W + 1e-6);
  }();
  for (size_t j = 0; j < W; ++j)
    EXPECT_NEAR(at0[j], bf16_to_f32(x[j]) * inv * weight[j], 1e-12) << "value " << j;
  for (int64_t q : {1, 77, 4095}) {
    ref::kv_store::norm_rope_row_f64(x.data(), W, p, q, at_p.data());
    for (size_t j = 0; j < 448; ++j) EXPECT_EQ(at_p[j], at0[j]) << "no-RoPE value " << j;
    for (size_t i = 448; i < W; i += 2)
      EXPECT_NEAR(std::hypot(at_p[i], at_p[i + 1]), std::hypot(at0[i], at0[i + 1]), 1e-6)
          << "pair at " << i << ", position " << q;
  }
}

// The kernel's fp32 order agrees with fp64 within the derived bounds, before and after the bf16
// cast; different lane counts change only the rounding. The stored bound is tight: some value
// uses more than half of it.
TEST(KvStoreNormRope, Fp32OrderAgreesWithFp64WithinTheDerivedBounds) {
  const uint64_t seed = fx::test_seed();
  for (size_t W : {64, 512, 576}) {
    DSV4_CASE(seed, "T=64 W=" << W);
    fx::Rng rng(seed + W);
    const size_t T = 64, n_pos = 8192;
    const auto table = ref::kv_store::rope_table(n_pos, 64);
    const auto weight = fx::uniform_f32(rng, W, 0.25f, 2.0f);
    std::vector<float> xf;
    for (size_t t = 0; t < T; ++t) {  // rows of different scales: 2^-8 .. 2^8
      const auto r = fx::normal_f32(rng, W, 0, std::ldexp(1.0f, int(rng.range(-8, 8))));
      xf.insert(xf.end(), r.begin(), r.end());
    }
    const auto x = fx::to_bf16(xf);
    std::vector<int64_t> positions(T);
    for (auto& q : positions) q = rng.range(0, n_pos - 1);
    const NormRope p{.weight = weight, .cos_sin = table, .positions = positions};
    const auto b = ref::kv_store::norm_rope_bounds(x, T, {.width = W}, p);
    for (size_t lanes : {1, 16, 32, 64}) {
      SCOPED_TRACE("lanes=" + std::to_string(lanes));
      std::vector<float> got(T * W);
      for (size_t t = 0; t < T; ++t)
        ref::kv_store::norm_rope_row_f32(x.data() + t * W, W, p, positions[t], lanes,
                                         got.data() + t * W);
      EXPECT_TRUE(fx::close(got, b.value, Shape{T, W}, {.bound = b.f32}, {.name = "fp32 order"}));
      std::vector<bf16> pool(T * W, kSentinel);
      std::vector<int64_t> loc(T);
      for (size_t t = 0; t < T; ++t) loc[t] = int64_t(t);
      ref::kv_store::norm_rope_store(x, loc, pool, T, {.width = W}, p, lanes);
      EXPECT_TRUE(fx::close(pool, b.value, Shape{T, W}, {.bound = b.stored}, {.name = "stored"}));
      double use = 0;
      for (size_t i = 0; i < pool.size(); ++i)
        use = std::max(use, std::fabs(double(bf16_to_f32(pool[i])) - b.value[i]) / b.stored[i]);
      ::testing::Test::RecordProperty(
          "max_bound_use_W" + std::to_string(W) + "_L" + std::to_string(lanes),
          std::to_string(use));
      std::printf("W=%zu lanes=%zu: largest |stored - fp64| / bound = %.3f\n", W, lanes, use);
      EXPECT_GT(use, 0.5) << "the stored bound is not tight";
      EXPECT_LE(use, 1.0);
    }
  }
}

// The special rows of the specification, one by one.
TEST(KvStoreNormRope, SpecialRowsFollowTheSpecification) {
  const size_t W = 512, n_pos = 16;
  const auto table = ref::kv_store::rope_table(n_pos, 64);
  const std::vector<float> weight(W, 1.25f);
  const std::vector<int64_t> positions = {7};
  const NormRope p{.weight = weight, .cos_sin = table, .positions = positions};
  auto store = [&](const std::vector<bf16>& x) {
    std::vector<bf16> pool(W, kSentinel);
    ref::kv_store::norm_rope_store(x, std::vector<int64_t>{0}, pool, 1, {.width = W}, p, 32);
    return pool;
  };
  auto is_nan = [](bf16 v) { return (v.bits & 0x7f80) == 0x7f80 && (v.bits & 0x7f); };
  auto is_zero = [](bf16 v) { return (v.bits & 0x7fff) == 0; };
  std::vector<bf16> x(W, bf16{0});
  for (bf16 v : store(x)) EXPECT_TRUE(is_zero(v)) << "all-zero row";
  x[3].bits = 0x7fc0;
  for (bf16 v : store(x)) EXPECT_TRUE(is_nan(v)) << "a NaN makes the row NaN";
  fx::Rng rng(fx::test_seed());
  for (bf16& v : x) v = f32_to_bf16(float(rng.normal()));
  x[5].bits = 0x7f80;      // +inf outside the RoPE part
  x[W - 1].bits = 0xff80;  // -inf in the RoPE part: its pair (W-2, W-1) is NaN
  const auto inf_row = store(x);
  for (size_t j = 0; j < W; ++j)
    EXPECT_TRUE(j == 5 || j >= W - 2 ? is_nan(inf_row[j]) : is_zero(inf_row[j])) << j;
  for (bf16& v : x) v = f32_to_bf16(float(rng.uniform(1e20, 1e30)));
  for (bf16 v : store(x)) EXPECT_TRUE(is_zero(v)) << "squares overflow: scale 0";
  for (bf16& v : x) v.bits = uint16_t(1 + rng.next() % 0x7f);  // positive subnormals
  const auto sub = store(x);
  const float inv = 1.0f / std::sqrt(0.0f / float(W) + 1e-6f);
  for (size_t j = 0; j < W - 64; ++j)
    EXPECT_EQ(sub[j].bits, f32_to_bf16((bf16_to_f32(x[j]) * inv) * 1.25f).bits)
        << "subnormals are scaled, not flushed: " << j;
}

// A row whose sum of squares overflows fp32 is +-0 in the fp32 order and in the fp64 reference
// alike, so the fp32 order's output lies within the fp64 bounds (the verdict a foreign fused store
// gets) on such rows too: no implementation has to choose between the two. In the band where the
// overflow depends on the summation order, both outcomes are within the bound.
TEST(KvStoreNormRope, OverflowingRowsAgreeBetweenTheFp32OrderAndTheFp64Bounds) {
  const uint64_t seed = fx::test_seed();
  const size_t W = 512, n_pos = 16;
  DSV4_CASE(seed, "W=512 overflowing rows");
  fx::Rng rng(seed);
  const auto table = ref::kv_store::rope_table(n_pos, 64);
  const std::vector<float> weight(W, 1.25f);
  // Row 0: squares far past FLT_MAX; row 1: a sum just past FLT_MAX for every order; row 2: a
  // sum right at the threshold (order-dependent); row 3: an ordinary row beside them.
  const double limit = double(std::numeric_limits<float>::max());
  std::vector<float> xf;
  for (size_t j = 0; j < W; ++j) xf.push_back(float(rng.uniform(1e20, 1e30)));
  const float big = float(std::sqrt(limit * 1.01 / double(W)));
  for (size_t j = 0; j < W; ++j) xf.push_back(j % 2 ? big : -big);
  // Row 2 from two adjacent bf16 values lo < hi around sqrt(FLT_MAX / W): k values hi, the rest
  // lo, with k putting the exact sum as near the rounding threshold as the steps allow.
  bf16 lo = f32_to_bf16(float(std::sqrt(limit / double(W))));
  const double threshold = limit + std::ldexp(1.0, 103);
  while (double(W) * bf16_to_f32(lo) * bf16_to_f32(lo) > threshold) --lo.bits;
  const bf16 hi{uint16_t(lo.bits + 1)};
  const double l2 = double(bf16_to_f32(lo)) * bf16_to_f32(lo),
               h2 = double(bf16_to_f32(hi)) * bf16_to_f32(hi);
  size_t k = 0;
  for (size_t c = 0; c <= W; ++c)
    if (std::fabs((W - c) * l2 + c * h2 - threshold) < std::fabs((W - k) * l2 + k * h2 - threshold))
      k = c;
  for (size_t j = 0; j < W; ++j) xf.push_back(bf16_to_f32(j < k ? hi : lo));
  for (size_t j = 0; j < W; ++j) xf.push_back(float(rng.normal()));
  const auto x = fx::to_bf16(xf);
  const size_t T = 4;
  const std::vector<int64_t> positions = {3, 5, 7, 9};
  const NormRope p{.weight = weight, .cos_sin = table, .positions = positions};
  auto ss_of = [&](size_t t) {
    double ss = 0;
    for (size_t j = 0; j < W; ++j)
      ss += double(bf16_to_f32(x[t * W + j])) * bf16_to_f32(x[t * W + j]);
    return ss;
  };
  using ref::kv_store::Overflow;
  EXPECT_EQ(ref::kv_store::ss_overflows_f32(ss_of(0), W), Overflow::kAlways);
  EXPECT_EQ(ref::kv_store::ss_overflows_f32(ss_of(1), W), Overflow::kAlways);
  EXPECT_EQ(ref::kv_store::ss_overflows_f32(ss_of(2), W), Overflow::kOrderDependent);
  EXPECT_EQ(ref::kv_store::ss_overflows_f32(ss_of(3), W), Overflow::kNever);
  const auto b = ref::kv_store::norm_rope_bounds(x, T, {.width = W}, p);
  for (size_t t = 0; t < 2; ++t)
    for (size_t j = 0; j < W; ++j) ASSERT_EQ(b.value[t * W + j], 0.0) << "row " << t << " j " << j;
  for (size_t lanes : {1, 16, 32, 64}) {
    SCOPED_TRACE("lanes=" + std::to_string(lanes));
    std::vector<bf16> pool(T * W, kSentinel);
    ref::kv_store::norm_rope_store(x, std::vector<int64_t>{0, 1, 2, 3}, pool, T, {.width = W}, p,
                                   lanes);
    EXPECT_TRUE(fx::close(pool, b.value, Shape{T, W}, {.bound = b.stored}, {.name = "stored"}));
  }
  // Both outcomes of the order-dependent row are admitted: its fp64 value and +-0.
  std::vector<bf16> zero_row(W, bf16{0}), fp64_row(W);
  for (size_t j = 0; j < W; ++j) fp64_row[j] = f32_to_bf16(float(b.value[2 * W + j]));
  const std::vector<double> v2(b.value.begin() + 2 * W, b.value.begin() + 3 * W);
  const std::vector<double> s2(b.stored.begin() + 2 * W, b.stored.begin() + 3 * W);
  fx::Tolerance zeros{.allow_all_zero = true};
  zeros.bound = s2;
  EXPECT_TRUE(fx::close(zero_row, v2, Shape{W}, zeros, {.name = "row 2 as +-0"}));
  EXPECT_TRUE(fx::close(fp64_row, v2, Shape{W}, {.bound = s2}, {.name = "row 2 as fp64"}));
}

// The lane count is part of the specification: summing in another order changes some bits, so the
// kernel's bitwise test really pins its reduction order.
TEST(KvStoreNormRope, LaneCountChangesTheBits) {
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, "W=512 rows=64");
  fx::Rng rng(seed);
  const size_t W = 512;
  const auto table = ref::kv_store::rope_table(16, 64);
  const auto weight = fx::uniform_f32(rng, W, 0.5f, 1.5f);
  const int64_t pos[] = {3};
  const NormRope p{.weight = weight, .cos_sin = table, .positions = pos};
  int differing_rows = 0;
  for (int row = 0; row < 64; ++row) {
    const auto x = fx::to_bf16(fx::normal_f32(rng, W));
    std::vector<float> a(W), b(W);
    ref::kv_store::norm_rope_row_f32(x.data(), W, p, 3, 1, a.data());
    ref::kv_store::norm_rope_row_f32(x.data(), W, p, 3, 32, b.data());
    differing_rows += a != b;
  }
  EXPECT_GT(differing_rows, 0);
}

TEST(KvStoreNormRope, RejectsBadParameters) {
  HandCase h;
  std::vector<bf16> pool(16);
  auto message = [&](NormRope p, size_t lanes) {
    try {
      ref::kv_store::norm_rope_store(h.x, std::vector<int64_t>{0}, pool, 1, {.width = 16}, p,
                                     lanes);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  NormRope p = h.params();
  EXPECT_THAT(message(p, 3), HasSubstr("lanes=3"));
  EXPECT_THAT(message(p, 128), HasSubstr("lanes=128"));
  p.rope_dim = 12;
  EXPECT_THAT(message(p, 32), HasSubstr("rope_dim=12"));
  p.rope_dim = 24;
  EXPECT_THAT(message(p, 32), HasSubstr("rope_dim=24"));
  p = h.params();
  p.weight = std::span<const float>(h.weight).first(8);
  EXPECT_THAT(message(p, 32), HasSubstr("weight has 8 values"));
  p = h.params();
  p.cos_sin = std::span<const float>(h.table).first(12);
  EXPECT_THAT(message(p, 32), HasSubstr("cos_sin has 12 values"));
  p = h.params();
  p.positions = {};
  EXPECT_THAT(message(p, 32), HasSubstr("positions has 0 entries"));
}

TEST(KvStoreNormRope, RopeTableLayout) {
  const auto t = ref::kv_store::rope_table(3, 8, 10000.0);
  ASSERT_EQ(t.size(), 24u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(t[2 * i], 1.0f);  // position 0
    EXPECT_EQ(t[2 * i + 1], 0.0f);
    const double theta = 2.0 * std::pow(10000.0, -double(2 * i) / 8);  // position 2
    EXPECT_EQ(t[16 + 2 * i], float(std::cos(theta)));
    EXPECT_EQ(t[16 + 2 * i + 1], float(std::sin(theta)));
  }
}

}  // namespace
}  // namespace dsv4

// sampling_renorm reference on its own: hand-computed top-k and top-p rows, the edge rules (k <= 0
// or >= V, p >= 1, zero mass, NaN/negative/inf entries, V = 1, equal and one-hot rows), invariants
// (rows sum to 1, order kept), and the fixed-point top-p boundary against fp64.
#include "dsv4/ref/sampling_renorm.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "dsv4/fixtures/seed.hpp"

namespace dsv4 {
namespace {

namespace sr = ref::sampling_renorm;
using ::testing::HasSubstr;

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> topk(const std::vector<float>& row, int32_t k, sr::Arith a = sr::Arith::kFp64) {
  std::vector<float> out(row.size(), 99.f);
  sr::top_k(row, row.size(), std::vector<int32_t>{k}, out, a);
  return out;
}
std::vector<float> topp(const std::vector<float>& row, float p, bool fixed = false) {
  std::vector<float> out(row.size(), 99.f);
  sr::top_p(row, row.size(), std::vector<float>{p}, out,
            fixed ? sr::Arith::kKernel : sr::Arith::kFp64);
  return out;
}

TEST(SamplingRenorm, WeightDropsNaNNegativeAndInfinite) {
  EXPECT_EQ(sr::weight(0.25f), 0.25f);
  EXPECT_EQ(sr::weight(kNaN), 0.f);
  EXPECT_EQ(sr::weight(-0.5f), 0.f);
  EXPECT_EQ(sr::weight(kInf), 0.f);
  EXPECT_FALSE(std::signbit(sr::weight(-0.f)));
}

TEST(SamplingRenorm, TopKHandRows) {
  const std::vector<float> row = {0.1f, 0.4f, 0.2f, 0.2f, 0.1f};
  EXPECT_EQ(sr::top_k_pivot(row, 1), 0.4f);
  EXPECT_EQ(sr::top_k_pivot(row, 2), 0.2f);
  EXPECT_EQ(sr::top_k_pivot(row, 3), 0.2f);
  // k = 2: the pivot 0.2 keeps both 0.2s (ties kept): 0.4, 0.2, 0.2 over 0.8.
  const auto o = topk(row, 2);
  EXPECT_EQ(o, (std::vector<float>{0, float(0.4 / (0.4f + 0.2 + 0.2)), float(0.2f / 0.8),
                                   float(0.2f / 0.8), 0}));
  EXPECT_EQ(topk(row, 1), (std::vector<float>{0, 1, 0, 0, 0}));
  // k <= 0 and k >= V keep all: the row renormalised by its own sum (1.0 here).
  for (int32_t k : {0, -3, 5, 6}) {
    const auto all = topk(row, k);
    for (size_t i = 0; i < row.size(); ++i)
      EXPECT_FLOAT_EQ(all[i], row[i] / 1.0f) << "k=" << k << " i=" << i;
  }
}

TEST(SamplingRenorm, TopPHandRows) {
  const std::vector<float> row = {0.1f, 0.5f, 0.15f, 0.25f};
  // Mass from the top: 0.5, 0.75, 0.9, 1.0.
  EXPECT_EQ(sr::top_p_pivot(row, 0.5f), 0.5f);
  EXPECT_EQ(sr::top_p_pivot(row, 0.6f), 0.25f);
  EXPECT_EQ(sr::top_p_pivot(row, 0.8f), 0.15f);
  EXPECT_EQ(sr::top_p_pivot(row, 0.f), 0.5f);
  EXPECT_EQ(sr::top_p_pivot(row, -1.f), 0.5f);
  EXPECT_EQ(topp(row, 0.6f),
            (std::vector<float>{0, float(0.5f / (0.5 + 0.25f)), 0, float(0.25f / (0.5 + 0.25f))}));
  // Ties at the boundary go together: 0.3 0.3 reach 0.5 only with both.
  const std::vector<float> tie = {0.3f, 0.1f, 0.3f, 0.3f};
  EXPECT_EQ(sr::top_p_pivot(tie, 0.5f), 0.3f);
  const auto o = topp(tie, 0.5f);
  EXPECT_EQ(o[1], 0.f);
  EXPECT_FLOAT_EQ(o[0] + o[2] + o[3], 1.f);
  // p >= 1 keeps all; a row whose mass is below p keeps all too.
  EXPECT_EQ(sr::top_p_pivot(row, 1.f), 0.f);
  const std::vector<float> light = {0.1f, 0.2f};
  EXPECT_EQ(sr::top_p_pivot(light, 0.9f), 0.f);
  EXPECT_FLOAT_EQ(topp(light, 0.9f)[1], 0.2f / 0.3f);
}

TEST(SamplingRenorm, EdgeRows) {
  // Zero mass gives zeros, whatever k or p.
  const std::vector<float> zero = {0, -1, kNaN, 0};
  EXPECT_EQ(topk(zero, 2), std::vector<float>(4, 0.f));
  EXPECT_EQ(topp(zero, 0.5f), std::vector<float>(4, 0.f));
  EXPECT_EQ(topp(zero, 0.5f, true), std::vector<float>(4, 0.f));
  // V = 1.
  EXPECT_EQ(topk({0.7f}, 1), (std::vector<float>{1}));
  EXPECT_EQ(topp({0.7f}, 0.2f), (std::vector<float>{1}));
  // One-hot rows keep the hot entry only (top-p) or everything at value 0 (top-k large).
  const std::vector<float> hot = {0, 0, 1, 0};
  EXPECT_EQ(topp(hot, 0.99f), (std::vector<float>{0, 0, 1, 0}));
  EXPECT_EQ(topk(hot, 3), (std::vector<float>{0, 0, 1, 0}));
  // Equal rows: every k and p keeps all of them.
  const std::vector<float> eq(8, 0.125f);
  for (int32_t k : {1, 3, 8}) EXPECT_EQ(topk(eq, k), std::vector<float>(8, 0.125f)) << k;
  for (float p : {0.01f, 0.5f, 0.99f}) EXPECT_EQ(topp(eq, p), std::vector<float>(8, 0.125f)) << p;
  // NaN, negative and inf entries are dropped: never kept with a value, no mass.
  const std::vector<float> mixed = {kNaN, 0.5f, -0.5f, kInf, 0.5f};
  EXPECT_EQ(topk(mixed, 1), (std::vector<float>{0, 0.5f, 0, 0, 0.5f}));
  EXPECT_EQ(topp(mixed, 0.9f), (std::vector<float>{0, 0.5f, 0, 0, 0.5f}));
}

// The kernel's fp32 sum order, by hand: 1 and 2^-24 meet in partial 0 (entries 0 and 512) and
// round to 1, where the fp64 sum keeps the 2^-24; the kept 1 then divides to exactly 1.
TEST(SamplingRenorm, KernelArithmeticFollowsTheKernelsSumOrder) {
  std::vector<float> row(1025, 0.f);
  row[0] = 1.f;
  row[512] = std::ldexp(1.f, -24);
  const auto kern = topk(row, 0, sr::Arith::kKernel), exact = topk(row, 0);
  EXPECT_EQ(kern[0], 1.f);
  EXPECT_EQ(exact[0], std::nextafter(1.f, 0.f));
  EXPECT_EQ(kern[512], std::ldexp(1.f, -24));
  // A sum fp32 holds exactly (1 + 2^-23) gives the same bits both ways.
  row[512] = std::ldexp(1.f, -23);
  EXPECT_EQ(topk(row, 0, sr::Arith::kKernel)[0], topk(row, 0)[0]);
}

// Chunks of 4096 entries are summed apart, then added in chunk order: 1 with 2^-24 in chunk 0
// rounds to 1, and chunk 1's 2^-24 added to that rounds to 1 again; one strided partial per
// thread across the whole row would have paired the two 2^-24 first (1 + 2^-23).
TEST(SamplingRenorm, KernelArithmeticSumsChunksInChunkOrder) {
  std::vector<float> row(8193, 0.f);
  row[0] = 1.f;
  row[1] = std::ldexp(1.f, -24);
  row[4097] = std::ldexp(1.f, -24);
  const auto kern = topk(row, 0, sr::Arith::kKernel), exact = topk(row, 0);
  EXPECT_EQ(kern[0], 1.f);
  EXPECT_EQ(kern[4097], std::ldexp(1.f, -24));
  EXPECT_EQ(exact[0], 1.f - std::ldexp(1.f, -23));  // 1 / (1 + 2^-23)
}

TEST(SamplingRenorm, BadSizesNameTheField) {
  std::vector<float> out(4);
  EXPECT_THAT([&] { sr::top_k(std::vector<float>(4), 0, std::vector<int32_t>{1}, out); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("V=0")));
  EXPECT_THAT(
      [&] {
        sr::top_k(std::vector<float>(4), 4, std::vector<int32_t>{1, 1}, out);
      },
      ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("probs")));
  EXPECT_THAT([&] { sr::top_p(std::vector<float>(4), 4, std::vector<float>{}, out); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("p is empty")));
}

// Random softmax-like rows: renormalised rows sum to 1, keep the input's order among kept entries,
// and the fixed-point boundary equals the fp64 one unless a mass lies within its bound of p.
TEST(SamplingRenorm, InvariantsAndFixedPointAgreesWithFp64) {
  const uint64_t seed = fx::test_seed();
  fx::Rng rng(seed);
  int boundary_cases = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const size_t V = size_t(rng.range(1, 2000));
    DSV4_CASE(seed, "trial=" << trial << " V=" << V);
    std::vector<float> row(V);
    double sum = 0;
    for (auto& v : row) sum += v = float(std::exp(rng.normal(0, 3)));
    for (auto& v : row) v = float(v / sum);
    if (trial % 7 == 0)  // coarse values: many ties
      for (auto& v : row) v = std::round(v * 64) / 64;
    const int32_t k = int32_t(rng.range(-1, int64_t(V) + 1));
    const float p = float(rng.uniform(0, 1.05));
    // The kernel's arithmetic stays within rtol 1e-5 of fp64 where both keep the same set.
    const auto k64 = topk(row, k), k32 = topk(row, k, sr::Arith::kKernel);
    for (size_t i = 0; i < V; ++i) ASSERT_NEAR(k32[i], k64[i], 1e-5 * k64[i]) << "entry " << i;
    for (const auto& out : {k64, topp(row, p), topp(row, p, true)}) {
      double s = 0;
      for (float v : out) s += v;
      if (s > 0) {
        EXPECT_NEAR(s, 1.0, 1e-5);
      }
      for (size_t i = 0; i < V; ++i)
        for (size_t j : {size_t(0), V / 2, V - 1})
          if (out[i] > 0 && out[j] > 0 && row[i] > row[j]) {
            ASSERT_GE(out[i], out[j]);
          }
    }
    const float a = sr::top_p_pivot(row, p), b = sr::top_p_pivot_fixed(row, p);
    if (a != b) {
      // Only where an exact mass at the boundary is within V * max * 2^-43 of p.
      const float mx = *std::max_element(row.begin(), row.end());
      double m_hi = 0;
      for (float v : row)
        if (v >= std::max(a, b)) m_hi += v;
      EXPECT_LE(std::abs(m_hi - p), double(V) * mx * std::ldexp(1.0, -43) + 1e-12)
          << "pivot fp64 " << a << " fixed " << b;
      ++boundary_cases;
    }
  }
  EXPECT_LE(boundary_cases, 2);
}

// ---- the top-p rule at exact equality, SGLang's k clamp, the kernel's strided partials -------

// Mass from the top: 0.5, 0.75, 1.0 (every sum exact). At p = 0.75 the kept mass reaches p
// exactly with {0.5, 0.25}: FlashInfer's rule (the default, and the kernel's fixed-point
// boundary) stops there; SGLang's renorm.py keeps the next value (its mass above, 0.75, is not
// more than p). A boundary made exclusive (M > p) in either pivot moves it to 0.125.
TEST(SamplingRenormRules, TopPAtExactEqualityFollowsTheNamedRule) {
  const std::vector<float> row = {0.125f, 0.5f, 0.125f, 0.25f};
  EXPECT_EQ(sr::top_p_pivot(row, 0.75f), 0.25f);
  EXPECT_EQ(sr::top_p_pivot_fixed(row, 0.75f), 0.25f);
  EXPECT_EQ(sr::top_p_pivot(row, 0.75f, sr::TopPRule::kRenormPy), 0.125f);
  EXPECT_EQ(sr::top_p_pivot_fixed(row, 0.75f, sr::TopPRule::kRenormPy), 0.125f);
  EXPECT_EQ(topp(row, 0.75f, true), (std::vector<float>{0, 2.f / 3, 0, 1.f / 3}));
  // Just off the boundary both rules agree.
  for (float p : {std::nextafter(0.75f, 0.f), std::nextafter(0.75f, 1.f)})
    EXPECT_EQ(sr::top_p_pivot_fixed(row, p), sr::top_p_pivot_fixed(row, p, sr::TopPRule::kRenormPy))
        << p;
  // At the top value's mass (p = 0.5) and at the whole mass (p = 1 keeps all anyway).
  EXPECT_EQ(sr::top_p_pivot_fixed(row, 0.5f), 0.5f);
  EXPECT_EQ(sr::top_p_pivot_fixed(row, 0.5f, sr::TopPRule::kRenormPy), 0.25f);
}

TEST(SamplingRenormRules, KClampFollowsSglang) {
  const std::vector<float> row = {0.25f, 0.5f, 0.25f};
  // The project's kernel: k <= 0 keeps all. SGLang: k clamped to 1 keeps the maximum.
  EXPECT_EQ(sr::top_k_pivot(row, 0), 0.f);
  EXPECT_EQ(sr::top_k_pivot(row, 0, sr::KRule::kClamp), 0.5f);
  EXPECT_EQ(sr::top_k_pivot(row, -7, sr::KRule::kClamp), 0.5f);
  EXPECT_EQ(sr::top_k_pivot(row, 9, sr::KRule::kClamp), 0.f);  // clamped to V: keeps all
  std::vector<float> out(3);
  sr::top_k(row, 3, std::vector<int32_t>{0}, out, sr::Arith::kKernel, sr::KRule::kClamp);
  EXPECT_EQ(out, (std::vector<float>{0, 1, 0}));
  // Ties at the clamped pivot stay together.
  sr::top_k(std::vector<float>{0.5f, 0.5f}, 2, std::vector<int32_t>{-1}, out, sr::Arith::kKernel,
            sr::KRule::kClamp);
  EXPECT_EQ(out[0], 0.5f);
}

// One row of 1024: 1 at entry 0, 2^-25 everywhere else. The kernel's partial t adds entries t
// and t + 512 (2^-25 + 2^-25 = 2^-24 for t >= 1; 1 + 2^-25 rounds to 1), then the tree of 512
// pairs them up: at off = 256, 1 + 2^-24 ties to 1; from off = 128 on partial 0 gains 2^-23,
// 2^-22, ..., 2^-16 exactly: S = 1 + 255 * 2^-23. Summed contiguously, each 2^-25 rounds away
// against the 1 (S = 1); the fp64 sum is 1 + 1023 * 2^-25.
TEST(SamplingRenorm, KernelArithmeticPairsStridedEntriesBeforeTheTree) {
  std::vector<float> row(1024, std::ldexp(1.f, -25));
  row[0] = 1.f;
  const float S = 1.f + 255 * std::ldexp(1.f, -23);
  const auto kern = topk(row, 0, sr::Arith::kKernel);
  EXPECT_EQ(kern[0], 1.f / S);
  EXPECT_EQ(kern[1], std::ldexp(1.f, -25) / S);
  EXPECT_NE(kern[0], 1.f);  // what a contiguous sum would give
  EXPECT_EQ(topk(row, 0)[0], float(1.0 / (1.0 + 1023 * std::ldexp(1.0, -25))));
}

}  // namespace
}  // namespace dsv4

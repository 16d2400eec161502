// indexer_topk reference on its own: hand-computed rows (NaN, -inf, ties, the trivial path), the
// page transform and its inverse, and invariants against an independent fp64 ranking.
#include "dsv4/ref/indexer_topk.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "dsv4/fixtures/compare.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/fixtures/seed.hpp"

namespace dsv4 {
namespace {

namespace it = ref::indexer_topk;
using fx::Shape;
using ::testing::HasSubstr;

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kNegNaN = -std::numeric_limits<float>::quiet_NaN();

std::vector<int32_t> run(const std::vector<float>& row, int32_t len, size_t K, bool sorted) {
  std::vector<int32_t> out(K, 99);
  const std::vector<int32_t> lens = {len};
  it::topk(row, lens, {.B = 1, .width = row.size(), .stride = row.size(), .K = K}, sorted, out);
  return out;
}

TEST(IndexerTopk, OrderKeyIsSglangsRadixOrder) {
  const std::vector<float> ascending = {kNegNaN, -kInf, -2.f, -0.f, 0.f, 1e-30f, 3.f, kInf, kNaN};
  for (size_t i = 1; i < ascending.size(); ++i)
    EXPECT_LT(it::order_key(ascending[i - 1]), it::order_key(ascending[i])) << "entry " << i;
  EXPECT_FALSE(it::eligible(-kInf));
  EXPECT_FALSE(it::eligible(kNegNaN));
  EXPECT_TRUE(it::eligible(-3e38f));
  EXPECT_TRUE(it::eligible(kNaN));
  EXPECT_EQ(it::order_key(-kInf), 0x007fffffu);
}

TEST(IndexerTopk, HandRowWithNaNInfAndTies) {
  //                            0    1     2    3   4    5       6    7
  const std::vector<float> row = {.5f, 2.f, -kInf, 2.f, 7.f, kNaN, kNegNaN, 1.f};
  // +NaN first, then 7, then the tie at 2 goes to the smaller index (1).
  EXPECT_EQ(run(row, 8, 3, false), (std::vector<int32_t>{5, 4, 1}));
  EXPECT_EQ(run(row, 8, 3, true), (std::vector<int32_t>{1, 4, 5}));
  // K = 6 takes every eligible key (6 of 8): -inf (2) and -NaN (6) are never selected.
  EXPECT_EQ(run(row, 8, 6, true), (std::vector<int32_t>{0, 1, 3, 4, 5, 7}));
  // K = 7 > eligible: -1 fills the rest.
  EXPECT_EQ(run(row, 8, 7, true), (std::vector<int32_t>{0, 1, 3, 4, 5, 7, -1}));
  EXPECT_EQ(run(row, 8, 7, false), (std::vector<int32_t>{5, 4, 1, 3, 7, 0, -1}));
  // The length hides keys 5..7: the top 3 of {.5, 2, -inf, 2, 7}.
  EXPECT_EQ(run(row, 5, 3, true), (std::vector<int32_t>{1, 3, 4}));
}

TEST(IndexerTopk, PositiveZeroRanksAboveNegativeZero) {
  const std::vector<float> row = {-0.f, 0.f, -0.f, -1.f};
  EXPECT_EQ(run(row, 4, 1, false), (std::vector<int32_t>{1}));
  EXPECT_EQ(run(row, 4, 2, false), (std::vector<int32_t>{1, 0}));
}

TEST(IndexerTopk, TrivialPathListsTheFirstLenKeysWithoutReadingScores) {
  const std::vector<float> row = {-kInf, kNegNaN, kNaN, -kInf, 5.f, 6.f};
  EXPECT_EQ(run(row, 3, 4, false), (std::vector<int32_t>{0, 1, 2, -1}));
  EXPECT_EQ(run(row, 4, 4, true), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(run(row, 0, 2, true), (std::vector<int32_t>{-1, -1}));
  EXPECT_EQ(run(row, -5, 2, true), (std::vector<int32_t>{-1, -1}));  // negative: nothing
  // len = K + 1 leaves the trivial path: the -inf and -NaN keys drop out.
  EXPECT_EQ(run(row, 5, 4, true), (std::vector<int32_t>{2, 4, -1, -1}));
  // A length past the width clamps to it: +NaN (2) and 6 (5).
  EXPECT_EQ(run(row, 1 << 30, 2, true), (std::vector<int32_t>{2, 5}));
}

TEST(IndexerTopk, KeysPastTheLengthAndPaddedStrideAreNotRead) {
  // Two rows, width 4, stride 6: the padding holds the largest values and must not matter.
  const std::vector<float> scores = {1, 4, 3, 2, 100, 100, 9, 8, 7, 6, 100, 100};
  const std::vector<int32_t> lens = {4, 3};
  std::vector<int32_t> out(4);
  it::topk(scores, lens, {.B = 2, .width = 4, .stride = 6, .K = 2}, true, out);
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 0, 1}));
}

TEST(IndexerTopk, PageTransformHandCase) {
  // Page size 4; row 0's pages 0,1,2 live at 7,3,5; row 1's at 0,9,1.
  const std::vector<int32_t> pt = {7, 3, 5, 0, 9, 1};
  const std::vector<int32_t> raw = {0, 5, 11, -1, 3, 4, 8, 10};
  std::vector<int32_t> paged(8), back(8);
  it::page_transform(raw, 4, pt, 3, 2, paged);
  EXPECT_EQ(paged, (std::vector<int32_t>{28, 13, 23, -1, 3, 36, 4, 6}));
  it::inverse_page_transform(paged, 4, pt, 3, 3, 2, back);
  EXPECT_EQ(back, raw);
  // Page size 1 is the identity through the table.
  it::page_transform(std::vector<int32_t>{2, 0, -1}, 3, std::vector<int32_t>{5, 6, 7}, 3, 0, paged);
  EXPECT_EQ(std::vector<int32_t>(paged.begin(), paged.begin() + 3),
            (std::vector<int32_t>{7, 5, -1}));
}

TEST(IndexerTopk, BadArgumentsNameTheField) {
  std::vector<float> s(8);
  std::vector<int32_t> lens(1, 8), out(8);
  EXPECT_THAT([&] { it::topk(s, lens, {.B = 1, .width = 8, .stride = 8, .K = 0}, false, out); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("K=0")));
  EXPECT_THAT([&] { it::topk(s, lens, {.B = 1, .width = 8, .stride = 4, .K = 2}, false, out); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("stride=4")));
  EXPECT_THAT([&] { it::topk(s, lens, {.B = 2, .width = 8, .stride = 8, .K = 2}, false, out); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("scores")));
  EXPECT_THAT(
      [&] { it::page_transform(std::vector<int32_t>{40}, 1, std::vector<int32_t>{0}, 1, 2, out); },
      ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("past the page table")));
  EXPECT_THAT(
      [&] {
        it::inverse_page_transform(std::vector<int32_t>{1}, 1, std::vector<int32_t>{3, 3}, 2, 2, 0,
                                   out);
      },
      ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("repeats a page")));
}

// An independent formulation in fp64: key i is selected iff fewer than K eligible keys beat it,
// where "beats" compares the scores as doubles, ties to the smaller index. Rows without NaN or
// signed zeros, where the double order and the radix key agree.
std::vector<int32_t> fp64_selected(const std::vector<double>& row, size_t K) {
  std::vector<int32_t> idx;
  for (size_t i = 0; i < row.size(); ++i)
    if (row[i] > -std::numeric_limits<double>::infinity()) idx.push_back(int32_t(i));
  std::vector<int32_t> sel;
  for (int32_t i : idx) {
    size_t better = 0;
    for (int32_t j : idx)
      better += row[size_t(j)] > row[size_t(i)] || (row[size_t(j)] == row[size_t(i)] && j < i);
    if (better < K) sel.push_back(i);
  }
  return sel;  // ascending
}

TEST(IndexerTopk, AgreesWithAnIndependentFp64RankingAndKeepsItsInvariants) {
  const uint64_t seed = fx::test_seed();
  fx::Rng rng(seed);
  for (int trial = 0; trial < 60; ++trial) {
    const size_t n = size_t(rng.range(1, 300)), K = size_t(rng.range(1, 64));
    DSV4_CASE(seed, "trial=" << trial << " n=" << n << " K=" << K);
    // Integer-valued scores make ties common; some -inf; a few huge magnitudes.
    std::vector<float> row = fx::integer_valued_f32(rng, n, -6, 6);
    for (auto& v : row) {
      const double u = rng.uniform();
      if (u < 0.1) {
        v = -kInf;
      } else if (u < 0.12) {
        v = kInf;
      } else if (u < 0.14) {
        v = v * 1e30f;
      }
      if (v == 0) v = 0.f;  // no signed zeros in this comparison
    }
    const auto sorted = run(row, int32_t(n), K, true);
    const auto unsorted = run(row, int32_t(n), K, false);
    std::vector<int32_t> want;
    if (n <= K) {
      want.resize(n);
      std::iota(want.begin(), want.end(), 0);
    } else {
      want = fp64_selected(std::vector<double>(row.begin(), row.end()), K);
    }
    want.resize(K, -1);
    EXPECT_EQ(sorted, want);
    // Unsorted: the same set, in descending score, -1 last.
    auto s2 = unsorted;
    std::sort(s2.begin(), s2.end(),
              [](int32_t a, int32_t b) { return (a < 0) != (b < 0) ? b < 0 : a < b; });
    EXPECT_EQ(s2, want);
    for (size_t j = 1; j < K; ++j) {
      const int32_t a = unsorted[j - 1], b = unsorted[j];
      if (b < 0) continue;
      ASSERT_GE(a, 0) << "-1 before a selection at " << j;
      if (n > K) {
        EXPECT_GE(it::order_key(row[size_t(a)]), it::order_key(row[size_t(b)]));
      }
    }
  }
}

// ---- SGLang's selection conventions ----------------------------------------------------------

std::vector<int32_t> run_sel(const std::vector<float>& row, int32_t len, size_t K, bool sorted,
                             it::Select sel) {
  std::vector<int32_t> out(K, 99);
  const std::vector<int32_t> lens = {len};
  it::topk(row, lens, {.B = 1, .width = row.size(), .stride = row.size(), .K = K}, sorted, out,
           sel);
  return out;
}

// SGLang's kernels return exactly K indices when len > K: -inf keys fill the places the finite
// ones leave (the smaller index first here), -NaN ranks last of all; the dsv4 rule leaves -1.
TEST(IndexerTopkConventions, SglangSelectsExactlyKWithInfEligibleAndNegNaNLast) {
  //                              0     1      2     3        4      5
  const std::vector<float> row = {1.f, -kInf, 2.f, kNegNaN, -kInf, 3.f};
  EXPECT_EQ(run_sel(row, 6, 4, true, it::Select::kDsv4), (std::vector<int32_t>{0, 2, 5, -1}));
  EXPECT_EQ(run_sel(row, 6, 4, true, it::Select::kSglang), (std::vector<int32_t>{0, 1, 2, 5}));
  EXPECT_EQ(run_sel(row, 6, 4, false, it::Select::kSglang), (std::vector<int32_t>{5, 2, 0, 1}));
  EXPECT_EQ(run_sel(row, 6, 5, true, it::Select::kSglang), (std::vector<int32_t>{0, 1, 2, 4, 5}));
  // -NaN is the very last: only K = 6 of 6 takes it (the trivial path, no score read).
  EXPECT_EQ(run_sel(row, 6, 6, true, it::Select::kSglang),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
}

// The mask step (SGLang's mask_topk_scores) turns every entry whose score is not > -inf into -1
// in place: -inf and NaN of either sign, even the +NaN the radix key ranks first; -1 may stand
// anywhere in the row, on the trivial path too.
TEST(IndexerTopkConventions, MaskStepMirrorsMaskTopkScores) {
  const std::vector<float> row = {1.f, -kInf, kNaN, 2.f, -kInf, 3.f};
  // Unmasked: +NaN (2), 3 (5), 2 (3), 1 (0); the mask takes the +NaN out.
  EXPECT_EQ(run_sel(row, 6, 4, true, it::Select::kSglang), (std::vector<int32_t>{0, 2, 3, 5}));
  EXPECT_EQ(run_sel(row, 6, 4, true, it::Select::kSglangMasked),
            (std::vector<int32_t>{0, -1, 3, 5}));
  // K = 5 takes a -inf (1) as well, masked in place.
  EXPECT_EQ(run_sel(row, 6, 5, true, it::Select::kSglangMasked),
            (std::vector<int32_t>{0, -1, -1, 3, 5}));
  EXPECT_EQ(run_sel(row, 3, 4, true, it::Select::kSglangMasked),
            (std::vector<int32_t>{0, -1, -1, -1}));
  std::vector<int32_t> raw = {5, 1, -1, 7};  // 7 is past the width: -1 too
  it::mask_topk_scores(row, {.B = 1, .width = 6, .stride = 6, .K = 4}, raw);
  EXPECT_EQ(raw, (std::vector<int32_t>{5, -1, -1, -1}));
  EXPECT_FALSE(it::select_valid(3));
  EXPECT_STREQ(it::select_name(it::Select::kSglangMasked), "sglang_masked");
}

}  // namespace
}  // namespace dsv4

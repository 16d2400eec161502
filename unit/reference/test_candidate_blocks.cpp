// candidate_blocks reference on its own: hand-computed rows (ties across blocks, partial last
// block, len < bs, nb >= blocks, NaN blocks and keys taking a place, -inf), and invariants of
// random rows against an independent brute-force ranking in fp64.
#include "dsv4/ref/candidate_blocks.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <vector>

#include "dsv4/fixtures/generators.hpp"
#include "dsv4/fixtures/seed.hpp"

namespace dsv4 {
namespace {

namespace cb = ref::candidate_blocks;
using ::testing::HasSubstr;

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Out {
  std::vector<int32_t> blocks, keys;
};

Out run(const std::vector<float>& row, int32_t len, cb::Config c) {
  Out o{std::vector<int32_t>(c.nb, 99), std::vector<int32_t>(c.K, 99)};
  cb::select(row, std::vector<int32_t>{len}, {.B = 1, .width = row.size(), .stride = row.size()}, c,
             o.blocks, o.keys);
  return o;
}

TEST(CandidateBlocks, HandRowPartialLastBlockIsAlwaysChosen) {
  // bs 4, len 10: blocks [0..3] max 5, [4..7] max 9, [8, 9] newest (forced +inf) though small.
  const std::vector<float> row = {1, 5, 2, 0, 9, 3, 8, 4, -7, -8, 100, 100};
  const Out o = run(row, 10, {.bs = 4, .nb = 2, .K = 3});
  EXPECT_EQ(o.blocks, (std::vector<int32_t>{1, 2}));
  // Candidates 4..9 score 9, 3, 8, 4, -7, -8: the top 3 are keys 4, 6 and 7.
  EXPECT_EQ(o.keys, (std::vector<int32_t>{4, 6, 7}));
  EXPECT_EQ(cb::block_score(row, 10, 4, 2), -7.f);
  // K larger than the candidates (6): all of them, then -1.
  const Out all = run(row, 10, {.bs = 4, .nb = 2, .K = 8});
  EXPECT_EQ(all.keys, (std::vector<int32_t>{4, 5, 6, 7, 8, 9, -1, -1}));
}

TEST(CandidateBlocks, TiesAcrossBlocksGoToTheSmallerBlock) {
  const std::vector<float> row = {5, 1, 2, 5, 0, 5, 1, 1};  // blocks of 2: max 5, 5, 5, 1 (newest)
  const Out o = run(row, 8, {.bs = 2, .nb = 3, .K = 3});
  EXPECT_EQ(o.blocks, (std::vector<int32_t>{0, 1, 3}));
  // Candidates 0,1,2,3,6,7 with 5,1,2,5,1,1: 5, 5, then 2.
  EXPECT_EQ(o.keys, (std::vector<int32_t>{0, 2, 3}));
}

TEST(CandidateBlocks, LenBelowBlockSizeAndNbAboveTheBlockCount) {
  const std::vector<float> row = {3, 1, 2, 9, 9, 9};
  const Out o = run(row, 3, {.bs = 8, .nb = 4, .K = 2});
  EXPECT_EQ(o.blocks, (std::vector<int32_t>{0, -1, -1, -1}));
  EXPECT_EQ(o.keys, (std::vector<int32_t>{0, 2}));
  const Out none = run(row, 0, {.bs = 8, .nb = 2, .K = 2});
  EXPECT_EQ(none.blocks, (std::vector<int32_t>{-1, -1}));
  EXPECT_EQ(none.keys, (std::vector<int32_t>{-1, -1}));
  const Out neg = run(row, -4, {.bs = 8, .nb = 1, .K = 1});
  EXPECT_EQ(neg.keys, (std::vector<int32_t>{-1}));
}

TEST(CandidateBlocks, NaNBlocksAndKeysTakeAPlaceAndAreDropped) {
  // bs 2: block 0 holds a NaN (scores NaN, ranked first), block 1 max 4, block 2 newest.
  const std::vector<float> row = {1, kNaN, 4, 3, 0, 1};
  const Out o = run(row, 6, {.bs = 2, .nb = 2, .K = 2});
  EXPECT_EQ(o.blocks, (std::vector<int32_t>{2, -1}));  // block 0 took the place, then dropped
  EXPECT_EQ(o.keys, (std::vector<int32_t>{4, 5}));
  const Out three = run(row, 6, {.bs = 2, .nb = 3, .K = 2});
  EXPECT_EQ(three.blocks, (std::vector<int32_t>{1, 2, -1}));
  // Level two: the NaN key (1) is ranked first, takes one of the K places and is dropped.
  std::vector<float> r2 = {kNaN, 1, 2, 3};
  const Out o2 = run(r2, 4, {.bs = 4, .nb = 1, .K = 2});
  EXPECT_EQ(o2.blocks, (std::vector<int32_t>{0}));
  EXPECT_EQ(o2.keys, (std::vector<int32_t>{3, -1}));
  // -inf keys are never chosen; an all -inf block is never chosen (unless newest).
  const std::vector<float> r3 = {-kInf, -kInf, -kInf, 2, -kInf, -kInf};
  const Out o3 = run(r3, 6, {.bs = 2, .nb = 3, .K = 4});
  EXPECT_EQ(o3.blocks, (std::vector<int32_t>{1, 2, -1}));
  EXPECT_EQ(o3.keys, (std::vector<int32_t>{3, -1, -1, -1}));
}

TEST(CandidateBlocks, BadArgumentsNameTheField) {
  std::vector<float> s(8);
  std::vector<int32_t> b(4), k(4);
  const std::vector<int32_t> lens = {8};
  const cb::Rows r{.B = 1, .width = 8, .stride = 8};
  EXPECT_THAT([&] { cb::select(s, lens, r, {.bs = 0, .nb = 1, .K = 1}, b, k); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("bs=0")));
  EXPECT_THAT([&] { cb::select(s, lens, r, {.bs = 2, .nb = 0, .K = 1}, b, k); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("nb=0")));
  EXPECT_THAT([&] { cb::select(s, lens, r, {.bs = 2, .nb = 1, .K = 9000}, b, k); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("K=9000")));
  EXPECT_THAT([&] { cb::select(s, lens, r, {.bs = 2, .nb = 8, .K = 1}, b, k); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("blocks_out")));
}

// Random rows without NaN: brute force in fp64 (block maxima as doubles, ranks by counting).
TEST(CandidateBlocks, AgreesWithABruteForceFp64Ranking) {
  const uint64_t seed = fx::test_seed();
  fx::Rng rng(seed);
  for (int trial = 0; trial < 80; ++trial) {
    const size_t width = size_t(rng.range(1, 400)), bs = size_t(rng.range(1, 40));
    const cb::Config c{.bs = bs, .nb = size_t(rng.range(1, 12)), .K = size_t(rng.range(1, 80))};
    const int32_t len = int32_t(rng.range(0, int64_t(width)));
    DSV4_CASE(seed, "trial=" << trial << " width=" << width << " len=" << len << " bs=" << bs
                             << " nb=" << c.nb << " K=" << c.K);
    std::vector<float> row = fx::integer_valued_f32(rng, width, -20, 20);
    for (auto& v : row)
      if (rng.uniform() < 0.1) v = -kInf;
    const Out o = run(row, len, c);
    const size_t n = (size_t(len) + bs - 1) / bs;
    std::vector<double> bmax(n, -INFINITY);
    for (size_t i = 0; i < size_t(len); ++i) bmax[i / bs] = std::max(bmax[i / bs], double(row[i]));
    if (n) bmax[n - 1] = INFINITY;
    std::vector<int32_t> want_blocks;
    for (size_t j = 0; j < n; ++j) {
      size_t better = 0;
      for (size_t q = 0; q < n; ++q) better += bmax[q] > bmax[j] || (bmax[q] == bmax[j] && q < j);
      if (better < c.nb && bmax[j] > -INFINITY) want_blocks.push_back(int32_t(j));
    }
    std::vector<int32_t> cand;
    for (int32_t j : want_blocks)
      for (size_t i = size_t(j) * bs; i < std::min(size_t(len), size_t(j + 1) * bs); ++i)
        if (row[i] > -kInf) cand.push_back(int32_t(i));
    std::vector<int32_t> want_keys;
    for (int32_t i : cand) {
      size_t better = 0;
      for (int32_t q : cand)
        better += double(row[size_t(q)]) > double(row[size_t(i)]) ||
                  (row[size_t(q)] == row[size_t(i)] && q < i);
      if (better < c.K) want_keys.push_back(i);
    }
    want_blocks.resize(c.nb, -1);
    want_keys.resize(c.K, -1);
    EXPECT_EQ(o.blocks, want_blocks);
    EXPECT_EQ(o.keys, want_keys);
  }
}

}  // namespace
}  // namespace dsv4

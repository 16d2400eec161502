// ring_layout reference on its own: hand-computed locs, window rows and prefill expansion, the
// error and padding rules, and the ring invariants (no two tokens of a launch share a row; after a
// prefill and a verify step every decode token reads exactly its window, oldest first, which needs
// ring >= win + draft - 1).
#include "dsv4/ref/ring_layout.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <vector>

#include "dsv4/fixtures/compare.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/fixtures/seed.hpp"

namespace dsv4 {
namespace {

using fx::Shape;
using ref::ring_layout::Ring;
using ::testing::HasSubstr;
namespace rl = ref::ring_layout;

constexpr int32_t kUntouched = -77;  // what an output holds where nothing may be written

TEST(RingLayout, RingRowsIsWindowPlusDraftMinusOne) {
  EXPECT_EQ(rl::ring_rows(128, 1), 128);
  EXPECT_EQ(rl::ring_rows(125, 4), 128);
  EXPECT_EQ(rl::ring_rows(1, 3), 3);
}

TEST(RingLayout, TokenLocsHandCase) {
  const Ring g{.ring = 8, .win = 6, .n_slots = 4};
  std::vector<int64_t> slot(21, 2), pos(21), fin(21, 20), loc(21);
  for (int64_t p = 0; p <= 20; ++p) pos[size_t(p)] = p;
  EXPECT_EQ(rl::token_locs(slot, pos, {}, g, loc), 0);
  for (int64_t p = 0; p <= 20; ++p) EXPECT_EQ(loc[size_t(p)], 16 + p % 8) << "pos " << p;
  // With the chunk's final position 20 only positions 15..20 (the last win = 6) land in the ring.
  EXPECT_EQ(rl::token_locs(slot, pos, fin, g, loc), 0);
  const std::vector<int64_t> want = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                     -1, -1, -1, -1, 23, 16, 17, 18, 19, 20};
  EXPECT_TRUE(fx::bitwise_equal(loc, want, Shape{21}, {.name = "loc"}));
}

TEST(RingLayout, TokenLocsPaddingAndErrors) {
  const Ring g{.ring = 8, .win = 6, .n_slots = 4};
  //                              pad  bad  bad  ok  bad  ok (final_pos -1 masks nothing)
  const std::vector<int64_t> slot = {-1, -2, 4, 3, 1, 0};
  const std::vector<int64_t> pos = {-9, 0, 0, 9, -1, 2};
  const std::vector<int64_t> fin = {-9, 0, 0, 9, 5, -1};
  std::vector<int64_t> loc(6, 123);
  EXPECT_EQ(rl::token_locs(slot, pos, fin, g, loc), 3);
  EXPECT_TRUE(fx::bitwise_equal(loc, std::vector<int64_t>{-1, -1, -1, 25, -1, 2}, Shape{6}));
}

TEST(RingLayout, VerifyLocsHandCase) {
  const Ring g{.ring = 8, .win = 6, .n_slots = 4};
  const size_t V = 3;
  const std::vector<int64_t> slot = {0, 1, -1, 2, 3};
  const std::vector<int32_t> commit = {0, 3, 3, 5, -3};  // none, all, padding, clamps, none
  const std::vector<int64_t> pos = {5, 6, 7, 7, 8, 9, -4, -4, -4, 1, 2, 3, 0, 1, 2};
  std::vector<int64_t> loc(15, 123);
  EXPECT_EQ(rl::verify_locs(slot, pos, commit, V, g, loc), 0);
  const std::vector<int64_t> want = {-1, -1, -1, 15, 8, 9, -1, -1, -1, 17, 18, 19, -1, -1, -1};
  EXPECT_TRUE(fx::bitwise_equal(loc, want, Shape{5, V}, {.name = "loc"}));

  // A partial commit writes the first commit_len columns; bad slots count once per committed token.
  const std::vector<int64_t> slot2 = {1, 9};
  const std::vector<int32_t> commit2 = {2, 2};
  const std::vector<int64_t> pos2 = {3, 4, 5, 0, 1, 2};
  std::vector<int64_t> loc2(6);
  EXPECT_EQ(rl::verify_locs(slot2, pos2, commit2, V, g, loc2), 2);
  EXPECT_TRUE(fx::bitwise_equal(loc2, std::vector<int64_t>{11, 12, -1, -1, -1, -1}, Shape{2, V}));
}

TEST(RingLayout, WindowRowsHandCase) {
  const Ring g{.ring = 8, .win = 6, .n_slots = 4};
  const std::vector<int64_t> slot = {1, 3};
  const std::vector<int32_t> batch = {0, -1, 1, 1};
  const std::vector<int64_t> pos = {3, 1000, 10, 0};
  std::vector<int32_t> indptr(5, kUntouched), rows(4 * 6, kUntouched);
  EXPECT_EQ(rl::window_rows(batch, pos, slot, g, indptr, rows), 0);
  EXPECT_TRUE(fx::bitwise_equal(indptr, std::vector<int32_t>{0, 4, 4, 10, 11}, Shape{5}));
  // pos 3: positions 0..3 -> 8..11; pos 10 (wrapped): 5,6,7,8,9,10 -> 29,30,31,24,25,26; pos 0: 24.
  std::vector<int32_t> want = {8, 9, 10, 11, 29, 30, 31, 24, 25, 26, 24};
  want.resize(24, kUntouched);
  EXPECT_TRUE(fx::bitwise_equal(rows, want, Shape{24}, {.name = "rows"}));
}

TEST(RingLayout, WindowRowsErrorsGiveEmptyRanges) {
  const Ring g{.ring = 8, .win = 6, .n_slots = 2};
  const std::vector<int64_t> slot = {1, 5, -1};  // batch 1's slot is past n_slots, batch 2's is -1
  const std::vector<int32_t> batch = {3, -5, 1, 2, 0, 0};
  const std::vector<int64_t> pos = {1, 1, 1, 1, -1, 2};
  std::vector<int32_t> indptr(7), rows(36, kUntouched);
  EXPECT_EQ(rl::window_rows(batch, pos, slot, g, indptr, rows), 5);
  EXPECT_TRUE(fx::bitwise_equal(indptr, std::vector<int32_t>{0, 0, 0, 0, 0, 0, 3}, Shape{7}));
  std::vector<int32_t> want = {8, 9, 10};
  want.resize(36, kUntouched);
  EXPECT_TRUE(fx::bitwise_equal(rows, want, Shape{36}, {.name = "rows"}));
}

TEST(RingLayout, PrefillSlotsHandCase) {
  const std::vector<int64_t> req_slot = {5, 7, 9};
  const std::vector<int32_t> indptr = {0, 3, 3, 5};  // request 1 is empty; tokens 5, 6 are padding
  const std::vector<int64_t> pos = {10, 11, 12, 0, 1, 99, 99};
  std::vector<int64_t> slot(7), fin(7);
  EXPECT_EQ(rl::prefill_slots(req_slot, indptr, pos, slot, fin), 0);
  EXPECT_TRUE(fx::bitwise_equal(slot, std::vector<int64_t>{5, 5, 5, 9, 9, -1, -1}, Shape{7}));
  EXPECT_TRUE(fx::bitwise_equal(fin, std::vector<int64_t>{12, 12, 12, 1, 1, -1, -1}, Shape{7}));

  // A request whose last token lies past T is an error for each of its tokens.
  const std::vector<int32_t> past = {0, 2, 9};
  std::vector<int64_t> slot2(4), fin2(4);
  EXPECT_EQ(rl::prefill_slots(std::vector<int64_t>{5, 7}, past, std::vector<int64_t>{0, 1, 2, 3},
                              slot2, fin2),
            2);
  EXPECT_TRUE(fx::bitwise_equal(slot2, std::vector<int64_t>{5, 5, -1, -1}, Shape{4}));
  EXPECT_TRUE(fx::bitwise_equal(fin2, std::vector<int64_t>{1, 1, -1, -1}, Shape{4}));
}

TEST(RingLayout, RejectsBadGeometryAndSizes) {
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::vector<int64_t> one(1), none;
  EXPECT_THAT(message([] { rl::check_ring({.ring = 4, .win = 0, .n_slots = 1}); }),
              HasSubstr("win=0"));
  EXPECT_THAT(message([] { rl::check_ring({.ring = 4, .win = 5, .n_slots = 1}); }),
              HasSubstr("ring=4 must be >= win=5"));
  EXPECT_THAT(message([] { rl::check_ring({.ring = 4, .win = 4, .n_slots = -1}); }),
              HasSubstr("n_slots=-1"));
  EXPECT_THAT(message([] { rl::check_ring({.ring = 1 << 16, .win = 4, .n_slots = 1 << 16}); }),
              HasSubstr("exceed INT32_MAX"));
  const Ring g{.ring = 8, .win = 6, .n_slots = 4};
  EXPECT_THAT(message([&] { rl::token_locs(one, none, {}, g, one); }), HasSubstr("pos has 0"));
  EXPECT_THAT(message([&] {
                std::vector<int32_t> indptr(1);
                std::vector<int32_t> rows(5);
                rl::window_rows(std::vector<int32_t>{0}, one, one, g, indptr, rows);
              }),
              HasSubstr("indptr has 1 entries"));
  EXPECT_THAT(message([&] {
                std::vector<int32_t> indptr(2);
                std::vector<int32_t> rows(5);
                rl::window_rows(std::vector<int32_t>{0}, one, one, g, indptr, rows);
              }),
              HasSubstr("rows has 5 entries"));
}

// ---- invariants over whole write/read cycles --------------------------------------------------

// A pool of position tags: what the ring rows hold after the writes (-1 = never written).
struct TagPool {
  std::vector<int64_t> tag;
  explicit TagPool(const Ring& g) : tag(size_t(g.rows()), -1) {}
  // Writes every loc >= 0 and returns how many; fails if two tokens of one launch share a row.
  int64_t write(const std::vector<int64_t>& loc, const std::vector<int64_t>& pos) {
    std::set<int64_t> seen;
    int64_t n = 0;
    for (size_t t = 0; t < loc.size(); ++t) {
      if (loc[t] < 0) continue;
      EXPECT_TRUE(seen.insert(loc[t]).second) << "row " << loc[t] << " written twice in a launch";
      EXPECT_LT(loc[t], int64_t(tag.size()));
      tag[size_t(loc[t])] = pos[t];
      ++n;
    }
    return n;
  }
};

struct Cycle {
  int64_t win, draft, prefix;
  bool full_commit;
};

// Prefill `prefix` tokens in two chunks, write a verify step of `draft` tokens (all committed or
// none), then read the window of every verify token. Returns the number of read rows that do not
// hold the position they stand for (positions a commit-0 step never wrote excepted).
int64_t run_cycle(const Cycle& c, int64_t ring, fx::Rng& rng) {
  const Ring g{.ring = ring, .win = c.win, .n_slots = 3};
  const int64_t s = 1;
  TagPool pool(g);
  // Prefill in two chunks split at a random point: each chunk cuts to its own last win tokens.
  const int64_t split = c.prefix ? rng.range(0, c.prefix) : 0;
  for (auto [lo, hi] : {std::pair{int64_t(0), split}, std::pair{split, c.prefix}}) {
    const int64_t n = hi - lo;
    std::vector<int64_t> pos(size_t(n) + 2, 0);  // two graph-padding tokens at the end
    for (int64_t i = 0; i < n; ++i) pos[size_t(i)] = lo + i;
    std::vector<int64_t> slot(pos.size()), fin(pos.size()), loc(pos.size());
    EXPECT_EQ(rl::prefill_slots(std::vector<int64_t>{s}, std::vector<int32_t>{0, int32_t(n)}, pos,
                                slot, fin),
              0);
    EXPECT_EQ(rl::token_locs(slot, pos, fin, g, loc), 0);
    EXPECT_EQ(pool.write(loc, pos), std::min(n, c.win)) << "chunk [" << lo << ", " << hi << ")";
  }
  const size_t V = size_t(c.draft);
  std::vector<int64_t> vpos(V), vloc(V);
  for (size_t j = 0; j < V; ++j) vpos[j] = c.prefix + int64_t(j);
  const int32_t commit = c.full_commit ? int32_t(V) : 0;
  EXPECT_EQ(
      rl::verify_locs(std::vector<int64_t>{s}, vpos, std::vector<int32_t>{commit}, V, g, vloc), 0);
  EXPECT_EQ(pool.write(vloc, vpos), commit);

  std::vector<int32_t> batch(V, 0), indptr(V + 1), rows(V * size_t(c.win), kUntouched);
  EXPECT_EQ(rl::window_rows(batch, vpos, std::vector<int64_t>{s}, g, indptr, rows), 0);
  int64_t wrong = 0;
  for (size_t j = 0; j < V; ++j) {
    const int64_t n = indptr[j + 1] - indptr[j], q = vpos[j];
    EXPECT_EQ(n, std::min(q + 1, c.win)) << "token at " << q;
    for (int64_t i = 0; i < n; ++i) {
      const int32_t row = rows[size_t(indptr[j] + i)];
      const int64_t want = q - n + 1 + i;  // oldest first
      EXPECT_GE(row, s * ring);
      EXPECT_LT(row, (s + 1) * ring);
      if (!c.full_commit && want >= c.prefix) {
        EXPECT_NE(pool.tag[size_t(row)], want) << "an uncommitted position was written";
        continue;
      }
      wrong += pool.tag[size_t(row)] != want;
    }
  }
  for (size_t i = size_t(indptr[V]); i < rows.size(); ++i)
    EXPECT_EQ(rows[i], kUntouched) << "rows[" << i << "] past indptr[D]";
  return wrong;
}

TEST(RingLayout, EveryDecodeTokenReadsItsWholeWindow) {
  const uint64_t seed = fx::test_seed();
  fx::Rng rng(seed);
  const Cycle geometries[] = {{1, 1, 0, true},   {4, 1, 0, true},   {6, 3, 0, true},
                              {125, 4, 0, true}, {128, 1, 0, true}, {7, 5, 0, true}};
  for (Cycle c : geometries) {
    const int64_t ring = rl::ring_rows(c.win, c.draft);
    for (int64_t prefix : {int64_t(0), int64_t(1), c.win - 1, c.win, ring - 1, ring, ring + 1,
                           2 * ring + 3, int64_t(10), int64_t(127), int64_t(128), int64_t(255)}) {
      if (prefix < 0) continue;
      for (bool full : {true, false}) {
        c.prefix = prefix;
        c.full_commit = full;
        DSV4_CASE(seed, "win=" << c.win << " draft=" << c.draft << " ring=" << ring
                               << " prefix=" << prefix << " commit=" << (full ? "full" : "0"));
        EXPECT_EQ(run_cycle(c, ring, rng), 0);
      }
    }
  }
}

// The same cycle with a ring of only `win` rows loses the oldest rows of the window once a verify
// step writes more than one token: the invariant above is what ring = win + draft - 1 buys.
TEST(RingLayout, ARingOfOnlyWinRowsLosesTheWindow) {
  fx::Rng rng(fx::test_seed());
  EXPECT_GT(run_cycle({.win = 125, .draft = 4, .prefix = 255, .full_commit = true}, 125, rng), 0);
}

// A batched prefill chunk with ragged requests (0, 1, win, win+1, > ring tokens) and graph
// padding: the locs of the whole launch are distinct, and each request writes min(len, win) rows.
TEST(RingLayout, BatchedPrefillWritesDistinctRows) {
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, "B=12 ring=128 win=125");
  fx::Rng rng(seed);
  const Ring g{.ring = 128, .win = 125, .n_slots = 16};
  const std::vector<int32_t> lens = fx::ragged_lengths(rng, 12, 125, 400);
  const std::vector<int64_t> slots = [&] {
    auto d = fx::distinct_indices(rng, 12, 16);
    return std::vector<int64_t>(d.begin(), d.end());
  }();
  std::vector<int32_t> indptr = {0};
  std::vector<int64_t> pos, prefix(12);
  for (size_t b = 0; b < 12; ++b) {
    prefix[b] = rng.range(0, 300);
    for (int32_t i = 0; i < lens[b]; ++i) pos.push_back(prefix[b] + i);
    indptr.push_back(int32_t(pos.size()));
  }
  pos.resize(pos.size() + 9, 0);  // graph padding
  std::vector<int64_t> slot(pos.size()), fin(pos.size()), loc(pos.size());
  EXPECT_EQ(rl::prefill_slots(slots, indptr, pos, slot, fin), 0);
  EXPECT_EQ(rl::token_locs(slot, pos, fin, g, loc), 0);
  TagPool pool(g);
  int64_t want = 0;
  for (int32_t n : lens) want += std::min<int64_t>(n, g.win);
  EXPECT_EQ(pool.write(loc, pos), want);
  for (size_t t = size_t(indptr.back()); t < pos.size(); ++t) EXPECT_EQ(loc[t], -1);
}

}  // namespace
}  // namespace dsv4

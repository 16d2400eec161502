// ring_layout kernels against the reference through the kernel-case harness, bitwise on whole
// poisoned outputs: every launcher over hostile slots, positions and batch ids, swept over token
// counts and the geometry (window, draft count, ring size, positions up to 2^20, ragged requests,
// tokens before the first request), eager and graph; the ring-wrap cycle (prefill, verify, read)
// through kv_store into a real pool; graph replay with new inputs; determinism; argument checks.
#include "dsv4/kernels/ring_layout.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "dsv4/cases/ring_layout.hpp"
#include "dsv4/fixtures/compare.hpp"
#include "dsv4/fixtures/device_buffer.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/fixtures/gpu_test.hpp"
#include "dsv4/fixtures/launcher_args.hpp"
#include "dsv4/kernels/kv_store.hpp"
#include "dsv4/ref/kv_store.hpp"
#include "dsv4/ref/ring_layout.hpp"

namespace dsv4 {
namespace {

namespace kr = kernels::ring_layout;
namespace rr = ref::ring_layout;
using fx::DeviceBuffer;
using fx::Shape;
using ::testing::HasSubstr;

// DSpark's geometry: window 125, 4 draft tokens, ring 128.
constexpr kr::Ring kRing{.ring = 128, .win = 125, .n_slots = 64};
constexpr rr::Ring kRefRing{.ring = 128, .win = 125, .n_slots = 64};

// ---- every launcher against the reference, through the kernel-case harness -----------------

using SweepParam = fx::Sweep<cases::RingLayoutShape>;

class RingLayoutSweep : public fx::GpuTestWithParam<SweepParam> {};

TEST_P(RingLayoutSweep, EveryLauncherMatchesReference) {
  fx::expect_case(cases::RingLayoutCase(GetParam().shape), stream(), {.launch = GetParam().launch});
}

DSV4_CASE_SWEEP_AS(Sizes, RingLayoutSweep, cases::ring_layout_sizes_sweep());
DSV4_CASE_SWEEP_AS(Geometry, RingLayoutSweep, cases::ring_layout_geometry_sweep());

class RingLayout : public fx::GpuTest {};

TEST_F(RingLayout, GraphReplayMatchesEagerAndIsDeterministic) {
  const uint64_t seed = fx::test_seed();
  const cases::RingLayoutCase c({.n = 2048});
  DSV4_CASE(seed, c.name());
  EXPECT_TRUE(fx::check_graph_replay(c, seed, stream()));
  EXPECT_TRUE(fx::check_deterministic(c, seed, stream(), 20));
}

// Tokens before the first request (indptr[0] > 0) and after the last get -1 / -1, and count
// nothing; every request's tokens get its slot and its last position.
TEST_F(RingLayout, TokensOutsideEveryRequestGetNoSlot) {
  const uint64_t seed = fx::test_seed();
  const cases::RingLayoutCase c({.n = 300, .first_offset = 100, .max_request = 20});
  DSV4_CASE(seed, c.name());
  fx::Rng rng(seed);
  fx::Tensors in = c.draw(rng);
  auto ip = fx::values_of<int32_t>(in.at("prefill_indptr"));
  ip[ip.size() - 1] = std::min<int32_t>(ip[ip.size() - 1], 300);  // no request past T
  fx::CaseRun run;
  ASSERT_TRUE(fx::check_case(c, in, seed, stream(), {}, &run));
  ASSERT_EQ(ip[0], 100);
  const auto slot = run.got.at("token_slot").values<int64_t>();
  for (int32_t t = 0; t < ip[0]; ++t) EXPECT_EQ(slot[size_t(t)], -1) << "token " << t;
}

TEST_F(RingLayout, NoDecodeTokensStillWritesTheFirstOffset) {
  fx::WatchScope watch({"ring_layout", "window_rows with no tokens", "D=0", std::nullopt});
  DeviceBuffer<int32_t> indptr(1, "indptr");
  fx::count_launch();
  kr::window_rows(nullptr, nullptr, 0, nullptr, 0, kRing, indptr.data(), nullptr, nullptr,
                  stream());
  EXPECT_EQ(indptr.download(stream())[0], 0);
  EXPECT_TRUE(indptr.guards_intact());
}

// The ring-wrap cycle on the device: four requests with prefixes 10, 127, 128 and 255 are
// prefilled into their rings (prefill_slots, token_locs, kv_store::scatter_rows), a verify step of
// 4 tokens commits all or none of them, and every verify token's window is read back (window_rows)
// and gathered from the pool. Every stage is compared bitwise with the reference; for committed
// requests each gathered row is the KV row of exactly the position it stands for.
TEST_F(RingLayout, RingWrapCycleThroughThePool) {
  const uint64_t seed = fx::test_seed();
  const int64_t prefixes[] = {10, 127, 128, 255};
  const size_t B = 4, V = 4, W = 64;
  for (int variant = 0; variant < 2; ++variant) {
    DSV4_CASE(seed, "prefixes 10,127,128,255 ring=128 win=125 V=4 commit variant " << variant);
    fx::WatchScope watch({"ring_layout",
                          "ring-wrap cycle, commit variant " + std::to_string(variant),
                          "B=4 V=4 W=64 prefixes 10,127,128,255", seed + variant});
    fx::Rng rng(seed + variant);
    const std::vector<int64_t> slots = {5, 0, 63, 17};
    std::vector<int32_t> commit(B);  // variant 0: full, 0, full, 0; variant 1: the other way
    for (size_t b = 0; b < B; ++b) commit[b] = (b + variant) % 2 ? 0 : int32_t(V);

    // KV rows by (request, position): row index b * 512 + position.
    const size_t kv_rows = B * 512;
    DeviceBuffer<bf16> kv(fx::uniform_bf16(rng, kv_rows * W), "kv");
    DeviceBuffer<bf16> pool(size_t(kRing.n_slots * kRing.ring) * W, "pool");
    std::vector<bf16> pool_want(pool.size(), pool.poison_value());
    DeviceBuffer<int64_t> errors(1, "errors");
    kernels::reset_errors(errors.data(), stream());
    auto store = [&](const std::vector<int64_t>& kv_row, const DeviceBuffer<int64_t>& loc) {
      // gather the step's kv rows on the host, scatter them on the device and in the reference
      std::vector<bf16> step(kv_row.size() * W);
      for (size_t t = 0; t < kv_row.size(); ++t)
        std::memcpy(&step[t * W], &kv.host()[size_t(kv_row[t]) * W], W * sizeof(bf16));
      DeviceBuffer<bf16> step_dev(step, "step kv");
      fx::count_launch();
      kernels::kv_store::scatter_rows(step_dev.data(), loc.data(), int64_t(kv_row.size()),
                                      pool.data(), kRing.n_slots * kRing.ring,
                                      {.width = int64_t(W)}, errors.data(), stream());
      ref::kv_store::scatter_rows(step, loc.host(), pool_want, size_t(kRing.n_slots * kRing.ring),
                                  {.width = W});
      gpu::synchronize(stream());
    };

    // Prefill: one chunk with every request's prefix, then graph padding.
    std::vector<int32_t> ip = {0};
    std::vector<int64_t> ppos, prow;
    for (size_t b = 0; b < B; ++b) {
      for (int64_t p = 0; p < prefixes[b]; ++p)
        ppos.push_back(p), prow.push_back(int64_t(b) * 512 + p);
      ip.push_back(int32_t(ppos.size()));
    }
    for (int i = 0; i < 6; ++i) ppos.push_back(0), prow.push_back(0);
    const size_t T = ppos.size();
    DeviceBuffer<int64_t> req_slot(slots, "req_slot"), pos(ppos, "pos");
    DeviceBuffer<int32_t> indptr_in(ip, "indptr");
    DeviceBuffer<int64_t> tslot(T, "token_slot"), tfin(T, "final_pos"), loc(T, "loc");
    fx::count_launch();
    kr::prefill_slots(req_slot.data(), indptr_in.data(), int64_t(B), pos.data(), int64_t(T),
                      tslot.data(), tfin.data(), errors.data(), stream());
    fx::count_launch();
    kr::token_locs(tslot.data(), pos.data(), tfin.data(), int64_t(T), kRing, loc.data(),
                   errors.data(), stream());
    std::vector<int64_t> slot_want(T), fin_want(T), loc_want(T);
    rr::prefill_slots(slots, ip, ppos, slot_want, fin_want);
    rr::token_locs(slot_want, ppos, fin_want, kRefRing, loc_want);
    EXPECT_TRUE(fx::bitwise_equal(tslot.download(stream()), slot_want, Shape{T}, {.name = "slot"}));
    EXPECT_TRUE(fx::bitwise_equal(tfin.download(stream()), fin_want, Shape{T}, {.name = "final"}));
    EXPECT_TRUE(fx::bitwise_equal(loc.download(stream()), loc_want, Shape{T}, {.name = "loc"}));
    store(prow, loc);

    // Verify: positions prefix .. prefix+3 of each request.
    std::vector<int64_t> vpos(B * V), vrow(B * V);
    for (size_t b = 0; b < B; ++b)
      for (size_t j = 0; j < V; ++j)
        vpos[b * V + j] = prefixes[b] + int64_t(j),
                     vrow[b * V + j] = int64_t(b * 512) + vpos[b * V + j];
    DeviceBuffer<int64_t> bslot(slots, "slot"), vpos_dev(vpos, "verify pos"), vloc(B * V, "vloc");
    DeviceBuffer<int32_t> commit_dev(commit, "commit_len");
    fx::count_launch();
    kr::verify_locs(bslot.data(), vpos_dev.data(), commit_dev.data(), int64_t(B), int64_t(V), kRing,
                    vloc.data(), errors.data(), stream());
    std::vector<int64_t> vloc_want(B * V);
    rr::verify_locs(slots, vpos, commit, V, kRefRing, vloc_want);
    EXPECT_TRUE(
        fx::bitwise_equal(vloc.download(stream()), vloc_want, Shape{B, V}, {.name = "vloc"}));
    store(vrow, vloc);

    // Read: every verify token, plus two padding tokens.
    std::vector<int32_t> batch;
    std::vector<int64_t> rpos;
    for (size_t t = 0; t < B * V; ++t) batch.push_back(int32_t(t / V)), rpos.push_back(vpos[t]);
    batch.insert(batch.end(), {-1, -1}), rpos.insert(rpos.end(), {0, 0});
    const size_t D = batch.size();
    DeviceBuffer<int32_t> batch_dev(batch, "batch_id"), indptr(D + 1, "indptr"),
        rows(D * size_t(kRing.win), "rows");
    DeviceBuffer<int64_t> rpos_dev(rpos, "read pos");
    fx::count_launch();
    kr::window_rows(batch_dev.data(), rpos_dev.data(), int64_t(D), bslot.data(), int64_t(B), kRing,
                    indptr.data(), rows.data(), errors.data(), stream());
    std::vector<int32_t> indptr_want(D + 1), rows_want(rows.size(), rows.poison_value());
    rr::window_rows(batch, rpos, slots, kRefRing, indptr_want, rows_want);
    EXPECT_TRUE(fx::bitwise_equal(indptr.download(stream()), indptr_want, Shape{D + 1},
                                  {.name = "indptr"}));
    EXPECT_TRUE(fx::bitwise_equal(rows.download(stream()), rows_want, Shape{rows.size()},
                                  {.name = "rows"}));
    EXPECT_TRUE(fx::bitwise_equal(pool.download(stream()), pool_want,
                                  Shape{size_t(kRing.n_slots * kRing.ring), W}, {.name = "pool"}));
    EXPECT_EQ(kernels::read_errors(errors.data(), stream()), 0);

    // Committed requests read exactly their window's KV rows, oldest first.
    for (size_t t = 0; t < B * V; ++t) {
      const size_t b = t / V;
      if (commit[b] == 0) continue;
      const int64_t q = vpos[t], n = indptr.host()[t + 1] - indptr.host()[t];
      ASSERT_EQ(n, std::min<int64_t>(q + 1, kRing.win));
      for (int64_t i = 0; i < n; ++i) {
        const int32_t r = rows.host()[size_t(indptr.host()[t] + i)];
        const int64_t want_pos = q - n + 1 + i;
        EXPECT_EQ(std::memcmp(&pool.host()[size_t(r) * W],
                              &kv.host()[(b * 512 + size_t(want_pos)) * W], W * sizeof(bf16)),
                  0)
            << "request " << b << " token at " << q << ": row " << r << " should hold position "
            << want_pos;
      }
    }
    for (auto* b : {&pool, &kv}) EXPECT_TRUE(b->guards_intact());
    for (auto* b : {&indptr, &rows}) EXPECT_TRUE(b->guards_intact());
  }
}

// ---- launcher argument checks (no device needed) ------------------------------------------

using fx::launch_error;

TEST(RingLayoutLauncher, EmptyBatchesLaunchNothing) {
  EXPECT_NO_THROW(kr::token_locs(nullptr, nullptr, nullptr, 0, kRing, nullptr, nullptr, nullptr));
  EXPECT_NO_THROW(
      kr::verify_locs(nullptr, nullptr, nullptr, 0, 4, kRing, nullptr, nullptr, nullptr));
  EXPECT_NO_THROW(
      kr::verify_locs(nullptr, nullptr, nullptr, 8, 0, kRing, nullptr, nullptr, nullptr));
  EXPECT_NO_THROW(
      kr::prefill_slots(nullptr, nullptr, 3, nullptr, 0, nullptr, nullptr, nullptr, nullptr));
}

TEST(RingLayoutLauncher, BadArgumentsNameTheField) {
  auto* p64 = fx::fake<int64_t>();
  auto* p32 = fx::fake<int32_t>();
  auto locs = [&](kr::Ring g, int64_t T = 4, int64_t* loc = fx::fake<int64_t>()) {
    return launch_error([&] { kr::token_locs(p64, p64, nullptr, T, g, loc, p64, nullptr); });
  };
  EXPECT_THAT(locs({.ring = 8, .win = 0, .n_slots = 1}), HasSubstr("win=0"));
  EXPECT_THAT(locs({.ring = 4, .win = 6, .n_slots = 1}), HasSubstr("ring=4 must be >= win=6"));
  EXPECT_THAT(locs({.ring = 8, .win = 6, .n_slots = -3}), HasSubstr("n_slots=-3"));
  EXPECT_THAT(locs({.ring = 1 << 20, .win = 6, .n_slots = 1 << 12}), HasSubstr("exceed INT32_MAX"));
  EXPECT_THAT(locs(kRing, -2), HasSubstr("T=-2"));
  EXPECT_THAT(locs(kRing, 4, nullptr), HasSubstr("loc is null"));
  EXPECT_THAT(launch_error([&] {
                kr::verify_locs(p64, p64, p32, int64_t(1) << 20, 1 << 12, kRing, p64, p64, nullptr);
              }),
              HasSubstr("exceeds INT32_MAX"));
  EXPECT_THAT(
      launch_error([&] { kr::verify_locs(p64, p64, nullptr, 2, 4, kRing, p64, p64, nullptr); }),
      HasSubstr("commit_len is null"));
  EXPECT_THAT(launch_error([&] {
                kr::window_rows(p32, p64, int64_t(1) << 25, p64, 2, kRing, p32, p32, p64, nullptr);
              }),
              HasSubstr("x win=125 rows exceed INT32_MAX"));
  EXPECT_THAT(launch_error(
                  [&] { kr::window_rows(p32, p64, 4, p64, 2, kRing, p32, nullptr, p64, nullptr); }),
              HasSubstr("rows is null"));
  EXPECT_THAT(
      launch_error([&] { kr::prefill_slots(p64, p32, -1, p64, 4, p64, p64, p64, nullptr); }),
      HasSubstr("B=-1"));
}

}  // namespace
}  // namespace dsv4

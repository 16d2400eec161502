// ring_layout kernels against the reference, bitwise on whole poisoned outputs: a shape sweep of
// every launcher over hostile slots, positions and batch ids; the ring-wrap cycle (prefill, verify,
// read) through kv_store into a real pool; graph replay; determinism; argument checks.
#include "dsv4/kernels/ring_layout.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "dsv4/fixtures/compare.hpp"
#include "dsv4/fixtures/device_buffer.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/fixtures/gpu_test.hpp"
#include "dsv4/fixtures/replay.hpp"
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

// Slots: mostly valid, some padding (-1), some hostile (other negatives, n_slots, huge).
std::vector<int64_t> hostile_slots(fx::Rng& rng, size_t n) {
  std::vector<int64_t> v = fx::hostile_indices(rng, n, kRing.n_slots,
                                               {.valid = 0.75,
                                                .minus_one = 0.1,
                                                .negative = 0.05,
                                                .out_of_range = 0.1,
                                                .unique_valid = false})
                               .idx;
  return v;
}

// Positions: mostly in [0, 4 rings), a few negative.
std::vector<int64_t> hostile_positions(fx::Rng& rng, size_t n) {
  std::vector<int64_t> v(n);
  for (auto& p : v) p = rng.uniform() < 0.05 ? -rng.range(1, 1000) : rng.range(0, 4 * kRing.ring);
  return v;
}

std::vector<uint8_t> bytes_of(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return std::vector<uint8_t>(b, b + n);
}

// Every launcher of the family on one set of device buffers, with the reference's outputs.
struct LayoutCase {
  size_t n;  // tokens (T for prefill and token locs, B*V for verify, D for the read side)
  size_t B, V;
  DeviceBuffer<int64_t> slot, pos, vpos, fin, req_slot, bslot, loc, vloc, token_slot, token_fin,
      errors;
  DeviceBuffer<int32_t> commit, batch, indptr_in, indptr, rows;
  // reference outputs, each starting from its buffer's poison
  std::vector<int64_t> loc_want, vloc_want, slot_want, fin_want;
  std::vector<int32_t> indptr_want, rows_want;
  int64_t errors_want = 0;

  LayoutCase(size_t n_, size_t v_)
      : n(n_),
        B(std::max<size_t>(1, n_ / v_)),
        V(v_),
        slot(n_, "slot"),
        pos(n_, "pos"),
        vpos(B * v_, "verify pos"),
        fin(n_, "final_pos"),
        req_slot(B, "req_slot"),
        bslot(B, "batch slot"),
        loc(n_, "loc"),
        vloc(B * v_, "verify loc"),
        token_slot(n_, "token_slot"),
        token_fin(n_, "token final_pos"),
        errors(1, "errors"),
        commit(B, "commit_len"),
        batch(n_, "batch_id"),
        indptr_in(B + 1, "prefill indptr"),
        indptr(n_ + 1, "indptr"),
        rows(n_ * size_t(kRing.win), "rows") {}

  void draw(fx::Rng& rng) {
    slot.upload(hostile_slots(rng, n));
    pos.upload(hostile_positions(rng, n));
    vpos.upload(hostile_positions(rng, B * V));
    std::vector<int64_t> f(n);  // final positions near the token's, or none (-1)
    for (size_t t = 0; t < n; ++t)
      f[t] = rng.uniform() < 0.1 ? -1 : pos.host()[t] + rng.range(0, 2 * kRing.ring);
    fin.upload(f);
    req_slot.upload(hostile_slots(rng, B));
    bslot.upload(hostile_slots(rng, B));
    std::vector<int32_t> c(B);  // commit lengths: none, all, some, and out of [0, V]
    for (auto& x : c) x = int32_t(rng.range(-2, int64_t(V) + 2));
    commit.upload(c);
    std::vector<int32_t> b(n);  // batch ids: mostly valid, padding, hostile
    for (auto& x : b) {
      const double u = rng.uniform();
      x = u < 0.8    ? int32_t(rng.range(0, int64_t(B) - 1))
          : u < 0.9  ? -1
          : u < 0.95 ? -7
                     : int32_t(B);
    }
    batch.upload(b);
    std::vector<int32_t> ip = {0};  // ragged requests, graph padding after; sometimes past T
    for (size_t i = 0; i < B; ++i)
      ip.push_back(
          std::min<int32_t>(int32_t(n), ip.back() + int32_t(rng.range(0, 2 * int64_t(V)))));
    if (n > 0 && rng.uniform() < 0.5) ip.back() = int32_t(n) + 5;
    indptr_in.upload(ip);
  }
  void reset(gpu::Stream s) {
    for (auto* b : {&loc, &vloc, &token_slot, &token_fin}) b->poison(s);
    for (auto* b : {&indptr, &rows}) b->poison(s);
    kernels::reset_errors(errors.data(), s);
  }
  void enqueue(gpu::Stream s) {
    kr::token_locs(slot.data(), pos.data(), fin.data(), int64_t(n), kRing, loc.data(),
                   errors.data(), s);
    kr::verify_locs(bslot.data(), vpos.data(), commit.data(), int64_t(B), int64_t(V), kRing,
                    vloc.data(), errors.data(), s);
    kr::window_rows(batch.data(), pos.data(), int64_t(n), bslot.data(), int64_t(B), kRing,
                    indptr.data(), rows.data(), errors.data(), s);
    kr::prefill_slots(req_slot.data(), indptr_in.data(), int64_t(B), pos.data(), int64_t(n),
                      token_slot.data(), token_fin.data(), errors.data(), s);
  }
  void reference() {
    loc_want.assign(n, loc.poison_value());
    vloc_want.assign(B * V, vloc.poison_value());
    slot_want.assign(n, token_slot.poison_value());
    fin_want.assign(n, token_fin.poison_value());
    indptr_want.assign(n + 1, indptr.poison_value());
    rows_want.assign(rows.size(), rows.poison_value());
    errors_want = rr::token_locs(slot.host(), pos.host(), fin.host(), kRefRing, loc_want);
    errors_want +=
        rr::verify_locs(bslot.host(), vpos.host(), commit.host(), V, kRefRing, vloc_want);
    errors_want +=
        rr::window_rows(batch.host(), pos.host(), bslot.host(), kRefRing, indptr_want, rows_want);
    errors_want +=
        rr::prefill_slots(req_slot.host(), indptr_in.host(), pos.host(), slot_want, fin_want);
  }
  void check(gpu::Stream s) {
    EXPECT_TRUE(fx::bitwise_equal(loc.download(s), loc_want, Shape{n}, {.name = "token loc"}));
    EXPECT_TRUE(
        fx::bitwise_equal(vloc.download(s), vloc_want, Shape{B, V}, {.name = "verify loc"}));
    EXPECT_TRUE(
        fx::bitwise_equal(indptr.download(s), indptr_want, Shape{n + 1}, {.name = "indptr"}));
    EXPECT_TRUE(
        fx::bitwise_equal(rows.download(s), rows_want, Shape{rows.size()}, {.name = "rows"}));
    EXPECT_TRUE(
        fx::bitwise_equal(token_slot.download(s), slot_want, Shape{n}, {.name = "token_slot"}));
    EXPECT_TRUE(
        fx::bitwise_equal(token_fin.download(s), fin_want, Shape{n}, {.name = "token final_pos"}));
    EXPECT_EQ(kernels::read_errors(errors.data(), s), errors_want) << "error counter";
    for (auto* b : {&slot, &pos, &vpos, &fin, &req_slot, &bslot, &loc, &vloc, &token_slot,
                    &token_fin, &errors})
      EXPECT_TRUE(b->guards_intact());
    for (auto* b : {&commit, &batch, &indptr_in, &indptr, &rows}) EXPECT_TRUE(b->guards_intact());
  }
  std::vector<uint8_t> outputs(gpu::Stream s) {
    std::vector<uint8_t> out;
    auto add = [&](auto& buf) {
      buf.download(s);
      const auto b = bytes_of(buf.host().data(), buf.bytes());
      out.insert(out.end(), b.begin(), b.end());
    };
    add(loc), add(vloc), add(token_slot), add(token_fin), add(indptr), add(rows);
    const int64_t e = kernels::read_errors(errors.data(), s);
    const auto eb = bytes_of(&e, sizeof e);
    out.insert(out.end(), eb.begin(), eb.end());
    return out;
  }
};

class RingLayoutSweep : public fx::GpuTestWithParam<int64_t> {};

TEST_P(RingLayoutSweep, EveryLauncherMatchesReference) {
  const int64_t n = GetParam();
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, "tokens=" << n << " V=4 ring=128 win=125");
  fx::Rng rng(seed);
  LayoutCase c(size_t(n), 4);
  c.draw(rng);
  c.reset(stream());
  c.enqueue(stream());
  c.reference();
  c.check(stream());
}

INSTANTIATE_TEST_SUITE_P(Shapes, RingLayoutSweep,
                         ::testing::Values<int64_t>(0, 1, 7, 64, 4096, 65536),
                         [](const auto& i) { return "N" + std::to_string(i.param); });

class RingLayout : public fx::GpuTest {};

TEST_F(RingLayout, GraphReplayMatchesEagerAndIsDeterministic) {
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, "tokens=2048 V=4");
  fx::Rng rng(seed);
  LayoutCase c(2048, 4);
  fx::LaunchCase lc;
  lc.write_inputs = [&](int, gpu::Stream) { c.draw(rng); };
  lc.reset_outputs = [&](gpu::Stream s) { c.reset(s); };
  lc.launch = [&](gpu::Stream s) { c.enqueue(s); };
  lc.read_outputs = [&](gpu::Stream s) { return c.outputs(s); };
  EXPECT_TRUE(fx::graph_replay_matches_eager(lc, stream()));
  EXPECT_TRUE(fx::deterministic(lc, stream(), 20));
}

TEST_F(RingLayout, NoDecodeTokensStillWritesTheFirstOffset) {
  DeviceBuffer<int32_t> indptr(1, "indptr");
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
    kr::prefill_slots(req_slot.data(), indptr_in.data(), int64_t(B), pos.data(), int64_t(T),
                      tslot.data(), tfin.data(), errors.data(), stream());
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

std::string launch_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no invalid_argument";
}

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
  auto* p64 = reinterpret_cast<int64_t*>(uintptr_t(4096));
  auto* p32 = reinterpret_cast<int32_t*>(uintptr_t(4096));
  auto locs = [&](kr::Ring g, int64_t T = 4, int64_t* loc = reinterpret_cast<int64_t*>(4096)) {
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

// ring_layout kernels against the reference through the kernel-case harness, bitwise on whole
// poisoned outputs: every launcher over hostile slots, positions and batch ids, swept over token
// counts and the geometry (window, draft count, ring size, positions up to 2^20, ragged requests,
// tokens before the first request), eager and graph, window_rows by every fill variant at the
// fill's edges (a tile of invalid tokens only, rows at every word offset); the ring-wrap cycle
// (prefill, verify, read) through kv_store into a real pool; graph replay with new inputs;
// determinism; argument checks.
#include "dsv4/kernels/ring_layout.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "dsv4/cases/kv_store.hpp"
#include "dsv4/cases/ring_layout.hpp"
#include "dsv4/fixtures/device_buffer.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/fixtures/gpu_test.hpp"
#include "dsv4/fixtures/launcher_args.hpp"
#include "dsv4/ref/ring_layout.hpp"

namespace dsv4 {
namespace {

namespace kr = kernels::ring_layout;
namespace rr = ref::ring_layout;
namespace st = fx::st;
using ::testing::HasSubstr;

// DSpark's geometry: window 125, 4 draft tokens, ring 128.
constexpr kr::Ring kRing{.ring = 128, .win = 125, .n_slots = 64};

// ---- every launcher against the reference, through the kernel-case harness -----------------

using SweepParam = fx::Sweep<cases::RingLayoutShape>;

class RingLayoutSweep : public fx::GpuTestWithParam<SweepParam> {};

TEST_P(RingLayoutSweep, EveryLauncherMatchesReference) {
  fx::expect_case(cases::RingLayoutCase(GetParam().shape), stream(), {.launch = GetParam().launch});
}

DSV4_CASE_SWEEP_AS(Sizes, RingLayoutSweep, cases::ring_layout_sizes_sweep());
DSV4_CASE_SWEEP_AS(Geometry, RingLayoutSweep, cases::ring_layout_geometry_sweep());
DSV4_CASE_SWEEP_AS(Fill, RingLayoutSweep, cases::ring_layout_fill_sweep());

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

// The geometry inputs of a ring_layout case.
fx::Tensors ring_inputs(const kr::Ring& g) {
  return {{"ring", st::Tensor::scalar<int64_t>(g.ring)},
          {"win", st::Tensor::scalar<int64_t>(g.win)},
          {"n_slots", st::Tensor::scalar<int64_t>(g.n_slots)}};
}

// One step of a hand-built sequence through the harness: the case of `in` (an adapter built from
// its inputs) checked against its reference (every output bit for bit, the canaries, no error
// counted); its outputs.
template <class Case>
fx::Tensors checked_step(const fx::Tensors& in, uint64_t seed, gpu::Stream s,
                         const std::string& step) {
  const Case c(in);
  fx::CaseRun run;
  EXPECT_TRUE(fx::check_case(c, in, seed, s, {}, &run)) << step;
  EXPECT_EQ(run.got.at("errors").item<int64_t>(), 0) << step;
  return run.got;
}

TEST_F(RingLayout, NoDecodeTokensStillWritesTheFirstOffset) {
  fx::Tensors in = ring_inputs(kRing);
  in["batch_id"] = st::Tensor::of<int32_t>({0}, {});
  in["pos"] = st::Tensor::of<int64_t>({0}, {});
  in["batch_slot"] = st::Tensor::of<int64_t>({0}, {});
  const fx::Tensors got =
      checked_step<cases::RingLayoutCase>(in, fx::test_seed(), stream(), "window_rows, D=0");
  EXPECT_EQ(got.at("indptr").values<int32_t>(), std::vector<int32_t>{0});
}

// window_rows' decode inputs for D tokens over B slots at positions below max_pos, tile 1
// (tokens 256..511) all invalid or padding: batch ids past B, -7, -1 and negative positions. The
// number of invalid tokens (the errors each fill must count, once each) in *invalid.
fx::Tensors tile_of_invalid_tokens(fx::Rng& rng, int64_t D, int64_t B, int64_t max_pos,
                                   int64_t* invalid) {
  std::vector<int32_t> batch(static_cast<size_t>(D));
  std::vector<int64_t> pos(static_cast<size_t>(D)), slot(static_cast<size_t>(B));
  for (auto& s : slot) s = rng.range(0, kRing.n_slots - 1);
  *invalid = 0;
  for (int64_t d = 0; d < D; ++d) {
    batch[size_t(d)] = int32_t(rng.range(0, B - 1));
    pos[size_t(d)] = rng.range(0, max_pos);
    if (d < 256 || d >= 512) continue;
    const int64_t kind = d % 4;  // past B, -7, padding (not an error), a negative position
    if (kind == 0) batch[size_t(d)] = int32_t(B);
    if (kind == 1) batch[size_t(d)] = -7;
    if (kind == 2) batch[size_t(d)] = -1;
    if (kind == 3) pos[size_t(d)] = -3;
    *invalid += kind != 2;
  }
  fx::Tensors in = ring_inputs(kRing);
  in["batch_id"] = st::Tensor::of<int32_t>(batch);
  in["pos"] = st::Tensor::of<int64_t>(pos);
  in["batch_slot"] = st::Tensor::of<int64_t>(slot);
  return in;
}

// A tile whose tokens read no row (its range empty, its offset that of the tile after it), with
// tiles of short positions around it: every fill gives the reference's bytes and counts each
// invalid token once.
TEST_F(RingLayout, TileOfInvalidTokensByEveryFill) {
  const uint64_t seed = fx::test_seed();
  for (int variant = 0; variant < kr::kWindowVariants; ++variant) {
    DSV4_CASE(seed, "D=1000, tokens 256..511 invalid or padding, variant " << variant);
    fx::Rng rng(seed);
    int64_t invalid = 0;
    fx::Tensors in = tile_of_invalid_tokens(rng, 1000, 37, 6, &invalid);
    in["variant"] = st::Tensor::scalar<int32_t>(variant);
    const cases::RingLayoutCase c(in);
    ASSERT_EQ(c.shape().variant, variant);
    fx::CaseRun run;
    EXPECT_TRUE(fx::check_case(c, in, seed, stream(), {}, &run));
    EXPECT_EQ(run.got.at("errors").item<int64_t>(), invalid);
    const auto indptr = run.got.at("indptr").values<int32_t>();
    EXPECT_EQ(indptr[256], indptr[512]) << "the invalid tile reads no row";
  }
}

// The rows output at word offsets 0..3 from a 16-byte boundary (the launcher takes any 4-byte
// aligned pointer): by every fill, the reference's indptr and rows, the words before the output
// and past indptr[D] untouched.
TEST_F(RingLayout, RowsAtEveryWordOffsetByEveryFill) {
  const uint64_t seed = fx::test_seed();
  const rr::Ring g{.ring = kRing.ring, .win = kRing.win, .n_slots = kRing.n_slots};
  for (int variant = 0; variant < kr::kWindowVariants; ++variant)
    for (int64_t shift = 0; shift < 4; ++shift) {
      DSV4_CASE(seed, "D=777, rows + " << shift << " words, variant " << variant);
      fx::Rng rng(seed + uint64_t(shift));
      int64_t invalid = 0;
      const fx::Tensors in = tile_of_invalid_tokens(rng, 777, 50, 300, &invalid);
      const auto batch = in.at("batch_id").values<int32_t>();
      const auto pos = in.at("pos").values<int64_t>();
      const auto slot = in.at("batch_slot").values<int64_t>();
      const size_t D = batch.size(), cap = D * size_t(g.win);
      fx::DeviceBuffer<int32_t> d_batch(batch, "batch_id");
      fx::DeviceBuffer<int64_t> d_pos(pos, "pos"), d_slot(slot, "batch_slot");
      fx::DeviceBuffer<int32_t> d_indptr(D + 1, "indptr"), d_rows(cap + 4, "rows");
      fx::DeviceBuffer<int64_t> d_errors(std::vector<int64_t>{0}, "errors");
      kr::window_rows(d_batch.data(), d_pos.data(), int64_t(D), d_slot.data(), int64_t(slot.size()),
                      kRing, d_indptr.data(), d_rows.data() + shift, d_errors.data(), stream(),
                      {.variant = variant});
      std::vector<int32_t> want_indptr(D + 1), want_rows(cap + 4, d_rows.poison_value());
      const int64_t want_errors =
          rr::window_rows(batch, pos, slot, g, want_indptr,
                          std::span<int32_t>(want_rows).subspan(size_t(shift), cap));
      EXPECT_EQ(d_indptr.download(stream()), want_indptr);
      EXPECT_EQ(d_rows.download(stream()), want_rows);
      EXPECT_EQ(d_errors.download(stream())[0], want_errors);
      EXPECT_EQ(want_errors, invalid);
      // The launch's pointers are raw (the shifted rows), so every buffer's canaries by name.
      EXPECT_TRUE(d_rows.guards_intact());
      EXPECT_TRUE(d_indptr.guards_intact());
      EXPECT_TRUE(d_errors.guards_intact());
      EXPECT_TRUE(d_batch.guards_intact());
      EXPECT_TRUE(d_pos.guards_intact());
      EXPECT_TRUE(d_slot.guards_intact());
    }
}

// The ring-wrap cycle on the device: four requests with prefixes 10, 127, 128 and 255 are
// prefilled into their rings (prefill_slots, token_locs, kv_store's row scatter), a verify step of
// 4 tokens commits all or none of them, and every verify token's window is read back (window_rows)
// and gathered from the pool. Each step runs through the harness on the outputs of the one before
// (the pool carried from store to store), bitwise against its reference; for committed requests
// each gathered row is the KV row of exactly the position it stands for.
TEST_F(RingLayout, RingWrapCycleThroughThePool) {
  const uint64_t seed = fx::test_seed();
  const int64_t prefixes[] = {10, 127, 128, 255};
  const size_t B = 4, V = 4, W = 64;
  const uint64_t pool_rows = uint64_t(kRing.n_slots * kRing.ring);
  for (int variant = 0; variant < 2; ++variant) {
    DSV4_CASE(seed, "prefixes 10,127,128,255 ring=128 win=125 V=4 commit variant " << variant);
    fx::Rng rng(seed + variant);
    const std::vector<int64_t> slots = {5, 0, 63, 17};
    std::vector<int32_t> commit(B);  // variant 0: full, 0, full, 0; variant 1: the other way
    for (size_t b = 0; b < B; ++b) commit[b] = (b + variant) % 2 ? 0 : int32_t(V);

    // KV rows by (request, position): row index b * 512 + position.
    const std::vector<bf16> kv = fx::uniform_bf16(rng, B * 512 * W);
    st::Tensor pool =
        fx::filled(st::DType::BF16, {pool_rows, W}, fx::default_poison(st::DType::BF16));
    // A step's KV rows scattered into the pool at `loc` (kv_store); the pool after it.
    auto store = [&](const std::vector<int64_t>& kv_row, const st::Tensor& loc,
                     const std::string& step) {
      std::vector<bf16> rows(kv_row.size() * W);
      for (size_t t = 0; t < kv_row.size(); ++t)
        std::memcpy(&rows[t * W], &kv[size_t(kv_row[t]) * W], W * sizeof(bf16));
      const fx::Tensors in = {{"kv", st::Tensor::of<bf16>({kv_row.size(), W}, rows)},
                              {"loc", st::Tensor::of<int64_t>(loc.values<int64_t>())},
                              {"pool", pool}};
      pool = checked_step<cases::KvStoreCase>(in, seed + variant, stream(), step).at("pool");
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
    fx::Tensors in = ring_inputs(kRing);
    in["req_slot"] = st::Tensor::of<int64_t>(slots);
    in["prefill_indptr"] = st::Tensor::of<int32_t>(ip);
    in["pos"] = st::Tensor::of<int64_t>(ppos);
    const fx::Tensors prefill =
        checked_step<cases::RingLayoutCase>(in, seed + variant, stream(), "prefill_slots");
    in = ring_inputs(kRing);
    in["slot"] = prefill.at("token_slot");
    in["pos"] = st::Tensor::of<int64_t>(ppos);
    in["final_pos"] = prefill.at("token_final_pos");
    const fx::Tensors locs =
        checked_step<cases::RingLayoutCase>(in, seed + variant, stream(), "token_locs");
    store(prow, locs.at("loc"), "prefill store");

    // Verify: positions prefix .. prefix+3 of each request.
    std::vector<int64_t> vpos(B * V), vrow(B * V);
    for (size_t b = 0; b < B; ++b)
      for (size_t j = 0; j < V; ++j)
        vpos[b * V + j] = prefixes[b] + int64_t(j),
                     vrow[b * V + j] = int64_t(b * 512) + vpos[b * V + j];
    in = ring_inputs(kRing);
    in["batch_slot"] = st::Tensor::of<int64_t>(slots);
    in["verify_pos"] = st::Tensor::of<int64_t>({B, V}, vpos);
    in["commit_len"] = st::Tensor::of<int32_t>(commit);
    const fx::Tensors verify =
        checked_step<cases::RingLayoutCase>(in, seed + variant, stream(), "verify_locs");
    store(vrow, verify.at("verify_loc"), "verify store");

    // Read: every verify token, plus two padding tokens.
    std::vector<int32_t> batch;
    std::vector<int64_t> rpos;
    for (size_t t = 0; t < B * V; ++t) batch.push_back(int32_t(t / V)), rpos.push_back(vpos[t]);
    batch.insert(batch.end(), {-1, -1}), rpos.insert(rpos.end(), {0, 0});
    in = ring_inputs(kRing);
    in["batch_id"] = st::Tensor::of<int32_t>(batch);
    in["pos"] = st::Tensor::of<int64_t>(rpos);
    in["batch_slot"] = st::Tensor::of<int64_t>(slots);
    const fx::Tensors read =
        checked_step<cases::RingLayoutCase>(in, seed + variant, stream(), "window_rows");

    // Committed requests read exactly their window's KV rows, oldest first.
    const auto indptr = read.at("indptr").values<int32_t>();
    const auto rows = read.at("rows").values<int32_t>();
    const auto pooled = pool.values<bf16>();
    for (size_t t = 0; t < B * V; ++t) {
      const size_t b = t / V;
      if (commit[b] == 0) continue;
      const int64_t q = vpos[t], n = indptr[t + 1] - indptr[t];
      ASSERT_EQ(n, std::min<int64_t>(q + 1, kRing.win));
      for (int64_t i = 0; i < n; ++i) {
        const int32_t r = rows[size_t(indptr[t] + i)];
        const int64_t want_pos = q - n + 1 + i;
        EXPECT_EQ(std::memcmp(&pooled[size_t(r) * W], &kv[(b * 512 + size_t(want_pos)) * W],
                              W * sizeof(bf16)),
                  0)
            << "request " << b << " token at " << q << ": row " << r << " should hold position "
            << want_pos;
      }
    }
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
  for (int variant : {-1, kr::kWindowVariants})
    EXPECT_THAT(launch_error([&] {
                  kr::window_rows(p32, p64, 4, p64, 2, kRing, p32, p32, p64, nullptr,
                                  {.variant = variant});
                }),
                HasSubstr("variant=" + std::to_string(variant) + " must be in [0, " +
                          std::to_string(kr::kWindowVariants) + ")"));
  EXPECT_THAT(
      launch_error([&] { kr::prefill_slots(p64, p32, -1, p64, 4, p64, p64, p64, nullptr); }),
      HasSubstr("B=-1"));
}

}  // namespace
}  // namespace dsv4

// kv_store kernels against the reference through the kernel-case harness: whole-pool bitwise
// comparison on a poisoned pool (scatter and the fused norm + RoPE store, every lane count the
// device runs), eager and graph launches, contiguous and strided rows, fp64 tolerance, hostile loc
// and position sets with the error counter, duplicates, offsets past 4 GiB, graph replay with new
// inputs, determinism, and the launchers' argument checks (those also run without a GPU).
#include "dsv4/kernels/kv_store.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "dsv4/cases/kv_store.hpp"
#include "dsv4/fixtures/gpu_test.hpp"
#include "dsv4/fixtures/launcher_args.hpp"
#include "dsv4/ref/kv_store.hpp"

namespace dsv4 {
namespace {

namespace kk = kernels::kv_store;
namespace rk = ref::kv_store;
using cases::KvStoreCase;
namespace st = fx::st;
using cases::KvStoreShape;
using fx::Launch;
using ::testing::HasSubstr;

// The rows the fused store wrote, against the fp64 reference within the derived bound
// (ref::kv_store::norm_rope_bounds); returns the largest share of its bound a value uses.
double expect_within_fp64_bound(const KvStoreCase& c, const fx::CaseRun& run) {
  const auto& s = c.shape();
  const rk::RowLayout layout{size_t(s.width), size_t(s.src_stride), size_t(s.pool_stride)};
  const auto kv = run.inputs.at("kv").values<bf16>();
  const auto loc = run.inputs.at("loc").values<int64_t>();
  const auto weight = run.inputs.at("weight").values<float>();
  const auto table = run.inputs.at("cos_sin").values<float>();
  const auto positions = run.inputs.at("positions").values<int64_t>();
  const rk::NormRope p{.weight = weight,
                       .cos_sin = table,
                       .positions = positions,
                       .eps = 1e-6f,
                       .rope_dim = run.inputs.at("cos_sin").shape[1]};
  const auto b = rk::norm_rope_bounds(kv, size_t(s.T), layout, p);
  const auto pool = run.got.at("pool").values<bf16>();
  std::vector<bf16> got;
  std::vector<double> want64, bound;
  const size_t W = layout.width, P = layout.pool();
  double use = 0;
  for (size_t t = 0; t < size_t(s.T); ++t) {
    const int64_t r = loc[t];
    if (r < 0 || r >= s.R || std::isnan(b.value[t * W])) continue;
    for (size_t j = 0; j < W; ++j) {
      const bf16 g = pool[size_t(r) * P + j];
      got.push_back(g);
      want64.push_back(b.value[t * W + j]);
      bound.push_back(b.stored[t * W + j]);
      use = std::max(use, std::fabs(double(bf16_to_f32(g)) - want64.back()) / bound.back());
    }
  }
  EXPECT_TRUE(fx::close(got, want64, fx::Shape{got.size() / W, W},
                        {.allow_all_zero = got.empty(), .bound = bound},
                        {.name = "stored vs fp64"}));
  return use;
}

// ---- shape sweep --------------------------------------------------------------------------

using SweepParam = fx::Sweep<KvStoreShape>;

class KvStoreSweep : public fx::GpuTestWithParam<SweepParam> {};

// Whole pool bit for bit, counter, canaries; the fused store's rows also within the reference's
// derived bound of the fp64 value.
TEST_P(KvStoreSweep, WholePoolMatchesReference) {
  const KvStoreCase c(GetParam().shape);
  if (const auto why = c.cannot_run(); !why.empty()) GTEST_SKIP() << why;
  for (uint64_t seed : fx::case_seeds()) {
    DSV4_CASE(seed, c.name());
    fx::CaseRun run;
    EXPECT_TRUE(fx::check_case(c, seed, stream(), {.launch = GetParam().launch}, &run));
    if (c.fused() && c.shape().T > 0) expect_within_fp64_bound(c, run);
  }
}

DSV4_CASE_SWEEP(KvStoreSweep, cases::kv_store_gpu_sweep());
DSV4_CASE_SWEEP_AS(Axes, KvStoreSweep, cases::kv_store_strided_graph_sweep());
DSV4_CASE_SWEEP_AS(Sglang, KvStoreSweep, cases::kv_store_sglang_sweep());

// ---- hostile inputs, duplicates -------------------------------------------------------------

class KvStore : public fx::GpuTest {};

// Mostly hostile loc sets (and, for the fused store, positions outside the table): nothing is
// written outside the pool or into an untargeted row, and the counter equals the rejected rows.
TEST_F(KvStore, HostileLocsAndPositions) {
  const uint64_t seed = fx::test_seed();
  const fx::IndexMix mix{.valid = 0.3, .minus_one = 0.2, .negative = 0.2, .out_of_range = 0.3};
  for (int lanes : {0, 32}) {
    const KvStoreCase c({.T = 4096, .R = 1000, .width = 512, .lanes = lanes, .mix = mix});
    for (int round = 0; round < 4; ++round) {
      DSV4_CASE(seed + round, c.name() << " round=" << round);
      fx::Rng rng(seed + round);
      fx::Tensors in = c.draw(rng);
      if (lanes) {  // every 5th row: a position outside the table
        auto pos = fx::values_of<int64_t>(in.at("positions"));
        const int64_t n_pos = c.shape().n_pos;
        const int64_t bad_pos[] = {-1, n_pos, INT64_MAX, INT64_MIN, n_pos + 1000};
        for (size_t t = 0; t < pos.size(); t += 5) pos[t] = bad_pos[(t / 5) % 5];
      }
      fx::CaseRun run;
      EXPECT_TRUE(fx::check_case(c, in, seed + round, stream(), {}, &run));
      EXPECT_GT(run.want.at("errors").item<int64_t>(), 0);
    }
  }
}

// The launcher adds to the counter and never resets it: three launches count three times.
TEST_F(KvStore, ErrorCounterAccumulatesAcrossLaunches) {
  const uint64_t seed = fx::test_seed();
  for (int lanes : {0, 32}) {
    const KvStoreCase c({.T = 512, .R = 100, .width = 64, .lanes = lanes});
    DSV4_CASE(seed, c.name());
    fx::Rng rng(seed);
    fx::CaseDevice dev(c, c.draw(rng), stream());
    dev.reset_outputs();
    for (int i = 0; i < 3; ++i) dev.launch();
    const int64_t once = c.reference(dev.inputs()).at("errors").item<int64_t>();
    ASSERT_GT(once, 0);
    EXPECT_EQ(dev.download().at("errors").item<int64_t>(), 3 * once);
  }  // dev checks its canaries when destroyed (fx::CaseDevice)
}

// Several rows naming one slot: each value of the pool row comes from one of them (rows are
// written in parallel pieces, so which one may differ from value to value); other rows keep poison.
TEST_F(KvStore, DuplicateSlotsHoldValuesOfTheirWriters) {
  const uint64_t seed = fx::test_seed();
  const KvStoreCase c({.T = 2048,
                       .R = 64,
                       .width = 512,
                       .mix = {.valid = 0.9,
                               .minus_one = 0.05,
                               .negative = 0,
                               .out_of_range = 0.05,
                               .unique_valid = false}});
  DSV4_CASE(seed, c.name() << " repeated locs");
  fx::Rng rng(seed);
  fx::CaseDevice dev(c, c.draw(rng), stream());
  dev.reset_outputs();
  dev.launch();
  const fx::Tensors got = dev.download();
  const auto pool = got.at("pool").values<bf16>();
  const auto loc = dev.inputs().at("loc").values<int64_t>();
  const auto kv = dev.inputs().at("kv").values<bf16>();
  std::map<int64_t, std::vector<size_t>> writers;
  for (size_t t = 0; t < loc.size(); ++t)
    if (loc[t] >= 0 && loc[t] < 64) writers[loc[t]].push_back(t);
  fx::Misses misses;
  for (int64_t r = 0; r < 64; ++r)
    for (size_t j = 0; j < 512; ++j) {
      const uint16_t v = pool[size_t(r) * 512 + j].bits;
      bool ok = !writers.count(r) && v == 0xFFFF;
      for (size_t t : writers[r]) ok |= v == kv[t * 512 + j].bits;
      if (!ok)
        misses.add("pool [" + std::to_string(r) + ", " + std::to_string(j) +
                   "] is the value of none of its " + std::to_string(writers[r].size()) +
                   " writers");
    }
  EXPECT_EQ(misses.count(), 0) << "values that come from no writer";
  EXPECT_EQ(got.at("errors").item<int64_t>(),
            c.reference(dev.inputs()).at("errors").item<int64_t>());
}  // dev checks its canaries when destroyed (fx::CaseDevice)

// Byte offsets past 2 GiB and element offsets past 2^31: a pool of 2^22 + 64 rows of 512 bf16
// (4.3 GB); half the rows go to the last 8192 rows, the rest hostile. Whole pool compared.
// One test per lane mode, so the two 4.3 GB pools run side by side (in separate test shards).
class KvStorePastFourGiB : public fx::GpuTest, public ::testing::WithParamInterface<int> {};

TEST_P(KvStorePastFourGiB, OffsetsPastFourGiB) {
  const size_t need = (size_t(1) << 22) * 1024 + (size_t(1) << 30);
  if (gpu::device_info().total_memory < 3 * need)
    GTEST_SKIP() << "needs about " << 3 * need / (1 << 30) << " GiB of device memory";
  const uint64_t seed = fx::test_seed();
  const int64_t R = (int64_t(1) << 22) + 64;
  const KvStoreCase c({.T = 4096, .R = R, .width = 512, .lanes = GetParam()});
  DSV4_CASE(seed, c.name());
  fx::Rng rng(seed);
  fx::Tensors in = c.draw(rng);
  auto loc = fx::values_of<int64_t>(in.at("loc"));
  const auto tail = fx::distinct_indices(rng, 2048, 8192);
  for (size_t t = 0; t < 2048; ++t) {
    loc[2 * t] = R - 8192 + tail[t];
    if (loc[2 * t + 1] >= R - 8192 && loc[2 * t + 1] < R) loc[2 * t + 1] = -1;  // stay distinct
  }
  EXPECT_TRUE(fx::check_case(c, in, seed, stream(), {.save_case = false}));
}

INSTANTIATE_TEST_SUITE_P(Lanes, KvStorePastFourGiB, ::testing::Values(0, 32),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return i.param ? "L" + std::to_string(i.param) : std::string("scatter");
                         });

// The derived fp64 bound is tight on the device: some stored value uses more than half of it.
TEST_F(KvStore, StoredBoundIsTight) {
  const uint64_t seed = fx::test_seed();
  for (int lanes : {16, 32}) {
    const KvStoreCase c({.T = 4096, .R = 6000, .width = 512, .lanes = lanes});
    DSV4_CASE(seed, c.name());
    fx::CaseRun run;
    ASSERT_TRUE(fx::check_case(c, seed, stream(), {}, &run));
    const double use = expect_within_fp64_bound(c, run);
    ::testing::Test::RecordProperty("max_bound_use_L" + std::to_string(lanes), std::to_string(use));
    std::printf("lanes=%d: largest |stored - fp64| / bound = %.3f\n", lanes, use);
    EXPECT_GT(use, 0.5);
    EXPECT_LE(use, 1.0);
  }
}

// The special rows of the specification (zeros, NaN, +-inf, subnormals, overflowing squares) on
// the device, bit for bit (NaNs equal whatever their payload); the pool starts from 0x5a5a, not a
// NaN, so a NaN row the kernel fails to write cannot pass as poison.
TEST_F(KvStore, SpecialRowsOnTheDevice) {
  const uint64_t seed = fx::test_seed();
  for (int lanes : {16, 32}) {
    const KvStoreCase c({.T = 64, .R = 100, .width = 512, .lanes = lanes});
    DSV4_CASE(seed, c.name() << " special rows");
    fx::Rng rng(seed);
    fx::Tensors in = c.draw(rng);
    cases::plant_special_rows(in);
    in["pool"] = fx::filled(st::DType::BF16, in.at("pool").shape, 0x5a);
    fx::CaseRun run;
    EXPECT_TRUE(fx::check_case(c, in, seed, stream(), {}, &run));
    const auto pool = run.got.at("pool").values<bf16>();
    auto nan = [](bf16 v) { return (v.bits & 0x7f80) == 0x7f80 && (v.bits & 0x7f) != 0; };
    for (size_t j = 0; j < 512; ++j) {
      EXPECT_EQ(pool[j].bits & 0x7fff, 0) << "all-zero row, value " << j;
      EXPECT_TRUE(nan(pool[512 + j])) << "NaN row, value " << j;
      EXPECT_NE(pool[4 * 512 + j].bits & 0x7fff, 0) << "subnormals are not flushed, value " << j;
    }
  }
}

// Small cases whose rows pin the summation order (bf16 results differ under another lane count):
// with DSV4_GOLDEN_OUT set, these are the golden files fixtures/data/golden/kv_store holds.
TEST_F(KvStore, OrderSensitiveCases) {
  for (int lanes : {16, 32})
    fx::expect_case(
        KvStoreCase({.T = 8, .R = 12, .width = 512, .lanes = lanes, .order_sensitive = true}),
        stream());
}

// ---- graph replay and determinism ---------------------------------------------------------

TEST_F(KvStore, GraphReplayMatchesEagerAndIsDeterministic) {
  const uint64_t seed = fx::test_seed();
  for (int lanes : {0, 16, 32}) {
    const KvStoreCase c({.T = 4096, .R = 6000, .width = 576, .lanes = lanes});
    DSV4_CASE(seed + lanes, c.name());
    EXPECT_TRUE(fx::check_graph_replay(c, seed + lanes, stream()));
    EXPECT_TRUE(fx::check_deterministic(c, seed + lanes, stream(), 20));
  }
}

TEST_F(KvStore, EmptyBatchWritesNothing) {
  for (int lanes : {0, 32})
    fx::expect_case(KvStoreCase({.T = 0, .R = 16, .lanes = lanes}), stream());
}

// ---- launcher argument checks (no device needed) ------------------------------------------

using fx::fake;
using fx::launch_error;

TEST(KvStoreLauncher, EmptyBatchLaunchesNothing) {
  // In the cpu preset any launch throws "no GPU backend"; T = 0 must not get that far.
  EXPECT_NO_THROW(kk::scatter_rows(nullptr, nullptr, 0, nullptr, 0, {}, nullptr, nullptr));
  EXPECT_NO_THROW(kk::norm_rope_store(nullptr, nullptr, 0, nullptr, 0, {}, {}, nullptr, nullptr));
}

// 64 lanes on a wave32 device (an AMD RDNA part under HIP) would shuffle across waves: the launcher
// asks the device's wave width and refuses, naming both numbers.
TEST(KvStoreLauncher, LanesBeyondTheWaveWidthAreRefused) {
  EXPECT_THAT(launch_error([] { kk::check_lanes_fit_wave(64, 32); }),
              HasSubstr("lanes=64 exceeds the device's wave width 32"));
  EXPECT_EQ(launch_error([] { kk::check_lanes_fit_wave(32, 32); }), "no invalid_argument");
  EXPECT_EQ(launch_error([] { kk::check_lanes_fit_wave(64, 64); }), "no invalid_argument");
}

TEST_F(KvStore, LauncherRefusesLanesBeyondThisDevicesWave) {
  const int wave = gpu::device_info().wave_width;
  if (!kk::lanes_supported(64) || wave >= 64)
    GTEST_SKIP() << "this build and device run every lane count they have (wave " << wave << ")";
  fx::Rng rng(fx::test_seed());
  const KvStoreCase c({.T = 8, .R = 8, .width = 512, .lanes = 64});
  fx::CaseDevice dev(c, c.draw(rng), stream());
  EXPECT_THAT(launch_error([&] { dev.launch(); }),
              HasSubstr("lanes=64 exceeds the device's wave width " + std::to_string(wave)));
}

TEST(KvStoreLauncher, BadArgumentsNameTheField) {
  auto* kv = fake<const bf16>();
  auto* loc = fake<const int64_t>();
  auto* pool = fake<bf16>();
  auto* err = fake<int64_t>();
  auto scatter = [&](int64_t T, kk::RowLayout l, const bf16* k = fake<const bf16>(),
                     bf16* p = fake<bf16>(), int64_t* e = fake<int64_t>()) {
    return launch_error([&] { kk::scatter_rows(k, loc, T, p, 10, l, e, nullptr); });
  };
  EXPECT_THAT(scatter(4, {.width = 12}), HasSubstr("width=12"));
  EXPECT_THAT(scatter(4, {.width = 16, .src_stride = 8}), HasSubstr("src_stride=8"));
  EXPECT_THAT(scatter(4, {.width = 16, .pool_stride = 20}), HasSubstr("pool_stride=20"));
  EXPECT_THAT(scatter(-1, {.width = 16}), HasSubstr("T=-1"));
  EXPECT_THAT(scatter(0, {.width = 12}), HasSubstr("width=12")) << "checked even when T = 0";
  EXPECT_THAT(scatter(4, {.width = 16}, fake<const bf16>(4098)), HasSubstr("kv is not 16-byte"));
  EXPECT_THAT(scatter(4, {.width = 16}, kv, fake<bf16>(4100)), HasSubstr("pool is not 16-byte"));
  EXPECT_THAT(scatter(4, {.width = 16}, kv, pool, nullptr), HasSubstr("errors is null"));

  auto fused = [&](kk::NormRope p, int64_t W = 512) {
    return launch_error(
        [&] { kk::norm_rope_store(kv, loc, 4, pool, 10, {.width = W}, p, err, nullptr); });
  };
  const kk::NormRope ok{.weight = fake<const float>(),
                        .cos_sin = fake<const float>(),
                        .n_pos = 16,
                        .positions = fake<const int64_t>()};
  kk::NormRope p = ok;
  p.lanes = 8;
  EXPECT_THAT(fused(p), HasSubstr("lanes=8"));
  p = ok;
  p.rope_dim = 12;
  EXPECT_THAT(fused(p), HasSubstr("rope_dim=12"));
  p.rope_dim = 64;
  EXPECT_THAT(fused(p, 56), HasSubstr("rope_dim=64"));
  p = ok;
  p.lanes = 16;
  EXPECT_THAT(fused(p, 2048), HasSubstr("width=2048 exceeds 1024 for lanes=16"));
  p = ok;
  p.weight = fake<const float>(4104);
  EXPECT_THAT(fused(p), HasSubstr("weight is not 16-byte"));
  p = ok;
  p.positions = nullptr;
  EXPECT_THAT(fused(p), HasSubstr("positions is null"));
  if (!kk::lanes_supported(64)) {
    p = ok;
    p.lanes = 64;
    EXPECT_THAT(fused(p), HasSubstr("lanes=64"));
  }
}

}  // namespace
}  // namespace dsv4

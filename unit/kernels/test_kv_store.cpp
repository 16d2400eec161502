// kv_store kernels against the reference: whole-pool bitwise comparison on a poisoned pool (scatter
// and the fused norm + RoPE store, every lane count the device runs), fp64 tolerance, hostile loc
// and position sets with the error counter, strides, duplicates, offsets past 4 GiB, graph replay,
// determinism, and the launchers' argument checks (those also run without a GPU).
#include "dsv4/kernels/kv_store.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dsv4/fixtures/case_file.hpp"
#include "dsv4/fixtures/compare.hpp"
#include "dsv4/fixtures/device_buffer.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/fixtures/gpu_test.hpp"
#include "dsv4/fixtures/replay.hpp"
#include "dsv4/ref/kv_store.hpp"

namespace dsv4 {
namespace {

namespace kk = kernels::kv_store;
namespace rk = ref::kv_store;
using fx::DeviceBuffer;
using fx::Shape;
using ::testing::HasSubstr;

constexpr int64_t kPositions = 4096;  // rows of the RoPE table

rk::RowLayout ref_layout(const kk::RowLayout& l) {
  return {size_t(l.width), size_t(l.src_stride), size_t(l.pool_stride)};
}
int64_t src_stride(const kk::RowLayout& l) { return l.src_stride ? l.src_stride : l.width; }
int64_t pool_stride(const kk::RowLayout& l) { return l.pool_stride ? l.pool_stride : l.width; }

// Every bf16 bit pattern (NaNs, infinities, subnormals) is a row value a scatter must copy exactly.
std::vector<bf16> raw_bits(fx::Rng& rng, size_t n) {
  std::vector<bf16> v(n);
  for (auto& x : v) x.bits = uint16_t(rng.next());
  return v;
}

// Rows of normal values, each row at its own scale 2^-4 .. 2^4 (RMSNorm input).
std::vector<bf16> scaled_rows(fx::Rng& rng, size_t T, size_t stride) {
  std::vector<float> v(T * stride);
  for (size_t t = 0; t < T; ++t) {
    const auto r = fx::normal_f32(rng, stride, 0, std::ldexp(1.0f, int(rng.range(-4, 4))));
    std::copy(r.begin(), r.end(), v.begin() + t * stride);
  }
  return fx::to_bf16(v);
}

std::vector<uint8_t> bytes_of(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return std::vector<uint8_t>(b, b + n);
}

// One store case on the device: kv, loc, a poisoned pool, the error counter and (for the fused
// variant) weight, table and positions; the reference image starts from the same poisoned pool.
struct StoreCase {
  int64_t T, R;
  kk::RowLayout layout;
  int rope_dim;
  DeviceBuffer<bf16> kv, pool;
  DeviceBuffer<int64_t> loc, errors, positions;
  DeviceBuffer<float> weight, table;
  std::vector<bf16> want;  // the reference pool
  rk::Outcome outcome;

  StoreCase(int64_t t, int64_t r, kk::RowLayout l)
      : T(t),
        R(r),
        layout(l),
        rope_dim(int(std::min<int64_t>(64, l.width))),
        kv(size_t(t * src_stride(l)), "kv"),
        pool(size_t(r * pool_stride(l)), "pool"),
        loc(size_t(t), "loc"),
        errors(1, "errors"),
        positions(size_t(t), "positions"),
        weight(size_t(l.width), "weight"),
        table(size_t(kPositions * std::min<int64_t>(64, l.width)), "table") {}

  // New inputs: kv rows (raw bits for a scatter, scaled normal rows for the fused store), locs
  // from the hostile generator, positions in the table.
  void draw(fx::Rng& rng, bool fused, const fx::IndexMix& mix = {}) {
    kv.upload(fused ? scaled_rows(rng, size_t(T), size_t(src_stride(layout)))
                    : raw_bits(rng, kv.size()));
    loc.upload(fx::hostile_indices(rng, size_t(T), R, mix).idx);
    std::vector<int64_t> p(static_cast<size_t>(T));
    for (auto& q : p) q = rng.range(0, kPositions - 1);
    positions.upload(p);
    weight.upload(fx::uniform_f32(rng, weight.size(), 0.5f, 1.5f));
    table.upload(rk::rope_table(size_t(kPositions), size_t(rope_dim)));
  }
  rk::NormRope ref_params() const {
    return {.weight = weight.host(),
            .cos_sin = table.host(),
            .positions = positions.host(),
            .eps = 1e-6f,
            .rope_dim = size_t(rope_dim)};
  }
  kk::NormRope params(int lanes) const {
    return {.weight = weight.data(),
            .cos_sin = table.data(),
            .n_pos = kPositions,
            .positions = positions.data(),
            .eps = 1e-6f,
            .rope_dim = rope_dim,
            .lanes = lanes};
  }
  // Poisons the pool, zeroes the counter, launches; lanes 0 means the plain scatter.
  void launch(int lanes, gpu::Stream s) {
    last_lanes = lanes;
    pool.poison(s);
    kernels::reset_errors(errors.data(), s);
    enqueue(lanes, s);
  }
  void enqueue(int lanes, gpu::Stream s) {
    if (lanes == 0)
      kk::scatter_rows(kv.data(), loc.data(), T, pool.data(), R, layout, errors.data(), s);
    else
      kk::norm_rope_store(kv.data(), loc.data(), T, pool.data(), R, layout, params(lanes),
                          errors.data(), s);
  }
  // The reference pool for the inputs now in the host mirrors.
  void reference(int lanes) {
    want.assign(pool.size(), pool.poison_value());
    outcome = lanes == 0
                  ? rk::scatter_rows(kv.host(), loc.host(), want, size_t(R), ref_layout(layout))
                  : rk::norm_rope_store(kv.host(), loc.host(), want, size_t(R), ref_layout(layout),
                                        ref_params(), size_t(lanes));
  }
  // Whole pool bit for bit, the counter, and every buffer's canaries.
  void check(gpu::Stream s) {
    pool.download(s);
    const Shape shape{size_t(R), size_t(pool_stride(layout))};
    EXPECT_TRUE(fx::save_case_on_failure(
        fx::bitwise_equal(pool.host(), want, shape, {.name = "pool"}), [&] { return as_case(); }));
    EXPECT_EQ(kernels::read_errors(errors.data(), s), outcome.rejected) << "error counter";
    for (auto* b : {&kv, &pool}) EXPECT_TRUE(b->guards_intact());
    for (auto* b : {&loc, &errors, &positions}) EXPECT_TRUE(b->guards_intact());
    for (auto* b : {&weight, &table}) EXPECT_TRUE(b->guards_intact());
  }
  // The failing case as a case file for dsv4-replay (family kv_store): inputs, the poisoned pool
  // it started from, the reference pool and the kernel's pool.
  fx::Case as_case() const {
    const uint64_t P = uint64_t(pool_stride(layout)), S = uint64_t(src_stride(layout));
    fx::Case c;
    c.family = "kv_store";
    c.name = "T=" + std::to_string(T) + " R=" + std::to_string(R) +
             " W=" + std::to_string(layout.width) + " lanes=" + std::to_string(last_lanes);
    namespace st = fx::st;
    c.inputs["kv"] = st::Tensor::of<bf16>({uint64_t(T), S}, kv.host());
    c.inputs["loc"] = st::Tensor::of<int64_t>(loc.host());
    c.inputs["pool"] =
        st::Tensor::of<bf16>({uint64_t(R), P}, std::vector<bf16>(pool.size(), pool.poison_value()));
    c.inputs["width"] = st::Tensor::scalar<int64_t>(layout.width);
    if (last_lanes > 0) {
      c.inputs["weight"] = st::Tensor::of<float>(weight.host());
      c.inputs["cos_sin"] =
          st::Tensor::of<float>({uint64_t(kPositions), uint64_t(rope_dim)}, table.host());
      c.inputs["positions"] = st::Tensor::of<int64_t>(positions.host());
      c.inputs["eps"] = st::Tensor::scalar<float>(1e-6f);
      c.inputs["lanes"] = st::Tensor::scalar<int32_t>(last_lanes);
    }
    c.want["pool"] = st::Tensor::of<bf16>({uint64_t(R), P}, want);
    c.got["pool"] = st::Tensor::of<bf16>({uint64_t(R), P}, pool.host());
    return c;
  }
  int last_lanes = 0;
  // The rows the fused store wrote, against the fp64 reference within the stated tolerance.
  void check_fp64() {
    const auto f64 = rk::norm_rope_rows_f64(kv.host(), size_t(T), ref_layout(layout), ref_params());
    std::vector<bf16> got;
    std::vector<double> want64;
    const size_t W = size_t(layout.width), PS = size_t(pool_stride(layout));
    for (size_t t = 0; t < size_t(T); ++t) {
      const int64_t r = loc.host()[t];
      if (r < 0 || r >= R || std::isnan(f64[t * W])) continue;
      got.insert(got.end(), pool.host().begin() + r * PS, pool.host().begin() + r * PS + W);
      want64.insert(want64.end(), f64.begin() + t * W, f64.begin() + (t + 1) * W);
    }
    EXPECT_TRUE(fx::close(got, want64, Shape{got.size() / W, W},
                          {.atol = rk::kStoredAtol,
                           .rtol = rk::kStoredRtol,
                           .max_rel_l2 = 4e-3,
                           .max_cos_dist = 1e-5,
                           .allow_all_zero = got.empty()},
                          {.name = "stored vs fp64"}));
  }
  // Replay hooks: new inputs each round, poison + zero before each launch, pool and counter out.
  fx::LaunchCase replay_case(int lanes, fx::Rng& rng) {
    fx::LaunchCase c;
    c.write_inputs = [this, &rng, lanes](int, gpu::Stream) { draw(rng, lanes != 0); };
    c.reset_outputs = [this](gpu::Stream s) {
      pool.poison(s);
      kernels::reset_errors(errors.data(), s);
    };
    c.launch = [this, lanes](gpu::Stream s) { enqueue(lanes, s); };
    c.read_outputs = [this](gpu::Stream s) {
      pool.download(s);
      auto b = bytes_of(pool.host().data(), pool.bytes());
      const int64_t e = kernels::read_errors(errors.data(), s);
      const auto eb = bytes_of(&e, sizeof e);
      b.insert(b.end(), eb.begin(), eb.end());
      return b;
    };
    return c;
  }
};

// The lane counts this device runs: 16 and 32 everywhere, 64 on wave64 devices.
bool device_runs_lanes(int lanes, std::string* why) {
  if (!kk::lanes_supported(lanes)) {
    *why = "lanes=" + std::to_string(lanes) + " is not built for backend " + gpu::backend();
    return false;
  }
  const int wave = gpu::device_info().wave_width;
  if (lanes > wave) {
    *why = "lanes=" + std::to_string(lanes) + " exceeds the device's wave width " +
           std::to_string(wave);
    return false;
  }
  return true;
}

// ---- shape sweep --------------------------------------------------------------------------

struct SweepParam {
  int64_t T, W;
  int lanes;  // 0: the plain scatter
};
void PrintTo(const SweepParam& p, std::ostream* os) {
  *os << (p.lanes ? "norm_rope_store" : "scatter_rows") << " T=" << p.T << " W=" << p.W;
  if (p.lanes) *os << " lanes=" << p.lanes;
}
std::string sweep_name(const ::testing::TestParamInfo<SweepParam>& i) {
  return (i.param.lanes ? "NormRope" : "Scatter") + std::string("_T") + std::to_string(i.param.T) +
         "_W" + std::to_string(i.param.W) +
         (i.param.lanes ? "_L" + std::to_string(i.param.lanes) : std::string());
}
std::vector<SweepParam> sweep_params() {
  std::vector<SweepParam> v;
  for (int lanes : {0, 16, 32, 64})
    for (int64_t T : {0, 1, 7, 64, 4096, 65536})
      for (int64_t W : {16, 64, 512, 576}) v.push_back({T, W, lanes});
  return v;
}

class KvStoreSweep : public fx::GpuTestWithParam<SweepParam> {};

TEST_P(KvStoreSweep, WholePoolMatchesReference) {
  const auto [T, W, lanes] = GetParam();
  std::string why;
  if (lanes && !device_runs_lanes(lanes, &why)) GTEST_SKIP() << why;
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, "T=" << T << " W=" << W << " lanes=" << lanes);
  fx::Rng rng(seed);
  StoreCase c(T, T + T / 2 + 3, {.width = W});
  c.draw(rng, lanes != 0);
  c.launch(lanes, stream());
  c.reference(lanes);
  c.check(stream());
  if (lanes && T > 0) c.check_fp64();
}

INSTANTIATE_TEST_SUITE_P(Shapes, KvStoreSweep, ::testing::ValuesIn(sweep_params()), sweep_name);

// ---- hostile inputs, strides, duplicates ----------------------------------------------------

class KvStore : public fx::GpuTest {};

// Mostly hostile loc sets (and, for the fused store, positions outside the table): nothing is
// written outside the pool or into an untargeted row, and the counter equals the rejected rows.
TEST_F(KvStore, HostileLocsAndPositions) {
  const uint64_t seed = fx::test_seed();
  const fx::IndexMix mix{.valid = 0.3, .minus_one = 0.2, .negative = 0.2, .out_of_range = 0.3};
  for (int lanes : {0, 32}) {
    for (int round = 0; round < 4; ++round) {
      DSV4_CASE(seed + round, "T=4096 R=1000 W=512 lanes=" << lanes << " round=" << round);
      fx::Rng rng(seed + round);
      StoreCase c(4096, 1000, {.width = 512});
      c.draw(rng, lanes != 0, mix);
      auto& pos = c.positions.host();  // every 5th row: a position outside the table
      const int64_t bad_pos[] = {-1, kPositions, INT64_MAX, INT64_MIN, kPositions + 1000};
      for (size_t t = 0; t < pos.size(); t += 5) pos[t] = bad_pos[(t / 5) % 5];
      c.positions.upload();
      c.launch(lanes, stream());
      c.reference(lanes);
      ASSERT_GT(c.outcome.rejected, 0);
      c.check(stream());
    }
  }
}

// The launcher adds to the counter and never resets it: two launches count twice.
TEST_F(KvStore, ErrorCounterAccumulatesAcrossLaunches) {
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, "T=512 R=100 W=64");
  fx::Rng rng(seed);
  StoreCase c(512, 100, {.width = 64});
  c.draw(rng, false);
  c.launch(0, stream());
  c.enqueue(0, stream());
  c.enqueue(32, stream());  // the fused store counts into the same kind of counter
  c.reference(0);
  EXPECT_EQ(kernels::read_errors(c.errors.data(), stream()), 3 * c.outcome.rejected);
}

// kv rows inside wider source rows, pool rows with a gap: gaps keep their poison.
TEST_F(KvStore, StridedRowsLeaveGapsPoisoned) {
  const uint64_t seed = fx::test_seed();
  for (int lanes : {0, 16, 32}) {
    DSV4_CASE(seed, "T=777 R=900 W=512 src_stride=576 pool_stride=520 lanes=" << lanes);
    fx::Rng rng(seed);
    StoreCase c(777, 900, {.width = 512, .src_stride = 576, .pool_stride = 520});
    c.draw(rng, lanes != 0);
    c.launch(lanes, stream());
    c.reference(lanes);
    c.check(stream());
  }
}

// Several rows naming one slot: each value of the pool row comes from one of them (rows are
// written in parallel pieces, so which one may differ from value to value); other rows keep poison.
TEST_F(KvStore, DuplicateSlotsHoldValuesOfTheirWriters) {
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, "T=2048 R=64 W=512 repeated locs");
  fx::Rng rng(seed);
  StoreCase c(2048, 64, {.width = 512});
  c.draw(rng, false,
         {.valid = 0.9,
          .minus_one = 0.05,
          .negative = 0,
          .out_of_range = 0.05,
          .unique_valid = false});
  c.launch(0, stream());
  c.reference(0);  // for the counter; its pool image keeps the last writer of each row
  c.pool.download(stream());
  std::map<int64_t, std::vector<size_t>> writers;
  for (size_t t = 0; t < 2048; ++t)
    if (c.loc.host()[t] >= 0 && c.loc.host()[t] < 64) writers[c.loc.host()[t]].push_back(t);
  size_t bad = 0;
  for (int64_t r = 0; r < 64; ++r)
    for (size_t j = 0; j < 512; ++j) {
      const uint16_t got = c.pool.host()[size_t(r) * 512 + j].bits;
      bool ok = !writers.count(r) && got == c.pool.poison_value().bits;
      for (size_t t : writers[r]) ok |= got == c.kv.host()[t * 512 + j].bits;
      if (!ok && bad++ < 8)
        ADD_FAILURE() << "pool [" << r << ", " << j << "] = 0x" << std::hex << got << std::dec
                      << " is the value of none of its " << writers[r].size() << " writers";
    }
  EXPECT_EQ(bad, 0u) << "values that come from no writer";
  EXPECT_EQ(kernels::read_errors(c.errors.data(), stream()), c.outcome.rejected);
  EXPECT_TRUE(c.pool.guards_intact());
}

// Byte offsets past 2 GiB and element offsets past 2^31: a pool of 2^22 + 64 rows of 512 bf16
// (4.3 GB); rows near its end are written. The pool is compared slab by slab (memcmp first, the
// comparator's report for a slab that differs).
TEST_F(KvStore, OffsetsPastFourGiB) {
  const size_t need = (size_t(1) << 22) * 1024 + (size_t(1) << 30);
  if (gpu::device_info().total_memory < 3 * need)
    GTEST_SKIP() << "needs about " << 3 * need / (1 << 30) << " GiB of device memory";
  const uint64_t seed = fx::test_seed();
  const int64_t R = (int64_t(1) << 22) + 64, W = 512;
  for (int lanes : {0, 32}) {
    DSV4_CASE(seed, "T=4096 R=" << R << " W=512 lanes=" << lanes);
    fx::Rng rng(seed);
    StoreCase c(4096, R, {.width = W});
    c.draw(rng, lanes != 0);
    auto& loc = c.loc.host();  // half the rows in the last 8192 rows, the rest hostile
    const auto tail = fx::distinct_indices(rng, 2048, 8192);
    for (size_t t = 0; t < 2048; ++t) {
      loc[2 * t] = R - 8192 + tail[t];
      if (loc[2 * t + 1] >= R - 8192 && loc[2 * t + 1] < R) loc[2 * t + 1] = -1;  // stay distinct
    }
    c.loc.upload();
    c.launch(lanes, stream());
    c.reference(lanes);
    c.pool.download(stream());
    const size_t slab = size_t(1) << 16;  // rows
    for (size_t r0 = 0; r0 < size_t(R); r0 += slab) {
      const size_t n = std::min(slab, size_t(R) - r0) * size_t(W);
      const bf16* got = c.pool.host().data() + r0 * W;
      const bf16* want = c.want.data() + r0 * W;
      if (std::memcmp(got, want, n * sizeof(bf16)) == 0) continue;
      ADD_FAILURE() << fx::bitwise_equal(std::span<const bf16>(got, n),
                                         std::span<const bf16>(want, n), Shape{n / W, size_t(W)},
                                         {.name = "pool rows from " + std::to_string(r0)})
                           .message();
      break;
    }
    EXPECT_EQ(kernels::read_errors(c.errors.data(), stream()), c.outcome.rejected);
    EXPECT_TRUE(c.pool.guards_intact());
  }
}

// ---- graph replay and determinism ---------------------------------------------------------

TEST_F(KvStore, GraphReplayMatchesEagerAndIsDeterministic) {
  const uint64_t seed = fx::test_seed();
  for (int lanes : {0, 16, 32}) {
    DSV4_CASE(seed, "T=4096 R=6000 W=576 lanes=" << lanes);
    fx::Rng rng(seed + lanes);
    StoreCase c(4096, 6000, {.width = 576});
    const fx::LaunchCase lc = c.replay_case(lanes, rng);
    EXPECT_TRUE(fx::graph_replay_matches_eager(lc, stream()));
    EXPECT_TRUE(fx::deterministic(lc, stream(), 20));
    EXPECT_TRUE(c.pool.guards_intact());
  }
}

TEST_F(KvStore, EmptyBatchWritesNothing) {
  StoreCase c(0, 16, {.width = 512});
  c.launch(0, stream());
  c.enqueue(32, stream());
  c.reference(0);
  c.check(stream());
}

// ---- launcher argument checks (no device needed) ------------------------------------------

// Fake device pointers: never dereferenced, the checks throw before any launch.
template <class T>
T* fake(uintptr_t at = 4096) {
  return reinterpret_cast<T*>(at);
}

std::string launch_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no invalid_argument";
}

TEST(KvStoreLauncher, EmptyBatchLaunchesNothing) {
  // In the cpu preset any launch throws "no GPU backend"; T = 0 must not get that far.
  EXPECT_NO_THROW(kk::scatter_rows(nullptr, nullptr, 0, nullptr, 0, {}, nullptr, nullptr));
  EXPECT_NO_THROW(kk::norm_rope_store(nullptr, nullptr, 0, nullptr, 0, {}, {}, nullptr, nullptr));
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

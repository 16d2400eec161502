// compact_pages kernels against the reference through the kernel-case harness: quantise into whole
// poisoned pools and dequantise into whole poisoned outputs, bit for bit, for every layout (v41,
// v41_fp4, v4, v4_fnuz), page sizes 1, 2, 7, 64, 128, 256, every values-per-lane choice, strides,
// eager and graph launches, hostile slot sets with the error counter (accumulating over launches),
// offsets past 2 GiB, graph replay with new inputs, determinism, and the launchers' argument
// checks (those also run without a GPU). Every code point on the device:
// test_compact_pages_codecs.cpp.
#include "dsv4/kernels/compact_pages.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dsv4/cases/compact_pages.hpp"
#include "dsv4/fixtures/gpu_test.hpp"
#include "dsv4/fixtures/launcher_args.hpp"

namespace dsv4 {
namespace {

namespace kc = kernels::compact_pages;
using cases::CompactOp;
using cases::CompactPagesCase;
using cases::CompactPagesShape;
using fx::Launch;
using ::testing::HasSubstr;

constexpr KvLayout kLayouts[] = {KvLayout::kV41, KvLayout::kV41Fp4, KvLayout::kV4,
                                 KvLayout::kV4Fnuz};
using SweepParam = fx::Sweep<CompactPagesShape>;

class CompactPagesSweep : public fx::GpuTestWithParam<SweepParam> {};

// Whole pool (or output) bit for bit, the counter, every buffer's canaries.
TEST_P(CompactPagesSweep, WholeOutputMatchesReference) {
  const CompactPagesCase c(GetParam().shape);
  for (uint64_t seed : fx::case_seeds()) {
    DSV4_CASE(seed, c.name());
    EXPECT_TRUE(fx::check_case(c, seed, stream(), {.launch = GetParam().launch}));
  }
}

DSV4_CASE_SWEEP(CompactPagesSweep, cases::compact_pages_gpu_sweep());
DSV4_CASE_SWEEP_AS(Axes, CompactPagesSweep, cases::compact_pages_options_sweep());

class CompactPages : public fx::GpuTest {};

// The whole-page form (SGLang's torch references' form) on the device: zeroed pages, every slot.
TEST_F(CompactPages, WholePagesFormMatchesReference) {
  for (KvLayout l : kLayouts)
    for (int64_t P : {int64_t(1), int64_t(7), int64_t(64)})
      for (CompactOp op : {CompactOp::kQuantize, CompactOp::kDequantizeBf16}) {
        const CompactPagesCase c(
            {.op = op, .layout = l, .page_size = P, .num_pages = 3, .whole_pages = true});
        DSV4_CASE(fx::test_seed(), c.name());
        EXPECT_TRUE(fx::check_case(c, fx::test_seed(), stream()));
      }
}

// Mostly hostile slot sets: nothing written outside the pool or into an untargeted slot, the
// counter equals the rejected rows, and a second launch adds to it (never resets it).
TEST_F(CompactPages, HostileSlotsAndAnAccumulatingCounter) {
  const uint64_t seed = fx::test_seed();
  const fx::IndexMix mix{.valid = 0.3, .minus_one = 0.2, .negative = 0.2, .out_of_range = 0.3};
  for (KvLayout l : kLayouts)
    for (CompactOp op : {CompactOp::kQuantize, CompactOp::kDequantizeF32}) {
      const CompactPagesCase c(
          {.op = op, .layout = l, .page_size = 7, .T = 4096, .num_pages = 150, .mix = mix});
      DSV4_CASE(seed, c.name());
      fx::CaseRun run;
      ASSERT_TRUE(fx::check_case(c, seed, stream(), {}, &run));
      const int64_t rejected = run.want.at("errors").item<int64_t>();
      EXPECT_GT(rejected, 0);
      fx::CaseDevice dev(c, run.inputs, stream());
      dev.reset_outputs();
      dev.launch();
      dev.launch();
      EXPECT_EQ(dev.download().at("errors").item<int64_t>(), 2 * rejected);
    }  // dev checks its canaries when destroyed (fx::CaseDevice)
}

// Pool byte offsets past 2 GiB: rows written into and read from the last pages of a 2.2 GB pool.
// One test per layout and direction, so the four 2.2 GB pools run side by side (in separate test
// shards) instead of one after another.
struct TwoGiBCase {
  KvLayout layout;
  CompactOp op;
};
class CompactPagesPastTwoGiB : public fx::GpuTest,
                               public ::testing::WithParamInterface<TwoGiBCase> {};

TEST_P(CompactPagesPastTwoGiB, OffsetsPastTwoGiB) {
  const uint64_t seed = fx::test_seed();
  const KvLayout l = GetParam().layout;
  const int64_t P = 64, pb = page_layout(l).page_bytes(P);
  const int64_t pages = ((int64_t(1) << 31) + pb - 1) / pb + 64;
  if (gpu::device_info().total_memory < size_t(3 * pages * pb))
    GTEST_SKIP() << "needs about " << 3 * pages * pb / (int64_t(1) << 30) << " GiB";
  const CompactPagesCase c(
      {.op = GetParam().op, .layout = l, .page_size = P, .T = 4096, .num_pages = pages});
  DSV4_CASE(seed, c.name());
  fx::Rng rng(seed);
  fx::Tensors in = c.draw(rng);
  auto slots = fx::values_of<int64_t>(in.at("slots"));
  const auto tail = fx::distinct_indices(rng, 2048, 64 * P);
  for (size_t t = 0; t < 2048; ++t) {
    slots[2 * t] = (pages - 64) * P + tail[t];
    if (slots[2 * t + 1] >= (pages - 64) * P && slots[2 * t + 1] < pages * P) slots[2 * t + 1] = -1;
  }
  EXPECT_TRUE(fx::check_case(c, in, seed, stream()));
}

INSTANTIATE_TEST_SUITE_P(
    Pools, CompactPagesPastTwoGiB,
    ::testing::Values(TwoGiBCase{KvLayout::kV41, CompactOp::kQuantize},
                      TwoGiBCase{KvLayout::kV41, CompactOp::kDequantizeBf16},
                      TwoGiBCase{KvLayout::kV4Fnuz, CompactOp::kQuantize},
                      TwoGiBCase{KvLayout::kV4Fnuz, CompactOp::kDequantizeBf16}),
    [](const ::testing::TestParamInfo<TwoGiBCase>& i) {
      return std::string(i.param.layout == KvLayout::kV41 ? "v41" : "v4_fnuz") +
             (i.param.op == CompactOp::kQuantize ? "_quantize" : "_dequantize_bf16");
    });

// Graph replay with new inputs (2 and 4 lanes per tile, and the fp32 dequantise), determinism.
TEST_F(CompactPages, GraphReplayWithNewInputsAndDeterminism) {
  const uint64_t seed = fx::test_seed();
  for (KvLayout l : kLayouts) {
    const int tile = page_layout(l).tile_values;
    std::vector<CompactPagesShape> shapes;
    for (int lanes : {2, 4})
      if (kc::values_per_lane_supported(l, tile / lanes) && tile / lanes >= 8)
        shapes.push_back({.op = CompactOp::kQuantize,
                          .layout = l,
                          .page_size = 64,
                          .T = 4096,
                          .num_pages = 100,
                          .stride = 576,
                          .values_per_lane = tile / lanes});
    shapes.push_back({.op = CompactOp::kDequantizeF32,
                      .layout = l,
                      .page_size = 7,
                      .T = 4096,
                      .num_pages = 700});
    shapes.push_back({.op = CompactOp::kDequantizeBf16,
                      .layout = l,
                      .page_size = 128,
                      .T = 4096,
                      .num_pages = 40,
                      .stride = 520});
    for (const CompactPagesShape& s : shapes) {
      const CompactPagesCase c(s);
      DSV4_CASE(seed, c.name());
      EXPECT_TRUE(fx::check_graph_replay(c, seed, stream()));
      EXPECT_TRUE(fx::check_deterministic(c, seed, stream(), 10));
    }
  }
}

// A page mismatch names its first differing byte as page, row, data or scale byte and tile.
TEST(CompactPagesCaseReport, PoolBytesAreNamedByPageRowAndTile) {
  EXPECT_EQ(cases::describe_pool_byte(KvLayout::kV41, 7, 4096 + 3 * 512 + 40),
            "page 1, row 3, data byte 40 (tile 1)");
  EXPECT_EQ(cases::describe_pool_byte(KvLayout::kV41, 7, 7 * 512 + 16 * 2 + 5),
            "page 0, row 2, scale byte 5 (tile 5)");
  EXPECT_EQ(cases::describe_pool_byte(KvLayout::kV41, 7, 7 * 528 + 3), "page 0, padding byte 3");
  EXPECT_EQ(cases::describe_pool_byte(KvLayout::kV4, 1, 576 + 7),
            "page 0, row 0, pad byte 7 of "
            "the scale row");
  EXPECT_EQ(cases::describe_pool_byte(KvLayout::kV4, 1, 450),
            "page 0, row 0, data byte 450 (raw "
            "bf16 value 449)");
  EXPECT_EQ(cases::describe_pool_byte(KvLayout::kV41Fp4, 2, 256 + 17),
            "page 0, row 1, data byte 17 (tile 2)");
}

// ---- launcher argument checks (no device needed) ---------------------------------------------

using fx::fake;
using fx::launch_error;

TEST(CompactPagesLauncher, EmptyBatchLaunchesNothing) {
  // In the cpu preset any launch throws "no GPU backend"; n_rows = 0 must not get that far.
  for (KvLayout l : kLayouts) {
    EXPECT_NO_THROW(kc::quantize(l, 64, nullptr, 0, nullptr, 0, nullptr, 0, nullptr, nullptr));
    EXPECT_NO_THROW(
        kc::dequantize(l, 64, nullptr, 0, nullptr, 0, fake<float>(), 0, nullptr, nullptr));
    EXPECT_NO_THROW(
        kc::dequantize(l, 64, nullptr, 0, nullptr, 0, fake<bf16>(), 0, nullptr, nullptr));
  }
}

TEST(CompactPagesLauncher, BadArgumentsNameTheField) {
  const auto* src = fake<const bf16>();
  const auto* slots = fake<const int64_t>();
  auto* pool = fake<uint8_t>();
  auto* err = fake<int64_t>();
  auto q = [&](KvLayout l, int64_t n, int64_t stride, kc::Options o = {},
               const bf16* s = fake<const bf16>(), uint8_t* p = fake<uint8_t>(),
               int64_t* e = fake<int64_t>(), int64_t pages = 10, int64_t P = 64) {
    return launch_error([&] { kc::quantize(l, P, s, stride, slots, n, p, pages, e, nullptr, o); });
  };
  const KvLayout v41 = KvLayout::kV41, fp4 = KvLayout::kV41Fp4, v4 = KvLayout::kV4;
  EXPECT_THAT(q(KvLayout(4), 4, 0), HasSubstr("layout=4"));
  EXPECT_THAT(q(v41, 4, 0, {.values_per_lane = 12}), HasSubstr("values_per_lane=12"));
  EXPECT_THAT(q(fp4, 4, 0, {.values_per_lane = 128}), HasSubstr("values_per_lane=128"));
  EXPECT_THAT(q(fp4, 4, 0, {.variant = kc::kQuantVariants}),
              HasSubstr("variant=" + std::to_string(kc::kQuantVariants)));
  EXPECT_THAT(q(v41, 4, 0, {.variant = -1}), HasSubstr("variant=-1"));
  EXPECT_THAT(q(v41, -1, 0), HasSubstr("n_rows=-1"));
  EXPECT_THAT(q(v41, int64_t(1) << 31, 0), HasSubstr("n_rows=2147483648"));
  EXPECT_THAT(q(v41, 4, 100), HasSubstr("src_stride=100"));
  EXPECT_THAT(q(v4, 4, 516), HasSubstr("src_stride=516"));
  EXPECT_THAT(q(v41, 0, 100), HasSubstr("src_stride=100")) << "checked even when n_rows = 0";
  EXPECT_THAT(q(v41, 4, 0, {}, src, pool, err, -1), HasSubstr("num_pages=-1"));
  EXPECT_THAT(q(v41, 4, 0, {}, src, pool, err, 10, 0), HasSubstr("page_size=0"));
  EXPECT_THAT(q(v41, 4, 0, {}, nullptr), HasSubstr("src is null"));
  EXPECT_THAT(q(v41, 4, 0, {}, src, nullptr), HasSubstr("pool is null"));
  EXPECT_THAT(q(v41, 4, 0, {}, src, pool, nullptr), HasSubstr("errors is null"));
  EXPECT_THAT(q(v41, 4, 0, {}, fake<const bf16>(4098)), HasSubstr("src is not 16-byte"));
  EXPECT_THAT(q(fp4, 4, 0, {}, src, fake<uint8_t>(4104)), HasSubstr("pool is not 16-byte"));

  auto d = [&](KvLayout l, int64_t stride, float* out = fake<float>(),
               const int64_t* sl = fake<const int64_t>()) {
    return launch_error([&] { kc::dequantize(l, 64, pool, 10, sl, 4, out, stride, err, nullptr); });
  };
  EXPECT_THAT(d(KvLayout(-1), 0), HasSubstr("layout=-1"));
  EXPECT_THAT(d(v41, 511), HasSubstr("out_stride=511"));
  EXPECT_THAT(d(fp4, 0, nullptr), HasSubstr("out is null"));
  EXPECT_THAT(d(fp4, 0, fake<float>(4100)), HasSubstr("out is not 16-byte"));
  EXPECT_THAT(d(v41, 0, fake<float>(), nullptr), HasSubstr("slots is null"));
  EXPECT_THAT(launch_error([&] {
                kc::dequantize(v41, 64, pool, 10, slots, 4, fake<float>(), 0, err, nullptr,
                               {.variant = 2});
              }),
              HasSubstr("variant=2"));
  EXPECT_TRUE(kc::values_per_lane_supported(v4, 8));
  EXPECT_TRUE(kc::values_per_lane_supported(fp4, 64));
  EXPECT_FALSE(kc::values_per_lane_supported(fp4, 128));
}

}  // namespace
}  // namespace dsv4

// split_combine kernel against the reference through the kernel-case harness: output and lse bit
// for bit against the fp32-order reference (and within the stated tolerance of fp64) on poisoned
// outputs, eager and graph launches; empty splits and rows, split counts past S and below 0, NaN
// in every partial the kernel must not use, sinks +-inf and finite, inverse RoPE with positions
// outside the table (counted); graph replay with new inputs; determinism; launcher checks.
#include "dsv4/kernels/split_combine.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "dsv4/cases/split_combine.hpp"
#include "dsv4/fixtures/gpu_test.hpp"
#include "dsv4/fixtures/launcher_args.hpp"
#include "dsv4/ref/split_combine.hpp"

namespace dsv4 {
namespace {

namespace ksc = kernels::split_combine;
namespace rsc = ref::split_combine;
using cases::SplitCombineCase;
using cases::SplitCombineShape;
using fx::Launch;
using ::testing::HasSubstr;

// The kernel's output within the reference's stated tolerance of the fp64 value.
void expect_close_to_fp64(const fx::CaseRun& run) {
  const fx::SplitPartials p = cases::split_partials_of(run.inputs);
  const rsc::OutputsF64 want = rsc::combine_f64(p.inputs());
  const auto [B, S, H, D] = p.shape;
  EXPECT_TRUE(fx::close(run.got.at("out").values<bf16>(), want.out, fx::Shape{B, H, D},
                        fx::split_combine_tolerance("out", want, int64_t(S)),
                        {.name = "out vs fp64"}));
  EXPECT_TRUE(fx::close(run.got.at("out_lse").values<float>(), want.lse, fx::Shape{B, H},
                        fx::split_combine_tolerance("out_lse", want, int64_t(S)),
                        {.name = "lse vs fp64"}));
}

using SweepParam = fx::Sweep<SplitCombineShape>;

class SplitCombineSweep : public fx::GpuTestWithParam<SweepParam> {};

TEST_P(SplitCombineSweep, BitwiseToFp32OrderAndCloseToFp64) {
  const SplitCombineCase c(GetParam().shape);
  for (uint64_t seed : fx::case_seeds()) {
    DSV4_CASE(seed, c.name());
    fx::CaseRun run;
    EXPECT_TRUE(fx::check_case(c, seed, stream(), {.launch = GetParam().launch}, &run));
    expect_close_to_fp64(run);
  }
}

DSV4_CASE_SWEEP(SplitCombineSweep, cases::split_combine_gpu_sweep());
DSV4_CASE_SWEEP_AS(Sglang, SplitCombineSweep, cases::split_combine_sglang_sweep());

class SplitCombine : public fx::GpuTest {};

// Every row empty in some way, sinks all +inf, all -inf: zeros and +inf lse, or untouched.
TEST_F(SplitCombine, EmptyRowsAndInfiniteSinks) {
  const uint64_t seed = fx::test_seed();
  const SplitCombineCase c({16, 6, 8, 512, {.empty_split = 0.6}});
  for (float sink : {INFINITY, -INFINITY, 0.0f}) {
    DSV4_CASE(seed, c.name() << " sink=" << sink);
    fx::Rng rng(seed);
    fx::Tensors in = c.draw(rng);
    for (float& s : fx::values_of<float>(in.at("sink"))) s = sink;
    auto n = fx::values_of<int32_t>(in.at("n_splits"));
    n[5] = 0, n[6] = -7, n[7] = 1000;
    fx::CaseRun run;
    EXPECT_TRUE(fx::check_case(c, in, seed, stream(), {}, &run));
    const auto lse = run.got.at("out_lse").values<float>();
    for (size_t h = 0; h < 8; ++h) EXPECT_EQ(lse[5 * 8 + h], INFINITY) << "empty row 5";
  }
}

// Positions outside the RoPE table in every third batch row: counted once per row, tail unrotated.
TEST_F(SplitCombine, PositionsOutsideTheTableAreCounted) {
  const uint64_t seed = fx::test_seed();
  const SplitCombineCase c({30, 4, 16, 512, {.bad_position = 0.0}});
  DSV4_CASE(seed, c.name());
  fx::Rng rng(seed);
  fx::Tensors in = c.draw(rng);
  auto pos = fx::values_of<int64_t>(in.at("positions"));
  const int64_t bad[] = {-1, 4096, INT64_MIN, INT64_MAX, 4097};
  for (size_t b = 0; b < pos.size(); b += 3) pos[b] = bad[(b / 3) % 5];
  fx::CaseRun run;
  EXPECT_TRUE(fx::check_case(c, in, seed, stream(), {}, &run));
  EXPECT_EQ(run.got.at("errors").item<int64_t>(), 10);
}

TEST_F(SplitCombine, GraphReplayMatchesEagerAndIsDeterministic) {
  const uint64_t seed = fx::test_seed();
  for (const SplitCombineShape& s :
       {SplitCombineShape{8, 4, 16, 512, {}}, SplitCombineShape{64, 8, 128, 512, {}}}) {
    const SplitCombineCase c(s);
    DSV4_CASE(seed, c.name());
    EXPECT_TRUE(fx::check_graph_replay(c, seed, stream()));
    EXPECT_TRUE(fx::check_deterministic(c, seed, stream(), 20));
  }
}

// ---- launcher argument checks (no device needed) ------------------------------------------

using fx::fake;
using fx::launch_error;

ksc::Args good() {
  ksc::Args a;
  a.B = 2, a.S = 3, a.H = 4, a.D = 512;
  a.o = fake<const float>();
  a.lse = fake<const float>();
  a.n_splits = fake<const int32_t>();
  a.out = fake<bf16>();
  a.out_lse = fake<float>();
  a.errors = fake<int64_t>();
  return a;
}

TEST(SplitCombineLauncher, EmptyBatchLaunchesNothing) {
  ksc::Args a = good();
  a.B = 0;
  EXPECT_NO_THROW(ksc::combine(a, nullptr));
}

TEST(SplitCombineLauncher, BadArgumentsNameTheField) {
  auto err = [](ksc::Args a) { return launch_error([&] { ksc::combine(a, nullptr); }); };
  ksc::Args a = good();
  a.D = 6;
  EXPECT_THAT(err(a), HasSubstr("D=6"));
  a = good();
  a.S = 0;
  EXPECT_THAT(err(a), HasSubstr("S=0"));
  a = good();
  a.variant = 2;
  EXPECT_THAT(err(a), HasSubstr("variant=2"));
  a = good();
  a.o = fake<const float>(4100);
  EXPECT_THAT(err(a), HasSubstr("o is not 16-byte aligned"));
  a = good();
  a.out_lse = nullptr;
  EXPECT_THAT(err(a), HasSubstr("out_lse is null"));
  a = good();
  a.rope = {fake<const float>(), 16, 63, fake<const int64_t>()};
  EXPECT_THAT(err(a), HasSubstr("rope.rope_dim=63"));
  a.rope.rope_dim = 64;
  a.errors = nullptr;
  EXPECT_THAT(err(a), HasSubstr("errors is null"));
  a = good();
  a.rope = {fake<const float>(), 16, 64, nullptr};
  EXPECT_THAT(err(a), HasSubstr("rope.positions is null"));
}

}  // namespace
}  // namespace dsv4

// sparse_decode kernel against the fp64 reference through the kernel-case harness, within the
// tolerance ref::sparse_decode::tolerance derives from each case's data for a matrix-core kernel:
// scores of bf16 x bf16 products summed in fp32 that may truncate (error <= 2 * 514 * 2^-24 *
// sm_scale * max||q|| max||k||), sums within (3 * ceil(cols / 16) + 16) * 2^-24 relative, P
// rounded to bf16 for P V (2^-9 max|k| on every output); so lse within score + sums, out within
// (2 score + 2 sums + 2^-9) max|k| + 2^-8 |want|, cosine distance <= 5e-6 (FlashMLA's figure).
// Cases: every layout (v41, v41_fp4, v4, v4_fnuz), page sizes 1/64/256, K 64/576/2048, B 1/4/74,
// H 16/48/64/128 (blocks of 64 heads where H allows, else 16), a second cache (extra range),
// hostile index sets with the error counter, NaN in every slot no index names, permuted page
// tables, queries without keys, sinks finite/+inf/-inf; the split-KV path through split_combine
// against the unsplit kernel; graph replay with new indices; determinism over 20 launches;
// launcher argument checks.
#include "dsv4/kernels/sparse_decode.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "dsv4/cases/sparse_decode.hpp"
#include "dsv4/fixtures/gpu_test.hpp"
#include "dsv4/fixtures/launcher_args.hpp"
#include "dsv4/ref/sparse_decode.hpp"

namespace dsv4 {
namespace {

namespace ksd = kernels::sparse_decode;
namespace rsd = ref::sparse_decode;
using cases::SparseDecodeCase;
using cases::SparseDecodeShape;
using fx::Launch;
using ::testing::HasSubstr;

constexpr KvLayout kV41 = KvLayout::kV41, kFp4 = KvLayout::kV41Fp4, kV4 = KvLayout::kV4,
                   kFnuz = KvLayout::kV4Fnuz;

using Param = fx::Sweep<SparseDecodeShape>;

class SparseDecodeSweep : public fx::GpuTestWithParam<Param> {};

TEST_P(SparseDecodeSweep, WithinDerivedToleranceOfFp64) {
  const SparseDecodeCase c(GetParam().shape);
  for (uint64_t seed : fx::case_seeds()) {
    DSV4_CASE(seed, c.name());
    EXPECT_TRUE(fx::check_case(c, seed, stream(), {.launch = GetParam().launch}));
  }
}

DSV4_CASE_SWEEP(SparseDecodeSweep, cases::sparse_decode_gpu_sweep());
DSV4_CASE_SWEEP_AS(Sglang, SparseDecodeSweep, cases::sparse_decode_sglang_sweep());

class SparseDecode : public fx::GpuTest {};

// Mostly hostile index lists: the counter equals the reference's error columns, nothing unnamed is
// read (every unused slot is NaN), and whole outputs are compared.
TEST_F(SparseDecode, HostileIndexSetsAreCountedNeverRead) {
  const uint64_t seed = fx::test_seed();
  for (int64_t splits : {0, 3}) {
    SparseDecodeShape s = cases::spread_shape(8, 16, 576, kV41, 64, splits, 64, kFp4, 1);
    s.mix = {.valid = 0.3, .minus_one = 0.2, .hostile = 0.5};
    const SparseDecodeCase c(s);
    DSV4_CASE(seed, c.name());
    fx::CaseRun run;
    EXPECT_TRUE(fx::check_case(c, seed, stream(), {}, &run));
    EXPECT_GT(run.want.at("errors").item<int64_t>(), 0);
  }
}

// No query has a key (lengths 0, or only -1 and errors): zeros and lse +inf whatever the sink.
TEST_F(SparseDecode, QueriesWithoutKeysGiveZerosAndPlusInf) {
  const uint64_t seed = fx::test_seed();
  for (int64_t splits : {0, 4}) {
    const SparseDecodeCase c(cases::spread_shape(6, 16, 64, kV41, 64, splits, 32, kFp4, 1));
    DSV4_CASE(seed, c.name());
    fx::Rng rng(seed);
    fx::Tensors in = c.draw(rng);
    auto idx = fx::values_of<int32_t>(in.at("indices"));
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i % 3 ? -1 : INT32_MAX;
    for (int32_t& l : fx::values_of<int32_t>(in.at("extra_lengths"))) l = 0;
    fx::CaseRun run;
    EXPECT_TRUE(fx::check_case(c, in, seed, stream(), {}, &run));
    for (float l : run.got.at("out_lse").values<float>()) ASSERT_EQ(l, INFINITY);
    for (bf16 v : run.got.at("out").values<bf16>()) ASSERT_EQ(v.bits, 0);
  }
}

// The split path (partials + split_combine) against the unsplit kernel on the same inputs: both
// within the fp64 tolerance, so within twice of each other.
TEST_F(SparseDecode, SplitPathAgreesWithUnsplitKernel) {
  const uint64_t seed = fx::test_seed();
  const SparseDecodeCase whole(cases::spread_shape(4, 64, 576, kV41, 64, 0, 64, kFp4, 1));
  const SparseDecodeCase parts(cases::spread_shape(4, 64, 576, kV41, 64, 6, 64, kFp4, 1));
  DSV4_CASE(seed, parts.name());
  fx::CaseRun a, b;
  ASSERT_TRUE(fx::check_case(whole, seed, stream(), {}, &a));
  ASSERT_TRUE(fx::check_case(parts, seed, stream(), {}, &b));
  ASSERT_EQ(a.inputs.at("indices"), b.inputs.at("indices"));
  const rsd::Tolerance t = rsd::tolerance(cases::sparse_case_of(a.inputs).inputs());
  EXPECT_TRUE(fx::close(b.got.at("out").values<bf16>(), a.got.at("out").values<bf16>(),
                        fx::Shape{4, 64, 512},
                        {.atol = 2 * t.out_atol,
                         .rtol = 2 * t.out_rtol,
                         .max_cos_dist = 2 * t.cos,
                         .allow_all_zero = true},
                        {.name = "split out vs unsplit out"}));
  EXPECT_TRUE(fx::close(b.got.at("out_lse").values<float>(), a.got.at("out_lse").values<float>(),
                        fx::Shape{4, 64}, {.atol = 2 * t.lse_atol, .allow_all_zero = true},
                        {.name = "split lse vs unsplit lse"}));
}

TEST_F(SparseDecode, GraphReplayWithNewIndicesAndDeterminism) {
  const uint64_t seed = fx::test_seed();
  for (const SparseDecodeShape& p : {cases::spread_shape(4, 16, 576, kV41, 64, 0, 64, kFp4, 1),
                                     cases::spread_shape(4, 16, 576, kFp4, 64, 4)}) {
    const SparseDecodeCase c(p);
    DSV4_CASE(seed, c.name());
    EXPECT_TRUE(fx::check_graph_replay(c, seed, stream()));
    EXPECT_TRUE(fx::check_deterministic(c, seed, stream(), 20));
  }
}

// ---- launcher argument checks (no device needed) ------------------------------------------

using fx::fake;
using fx::launch_error;

ksd::Args good() {
  ksd::Args a;
  a.B = 2, a.H = 16;
  a.q = fake<const bf16>();
  a.main = {kV41, 64, 4, fake<const uint8_t>(), fake<const int32_t>(), 8, fake<const int32_t>()};
  a.sm_scale = 0.04f;
  a.errors = fake<int64_t>();
  return a;
}

TEST(SparseDecodeLauncher, EmptyBatchLaunchesNothing) {
  ksd::Args a = good();
  a.B = 0;
  EXPECT_NO_THROW(ksd::decode(a, fake<bf16>(), fake<float>(), nullptr));
}

TEST(SparseDecodeLauncher, BadArgumentsNameTheField) {
  auto err = [](ksd::Args a, int64_t S = 0) {
    return launch_error([&] {
      if (S)
        ksd::decode_partials(a, S, fake<float>(), fake<float>(), nullptr);
      else
        ksd::decode(a, fake<bf16>(), fake<float>(), nullptr);
    });
  };
  ksd::Args a = good();
  a.H = 24;
  EXPECT_THAT(err(a), HasSubstr("H=24"));
  a = good();
  a.q = fake<const bf16>(4098);
  EXPECT_THAT(err(a), HasSubstr("q is not 16-byte aligned"));
  a = good();
  a.main.layout = KvLayout(7);
  EXPECT_THAT(err(a), HasSubstr("main.layout=7"));
  a = good();
  a.main.pool = fake<const uint8_t>(4100);
  EXPECT_THAT(err(a), HasSubstr("main.pool is not 16-byte aligned"));
  a = good();
  a.extra = a.main;
  a.main.layout = kFp4;
  a.extra.layout = KvLayout::kV4;
  EXPECT_THAT(err(a), HasSubstr("(main, extra) layouts (v41_fp4, v4)"));
  a = good();
  a.errors = nullptr;
  EXPECT_THAT(err(a), HasSubstr("errors is null"));
  EXPECT_THAT(err(good(), -1), HasSubstr("S=-1"));
  a = good();
  a.main.num_pages = int64_t(1) << 30;
  EXPECT_THAT(err(a), HasSubstr("do not fit the int32 indices"));
}

}  // namespace
}  // namespace dsv4

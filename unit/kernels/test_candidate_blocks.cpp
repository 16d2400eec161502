// candidate_blocks kernel against the reference through the kernel-case harness, bit for bit:
// block sizes 1 .. 512 (odd ones too), partial last blocks, len < bs, nb >= the block count,
// ties within and across blocks, NaN / -inf / +inf scores, ragged lengths in one launch, K up to
// 2048, logical wave widths 16 and 32; graph replay with new inputs; determinism; argument checks.
#include "dsv4/kernels/candidate_blocks.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dsv4/cases/candidate_blocks.hpp"
#include "dsv4/fixtures/gpu_test.hpp"
#include "dsv4/fixtures/launcher_args.hpp"

namespace dsv4 {
namespace {

namespace kc = kernels::candidate_blocks;
using cases::CandidateBlocksCase;
using cases::CandidateBlocksShape;
using ::testing::HasSubstr;

using SweepParam = fx::Sweep<CandidateBlocksShape>;

class CandidateBlocksSweep : public fx::GpuTestWithParam<SweepParam> {};

TEST_P(CandidateBlocksSweep, MatchesReference) {
  fx::expect_case(CandidateBlocksCase(GetParam().shape), stream(), GetParam().options());
}

DSV4_CASE_SWEEP(CandidateBlocksSweep, cases::candidate_blocks_gpu_sweep());
DSV4_CASE_SWEEP_AS(Sglang, CandidateBlocksSweep, cases::candidate_blocks_sglang_sweep());

class CandidateBlocks : public fx::GpuTest {};

TEST_F(CandidateBlocks, GraphReplayAndDeterminism) {
  const uint64_t seed = fx::test_seed();
  const CandidateBlocksCase c(
      {.B = 9, .width = 9000, .len = -1, .bs = 64, .nb = 16, .K = 512, .wave = 32, .ties = true});
  DSV4_CASE(seed, c.name());
  EXPECT_TRUE(fx::check_graph_replay(c, seed, stream()));
  EXPECT_TRUE(fx::check_deterministic(c, seed, stream(), 20));
}

TEST(CandidateBlocksArgs, BadArgumentsNameTheField) {
  const kc::Args ok{.scores = fx::fake<float>(),
                    .stride = 1024,
                    .width = 1024,
                    .lens = fx::fake<int32_t>(),
                    .B = 2,
                    .keys_out = fx::fake<int32_t>()};
  auto with = [&](auto change) {
    kc::Args a = ok;
    change(a);
    return fx::launch_error([&] { kc::select(a, 32, nullptr); });
  };
  EXPECT_THAT(with([](kc::Args& a) { a.bs = 0; }), HasSubstr("bs=0"));
  EXPECT_THAT(with([](kc::Args& a) { a.nb = 0; }), HasSubstr("nb=0"));
  EXPECT_THAT(with([](kc::Args& a) { a.K = 3000; }), HasSubstr("K=3000"));
  EXPECT_THAT(with([](kc::Args& a) { a.stride = 10; }), HasSubstr("stride=10"));
  EXPECT_THAT(with([](kc::Args& a) { a.keys_out = nullptr; }), HasSubstr("null pointer"));
  EXPECT_THAT(fx::launch_error([&] { kc::select(ok, 12, nullptr); }), HasSubstr("W=12"));
}

}  // namespace
}  // namespace dsv4

// indexer_topk kernel against the reference through the kernel-case harness: a sweep of 120+
// shapes (batch 1, 30, 31, 128, 129; lengths around K, 8192/8193, 16384/16385, 65535-65537; ragged
// lengths in one launch; identity and permuted page tables; normal, tied and hostile scores with
// NaN, +-inf and signed zeros; K 512, 1024, 2048), sorted rows bit for bit at logical wave widths
// 16 and 32, unsorted rows as sets; the inverse page transform; graph replay with new inputs;
// determinism of the sorted output; hostile lengths; the launcher's argument checks.
#include "dsv4/kernels/indexer_topk.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <climits>
#include <string>
#include <vector>

#include "dsv4/cases/indexer_topk.hpp"
#include "dsv4/fixtures/gpu_test.hpp"
#include "dsv4/fixtures/launcher_args.hpp"
#include "dsv4/ref/indexer_topk.hpp"

namespace dsv4 {
namespace {

namespace ki = kernels::indexer_topk;
using cases::IndexerTopkCase;
using cases::IndexerTopkShape;
using cases::ScoreKind;
using fx::Launch;
using ::testing::HasSubstr;

using SweepParam = fx::Sweep<IndexerTopkShape>;

// The shapes; the other axes (sorted and its wave width, page tables, score kinds,
// padded strides, graph launches) rotate over them so every combination of two appears.
class IndexerTopkSweep : public fx::GpuTestWithParam<SweepParam> {};

// The selected set equals the reference's (ties broken alike, so exactly), sorted rows bit for
// bit, paged and raw outputs aligned; poison, canaries and the whole output checked by the harness.
TEST_P(IndexerTopkSweep, MatchesReference) {
  const IndexerTopkCase c(GetParam().shape);
  if (const auto why = c.cannot_run(); !why.empty()) GTEST_SKIP() << why;
  for (uint64_t seed : fx::case_seeds()) {
    DSV4_CASE(seed, c.name());
    fx::CaseRun run;
    EXPECT_TRUE(fx::check_case(c, seed, stream(), {.launch = GetParam().launch}, &run));
    if (!run.got.count("raw")) continue;
    // The inverse page transform of the paged output recovers the raw output, entry by entry.
    const auto& pt = run.inputs.at("page_table");
    const auto paged = run.got.at("out").values<int32_t>();
    std::vector<int32_t> back(paged.size());
    ref::indexer_topk::inverse_page_transform(paged, size_t(c.shape().K), pt.values<int32_t>(),
                                              pt.shape[1], pt.shape[1], GetParam().shape.page_bits,
                                              back);
    EXPECT_EQ(back, run.got.at("raw").values<int32_t>()) << "inverse page transform";
  }
}

DSV4_CASE_SWEEP(IndexerTopkSweep, cases::indexer_topk_gpu_sweep());

class IndexerTopk : public fx::GpuTest {};

// Sorted outputs under graph replay with new inputs in the captured buffers, and determinism.
TEST_F(IndexerTopk, GraphReplayAndDeterminismOfTheSortedOutput) {
  const uint64_t seed = fx::test_seed();
  for (const IndexerTopkShape& s : {IndexerTopkShape{.B = 31,
                                   .width = 16385,
                                   .K = 512,
                                   .len = -1,
                                   .sorted = true,
                                   .wave = 32,
                                   .page_bits = 6,
                                   .permuted = true},
                                    IndexerTopkShape{.B = 4,
                                    .width = 8193,
                                    .K = 2048,
                                    .len = 8193,
                                    .sorted = true,
                                    .wave = 16,
                                    .scores = ScoreKind::kTies}}) {
    const IndexerTopkCase c(s);
    DSV4_CASE(seed, c.name());
    EXPECT_TRUE(fx::check_graph_replay(c, seed, stream()));
    EXPECT_TRUE(fx::check_deterministic(c, seed, stream(), 20));
  }
}

// Logical wave widths 16 and 32 sort to the same bytes (the shuffle and shared-memory steps
// split at different strides).
TEST_F(IndexerTopk, WaveWidthsSixteenAndThirtyTwoAgree) {
  const uint64_t seed = fx::test_seed();
  IndexerTopkShape s{.B = 30, .width = 8193, .K = 1024, .len = -1, .sorted = true};
  std::vector<fx::Tensors> got;
  for (int w : {16, 32}) {
    s.wave = w;
    fx::CaseRun run;
    DSV4_CASE(seed, IndexerTopkCase(s).name());
    EXPECT_TRUE(fx::check_case(IndexerTopkCase(s), seed, stream(), {}, &run));
    got.push_back(run.got);
  }
  EXPECT_TRUE(fx::bitwise_tensors(got[0].at("out"), got[1].at("out"), "out W16 vs W32"));
}

// Lengths outside [0, width]: negative selects nothing, beyond the width clamps to it.
TEST_F(IndexerTopk, HostileLengths) {
  const uint64_t seed = fx::test_seed();
  const IndexerTopkCase c({.B = 6,
                           .width = 3000,
                           .K = 512,
                           .len = 3000,
                           .sorted = true,
                           .wave = 32,
                           .scores = ScoreKind::kHostile});
  fx::Rng rng(seed);
  fx::Tensors in = c.draw(rng);
  in["lens"] = fx::st::Tensor::of<int32_t>({-1, INT_MIN, INT_MAX, 3001, 513, 0});
  DSV4_CASE(seed, c.name() << " hostile lens");
  EXPECT_TRUE(fx::check_case(c, in, seed, stream()));
}

// Argument checks run before any device work, so they hold without a GPU too.
TEST(IndexerTopkArgs, BadArgumentsNameTheField) {
  const ki::Args ok{.scores = fx::fake<float>(),
                    .stride = 1024,
                    .width = 1024,
                    .lens = fx::fake<int32_t>(),
                    .B = 2,
                    .K = 512,
                    .out = fx::fake<int32_t>()};
  auto with = [&](auto change) {
    ki::Args a = ok;
    change(a);
    return fx::launch_error([&] { ki::topk(a, 32, nullptr); });
  };
  EXPECT_THAT(with([](ki::Args& a) { a.K = 0; }), HasSubstr("K=0"));
  EXPECT_THAT(with([](ki::Args& a) { a.K = 2049; }), HasSubstr("K=2049"));
  EXPECT_THAT(with([](ki::Args& a) { a.stride = 1000; }), HasSubstr("stride=1000"));
  EXPECT_THAT(with([](ki::Args& a) { a.page_bits = 31; }), HasSubstr("page_bits=31"));
  EXPECT_THAT(with([](ki::Args& a) { a.out = nullptr; }), HasSubstr("null pointer"));
  EXPECT_THAT(with([](ki::Args& a) {
                a.page_table = fx::fake<int32_t>();
                a.pt_stride = 0;
              }),
              HasSubstr("pt_stride=0"));
  EXPECT_THAT(with([](ki::Args& a) {
                a.page_table = fx::fake<int32_t>();
                a.page_bits = 6;
                a.pt_stride = 15;  // 15 pages of 64 keys cover 960 < width=1024
              }),
              HasSubstr("pt_stride=15 pages of 2^6 keys do not cover width=1024"));
  EXPECT_THAT(fx::launch_error([&] { ki::topk(ok, 8, nullptr); }), HasSubstr("W=8"));
  EXPECT_FALSE(ki::wave_supported(8));
  EXPECT_TRUE(ki::wave_supported(16) && ki::wave_supported(32));
}

}  // namespace
}  // namespace dsv4

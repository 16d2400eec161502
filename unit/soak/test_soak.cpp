// Soak tests: each kernel family launched 200,000 times (DSV4_SOAK_LAUNCHES overrides) back to back
// over rotating shapes that cover every path its launcher can pick, on one workspace where the API
// shares one, each launch under the deadline and every 1,000th compared with the reference.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "dsv4/cases/candidate_blocks.hpp"
#include "dsv4/cases/compact_pages.hpp"
#include "dsv4/cases/indexer_topk.hpp"
#include "dsv4/cases/kv_store.hpp"
#include "dsv4/cases/ring_layout.hpp"
#include "dsv4/cases/sampling_renorm.hpp"
#include "dsv4/cases/sparse_decode.hpp"
#include "dsv4/cases/split_combine.hpp"
#include "dsv4/fixtures/gpu_test.hpp"
#include "dsv4/fixtures/soak.hpp"
#include "dsv4/kernels/compact_pages.hpp"
#include "dsv4/kernels/sampling_renorm.hpp"

namespace dsv4 {
namespace {

using Cases = std::vector<std::unique_ptr<fx::KernelCase>>;
constexpr KvLayout kLayouts[] = {KvLayout::kV41, KvLayout::kV41Fp4, KvLayout::kV4,
                                 KvLayout::kV4Fnuz};

class Soak : public fx::GpuTest {
 protected:
  // Soaks `cases` and prints the launches, checks and minutes (a JUnit property too).
  void run(Cases all) {
    // Shapes this device cannot run (64 lanes on a wave32 device) are named and left out; a soak
    // with none left fails.
    Cases cases;
    for (auto& c : all)
      if (const std::string why = c->cannot_run(); why.empty())
        cases.push_back(std::move(c));
      else
        std::printf("[soak] not on this device: %s: %s\n", c->name().c_str(), why.c_str());
    ASSERT_FALSE(cases.empty()) << "no soak shape can run on this device";
    fx::SoakOptions o;
    o.launches = fx::soak_launches(200000);
    fx::SoakResult r;
    ASSERT_TRUE(fx::soak(cases, stream(), o, &r));
    EXPECT_EQ(r.launches, o.launches);
    EXPECT_GE(r.checks, o.launches / o.check_every);
    std::printf("[soak] %s: %llu launches over %zu shapes, %llu checked, %.2f min\n",
                cases[0]->family().c_str(), (unsigned long long)r.launches, cases.size(),
                (unsigned long long)r.checks, r.seconds / 60);
    RecordProperty("launches", std::to_string(r.launches));
    RecordProperty("minutes", std::to_string(r.seconds / 60));
  }
};

// Every path: one block per row, multi-launch and fused (the shape that hung, B = 64 at the
// vocabulary of DeepSeek-V4), top-k and top-p, in place; one workspace for all.
TEST_F(Soak, SamplingRenorm) {
  namespace ks = kernels::sampling_renorm;
  using cases::SamplingRenormCase;
  Cases c;
  for (bool top_p : {false, true}) {
    c.push_back(std::make_unique<SamplingRenormCase>(cases::SamplingRenormShape{
        .B = 64, .V = 129280, .top_p = top_p, .rows = cases::RowKind::kSoftmax}));
    c.push_back(std::make_unique<SamplingRenormCase>(cases::SamplingRenormShape{
        .B = 1, .V = 129280, .top_p = top_p, .variant = ks::Variant::kFused}));
    c.push_back(std::make_unique<SamplingRenormCase>(cases::SamplingRenormShape{
        .B = 3, .V = 20000, .top_p = top_p, .variant = ks::Variant::kMultiLaunch}));
    c.push_back(std::make_unique<SamplingRenormCase>(
        cases::SamplingRenormShape{.B = 5, .V = 5000, .top_p = top_p, .in_place = true}));
    c.push_back(std::make_unique<SamplingRenormCase>(
        cases::SamplingRenormShape{.B = 512, .V = 4097, .top_p = top_p}));
    c.push_back(std::make_unique<SamplingRenormCase>(
        cases::SamplingRenormShape{.B = 7, .V = 1000, .top_p = top_p}));
  }
  run(std::move(c));
}

// Unsplit and split, every main layout, the extra caches SGLang pairs, 16 to 128 heads.
TEST_F(Soak, SparseDecode) {
  using cases::SparseDecodeCase;
  using cases::spread_shape;
  Cases c;
  for (KvLayout l : kLayouts) {
    c.push_back(std::make_unique<SparseDecodeCase>(spread_shape(2, 16, 576, l, 64, 0)));
    c.push_back(std::make_unique<SparseDecodeCase>(spread_shape(2, 64, 576, l, 64, 4)));
  }
  c.push_back(
      std::make_unique<SparseDecodeCase>(spread_shape(1, 128, 2048, KvLayout::kV41, 64, 0)));
  c.push_back(std::make_unique<SparseDecodeCase>(
      spread_shape(4, 16, 576, KvLayout::kV41, 64, 0, 64, KvLayout::kV41Fp4)));
  c.push_back(std::make_unique<SparseDecodeCase>(
      spread_shape(2, 48, 576, KvLayout::kV41, 64, 3, 64, KvLayout::kV41Fp4)));
  run(std::move(c));
}

// Unsplit-like (one split) and many splits, sinks and RoPE, both kernel variants.
TEST_F(Soak, SplitCombine) {
  using cases::SplitCombineCase;
  Cases c;
  for (int variant : {0, 1}) {
    c.push_back(
        std::make_unique<SplitCombineCase>(cases::SplitCombineShape{4, 1, 16, 512, {}, variant}));
    c.push_back(
        std::make_unique<SplitCombineCase>(cases::SplitCombineShape{8, 4, 16, 512, {}, variant}));
    c.push_back(
        std::make_unique<SplitCombineCase>(cases::SplitCombineShape{2, 64, 128, 512, {}, variant}));
  }
  run(std::move(c));
}

// Sorted at each wave width and unsorted, ragged and full rows, page tables, ties and hostile
// scores.
TEST_F(Soak, IndexerTopk) {
  using cases::IndexerTopkCase;
  using cases::IndexerTopkShape;
  Cases c;
  c.push_back(std::make_unique<IndexerTopkCase>(
      IndexerTopkShape{.B = 1, .width = 8192, .K = 2048, .len = 8192}));
  c.push_back(std::make_unique<IndexerTopkCase>(
      IndexerTopkShape{.B = 4, .width = 4096, .K = 512, .sorted = true, .wave = 16}));
  c.push_back(std::make_unique<IndexerTopkCase>(IndexerTopkShape{.B = 3,
                                                                 .width = 2048,
                                                                 .K = 512,
                                                                 .sorted = true,
                                                                 .wave = 32,
                                                                 .page_bits = 6,
                                                                 .permuted = true}));
  c.push_back(std::make_unique<IndexerTopkCase>(
      IndexerTopkShape{.B = 8, .width = 1024, .K = 512, .scores = cases::ScoreKind::kTies}));
  c.push_back(std::make_unique<IndexerTopkCase>(IndexerTopkShape{
      .B = 2, .width = 1024, .stride = 1040, .K = 512, .scores = cases::ScoreKind::kHostile}));
  c.push_back(std::make_unique<IndexerTopkCase>(IndexerTopkShape{.B = 16, .width = 300, .K = 512}));
  run(std::move(c));
}

// Both wave widths, block sizes 1 to 512, ragged and full rows, ties and hostile scores.
TEST_F(Soak, CandidateBlocks) {
  using cases::CandidateBlocksCase;
  using cases::CandidateBlocksShape;
  Cases c;
  int i = 0;
  for (int64_t bs : {1, 64, 512})
    for (int wave : {16, 32})
      c.push_back(
          std::make_unique<CandidateBlocksCase>(CandidateBlocksShape{.B = 3,
                                                                     .width = 4096,
                                                                     .len = i % 2 ? -1 : 4096,
                                                                     .bs = bs,
                                                                     .nb = 16,
                                                                     .K = 512,
                                                                     .wave = wave,
                                                                     .ties = i % 3 == 1,
                                                                     .hostile = i++ % 3 == 2}));
  run(std::move(c));
}

// The scatter store and the fused norm-RoPE store at each lane count.
TEST_F(Soak, KvStore) {
  using cases::KvStoreCase;
  Cases c;
  for (int lanes : {0, 16, 32, 64}) {
    c.push_back(std::make_unique<KvStoreCase>(
        cases::KvStoreShape{.T = 256, .R = 400, .width = 512, .lanes = lanes}));
    c.push_back(std::make_unique<KvStoreCase>(
        cases::KvStoreShape{.T = 7, .R = 16, .width = 576, .lanes = lanes}));
  }
  run(std::move(c));
}

// Quantise at each supported lane width and both variants, dequantise to bf16 and f32, every
// layout, slot and whole-page forms.
TEST_F(Soak, CompactPages) {
  namespace kc = kernels::compact_pages;
  using cases::CompactOp;
  using cases::CompactPagesCase;
  Cases c;
  for (KvLayout l : kLayouts) {
    for (int v : {8, 16, 32, 64})
      if (kc::values_per_lane_supported(l, v))
        c.push_back(
            std::make_unique<CompactPagesCase>(cases::CompactPagesShape{.op = CompactOp::kQuantize,
                                                                        .layout = l,
                                                                        .page_size = 64,
                                                                        .T = 300,
                                                                        .num_pages = 8,
                                                                        .values_per_lane = v}));
    for (int variant = 0; variant < kc::kQuantVariants; ++variant)
      c.push_back(
          std::make_unique<CompactPagesCase>(cases::CompactPagesShape{.op = CompactOp::kQuantize,
                                                                      .layout = l,
                                                                      .page_size = 64,
                                                                      .num_pages = 3,
                                                                      .variant = variant,
                                                                      .whole_pages = true}));
    for (CompactOp op : {CompactOp::kDequantizeBf16, CompactOp::kDequantizeF32})
      for (int variant = 0; variant < kc::kDequantVariants; ++variant)
        c.push_back(std::make_unique<CompactPagesCase>(cases::CompactPagesShape{
            .op = op, .layout = l, .page_size = 64, .T = 300, .num_pages = 8, .variant = variant}));
  }
  run(std::move(c));
}

// Every launcher of the family (token, verify, window and prefill layouts) on each case.
TEST_F(Soak, RingLayout) {
  using cases::RingLayoutCase;
  Cases c;
  c.push_back(std::make_unique<RingLayoutCase>(cases::RingLayoutShape{.n = 64}));
  c.push_back(std::make_unique<RingLayoutCase>(cases::RingLayoutShape{.n = 4096}));
  c.push_back(std::make_unique<RingLayoutCase>(
      cases::RingLayoutShape{.n = 513, .first_offset = 200, .max_request = 40}));
  c.push_back(std::make_unique<RingLayoutCase>(
      cases::RingLayoutShape{.n = 4096, .V = 8, .win = 64, .max_pos = int64_t(1) << 20}));
  run(std::move(c));
}

}  // namespace
}  // namespace dsv4

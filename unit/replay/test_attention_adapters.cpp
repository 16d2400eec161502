// dsv4-replay's split_combine and sparse_decode adapters: a case drawn by the kernel case replays
// through the reference (the reference's own outputs match; a planted change is reported at its
// coordinates), cases that do not fit name the tensor, and the sparse_decode comparator accepts an
// output within the derived tolerance and refuses one outside it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "dsv4/cases/sparse_decode.hpp"
#include "dsv4/cases/split_combine.hpp"
#include "dsv4/fixtures/case_file.hpp"
#include "dsv4/fixtures/seed.hpp"
#include "dsv4/replay/replay.hpp"

#include <unistd.h>

namespace dsv4::replay {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class AttentionAdapters : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dsv4_replay_attn_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  Result replay(const fx::Case& c, const std::string& name) {
    const std::string p = (dir_ / (name + ".safetensors")).string();
    c.write(p);
    return run({p, "", Mode::kReference});
  }
  fs::path dir_;
};

// The reference's outputs as the stored got.*: a case that must match.
fx::Case case_with_reference_outputs(const fx::KernelCase& k, const fx::Tensors& in) {
  fx::Case c;
  c.family = k.family();
  c.name = k.name();
  c.inputs = in;
  c.got = find_family(k.family())->reference(c);
  return c;
}

TEST_F(AttentionAdapters, SplitCombineCaseReplaysBitwise) {
  const uint64_t seed = fx::test_seed();
  const cases::SplitCombineCase k({8, 3, 2, 64, {.n_pos = 16}});
  DSV4_CASE(seed, k.name());
  fx::Rng rng(seed);
  fx::Case c = case_with_reference_outputs(k, k.draw(rng));
  EXPECT_EQ(replay(c, "match").exit_code, 0);
  auto out = c.got.at("out").values<bf16>();
  size_t i = 7 * 2 * 64 + 64 + 5;  // [7, 1, 5]: row 7 has S+1 splits (clamped), never empty
  out[i].bits ^= 1;
  c.got["out"] = st::Tensor::of<bf16>({8, 2, 64}, out);
  const Result r = replay(c, "planted");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.report, HasSubstr("[7, 1, 5]"));
}

// The sglang sweep: SM100's caller's merge, D = 512 and no inverse RoPE; each point in SGLang's
// natural (acc, m, l) layout draws no RoPE table and replays its reference outputs bit for bit,
// and one value changed is a mismatch.
TEST_F(AttentionAdapters, SplitCombineSglangSweepMergesWithoutTheInverseRope) {
  const uint64_t seed = fx::test_seed();
  const auto points = cases::split_combine_sglang_sweep();
  ASSERT_FALSE(points.empty());
  for (const auto& p : points) {
    cases::SplitCombineShape s = p.shape;
    s.unnormalised = true;
    s.m2 = false;  // sglang-natural
    const cases::SplitCombineCase k(s);
    DSV4_CASE(seed, k.name());
    EXPECT_EQ(s.D, 512);
    EXPECT_THAT(k.name(), ::testing::Not(HasSubstr("rope")));
    fx::Rng rng(seed);
    fx::Case c = case_with_reference_outputs(k, k.draw(rng));
    EXPECT_EQ(c.inputs.count("cos_sin") + c.inputs.count("positions"), 0u);
    EXPECT_EQ(c.inputs.count("acc"), 1u);
    EXPECT_EQ(replay(c, "sglang").exit_code, 0);
    auto out = c.got.at("out").values<bf16>();
    size_t i = 0;
    while (i < out.size() && bf16_to_f32(out[i]) == 0) ++i;
    ASSERT_LT(i, out.size()) << "an all-zero output";
    out[i] = f32_to_bf16(bf16_to_f32(out[i]) * 1.5f + 0.25f);
    c.got["out"] = st::Tensor::of<bf16>(c.got.at("out").shape, out);
    EXPECT_EQ(replay(c, "sglang_changed").exit_code, 1);
  }
}

TEST_F(AttentionAdapters, SplitCombineCaseThatDoesNotFitNamesTheTensor) {
  fx::Rng rng(fx::test_seed());
  const cases::SplitCombineCase k({2, 2, 2, 8, {}});
  fx::Tensors in = k.draw(rng);
  in.erase("lse");
  fx::Case c;
  c.family = "split_combine";
  c.inputs = in;
  c.got["out"] = st::Tensor::of<bf16>({2, 2, 8}, std::vector<bf16>(32));
  const Result r = replay(c, "missing");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.report, HasSubstr("in.lse"));
}

TEST_F(AttentionAdapters, SparseDecodeWithinToleranceMatchesOutsideDoesNot) {
  const uint64_t seed = fx::test_seed();
  cases::SparseDecodeShape s;
  s.s = {.B = 3,
         .H = 16,
         .K = 40,
         .page_size = 16,
         .num_pages = 6,
         .Ke = 8,
         .extra_layout = KvLayout::kV41Fp4,
         .extra_page_size = 1,
         .extra_pages = 20};
  s.splits = 3;
  const cases::SparseDecodeCase k(s);
  DSV4_CASE(seed, k.name());
  fx::Rng rng(seed);
  const fx::Tensors in = k.draw(rng);
  fx::Case c;
  c.family = "sparse_decode";
  c.inputs = in;
  const Outputs want = find_family("sparse_decode")->reference(c);
  // The kernel's dtypes: bf16 out, fp32 lse and partials; the fp64 values rounded once.
  auto to = [](const st::Tensor& t, st::DType d) {
    const std::vector<double> v = t.to_f64();
    if (d == st::DType::BF16) {
      std::vector<bf16> b(v.size());
      for (size_t i = 0; i < v.size(); ++i) b[i] = f32_to_bf16(float(v[i]));
      return st::Tensor::of<bf16>(t.shape, b);
    }
    return st::Tensor::of<float>(t.shape, std::vector<float>(v.begin(), v.end()));
  };
  c.got["out"] = to(want.at("out"), st::DType::BF16);
  c.got["out_lse"] = to(want.at("out_lse"), st::DType::F32);
  c.got["part_o"] = to(want.at("part_o"), st::DType::F32);
  c.got["part_lse"] = to(want.at("part_lse"), st::DType::F32);
  c.got["errors"] = want.at("errors");
  EXPECT_EQ(replay(c, "within").exit_code, 0) << replay(c, "within").report;
  auto lse = c.got.at("out_lse").values<float>();
  for (size_t i = 0; i < lse.size(); ++i)
    if (std::isfinite(lse[i])) {
      lse[i] += 0.01f;  // far past the derived bound
      break;
    }
  c.got["out_lse"] = st::Tensor::of<float>(c.got.at("out_lse").shape, lse);
  const Result r = replay(c, "outside");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.report, HasSubstr("out_lse"));
}

// "finite-sinks" (the sglang sweep): every head's sink finite over many seeds, where the default
// draw mixes +-inf in; the vars are read back from the file; a file stating finite-sinks whose
// sinks hold an infinity is refused (exit 2) naming dsv4.shape.
TEST_F(AttentionAdapters, SparseDecodeFiniteSinksCaseHoldsOnlyFiniteSinks) {
  const uint64_t seed = fx::test_seed();
  cases::SparseDecodeShape s = cases::spread_shape(2, 64, 64, KvLayout::kV4, 16);
  s.finite_sinks = true;
  const cases::SparseDecodeCase k(s);
  DSV4_CASE(seed, k.name());
  EXPECT_THAT(k.name(), HasSubstr("finite-sinks"));
  int mixed_inf = 0;
  for (uint64_t i = 0; i < 8; ++i) {
    fx::Rng rng(seed + i);
    for (float x : k.draw(rng).at("sink").values<float>()) EXPECT_TRUE(std::isfinite(x)) << x;
    fx::Rng rng2(seed + i);
    for (float x : cases::SparseDecodeCase(cases::spread_shape(2, 64, 64, KvLayout::kV4, 16))
                       .draw(rng2)
                       .at("sink")
                       .values<float>())
      mixed_inf += !std::isfinite(x);
  }
  EXPECT_GT(mixed_inf, 0) << "the default draw mixes infinite sinks in";

  fx::Rng rng(seed);
  fx::Case c = case_with_reference_outputs(k, k.draw(rng));
  c.metadata["dsv4.shape"] = k.shape_spec();
  EXPECT_EQ(find_family("sparse_decode")->make(c).k->shape_spec(), k.shape_spec());
  EXPECT_EQ(replay(c, "finite").exit_code, 0);
  auto sink = c.inputs.at("sink").values<float>();
  sink[3] = std::numeric_limits<float>::infinity();
  c.inputs["sink"] = st::Tensor::of<float>(sink);  // refused before any output is judged
  const Result r = replay(c, "inf_sink");
  EXPECT_EQ(r.exit_code, 2) << r.report;
  EXPECT_THAT(r.report, HasSubstr("dsv4.shape"));
}

TEST_F(AttentionAdapters, SparseDecodeRejectsAnUnacceptedLayoutPair) {
  fx::Rng rng(fx::test_seed());
  cases::SparseDecodeShape s;
  s.s = {.B = 1,
         .H = 16,
         .K = 8,
         .layout = KvLayout::kV41Fp4,
         .page_size = 16,
         .num_pages = 2,
         .Ke = 8,
         .extra_layout = KvLayout::kV4,
         .extra_page_size = 16,
         .extra_pages = 2};
  const cases::SparseDecodeCase k(s);
  fx::Case c;
  c.family = "sparse_decode";
  c.inputs = k.draw(rng);
  c.got["errors"] = st::Tensor::scalar<int64_t>(0);
  const Result r = replay(c, "pair");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.report, HasSubstr("(main, extra) layouts (v41_fp4, v4)"));
}

}  // namespace
}  // namespace dsv4::replay

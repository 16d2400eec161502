// sampling_renorm kernels against the reference through the kernel-case harness: top-k and top-p
// over a sweep of V (1 .. 262144) and batches, with softmax, tied, equal, one-hot, hostile (NaN,
// negatives, inf, subnormals) and zero rows and per-row k or p at their edges; bit for bit against
// the kernel-arithmetic reference, within rtol 1e-5 of the fp64 specification (same kept set
// except at the documented fixed-point boundary), rows summing to 1; graph replay with new
// inputs, determinism, in place, argument checks. Shapes whose rows spread over several blocks run
// both the fused and the multi-launch variant; fused and multi-launch launches sharing a workspace.
#include "dsv4/kernels/sampling_renorm.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "dsv4/cases/sampling_renorm.hpp"
#include "dsv4/fixtures/gpu_test.hpp"
#include "dsv4/fixtures/launcher_args.hpp"
#include "dsv4/ref/sampling_renorm.hpp"

namespace dsv4 {
namespace {

namespace ks = kernels::sampling_renorm;
namespace rs = ref::sampling_renorm;
using cases::RowKind;
using cases::SamplingRenormCase;
using cases::SamplingRenormShape;
using fx::Launch;
using ks::Variant;
using ::testing::HasSubstr;

// The kernel's output against the fp64 specification: rows whose fp64 and fixed-point pivots
// agree within rtol 1e-5 (the kept sets then agree exactly), every non-zero row summing to 1.
void expect_fp64_agreement(const SamplingRenormCase& c, const fx::CaseRun& run) {
  const auto& s = c.shape();
  const size_t B = size_t(s.B), V = size_t(s.V);
  const auto x = run.inputs.at("probs").values<float>();
  const auto got = run.got.at("out").values<float>();
  std::vector<float> want(x.size());
  std::vector<float> p;
  if (s.top_p) {
    p = run.inputs.at("p").values<float>();
    rs::top_p(x, V, p, want);
  } else {
    rs::top_k(x, V, run.inputs.at("k").values<int32_t>(), want);
  }
  int boundary_rows = 0;
  for (size_t b = 0; b < B; ++b) {
    const std::span<const float> row(x.data() + b * V, V);
    if (s.top_p && rs::top_p_pivot(row, p[b]) != rs::top_p_pivot_fixed(row, p[b])) {
      ++boundary_rows;  // the documented fixed-point boundary: the kept sets may differ
      continue;
    }
    double sum = 0;
    for (size_t i = 0; i < V; ++i) {
      const float g = got[b * V + i], w = want[b * V + i];
      ASSERT_EQ(g == 0, w == 0) << "row " << b << " entry " << i << " kept differently";
      ASSERT_NEAR(g, w, 1e-5 * std::abs(w)) << "row " << b << " entry " << i;
      sum += g;
    }
    if (sum > 0) {
      EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << b;
    }
  }
  EXPECT_LE(boundary_rows, 1) << "rows at the fixed-point boundary";
}

using SweepParam = fx::Sweep<SamplingRenormShape>;

class SamplingRenormSweep : public fx::GpuTestWithParam<SweepParam> {};

// A variant asked for by name runs as asked on this device (else its instance tests nothing new).
void expect_path(const SamplingRenormShape& s) {
  if (s.variant == Variant::kAuto) return;
  const ks::Path want = s.variant == Variant::kFused ? ks::Path::kFused : ks::Path::kMultiLaunch;
  EXPECT_EQ(ks::path_name(ks::path_of(s.B, s.V, s.top_p, s.variant)),
            std::string(ks::path_name(want)))
      << s.str();
}

TEST_P(SamplingRenormSweep, MatchesReference) {
  const SamplingRenormCase c(GetParam().shape);
  expect_path(GetParam().shape);
  for (uint64_t seed : fx::case_seeds()) {
    DSV4_CASE(seed, c.name());
    fx::CaseRun run;
    EXPECT_TRUE(fx::check_case(c, seed, stream(), {.launch = GetParam().launch}, &run));
    if (!run.got.empty()) expect_fp64_agreement(c, run);
  }
}

DSV4_CASE_SWEEP(SamplingRenormSweep, cases::sampling_renorm_gpu_sweep());

class SamplingRenorm : public fx::GpuTest {};

TEST_F(SamplingRenorm, GraphReplayAndDeterminism) {
  const uint64_t seed = fx::test_seed();
  for (bool top_p : {false, true})
    for (Variant v : {Variant::kFused, Variant::kMultiLaunch}) {
      const SamplingRenormCase c({.B = 9, .V = 20000, .top_p = top_p, .variant = v});
      DSV4_CASE(seed, c.name());
      expect_path(c.shape());
      EXPECT_TRUE(fx::check_graph_replay(c, seed, stream()));
      EXPECT_TRUE(fx::check_deterministic(c, seed, stream(), 10));
    }
}

// out == probs: the kernel reads each entry before writing it, in every pass (top-k and top-p,
// both multi-block variants, on the harness: poisoned canaries, whole-output compare).
TEST_F(SamplingRenorm, InPlace) {
  for (bool top_p : {false, true})
    for (Variant v : {Variant::kFused, Variant::kMultiLaunch}) {
      const SamplingRenormShape s{
          .B = 3, .V = 5000, .top_p = top_p, .variant = v, .in_place = true};
      expect_path(s);
      fx::expect_case(SamplingRenormCase(s), stream());
    }
}

// Nothing a launch leaves in the workspace misleads the next: fused launches of several shapes,
// top-k and top-p, and multi-launch ones between them share one workspace (fx::shared_scratch)
// that is never re-poisoned, eagerly twice and then as one graph of all of them replayed three
// times, each case's outputs reset before every round and then compared with its reference
// through the harness (canaries included).
TEST_F(SamplingRenorm, FusedLaunchesShareAWorkspace) {
  const uint64_t seed = fx::test_seed();
  const std::vector<SamplingRenormShape> shapes = {
      {.B = 1, .V = 129280, .top_p = false, .variant = Variant::kFused},
      {.B = 1, .V = 129280, .top_p = true, .variant = Variant::kFused},
      {.B = 3, .V = 20000, .top_p = true, .variant = Variant::kMultiLaunch},
      {.B = 3, .V = 20000, .top_p = true, .variant = Variant::kFused},
      {.B = 2, .V = 262144, .top_p = false, .variant = Variant::kFused}};
  std::vector<std::unique_ptr<SamplingRenormCase>> cases;
  std::vector<const fx::KernelCase*> ptrs;
  std::vector<fx::Tensors> inputs, wants;
  for (size_t i = 0; i < shapes.size(); ++i) {
    expect_path(shapes[i]);
    cases.push_back(std::make_unique<SamplingRenormCase>(shapes[i]));
    ptrs.push_back(cases.back().get());
    fx::Rng rng(seed + i);
    inputs.push_back(cases.back()->draw(rng));
    wants.push_back(cases.back()->reference(inputs.back()));
  }
  const fx::CaseDevice::SharedScratch shared = fx::shared_scratch(ptrs, inputs, stream());
  ASSERT_EQ(shared.size(), 1u) << "the shapes share one workspace";
  size_t largest = 0;
  for (const auto& sh : shapes) largest = std::max(largest, ks::workspace_bytes(sh.B, sh.V));
  EXPECT_EQ(shared.at("workspace")->bytes(), largest);
  std::vector<std::unique_ptr<fx::CaseDevice>> devs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    devs.push_back(std::make_unique<fx::CaseDevice>(*cases[i], inputs[i], stream(), shared));
    devs.back()->set_seed(seed + i);
    if (cases[i]->scratch(inputs[i]).empty()) continue;  // rows that fit one block
    ASSERT_EQ(devs.back()->tensors().ptr<uint8_t>("workspace"),
              static_cast<uint8_t*>(shared.begin()->second->device()))
        << shapes[i].str();
  }
  auto reset_outputs = [&] {
    for (auto& d : devs) d->reset_outputs_only();  // the workspace as the last launch left it
  };
  auto expect_all = [&](const std::string& when) {
    for (size_t i = 0; i < devs.size(); ++i) {
      DSV4_CASE(seed + i, shapes[i].str() + " " + when);
      EXPECT_TRUE(devs[i]->check_outputs(wants[i]));
    }
  };
  for (int round = 0; round < 2; ++round) {
    reset_outputs();
    for (auto& d : devs) d->launch();
    expect_all("eager round " + std::to_string(round));
  }
  gpu::Graph graph;
  graph.capture(stream(), [&](gpu::Stream st) {
    for (size_t i = 0; i < devs.size(); ++i) cases[i]->launch(devs[i]->tensors(), st);
  });
  for (int round = 0; round < 3; ++round) {
    reset_outputs();
    devs.front()->launch_counted([&] { graph.replay(stream()); });
    expect_all("graph replay " + std::to_string(round));
  }
}

TEST(SamplingRenormArgs, BadArgumentsNameTheField) {
  auto f = fx::fake<float>();
  auto k = fx::fake<int32_t>();
  auto ws = fx::fake<void>();
  const size_t big = size_t(1) << 30;
  EXPECT_THAT(fx::launch_error([&] { ks::top_k(f, 1, 0, k, f, ws, big, nullptr); }),
              HasSubstr("V=0"));
  EXPECT_THAT(fx::launch_error([&] { ks::top_k(f, 1, (1 << 18) + 1, k, f, ws, big, nullptr); }),
              HasSubstr("V=262145"));
  EXPECT_THAT(fx::launch_error([&] { ks::top_p(f, -1, 8, f, f, ws, big, nullptr); }),
              HasSubstr("B=-1"));
  EXPECT_THAT(fx::launch_error([&] { ks::top_p(f, 2, 8, nullptr, f, ws, big, nullptr); }),
              HasSubstr("null pointer"));
  EXPECT_EQ(
      fx::launch_error([&] { ks::top_k(nullptr, 0, 8, nullptr, nullptr, nullptr, 0, nullptr); }),
      "no invalid_argument");  // B = 0 launches nothing
  // The workspace: missing, one byte short, misaligned.
  const size_t need = ks::workspace_bytes(1, 129280);
  ASSERT_GT(need, 0u);
  EXPECT_THAT(fx::launch_error([&] { ks::top_k(f, 1, 129280, k, f, nullptr, 0, nullptr); }),
              HasSubstr("workspace_bytes=0 is below workspace_bytes(B=1, V=129280)=" +
                        std::to_string(need)));
  EXPECT_THAT(fx::launch_error([&] { ks::top_p(f, 1, 129280, f, f, ws, need - 1, nullptr); }),
              HasSubstr("workspace_bytes=" + std::to_string(need - 1)));
  EXPECT_THAT(
      fx::launch_error([&] { ks::top_p(f, 1, 129280, f, f, fx::fake<void>(4100), need, nullptr); }),
      HasSubstr("workspace=4100 must be 8-byte aligned"));
  EXPECT_THAT(fx::launch_error([&] {
                ks::top_k(f, 1, 129280, k, f, ws, big, nullptr, static_cast<Variant>(7));
              }),
              HasSubstr("variant=7"));
  EXPECT_THAT(fx::launch_error([&] { (void)ks::path_of(1, 0, true); }), HasSubstr("V=0"));
  EXPECT_THAT(fx::launch_error([&] { (void)ks::workspace_bytes(3, 0); }), HasSubstr("V=0"));
  EXPECT_THAT(fx::launch_error([&] { (void)ks::workspace_bytes(-2, 8); }), HasSubstr("B=-2"));
}

// The workspace: none when every row fits one block (short rows, or enough rows to fill the
// device), and not growing past a bounded number of blocks as B grows.
TEST(SamplingRenormArgs, WorkspaceSize) {
  EXPECT_EQ(ks::workspace_bytes(0, 129280), 0u);
  EXPECT_EQ(ks::workspace_bytes(1, 4096), 0u);
  EXPECT_EQ(ks::workspace_bytes(512, 262144), 0u);
  EXPECT_GT(ks::workspace_bytes(1, 4097), 0u);
  EXPECT_GT(ks::workspace_bytes(256, 129280), 0u);
  EXPECT_LE(ks::workspace_bytes(256, 262144), size_t(4) << 20);
  EXPECT_LE(ks::workspace_bytes(1, 262144), ks::workspace_bytes(2, 262144));
}

}  // namespace
}  // namespace dsv4

// dsv4-replay in process: the registry, a planted kernel mismatch that replays to the same report,
// cases written the PyTorch way, and every refusal with its exit code.
#include "dsv4/replay/replay.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "dsv4/fixtures/case_file.hpp"
#include "dsv4/fixtures/compare.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/fixtures/seed.hpp"
#include "dsv4/gpu/runtime.hpp"

#include <unistd.h>

namespace dsv4::replay {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// The smoke specification, written out again here so the test does not trust the adapter.
std::vector<float> affine(const std::vector<float>& x, float scale, float bias) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float p = x[i] * scale;
    out[i] = p + bias;
  }
  return out;
}

float next_up(float v) { return f32_from_bits(f32_bits(v) + 1); }

class Replay : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dsv4_replay_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ::setenv("DSV4_CASE_DIR", dir_.string().c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("DSV4_CASE_DIR");
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A smoke case as a test would capture it: x, scale, bias, the reference output and `got`.
  fx::Case smoke_case(const std::vector<float>& x, const std::vector<float>& got) const {
    fx::Case c;
    c.family = "smoke";
    c.name = "n=" + std::to_string(x.size());
    c.seed = seed_;
    c.inputs["x"] = st::Tensor::of(x);
    c.inputs["scale"] = st::Tensor::scalar(kScale);
    c.inputs["bias"] = st::Tensor::scalar(kBias);
    c.want["out"] = st::Tensor::of(affine(x, kScale, kBias));
    c.got["out"] = st::Tensor::of(got);
    return c;
  }

  static constexpr float kScale = 1.75f, kBias = -0.3f;
  uint64_t seed_ = fx::test_seed();
  fs::path dir_;
};

TEST_F(Replay, SmokeIsRegisteredWithReferenceDeviceAndComparator) {
  const auto names = family_names();
  EXPECT_THAT(names, ::testing::Contains("smoke"));
  const Family* f = find_family("smoke");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->make);
  EXPECT_THAT(f->summary, HasSubstr("in.x"));
  EXPECT_EQ(find_family("no_such_family"), nullptr);
  EXPECT_THROW(register_family(*f), std::logic_error) << "a second 'smoke' must be refused";
}

TEST_F(Replay, MatchingCaseExitsZero) {
  fx::Rng rng(seed_);
  DSV4_CASE(seed_, "n=300");
  const auto x = fx::uniform_f32(rng, 300, -4, 4);
  smoke_case(x, affine(x, kScale, kBias)).write(path("ok.safetensors"));
  const Result r = run({path("ok.safetensors"), "", Mode::kReference});
  EXPECT_EQ(r.exit_code, 0) << r.report;
  EXPECT_THAT(r.report, HasSubstr("match:    got.out vs reference"));
  EXPECT_THAT(r.report, HasSubstr("result: match (1 outputs compared)"));
  EXPECT_THAT(r.report, HasSubstr("seed:   " + std::to_string(seed_)));
}

// The heart of the feature: a check that fails writes a case through the failing-test hook, and
// replaying that case against the reference reports the very same mismatch (same count, same
// coordinates, same values), with no GPU.
TEST_F(Replay, PlantedMismatchRoundTripsThroughTheFailingTestHook) {
  fx::Rng rng(seed_);
  const size_t n = 257;
  DSV4_CASE(seed_, "n=" << n);
  const auto x = fx::uniform_f32(rng, n, -4, 4);
  const auto want = affine(x, kScale, kBias);
  auto got = want;  // the faults smoke::Fault plants: one ULP, a swap, a NaN, a skipped element
  got[5] = next_up(got[5]);
  std::swap(got[100], got[101]);
  got[200] = std::numeric_limits<float>::quiet_NaN();
  got[256] = std::numeric_limits<float>::signaling_NaN();

  fx::Options opt;
  opt.name = "out";
  const auto check = fx::bitwise_equal(got, want, fx::Shape{n}, opt);
  ASSERT_FALSE(check);
  const std::string test_report = check.message();
  const auto hooked = fx::save_case_on_failure(check, [&] { return smoke_case(x, got); });
  ASSERT_FALSE(hooked);
  const std::string case_file = fx::case_path("n=" + std::to_string(n));
  ASSERT_TRUE(fs::exists(case_file)) << hooked.message();
  EXPECT_THAT(hooked.message(), HasSubstr(case_file + " --family smoke --reference"));

  const Result r = run({case_file, "smoke", Mode::kReference});
  EXPECT_EQ(r.exit_code, 1) << r.report;
  ASSERT_EQ(r.mismatches.count("out"), 1u) << r.report;
  EXPECT_EQ(r.mismatches.at("out"), test_report) << "the replay must report the test's mismatch";
  EXPECT_THAT(r.mismatches.at("out"), HasSubstr("5 of 257 elements differ bitwise; first at [5]"));
  for (const char* at : {"[5] got", "[100] got", "[101] got", "[200] got", "[256] got"})
    EXPECT_THAT(r.report, HasSubstr(at));
  EXPECT_THAT(r.report, HasSubstr("result: MISMATCH"));
  EXPECT_THAT(r.report,
              HasSubstr("test:   Replay.PlantedMismatchRoundTripsThroughTheFailingTestHook"));
}

// What a PyTorch user saves: in.* (scalars as 0-d tensors) and got.* from their own kernel, no
// dsv4 metadata; the family comes from the command line.
TEST_F(Replay, CaseWithoutMetadataAndOnlyGotReplaysWithFamilyGiven) {
  st::File f;
  const std::vector<float> x = {0.5f, -1.25f, 3.0f, 1e-3f, -7.5f, 2.0f};
  f.tensors["in.x"] = st::Tensor::of<float>({2, 3}, x);
  f.tensors["in.scale"] = st::Tensor::scalar(kScale);
  f.tensors["in.bias"] = st::Tensor::scalar(kBias);
  f.tensors["got.out"] = st::Tensor::of<float>({2, 3}, affine(x, kScale, kBias));
  f.metadata["format"] = "pt";
  st::write_file(path("torch.safetensors"), f);
  Result r = run({path("torch.safetensors"), "smoke", Mode::kReference});
  EXPECT_EQ(r.exit_code, 0) << r.report;

  auto bad = affine(x, kScale, kBias);
  bad[4] += 0.5f;
  f.tensors["got.out"] = st::Tensor::of<float>({2, 3}, bad);
  st::write_file(path("torch_bad.safetensors"), f);
  r = run({path("torch_bad.safetensors"), "smoke", Mode::kReference});
  EXPECT_EQ(r.exit_code, 1) << r.report;
  EXPECT_THAT(r.mismatches["out"], HasSubstr("out [2, 3]: 1 of 6 elements differ bitwise; first "
                                             "at [1, 1]"));

  r = run({path("torch.safetensors"), "", Mode::kReference});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.report, HasSubstr("pass --family NAME (known: "));
}

TEST_F(Replay, OnlyWantStoredChecksTheReferenceAgainstIt) {
  const std::vector<float> x = {1, 2, 3};
  fx::Case c = smoke_case(x, {});
  c.got.clear();
  c.want["out"] = st::Tensor::of(std::vector<float>{2.0f, 2.0f, 2.0f});
  c.write(path("want_only.safetensors"));
  const Result r = run({path("want_only.safetensors"), "", Mode::kReference});
  EXPECT_EQ(r.exit_code, 1) << r.report;
  EXPECT_THAT(r.report, HasSubstr("stored: want.out"));
}

TEST_F(Replay, RefusalsCarryExitCodeTwo) {
  const std::vector<float> x = {1, 2, 3};
  // Malformed file.
  {
    std::ofstream(path("garbage.safetensors")) << "not a safetensors file";
    const Result r = run({path("garbage.safetensors"), "smoke", Mode::kReference});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_THAT(r.report, HasSubstr("malformed case file"));
    EXPECT_THAT(r.report, HasSubstr("header length"));
  }
  // Unknown family, and a family that contradicts the case.
  smoke_case(x, affine(x, kScale, kBias)).write(path("c.safetensors"));
  Result r = run({path("c.safetensors"), "nope", Mode::kReference});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.report, HasSubstr("contradicts the case's dsv4.family 'smoke'"));
  fx::Case c = smoke_case(x, affine(x, kScale, kBias));
  c.family = "";
  c.write(path("nofamily.safetensors"));
  r = run({path("nofamily.safetensors"), "nope", Mode::kReference});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.report, HasSubstr("unknown family 'nope' (known: "));
  // Missing input, wrong dtype, wrong scalar shape.
  c = smoke_case(x, affine(x, kScale, kBias));
  c.inputs.erase("bias");
  c.write(path("missing.safetensors"));
  r = run({path("missing.safetensors"), "", Mode::kReference});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.report, HasSubstr("tensor 'in.bias' field 'missing'"));
  c = smoke_case(x, affine(x, kScale, kBias));
  c.inputs["x"] = st::Tensor::of(std::vector<double>{1, 2, 3});
  c.write(path("dtype.safetensors"));
  r = run({path("dtype.safetensors"), "", Mode::kReference});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.report,
              HasSubstr("tensor 'in.x' field 'dtype': F64, the smoke case layout reads F32"));
  c = smoke_case(x, affine(x, kScale, kBias));
  c.inputs["scale"] = st::Tensor::of(std::vector<float>{1, 2});
  c.write(path("scalar.safetensors"));
  r = run({path("scalar.safetensors"), "", Mode::kReference});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.report, HasSubstr("tensor 'in.scale' field 'shape'"));
  // No stored output at all, and an output the family does not produce.
  c = smoke_case(x, {});
  c.got.clear();
  c.want.clear();
  c.write(path("nooutput.safetensors"));
  r = run({path("nooutput.safetensors"), "", Mode::kReference});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.report, HasSubstr("stores no output"));
  c = smoke_case(x, affine(x, kScale, kBias));
  c.got["lse"] = st::Tensor::of(std::vector<float>{0});
  c.write(path("extra.safetensors"));
  r = run({path("extra.safetensors"), "", Mode::kReference});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.report, HasSubstr("produces no output 'lse'"));
}

TEST_F(Replay, ShapeOfTheStoredOutputMustMatch) {
  const std::vector<float> x = {1, 2, 3, 4};
  fx::Case c = smoke_case(x, affine(x, kScale, kBias));
  c.got["out"].shape = {2, 2};
  c.write(path("shape.safetensors"));
  const Result r = run({path("shape.safetensors"), "", Mode::kReference});
  EXPECT_EQ(r.exit_code, 1) << r.report;
  EXPECT_THAT(r.mismatches.at("out"), HasSubstr("shape [2, 2] under test, [4] expected"));
}

TEST_F(Replay, DeviceModeWithoutAGpuExitsThree) {
  std::string why;
  if (gpu::available(&why)) GTEST_SKIP() << "a GPU is present; the device round trip runs instead";
  const std::vector<float> x = {1, 2, 3};
  smoke_case(x, affine(x, kScale, kBias)).write(path("c.safetensors"));
  const Result r = run({path("c.safetensors"), "", Mode::kDevice});
  EXPECT_EQ(r.exit_code, 3) << r.report;
  EXPECT_THAT(r.report, HasSubstr("--device needs a GPU: " + why));
}

}  // namespace
}  // namespace dsv4::replay

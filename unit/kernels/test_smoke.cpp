// smoke: the kernel-case harness catches each planted fault (canaries, poison, NaN, swap, one ULP,
// unwritten element, stale graph replay), writes the case file, and passes the fault-free kernel;
// a hand-driven CaseDevice checks its canaries when destroyed.
#include "dsv4/kernels/smoke.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "dsv4/cases/smoke.hpp"
#include "dsv4/fixtures/gpu_test.hpp"

namespace dsv4 {
namespace {

using cases::SmokeCase;
using kernels::smoke::Fault;
using ::testing::HasSubstr;

class Smoke : public fx::GpuTest {
 protected:
  // Runs the harness's check on a faulty kernel without writing a case file.
  ::testing::AssertionResult check(Fault fault, size_t at) {
    return fx::check_case(SmokeCase({.fault = fault, .at = at}), fx::test_seed(), stream(),
                          {.save_case = false}, &run_);
  }
  fx::CaseRun run_;
};

TEST_F(Smoke, FaultFreeKernelPassesEveryCheck) {
  for (fx::Launch l : {fx::Launch::kEager, fx::Launch::kGraph})
    fx::expect_case(SmokeCase(cases::SmokeShape{}), stream(), {.launch = l});
}

TEST_F(Smoke, WriteOnePastTheEndHitsTheBackCanary) {
  auto r = check(Fault::kPastEnd, 0);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("guard canaries of 'out'"));
  EXPECT_THAT(r.message(), HasSubstr("byte 4000 (after the buffer)"));
  EXPECT_TRUE(fx::bitwise_tensors(run_.got.at("out"), run_.want.at("out"), "out"))
      << "payload itself is right";
}

// A test that drives a CaseDevice by hand and never asks for the canaries still sees them: the
// device checks them when it is destroyed after a launch, and fails the test naming the case.
TEST_F(Smoke, HandDrivenCaseDeviceChecksItsCanariesWhenDestroyed) {
  static const SmokeCase faulty({.fault = Fault::kPastEnd, .at = 0});
  static fx::Tensors inputs;
  static gpu::Stream st;
  fx::Rng rng(fx::test_seed());
  inputs = faulty.draw(rng);
  st = stream();
  EXPECT_NONFATAL_FAILURE(
      {
        fx::CaseDevice dev(faulty, inputs, st);
        dev.reset_outputs();
        dev.launch();
      },
      "canaries after its last launch");
  // Checked by hand after the launch: nothing left for the destructor to report.
  fx::CaseDevice dev(faulty, inputs, st);
  dev.reset_outputs();
  dev.launch();
  EXPECT_FALSE(dev.guards_intact());
}

TEST_F(Smoke, WriteBeforeTheBeginningHitsTheFrontCanary) {
  auto r = check(Fault::kBeforeBegin, 0);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("byte -4 (before the buffer)"));
}

TEST_F(Smoke, PlantedNaNIsCaughtByBothComparators) {
  auto r = check(Fault::kNaN, 17);
  EXPECT_THAT(r.message(), HasSubstr("[17]"));
  EXPECT_FALSE(fx::within({.atol = 1e9})(run_.got.at("out"), run_.want.at("out"), "out", {}));
}

TEST_F(Smoke, SwappedPairIsCaught) {
  auto r = check(Fault::kSwap, 500);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("2 of 1000"));
}

TEST_F(Smoke, OneUlpIsCaughtBitwiseButPassesTolerance) {
  auto r = check(Fault::kOneUlp, 3);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("ulp 1"));
  EXPECT_TRUE(
      fx::within({.atol = 1e-5, .rtol = 1e-5})(run_.got.at("out"), run_.want.at("out"), "out", {}));
}

TEST_F(Smoke, UnwrittenElementStillHoldsPoison) {
  auto r = check(Fault::kSkip, 999);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("[999] got -nan (0xffffffff)"));
}

// A failing check writes a case file and prints the commands that replay it.
TEST_F(Smoke, FailureWritesTheCaseFileAndReplayCommands) {
  auto r = fx::check_case(SmokeCase({.fault = Fault::kOneUlp, .at = 5}), fx::test_seed(), stream());
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("--family smoke --device"));
  const std::string msg = r.message();
  const size_t at = msg.find("case file: ");
  ASSERT_NE(at, std::string::npos);
  const std::string path = msg.substr(at + 11, msg.find('\n', at) - at - 11);
  const fx::Case c = fx::Case::read(path);
  EXPECT_EQ(c.family, "smoke");
  EXPECT_TRUE(c.has_input("x") && c.want.count("out") && c.got.count("out"));
  std::filesystem::remove(path);
}

// The launch reads scale and bias on the host when it is enqueued, so a captured graph keeps the
// values of its capture: new scalars each round make the replay stale, which the check catches.
TEST_F(Smoke, GraphReplayOfStaleHostArgumentIsCaught) {
  auto r = fx::check_graph_replay(SmokeCase({.draw_scalars = true}), fx::test_seed(), stream());
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("round 1: graph replay and eager launch differ"));
}

TEST_F(Smoke, GraphReplayWithInputsInCapturedBuffersPasses) {
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, "n=1000");
  EXPECT_TRUE(fx::check_graph_replay(SmokeCase(cases::SmokeShape{}), seed, stream()));
  EXPECT_TRUE(fx::check_deterministic(SmokeCase(cases::SmokeShape{}), seed, stream(), 20));
}

TEST_F(Smoke, EmptyLaunchWritesNothing) { fx::expect_case(SmokeCase({.n = 0}), stream()); }

TEST(SmokeDevice, ReportsTheDeviceInUse) {
  std::string why;
  if (!gpu::available(&why)) GTEST_SKIP() << "GPU test skipped: " << why;
  const gpu::DeviceInfo d = gpu::device_info();
  ::testing::Test::RecordProperty("device", d.name + " " + d.arch);
  std::printf("device %d: %s (%s), wave %d, %d CUs, %.1f GiB\n", d.index, d.name.c_str(),
              d.arch.c_str(), d.wave_width, d.compute_units, d.total_memory / 1073741824.0);
  EXPECT_TRUE(d.wave_width == 32 || d.wave_width == 64);
  EXPECT_GT(d.compute_units, 0);
}

}  // namespace
}  // namespace dsv4

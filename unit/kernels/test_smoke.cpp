// smoke: the kernel-case harness catches each planted fault (canaries, poison, NaN, swap, one ULP,
// unwritten element, stale graph replay), writes the case file, and passes the fault-free kernel;
// a hand-driven CaseDevice checks its canaries when destroyed and its outputs when asked; a planted
// spin fails by name within the launch deadline, and a soak over rotating shapes checks as it goes.
#include "dsv4/kernels/smoke.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "dsv4/cases/smoke.hpp"
#include "dsv4/fixtures/gpu_test.hpp"
#include "dsv4/fixtures/soak.hpp"

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

// CaseDevice::check_outputs: every output judged by the family's comparator against the
// reference's, then the canaries; a line for each failure, counted.
TEST_F(Smoke, CheckOutputsJudgesEveryOutputAndTheCanaries) {
  struct Planted {
    Fault fault;
    const char* says;
  };
  for (const Planted p : {Planted{Fault::kNone, ""}, Planted{Fault::kOneUlp, "ulp 1"},
                          Planted{Fault::kPastEnd, "guard canaries of 'out'"}}) {
    SCOPED_TRACE(int(p.fault));
    const SmokeCase c({.fault = p.fault, .at = 3});
    fx::Rng rng(fx::test_seed());
    const fx::Tensors in = c.draw(rng);
    const fx::Tensors want = c.reference(in);
    fx::CaseDevice dev(c, in, stream());
    dev.reset_outputs();
    dev.launch();
    fx::Tensors got;
    int failed = -1;
    const auto r = dev.check_outputs(want, &got, &failed);
    ASSERT_EQ(got.count("out"), 1u);
    if (p.fault == Fault::kNone) {
      EXPECT_TRUE(r);
      EXPECT_EQ(failed, 0);
      EXPECT_TRUE(fx::bitwise_tensors(got.at("out"), want.at("out"), "out"));
    } else {
      ASSERT_FALSE(r);
      EXPECT_EQ(failed, 1);
      EXPECT_THAT(r.message(), HasSubstr(p.says));
    }
  }
  const SmokeCase c(cases::SmokeShape{});
  fx::Rng rng(fx::test_seed());
  fx::CaseDevice dev(c, c.draw(rng), stream());
  dev.reset_outputs();
  dev.launch();
  EXPECT_THAT(dev.check_outputs({}).message(), HasSubstr("the reference gives no output 'out'"));
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

// A launch that never finishes: the harness's wait gives up at the deadline, names the test, the
// family, the case, the seed, the shape and the launch number, writes the case file, and the
// process exits with gpu::kDeadlineExit. Runs in a child process (a death test), so the hung
// kernel dies with it; the parent checks the message, the time it took and the case file.
TEST(SmokeDeadlineDeathTest, APlantedSpinFailsByNameWithinTheDeadline) {
  std::string why;
  if (!gpu::available(&why)) GTEST_SKIP() << "GPU test skipped: " << why;
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: no GPU context is forked
  // The child re-runs this test from its start, so the folder is named by the parent, through the
  // environment the child inherits.
  if (!std::getenv("DSV4_TEST_DEADLINE_DIR"))
    ::setenv(
        "DSV4_TEST_DEADLINE_DIR",
        (std::filesystem::temp_directory_path() / ("dsv4-deadline-" + std::to_string(::getpid())))
            .c_str(),
        1);
  const std::filesystem::path dir = std::getenv("DSV4_TEST_DEADLINE_DIR");
  std::error_code ec;
  if (!::testing::internal::InDeathTestChild()) std::filesystem::remove_all(dir, ec);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EXIT(
      {
        ::setenv("DSV4_LAUNCH_DEADLINE_S", "3", 1);
        ::setenv("DSV4_CASE_DIR", dir.c_str(), 1);
        gpu::StreamHandle s;
        (void)fx::check_case(SmokeCase({.n = 4096, .fault = Fault::kSpin}), 7, s);
        std::_Exit(0);  // not reached: the wait above never returns
      },
      ::testing::ExitedWithCode(gpu::kDeadlineExit),
      "LAUNCH DEADLINE in SmokeDeadlineDeathTest\\.APlantedSpinFailsByNameWithinTheDeadline: "
      "stream synchronize did not finish within 3 s \\(DSV4_LAUNCH_DEADLINE_S\\).*"
      "family smoke, case \"n=4096 fault=7 at=0\", seed 7, shape .*x F32\\[4096\\].*, "
      "launch 1.*case file: .*dsv4-deadline-");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, 3 + 30) << "the child's start, 3 s of deadline and its exit";
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    files += e.path().extension() == ".safetensors";
  EXPECT_EQ(files, 1) << "the hung case's file in " << dir;
  std::filesystem::remove_all(dir, ec);
}

// A malformed deadline is refused by name, not read as 0 or as the default.
TEST(SmokeDeadline, AMalformedDeadlineIsRefusedByName) {
  ::setenv("DSV4_LAUNCH_DEADLINE_S", "soon", 1);
  try {
    (void)gpu::launch_deadline_s();
    ADD_FAILURE() << "DSV4_LAUNCH_DEADLINE_S=soon was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("DSV4_LAUNCH_DEADLINE_S='soon'"));
  }
  ::unsetenv("DSV4_LAUNCH_DEADLINE_S");
  EXPECT_EQ(gpu::launch_deadline_s(), 30.0);
}

// The soak machinery on the smoke kernel: rotating shapes, periodic checks, and a planted fault
// caught at the first checked launch of its shape, named with its launch number.
TEST_F(Smoke, SoakChecksEveryThousandLaunchesAndNamesTheLaunch) {
  std::vector<std::unique_ptr<fx::KernelCase>> good;
  for (size_t n : {1, 1000, 65536})
    good.push_back(std::make_unique<SmokeCase>(cases::SmokeShape{.n = n}));
  fx::SoakResult r;
  ASSERT_TRUE(fx::soak(good, stream(), {.launches = 3000, .check_every = 1000, .window = 64}, &r));
  EXPECT_EQ(r.launches, 3000u);
  EXPECT_EQ(r.checks, 3u);
  EXPECT_EQ(r.per_case, (std::vector<uint64_t>{1000, 1000, 1000}));

  std::vector<std::unique_ptr<fx::KernelCase>> bad;
  bad.push_back(std::make_unique<SmokeCase>(cases::SmokeShape{.n = 300}));
  bad.push_back(
      std::make_unique<SmokeCase>(cases::SmokeShape{.n = 300, .fault = Fault::kOneUlp, .at = 5}));
  auto f = fx::soak(bad, stream(), {.launches = 3000, .check_every = 999, .window = 64});
  ASSERT_FALSE(f);
  // Launch 999 is case 0 (fault-free); 1998 is case 1, the first checked launch of the fault.
  EXPECT_THAT(f.message(), HasSubstr("soak: launch 1998 (case \"n=300 fault=5 at=5\""));
}

}  // namespace
}  // namespace dsv4

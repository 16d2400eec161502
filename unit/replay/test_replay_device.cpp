// dsv4-replay on a GPU (label gpu): a failing harness check's case file replays on the device to
// the same mismatch, and drawn cases of every kernel-case family replay to a match.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "dsv4/cases/kv_store.hpp"
#include "dsv4/cases/ring_layout.hpp"
#include "dsv4/cases/smoke.hpp"
#include "dsv4/fixtures/gpu_test.hpp"
#include "dsv4/replay/replay.hpp"

#include <unistd.h>

namespace dsv4::replay {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class ReplayOnDevice : public fx::GpuTest {
 protected:
  void SetUp() override {
    fx::GpuTest::SetUp();
    dir_ = fs::temp_directory_path() / ("dsv4_replay_dev_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    fs::remove_all(dir_);
    fx::GpuTest::TearDown();
  }
  // A drawn case with the reference's outputs as want.*, replayed on the device.
  Result replay_drawn(const fx::KernelCase& k, const std::string& name) {
    fx::Rng rng(fx::test_seed());
    fx::Case c{k.family(), k.name(), fx::test_seed(), k.draw(rng), {}, {}, {}};
    c.want = k.reference(c.inputs);
    const std::string p = (dir_ / (name + ".safetensors")).string();
    c.write(p);
    return run({p, "", Mode::kDevice});
  }
  fs::path dir_;
};

// The smoke kernel's planted one-ULP and swap faults: the harness writes the case file, and its
// device replay reproduces the kernel's output bit for bit and reports the test's mismatch; the
// reference replay reports it too.
TEST_F(ReplayOnDevice, PlantedKernelFaultReplaysToTheSameMismatch) {
  using kernels::smoke::Fault;
  ::setenv("DSV4_CASE_DIR", dir_.c_str(), 1);
  for (const auto& [fault, at] : {std::pair{Fault::kOneUlp, 17}, std::pair{Fault::kSwap, 500}}) {
    SCOPED_TRACE("fault " + std::to_string(int(fault)) + " at " + std::to_string(at));
    const cases::SmokeCase k({.fault = fault, .at = size_t(at)});
    const auto check = fx::check_case(k, fx::test_seed(), stream());
    ASSERT_FALSE(check) << "the planted fault must make the kernel wrong";
    const std::string file = fx::case_path(k.name() + " eager");
    ASSERT_TRUE(fs::exists(file)) << check.message();
    for (Mode m : {Mode::kDevice, Mode::kReference}) {
      const Result r = run({file, "", m});
      EXPECT_EQ(r.exit_code, 1) << r.report;
      EXPECT_THAT(check.message(), HasSubstr(r.mismatches.at("out"))) << r.report;
      if (m == Mode::kDevice) {
        EXPECT_THAT(r.report, HasSubstr("reproduces the stored got.out bit for bit"));
      }
    }
  }
  ::unsetenv("DSV4_CASE_DIR");
}

TEST_F(ReplayOnDevice, KvStoreCasesMatchTheReference) {
  for (int lanes : {0, 16, 32}) {
    const Result r =
        replay_drawn(cases::KvStoreCase({.T = 64, .R = 100, .width = 512, .lanes = lanes}),
                     "kv_" + std::to_string(lanes));
    EXPECT_EQ(r.exit_code, 0) << r.report;
  }
}

TEST_F(ReplayOnDevice, RingLayoutCasesMatchTheReference) {
  const Result r = replay_drawn(
      cases::RingLayoutCase({.n = 777, .V = 8, .win = 64, .max_pos = 1 << 20, .first_offset = 9}),
      "ring");
  EXPECT_EQ(r.exit_code, 0) << r.report;
}

// Every committed golden file replays on the device: the kernel matches the reference under the
// family's comparator, and writes the stored got.* bit for bit when the family's golden files are
// bitwise or the file was written on this device's arch (dsv4.device, e.g. "NVIDIA H200 sm_90").
TEST_F(ReplayOnDevice, GoldenFilesReplayOnTheDevice) {
  const std::string arch = gpu::device_info().arch;
  size_t replayed = 0, exact = 0, other_device = 0;
  for (const std::string& family : fx::golden_families()) {
    const Family* fam = find_family(family);
    ASSERT_NE(fam, nullptr) << family;
    for (const std::string& path : fx::golden_files(family)) {
      SCOPED_TRACE(path);
      const fx::Case c = fx::Case::read(path);
      const Result r = run({path, family, Mode::kDevice});
      if (r.exit_code == 3) {  // this device cannot run it (e.g. 64 lanes on NVIDIA)
        EXPECT_THAT(r.report, Not(HasSubstr("the run failed"))) << r.report;
        continue;
      }
      ++replayed;
      EXPECT_EQ(r.exit_code, 0) << r.report;
      const auto dev = c.metadata.find("dsv4.device");
      const bool same_arch = dev != c.metadata.end() && dev->second.ends_with(" " + arch);
      if (!fam->golden_bitwise(c) && !same_arch) {
        ++other_device;
        continue;
      }
      ++exact;
      EXPECT_THAT(r.report, Not(HasSubstr("does not reproduce"))) << r.report;
      EXPECT_THAT(r.report, HasSubstr("reproduces the stored got.")) << r.report;
    }
  }
  EXPECT_GT(replayed, 0u);
  std::printf(
      "%zu golden files replayed on %s: %zu reproduced bit for bit, %zu written on "
      "another arch (compared within tolerance)\n",
      replayed, arch.c_str(), exact, other_device);
}

}  // namespace
}  // namespace dsv4::replay

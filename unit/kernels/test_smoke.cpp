// smoke: the fixtures' device machinery catches each planted fault (canaries, poison, NaN, swap,
// one ULP, unwritten element, stale graph replay) and passes the fault-free kernel.
#include "dsv4/kernels/smoke.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dsv4/fixtures/compare.hpp"
#include "dsv4/fixtures/device_buffer.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/fixtures/gpu_test.hpp"
#include "dsv4/fixtures/replay.hpp"

namespace dsv4 {
namespace {

using fx::DeviceBuffer;
using fx::Shape;
using kernels::smoke::Fault;
using ::testing::HasSubstr;

std::vector<float> affine_ref(const std::vector<float>& in, float scale, float bias) {
  std::vector<float> out(in.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = in[i] * scale + bias;
  return out;
}

class Smoke : public fx::GpuTest {
 protected:
  static constexpr size_t kN = 1000;
  void run(Fault fault, size_t at) {
    seed_ = fx::test_seed();
    fx::Rng rng(seed_);
    in_ = std::make_unique<DeviceBuffer<float>>(fx::uniform_f32(rng, kN, -4, 4), "in");
    out_ = std::make_unique<DeviceBuffer<float>>(kN, "out");
    kernels::smoke::affine(in_->data(), out_->data(), kN, 2.0f, 0.5f, fault, at, stream());
    out_->download(stream());
    want_ = affine_ref(in_->host(), 2.0f, 0.5f);
  }
  uint64_t seed_ = 0;
  std::unique_ptr<DeviceBuffer<float>> in_, out_;
  std::vector<float> want_;
};

TEST_F(Smoke, FaultFreeKernelPassesEveryCheck) {
  run(Fault::kNone, 0);
  DSV4_CASE(seed_, "n=" << kN);
  EXPECT_TRUE(out_->guards_intact());
  EXPECT_TRUE(in_->guards_intact());
  EXPECT_TRUE(fx::bitwise_equal(out_->host(), want_, Shape{kN}));
  EXPECT_TRUE(fx::close(out_->host(), want_, Shape{kN}, {.atol = 0}));
}

TEST_F(Smoke, WriteOnePastTheEndHitsTheBackCanary) {
  run(Fault::kPastEnd, 0);
  auto r = out_->guards_intact();
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("byte 4000 (after the buffer)"));
  EXPECT_TRUE(fx::bitwise_equal(out_->host(), want_, Shape{kN})) << "payload itself is right";
}

TEST_F(Smoke, WriteBeforeTheBeginningHitsTheFrontCanary) {
  run(Fault::kBeforeBegin, 0);
  auto r = out_->guards_intact();
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("byte -4 (before the buffer)"));
}

TEST_F(Smoke, PlantedNaNIsCaughtByBothComparators) {
  run(Fault::kNaN, 17);
  EXPECT_THAT(fx::bitwise_equal(out_->host(), want_, Shape{kN}).message(), HasSubstr("[17]"));
  EXPECT_FALSE(fx::close(out_->host(), want_, Shape{kN}, {.atol = 1e9}));
}

TEST_F(Smoke, SwappedPairIsCaught) {
  run(Fault::kSwap, 500);
  auto r = fx::bitwise_equal(out_->host(), want_, Shape{kN});
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("2 of 1000"));
}

TEST_F(Smoke, OneUlpIsCaughtBitwiseButPassesTolerance) {
  run(Fault::kOneUlp, 3);
  auto r = fx::bitwise_equal(out_->host(), want_, Shape{kN});
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("ulp 1"));
  EXPECT_TRUE(fx::close(out_->host(), want_, Shape{kN}, {.atol = 1e-5, .rtol = 1e-5}));
}

TEST_F(Smoke, UnwrittenElementStillHoldsPoison) {
  run(Fault::kSkip, 999);
  auto r = fx::bitwise_equal(out_->host(), want_, Shape{kN});
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("[999] got -nan (0xffffffff)"));
}

// A launch whose scalar argument is read from the host at capture time: replaying the graph
// uses the stale value, which the replay check must catch.
TEST_F(Smoke, GraphReplayOfStaleHostArgumentIsCaught) {
  fx::Rng rng(fx::test_seed());
  DeviceBuffer<float> in(fx::uniform_f32(rng, kN), "in");
  DeviceBuffer<float> out(kN, "out");
  float bias = 0;
  fx::LaunchCase c;
  c.write_inputs = [&](int round, gpu::Stream) { bias = float(round); };
  c.reset_outputs = [&](gpu::Stream s) { out.poison(s); };
  c.launch = [&](gpu::Stream s) {
    kernels::smoke::affine(in.data(), out.data(), kN, 1.0f, bias, Fault::kNone, 0, s);
  };
  c.read_outputs = [&](gpu::Stream s) {
    out.download(s);
    std::vector<uint8_t> b(out.bytes());
    std::memcpy(b.data(), out.host().data(), b.size());
    return b;
  };
  auto r = fx::graph_replay_matches_eager(c, stream());
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("round 1: graph replay and eager launch differ"));
}

TEST_F(Smoke, GraphReplayWithInputsInCapturedBuffersPasses) {
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, "n=" << kN);
  fx::Rng rng(seed);
  DeviceBuffer<float> in(kN, "in"), out(kN, "out");
  fx::LaunchCase c;
  c.write_inputs = [&](int, gpu::Stream s) { in.upload(fx::uniform_f32(rng, kN), s); };
  c.reset_outputs = [&](gpu::Stream s) { out.poison(s); };
  c.launch = [&](gpu::Stream s) {
    kernels::smoke::affine(in.data(), out.data(), kN, 3.0f, 1.0f, Fault::kNone, 0, s);
  };
  c.read_outputs = [&](gpu::Stream s) {
    out.download(s);
    std::vector<uint8_t> b(out.bytes());
    std::memcpy(b.data(), out.host().data(), b.size());
    return b;
  };
  EXPECT_TRUE(fx::graph_replay_matches_eager(c, stream()));
  EXPECT_TRUE(fx::deterministic(c, stream(), 20));
  EXPECT_TRUE(out.guards_intact());
}

TEST_F(Smoke, EmptyLaunchWritesNothing) {
  DeviceBuffer<float> out(16, "out");
  kernels::smoke::affine(nullptr, out.data(), 0, 1.0f, 0.0f, Fault::kNone, 0, stream());
  out.download(stream());
  for (float v : out.host()) EXPECT_TRUE(std::isnan(v));
  EXPECT_TRUE(out.guards_intact());
}

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

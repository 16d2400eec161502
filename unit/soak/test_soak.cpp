// Soak tests: each registered kernel family launched 200,000 times (DSV4_SOAK_LAUNCHES overrides)
// back to back over its adapter's "soak" sweep (the shapes dsv4-replay --draw --sweep soak draws,
// covering every path its launcher can pick), on one workspace where the API shares one, each
// launch under the deadline and every 1,000th compared with the reference.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "dsv4/fixtures/soak.hpp"
#include "dsv4/gpu/runtime.hpp"
#include "dsv4/replay/replay.hpp"

namespace dsv4 {
namespace {

using Cases = std::vector<std::unique_ptr<fx::KernelCase>>;

// The cases of `family`'s "soak" sweep, drawn as dsv4-replay --draw --sweep soak draws them; on
// a family that cannot be soaked, why not.
std::string soak_cases(const std::string& family, Cases* out) {
  const replay::Family* f = replay::find_family(family);
  if (!f) return "the family " + family + " is not registered";
  if (f->drawing)
    for (const auto& sweep : f->drawing->sweeps)
      if (sweep.name == "soak") {
        for (const fx::Vars& v : sweep.points()) out->push_back(f->drawing->from_vars(v));
        return out->empty() ? "the soak sweep of " + family + " has no point" : "";
      }
  return "the kernel family " + family +
         " declares no \"soak\" sweep: add one to its adapter's sweeps() "
         "(replay/src/families/" +
         family + ".cpp)";
}

// One test per registered kernel family (Registered/Soak.Family/<family>). The sweep is checked
// before the GPU is looked for, so a family without one fails on any machine.
class Soak : public ::testing::TestWithParam<std::string> {};

TEST_P(Soak, Family) {
  Cases all;
  const std::string missing = soak_cases(GetParam(), &all);
  ASSERT_TRUE(missing.empty()) << missing;
  std::string reason;
  if (!gpu::available(&reason)) GTEST_SKIP() << "GPU test skipped: " << reason;
  // Shapes this device cannot run (64 lanes on a wave32 device) are named and left out; a soak
  // with none left fails.
  Cases cases;
  for (auto& c : all)
    if (const std::string why = c->cannot_run(); why.empty())
      cases.push_back(std::move(c));
    else
      std::printf("[soak] not on this device: %s: %s\n", c->name().c_str(), why.c_str());
  ASSERT_FALSE(cases.empty()) << "no soak shape of " << GetParam() << " can run on this device";
  gpu::StreamHandle stream;
  fx::SoakOptions o;
  o.launches = fx::soak_launches(200000);
  fx::SoakResult r;
  ASSERT_TRUE(fx::soak(cases, stream.get(), o, &r));
  gpu::synchronize(stream.get());
  EXPECT_EQ(r.launches, o.launches);
  EXPECT_GE(r.checks, o.launches / o.check_every);
  std::printf("[soak] %s: %llu launches over %zu shapes, %llu checked, %.2f min\n",
              GetParam().c_str(), (unsigned long long)r.launches, cases.size(),
              (unsigned long long)r.checks, r.seconds / 60);
  RecordProperty("launches", std::to_string(r.launches));
  RecordProperty("minutes", std::to_string(r.seconds / 60));
}

INSTANTIATE_TEST_SUITE_P(Registered, Soak, ::testing::ValuesIn(replay::kernel_family_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace dsv4

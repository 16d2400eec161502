// Golden case files: every family's fp32-order reference held bit for bit to the outputs its
// kernel wrote on the H200 (fixtures/data/golden/<family>/), so CI without a GPU sees a reordering.
#include <gtest/gtest.h>

#include <string>

#include "dsv4/fixtures/kernel_case.hpp"
#include "dsv4/replay/replay.hpp"

namespace dsv4::replay {
namespace {

// One test per directory of fixtures/data/golden: a family adds its files and nothing else.
class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, ReferenceReproducesTheKernelOutputsBitForBit) {
  const auto r = check_golden(GetParam());
  EXPECT_TRUE(r);
  std::printf("%s: %s\n", GetParam().c_str(), r.message());
}

INSTANTIATE_TEST_SUITE_P(Families, Golden, ::testing::ValuesIn(fx::golden_families()),
                         [](const auto& i) { return i.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Golden);

TEST(GoldenHelper, FamilyWithoutFilesFails) {
  EXPECT_FALSE(check_golden("smoke"));
  EXPECT_FALSE(check_golden("no_such_family"));
}

// The check bites: each order-sensitive kv_store golden case, replayed with another lane count
// (another fp32 summation order), fails to reproduce the stored pool for some lane count.
TEST(GoldenHelper, AnotherSummationOrderIsSeen) {
  int files = 0;
  for (const std::string& path : fx::golden_files("kv_store")) {
    fx::Case c = fx::Case::read(path);
    if (c.name.find("order-sensitive") == std::string::npos) continue;
    ++files;
    const int32_t lanes = c.input("lanes").item<int32_t>();
    int differing = 0;
    for (int32_t other : {1, 2, 4, 8, 16, 32, 64}) {
      if (other == lanes) continue;
      c.inputs["lanes"] = st::Tensor::scalar<int32_t>(other);
      const Outputs ref = find_family("kv_store")->reference(c);
      differing += !fx::bitwise_tensors(c.got.at("pool"), ref.at("pool"), "pool");
    }
    EXPECT_GT(differing, 0) << path;
  }
  EXPECT_GT(files, 0) << "no order-sensitive kv_store golden file";
}

}  // namespace
}  // namespace dsv4::replay

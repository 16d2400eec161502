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

}  // namespace
}  // namespace dsv4::replay

// Golden case files: every family's fp32-order reference held bit for bit to the outputs its
// kernel wrote on the H200 (fixtures/data/golden/<family>/), so CI without a GPU sees a reordering;
// sparse_decode's (matrix-core sums, no CPU order) within its derived tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

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

// The tolerance check bites too: a sparse_decode golden output moved by 1/8 of its magnitude plus
// 1/8 of its row's largest (plus 1/8; the derived bound of a row over hostile pages is wider than
// 1/8 alone), or an lse moved by 1e-2, fails the family's comparator against the
// reference, while the stored outputs pass.
TEST(GoldenHelper, ToleranceGoldenSeesAMovedOutput) {
  const Family* fam = find_family("sparse_decode");
  ASSERT_NE(fam, nullptr);
  int files = 0;
  for (const std::string& path : fx::golden_files("sparse_decode")) {
    SCOPED_TRACE(path);
    const fx::Case c = fx::Case::read(path);
    EXPECT_FALSE(fam->golden_bitwise(c));
    ++files;
    const Outputs ref = fam->reference(c);
    ASSERT_TRUE(fam->compare("out", c.got.at("out"), ref.at("out"), c));
    st::Tensor out = c.got.at("out");
    std::vector<bf16> v = out.values<bf16>();
    size_t at = v.size() / 3;    // the first finite, nonzero element from there (a row with no key
    while (at + 1 < v.size() &&  // or a +inf sink holds zeros or NaN, which the move cannot test)
           (!std::isfinite(bf16_to_f32(v[at])) || bf16_to_f32(v[at]) == 0.0f))
      ++at;
    const float x = bf16_to_f32(v[at]);
    const size_t row0 = at / 512 * 512;
    float row_max = 0;
    for (size_t i = row0; i < row0 + 512 && i < v.size(); ++i)
      if (std::isfinite(bf16_to_f32(v[i])))
        row_max = std::max(row_max, std::fabs(bf16_to_f32(v[i])));
    v[at] = f32_to_bf16(x + (x < 0 ? -1.0f : 1.0f) * ((std::fabs(x) + row_max) / 8 + 0.125f));
    out = st::Tensor::of<bf16>(out.shape, v);
    EXPECT_FALSE(fam->compare("out", out, ref.at("out"), c)) << "element " << at;
    st::Tensor lse = c.got.at("out_lse");
    std::vector<float> l = lse.values<float>();
    for (float& e : l)
      if (std::isfinite(e)) {
        e += 1e-2f;
        break;
      }
    EXPECT_FALSE(
        fam->compare("out_lse", st::Tensor::of<float>(lse.shape, l), ref.at("out_lse"), c));
  }
  EXPECT_GT(files, 0) << "no sparse_decode golden file";
}

}  // namespace
}  // namespace dsv4::replay

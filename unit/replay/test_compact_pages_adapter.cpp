// dsv4-replay's compact_pages adapter: quantise and dequantise cases, hand-computed page bytes,
// planted byte mismatches reported at their [row, byte], and cases that do not fit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "dsv4/fixtures/case_file.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/fixtures/seed.hpp"
#include "dsv4/gpu/runtime.hpp"
#include "dsv4/replay/replay.hpp"

#include <unistd.h>

namespace dsv4::replay {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr size_t kRows = 4;

class CompactPagesAdapter : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dsv4_replay_pages_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    seed_ = fx::test_seed();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Quantise 3 rows (stride 520) into slots {2, -1, 4=R}: one written, one skipped, one rejected.
  fx::Case quantize_case(size_t row_bytes, const std::vector<bf16>& row0) {
    fx::Rng rng(seed_);
    fx::Case c;
    c.family = "compact_pages";
    std::vector<bf16> src = fx::uniform_bf16(rng, 3 * 520, -3, 3);
    std::copy(row0.begin(), row0.end(), src.begin());
    c.inputs["src"] = st::Tensor::of<bf16>({3, 520}, src);
    c.inputs["slots"] = st::Tensor::of(std::vector<int64_t>{2, -1, int64_t(kRows)});
    c.inputs["pool"] =
        st::Tensor::of<uint8_t>({kRows, row_bytes}, std::vector<uint8_t>(kRows * row_bytes, 0xA5));
    return c;
  }
  Result replay(fx::Case c, const std::string& name, Mode m = Mode::kReference) {
    const std::string p = (dir_ / (name + ".safetensors")).string();
    c.write(p);
    return run({p, "", m});
  }
  Outputs reference(const fx::Case& c) { return find_family("compact_pages")->reference(c); }

  fs::path dir_;
  uint64_t seed_ = 0;
};

// A row of 1.0: amax 1, MXFP8 exponent ceil(log2(1/448)) = -8, scale code 127-8 = 119 (0x77),
// every element 1/2^-8 = 256 = e4m3 0x78 (exponent field 15, mantissa 0).
TEST_F(CompactPagesAdapter, QuantiseMxfp8MatchesHandComputedBytes) {
  DSV4_CASE(seed_, "mxfp8 T=3 R=" << kRows);
  fx::Case c = quantize_case(528, std::vector<bf16>(512, f32_to_bf16(1.0f)));
  const Outputs out = reference(c);
  EXPECT_EQ(out.at("errors").item<int64_t>(), 1);
  EXPECT_EQ(out.at("pool").format, "mxfp8_528");
  const auto pool = out.at("pool").values<uint8_t>();
  for (size_t b = 0; b < 512; ++b) ASSERT_EQ(pool[2 * 528 + b], 0x78) << "element " << b;
  for (size_t b = 512; b < 528; ++b) ASSERT_EQ(pool[2 * 528 + b], 0x77) << "scale " << b;
  for (size_t r : {0, 1, 3})
    for (size_t b = 0; b < 528; ++b) ASSERT_EQ(pool[r * 528 + b], 0xA5) << r << " " << b;

  c.got = out;
  EXPECT_EQ(replay(c, "q_ok").exit_code, 0);
  auto bad = pool;
  bad[2 * 528 + 515] = 0x78;  // scale of block 3 off by one binade
  c.got["pool"] = st::Tensor::of<uint8_t>({kRows, 528}, bad);
  const Result r = replay(c, "q_bad");
  EXPECT_EQ(r.exit_code, 1) << r.report;
  EXPECT_THAT(r.mismatches.at("pool"),
              HasSubstr("pool [4, 528]: 1 of 2112 elements differ bitwise; first at [2, 515]"));
  EXPECT_THAT(r.mismatches.at("pool"), HasSubstr("[2, 515] got 120 (0x78) want 119 (0x77)"));
}

TEST_F(CompactPagesAdapter, QuantiseNvfp4AndDequantiseBothOutputTypes) {
  DSV4_CASE(seed_, "nvfp4 T=3 R=" << kRows);
  fx::Case q = quantize_case(288, {});
  const Outputs pool = reference(q);
  EXPECT_EQ(pool.at("pool").format, "nvfp4_288");
  EXPECT_EQ(pool.at("errors").item<int64_t>(), 1);

  // Gather slots {2, 0, -1, 9}: row 2 was written, row 0 holds 0xA5 poison (decoded all the
  // same), -1 leaves its out row alone, 9 >= R is counted.
  for (st::DType dt : {st::DType::F32, st::DType::BF16}) {
    SCOPED_TRACE(st::dtype_name(dt));
    fx::Case d;
    d.family = "compact_pages";
    d.inputs["pool"] = pool.at("pool");
    d.inputs["slots"] = st::Tensor::of(std::vector<int64_t>{2, 0, -1, 9});
    d.inputs["out"] = dt == st::DType::F32
                          ? st::Tensor::of<float>({4, 512}, std::vector<float>(2048, -3.5f))
                          : st::Tensor::of<bf16>({4, 512}, std::vector<bf16>(2048, bf16{0xc060}));
    const Outputs out = reference(d);
    EXPECT_EQ(out.at("errors").item<int64_t>(), 1);
    const auto v = out.at("out").to_f64();
    const auto src = q.inputs.at("src").to_f64();
    for (size_t j = 0; j < 512; ++j) {
      // NVFP4 keeps a value within max(|x|, S)/4 (S <= 3/6*17/16 here): 0.25 covers it.
      ASSERT_NEAR(v[j], src[j], std::max(std::abs(src[j]) / 4, 0.25)) << j;
      ASSERT_EQ(v[2 * 512 + j], -3.5) << "skipped row " << j;
      ASSERT_EQ(v[3 * 512 + j], -3.5) << "rejected row " << j;
    }
    d.got = out;
    EXPECT_EQ(replay(d, "d_ok").exit_code, 0);
    d.got["out"] = out.at("out");
    d.got["errors"] = st::Tensor::scalar<int64_t>(0);
    const Result r = replay(d, "d_bad");
    EXPECT_EQ(r.exit_code, 1) << r.report;
    EXPECT_THAT(r.mismatches.at("errors"), HasSubstr("got 0"));
    EXPECT_EQ(r.mismatches.at("out"), "");
  }
}

TEST_F(CompactPagesAdapter, CasesThatDoNotFitExitTwo) {
  fx::Case c = quantize_case(528, {});
  c.inputs["pool"] = st::Tensor::of<uint8_t>({kRows, 500}, std::vector<uint8_t>(kRows * 500));
  c.got["errors"] = st::Tensor::scalar<int64_t>(1);
  Result r = replay(c, "rowsize");
  EXPECT_EQ(r.exit_code, 2) << r.report;
  EXPECT_THAT(r.report, HasSubstr("tensor 'in.pool' field 'shape'"));

  c = quantize_case(528, {});
  c.inputs["pool"] =
      st::Tensor::formatted("nvfp4_288", {kRows, 528}, std::vector<uint8_t>(kRows * 528));
  c.got["errors"] = st::Tensor::scalar<int64_t>(1);
  r = replay(c, "format");
  EXPECT_EQ(r.exit_code, 2) << r.report;
  EXPECT_THAT(r.report, HasSubstr("declares 'nvfp4_288' but rows of 528 bytes are mxfp8_528"));

  c = quantize_case(528, {});
  c.inputs["src"] = st::Tensor::of<bf16>({3, 256}, std::vector<bf16>(768));
  c.got["errors"] = st::Tensor::scalar<int64_t>(1);
  r = replay(c, "narrow");
  EXPECT_EQ(r.exit_code, 2) << r.report;
  EXPECT_THAT(r.report, HasSubstr("tensor 'in.src' field 'shape'"));

  fx::Case d;
  d.family = "compact_pages";
  d.inputs["pool"] = st::Tensor::of<uint8_t>({1, 288}, std::vector<uint8_t>(288));
  d.inputs["slots"] = st::Tensor::of(std::vector<int64_t>{0});
  d.inputs["out"] = st::Tensor::of<double>({1, 512}, std::vector<double>(512));
  d.got["errors"] = st::Tensor::scalar<int64_t>(0);
  r = replay(d, "f64out");
  EXPECT_EQ(r.exit_code, 2) << r.report;
  EXPECT_THAT(r.report, HasSubstr("is F64, expected F32 or BF16"));
}

TEST_F(CompactPagesAdapter, DeviceReplayMatchesTheReference) {
  std::string why;
  if (!gpu::available(&why)) GTEST_SKIP() << "GPU test skipped: " << why;
  for (size_t bytes : {size_t(528), size_t(288)}) {
    SCOPED_TRACE(bytes);
    fx::Case c = quantize_case(bytes, {});
    c.want = reference(c);
    const Result r = replay(c, "device_q", Mode::kDevice);
    EXPECT_EQ(r.exit_code, 0) << r.report;
    fx::Case d;
    d.family = "compact_pages";
    d.inputs["pool"] = c.want.at("pool");
    d.inputs["slots"] = st::Tensor::of(std::vector<int64_t>{2, 0, -1, 9});
    d.inputs["out"] = st::Tensor::of<float>({4, 512}, std::vector<float>(2048, -3.5f));
    d.want = reference(d);
    const Result rd = replay(d, "device_d", Mode::kDevice);
    EXPECT_EQ(rd.exit_code, 0) << rd.report;
  }
}

}  // namespace
}  // namespace dsv4::replay

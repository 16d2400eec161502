// dsv4-replay's compact_pages adapter: PyTorch-form page cases (in.k -> got.pages, in.pages ->
// got.k, layout and page size in __metadata__), hand-computed page bytes, planted mismatches
// reported at their page, row, data or scale byte and tile, the slot form with its counter, cases
// that do not fit (the declared case layout naming what no form reads), and the PyTorch-written
// golden pages held to the reference byte for byte.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "dsv4/fixtures/case_file.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/fixtures/kernel_case.hpp"
#include "dsv4/fixtures/seed.hpp"
#include "dsv4/gpu/runtime.hpp"
#include "dsv4/ref/formats/page_layout.hpp"
#include "dsv4/replay/replay.hpp"

#include <unistd.h>

namespace dsv4::replay {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class CompactPagesAdapter : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dsv4_replay_pages_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    seed_ = fx::test_seed();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A PyTorch-form quantise case: k [2, P, 512] of ones, the layout and page size as metadata.
  fx::Case pages_case(const char* layout, int64_t P) {
    fx::Case c;
    c.family = "compact_pages";
    c.metadata["dsv4.layout"] = layout;
    c.metadata["dsv4.page_size"] = std::to_string(P);
    c.inputs["k"] = st::Tensor::of<bf16>({2, uint64_t(P), 512},
                                         std::vector<bf16>(size_t(2 * P * 512), f32_to_bf16(1.0f)));
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

// Tokens of 1.0 in v41 pages of 7: amax 1, exponent ceil(log2(1/448)) = -8, scale byte 0x77,
// every value 1 * 2^8 = 256 = e4m3 0x78; 7 * 528 = 3696 bytes padded to 4096 with zeros.
TEST_F(CompactPagesAdapter, PagesFormMatchesHandComputedBytesAndNamesTheFirstDifference) {
  fx::Case c = pages_case("v41", 7);
  const Outputs out = reference(c);
  const auto pages = out.at("pages").values<uint8_t>();
  ASSERT_EQ(pages.size(), 2u * 4096);
  for (size_t p = 0; p < 2; ++p) {
    for (size_t b = 0; b < 7 * 512; ++b) ASSERT_EQ(pages[p * 4096 + b], 0x78) << b;
    for (size_t b = 7 * 512; b < 7 * 528; ++b) ASSERT_EQ(pages[p * 4096 + b], 0x77) << b;
    for (size_t b = 7 * 528; b < 4096; ++b) ASSERT_EQ(pages[p * 4096 + b], 0x00) << b;
  }
  c.got = out;
  const Result ok = replay(c, "ok");
  EXPECT_EQ(ok.exit_code, 0) << ok.report;

  auto bad = pages;
  bad[4096 + 7 * 512 + 3 * 16 + 5] = 0x78;  // page 1, row 3, scale of tile 5 one binade up
  c.got["pages"] = st::Tensor::of<uint8_t>({2, 4096}, bad);
  const Result r = replay(c, "bad_scale");
  EXPECT_EQ(r.exit_code, 1) << r.report;
  EXPECT_THAT(r.report, HasSubstr("page 1, row 3, scale byte 5 (tile 5), got 0x78 want 0x77"));

  bad = pages;
  bad[2 * 512 + 100] = 0x79;  // page 0, row 2, data byte 100: tile 3
  c.got["pages"] = st::Tensor::of<uint8_t>({2, 4096}, bad);
  const Result d = replay(c, "bad_data");
  EXPECT_EQ(d.exit_code, 1) << d.report;
  EXPECT_THAT(d.report, HasSubstr("page 0, row 2, data byte 100 (tile 3)"));

  bad = pages;
  bad[4095] = 0x01;  // padding must stay zero
  c.got["pages"] = st::Tensor::of<uint8_t>({2, 4096}, bad);
  EXPECT_THAT(replay(c, "bad_pad").report, HasSubstr("page 0, padding byte 399"));
}

// Every layout's pages form round trips through the dequantise form, both from metadata.
TEST_F(CompactPagesAdapter, EveryLayoutQuantiseAndDequantiseFromMetadata) {
  for (const char* name : {"v41", "v41_fp4", "v4", "v4_fnuz"}) {
    SCOPED_TRACE(name);
    fx::Rng rng(seed_);
    fx::Case q = pages_case(name, 2);
    q.inputs["k"] = st::Tensor::of<bf16>({2, 2, 512}, fx::uniform_bf16(rng, 2048, -9, 9));
    q.got = reference(q);
    EXPECT_EQ(replay(q, std::string("q_") + name).exit_code, 0);
    fx::Case d;
    d.family = "compact_pages";
    d.metadata = q.metadata;
    d.inputs["pages"] = q.got.at("pages");
    d.got = reference(d);
    ASSERT_EQ(d.got.at("k").shape, (std::vector<uint64_t>{2, 2, 512}));
    EXPECT_EQ(replay(d, std::string("d_") + name).exit_code, 0);
    // v4's raw bf16 values come back as stored.
    if (std::string(name) == "v4" || std::string(name) == "v4_fnuz") {
      const auto k = q.inputs.at("k").values<bf16>(), back = d.got.at("k").values<bf16>();
      for (size_t i = 448; i < 512; ++i) ASSERT_EQ(back[i].bits, k[i].bits) << i;
    }
  }
}

// The slot form: in.layout / in.page_size inputs, hostile slots, the counter.
TEST_F(CompactPagesAdapter, SlotFormCountsRejectedSlots) {
  fx::Case c;
  c.family = "compact_pages";
  c.inputs["layout"] = st::Tensor::scalar<int32_t>(int32_t(KvLayout::kV41Fp4));
  c.inputs["page_size"] = st::Tensor::scalar<int64_t>(3);
  c.inputs["src"] = st::Tensor::of<bf16>({4, 520}, std::vector<bf16>(4 * 520, f32_to_bf16(6.0f)));
  c.inputs["slots"] = st::Tensor::of(std::vector<int64_t>{4, -1, 6, int64_t(1) << 40});
  c.inputs["pool"] = st::Tensor::of<uint8_t>({2, 1024}, std::vector<uint8_t>(2048, 0xA5));
  const Outputs out = reference(c);
  EXPECT_EQ(out.at("errors").item<int64_t>(), 2);
  const auto pool = out.at("pool").values<uint8_t>();
  // Slot 4: page 1, row 1. Amax 6: scale 1.0 (0x38), 6 -> code 7, pairs 0x77.
  EXPECT_EQ(pool[1024 + 256], 0x77);
  EXPECT_EQ(pool[1024 + 3 * 256 + 32], 0x38);
  EXPECT_EQ(pool[0], 0xA5) << "untouched";
  c.got = out;
  EXPECT_EQ(replay(c, "slots").exit_code, 0);
}

TEST_F(CompactPagesAdapter, CasesThatDoNotFitExitTwo) {
  const st::Tensor some = st::Tensor::of<uint8_t>({2, 4096}, std::vector<uint8_t>(8192));
  fx::Case c = pages_case("v5", 7);
  c.got["pages"] = some;
  Result r = replay(c, "layout");
  EXPECT_EQ(r.exit_code, 2) << r.report;
  EXPECT_THAT(r.report, HasSubstr("dsv4.layout"));

  c = pages_case("v41", 7);
  c.metadata["dsv4.page_size"] = "seven";
  c.got["pages"] = some;
  r = replay(c, "page_size");
  EXPECT_EQ(r.exit_code, 2) << r.report;
  EXPECT_THAT(r.report, HasSubstr("dsv4.page_size"));

  c = pages_case("v41", 7);
  c.metadata["dsv4.page_size"] = "8";  // k is [2, 7, 512]
  c.got["pages"] = some;
  r = replay(c, "k_shape");
  EXPECT_EQ(r.exit_code, 2) << r.report;
  EXPECT_THAT(r.report, HasSubstr("in.k"));

  fx::Case d;
  d.family = "compact_pages";
  d.metadata["dsv4.layout"] = "v4";
  d.metadata["dsv4.page_size"] = "1";
  d.inputs["pages"] = st::Tensor::of<uint8_t>({1, 1000}, std::vector<uint8_t>(1000));
  d.got["k"] = st::Tensor::of<bf16>({1, 1, 512}, std::vector<bf16>(512));
  r = replay(d, "pages_shape");
  EXPECT_EQ(r.exit_code, 2) << r.report;
  EXPECT_THAT(r.report, HasSubstr("in.pages"));
}

// The declared case layout is the reader and the --list description: every form and the
// metadata fallback are described, and what no form reads is refused, named (exit 2).
TEST_F(CompactPagesAdapter, DeclaredInputsDescribeEveryFormAndNameWhatDoesNotFit) {
  const Family* f = find_family("compact_pages");
  ASSERT_NE(f, nullptr);
  for (const char* part :
       {"in.layout I32 (0 v41, 1 v41_fp4, 2 v4, 3 v4_fnuz; or __metadata__ dsv4.layout)",
        "in.page_size I64 (or __metadata__ dsv4.page_size)", "optional in.src BF16[T, S]",
        "optional in.out BF16|F32[T, S]", "optional in.pool U8[num_pages, page_bytes]",
        "optional in.k BF16[num_pages, P, 512]", "optional in.pages U8[num_pages, page_bytes]"})
    EXPECT_THAT(f->summary, HasSubstr(part));

  auto refused = [&](fx::Case c, const std::string& name, const std::string& why) {
    if (c.got.empty()) c.got["errors"] = st::Tensor::scalar<int64_t>(0);
    const Result r = replay(std::move(c), name);
    EXPECT_EQ(r.exit_code, 2) << name << "\n" << r.report;
    EXPECT_THAT(r.report, HasSubstr(why)) << name;
  };
  fx::Case c = pages_case("v41", 7);
  c.inputs["bogus"] = st::Tensor::scalar<int32_t>(1);
  refused(c, "unknown", "'in.bogus' field 'name': the compact_pages case layout reads no such");
  c = pages_case("v41", 7);
  c.inputs["pool"] = st::Tensor::of<uint8_t>({2, 4096}, std::vector<uint8_t>(8192));
  refused(c, "two_forms", "'in.pool' field 'name': a case with in.k reads no in.pool");
  c = pages_case("v41", 7);
  c.inputs["slots"] = st::Tensor::of(std::vector<int64_t>{0, 1, 2});
  refused(c, "page_slots", "in.slots");

  // The slot forms: sizes that disagree, an output dtype neither form writes, a quantise option
  // on a dequantise case.
  fx::Case d;
  d.family = "compact_pages";
  d.inputs["layout"] = st::Tensor::scalar<int32_t>(0);
  d.inputs["page_size"] = st::Tensor::scalar<int64_t>(7);
  d.inputs["pool"] = st::Tensor::of<uint8_t>({1, 4096}, std::vector<uint8_t>(4096));
  d.inputs["slots"] = st::Tensor::of(std::vector<int64_t>{0, 1, 2});
  d.inputs["out"] = st::Tensor::of<bf16>({3, 512}, std::vector<bf16>(3 * 512));
  d.got = reference(d);
  EXPECT_EQ(replay(d, "deq_ok").exit_code, 0);
  fx::Case bad = d;
  bad.inputs["out"] = fx::filled(st::DType::F16, {3, 512}, 0);
  refused(bad, "deq_f16",
          "'in.out' field 'dtype': F16, the compact_pages case layout reads BF16 "
          "or F32");
  bad = d;
  bad.inputs["slots"] = st::Tensor::of(std::vector<int64_t>{0, 1});
  refused(bad, "deq_T", "but in.out has T = 3");
  bad = d;
  bad.inputs["values_per_lane"] = st::Tensor::scalar<int32_t>(8);
  refused(bad, "deq_vpl", "a case with in.out reads no in.values_per_lane");
  bad = d;
  bad.inputs["src"] = st::Tensor::of<bf16>({3, 512}, std::vector<bf16>(3 * 512));
  refused(bad, "src_and_out", "a case with in.src reads no in.out");
}

// The pages PyTorch wrote on the H200 (replay/examples/compact_pages_golden.py), each replayed
// through the reference: the same bytes (quantise) and the same bf16 values (dequantise).
TEST(CompactPagesGolden, PyTorchWrittenPagesReplayByteForByte) {
  int n = 0;
  for (const std::string& path : fx::golden_files("compact_pages")) {
    if (fs::path(path).filename().string().rfind("torch_", 0) != 0) continue;
    ++n;
    const Result r = run({path, "", Mode::kReference});
    EXPECT_EQ(r.exit_code, 0) << path << "\n" << r.report;
  }
  EXPECT_GE(n, 8) << "PyTorch-written golden pages in " << fx::golden_directory("compact_pages");
}

TEST_F(CompactPagesAdapter, DeviceReplayMatchesTheReference) {
  std::string why;
  if (!gpu::available(&why)) GTEST_SKIP() << "GPU test skipped: " << why;
  for (const char* name : {"v41", "v41_fp4", "v4", "v4_fnuz"}) {
    fx::Case q = pages_case(name, 7);
    q.want = reference(q);
    const Result r = replay(q, "device_q", Mode::kDevice);
    EXPECT_EQ(r.exit_code, 0) << r.report;
    fx::Case d;
    d.family = "compact_pages";
    d.metadata = q.metadata;
    d.inputs["pages"] = q.want.at("pages");
    d.want = reference(d);
    const Result rd = replay(d, "device_d", Mode::kDevice);
    EXPECT_EQ(rd.exit_code, 0) << rd.report;
  }
}

}  // namespace
}  // namespace dsv4::replay

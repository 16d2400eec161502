// replay/examples/sglang_cases.py: every family's case file written from SGLang's convention
// replays `match`, and its one-value-changed twin `MISMATCH` naming the changed value. Runs the
// writer with python3 (PyTorch when it imports, plain Python otherwise); without python3 the test
// fails, since it could not see what it checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "dsv4/fixtures/case_file.hpp"
#include "dsv4/replay/replay.hpp"

#include <unistd.h>

namespace dsv4::replay {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class SglangCases : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("dsv4_sglang_cases_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    const std::string cmd = "python3 " DSV4_EXAMPLES_DIR "/sglang_cases.py --family all --out '" +
                            dir_.string() + "' > '" + (dir_ / "writer.log").string() + "' 2>&1";
    status_ = std::system(cmd.c_str());
    command_ = cmd;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  Result replay(const std::string& file, Verdict v = Verdict::kAuto) {
    Request r{(dir_ / file).string(), "", Mode::kReference};
    r.verdict = v;
    return run(r);
  }
  static inline fs::path dir_;
  static inline int status_ = -1;
  static inline std::string command_;
};

TEST_P(SglangCases, MatchAndItsOneValueTwinMismatch) {
  ASSERT_EQ(status_, 0) << "the writer did not run (python3 is needed): " << command_;
  const std::string family = GetParam();
  const Result ok = replay(family + ".safetensors");
  EXPECT_EQ(ok.exit_code, 0) << ok.report;
  EXPECT_THAT(ok.report, HasSubstr("source: sglang, verdict: tolerant"));
  const fx::Case twin = fx::Case::read((dir_ / (family + "-mismatch.safetensors")).string());
  const std::string planted = twin.metadata.at("dsv4.planted");
  const Result bad = replay(family + "-mismatch.safetensors");
  EXPECT_EQ(bad.exit_code, 1) << bad.report;
  EXPECT_THAT(bad.report, HasSubstr(planted.substr(0, planted.find(':'))));
  RecordProperty("writer", twin.metadata.at("dsv4.writer"));
  // SGLang's tie-breaking is what the strict (bitwise) verdict refuses: the tolerant verdict is
  // what lets these files match.
  if (family == "indexer_topk" || family == "candidate_blocks") {
    EXPECT_EQ(replay(family + ".safetensors", Verdict::kStrict).exit_code, 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, SglangCases,
                         ::testing::Values("indexer_topk", "candidate_blocks", "sampling_renorm",
                                           "split_combine", "sparse_decode"));

}  // namespace
}  // namespace dsv4::replay

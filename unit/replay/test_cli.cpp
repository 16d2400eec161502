// The dsv4-replay executable: exit codes 0 match, 1 mismatch, 2 bad usage or malformed case,
// 3 could not run; usage text, the family list, and the report on stdout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dsv4/fixtures/case_file.hpp"
#include "dsv4/gpu/runtime.hpp"

#ifndef DSV4_REPLAY_EXE
#error "the build passes DSV4_REPLAY_EXE, the path of the dsv4-replay executable"
#endif

namespace dsv4 {
namespace {

namespace fs = std::filesystem;
namespace st = fx::st;
using ::testing::HasSubstr;

struct Invocation {
  int code;
  std::string output;  // stdout and stderr together
};

Invocation replay(const std::string& args) {
  // DSV4_REPLAY overrides the built path (a build copied to another machine).
  const char* env = std::getenv("DSV4_REPLAY");
  const std::string exe = env && *env ? env : DSV4_REPLAY_EXE;
  const std::string cmd = exe + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return {-1, "popen failed: " + cmd};
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

class ReplayCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dsv4_replay_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    good_ = write_case("good", 0.0f);
    bad_ = write_case("bad", 1.0f);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A smoke case whose stored got.out is off by `error` at element 2.
  std::string write_case(const std::string& name, float error) {
    fx::Case c;
    c.family = "smoke";
    const std::vector<float> x = {1, 2, 3, 4};
    c.inputs["x"] = st::Tensor::of(x);
    c.inputs["scale"] = st::Tensor::scalar(3.0f);
    c.inputs["bias"] = st::Tensor::scalar(1.0f);
    std::vector<float> out = {4, 7, 10, 13};
    out[2] += error;
    c.got["out"] = st::Tensor::of(out);
    const std::string p = (dir_ / (name + ".safetensors")).string();
    c.write(p);
    return p;
  }
  fs::path dir_;
  std::string good_, bad_;
};

TEST_F(ReplayCli, MatchExitsZero) {
  const Invocation r = replay(good_ + " --family smoke --reference");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("result: match"));
  EXPECT_EQ(replay(good_).code, 0) << "family from the case, reference mode by default";
  EXPECT_EQ(replay("--family=smoke " + good_).code, 0);
}

TEST_F(ReplayCli, MismatchExitsOneAndPrintsCoordinates) {
  const Invocation r = replay(bad_ + " --reference");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("out [4]: 1 of 4 elements differ bitwise; first at [2]"));
  EXPECT_THAT(r.output, HasSubstr("[2] got 11 (0x41300000) want 10 (0x41200000)"));
}

TEST_F(ReplayCli, BadUsageExitsTwo) {
  for (const char* args :
       {"", "--frobnicate x.safetensors", "a.safetensors b.safetensors", "--family",
        "--reference --device x.safetensors", "--strict --tolerant x.safetensors"}) {
    SCOPED_TRACE(args);
    const Invocation r = replay(args);
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr("usage: dsv4-replay"));
  }
}

// The verdict flags: a project case is strict by default, --tolerant names the verdict, and a
// family without a foreign verdict (smoke) keeps its comparator under either.
TEST_F(ReplayCli, StrictAndTolerantNameTheVerdict) {
  Invocation r = replay(good_);
  EXPECT_THAT(r.output, HasSubstr("source: dsv4, verdict: strict"));
  r = replay(good_ + " --tolerant");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("verdict: tolerant"));
  EXPECT_EQ(replay(bad_ + " --tolerant").code, 1);
  EXPECT_EQ(replay(bad_ + " --strict").code, 1);
}

TEST_F(ReplayCli, MalformedOrMissingCaseFileExitsTwo) {
  const std::string junk = (dir_ / "junk.safetensors").string();
  std::ofstream(junk) << "\x10\0\0\0\0\0\0\0{\"x\": 1}        ";
  Invocation r = replay(junk);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("malformed case file"));
  r = replay((dir_ / "absent.safetensors").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("cannot open"));
}

TEST_F(ReplayCli, DeviceWithoutAGpuExitsThree) {
  std::string why;
  if (gpu::available(&why)) GTEST_SKIP() << "a GPU is present";
  const Invocation r = replay(good_ + " --device");
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--device needs a GPU"));
}

TEST_F(ReplayCli, HelpAndListExitZero) {
  Invocation r = replay("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("Exit codes: 0 match, 1 mismatch"));
  r = replay("--list");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("smoke\n  in.x F32"));
}

}  // namespace
}  // namespace dsv4

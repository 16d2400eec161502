// dsv4-bench's command line without a GPU: listing, drawing the rows' case files, bad usage (2)
// and could-not-run (3).
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "dsv4/bench/cli.hpp"
#include "dsv4/fixtures/case_file.hpp"
#include "dsv4/gpu/runtime.hpp"

namespace dsv4::bench {
namespace {

struct CliRun {
  int code;
  std::string out, err;
};

CliRun cli(std::vector<std::string> args) {
  args.insert(args.begin(), "dsv4-bench");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const int code = main_cli(int(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

TEST(BenchCli, ListsTheSelectedRows) {
  const CliRun r =
      cli({"--list", "--family", "sparse_decode", "--shape", "B=64,v41_fp4,auto-splits"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "sparse_decode\n  B=64,H=128,K=2048,v41_fp4,P=64,auto-splits  (decode() schedules the "
            "keys)  target: >= 40% of copy; >= 3x torch best; >= 250 TFLOP/s\n");
}

TEST(BenchCli, BadUsageNamesTheFlagAndValue) {
  for (const auto& [args, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--reps", "0"}, "--reps 0 is not a positive integer"},
           {{"--seed", "x"}, "--seed x is not a non-negative integer"},
           {{"--family", "nope"}, "--family nope: no such family"},
           {{"--torch", "--peers", "p.jsonl"}, "--torch and --peers exclude each other"},
           {{"extra"}, "unexpected argument 'extra'"},
           {{"--no-such-flag"}, "no-such-flag"}}) {
    const CliRun r = cli(args);
    EXPECT_EQ(r.code, 2) << args[0];
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  }
}

TEST(BenchCli, WithoutAGpuItCouldNotRun) {
  std::string why;
  if (gpu::available(&why)) GTEST_SKIP() << "a GPU answers here; the device run is the bench's";
  const CliRun r = cli({"--family", "kv_store", "--shape", "T=64,W=512"});
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("could not run: " + why), std::string::npos) << r.err;
}

// --draw writes the rows' case files (what the PyTorch peers read), each named by the row's
// vars and readable as a drawn case with its reference outputs.
TEST(BenchCli, DrawWritesEachRowsCaseFile) {
  const std::string dir = ::testing::TempDir() + "bench-draw";
  std::filesystem::remove_all(dir);
  const CliRun r = cli({"--draw", dir, "--family", "split_combine", "--shape", "B=1,sink,rope"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> paths;
  std::istringstream lines(r.out);
  for (std::string p; std::getline(lines, p);) paths.push_back(p);
  ASSERT_EQ(paths.size(), 2u) << r.out;
  for (const std::string& p : paths) {
    const fx::Case c = fx::Case::read(p);
    EXPECT_EQ(c.family, "split_combine");
    EXPECT_EQ(c.metadata.at("dsv4.shape").rfind("B=1,S=16,H=128,D=512,sink,rope", 0), 0u);
    EXPECT_TRUE(c.want.count("out"));
    EXPECT_TRUE(c.start.count("out"));
  }
}

}  // namespace
}  // namespace dsv4::bench

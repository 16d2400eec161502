// cmake/Dsv4GtestList.cmake and cmake/Dsv4GpuTests.cmake on a stand-in GoogleTest executable: the
// listing, and the shards (or per-test tests) ctest registers from it, with their environment,
// labels, GPU slot, skip line and XML path.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "helpers.hpp"

namespace dsv4::nightly {
namespace {

using nlohmann::json;

// --gtest_list_tests as GoogleTest prints it (parameter comments, a disabled test); run as a
// test, the environment CTest gave it, and the skip line when FAKE_SKIP is set.
const char* kFakeExe = R"X(#!/bin/sh
if [ "$1" = --gtest_list_tests ]; then
  printf 'A.\n  a\n  b\n  DISABLED_c\nShapes/B.\n  d/0  # GetParam() = (1; 2)\n  d/1  # GetParam() = [3]\n  e\n'
  exit 0
fi
echo "shard ${GTEST_SHARD_INDEX:-none} of ${GTEST_TOTAL_SHARDS:-none}: $*"
[ -n "$FAKE_SKIP" ] && echo "[dsv4] every test skipped (2)"
exit 0
)X";

// ctest without the caller's registration choices.
const std::string kClean = "env -u DSV4_GPU_TEST_SHARDS -u DSV4_GPU_TESTS_PER_SHARD";

class GpuTestRegistration : public ::testing::Test {
 protected:
  void SetUp() override {
    test::write_file(dir_ / "build/x_test", kFakeExe, true);
    const auto r =
        test::run_command("cmake -D EXE=" + test::quote(dir_ / "build/x_test") +
                          " -D OUT=" + test::quote(dir_ / "build/x_test_gtest_tests.cmake") +
                          " -D WORKDIR=" + test::quote(dir_ / "build") + " -P " +
                          test::quote(DSV4_SOURCE_DIR "/cmake/Dsv4GtestList.cmake"));
    ASSERT_EQ(r.code, 0) << r.output;
    // What dsv4_gpu_tests writes for the executable, read by ctest.
    test::write_file(dir_ / "build/CTestTestfile.cmake",
                     "set(dsv4_target x_test)\nset(dsv4_room room)\nset(dsv4_labels gpu)\n"
                     "set(dsv4_workdir " +
                         dir_ / "build" + ")\n" + "set(dsv4_junit_dir " + dir_ / "build/junit" +
                         ")\n" + "set(dsv4_list " + dir_ / "build/x_test_gtest_tests.cmake" +
                         ")\n" + "set(dsv4_default_shards auto)\nset(dsv4_per_shard 2)\n" +
                         "include(" DSV4_SOURCE_DIR "/cmake/Dsv4GpuTests.cmake)\n");
  }
  // ctest's listing of the build: test name -> its properties.
  std::map<std::string, json> tests(const std::string& env = "") {
    const auto r = test::run_command(kClean + " " + env + " ctest --test-dir " +
                                     test::quote(dir_ / "build") + " --show-only=json-v1");
    EXPECT_EQ(r.code, 0) << r.output;
    std::map<std::string, json> out;
    const json listing = json::parse(r.output.substr(r.output.find('{')));
    for (const auto& t : listing.at("tests")) {
      json props = json::object();
      for (const auto& p : t.value("properties", json::array()))
        props[p.at("name").get<std::string>()] = p.at("value");
      props["command"] = t.value("command", json::array());
      out[t.at("name").get<std::string>()] = props;
    }
    return out;
  }
  static std::vector<std::string> names(const std::map<std::string, json>& t) {
    std::vector<std::string> out;
    for (const auto& [n, _] : t) out.push_back(n);
    return out;
  }
  test::TempDir dir_;
};

TEST_F(GpuTestRegistration, ListingDropsDisabledTestsAndParameterComments) {
  EXPECT_EQ(test::read_file(dir_ / "build/x_test_gtest_tests.cmake"),
            "set(dsv4_exe [==[" + dir_ / "build/x_test" +
                "]==])\nset(dsv4_tests [==[A.a;A.b;Shapes/B.d/0;Shapes/B.d/1;Shapes/B.e]==])\n");
}

TEST_F(GpuTestRegistration, AutoShardsByTestsPerShard) {
  const auto t = tests();
  EXPECT_EQ(names(t), (std::vector<std::string>{"x_test/shard-1-of-3", "x_test/shard-2-of-3",
                                                "x_test/shard-3-of-3"}));
  const json& s = t.at("x_test/shard-2-of-3");
  EXPECT_EQ(s["ENVIRONMENT"], json({"GTEST_TOTAL_SHARDS=3", "GTEST_SHARD_INDEX=1"}));
  EXPECT_EQ(s["LABELS"], json({"gpu"}));
  EXPECT_EQ(s["RESOURCE_GROUPS"][0]["requirements"][0][".type"], "gpus");
  EXPECT_EQ(s["WORKING_DIRECTORY"], dir_ / "build");
  EXPECT_EQ(s["command"],
            json({dir_ / "build/x_test",
                  "--gtest_output=xml:" + dir_ / "build/junit/x_test/shard-2-of-3.xml"}));
}

TEST_F(GpuTestRegistration, EnvironmentPicksShardsOrPerTest) {
  EXPECT_EQ(names(tests("DSV4_GPU_TEST_SHARDS=2")),
            (std::vector<std::string>{"x_test/shard-1-of-2", "x_test/shard-2-of-2"}));
  EXPECT_EQ(tests("DSV4_GPU_TEST_SHARDS=50").size(), 5u) << "no more shards than tests";
  EXPECT_EQ(names(tests("DSV4_GPU_TESTS_PER_SHARD=4")),
            (std::vector<std::string>{"x_test/shard-1-of-2", "x_test/shard-2-of-2"}));
  const auto t = tests("DSV4_GPU_TEST_SHARDS=per-test");
  EXPECT_EQ(names(t), (std::vector<std::string>{"room/A.a", "room/A.b", "room/Shapes/B.d/0",
                                                "room/Shapes/B.d/1", "room/Shapes/B.e"}));
  EXPECT_EQ(t.at("room/A.b")["command"][1], "--gtest_filter=A.b");
  EXPECT_FALSE(t.at("room/A.b").contains("ENVIRONMENT"));
}

TEST_F(GpuTestRegistration, ShardRunsWithItsEnvironmentAndReportsSkipped) {
  auto r = test::run_command(kClean + " -u FAKE_SKIP ctest -V --test-dir " +
                             test::quote(dir_ / "build") + " -R shard-1-of");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("shard 0 of 3: --gtest_output=xml:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Passed"), std::string::npos) << r.output;
  r = test::run_command(kClean + " FAKE_SKIP=1 ctest --test-dir " + test::quote(dir_ / "build"));
  EXPECT_EQ(r.code, 0) << r.output;
  size_t skipped = 0;
  for (size_t at = 0; (at = r.output.find("***Skipped", at)) != std::string::npos; ++at) ++skipped;
  EXPECT_EQ(skipped, 3u) << r.output;
}

TEST_F(GpuTestRegistration, UnbuiltExecutableIsATestThatFails) {
  std::filesystem::remove(dir_ / "build/x_test_gtest_tests.cmake");
  EXPECT_EQ(names(tests()), (std::vector<std::string>{"x_test_NOT_BUILT"}));
}

}  // namespace
}  // namespace dsv4::nightly

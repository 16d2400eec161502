// run-suite end to end: dsv4-eval (wait-ready, gsm8k with gates) against the project's test
// server standing in for SGLang, started from the registry's command line on 127.0.0.1.
#include <gtest/gtest.h>

#include "helpers.hpp"
#include "registry.hpp"
#include "run_suite.hpp"

#if defined(DSV4_EVAL_BIN) && defined(DSV4_TEST_SERVER_BIN)

namespace dsv4::nightly {
namespace {

using nlohmann::json;

class RunSuiteEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("GITHUB_STEP_SUMMARY");
    data_ = dir_ / "gsm8k.jsonl";
    const auto r = test::run_command(std::string(DSV4_TEST_SERVER_BIN) + " --write-data " +
                                     test::quote(data_) + " --count 40 --seed 7");
    ASSERT_EQ(r.code, 0) << r.output;
  }

  // One e2e suite: the test server with `server_flags`, GSM8K over its 40 questions.
  Registry registry(const std::vector<std::string>& server_flags, int ready_timeout_s) {
    json server = {DSV4_TEST_SERVER_BIN, "--data",      data_,     "--port", "0",
                   "--port-file",        "{port_file}", "--model", "{model}"};
    for (const auto& f : server_flags) server.push_back(f);
    json suite = {{"name", "e2e-test-server"},
                  {"kind", "e2e"},
                  {"runner", "mi35x-8"},
                  {"timeout_minutes", 40},
                  {"container", {{"image", "img"}}},
                  {"sources", test::e2e_sources()},
                  {"server",
                   {{"model", "dsv4/test-model"},
                    {"command", server},
                    {"ready_timeout_s", ready_timeout_s},
                    {"allow_download", true},
                    {"stop_grace_s", 5}}},
                  {"run",
                   {{"command",
                     {DSV4_EVAL_BIN, "gsm8k", "--url", "{url}", "--data", data_, "--num-questions",
                      "40", "--parallel", "8", "--progress-interval", "0", "--out", "{out}"}},
                    {"gates", {"accuracy>0.92", "accept_length>3.0"}},
                    {"timeout_s", 60}}}};
    json doc = test::registry_doc(json::array({suite}));
    return parse_registry(doc, "e2e-test-suites.json");
  }

  int run(const Registry& reg) {
    RunOptions o;
    o.suite = "e2e-test-server";
    o.out = out_;
    o.source_dir = DSV4_SOURCE_DIR;
    const int code = run_suite(reg, o);
    manifest_ = json::parse(test::read_file(out_ + "/suite.json"));
    return code;
  }

  void expect_server_stopped() {
    ASSERT_TRUE(manifest_.contains("server_pid")) << manifest_.dump(2);
    EXPECT_FALSE(test::process_alive(manifest_["server_pid"].get<long>()))
        << "the test server outlived run-suite: " << manifest_.dump(2);
  }

  test::TempDir dir_;
  std::string data_, out_ = dir_ / "artifacts";
  json manifest_;
};

TEST_F(RunSuiteEndToEnd, GreenPath) {
  EXPECT_EQ(run(registry({"--correct-rate", "0.95", "--accept-length", "3.4,3.2"}, 30)), 0)
      << manifest_.dump(2) << test::read_file(out_ + "/runner.log");
  expect_server_stopped();
  const std::string server_log = test::read_file(out_ + "/server.log");
  EXPECT_NE(server_log.find("listening on http://127.0.0.1:"), std::string::npos) << server_log;
  EXPECT_NE(test::read_file(out_ + "/wait-ready.log").find("ready after"), std::string::npos);
  // dsv4-eval's reports are in the artifact folder.
  const json report = json::parse(test::read_file(out_ + "/eval/report.json"));
  EXPECT_FALSE(report.empty());
  EXPECT_FALSE(test::read_file(out_ + "/eval/junit.xml").empty());
  EXPECT_FALSE(test::read_file(out_ + "/eval/results.jsonl").empty());
  EXPECT_NE(test::read_file(out_ + "/summary.md").find("✅ pass (exit 0)"), std::string::npos);
}

// dsv4-eval report groups the nightly's runs by the labels run-suite writes beside report.json
// (without them it refuses: the run has no 'backend' to group by).
TEST_F(RunSuiteEndToEnd, ReportGroupsTheRunsByTheirLabels) {
  ASSERT_EQ(run(registry({"--correct-rate", "0.95", "--accept-length", "3.4,3.2"}, 30)), 0)
      << manifest_.dump(2) << test::read_file(out_ + "/runner.log");
  const auto r =
      test::run_command(std::string(DSV4_EVAL_BIN) + " report " + test::quote(out_) +
                        " --group-by backend,spec,suite --out " + test::quote(dir_ / "comparison"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("default"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("e2e-test-server"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("off"), std::string::npos) << r.output;
}

TEST_F(RunSuiteEndToEnd, GateFailureIsExit1) {
  EXPECT_EQ(run(registry({"--correct-rate", "0.5", "--accept-length", "3.4"}, 30)), 1)
      << manifest_.dump(2) << test::read_file(out_ + "/runner.log");
  expect_server_stopped();
  EXPECT_EQ(manifest_["result"], "gate failed");
  EXPECT_NE(test::read_file(out_ + "/runner.log").find("accuracy"), std::string::npos);
}

TEST_F(RunSuiteEndToEnd, NeverReadyIsExit3ServerStoppedLogsKept) {
  EXPECT_EQ(run(registry({"--ready-after", "600"}, 3)), 3) << manifest_.dump(2);
  expect_server_stopped();
  EXPECT_NE(test::read_file(out_ + "/server.log").find("listening on"), std::string::npos);
  EXPECT_FALSE(test::read_file(out_ + "/wait-ready.log").empty());
  EXPECT_NE(manifest_["reason"].get<std::string>().find("wait-ready exited with 3"),
            std::string::npos)
      << manifest_["reason"];
  EXPECT_FALSE(test::read_file(out_ + "/eval/report.json").size() > 0) << "the runner ran";
}

}  // namespace
}  // namespace dsv4::nightly

#endif

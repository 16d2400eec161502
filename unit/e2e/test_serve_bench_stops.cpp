// serve-bench refusing bad input before the work (an unknown gate metric) and stopping on
// SIGINT/SIGTERM like gsm8k: an errored report with the finished requests' metrics, exit 3.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "e2e_test_util.hpp"
#include "silent_listener.hpp"

namespace dsv4::e2e_test {
namespace {

test_server::TestServerConfig bench_server(double token_ms) {
  test_server::TestServerConfig c;
  c.token_sleep_ms = token_ms;
  c.vocab_size = 5000;
  c.threads = 64;
  return c;
}

std::vector<std::string> bench_args(const std::string& url, const std::string& out,
                                    const std::string& prompts) {
  return {"serve-bench",
          "--url",
          url,
          "--vocab-size",
          "5000",
          "--num-prompts",
          prompts,
          "--random-input-len",
          "16",
          "--random-output-len",
          "16",
          "--max-concurrency",
          "2",
          "--warmup-requests",
          "1",
          "--tokenize-prompt",
          "--out",
          out,
          "--no-progress"};
}

// A gate on a metric serve-bench does not have is exit 2 at once, naming the metrics; nothing is
// sent to the server.
TEST(ServeBenchUsage, UnknownGateMetricIsRefusedBeforeTheRun) {
  TempDir d;
  test_server::TestServer server(bench_server(0));
  server.start();
  auto args = bench_args(server.url(), d.str("out"), "4");
  args.insert(args.end(), {"--gate", "mean_tpot_mss<50"});
  std::string err;
  EXPECT_EQ(run_eval_capture(args, err), 2) << err;
  EXPECT_NE(err.find("unknown metric 'mean_tpot_mss'"), std::string::npos) << err;
  EXPECT_NE(err.find("mean_tpot_ms"), std::string::npos) << err;
  EXPECT_NE(err.find("accept_length_rank<N>"), std::string::npos) << err;
  EXPECT_EQ(server.stats().generate_requests, 0u);
  EXPECT_EQ(server.stats().server_info, 0u);
  EXPECT_FALSE(fs::exists(d.str("out/report.json")));
}

TEST(ServeBenchUsage, HostWithAPortIsRefusedByName) {
  TempDir d;
  std::string err;
  EXPECT_EQ(run_eval_capture({"serve-bench", "--host", "127.0.0.1:8000", "--vocab-size", "10",
                              "--out", d.str("out")},
                             err),
            2)
      << err;
  EXPECT_NE(err.find("--host '127.0.0.1:8000' holds a port (8000)"), std::string::npos) << err;
  EXPECT_EQ(run_eval_capture({"serve-bench", "--num-prompts", "ten", "--vocab-size", "10"}, err),
            2);
  EXPECT_NE(err.find("--num-prompts 'ten'"), std::string::npos) << err;
}

// The report says how prompts went out: text unless --tokenize-prompt.
TEST(ServeBenchReport, DatasetContextNamesThePromptForm) {
  TempDir d;
  test_server::TestServer server(bench_server(0));
  server.start();
  auto ids = bench_args(server.url(), d.str("ids"), "2");
  std::string err;
  ASSERT_EQ(run_eval_capture(ids, err), 0) << err;
  EXPECT_NE(read_report(d.str("ids"))["context"]["dataset"].get<std::string>().find("(input_ids)"),
            std::string::npos);
  auto text = bench_args(server.url(), d.str("text"), "2");
  text.erase(std::find(text.begin(), text.end(), "--tokenize-prompt"));
  ASSERT_EQ(run_eval_capture(text, err), 0) << err;
  const std::string ctx = read_report(d.str("text"))["context"]["dataset"];
  EXPECT_NE(ctx.find("(text)"), std::string::npos) << ctx;
  EXPECT_EQ(ctx.find("input_ids"), std::string::npos) << ctx;
}

// A server that accepts and never answers: the first request (/server_info) gives up after
// --timeout per attempt, announcing the wait, and the run is exit 3 with an errored report.
TEST(ServeBenchStops, TimeoutCoversTheServerInfoCheck) {
  TempDir d;
  SilentListener silent;
  ASSERT_GT(silent.port(), 0);
  auto args = bench_args(silent.url(), d.str("out"), "2");
  args.insert(args.end(), {"--timeout", "2.5"});
  const auto t0 = std::chrono::steady_clock::now();
  std::string err;
  EXPECT_EQ(run_eval_capture(args, err), 3) << err;
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, 30.0);
  EXPECT_NE(err.find("waiting for GET " + silent.url() + "/server_info"), std::string::npos) << err;
  EXPECT_EQ(read_report(d.str("out"))["status"], "ERROR");
}

// SIGTERM mid-run: exit 3, status ERROR, the finished requests' metrics kept, the unsent ones
// neither failures nor in the metrics.
TEST(ServeBenchStops, SigtermMidRunWritesAnErroredReportWithThePartialResults) {
  TempDir d;
  test_server::TestServer server(bench_server(20));  // 16 tokens: about 0.3 s a request
  server.start();
  const std::string out = d.str("out");
  const pid_t pid = spawn_process(DSV4_EVAL_BIN, bench_args(server.url(), out, "40"),
                                  d.str("bench.out"), d.str("bench.err"));
  ASSERT_GT(pid, 0);
  const int status = signal_when(
      pid, [&] { return server.stats().generate_answered >= 6; }, SIGTERM);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by the signal instead of handling it";
  EXPECT_EQ(WEXITSTATUS(status), 3) << slurp(d.str("bench.err"));
  const auto report = read_report(out);
  EXPECT_EQ(report["status"], "ERROR");
  const std::string error = report["error"];
  EXPECT_NE(error.find("interrupted by SIGTERM after"), std::string::npos) << error;
  EXPECT_NE(error.find("of 40 timed requests were sent"), std::string::npos) << error;
  const double completed = report["metrics"]["completed"];
  EXPECT_GE(completed, 4);
  EXPECT_LT(completed, 40);
  EXPECT_LE(report["metrics"]["failed"].get<double>(), 2) << "unsent requests counted as failed";
}

// SIGTERM while the warmup runs: the errored report, exit 3.
TEST(ServeBenchStops, SigtermDuringTheWarmupWritesAnErroredReport) {
  TempDir d;
  test_server::TestServer server(bench_server(200));  // the warmup request takes seconds
  server.start();
  const std::string out = d.str("out");
  const pid_t pid = spawn_process(DSV4_EVAL_BIN, bench_args(server.url(), out, "4"),
                                  d.str("bench.out"), d.str("bench.err"));
  ASSERT_GT(pid, 0);
  const int status = signal_when(
      pid, [&] { return server.stats().generate_requests >= 1; }, SIGINT);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by the signal instead of handling it";
  EXPECT_EQ(WEXITSTATUS(status), 3) << slurp(d.str("bench.err"));
  const auto report = read_report(out);
  EXPECT_EQ(report["status"], "ERROR");
  EXPECT_NE(report["error"].get<std::string>().find("interrupted by SIGINT"), std::string::npos)
      << report["error"];
}

}  // namespace
}  // namespace dsv4::e2e_test

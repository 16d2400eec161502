// `dsv4-eval gsm8k` under every fault the test server injects: retried and complete with exact
// metrics, or exit 3 with every finished result on disk; and an unreachable server.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "dsv4/fixtures/seed.hpp"
#include "gsm8k_runner_util.hpp"

namespace dsv4::e2e_test {
namespace {

struct FaultCase {
  const char* name;
  void (*plant)(test_server::TestServerConfig&);
  bool stream;
  uint64_t test_server::TestServerStats::*counter;
};
void PrintTo(const FaultCase& c, std::ostream* os) { *os << c.name; }

using Stats = test_server::TestServerStats;

class RetriedFault : public ::testing::TestWithParam<FaultCase> {};

// Exactly kFaults requests fault; each costs one retry and the run ends as if nothing happened.
TEST_P(RetriedFault, RetriedAndComplete) {
  constexpr int kFaults = 4;
  const FaultCase& p = GetParam();
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, p.name << " faults=" << kFaults << " N=40 correct=0.8 invalid=0.05");
  TempDir d;
  const std::string data = write_questions(d, 40, seed);
  auto cfg = base_config(data, seed);
  cfg.correct_rate = 0.8;
  cfg.invalid_rate = 0.05;
  cfg.fault_limit = kFaults;
  p.plant(cfg);
  test_server::TestServer server(cfg);
  server.start();
  std::vector<std::string> extra = {"--timeout", "0.5",           "--retries", "3",
                                    "--gate",    "accuracy==0.8", "--gate",    "invalid==0.05"};
  if (p.stream) extra.push_back("--stream");
  const GsmRun run = run_gsm8k(server.url(), data, d.str("out"), extra);
  ASSERT_EQ(run.rc, 0) << run.err;
  const Stats st = server.stats();
  EXPECT_EQ(st.*(p.counter), uint64_t(kFaults));
  EXPECT_EQ(st.faults, uint64_t(kFaults));
  const auto& m = run.report["metrics"];
  EXPECT_EQ(m["retries"].get<double>(), kFaults);
  EXPECT_EQ(m["failed"].get<double>(), 0);
  EXPECT_EQ(run.results.size(), 40u);
  int retried = 0;
  for (const auto& r : run.results) {
    EXPECT_FALSE(r.contains("error")) << r.dump();
    retried += r["attempts"].get<int>() - 1;
    EXPECT_EQ(r["correct"].get<bool>(), server.planned_outcome(r["index"]) == 'c');
  }
  EXPECT_EQ(retried, kFaults);
}

INSTANTIATE_TEST_SUITE_P(
    Faults, RetriedFault,
    ::testing::Values(
        FaultCase{"http_503", [](auto& c) { c.fail_rate = 1; }, false, &Stats::fail_status},
        FaultCase{"http_429",
                  [](auto& c) {
                    c.fail_rate = 1;
                    c.fail_status = 429;
                  },
                  false, &Stats::fail_status},
        FaultCase{"connection_reset", [](auto& c) { c.reset_rate = 1; }, false, &Stats::resets},
        FaultCase{"stall_past_timeout",
                  [](auto& c) {
                    c.stall_rate = 1;
                    c.stall_s = 3;
                  },
                  false, &Stats::stalls},
        FaultCase{"malformed_json", [](auto& c) { c.malformed_rate = 1; }, false,
                  &Stats::malformed},
        FaultCase{"malformed_chunk", [](auto& c) { c.malformed_rate = 1; }, true,
                  &Stats::malformed},
        FaultCase{"truncated_body", [](auto& c) { c.truncate_rate = 1; }, false, &Stats::truncated},
        FaultCase{"truncated_stream", [](auto& c) { c.truncate_rate = 1; }, true,
                  &Stats::truncated},
        FaultCase{"error_chunk", [](auto& c) { c.error_chunk_rate = 1; }, true,
                  &Stats::error_chunks},
        FaultCase{"reset_while_streaming", [](auto& c) { c.reset_rate = 1; }, true,
                  &Stats::resets}),
    [](const auto& info) { return std::string(info.param.name); });

// Checks that every line of results.jsonl is a complete, correct record.
void expect_results_sound(const GsmRun& run, const test_server::TestServer& server) {
  for (const auto& r : run.results) {
    if (r.contains("error")) continue;
    EXPECT_EQ(r["correct"].get<bool>(), server.planned_outcome(r["index"]) == 'c') << r.dump();
    EXPECT_TRUE(r["output"].is_string());
  }
}

TEST(Gsm8kFaults, Other4xxFailsFastExitThree) {
  TempDir d;
  const std::string data = write_questions(d, 40, 11);
  auto cfg = base_config(data, 11);
  cfg.fail_rate = 1;
  cfg.fail_status = 400;
  cfg.fault_limit = 1;
  cfg.token_sleep_ms = 1;
  test_server::TestServer server(cfg);
  server.start();
  const GsmRun run = run_gsm8k(server.url(), data, d.str("out"), {"--gate", "accuracy>0"});
  EXPECT_EQ(run.rc, 3) << run.err;
  EXPECT_EQ(run.report["status"], "ERROR");
  const std::string error = run.report["error"];
  EXPECT_NE(error.find("HTTP 400"), std::string::npos) << error;
  EXPECT_NE(error.find("--max-failed 0"), std::string::npos) << error;
  size_t failed_lines = 0;
  for (const auto& r : run.results)
    if (r.contains("error")) {
      ++failed_lines;
      EXPECT_EQ(r["attempts"], 1) << "a 400 must not be retried";
      EXPECT_EQ(r["error_kind"], "http_4xx");
    }
  EXPECT_EQ(failed_lines, 1u);
  expect_results_sound(run, server);
  EXPECT_LT(run.results.size(), 40u) << "the run went on after the failure";
  EXPECT_NE(slurp(d.str("out/junit.xml")).find("<error message="), std::string::npos);
}

TEST(Gsm8kFaults, PersistentServerErrorsExhaustRetriesExitThree) {
  TempDir d;
  const std::string data = write_questions(d, 30, 12);
  auto cfg = base_config(data, 12);
  cfg.fail_rate = 0.5;
  test_server::TestServer server(cfg);
  server.start();
  const GsmRun run = run_gsm8k(server.url(), data, d.str("out"), {"--retries", "1"});
  EXPECT_EQ(run.rc, 3) << run.err;
  EXPECT_NE(run.report["error"].get<std::string>().find("HTTP 503"), std::string::npos);
  expect_results_sound(run, server);
}

TEST(Gsm8kFaults, MaxFailedToleratesFailuresAsWrongAnswers) {
  TempDir d;
  const std::string data = write_questions(d, 30, 13);
  auto cfg = base_config(data, 13);
  cfg.fail_rate = 1;
  cfg.fail_status = 400;
  cfg.fault_limit = 3;
  test_server::TestServer server(cfg);
  server.start();
  const GsmRun run = run_gsm8k(server.url(), data, d.str("out"), {"--max-failed", "3"});
  EXPECT_EQ(run.rc, 0) << run.err;
  EXPECT_EQ(run.report["metrics"]["failed"].get<double>(), 3);
  EXPECT_EQ(run.report["metrics"]["accuracy"].get<double>(), 27.0 / 30.0);
}

TEST(Gsm8kFaults, UnreachableServerExitsThreeQuickly) {
  TempDir d;
  const std::string data = write_questions(d, 10, 14);
  const std::string url = "http://127.0.0.1:" + std::to_string(free_port());
  const double t0 = eval::monotonic_seconds();
  const GsmRun run = run_gsm8k(url, data, d.str("out"), {"--retries", "2"});
  EXPECT_LT(eval::monotonic_seconds() - t0, 5.0);
  EXPECT_EQ(run.rc, 3) << run.err;
  EXPECT_EQ(run.report["status"], "ERROR");
  EXPECT_NE(run.report["error"].get<std::string>().find("unreachable"), std::string::npos)
      << run.report.dump(2);
  EXPECT_NE(run.err.find("unreachable"), std::string::npos) << run.err;
}

// Readiness is held by the test, not by the clock: the short wait fails on a server that is
// surely not ready however slowly the processes start, and the server turns ready only once the
// long wait has been answered 503 twice (it kept polling after a 503), so its exit 0 proves it
// waited the 503s out.
TEST(Gsm8kFaults, SlowReadinessIsWaitedOutByWaitReady) {
  TempDir d;
  test_server::TestServerConfig cfg;
  cfg.threads = 8;
  test_server::TestServer server(cfg);
  server.set_ready(false);
  server.start();
  std::string err;
  EXPECT_EQ(
      run_eval_capture(
          {"wait-ready", "--url", server.url(), "--timeout", "0.2", "--interval", "0.05"}, err),
      3);
  EXPECT_NE(err.find("not ready within"), std::string::npos) << err;
  EXPECT_NE(err.find("HTTP 503"), std::string::npos) << err;
  const uint64_t before = server.stats().not_ready;
  std::atomic<bool> waiting{true}, flipped{false};
  std::thread flip([&] {
    while (waiting.load()) {
      if (server.stats().not_ready >= before + 2) {
        server.set_ready(true);
        flipped = true;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  const int rc = run_eval_capture(
      {"wait-ready", "--url", server.url(), "--timeout", "60", "--interval", "0.05"}, err);
  waiting = false;
  flip.join();
  EXPECT_EQ(rc, 0) << err;
  EXPECT_TRUE(flipped.load()) << "wait-ready returned before it was answered 503 twice";
  EXPECT_GE(server.stats().not_ready, before + 2);
  EXPECT_EQ(
      run_eval_capture(
          {"wait-ready", "--url", server.url(), "--api", "openai-chat", "--timeout", "5"}, err),
      0)
      << err;
  // The OpenAI form polls /v1/models, which answers 503 while not ready too.
  server.set_ready(false);
  EXPECT_EQ(run_eval_capture({"wait-ready", "--url", server.url(), "--api", "openai-chat",
                              "--timeout", "0.2", "--interval", "0.05"},
                             err),
            3);
  EXPECT_NE(err.find("HTTP 503"), std::string::npos) << err;
  EXPECT_EQ(run_eval_capture({"wait-ready", "--url", "nope"}, err), 2);
  EXPECT_NE(err.find("--url 'nope'"), std::string::npos) << err;
}

TEST(Gsm8kFaults, WaitReadyRidesOutConnectionRefused) {
  test_server::TestServerConfig cfg;
  cfg.port = free_port();
  cfg.listen_after_s = 0.4;
  cfg.threads = 8;
  test_server::TestServer server(cfg);
  server.start();
  std::string err;
  const std::string url = "http://127.0.0.1:" + std::to_string(cfg.port);
  EXPECT_EQ(
      run_eval_capture({"wait-ready", "--url", url, "--timeout", "10", "--interval", "0.05"}, err),
      0)
      << err;
  EXPECT_EQ(server.port(), cfg.port);
}

}  // namespace
}  // namespace dsv4::e2e_test

// Kill-and-resume: a run cut short (server dies mid-run, the client process is killed, a line is
// half written) and then resumed ends with the same answers and metrics as an uninterrupted run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <map>
#include <thread>

#include "dsv4/fixtures/seed.hpp"
#include "gsm8k_runner_util.hpp"

namespace dsv4::e2e_test {
namespace {

constexpr size_t kN = 80;

test_server::TestServerConfig mix(const std::string& data, uint64_t seed) {
  auto c = base_config(data, seed);
  c.correct_rate = 0.7;
  c.invalid_rate = 0.1;
  c.accept_lengths = {3.5, 2.5};
  return c;
}

// The per-question answers of a run, keyed by index, without timing fields.
std::map<size_t, nlohmann::json> answers(const std::vector<nlohmann::json>& results) {
  std::map<size_t, nlohmann::json> out;
  for (auto r : results) {
    if (r.contains("error")) continue;
    r.erase("latency_s");
    r.erase("attempts");
    out[r["index"].get<size_t>()] = r;
  }
  return out;
}

// Metrics that do not depend on timing must be identical; the server-side accept length is a
// token-weighted combination over invocations, so it is close but not bit-equal.
void expect_same_metrics(const nlohmann::json& a, const nlohmann::json& b) {
  for (const char* k :
       {"accuracy", "invalid", "failed", "questions", "completion_tokens_total",
        "completion_tokens_mean", "request_accept_length_mean", "request_accept_length_p10",
        "request_accept_length_p50", "request_accept_length_p90", "request_accept_length_total"})
    EXPECT_EQ(a["metrics"][k], b["metrics"][k]) << k;
  for (const char* k : {"accept_length", "accept_length_rank0", "accept_length_rank1"})
    EXPECT_NEAR(a["metrics"][k].get<double>(), b["metrics"][k].get<double>(),
                0.05 * a["metrics"][k].get<double>())
        << k;
}

class Resume : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = fx::test_seed();
    data_ = write_questions(dir_, kN, seed_);
    test_server::TestServer server(mix(data_, seed_));
    server.start();
    whole_ = run_gsm8k(server.url(), data_, dir_.str("whole"), {});
    ASSERT_EQ(whole_.rc, 0) << whole_.err;
    ASSERT_EQ(whole_.results.size(), kN);
  }
  TempDir dir_;
  uint64_t seed_ = 0;
  std::string data_;
  GsmRun whole_;
};

TEST_F(Resume, ServerDiesMidRunThenResumeMatchesUninterrupted) {
  DSV4_CASE(seed_, "N=" << kN << " server dies at request 31");
  const std::string out = dir_.str("cut");
  int port = 0;  // the server comes back where it was (settings.json records the URL)
  {
    auto cfg = mix(data_, seed_);
    cfg.exit_after = 30;  // request 31 kills the server (every open connection dropped)
    test_server::TestServer dying(cfg);
    dying.start();
    port = dying.port();
    const GsmRun cut = run_gsm8k(dying.url(), data_, out, {"--retries", "2"});
    EXPECT_EQ(cut.rc, 3) << cut.err;
    EXPECT_EQ(cut.report["status"], "ERROR");
    EXPECT_TRUE(dying.dead());
    const auto got = answers(cut.results);
    EXPECT_LE(got.size(), 30u);
    EXPECT_GE(got.size(), 1u);
    const auto want = answers(whole_.results);
    for (const auto& [i, r] : got) EXPECT_EQ(r, want.at(i)) << "question " << i;
  }
  auto again_cfg = mix(data_, seed_);
  again_cfg.port = port;
  test_server::TestServer again(again_cfg);
  again.start();
  const GsmRun resumed = run_gsm8k(again.url(), data_, out, {"--resume"});
  ASSERT_EQ(resumed.rc, 0) << resumed.err;
  EXPECT_EQ(answers(resumed.results), answers(whole_.results));
  expect_same_metrics(resumed.report, whole_.report);
  const double before = resumed.report["metrics"]["resumed"];
  EXPECT_GE(before, 1);
  EXPECT_EQ(resumed.report["metrics"]["requests_sent"].get<double>() + before, double(kN));
  EXPECT_EQ(again.stats().generate_requests, uint64_t(kN - size_t(before)))
      << "finished questions were asked again";
}

TEST_F(Resume, HalfWrittenLastLineIsDroppedAndRedone) {
  const std::string out = dir_.str("partial");
  fs::create_directories(out);
  const std::string full = slurp(dir_.str("whole/results.jsonl"));
  size_t pos = 0;
  for (int line = 0; line < 10; ++line) pos = full.find('\n', pos) + 1;
  const size_t next = full.find('\n', pos);
  write_text(out + "/results.jsonl", full.substr(0, pos + (next - pos) / 2));  // 10.5 lines
  test_server::TestServer server(mix(data_, seed_));
  server.start();
  const GsmRun resumed = run_gsm8k(server.url(), data_, out, {"--resume"});
  ASSERT_EQ(resumed.rc, 0) << resumed.err;
  EXPECT_EQ(resumed.report["metrics"]["resumed"].get<double>(), 10);
  EXPECT_EQ(resumed.results.size(), kN) << "the cut line must be gone, not kept";
  EXPECT_EQ(answers(resumed.results), answers(whole_.results));
  expect_same_metrics(resumed.report, whole_.report);
  bool noted = false;
  for (const auto& n : resumed.report["notes"])
    noted |= n.get<std::string>().find("interrupted last line dropped") != std::string::npos;
  EXPECT_TRUE(noted) << resumed.report["notes"].dump();
}

TEST_F(Resume, CompletedRunResumesWithoutRequests) {
  test_server::TestServer server(mix(data_, seed_));
  server.start();
  // Another server of the same model on another port: accepted when asked to.
  const GsmRun again =
      run_gsm8k(server.url(), data_, dir_.str("whole"), {"--resume", "--allow-changed-settings"});
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_EQ(server.stats().generate_requests, 0u);
  expect_same_metrics(again.report, whole_.report);
  EXPECT_TRUE(again.report["metrics"]["latency"].is_null());
}

TEST_F(Resume, DifferentPromptsAreRefused) {
  test_server::TestServer server(mix(data_, seed_));
  server.start();
  const GsmRun bad =
      run_gsm8k(server.url(), data_, dir_.str("whole"), {"--resume", "--num-shots", "2"});
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("prompt_sha256"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("results.jsonl:1"), std::string::npos) << bad.err;
  write_text(dir_.str("garbled.jsonl"), "{\"index\": 0}\nnot json\n{\"index\": 1}\n");
  fs::create_directories(dir_.str("garbled"));
  fs::copy_file(dir_.str("garbled.jsonl"), dir_.str("garbled/results.jsonl"));
  const GsmRun garbled = run_gsm8k(server.url(), data_, dir_.str("garbled"), {"--resume"});
  EXPECT_EQ(garbled.rc, 2);
  EXPECT_NE(garbled.err.find("results.jsonl:2"), std::string::npos) << garbled.err;
}

// The real executables: dsv4-eval is killed with SIGKILL mid-run, then resumed.
TEST_F(Resume, KilledClientProcessResumes) {
  const std::string out = dir_.str("killed");
  const pid_t server_pid = spawn_process(
      DSV4_TEST_SERVER_BIN,
      {"--port", "0", "--port-file", dir_.str("port"), "--threads", "64", "--data", data_, "--seed",
       std::to_string(seed_), "--correct-rate", "0.7", "--invalid-rate", "0.1", "--accept-length",
       "3.5,2.5", "--token-sleep-ms", "3"},
      dir_.str("server.out"));
  ASSERT_GT(server_pid, 0);
  const int port = wait_for_port_file(dir_.str("port"), 10);
  ASSERT_GT(port, 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  const pid_t eval_pid =
      spawn_process(DSV4_EVAL_BIN,
                    {"gsm8k", "--url", url, "--data", data_, "--num-questions", "0", "--num-shots",
                     "3", "--parallel", "4", "--out", out, "--progress-interval", "0"},
                    dir_.str("eval.out"), dir_.str("eval.err"));
  ASSERT_GT(eval_pid, 0);
  size_t lines = 0;
  for (int i = 0; i < 1000 && lines < 12; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const std::string s = slurp(out + "/results.jsonl");
    lines = size_t(std::count(s.begin(), s.end(), '\n'));
  }
  kill(eval_pid, SIGKILL);
  int status = 0;
  waitpid(eval_pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status)) << "dsv4-eval finished before it could be killed";
  ASSERT_GE(lines, 12u);
  const GsmRun resumed = run_gsm8k(url, data_, out, {"--resume"});
  kill(server_pid, SIGTERM);
  waitpid(server_pid, &status, 0);
  ASSERT_EQ(resumed.rc, 0) << resumed.err;
  EXPECT_GE(resumed.report["metrics"]["resumed"].get<double>(), 12);
  EXPECT_LT(resumed.report["metrics"]["resumed"].get<double>(), double(kN));
  EXPECT_EQ(answers(resumed.results), answers(whole_.results));
  expect_same_metrics(resumed.report, whole_.report);
}

}  // namespace
}  // namespace dsv4::e2e_test

namespace dsv4::e2e_test {
namespace {

// SIGTERM (a CI job timeout) stops the run with exit 3 and still writes the reports.
TEST(Interrupt, SigtermWritesAnErroredReport) {
  TempDir d;
  const std::string data = write_questions(d, 60, 31);
  auto cfg = base_config(data, 31);
  cfg.token_sleep_ms = 20;  // about 0.5 s a request
  test_server::TestServer server(cfg);
  server.start();
  const std::string out = d.str("out");
  const pid_t pid = spawn_process(
      DSV4_EVAL_BIN,
      {"gsm8k", "--url", server.url(), "--data", data, "--num-questions", "0", "--num-shots", "2",
       "--parallel", "2", "--out", out, "--progress-interval", "0"},
      d.str("eval.out"), d.str("eval.err"));
  ASSERT_GT(pid, 0);
  for (int i = 0; i < 500 && read_results(out).size() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by the signal instead of handling it";
  EXPECT_EQ(WEXITSTATUS(status), 3) << slurp(d.str("eval.err"));
  const auto report = read_report(out);
  EXPECT_EQ(report["status"], "ERROR");
  EXPECT_NE(report["error"].get<std::string>().find("interrupted by SIGTERM"), std::string::npos);
  EXPECT_LT(read_results(out).size(), 60u);
}

}  // namespace
}  // namespace dsv4::e2e_test

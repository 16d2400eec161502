// How a gsm8k run stops: a signal at any step (the pre-run flush included) gives an errored
// report and exit 3; --timeout covers every request and a wait is announced; the server's accept
// counters are read at every stop, so a run interrupted and resumed reports the uninterrupted
// accept length (marked combined), or marks it partial; questions never asked are not failures.
#include <gtest/gtest.h>

#include <chrono>

#include "gsm8k_runner_util.hpp"
#include "report/results_log.hpp"
#include "silent_listener.hpp"

namespace dsv4::e2e_test {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs dsv4-eval as a process and sends it `sig` once `ready()` holds.
struct Spawned {
  int status = -1;
  std::string err;
};
template <class Ready>
Spawned run_and_signal(const std::vector<std::string>& args, const TempDir& d, Ready ready,
                       int sig) {
  const pid_t pid = spawn_process(DSV4_EVAL_BIN, args, d.str("eval.out"), d.str("eval.err"));
  Spawned s;
  if (pid <= 0) return s;
  s.status = signal_when(pid, ready, sig);
  s.err = slurp(d.str("eval.err"));
  return s;
}

std::vector<std::string> gsm8k_args(const std::string& url, const std::string& data,
                                    const std::string& out, std::vector<std::string> extra) {
  std::vector<std::string> a = {"gsm8k", "--url",       url, "--data",
                                data,    "--out",       out, "--num-questions",
                                "0",     "--num-shots", "3", "--progress-interval",
                                "0"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// SIGTERM while POST /flush_cache waits (before any question): an errored report, exit 3.
TEST(Stops, SigtermDuringTheFlushWritesAnErroredReport) {
  TempDir d;
  const std::string data = write_questions(d, 8, 5);
  auto cfg = base_config(data, 5);
  cfg.flush_sleep_s = 30;
  test_server::TestServer server(cfg);
  server.start();
  const std::string out = d.str("out");
  const auto t0 = Clock::now();
  const Spawned s = run_and_signal(
      gsm8k_args(server.url(), data, out, {}), d, [&] { return seconds_since(t0) > 1.0; }, SIGTERM);
  ASSERT_TRUE(WIFEXITED(s.status)) << "killed by the signal instead of handling it: " << s.err;
  EXPECT_EQ(WEXITSTATUS(s.status), 3) << s.err;
  EXPECT_LT(seconds_since(t0), 10.0) << "the flush was waited out";
  const auto report = read_report(out);
  EXPECT_EQ(report["status"], "ERROR");
  EXPECT_NE(report["error"].get<std::string>().find("interrupted by SIGTERM during POST "
                                                    "/flush_cache"),
            std::string::npos)
      << report["error"];
  EXPECT_EQ(server.stats().generate_requests, 0u);
}

// A server that accepts and never answers: the flush gives up after --timeout (not 60 s), and
// the wait is announced on stderr.
TEST(Stops, TimeoutCoversTheFlushAndTheWaitIsAnnounced) {
  TempDir d;
  const std::string data = write_questions(d, 4, 6);
  SilentListener silent;
  ASSERT_GT(silent.port(), 0);
  const auto t0 = Clock::now();
  const GsmRun r =
      run_gsm8k(silent.url(), data, d.str("out"), {"--timeout", "6", "--retries", "0"});
  const double took = seconds_since(t0);
  EXPECT_EQ(r.rc, 3) << r.err;
  EXPECT_GE(took, 5.5);
  EXPECT_LT(took, 20.0);
  EXPECT_NE(r.err.find("waiting for POST " + silent.url() + "/flush_cache: no answer after 5 s"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("timeout"), std::string::npos) << r.err;
  EXPECT_EQ(r.report["status"], "ERROR");
}

class Interrupted : public ::testing::Test {
 protected:
  static constexpr size_t kN = 60;
  void SetUp() override {
    data_ = write_questions(dir_, kN, 9);
    cfg_ = base_config(data_, 9);
    cfg_.correct_rate = 0.8;
    cfg_.accept_lengths = {2.8};
    cfg_.token_sleep_ms = 4;
    server_ = std::make_unique<test_server::TestServer>(cfg_);
    server_->start();
    whole_ = run_gsm8k(server_->url(), data_, dir_.str("whole"), {"--parallel", "4"});
    ASSERT_EQ(whole_.rc, 0) << whole_.err;
  }
  // The client process stopped by `sig` once 8 answers are on disk.
  Spawned cut(const std::string& out, int sig) {
    return run_and_signal(
        gsm8k_args(server_->url(), data_, out, {"--parallel", "4"}), dir_,
        [&] { return read_results(out).size() >= 8; }, sig);
  }
  TempDir dir_;
  std::string data_;
  test_server::TestServerConfig cfg_;
  std::unique_ptr<test_server::TestServer> server_;
  GsmRun whole_;
};

TEST_F(Interrupted, SigtermThenResumeGivesTheUninterruptedAcceptLengthMarkedCombined) {
  const std::string out = dir_.str("cut");
  const Spawned s = cut(out, SIGTERM);
  ASSERT_TRUE(WIFEXITED(s.status)) << s.err;
  ASSERT_EQ(WEXITSTATUS(s.status), 3) << s.err;
  const auto stopped = read_report(out);
  EXPECT_EQ(stopped["status"], "ERROR");
  const double answered = double(read_results(out).size());
  ASSERT_LT(answered, double(kN)) << "the run finished before the signal";
  // No request failed: the questions left are not asked, not failed.
  EXPECT_EQ(stopped["metrics"]["failed"], 0) << stopped["metrics"].dump();
  EXPECT_EQ(stopped["metrics"]["not_asked"].get<double>(), double(kN) - answered);
  const auto rows = eval::read_jsonl(out + "/server_accept.jsonl").records;
  ASSERT_EQ(rows.size(), 1u) << "the stopped invocation did not read the server's counters";
  EXPECT_TRUE(rows[0].contains("stopped"));
  EXPECT_TRUE(rows[0]["per_rank"][0].is_number());
  EXPECT_NE(s.err.find("waiting up to 10 s (--stop-grace)"), std::string::npos) << s.err;

  const GsmRun resumed = run_gsm8k(server_->url(), data_, out, {"--resume", "--parallel", "4"});
  ASSERT_EQ(resumed.rc, 0) << resumed.err;
  for (const char* k :
       {"accuracy", "accept_length", "accept_length_rank0", "request_accept_length_total"})
    EXPECT_EQ(resumed.report["metrics"][k], whole_.report["metrics"][k]) << k;
  EXPECT_EQ(resumed.report["accept_length_parts"]["status"], "combined");
  EXPECT_EQ(resumed.report["accept_length_parts"]["parts"], 2);
  EXPECT_EQ(whole_.report["accept_length_parts"]["status"], "single");
  EXPECT_NE(resumed.report["metric_notes"]["accept_length"].get<std::string>().find(
                "combined over 2 invocations"),
            std::string::npos)
      << resumed.report["metric_notes"].dump();
}

// SIGKILL leaves no counters for the killed part: the resumed figure says it is partial.
TEST_F(Interrupted, KilledInvocationMakesTheAcceptLengthPartial) {
  const std::string out = dir_.str("killed");
  const Spawned s = cut(out, SIGKILL);
  ASSERT_TRUE(WIFSIGNALED(s.status)) << s.err;
  const GsmRun resumed = run_gsm8k(server_->url(), data_, out, {"--resume", "--parallel", "4"});
  ASSERT_EQ(resumed.rc, 0) << resumed.err;
  EXPECT_EQ(resumed.report["metrics"]["accuracy"], whole_.report["metrics"]["accuracy"]);
  EXPECT_EQ(resumed.report["accept_length_parts"]["status"], "partial");
  const std::string detail = resumed.report["accept_length_parts"]["detail"];
  EXPECT_NE(detail.find("ended before it read /server_info"), std::string::npos) << detail;
  EXPECT_NE(resumed.report["metric_notes"]["accept_length"].get<std::string>().find("partial"),
            std::string::npos);
}

// The server dies mid-run: the stopped invocation cannot read its counters; the row says why.
TEST(StopsServerDies, UnreadCountersMakeTheFigurePartial) {
  TempDir d;
  const std::string data = write_questions(d, 30, 12);
  auto cfg = base_config(data, 12);
  cfg.accept_lengths = {3.0};
  const std::string out = d.str("out");
  {
    auto dying = cfg;
    dying.exit_after = 10;
    test_server::TestServer server(dying);
    server.start();
    cfg.port = server.port();  // restarted where it was
    const GsmRun r = run_gsm8k(server.url(), data, out, {"--retries", "0", "--parallel", "2"});
    ASSERT_EQ(r.rc, 3) << r.err;
  }
  const auto rows = eval::read_jsonl(out + "/server_accept.jsonl").records;
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0].contains("unread")) << rows[0].dump();
  test_server::TestServer again(cfg);
  again.start();
  const GsmRun resumed =
      run_gsm8k(again.url(), data, out, {"--resume", "--gate", "accept_length>2"});
  ASSERT_EQ(resumed.rc, 0) << resumed.err;
  EXPECT_EQ(resumed.report["accept_length_parts"]["status"], "partial");
  // The gate's verdict says its figure is partial, here and on stderr.
  EXPECT_NE(resumed.report["gates"][0]["detail"].get<std::string>().find("partial"),
            std::string::npos)
      << resumed.report["gates"].dump();
  EXPECT_NE(resumed.err.find("is judged on a partial accept length"), std::string::npos);
  EXPECT_NE(resumed.report["accept_length_parts"]["detail"].get<std::string>().find(
                "could not read /server_info"),
            std::string::npos);
}

// One request fails for good (HTTP 400, not retried) and stops the run: 1 failed, the rest of the
// questions without an answer not asked; the failed attempts are in the report by cause.
TEST(StopsCounting, FailedAndNotAskedAreApartAndAttemptsByCause) {
  TempDir d;
  const std::string data = write_questions(d, 20, 13);
  auto faulty = [&](int status, int64_t limit) {  // the first `limit` requests answer `status`
    auto c = base_config(data, 13);
    c.fail_rate = 1;
    c.fail_status = status;
    c.fault_limit = limit;
    return c;
  };
  test_server::TestServer server(faulty(400, 1));
  server.start();
  const GsmRun r = run_gsm8k(server.url(), data, d.str("out"), {"--parallel", "1"});
  ASSERT_EQ(r.rc, 3) << r.err;
  EXPECT_EQ(r.report["metrics"]["failed"], 1);
  EXPECT_EQ(r.report["metrics"]["not_asked"], 19);
  const std::string md = slurp(d.str("out/report.md"));
  EXPECT_NE(md.find("| 0 | 0 | 0 | 1 | 19 | 20 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| HTTP 400 | 1 |"), std::string::npos) << md;

  // Three 503s retried away: the run passes, its report counts the attempts by cause.
  test_server::TestServer retried(faulty(503, 3));
  retried.start();
  const GsmRun ok = run_gsm8k(retried.url(), data, d.str("ok"), {"--parallel", "1"});
  ASSERT_EQ(ok.rc, 0) << ok.err;
  EXPECT_NE(slurp(d.str("ok/report.md")).find("| HTTP 503 | 3 |"), std::string::npos);
}

}  // namespace
}  // namespace dsv4::e2e_test

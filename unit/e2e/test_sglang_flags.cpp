// SGLang's flags and numbers finished, against the test server: non-ASCII text in every protocol
// and stream mode, bench_serving's result rows and flags, the open-file limit, ranks reporting 0.0,
// HTTP-200 aborts in serve-bench, truncated reasoning answers, the thinking switch, numpy's
// arrivals, the report's accept-length columns (the local tokenizer: test_local_tokenizer.cpp).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <cmath>

#include "gsm8k_runner_util.hpp"
#include "http/process_setup.hpp"
#include "report/report_runs.hpp"
#include "report/report_table.hpp"
#include "serve_bench/bpe_decoder.hpp"
#include "serve_bench/bpe_encoder.hpp"
#include "serve_bench/serve_bench_metrics.hpp"
#include "serve_bench/serve_bench_run.hpp"
#include "serve_bench/serve_bench_workload.hpp"

namespace dsv4::e2e_test {
namespace {

using json = nlohmann::json;
using test_server::TestServer;
using test_server::TestServerConfig;

const std::string kNonAscii = std::string(DSV4_E2E_DATA_DIR) + "/gsm8k_non_ascii_24.jsonl";

double metric(const json& rep, const char* k) { return rep["metrics"][k].get<double>(); }

// Non-ASCII data in every protocol and stream mode: the server never cuts a character, so every
// run completes with the planted accuracy and the same answers, streamed or not; a token budget
// and aborts cut non-ASCII text too.
TEST(NonAsciiRuns, EveryProtocolAndStreamMode) {
  TempDir d;
  struct Mode {
    const char* api;
    bool stream, incremental;
    int interval;
  };
  const Mode modes[] = {{"sglang", false, false, 1},
                        {"sglang", true, false, 1},
                        {"sglang", true, true, 3},
                        {"openai-completions", false, false, 1},
                        {"openai-completions", true, false, 2},
                        {"openai-chat", false, false, 1},
                        {"openai-chat", true, false, 1}};
  std::map<std::string, std::vector<json>> outputs;
  for (const Mode& m : modes) {
    auto cfg = base_config(kNonAscii, 31);
    cfg.correct_rate = 0.75;
    cfg.stream_interval = m.interval;
    cfg.incremental_stream = m.incremental;
    TestServer server(cfg);
    server.start();
    const std::string name = std::string(m.api) + (m.stream ? "-s" : "") +
                             (m.incremental ? "i" : "") + std::to_string(m.interval);
    std::vector<std::string> extra = {"--api", m.api};
    if (m.stream) extra.push_back("--stream");
    const GsmRun run = run_gsm8k(server.url(), kNonAscii, d.str(name), extra);
    ASSERT_EQ(run.rc, 0) << name << ": " << run.err;
    EXPECT_DOUBLE_EQ(run.report["metrics"]["accuracy"].get<double>(), 0.75) << name;
    EXPECT_EQ(run.report["metrics"]["failed"].get<double>(), 0) << name;
    std::vector<json> o(24);
    for (const auto& r : run.results) o[r["index"].get<size_t>()] = r["output"];
    outputs[m.api].push_back(json(o));
    // A token budget that ends inside the non-ASCII text, and an abort cutting it.
    const GsmRun cut = run_gsm8k(server.url(), kNonAscii, d.str(name + "-cut"), [&] {
      auto e = extra;
      e.insert(e.end(), {"--max-new-tokens", "7"});
      return e;
    }());
    ASSERT_EQ(cut.rc, 0) << name << ": " << cut.err;
    EXPECT_EQ(cut.report["metrics"]["truncated"].get<double>(), 24) << name;
  }
  for (const auto& [api, runs] : outputs)
    for (size_t k = 1; k < runs.size(); ++k) EXPECT_EQ(runs[k], runs[0]) << api << " mode " << k;
  auto cfg = base_config(kNonAscii, 31);
  cfg.abort_rate = 1;
  cfg.fault_limit = 5;
  TestServer server(cfg);
  server.start();
  const GsmRun run = run_gsm8k(server.url(), kNonAscii, d.str("abort"), {"--stream"});
  ASSERT_EQ(run.rc, 0) << run.err;
  EXPECT_EQ(server.stats().aborts, 5u);
}

TEST(ServeBenchFlags, ResultBlockHasEveryPercentileRow) {
  eval::serve::ServingMetrics m;
  m.completed = 3;
  m.failed = 2;
  m.aborted = 1;
  m.ttft_ms = eval::serve::summarize({1, 2, 3});
  const std::string block = eval::serve::format_result_block(m, {});
  for (const char* what : {"E2E Latency", "TTFT", "TPOT", "ITL"})
    for (const char* stat : {"Mean", "Median", "P90", "P95", "P99"}) {
      const std::string row = std::string(stat) + " " + what + " (ms):";
      EXPECT_NE(block.find(row), std::string::npos) << row << " missing:\n" << block;
    }
  EXPECT_NE(block.find("Max ITL (ms):"), std::string::npos);
  auto row = [](const char* label, const char* value) {
    char b[128];
    std::snprintf(b, sizeof b, "\n%-40s %-10s\n", label, value);
    return std::string(b);
  };
  EXPECT_NE(block.find(row("P90 TTFT (ms):", "2.80")), std::string::npos) << block;
  EXPECT_NE(block.find(row("P95 TTFT (ms):", "2.90")), std::string::npos) << block;
  EXPECT_NE(block.find(row("Failed requests:", "2")), std::string::npos) << block;
  EXPECT_NE(block.find(row("Aborted requests (HTTP 200):", "1")), std::string::npos) << block;
}

// --url with --host or --port names both; bench_sglang's --backend srt; bench_serving's
// --flush-cache and --profile (--profile-num-steps).
TEST(ServeBenchFlags, UrlBackendFlushAndProfile) {
  TempDir d;
  const std::string data = write_questions(d, 6, 41);
  auto cfg = base_config(data, 41);
  cfg.profiler = true;
  TestServer server(cfg);
  server.start();
  std::string err;
  EXPECT_EQ(run_eval_capture({"gsm8k", "--url", server.url(), "--port", "30000", "--data", data,
                              "--out", d.str("g")},
                             err),
            2);
  EXPECT_NE(err.find("--url and --port"), std::string::npos) << err;
  EXPECT_EQ(run_eval_capture({"serve-bench", "--url", server.url(), "--host", "127.0.0.1",
                              "--vocab-size", "10", "--out", d.str("s")},
                             err),
            2);
  EXPECT_NE(err.find("--url and --host"), std::string::npos) << err;
  EXPECT_EQ(run_eval_capture({"serve-bench", "--base-url", server.url(), "--port", "1",
                              "--vocab-size", "10", "--out", d.str("s")},
                             err),
            2);
  EXPECT_NE(err.find("--base-url and --port"), std::string::npos) << err;
  // bench_sglang's --backend srt is the native API; anything else is named.
  EXPECT_EQ(
      run_eval_capture({"gsm8k", "--backend", "srt", "--host", "http://127.0.0.1", "--port",
                        std::to_string(server.port()), "--data", data, "--num-shots", "2",
                        "--num-questions", "0", "--out", d.str("srt"), "--progress-interval", "0"},
                       err),
      0)
      << err;
  EXPECT_TRUE(json::parse(server.stats().last_generation_body).contains("sampling_params"));
  EXPECT_EQ(run_eval_capture({"gsm8k", "--backend", "vllm", "--url", server.url(), "--data", data,
                              "--out", d.str("v")},
                             err),
            2);
  EXPECT_NE(err.find("--backend 'vllm'"), std::string::npos) << err;
  const std::vector<std::string> sb = {"serve-bench", "--url",
                                       server.url(),  "--vocab-size",
                                       "100",         "--num-prompts",
                                       "3",           "--random-input-len",
                                       "8",           "--random-output-len",
                                       "4",           "--disable-tqdm"};
  auto with = [&](std::vector<std::string> extra) {
    auto a = sb;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const uint64_t flushes = server.stats().flushes;
  ASSERT_EQ(run_eval_capture(with({"--flush-cache", "--out", d.str("f")}), err), 0) << err;
  EXPECT_EQ(server.stats().flushes, flushes + 1);
  EXPECT_EQ(run_eval_capture(with({"--flush-cache", "--no-flush", "--out", d.str("f2")}), err), 2);
  ASSERT_EQ(
      run_eval_capture(with({"--profile", "--profile-num-steps", "5", "--out", d.str("p1")}), err),
      0)
      << err;
  EXPECT_EQ(server.stats().profile_starts, 1u);
  EXPECT_EQ(server.stats().profile_stops, 0u);  // num_steps: the server stops by itself
  EXPECT_EQ(json::parse(server.stats().last_profile_body)["num_steps"], 5);
  ASSERT_EQ(run_eval_capture(with({"--profile", "--out", d.str("p2")}), err), 0) << err;
  EXPECT_EQ(server.stats().profile_starts, 2u);
  EXPECT_EQ(server.stats().profile_stops, 1u);
  EXPECT_NE(read_report(d.str("p2"))["context"]["profile"].get<std::string>().find("/stop_profile"),
            std::string::npos);
  EXPECT_EQ(run_eval_capture(with({"--profile-num-steps", "5", "--out", d.str("p3")}), err), 2);
  EXPECT_NE(err.find("--profile-num-steps needs --profile"), std::string::npos) << err;
  // A server without a profiler: a clear "not supported", exit 3, before any timed request.
  TestServerConfig plain;
  plain.threads = 16;
  TestServer other(plain);
  other.start();
  const uint64_t before = other.stats().generate_requests;
  EXPECT_EQ(run_eval_capture(
                {"serve-bench", "--url", other.url(), "--vocab-size", "100", "--num-prompts", "3",
                 "--warmup-requests", "0", "--disable-tqdm", "--profile", "--out", d.str("p4")},
                err),
            3);
  EXPECT_NE(err.find("not supported by this server"), std::string::npos) << err;
  EXPECT_EQ(other.stats().generate_requests, before);
}

// bench_serving's set_ulimit: the soft open-file limit is raised to the hard one.
TEST(OpenFiles, SoftLimitIsRaisedToTheHardOne) {
  rlimit was{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &was), 0);
  if (was.rlim_max != RLIM_INFINITY && was.rlim_max < 300)
    FAIL() << "the hard open-file limit " << was.rlim_max << " leaves no room for this test";
  rlimit low = was;
  low.rlim_cur = 256;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  const size_t now = eval::raise_open_file_limit();
  rlimit after{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &after), 0);
  EXPECT_EQ(after.rlim_cur, was.rlim_max);
  EXPECT_EQ(now, was.rlim_max == RLIM_INFINITY ? size_t(-1) : size_t(was.rlim_max));
  setrlimit(RLIMIT_NOFILE, &was);
}

// A concurrency (or a warmup, sent all at once) that the limit cannot hold is exit 2 before the
// first request; one it holds runs.
TEST(OpenFiles, ConcurrencyTheLimitCannotHoldIsRefusedFirst) {
  TempDir d;
  const std::string data = write_questions(d, 4, 42);
  auto cfg = base_config(data, 42);
  TestServer server(cfg);
  server.start();
  std::string err;
  EXPECT_EQ(run_limited(300,
                        {"gsm8k", "--url", server.url(), "--data", data, "--num-questions", "0",
                         "--num-shots", "2", "--parallel", "500", "--out", d.str("g")},
                        d.str("g.err"), err),
            2)
      << err;
  EXPECT_NE(err.find("--parallel 500"), std::string::npos) << err;
  // The seed's line: twice as many warmups as its concurrency.
  EXPECT_EQ(run_limited(300,
                        {"serve-bench", "--url", server.url(), "--vocab-size", "100",
                         "--num-prompts", "200", "--max-concurrency", "200", "--warmup-requests",
                         "400", "--random-input-len", "4", "--random-output-len", "2",
                         "--disable-tqdm", "--out", d.str("s")},
                        d.str("s.err"), err),
            2)
      << err;
  EXPECT_NE(err.find("--warmup-requests 400"), std::string::npos) << err;
  EXPECT_EQ(server.stats().generate_requests, 0u);
  EXPECT_EQ(
      run_limited(300,
                  {"serve-bench", "--url", server.url(), "--vocab-size", "100", "--num-prompts",
                   "20", "--max-concurrency", "10", "--warmup-requests", "20", "--random-input-len",
                   "4", "--random-output-len", "2", "--disable-tqdm", "--out", d.str("ok")},
                  d.str("ok.err"), err),
      0)
      << err;
}

// serve-bench skips a rank reporting 0.0 (no forward step), as gsm8k does.
TEST(ServeBenchAccept, RankReportingZeroIsSkipped) {
  TempDir d;
  TestServerConfig sc;
  sc.accept_lengths = {3.0, 2.0};
  sc.idle_rank_zero = true;
  sc.threads = 16;
  TestServer server(sc);
  server.start();
  std::string err;
  ASSERT_EQ(run_eval_capture(
                {"serve-bench", "--url", server.url(), "--vocab-size", "1000", "--num-prompts", "1",
                 "--random-input-len", "8", "--random-output-len", "30", "--random-range-ratio",
                 "1", "--warmup-requests", "0", "--disable-tqdm", "--out", d.str("s")},
                err),
            0)
      << err;
  const json info = json::parse(slurp(d.str("s/report.json")));
  const auto st = server.stats();
  const size_t busy = st.rank_verify[0] > 0 ? 0 : 1;
  ASSERT_EQ(st.rank_verify[1 - busy], 0u);
  const double want = double(st.rank_tokens[busy]) / double(st.rank_verify[busy]);
  EXPECT_DOUBLE_EQ(metric(info, "accept_length_mean"), want);  // not halved by a 0.0
  EXPECT_DOUBLE_EQ(metric(info, "accept_length_min"), want);   // not 0
  EXPECT_TRUE(info["accept_length_per_rank"][1 - busy].is_null()) << info.dump();
  bool noted = false;
  for (const auto& n : info["notes"])
    noted |= n.get<std::string>().find("not counted as 0") != std::string::npos;
  EXPECT_TRUE(noted) << info["notes"];
}

// SGLang's HTTP-200 aborts in serve-bench: failed, counted and shown as aborted.
TEST(ServeBenchAborts, CountedAndShownAsAborted) {
  TempDir d;
  TestServerConfig sc;
  sc.threads = 16;
  sc.abort_rate = 1;
  sc.fault_limit = 2;
  TestServer server(sc);
  server.start();
  std::string err;
  ::testing::internal::CaptureStdout();
  const int rc = run_eval_capture({"serve-bench", "--url",
                                   server.url(),  "--vocab-size",
                                   "1000",        "--num-prompts",
                                   "6",           "--random-input-len",
                                   "8",           "--random-output-len",
                                   "12",          "--random-range-ratio",
                                   "1",           "--warmup-requests",
                                   "0",           "--max-concurrency",
                                   "1",           "--max-failed",
                                   "2",           "--disable-tqdm",
                                   "--out",       d.str("s")},
                                  err);
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(rc, 0) << err;
  EXPECT_EQ(server.stats().aborts, 2u);
  const json rep = read_report(d.str("s"));
  EXPECT_EQ(metric(rep, "completed"), 4);
  EXPECT_EQ(metric(rep, "failed"), 2);
  EXPECT_EQ(metric(rep, "aborted"), 2);
  EXPECT_NE(out.find("Aborted requests (HTTP 200):             2"), std::string::npos) << out;
  EXPECT_NE(out.find("Successful requests:                     4"), std::string::npos) << out;
}

// Chat against a reasoning server: answers cut by the budget are counted; most cut warns.
TEST(Gsm8kReasoning, TruncatedAnswersAreCountedAndWarned) {
  TempDir d;
  const std::string data = write_questions(d, 8, 43);
  auto cfg = base_config(data, 43);
  cfg.reasoning_content = true;
  TestServer server(cfg);
  server.start();
  const GsmRun cut = run_gsm8k(server.url(), data, d.str("cut"),
                               {"--api", "openai-chat", "--max-new-tokens", "4"});
  ASSERT_EQ(cut.rc, 0) << cut.err;
  EXPECT_EQ(cut.report["metrics"]["truncated"], 8);
  EXPECT_NE(cut.err.find("warning: most answers were cut by the token budget"), std::string::npos)
      << cut.err;
  EXPECT_NE(cut.err.find("--max-new-tokens (4 now)"), std::string::npos) << cut.err;
  const GsmRun whole = run_gsm8k(server.url(), data, d.str("whole"), {"--api", "openai-chat"});
  ASSERT_EQ(whole.rc, 0) << whole.err;
  EXPECT_EQ(whole.report["metrics"]["truncated"], 0);
  EXPECT_EQ(whole.err.find("warning"), std::string::npos) << whole.err;
}

// Streamed (and plain) chat with both reasoning_content and content scores content only, and
// --thinking off reaches the request body.
TEST(Gsm8kReasoning, ContentIsScoredWhenReasoningIsAlsoPresent) {
  TempDir d;
  const std::string data = write_questions(d, 10, 44);
  auto cfg = base_config(data, 44);
  cfg.reasoning_text = "Thinking it over, maybe 99999.";
  cfg.correct_rate = 0.6;
  TestServer server(cfg);
  server.start();
  for (const char* s : {"--stream", ""}) {
    std::vector<std::string> extra = {"--api", "openai-chat", "--thinking", "off"};
    if (*s) extra.push_back(s);
    const GsmRun run = run_gsm8k(server.url(), data, d.str(*s ? "s" : "n"), extra);
    ASSERT_EQ(run.rc, 0) << run.err;
    EXPECT_DOUBLE_EQ(run.report["metrics"]["accuracy"].get<double>(), 0.6) << s;
    for (const auto& r : run.results)
      EXPECT_EQ(r["output"].get<std::string>().find("99999"), std::string::npos) << r.dump();
    const json b = json::parse(server.stats().last_generation_body);
    EXPECT_EQ(b["chat_template_kwargs"], (json{{"thinking", false}, {"enable_thinking", false}}))
        << b.dump();
  }
}

// random-ids arrivals are numpy's legacy RandomState exponential(1 / rate) after
// np.random.seed(seed), as bench_serving's get_request draws them (np.random.exponential):
// np.random.seed(0); np.random.random_sample(5) is 0.5488135039273248, 0.7151893663724195,
// 0.6027633760716439, 0.5448831829968969, 0.4236547993389047, and exponential(s) is
// -log(1 - u) * s. With ratio 1 and one token id no other draw comes first.
TEST(RandomIds, ArrivalTimesAreNumpys) {
  eval::serve::WorkloadSpec s;
  s.num_prompts = 6;
  s.input_len = 3;
  s.output_len = 2;
  s.range_ratio = 1;
  s.vocab_size = 1;
  s.seed = 0;
  s.request_rate = 4.0;
  const auto reqs = eval::serve::make_workload(s);
  const double u[] = {0.5488135039273248, 0.7151893663724195, 0.6027633760716439,
                      0.5448831829968969, 0.4236547993389047};
  double t = 0;
  ASSERT_EQ(reqs.size(), 6u);
  EXPECT_EQ(reqs[0].send_at_s, 0.0);
  for (size_t i = 1; i < 6; ++i) {
    t += -std::log(1.0 - u[i - 1]) * 0.25;
    EXPECT_NEAR(reqs[i].send_at_s, t, 1e-15) << "request " << i;
  }
  eval::serve::NumpyRandomState rs(42);  // np.random.seed(42); np.random.random_sample()
  EXPECT_EQ(rs.random_double(), 0.3745401188473625);
}

// The report shows accept_length_mean, accept_length_min and the per-rank values by default.
TEST(ReportColumns, AcceptLengthFiguresByDefault) {
  TempDir d;
  auto run = [](const std::string& spec, double mean, double min, double r0, double r1) {
    return json{{"suite", "gsm8k"},
                {"labels", {{"spec", spec}}},
                {"metrics",
                 {{"accuracy", 0.9},
                  {"accept_length", r0},
                  {"accept_length_mean", mean},
                  {"accept_length_min", min},
                  {"accept_length_rank0", r0},
                  {"accept_length_rank1", r1}}}};
  };
  fs::create_directories(d.path() / "runs");
  write_text(d.str("runs/a.json"), run("mtp", 3.1, 2.9, 3.3, 2.9).dump());
  write_text(d.str("runs/b.json"), run("eagle", 2.5, 2.25, 2.25, 2.75).dump());
  std::string err;
  ASSERT_EQ(run_eval_capture({"report", d.str("runs"), "--out", d.str("out"), "--quiet"}, err), 0)
      << err;
  const std::string md = slurp(d.str("out/comparison.md"));
  for (const char* h : {"accept length (mean of ranks)", "accept length (lowest rank)",
                        "accept length rank 0", "accept length rank 1"})
    EXPECT_NE(md.find(h), std::string::npos) << h << " missing:\n" << md;
  const json j = json::parse(slurp(d.str("out/comparison.json")));
  std::map<std::string, double> mins;
  for (const auto& r : j["rows"])
    mins[r["config"]["spec"].get<std::string>()] = r["values"]["accept_length_min"].get<double>();
  EXPECT_DOUBLE_EQ(mins["mtp"], 2.9);
  EXPECT_DOUBLE_EQ(mins["eagle"], 2.25);
}

}  // namespace
}  // namespace dsv4::e2e_test

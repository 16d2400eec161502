// serve-bench against the test server: planted prefill and per-token sleeps give the TTFT, TPOT,
// ITL and E2E the definitions predict; chunked streams; exact input and output lengths; Poisson
// pacing; concurrency cap; accept length after the flush; the command's block, gates and reports.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <thread>

#include "dsv4/fixtures/seed.hpp"
#include "e2e_test_util.hpp"
#include "serve_bench/serve_bench_run.hpp"

namespace {

namespace fs = std::filesystem;
using namespace dsv4::eval::serve;
using dsv4::e2e_test::run_eval;
using dsv4::e2e_test::slurp;
using dsv4::test_server::TestServer;
using dsv4::test_server::TestServerConfig;
using nlohmann::json;

// Timing tolerance. A planted sleep is a lower bound (a measurement can come out lower only by the
// delivery jitter of one chunk, kBelowMs); scheduling can only add to it. How much it adds is the
// timer's resolution on this machine right now: each attempt first measures the mean overshoot of
// a few short sleeps, and allows per planted sleep kPerSleepMs plus twice that overshoot, and for
// the request's own round trip kBaseMs plus three times it. Load only ever adds delay, so a timing
// check is repeated on a fresh run (up to 3 times) and passes when one run is within tolerance;
// every attempt's numbers are reported when none is.
constexpr double kBelowMs = 1.0;
constexpr double kBaseMs = 2.0;
constexpr double kPerSleepMs = 1.0;

// Mean overshoot in ms of 10 sleeps of 5 ms on this thread.
double sleep_overshoot_ms() {
  double total = 0;
  for (int i = 0; i < 10; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    total +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() -
        5.0;
  }
  return total / 10;
}

struct Check {
  double overshoot_ms = sleep_overshoot_ms();
  std::string why;
  // `got` within [want - kBelowMs, want + base + per-sleep allowance * sleeps / per].
  void near(const char* what, double got, double want, double sleeps, double per = 1.0) {
    const double hi =
        want + kBaseMs + 3 * overshoot_ms + (kPerSleepMs + 2 * overshoot_ms) * sleeps / per;
    if (got < want - kBelowMs || got > hi) {
      std::ostringstream o;
      o << what << " = " << got << " ms, planted " << want << " ms (allowed [" << want - kBelowMs
        << ", " << hi << "] at sleep overshoot " << overshoot_ms << " ms); ";
      why += o.str();
    }
  }
};

template <class F>
void timing_attempts(F attempt) {
  std::string log;
  for (int i = 1; i <= 3; ++i) {
    Check c;
    attempt(c);
    if (::testing::Test::HasFatalFailure()) return;
    if (c.why.empty()) return;
    log += "attempt " + std::to_string(i) + ": " + c.why + "\n";
  }
  ADD_FAILURE() << "timings off in every attempt:\n" << log;
}

TestServerConfig server_config(double prefill_ms, double token_ms, int interval) {
  TestServerConfig c;
  c.prefill_sleep_ms = prefill_ms;
  c.token_sleep_ms = token_ms;
  c.stream_interval = interval;
  c.vocab_size = 5000;
  c.threads = 64;
  return c;
}

BenchOptions bench(const TestServer& s, uint64_t seed, int64_t n, int64_t in, int64_t out,
                   double ratio) {
  BenchOptions b;
  b.url = s.url();
  b.workload.num_prompts = n;
  b.workload.input_len = in;
  b.workload.output_len = out;
  b.workload.range_ratio = ratio;
  b.workload.seed = seed % (uint64_t(1) << 32);  // np.random.seed takes 32 bits
  b.workload.vocab_size = 5000;                  // SGLang's servers do not report it
  b.vocab_source = "--vocab-size";
  b.progress = false;
  return b;
}

TEST(ServeBenchServer, PlantedSleepsGiveTheDefinedTimings) {
  TestServer server(server_config(40, 10, 1));
  server.start();
  const uint64_t seed = dsv4::fx::test_seed();
  DSV4_CASE(seed, "prompts=6 input=100 output=16 prefill=40ms token=10ms interval=1 conc=3");
  BenchOptions b = bench(server, seed, 6, 100, 16, 1.0);
  b.max_concurrency = 3;
  timing_attempts([&](Check& c) {
    const BenchOutcome r = run_serve_bench(b);
    EXPECT_EQ(r.vocab_source, "--vocab-size");
    EXPECT_EQ(r.vocab_size, 5000);
    ASSERT_EQ(r.metrics.completed, 6) << (r.errors.empty() ? "" : r.errors[0]);
    EXPECT_EQ(r.metrics.total_input, 6 * 99);  // text form: BOS (1 special token) to the server
    EXPECT_EQ(r.metrics.total_output, 96);
    EXPECT_EQ(r.short_outputs, 0);
    EXPECT_EQ(r.prompt_len_mismatches, 0);
    EXPECT_EQ(r.metrics.itl_ms.count, 6u * 15u);
    for (const auto& t : r.timings) {
      EXPECT_EQ(t.first_chunk_tokens, 1);
      EXPECT_EQ(t.output_len, 16);
      // TPOT's definition, exactly: (E2E - TTFT) / (n - 1).
      EXPECT_NEAR((t.latency_s - t.ttft_s) / 15.0,
                  std::accumulate(t.itl_s.begin(), t.itl_s.end(), 0.0) / 15.0, 2e-3);
    }
    EXPECT_LE(server.stats().max_concurrent, 3u);
    // TTFT = prefill + one token (2 sleeps); ITL = TPOT = one token; E2E = prefill + 16 tokens.
    c.near("median TTFT", r.metrics.ttft_ms.median, 50.0, 2);
    c.near("mean TTFT", r.metrics.ttft_ms.mean, 50.0, 2);
    c.near("mean TPOT", r.metrics.tpot_ms.mean, 10.0, 1);
    c.near("median ITL", r.metrics.itl_ms.median, 10.0, 1);
    c.near("mean ITL", r.metrics.itl_ms.mean, 10.0, 1);
    c.near("mean E2E", r.metrics.e2e_ms.mean, 200.0, 17);
    // Two waves of three requests; concurrency = sum(E2E) / duration, near 3.
    c.near("duration", 1000.0 * r.metrics.duration_s, 400.0, 2 * 17 + 4);
    if (!(r.metrics.concurrency > 2.4 && r.metrics.concurrency <= 3.0 + 1e-9))
      c.why += "concurrency " + std::to_string(r.metrics.concurrency) + " not in (2.4, 3]; ";
  });
}

TEST(ServeBenchServer, ChunkedStreamCountsEachChunkAsEqualGaps) {
  TestServer server(server_config(20, 10, 4));
  server.start();
  const uint64_t seed = dsv4::fx::test_seed();
  DSV4_CASE(seed, "prompts=4 input=64 output=16 prefill=20ms token=10ms interval=4");
  BenchOptions b = bench(server, seed, 4, 64, 16, 1.0);
  b.max_concurrency = 4;
  timing_attempts([&](Check& c) {
    const BenchOutcome r = run_serve_bench(b);
    ASSERT_EQ(r.metrics.completed, 4);
    for (const auto& t : r.timings) {
      EXPECT_EQ(t.first_chunk_tokens, 4);
      ASSERT_EQ(t.itl_s.size(), 12u);
      for (size_t k = 0; k < 12; k += 4) EXPECT_DOUBLE_EQ(t.itl_s[k], t.itl_s[k + 3]);
    }
    // First chunk: 4 tokens after 20 + 40 ms (2 sleeps). Then 3 chunks of 4 tokens every 40 ms:
    // 12 gaps of 10 ms (one sleep per 4 gaps). E2E = 20 + 160 ms (5 sleeps).
    // TPOT = (E2E - TTFT) / 15 = (180 - 60) / 15 = 8 ms (3 sleeps over 15).
    c.near("median TTFT", r.metrics.ttft_ms.median, 60.0, 2);
    c.near("mean ITL", r.metrics.itl_ms.mean, 10.0, 1, 4);
    c.near("mean E2E", r.metrics.e2e_ms.mean, 180.0, 5);
    c.near("mean TPOT", r.metrics.tpot_ms.mean, 8.0, 3, 15);
  });
}

TEST(ServeBenchServer, InputAndOutputLengthsAreExact) {
  TestServer server(server_config(0, 0, 1));
  server.start();
  const uint64_t seed = dsv4::fx::test_seed();
  DSV4_CASE(seed, "prompts=24 input=80 output=20 ratio=0.5 conc=8 --tokenize-prompt");
  BenchOptions b = bench(server, seed, 24, 80, 20, 0.5);
  b.max_concurrency = 8;
  b.tokenize_prompt = true;
  const BenchOutcome r = run_serve_bench(b);
  EXPECT_NE(server.stats().last_generation_body.find("\"input_ids\":["), std::string::npos);
  ASSERT_EQ(r.metrics.completed, 24);
  WorkloadSpec w = b.workload;
  w.vocab_size = 5000;
  const auto reqs = make_workload(w);
  int64_t in_sum = 0, out_sum = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(r.timings[i].prompt_len, int64_t(reqs[i].input_ids.size())) << "request " << i;
    EXPECT_EQ(r.timings[i].output_len, reqs[i].output_len) << "request " << i;
    in_sum += int64_t(reqs[i].input_ids.size());
    out_sum += reqs[i].output_len;
  }
  EXPECT_EQ(r.metrics.total_input, in_sum);
  EXPECT_EQ(r.metrics.total_output, out_sum);
  EXPECT_EQ(r.prompt_len_mismatches, 0);  // the server counted every input_ids list as sent
  EXPECT_EQ(r.short_outputs, 0);

  // The same through a server that streams text deltas (--incremental-streaming-output) in chunks
  // of 3: the counts come from meta_info.completion_tokens either way.
  TestServerConfig inc = server_config(0, 0, 3);
  inc.incremental_stream = true;
  TestServer s2(inc);
  s2.start();
  b.url = s2.url();
  const BenchOutcome r2 = run_serve_bench(b);
  ASSERT_EQ(r2.metrics.completed, 24);
  EXPECT_EQ(r2.metrics.total_input, in_sum);
  EXPECT_EQ(r2.metrics.total_output, out_sum);
  for (size_t i = 0; i < reqs.size(); ++i)
    EXPECT_EQ(r2.timings[i].first_chunk_tokens, std::min<int64_t>(3, reqs[i].output_len));
}

// bench_serving's default form: each drawn prompt cut by the tokenizer's special tokens (the test
// server's BOS: 1), decoded by /v1/detokenize with special tokens kept and sent as "text"; the
// input tokens counted are the ids decoded, and the server (BOS added back) prefills the drawn
// length, so no request is a prompt_len mismatch.
TEST(ServeBenchServer, PromptsGoAsDecodedTextByDefault) {
  TestServer server(server_config(0, 0, 1));
  server.start();
  const uint64_t seed = dsv4::fx::test_seed();
  DSV4_CASE(seed, "prompts=12 input=40 output=6 ratio=0.5 conc=1 text form");
  BenchOptions b = bench(server, seed, 12, 40, 6, 0.5);
  b.max_concurrency = 1;  // in order: the server's last body is the last prompt's
  b.warmup_requests = 0;
  const BenchOutcome r = run_serve_bench(b);
  ASSERT_EQ(r.metrics.completed, 12);
  EXPECT_EQ(r.special_tokens, 1);
  EXPECT_EQ(r.prompt_form.rfind("text", 0), 0u) << r.prompt_form;
  const auto reqs = make_workload(b.workload);
  int64_t in_sum = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(r.timings[i].prompt_len, int64_t(reqs[i].input_ids.size()) - 1) << "request " << i;
    in_sum += int64_t(reqs[i].input_ids.size()) - 1;
  }
  EXPECT_EQ(r.metrics.total_input, in_sum);
  EXPECT_EQ(r.prompt_len_mismatches, 0);
  // The body of the last request is its prompt's first len-1 ids, decoded by the server's rule
  // (a space and the id in base 62 per id), sent as text, with no input_ids.
  const json body = json::parse(server.stats().last_generation_body);
  ASSERT_TRUE(body.contains("text")) << body.dump();
  EXPECT_FALSE(body.contains("input_ids"));
  const std::string digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string want;
  const auto& ids = reqs.back().input_ids;
  for (size_t j = 0; j + 1 < ids.size(); ++j) {
    std::string d;
    for (int64_t v = ids[j]; v; v /= 62) d.insert(d.begin(), digits[size_t(v % 62)]);
    want += (ids[j] == 0 ? std::string("<s>") : " " + d);
  }
  EXPECT_EQ(body["text"], want);
  EXPECT_EQ(body["sampling_params"]["max_new_tokens"], reqs.back().output_len);
}

TEST(ServeBenchServer, TokenIdsOutsideTheServersVocabularyFail) {
  TestServer server(server_config(0, 0, 1));
  server.start();
  const uint64_t seed = dsv4::fx::test_seed();
  DSV4_CASE(seed, "prompts=4 input=200 client vocab=100000 server vocab=5000");
  BenchOptions b = bench(server, seed, 4, 200, 4, 1.0);
  b.workload.vocab_size = 100000;  // the server's is 5000: 200 ids each, some above
  b.warmup_requests = 0;
  b.tokenize_prompt = true;  // as text, the server decodes them (it checks no vocabulary there)
  const BenchOutcome r = run_serve_bench(b);
  EXPECT_EQ(r.metrics.failed, 4);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_NE(r.errors[0].find("400"), std::string::npos) << r.errors[0];
}

TEST(ServeBenchServer, RequestRatePacesSendsAsTheSeededArrivals) {
  TestServer server(server_config(0, 0, 1));
  server.start();
  const uint64_t seed = dsv4::fx::test_seed();
  DSV4_CASE(seed, "prompts=12 input=16 output=4 rate=40/s");
  BenchOptions b = bench(server, seed, 12, 16, 4, 1.0);
  b.workload.request_rate = 40.0;
  b.warmup_requests = 0;
  WorkloadSpec w = b.workload;
  w.vocab_size = 5000;
  const auto reqs = make_workload(w);
  ASSERT_GT(reqs.back().send_at_s, 0.05);  // the arrivals spread out (mean 0.275 s)
  timing_attempts([&](Check& c) {
    const BenchOutcome r = run_serve_bench(b);
    ASSERT_EQ(r.metrics.completed, 12);
    EXPECT_EQ(r.context.request_rate.value_or(0), 40.0);
    for (size_t i = 1; i < reqs.size(); ++i) {
      const double sent_ms = 1000.0 * (r.timings[i].start_s - r.timings[0].start_s);
      c.near(("send offset of request " + std::to_string(i)).c_str(), sent_ms,
             1000.0 * (reqs[i].send_at_s - reqs[0].send_at_s), 2);  // 2 ms pacing tick
    }
  });
}

TEST(ServeBenchServer, AcceptLengthAfterTheFlushPerRank) {
  TestServerConfig c = server_config(0, 0, 1);
  c.accept_lengths = {3.0, 2.0};
  TestServer server(c);
  server.start();
  const uint64_t seed = dsv4::fx::test_seed();
  DSV4_CASE(seed, "prompts=16 input=16 output=60 dp=2 accept=3,2 warmup=3");
  BenchOptions b = bench(server, seed, 16, 16, 60, 1.0);
  b.warmup_requests = 3;
  const BenchOutcome r = run_serve_bench(b);
  ASSERT_EQ(r.metrics.completed, 16);
  EXPECT_TRUE(r.flushed);
  ASSERT_EQ(r.accept_per_rank.size(), 2u);
  const auto st = server.stats();
  SCOPED_TRACE("server: flushes " + std::to_string(st.flushes) + ", rank tokens " +
               std::to_string(st.rank_tokens[0]) + "/" + std::to_string(st.rank_tokens[1]) +
               ", verify " + std::to_string(st.rank_verify[0]) + "/" +
               std::to_string(st.rank_verify[1]) + ", requests " +
               std::to_string(st.generate_requests));
  // Each request of 60 tokens takes 60/3 = 20 verify steps on rank 0 and 60/2 = 30 on rank 1; the
  // input_ids pick the rank (16 random prompts reach both but with probability 2^-15).
  EXPECT_NEAR(r.accept_per_rank[0].value_or(0), 3.0, 1e-9);
  EXPECT_NEAR(r.accept_per_rank[1].value_or(0), 2.0, 1e-9);
  // SGLang's accept length is DP rank 0's, not the mean of the ranks.
  EXPECT_NEAR(r.context.accept_length.value_or(0), 3.0, 1e-9);

  TestServerConfig off = server_config(0, 0, 1);
  off.spec = false;
  TestServer s2(off);
  s2.start();
  const BenchOutcome r2 = run_serve_bench(bench(s2, seed, 2, 8, 4, 1.0));
  EXPECT_FALSE(r2.context.accept_length.has_value());
  EXPECT_NE(r2.accept_note.find("speculative decoding off"), std::string::npos) << r2.accept_note;
}

TEST(ServeBenchServer, CannotStartWithoutVocabularyOrServer) {
  TestServerConfig c = server_config(0, 0, 1);
  TestServer server(c);
  server.start();
  try {
    BenchOptions none = bench(server, 1, 2, 8, 4, 1.0);
    none.workload.vocab_size = 0;
    run_serve_bench(none);
    FAIL() << "ran without a vocabulary size";
  } catch (const BenchError& e) {
    EXPECT_EQ(e.exit_code, 2);
    EXPECT_NE(std::string(e.what()).find("--vocab-size"), std::string::npos) << e.what();
  }
  BenchOptions b = bench(server, 1, 2, 8, 4, 1.0);
  b.url = "http://127.0.0.1:" + std::to_string(server.port());
  server.stop();
  try {
    run_serve_bench(b);
    FAIL() << "ran against a stopped server";
  } catch (const BenchError& e) {
    EXPECT_EQ(e.exit_code, 3) << e.what();
  }
}

double read_report_tpot(const fs::path& dir) {
  return nlohmann::json::parse(slurp((dir / "report.json").string()))["metrics"]["mean_tpot_ms"];
}

TEST(ServeBenchCommand, BlockGatesReportsAndAComparisonOfPlantedConfigurations) {
  dsv4::e2e_test::TempDir tmp;
  const fs::path root = tmp.path();
  // Two planted configurations: "spec=off" at 20 ms per token, "spec=mtp" at 10 ms.
  struct Config {
    const char* spec;
    double token_ms;
  };
  for (const Config& cfg : {Config{"off", 20.0}, Config{"mtp", 10.0}}) {
    TestServer server(server_config(20, cfg.token_ms, 1));
    server.start();
    const std::string out = (root / cfg.spec).string();
    ::testing::internal::CaptureStdout();
    const int rc = run_eval({"serve-bench",
                             "--url",
                             server.url(),
                             "--vocab-size",
                             "5000",
                             "--random-input",
                             "32",
                             "--random-output",
                             "12",
                             "--random-range-ratio",
                             "1",
                             "--num-prompts",
                             "4",
                             "--max-concurrency",
                             "4",
                             "--warmup-requests",
                             "1",
                             "--gate",
                             "mean_tpot_ms<50",
                             "--gate",
                             "completed==4",
                             "--label",
                             "backend=test",
                             "--label",
                             std::string("spec=") + cfg.spec,
                             "--out",
                             out,
                             "--no-progress"});
    const std::string stdout_text = ::testing::internal::GetCapturedStdout();
    ASSERT_EQ(rc, 0) << stdout_text << slurp(out + "/report.md");
    EXPECT_NE(stdout_text.find("============ Serving Benchmark Result ============"),
              std::string::npos);
    EXPECT_NE(stdout_text.find("Successful requests:                     4"), std::string::npos)
        << stdout_text;
    const auto j = nlohmann::json::parse(slurp(out + "/report.json"));
    EXPECT_EQ(j["suite"], "serve-bench");
    EXPECT_EQ(j["labels"]["spec"], cfg.spec);
    EXPECT_EQ(j["metrics"]["total_output_tokens"], 48);
    EXPECT_EQ(j["gates"].size(), 2u);
    EXPECT_TRUE(fs::exists(fs::path(out) / "junit.xml"));
  }
  // A gate that fails gives exit 1 and a FAIL report.
  {
    TestServer server(server_config(0, 1, 1));
    server.start();
    ::testing::internal::CaptureStdout();
    const int rc = run_eval({"serve-bench", "--url", server.url(), "--vocab-size", "5000",
                             "--num-prompts", "2", "--random-input", "8", "--random-output", "4",
                             "--random-range-ratio", "1", "--gate", "mean_tpot_ms<0.001", "--out",
                             (root / "fail").string(), "--no-progress"});
    ::testing::internal::GetCapturedStdout();
    EXPECT_EQ(rc, 1);
    EXPECT_EQ(nlohmann::json::parse(slurp((root / "fail" / "report.json").string()))["status"],
              "FAIL");
  }
  // Failed requests: every warmup failing, or more timed failures than --max-failed, is exit 3
  // with an ERROR report; within --max-failed the run stands and the report says so.
  {
    TestServerConfig c = server_config(0, 0, 1);
    c.fail_rate = 1.0;
    c.fail_status = 500;
    TestServer server(c);
    server.start();
    const std::vector<std::string> base = {
        "serve-bench", "--url",          server.url(), "--vocab-size",    "5000", "--num-prompts",
        "3",           "--random-input", "8",          "--random-output", "4",    "--no-progress"};
    auto with = [&](std::vector<std::string> extra, const fs::path& out) {
      auto a = base;
      a.insert(a.end(), extra.begin(), extra.end());
      a.push_back("--out");
      a.push_back(out.string());
      ::testing::internal::CaptureStdout();
      const int rc = run_eval(a);
      ::testing::internal::GetCapturedStdout();
      return rc;
    };
    EXPECT_EQ(with({}, root / "warm"), 3);
    auto j = nlohmann::json::parse(slurp((root / "warm" / "report.json").string()));
    EXPECT_EQ(j["status"], "ERROR");
    EXPECT_NE(j["error"].get<std::string>().find("every warmup request failed"), std::string::npos);
  }
  {
    TestServerConfig c = server_config(0, 0, 1);
    c.fail_rate = 1.0;
    c.fail_status = 500;
    c.fault_limit = 1;  // exactly the first timed request fails
    TestServer server(c);
    server.start();
    ::testing::internal::CaptureStdout();
    int rc =
        run_eval({"serve-bench", "--url", server.url(), "--vocab-size", "5000", "--num-prompts",
                  "3", "--random-input", "8", "--random-output", "4", "--warmup-requests", "0",
                  "--max-concurrency", "1", "--no-progress", "--out", (root / "one").string()});
    ::testing::internal::GetCapturedStdout();
    EXPECT_EQ(rc, 3);
    auto j = nlohmann::json::parse(slurp((root / "one" / "report.json").string()));
    EXPECT_EQ(j["status"], "ERROR");
    EXPECT_EQ(j["metrics"]["failed"], 1);
    EXPECT_EQ(j["metrics"]["completed"], 2);
  }
  {
    TestServerConfig c = server_config(0, 0, 1);
    c.fail_rate = 1.0;
    c.fail_status = 500;
    c.fault_limit = 1;
    TestServer server(c);
    server.start();
    ::testing::internal::CaptureStdout();
    const int rc = run_eval({"serve-bench",
                             "--url",
                             server.url(),
                             "--vocab-size",
                             "5000",
                             "--num-prompts",
                             "3",
                             "--random-input",
                             "8",
                             "--random-output",
                             "4",
                             "--random-range-ratio",
                             "1",
                             "--warmup-requests",
                             "0",
                             "--max-failed",
                             "1",
                             "--details",
                             "--no-progress",
                             "--out",
                             (root / "tolerated").string()});
    ::testing::internal::GetCapturedStdout();
    EXPECT_EQ(rc, 0);
    const std::string md = slurp((root / "tolerated" / "report.md").string());
    EXPECT_NE(md.find("1 request(s) failed"), std::string::npos) << md;
    // --details: one line per request with its lengths, timings and error.
    std::istringstream lines(slurp((root / "tolerated" / "requests.jsonl").string()));
    int n = 0, failed = 0;
    for (std::string line; std::getline(lines, line); ++n) {
      const auto d = nlohmann::json::parse(line);
      EXPECT_EQ(d["input_len"], 7);  // 8 drawn, one special token left to the server (text)
      if (!d["success"].get<bool>()) {
        ++failed;
        EXPECT_NE(d["error"].get<std::string>().find("500"), std::string::npos) << line;
      } else {
        EXPECT_EQ(d["output_len"], 4);
        EXPECT_EQ(d["itl_s"].size(), 3u);
      }
    }
    EXPECT_EQ(n, 3);
    EXPECT_EQ(failed, 1);
  }
  EXPECT_EQ(run_eval({"serve-bench", "--vocab-size", "5", "--request-rate", "fast", "--out",
                      (root / "x").string()}),
            2);
  EXPECT_EQ(run_eval({"serve-bench", "--vocab-size", "5", "--gate", "tpot<<3", "--out",
                      (root / "x").string()}),
            2);

  // The comparison of the two planted configurations: TPOT speedup near 20/10 = 2.
  ::testing::internal::CaptureStdout();
  const int rc = run_eval({"report", (root / "off").string(), (root / "mtp").string(), "--group-by",
                           "backend,spec", "--baseline", "spec=off", "--columns",
                           "ttft,tpot,itl,ttt", "--out", (root / "cmp").string()});
  const std::string md = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(rc, 0) << md;
  const auto cmp = nlohmann::json::parse(slurp((root / "cmp" / "comparison.json").string()));
  ASSERT_EQ(cmp["rows"].size(), 2u) << md;
  EXPECT_EQ(cmp["rows"][0]["config"]["spec"], "off");
  // The speedup is the baseline's TPOT over this one's, as the two runs reported them; each run
  // is at least its planted 20 or 10 ms, and load (which varies between the runs) only adds, so
  // the ratio itself has no upper bound a loaded build machine respects; only its sign is fixed.
  const double off = read_report_tpot(root / "off"), mtp = read_report_tpot(root / "mtp");
  EXPECT_GE(off, 20.0 - 1.0);
  EXPECT_GE(mtp, 10.0 - 1.0);
  const double speedup = cmp["rows"][1]["speedups"]["tpot"].get<double>();
  EXPECT_DOUBLE_EQ(speedup, off / mtp) << md;
  EXPECT_GT(speedup, 1.0) << md;
}

}  // namespace

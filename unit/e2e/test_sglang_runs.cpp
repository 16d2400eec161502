// Runs against the test server that pin what SGLang's real servers do to a result: planted per-rank
// accept lengths under each definition, ranks without a forward step, failed and aborted requests,
// unstripped stop strings, retried streams, the wall time, the back-off bound, the API key,
// reasoning_content, incremental streams detected from /server_info, the router's /server_info.
#include <gtest/gtest.h>

#include <chrono>
#include <sstream>

#include "dsv4/fixtures/seed.hpp"
#include "gsm8k_runner_util.hpp"
#include "http/process_setup.hpp"
#include "serve_bench/serve_bench_run.hpp"

namespace dsv4::e2e_test {
namespace {

using json = nlohmann::json;
using test_server::TestServer;
using test_server::TestServerConfig;

double metric(const GsmRun& r, const char* k) { return r.report["metrics"][k].get<double>(); }

// The server's own per-rank accept length since the flush: tokens / verify steps.
std::vector<double> server_ranks(const TestServer& s) {
  const auto st = s.stats();
  std::vector<double> v;
  for (size_t r = 0; r < st.rank_tokens.size(); ++r)
    v.push_back(st.rank_verify[r] ? double(st.rank_tokens[r]) / double(st.rank_verify[r]) : -1);
  return v;
}

// Two planted ranks: accept_length is rank 0's, accept_length_mean their mean, _min the lower.
TEST(AcceptLengthRuns, PlantedTwoRankServer) {
  TempDir d;
  const std::string data = write_questions(d, 40, 5);
  for (bool router : {false, true}) {
    auto cfg = base_config(data, 5);
    cfg.accept_lengths = {2.0, 4.0};
    cfg.router = router;
    TestServer server(cfg);
    server.start();
    const GsmRun run = run_gsm8k(server.url(), data, d.str(router ? "r" : "p"), {});
    ASSERT_EQ(run.rc, 0) << run.err;
    const auto ranks = server_ranks(server);
    ASSERT_EQ(ranks.size(), 2u);
    ASSERT_GT(ranks[0], 0);
    ASSERT_GT(ranks[1], 0);
    EXPECT_DOUBLE_EQ(metric(run, "accept_length"), ranks[0]) << "router " << router;
    EXPECT_DOUBLE_EQ(metric(run, "accept_length_rank1"), ranks[1]);
    EXPECT_DOUBLE_EQ(metric(run, "accept_length_mean"), (ranks[0] + ranks[1]) / 2);
    EXPECT_DOUBLE_EQ(metric(run, "accept_length_min"), std::min(ranks[0], ranks[1]));
    EXPECT_NEAR(metric(run, "accept_length"), 2.0, 0.2);
  }
}

// One question on four ranks: three ranks run no forward step and report no key.
TEST(AcceptLengthRuns, RankWithoutForwardStepIsSkipped) {
  TempDir d;
  const std::string data = write_questions(d, 4, 9);
  auto cfg = base_config(data, 9);
  cfg.accept_lengths = {3.0, 3.0, 3.0, 3.0};
  TestServer server(cfg);
  server.start();
  const GsmRun run =
      run_gsm8k(server.url(), data, d.str("out"), {"--num-questions", "1", "--num-shots", "0"});
  ASSERT_EQ(run.rc, 0) << run.err;
  const auto ranks = server_ranks(server);
  size_t busy = 0, reporting = 0;
  for (size_t r = 0; r < ranks.size(); ++r)
    if (ranks[r] > 0) busy = r, ++reporting;
  ASSERT_EQ(reporting, 1u);
  EXPECT_DOUBLE_EQ(metric(run, "accept_length_mean"), ranks[busy]);  // not a quarter of it
  EXPECT_DOUBLE_EQ(metric(run, "accept_length_min"), ranks[busy]);   // not 0
  EXPECT_EQ(run.report["metrics"]["accept_length"].is_null(), busy != 0);
  bool noted = false;
  for (const auto& n : run.report["notes"])
    noted |= n.get<std::string>().find("not counted as 0") != std::string::npos;
  EXPECT_TRUE(noted) << run.report["notes"].dump();

  // serve-bench: one prompt, two ranks.
  TestServerConfig sc;
  sc.accept_lengths = {3.0, 2.0};
  sc.threads = 16;
  TestServer s2(sc);
  s2.start();
  dsv4::eval::serve::BenchOptions b;
  b.url = s2.url();
  b.workload.num_prompts = 1;
  b.workload.input_len = 8;
  b.workload.output_len = 30;
  b.workload.range_ratio = 1;
  b.workload.vocab_size = 1000;
  b.warmup_requests = 0;
  b.progress = false;
  const auto res = dsv4::eval::serve::run_serve_bench(b);
  ASSERT_EQ(res.accept_per_rank.size(), 2u);
  EXPECT_NE(res.accept_per_rank[0].has_value(), res.accept_per_rank[1].has_value());
  EXPECT_EQ(res.context.accept_length, res.accept_per_rank[0]);
}

// Requests that fail after retries count as failed (wrong), never as invalid answers.
TEST(Gsm8kRuns, FailedRequestsAreNotInvalid) {
  TempDir d;
  const std::string data = write_questions(d, 20, 3);
  auto cfg = base_config(data, 3);
  cfg.fail_rate = 1;
  cfg.fault_limit = 5;
  TestServer server(cfg);
  server.start();
  const GsmRun run = run_gsm8k(server.url(), data, d.str("out"),
                               {"--retries", "0", "--max-failed", "100", "--parallel", "1"});
  ASSERT_EQ(run.rc, 0) << run.err;
  EXPECT_EQ(metric(run, "failed"), 5);
  EXPECT_EQ(metric(run, "invalid"), 0);
  EXPECT_DOUBLE_EQ(metric(run, "accuracy"), 15.0 / 20.0);
}

// A server that ignores stop strings runs on into "Question: ... Answer: 42": never scored.
TEST(Gsm8kRuns, TextAfterAStopStringIsNeverScored) {
  TempDir d;
  const std::string data = write_questions(d, 20, 4);
  for (const char* api : {"sglang", "openai-completions"}) {  // chat ends at EOS without stops
    auto cfg = base_config(data, 4);
    cfg.ignore_stop = true;
    TestServer server(cfg);
    server.start();
    const GsmRun run = run_gsm8k(server.url(), data, d.str(api), {"--api", api});
    ASSERT_EQ(run.rc, 0) << run.err;
    EXPECT_DOUBLE_EQ(metric(run, "accuracy"), 1.0) << api;
    EXPECT_NE(run.results[0]["output"].get<std::string>().find("Question"), std::string::npos);
  }
}

// The body on the wire: temperature 0, the stops and the budget, for every API.
TEST(Gsm8kRuns, RequestBodyOnTheWire) {
  TempDir d;
  const std::string data = write_questions(d, 4, 6);
  for (const char* api : {"sglang", "openai-completions", "openai-chat"}) {
    TestServer server(base_config(data, 6));
    server.start();
    const GsmRun run = run_gsm8k(server.url(), data, d.str(api),
                                 {"--api", api, "--max-new-tokens", "333", "--num-questions", "1"});
    ASSERT_EQ(run.rc, 0) << run.err;
    const json b = json::parse(server.stats().last_generation_body);
    const json& sp = std::string(api) == "sglang" ? b["sampling_params"] : b;
    EXPECT_EQ(sp["temperature"], 0.0) << api;
    EXPECT_EQ(sp["stop"], json({"Question", "Assistant:", "<|separator|>"})) << api;
    EXPECT_EQ(sp[std::string(api) == "sglang" ? "max_new_tokens" : "max_tokens"], 333) << api;
  }
}

// A retried stream keeps nothing of the failed attempt: outputs equal a fault-free run's.
TEST(Gsm8kRuns, RetriedStreamsEqualAFaultFreeRun) {
  TempDir d;
  const std::string data = write_questions(d, 12, 8);
  struct Case {
    const char* api;
    bool incremental;
  };
  for (const Case& k : {Case{"openai-completions", false}, Case{"openai-chat", false},
                        Case{"sglang", true}, Case{"sglang", false}}) {
    std::vector<std::vector<json>> outs;
    for (bool faults : {false, true}) {
      auto cfg = base_config(data, 8);
      cfg.correct_rate = 0.5;
      cfg.incremental_stream = k.incremental;
      cfg.stream_interval = 2;
      if (faults) {
        cfg.truncate_rate = 1;
        cfg.fault_limit = 6;
      }
      TestServer server(cfg);
      server.start();
      const std::string out =
          d.str(std::string(k.api) + (k.incremental ? "i" : "c") + (faults ? "f" : "n"));
      const GsmRun run = run_gsm8k(server.url(), data, out, {"--api", k.api, "--stream"});
      ASSERT_EQ(run.rc, 0) << run.err;
      if (faults) {
        EXPECT_EQ(metric(run, "retries"), 6) << k.api;
      }
      std::vector<json> o(12);
      for (const auto& r : run.results) o[r["index"].get<size_t>()] = r["output"];
      outs.push_back(o);
    }
    EXPECT_EQ(outs[0], outs[1]) << k.api << " incremental " << k.incremental;
  }
}

// HTTP 200 with finish_reason abort: retried as a failure, never scored.
TEST(Gsm8kRuns, AbortWithStatus200IsRetried) {
  TempDir d;
  const std::string data = write_questions(d, 10, 2);
  for (bool stream : {false, true}) {
    auto cfg = base_config(data, 2);
    cfg.abort_rate = 1;
    cfg.fault_limit = 3;
    TestServer server(cfg);
    server.start();
    std::vector<std::string> extra = {"--gate", "accuracy==1"};
    if (stream) extra.push_back("--stream");
    const GsmRun run = run_gsm8k(server.url(), data, d.str(stream ? "s" : "n"), extra);
    ASSERT_EQ(run.rc, 0) << run.err;
    EXPECT_EQ(server.stats().aborts, 3u);
    EXPECT_EQ(metric(run, "retries"), 3);
  }
}

// latency is the request loop's wall time: a /flush_cache that takes 1 s is outside it.
TEST(Gsm8kRuns, WallTimeExcludesTheFlush) {
  TempDir d;
  const std::string data = write_questions(d, 8, 12);
  auto cfg = base_config(data, 12);
  cfg.flush_sleep_s = 1.0;
  TestServer server(cfg);
  server.start();
  const auto t0 = std::chrono::steady_clock::now();
  const GsmRun run = run_gsm8k(server.url(), data, d.str("out"), {});
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(run.rc, 0) << run.err;
  EXPECT_GE(total, 1.0);
  EXPECT_LT(metric(run, "latency"), 0.9);
  EXPECT_GT(metric(run, "latency"), 0.0);
}

// Back-off: 503 three times, first delay 0.2 s doubling, no jitter: 0.2 + 0.4 + 0.8 = 1.4 s.
// An exponent off by one gives 0.7 s or 2.8 s.
TEST(HttpRuns, BackoffWithinABound) {
  TestServerConfig cfg;
  cfg.fail_rate = 1;
  cfg.fault_limit = 3;
  cfg.threads = 8;
  TestServer server(cfg);
  server.start();
  eval::HttpClient client(eval::HttpClientOptions{.max_in_flight = 1, .jitter = 0});
  eval::HttpRequest r;
  r.url = server.url() + "/generate";
  r.body = R"({"text":"x","sampling_params":{"max_new_tokens":2}})";
  r.max_attempts = 4;
  r.backoff_s = 0.2;
  double elapsed = 0;
  int attempts = 0;
  r.on_done = [&](eval::HttpResult& res) {
    elapsed = res.end_s - res.start_s;
    attempts = res.attempts;
  };
  client.submit(std::move(r));
  client.run();
  EXPECT_EQ(attempts, 4);
  EXPECT_GE(elapsed, 1.4);
  EXPECT_LT(elapsed, 2.0);
}

// --api-key / OPENAI_API_KEY as a bearer token; a refusal is exit 3 naming the key.
TEST(Gsm8kRuns, ApiKeyAndRefusal) {
  TempDir d;
  const std::string data = write_questions(d, 6, 13);
  auto cfg = base_config(data, 13);
  cfg.api_key = "sk-test";
  TestServer server(cfg);
  server.start();
  GsmRun run = run_gsm8k(server.url(), data, d.str("none"), {});
  EXPECT_EQ(run.rc, 3) << run.err;
  EXPECT_NE(run.err.find("--api-key or set OPENAI_API_KEY"), std::string::npos) << run.err;
  EXPECT_LE(server.stats().unauthorized, 2u);  // no retry storm
  run = run_gsm8k(server.url(), data, d.str("wrong"), {"--api-key", "sk-other"});
  EXPECT_EQ(run.rc, 3);
  EXPECT_NE(run.err.find("API key"), std::string::npos) << run.err;
  run =
      run_gsm8k(server.url(), data, d.str("ok"), {"--api-key", "sk-test", "--api", "openai-chat"});
  EXPECT_EQ(run.rc, 0) << run.err;
  ::setenv("OPENAI_API_KEY", "sk-test", 1);
  run = run_gsm8k(server.url(), data, d.str("env"), {});
  ::unsetenv("OPENAI_API_KEY");
  EXPECT_EQ(run.rc, 0) << run.err;
  eval::set_api_key("");
}

// reasoning_content is scored when content is empty (plain and streamed).
TEST(Gsm8kRuns, ReasoningContent) {
  TempDir d;
  const std::string data = write_questions(d, 10, 14);
  auto cfg = base_config(data, 14);
  cfg.reasoning_content = true;
  TestServer server(cfg);
  server.start();
  for (const char* s : {"", "--stream"}) {
    std::vector<std::string> extra = {"--api", "openai-chat", "--thinking", "on"};
    if (*s) extra.push_back(s);
    const GsmRun run = run_gsm8k(server.url(), data, d.str(*s ? "s" : "n"), extra);
    ASSERT_EQ(run.rc, 0) << run.err;
    EXPECT_DOUBLE_EQ(metric(run, "accuracy"), 1.0);
  }
  EXPECT_NE(server.stats().last_generation_body.find("\"thinking\":true"), std::string::npos);
}

// A server streaming incremental text says so in /server_info; --stream alone reads it right.
TEST(Gsm8kRuns, IncrementalStreamingDetected) {
  TempDir d;
  const std::string data = write_questions(d, 10, 15);
  auto cfg = base_config(data, 15);
  cfg.incremental_stream = true;
  cfg.correct_rate = 0.7;
  TestServer server(cfg);
  server.start();
  const GsmRun run = run_gsm8k(server.url(), data, d.str("out"), {"--stream"});
  ASSERT_EQ(run.rc, 0) << run.err;
  EXPECT_DOUBLE_EQ(metric(run, "accuracy"), 0.7);
}

// The seeds' command lines: bench_sglang's flags (host with scheme, port) and bench_serving's with
// its abbreviations, a tokenizer.json, the JSONL record appended to --output-file.
TEST(SeedCommandLines, BenchSglangAndBenchServing) {
  TempDir d;
  const std::string data = write_questions(d, 30, 16);
  auto cfg = base_config(data, 16);
  cfg.accept_lengths = {3.2, 3.4};
  TestServer server(cfg);
  server.start();
  const std::string port = std::to_string(server.port());
  std::string err;
  int rc = run_eval_capture({"gsm8k",
                             "--num-questions",
                             "30",
                             "--parallel",
                             "30",
                             "--num-shots",
                             "5",
                             "--data-path",
                             data,
                             "--host",
                             "http://127.0.0.1",
                             "--port",
                             port,
                             "--out",
                             d.str("g"),
                             "--progress-interval",
                             "0",
                             "--result-file",
                             d.str("result.jsonl"),
                             "--gate",
                             "accept_length>3.0"},
                            err);
  ASSERT_EQ(rc, 0) << err;
  const json g = json::parse(slurp(d.str("result.jsonl")));
  EXPECT_EQ(g["task"], "gsm8k");
  EXPECT_EQ(g["num_requests"], 30);
  write_text(d.str("tokenizer.json"),
             R"({"model":{"type":"BPE","vocab":{"a":0,"b":1,"c":2,"d":3}}})");
  for (int round = 0; round < 2; ++round) {
    rc = run_eval_capture({"serve-bench",
                           "--backend",
                           "sglang",
                           "--host",
                           "127.0.0.1",
                           "--port",
                           port,
                           "--dataset-name",
                           "random-ids",
                           "--random-input",
                           "16",
                           "--random-output",
                           "8",
                           "--random-range-ratio",
                           "1",
                           "--max-concurrency",
                           "4",
                           "--num-prompt",
                           "8",
                           "--warmup-requests",
                           "2",
                           "--tokenizer",
                           d.str(""),
                           "--output-file",
                           d.str("bench.jsonl"),
                           "--out",
                           d.str("s"),
                           "--disable-tqdm",
                           round ? "--tokenize-prompt" : "--disable-tqdm"},
                          err);
    ASSERT_EQ(rc, 0) << err;
  }
  std::istringstream lines(slurp(d.str("bench.jsonl")));
  int n = 0;
  for (std::string l; std::getline(lines, l); ++n) {
    const json r = json::parse(l);
    EXPECT_EQ(r["completed"], 8);
    // Text first (bench_serving's default: one special token fewer per prompt), then input_ids.
    EXPECT_EQ(r["total_input_tokens"], n == 0 ? 8 * 15 : 8 * 16);
    EXPECT_EQ(r["random_input_len"], 16);
    EXPECT_EQ(r["dataset_name"], "random-ids");
    EXPECT_EQ(r["max_concurrency"], 4);
    for (const char* k : {"p90_e2e_latency_ms", "p99_itl_ms", "accept_length", "server_info"})
      EXPECT_TRUE(r.contains(k)) << k;
  }
  EXPECT_EQ(n, 2);  // appended, as bench_serving does
  // bench_serving's `random`: ShareGPT text through the server's /v1/tokenize.
  json share = json::array();
  for (int i = 0; i < 12; ++i)
    share.push_back(
        {{"conversations",
          json::array({{{"from", "human"},
                        {"value", "How many apples " + std::string(size_t(i), 'x') + "?"}},
                       {{"from", "gpt"}, {"value", "Some."}}})}});
  write_text(d.str("sharegpt.json"), share.dump());
  rc = run_eval_capture(
      {"serve-bench", "--port", port, "--dataset-name", "random", "--dataset-path",
       d.str("sharegpt.json"), "--random-input", "40", "--random-output", "4",
       "--random-range-ratio", "1", "--num-prompt", "6", "--out", d.str("r"), "--disable-tqdm"},
      err);
  ASSERT_EQ(rc, 0) << err;
  const json rep = json::parse(slurp(d.str("r/report.json")));
  EXPECT_EQ(rep["metrics"]["total_input_tokens"], 6 * 39);  // text: BOS left to the server
  EXPECT_EQ(rep["metrics"]["prompt_len_mismatches"], 0);
  EXPECT_EQ(rep["prompt_form"].get<std::string>().rfind("text", 0), 0u) << rep.dump();
  rc = run_eval_capture(
      {"serve-bench", "--port", port, "--dataset-name", "random", "--out", d.str("r2")}, err);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find("--dataset-path"), std::string::npos) << err;

  // Without a vocabulary source: exit 2 naming both flags.
  rc = run_eval_capture(
      {"serve-bench", "--url", server.url(), "--num-prompts", "1", "--out", d.str("x")}, err);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find("--tokenizer"), std::string::npos) << err;
  EXPECT_NE(err.find("--vocab-size"), std::string::npos) << err;
}

// simple_eval_gsm8k's protocol: chat, the questions after the shots, no stop strings sent.
TEST(Gsm8kRuns, SimpleEvalProtocol) {
  TempDir d;
  const std::string data = write_questions(d, 25, 17);
  auto cfg = base_config(data, 17);
  cfg.correct_rate = 0.6;
  TestServer server(cfg);
  server.start();
  const GsmRun run = run_gsm8k(server.url(), data, d.str("out"),
                               {"--protocol", "simple-eval", "--num-shots", "5"});
  ASSERT_EQ(run.rc, 0) << run.err;
  EXPECT_EQ(metric(run, "questions"), 20);
  size_t right = 0;
  for (const auto& r : run.results) {
    EXPECT_EQ(r["correct"].get<bool>(), server.planned_outcome(r["index"].get<size_t>() + 5) == 'c')
        << r.dump();
    right += r["correct"].get<bool>();
  }
  EXPECT_DOUBLE_EQ(metric(run, "accuracy"), double(right) / 20);
  const json b = json::parse(server.stats().last_generation_body);
  EXPECT_TRUE(b.contains("messages"));
  EXPECT_EQ(b["stop"], json::array());
  EXPECT_EQ(b["max_tokens"], 2048);  // run_eval's --max-tokens
  // run_eval --api completion: /v1/completions with few_shot_gsm8k's stops, the same questions.
  const GsmRun comp =
      run_gsm8k(server.url(), data, d.str("comp"),
                {"--protocol", "simple-eval", "--num-shots", "5", "--api", "openai-completions"});
  ASSERT_EQ(comp.rc, 0) << comp.err;
  EXPECT_EQ(metric(comp, "questions"), 20);
  EXPECT_DOUBLE_EQ(metric(comp, "accuracy"), double(right) / 20);
  const json c = json::parse(server.stats().last_generation_body);
  EXPECT_TRUE(c.contains("prompt"));
  EXPECT_EQ(c["stop"], (json{"Question", "Assistant:", "<|separator|>"}));
  EXPECT_EQ(c["max_tokens"], 2048);
}

}  // namespace
}  // namespace dsv4::e2e_test

// `dsv4-eval gsm8k` against the in-process test server: exact metrics for planted answer mixes
// over every API and streaming mode, gates and exit codes.
#include <gtest/gtest.h>

#include <vector>

#include "dsv4/fixtures/seed.hpp"
#include "gsm8k_runner_util.hpp"
#include "http/sha256.hpp"

namespace dsv4::e2e_test {
namespace {

struct ApiCase {
  const char* name;
  const char* api;
  bool stream;
  bool incremental;
};

void PrintTo(const ApiCase& c, std::ostream* os) { *os << c.name; }

class PlantedMix : public ::testing::TestWithParam<ApiCase> {};

// Accuracy and invalid rate are exactly the planted fractions, every record agrees with the
// server's plan, and accept lengths equal the server's counters.
TEST_P(PlantedMix, ExactMetrics) {
  const ApiCase& p = GetParam();
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, "api=" << p.api << " stream=" << p.stream << " N=60 correct=0.75 invalid=0.1");
  TempDir d;
  const std::string data = write_questions(d, 60, seed);
  test_server::TestServerConfig cfg = base_config(data, seed);
  cfg.correct_rate = 0.75;
  cfg.invalid_rate = 0.1;
  cfg.accept_lengths = {4.0, 2.5};
  cfg.incremental_stream = p.incremental;
  test_server::TestServer server(cfg);
  server.start();
  std::vector<std::string> extra = {"--api",  p.api,          "--gate", "accuracy==0.75",
                                    "--gate", "invalid==0.1", "--gate", "failed==0"};
  if (p.stream) extra.push_back("--stream");
  if (p.incremental) extra.push_back("--incremental-stream");
  const GsmRun run = run_gsm8k(server.url(), data, d.str("out"), extra);
  ASSERT_EQ(run.rc, 0) << run.err;
  const auto& m = run.report["metrics"];
  EXPECT_EQ(m["accuracy"].get<double>(), 0.75);
  EXPECT_EQ(m["invalid"].get<double>(), 0.1);
  EXPECT_EQ(m["questions"].get<double>(), 60);
  EXPECT_EQ(m["requests_sent"].get<double>(), 60);
  EXPECT_EQ(m["retries"].get<double>(), 0);
  ASSERT_EQ(run.results.size(), 60u);
  const auto prompts = build_prompts(data, 3);
  double tokens = 0;
  // Per question: the results file is in completion order, the metric sums in question order.
  std::vector<double> accept(60, 0.0);
  for (const auto& r : run.results) {
    const size_t i = r["index"];
    const char planned = server.planned_outcome(i);
    EXPECT_EQ(r["correct"].get<bool>(), planned == 'c') << "question " << i;
    EXPECT_EQ(r["invalid"].get<bool>(), planned == 'i') << "question " << i;
    EXPECT_EQ(r["prompt_sha256"], eval::sha256_hex(prompts[i]).substr(0, 16));
    tokens += r["completion_tokens"].get<double>();
    if (std::string(p.api) == "sglang") {
      const double a = cfg.accept_lengths[test_server::dp_rank(prompts[i], 2)];
      const uint64_t want = test_server::spec_verify_steps(r["completion_tokens"], a);
      EXPECT_EQ(r["spec_verify_ct"].get<uint64_t>(), want) << "question " << i;
      accept[i] = r["completion_tokens"].get<double>() / double(want);
    }
  }
  EXPECT_EQ(m["completion_tokens_total"].get<double>(), tokens);
  // Server-side accept length: /server_info after the run, per DP rank, equal to its counters.
  const auto st = server.stats();
  for (size_t k = 0; k < 2; ++k) {
    ASSERT_GT(st.rank_verify[k], 0u);
    const double want = double(st.rank_tokens[k]) / double(st.rank_verify[k]);
    EXPECT_EQ(m["accept_length_rank" + std::to_string(k)].get<double>(), want) << "rank " << k;
    EXPECT_NEAR(want, cfg.accept_lengths[k], 0.25 * cfg.accept_lengths[k]);
  }
  if (std::string(p.api) == "sglang") {
    double accept_sum = 0;
    for (double a : accept) accept_sum += a;
    EXPECT_EQ(m["request_accept_length_mean"].get<double>(), accept_sum / 60);
  } else {
    EXPECT_TRUE(m["request_accept_length_mean"].is_null())
        << "OpenAI responses carry no spec_verify_ct";
  }
  for (const auto& g : run.report["gates"]) EXPECT_EQ(g["verdict"], "pass") << g.dump();
}

INSTANTIATE_TEST_SUITE_P(
    Apis, PlantedMix,
    ::testing::Values(ApiCase{"sglang", "sglang", false, false},
                      ApiCase{"sglang_stream", "sglang", true, false},
                      ApiCase{"sglang_stream_incremental", "sglang", true, true},
                      ApiCase{"completions", "openai-completions", false, false},
                      ApiCase{"completions_stream", "openai-completions", true, false},
                      ApiCase{"chat", "openai-chat", false, false},
                      ApiCase{"chat_stream", "openai-chat", true, false}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Gsm8kGates, FailedGateExitsOneAndIsReported) {
  TempDir d;
  const std::string data = write_questions(d, 20, 5);
  auto cfg = base_config(data, 5);
  cfg.correct_rate = 0.5;
  test_server::TestServer server(cfg);
  server.start();
  const GsmRun run = run_gsm8k(server.url(), data, d.str("out"),
                               {"--gate", "accuracy>0.9", "--gate", "accuracy>=0.5"});
  EXPECT_EQ(run.rc, 1) << run.err;
  EXPECT_EQ(run.report["status"], "FAIL");
  EXPECT_EQ(run.report["gates"][0]["verdict"], "FAIL");
  EXPECT_EQ(run.report["gates"][1]["verdict"], "pass");
  const std::string junit = slurp(d.str("out/junit.xml"));
  EXPECT_NE(junit.find("tests=\"2\" failures=\"1\""), std::string::npos) << junit;
  EXPECT_NE(slurp(d.str("out/report.md")).find("| `accuracy>0.9` | 0.5 | > 0.9 | **FAIL** |"),
            std::string::npos);
}

TEST(Gsm8kGates, SpeculativeDecodingOffIsAMissingMetricNotACrash) {
  TempDir d;
  const std::string data = write_questions(d, 20, 6);
  auto cfg = base_config(data, 6);
  cfg.spec = false;
  test_server::TestServer server(cfg);
  server.start();
  const GsmRun run = run_gsm8k(server.url(), data, d.str("out"),
                               {"--gate", "accept_length>1", "--gate", "accuracy==1"});
  EXPECT_EQ(run.rc, 1) << run.err;
  const auto& g = run.report["gates"][0];
  EXPECT_EQ(g["verdict"], "missing");
  EXPECT_NE(g["detail"].get<std::string>().find("speculative decoding off"), std::string::npos)
      << g.dump();
  EXPECT_EQ(run.report["gates"][1]["verdict"], "pass");
  EXPECT_TRUE(run.report["metrics"]["accept_length"].is_null());
  EXPECT_TRUE(run.report["metrics"]["request_accept_length_mean"].is_null());
  EXPECT_NE(run.report["metric_notes"]["accept_length"].get<std::string>().find(
                "speculative decoding off"),
            std::string::npos);
}

TEST(Gsm8kRun, ResultsRecordEveryField) {
  TempDir d;
  const std::string data = write_questions(d, 10, 8);
  test_server::TestServer server(base_config(data, 8));
  server.start();
  const GsmRun run = run_gsm8k(server.url(), data, d.str("out"), {});
  ASSERT_EQ(run.rc, 0) << run.err;
  ASSERT_EQ(run.results.size(), 10u);
  for (const char* k : {"index", "prompt_sha256", "label", "pred", "correct", "invalid", "output",
                        "completion_tokens", "prompt_tokens", "spec_verify_ct", "accept_length",
                        "latency_s", "attempts", "finish_reason"})
    EXPECT_TRUE(run.results[0].contains(k)) << k;
  EXPECT_EQ(run.results[0]["finish_reason"], "stop:Question");
  EXPECT_EQ(run.results[0]["pred"], run.results[0]["label"]);
  EXPECT_EQ(run.report["context"]["questions"], "10");
  EXPECT_TRUE(fs::exists(d.str("out/report.md")));
}

TEST(Gsm8kProgress, LinesOnTerminalAndPlain) {
  TempDir d;
  std::FILE* f = std::fopen(d.str("p").c_str(), "w+");
  {
    eval::Progress plain(10, 2, 0.0, f, 0);
    plain.update(5, 3, 1.0);
    plain.finish(10, 7, 2.0);
    eval::Progress tty(10, 0, 30, f, 1);
    tty.update(4, 2, 1.0);
  }
  std::fclose(f);
  const std::string out = slurp(d.str("p"));
  EXPECT_EQ(out.find("5/10"), std::string::npos) << "interval 0 prints only the final line";
  EXPECT_NE(out.find("[gsm8k] 10/10  accuracy 0.7000  4.0 req/s  ETA 0s\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("\r[gsm8k] 4/10  accuracy 0.5000  4.0 req/s  ETA 2s"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace dsv4::e2e_test

// dsv4-eval's definitions against SGLang's, without a server: numpy's random-ids draws, argparse
// abbreviations, the accept-length figures, /server_info shapes, abort and reasoning responses,
// the request bodies, tokenizer.json vocabulary, GSM8K latency percentiles.
#include <gtest/gtest.h>

#include <cmath>

#include "commands/command.hpp"
#include "e2e_test_util.hpp"
#include "gsm8k/gsm8k_metrics.hpp"
#include "http/server_api.hpp"
#include "report/accept_length.hpp"
#include "serve_bench/serve_bench_workload.hpp"
#include "serve_bench/sharegpt.hpp"
#include "serve_bench/tokenizer_vocab.hpp"

namespace dsv4::eval {
namespace {

using json = nlohmann::json;

// np.random.seed(0); np.random.randint(0, 10, size=10) is numpy's best-known output.
TEST(NumpyRandomState, RandintMatchesNumpy) {
  serve::NumpyRandomState rs(0);
  EXPECT_EQ(rs.randint(0, 10, 10), (std::vector<int64_t>{5, 0, 3, 3, 7, 9, 3, 5, 2, 4}));
  // A span of one draws nothing: the next values are the ones a fresh generator gives next.
  serve::NumpyRandomState a(7), b(7);
  EXPECT_EQ(a.randint(16, 17, 5), (std::vector<int64_t>(5, 16)));
  EXPECT_EQ(a.randint(0, 1000, 4), b.randint(0, 1000, 4));
}

TEST(NumpyRandomState, ExponentialUsesTwoDrawsPerUniform) {
  serve::NumpyRandomState a(3), b(3);
  const double e = a.exponential(0.5);
  const uint32_t x = b.next32() >> 5, y = b.next32() >> 6;
  const double u = (double(x) * 67108864.0 + double(y)) / 9007199254740992.0;
  EXPECT_DOUBLE_EQ(e, -std::log(1.0 - u) * 0.5);
  EXPECT_EQ(a.next32(), b.next32());
}

// bench_serving's random-ids: lengths, then offsets, prompt j-th id (offset + i + j) % V.
TEST(RandomIds, BuildsBenchServingPrompts) {
  serve::WorkloadSpec s;
  s.dataset = "random-ids";
  s.num_prompts = 6;
  s.input_len = 40;
  s.output_len = 12;
  s.range_ratio = 0.5;
  s.vocab_size = 50;
  s.seed = 11;
  const auto reqs = serve::make_workload(s);
  serve::NumpyRandomState rs(11);
  const auto in = rs.randint(20, 41, 6), out = rs.randint(6, 13, 6), off = rs.randint(0, 50, 6);
  ASSERT_EQ(reqs.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    ASSERT_EQ(int64_t(reqs[i].input_ids.size()), in[i]) << i;
    EXPECT_EQ(reqs[i].output_len, out[i]) << i;
    for (size_t j = 0; j < reqs[i].input_ids.size(); ++j)
      ASSERT_EQ(reqs[i].input_ids[j], (off[i] + int64_t(i) + int64_t(j)) % 50) << i << "," << j;
    EXPECT_EQ(reqs[i].send_at_s, 0.0);
  }
  // range ratio 1: every length exact, and no draw spent on them.
  s.range_ratio = 1;
  const auto exact = serve::make_workload(s);
  serve::NumpyRandomState rs2(11);
  const auto off2 = rs2.randint(0, 50, 6);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(exact[i].input_ids.size(), 40u);
    EXPECT_EQ(exact[i].output_len, 12);
    EXPECT_EQ(exact[i].input_ids[0], (off2[i] + int64_t(i)) % 50);
  }
}

TEST(CommandLine, ArgparseAbbreviations) {
  cxxopts::Options o("t", "");
  o.add_options()("random-input-len", "", cxxopts::value<long long>())(
      "random-output-len", "", cxxopts::value<long long>())("num-prompts", "",
                                                            cxxopts::value<long long>());
  std::vector<std::string> args = {
      "t", "--random-input", "5", "--num-prompt=3", "--random-output-len", "7"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  const auto got = expand_abbreviations(o, int(argv.size()), argv.data());
  EXPECT_EQ(got, (std::vector<std::string>{"t", "--random-input-len", "5", "--num-prompts=3",
                                           "--random-output-len", "7"}));
  std::vector<std::string> amb = {"t", "--random", "1"};
  std::vector<char*> av;
  for (auto& a : amb) av.push_back(a.data());
  try {
    expand_abbreviations(o, int(av.size()), av.data());
    FAIL() << "an ambiguous prefix was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--random-input-len, --random-output-len"),
              std::string::npos)
        << e.what();
  }
}

// Planted per-rank values: rank 0 is SGLang's number; a rank without the key is skipped.
TEST(AcceptLength, RankZeroMeanMinAndSkippedRanks) {
  Metrics m;
  std::map<std::string, std::string> missing;
  std::string note = put_accept_metrics({3.0, std::nullopt, 5.0, 4.0}, "off", m, missing);
  EXPECT_DOUBLE_EQ(m.at("accept_length"), 3.0);
  EXPECT_DOUBLE_EQ(m.at("accept_length_mean"), 4.0);  // (3 + 5 + 4) / 3, not / 4
  EXPECT_DOUBLE_EQ(m.at("accept_length_min"), 3.0);   // never 0
  EXPECT_DOUBLE_EQ(m.at("accept_length_rank2"), 5.0);
  EXPECT_EQ(m.count("accept_length_rank1"), 0u);
  EXPECT_TRUE(missing.empty());
  EXPECT_NE(note.find("DP rank 1 of 4"), std::string::npos) << note;

  m.clear();
  note = put_accept_metrics({std::nullopt, 2.5}, "off", m, missing);
  EXPECT_EQ(m.count("accept_length"), 0u);
  EXPECT_NE(missing.at("accept_length").find("DP rank 0"), std::string::npos);
  EXPECT_DOUBLE_EQ(m.at("accept_length_mean"), 2.5);
  EXPECT_DOUBLE_EQ(m.at("accept_length_min"), 2.5);

  m.clear();
  missing.clear();
  EXPECT_EQ(put_accept_metrics({std::nullopt, std::nullopt}, "spec off", m, missing), "");
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(missing.at("accept_length"), "spec off");
  EXPECT_EQ(missing.at("accept_length_min"), "spec off");
}

TEST(ServerInfo, RouterAndIncrementalStreaming) {
  AcceptInfo info;
  const json plain = {
      {"incremental_streaming_output", true},
      {"internal_states", json::array({{{"avg_spec_accept_length", 3.5}}, json::object()})}};
  ASSERT_EQ(parse_server_info(plain.dump(), info), "");
  EXPECT_EQ(info.per_rank, (std::vector<std::optional<double>>{3.5, std::nullopt}));
  EXPECT_EQ(info.incremental_streaming, true);
  EXPECT_EQ(info.decode_servers, 0u);
  const json router = {
      {"prefill", json::array({{{"internal_states", json::array({json::object()})}}})},
      {"decode",
       json::array({{{"internal_states", json::array({{{"avg_spec_accept_length", 2.25}}})}},
                    {{"internal_states", json::array()}}})}};
  ASSERT_EQ(parse_server_info(router.dump(), info), "");
  EXPECT_EQ(info.per_rank, (std::vector<std::optional<double>>{2.25}));
  EXPECT_EQ(info.decode_servers, 2u);
  EXPECT_FALSE(info.incremental_streaming.has_value());
  EXPECT_NE(parse_server_info(R"({"decode": []})", info), "");
}

// SGLang ends an aborted request with HTTP 200 and finish_reason abort: a failure, not text.
TEST(Responses, AbortWithStatus200IsAnError) {
  Completion c;
  EXPECT_NE(parse_completion(Api::kSglang,
                             R"({"text":"12","meta_info":{"completion_tokens":2,)"
                             R"("finish_reason":{"type":"abort","message":"oom"}}})",
                             c)
                .find("aborted the request: oom"),
            std::string::npos);
  EXPECT_NE(parse_completion(Api::kOpenAICompletions,
                             R"({"choices":[{"text":"1","finish_reason":"abort"}]})", c),
            "");
  StreamAccumulator acc(Api::kOpenAIChat);
  SseEvent ev;
  ev.data = R"({"choices":[{"delta":{"content":"4"},"finish_reason":"abort"}]})";
  EXPECT_NE(acc.feed(ev), "");
}

TEST(Responses, ReasoningContentWhenContentIsEmpty) {
  Completion c;
  ASSERT_EQ(parse_completion(Api::kOpenAIChat,
                             R"({"choices":[{"message":{"content":null,)"
                             R"("reasoning_content":"2+2=4 #### 4"},"finish_reason":"stop"}]})",
                             c),
            "");
  EXPECT_EQ(c.text, "2+2=4 #### 4");
  ASSERT_EQ(parse_completion(Api::kOpenAIChat,
                             R"({"choices":[{"message":{"content":"The answer is 5",)"
                             R"("reasoning_content":"think 7"},"finish_reason":"stop"}]})",
                             c),
            "");
  EXPECT_EQ(c.text, "The answer is 5");
  StreamAccumulator acc(Api::kOpenAIChat);
  SseEvent ev;
  for (const char* d : {R"({"choices":[{"delta":{"role":"assistant","content":""}}]})",
                        R"({"choices":[{"delta":{"reasoning_content":"so 9"}}]})",
                        R"({"choices":[{"delta":{"reasoning_content":" #### 9"}}]})"}) {
    ev.data = d;
    ASSERT_EQ(acc.feed(ev), "");
  }
  Completion s;
  ASSERT_EQ(acc.finish(s), "");
  EXPECT_EQ(s.text, "so 9 #### 9");
}

// Temperature 0, the stop strings and the token budget in every API's body.
TEST(RequestBody, TemperatureStopsBudgetEveryApi) {
  GenParams p;
  p.max_new_tokens = 77;
  p.stops = {"Question", "Assistant:", "<|separator|>"};
  for (Api api : {Api::kSglang, Api::kOpenAICompletions, Api::kOpenAIChat}) {
    const json j = json::parse(generation_body(api, "Q", p));
    const json& sp = api == Api::kSglang ? j["sampling_params"] : j;
    EXPECT_EQ(sp["temperature"], 0.0) << to_string(api);
    EXPECT_EQ(sp["stop"], json(p.stops)) << to_string(api);
    EXPECT_EQ(sp[api == Api::kSglang ? "max_new_tokens" : "max_tokens"], 77) << to_string(api);
  }
  p.thinking = false;
  const json chat = json::parse(generation_body(Api::kOpenAIChat, "Q", p));
  EXPECT_EQ(chat["chat_template_kwargs"], json({{"thinking", false}, {"enable_thinking", false}}));
  EXPECT_FALSE(json::parse(generation_body(Api::kOpenAICompletions, "Q", p))
                   .contains("chat_template_kwargs"));
}

TEST(Tokenizer, VocabSizeFromTokenizerJson) {
  e2e_test::TempDir d;
  e2e_test::write_text(d.str("tokenizer.json"),
                       R"({"added_tokens":[{"id":3,"content":"<s>"}],)"
                       R"("model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2}}})");
  EXPECT_EQ(serve::read_tokenizer_vocab(d.str("tokenizer.json")).vocab_size, 3);
  EXPECT_EQ(serve::read_tokenizer_vocab(d.str("")).vocab_size, 3);  // the folder
  e2e_test::write_text(d.str("bad.json"), R"({"model":{}})");
  EXPECT_THROW(serve::read_tokenizer_vocab(d.str("bad.json")), std::invalid_argument);
  EXPECT_THROW(serve::read_tokenizer_vocab(d.str("none.json")), std::invalid_argument);
}

// Latency percentiles by numpy's linear rule: p50 of {1,2,3,4,10} is 3, p90 7.6, p99 9.76.
TEST(Gsm8kMetrics, LatencyPercentilesNumpyLinear) {
  std::vector<gsm8k::Record> qs(5);
  std::map<size_t, json> answered;
  const double lat[] = {4, 1, 10, 3, 2};
  for (size_t i = 0; i < 5; ++i) {
    qs[i].label = "1";
    answered[i] = {{"correct", true}, {"invalid", false}, {"latency_s", lat[i]}};
  }
  const Gsm8kSummary s = summarize_gsm8k(qs, answered, {}, {});
  EXPECT_DOUBLE_EQ(s.metrics.at("latency_p50"), 3.0);
  EXPECT_NEAR(s.metrics.at("latency_p90"), 7.6, 1e-12);
  EXPECT_NEAR(s.metrics.at("latency_p99"), 9.76, 1e-12);
  EXPECT_DOUBLE_EQ(s.metrics.at("latency_max"), 10.0);
}

// simple_eval_gsm8k's get_answer_value: sign and decimals kept, leading-zero integers invalid.
TEST(SimpleEvalRule, KeepsSignAndDecimals) {
  using gsm8k::simple_eval_answer;
  EXPECT_EQ(simple_eval_answer("so -5 apples"), -5.0);
  EXPECT_EQ(simple_eval_answer("costs $3.50 each"), 3.5);
  EXPECT_EQ(simple_eval_answer("1,000 and then 5."), 5.0);
  EXPECT_EQ(simple_eval_answer("#### 1,234"), 1234.0);
  EXPECT_EQ(simple_eval_answer("answer 007"), std::nullopt);
  EXPECT_EQ(simple_eval_answer("answer 0.07"), 0.07);
  EXPECT_EQ(simple_eval_answer("no number"), std::nullopt);
  EXPECT_EQ(simple_eval_answer("3 - 4"), 4.0);  // "- 4" is not "-4"
  EXPECT_EQ(simple_eval_answer("x-7y"), -7.0);
}

// CPython: random.seed(1); x = list(range(10)); random.shuffle(x) -> [6, 8, 9, 7, 5, 3, 0, 4, 1,
// 2]; seed 7 over range(1000) starts 878, 857, 349, 313; seed 2**40 + 5 over range(50) 11, 0,
// 20, 6.
TEST(PythonRandom, ShuffleMatchesCPython) {
  auto shuffled = [](uint64_t seed, int n) {
    std::vector<int> x(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) x[size_t(i)] = i;
    serve::PythonRandom r(seed);
    r.shuffle(x);
    return x;
  };
  EXPECT_EQ(shuffled(1, 10), (std::vector<int>{6, 8, 9, 7, 5, 3, 0, 4, 1, 2}));
  const auto a = shuffled(7, 1000);
  EXPECT_EQ(std::vector<int>(a.begin(), a.begin() + 4), (std::vector<int>{878, 857, 349, 313}));
  const auto b = shuffled((uint64_t(1) << 40) + 5, 50);
  EXPECT_EQ(std::vector<int>(b.begin(), b.begin() + 4), (std::vector<int>{11, 0, 20, 6}));
}

// bench_serving's `random`: shuffled conversations, empty prompts skipped, ids repeated or cut.
TEST(RandomShareGpt, RepeatsOrCutsTheEncodedPrompt) {
  std::vector<std::pair<std::string, std::string>> conv;
  for (int i = 0; i < 6; ++i) conv.emplace_back(std::string(size_t(i), 'a'), "r");
  serve::WorkloadSpec s;
  s.num_prompts = 4;
  s.input_len = 5;
  s.output_len = 3;
  s.range_ratio = 1;
  s.seed = 1;
  std::vector<std::string> seen;
  const auto reqs =
      serve::random_sharegpt_workload(s, conv, [&](const std::vector<std::string>& texts) {
        std::vector<std::vector<int32_t>> out;
        for (const auto& t : texts) {
          seen.push_back(t);
          out.emplace_back();
          for (size_t k = 0; k < t.size(); ++k) out.back().push_back(int32_t(10 * t.size() + k));
        }
        return out;
      });
  std::vector<int> order = {0, 1, 2, 3, 4, 5};  // the same shuffle: random.seed(1)
  serve::PythonRandom(1).shuffle(order);
  ASSERT_EQ(seen.size(), 6u);
  for (size_t k = 0; k < 6; ++k) EXPECT_EQ(seen[k].size(), size_t(order[k]));
  std::vector<size_t> used;
  for (int o : order)
    if (o > 0) used.push_back(size_t(o));
  ASSERT_EQ(reqs.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const size_t len = used[i];
    ASSERT_EQ(reqs[i].input_ids.size(), 5u);
    for (size_t j = 0; j < 5; ++j) EXPECT_EQ(reqs[i].input_ids[j], int32_t(10 * len + j % len));
    EXPECT_EQ(reqs[i].output_len, 3);
  }
}

}  // namespace
}  // namespace dsv4::eval

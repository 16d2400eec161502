// The SGLang test server itself: CLI, planted mix, endpoint shapes, streaming, readiness, binding
// to 127.0.0.1, the executable's port file and exit-after.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include "dsv4/fixtures/seed.hpp"
#include "e2e_test_util.hpp"
#include "http/http_client.hpp"

namespace dsv4::test_server {
namespace {

using e2e_test::slurp;
using e2e_test::TempDir;
using eval::HttpRequest;
using eval::HttpResult;
using json = nlohmann::json;

HttpResult post(const std::string& url, const json& body) {
  HttpRequest r;
  r.url = url;
  r.body = body.dump();
  r.max_attempts = 1;
  r.timeout_s = 10;
  return eval::http_fetch(r);
}

HttpResult get(const std::string& url) {
  HttpRequest r;
  r.method = "GET";
  r.url = url;
  r.max_attempts = 1;
  r.timeout_s = 10;
  return eval::http_fetch(r);
}

CliRequest cli(std::vector<std::string> args) {
  args.insert(args.begin(), "dsv4-test-server");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse_cli(int(argv.size()), argv.data());
}

const char* kFlags[] = {"--port",
                        "--reasoning-text",
                        "--no-tokenizer-endpoints",
                        "--idle-rank-zero",
                        "--profiler",
                        "--port-file",
                        "--threads",
                        "--model",
                        "--serve-dir",
                        "--log-requests",
                        "--data",
                        "--correct-rate",
                        "--invalid-rate",
                        "--seed",
                        "--token-sleep-ms",
                        "--prefill-sleep-ms",
                        "--stream-interval",
                        "--incremental-streaming-output",
                        "--accept-length",
                        "--no-spec",
                        "--fail-rate",
                        "--fail-status",
                        "--reset-rate",
                        "--stall-rate",
                        "--stall-s",
                        "--malformed-rate",
                        "--truncate-rate",
                        "--error-chunk-rate",
                        "--fault-limit",
                        "--ready-after",
                        "--listen-after",
                        "--exit-after",
                        "--exit-status",
                        "--write-data",
                        "--count"};

TEST(TestServerCli, HelpAndReadmeListEveryFlag) {
  const CliRequest r = cli({"--help"});
  ASSERT_TRUE(r.help);
  const std::string readme = slurp(std::string(DSV4_E2E_DATA_DIR) + "/../server/README.md");
  ASSERT_FALSE(readme.empty());
  // The flag as a whole word: not followed by another name character.
  auto has_flag = [](const std::string& text, const std::string& flag) {
    for (size_t p = text.find(flag); p != std::string::npos; p = text.find(flag, p + 1)) {
      const char next = p + flag.size() < text.size() ? text[p + flag.size()] : ' ';
      if (!(std::isalnum(static_cast<unsigned char>(next)) || next == '-')) return true;
    }
    return false;
  };
  for (const char* f : kFlags) {
    EXPECT_TRUE(has_flag(r.help_text, f)) << f << " not in --help:\n" << r.help_text;
    EXPECT_TRUE(has_flag(readme, f)) << f << " not in README.md";
  }
}

TEST(TestServerCli, ParsesFaultsAndRanks) {
  const CliRequest r = cli({"--accept-length", "3.5,2", "--fail-rate", "0.1", "--fail-status",
                            "429", "--fault-limit", "3", "--no-spec", "--exit-after", "9"});
  EXPECT_EQ(r.config.accept_lengths, (std::vector<double>{3.5, 2}));
  EXPECT_DOUBLE_EQ(r.config.fail_rate, 0.1);
  EXPECT_EQ(r.config.fail_status, 429);
  EXPECT_EQ(r.config.fault_limit, 3);
  EXPECT_FALSE(r.config.spec);
  EXPECT_EQ(r.config.exit_after, 9);
  EXPECT_TRUE(r.config.exit_process);
}

TEST(TestServerCli, BadValuesNameFlagAndValue) {
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> rows = {
      {{"--correct-rate", "1.5"}, {"--correct-rate", "1.5"}},
      {{"--accept-length", "3,x"}, {"--accept-length", "'x'"}},
      {{"--accept-length", "0.5"}, {"--accept-length", "below 1"}},
      {{"--fail-status", "200"}, {"--fail-status", "200"}},
      {{"--port", "70000"}, {"--port", "70000"}},
      {{"--listen-after", "1"}, {"--listen-after", "--port"}},
      {{"--fail-rate", "0.6", "--reset-rate", "0.6"}, {"fault rates"}},
      {{"--threads", "0"}, {"--threads", "0"}},
      {{"--stream-interval", "0"}, {"--stream-interval"}},
      {{"--bogus"}, {"bogus"}}};
  for (const auto& [args, parts] : rows) {
    try {
      cli(args);
      ADD_FAILURE() << "no error for " << args[0];
    } catch (const ConfigError& e) {
      for (const auto& p : parts)
        EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
            << "'" << p << "' not in: " << e.what();
    }
  }
}

TEST(TestServerData, BadDataFileNamesLineAndField) {
  TempDir d;
  e2e_test::write_text(d.str("q.jsonl"),
                       "{\"question\":\"a\",\"answer\":\"#### 1\"}\n{\"question\":\"b\"}\n");
  TestServerConfig c;
  c.data_path = d.str("q.jsonl");
  try {
    TestServer s(c);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("q.jsonl:2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'answer'"), std::string::npos) << e.what();
  }
}

TEST(TestServerModel, PlantedMixIsExactAndSeeded) {
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, "N=200 correct=0.7 invalid=0.1");
  TestServerConfig c;
  c.items = synth_gsm8k(200, seed);
  c.correct_rate = 0.7;
  c.invalid_rate = 0.1;
  c.seed = seed;
  TestServer a(c);
  size_t counts[3] = {0, 0, 0};
  std::string pattern;
  for (size_t i = 0; i < a.num_items(); ++i) {
    const char o = a.planned_outcome(i);
    pattern += o;
    counts[o == 'c' ? 0 : o == 'i' ? 1 : 2]++;
  }
  EXPECT_EQ(counts[0], 140u);
  EXPECT_EQ(counts[1], 20u);
  EXPECT_EQ(counts[2], 40u);
  TestServer same(c);
  c.seed = seed + 1;
  TestServer other(c);
  std::string p_same, p_other;
  for (size_t i = 0; i < a.num_items(); ++i) {
    p_same += same.planned_outcome(i);
    p_other += other.planned_outcome(i);
  }
  EXPECT_EQ(pattern, p_same);
  EXPECT_NE(pattern, p_other);
}

class TestServerHttp : public ::testing::Test {
 protected:
  void SetUp() override {
    TestServerConfig c;
    c.items = synth_gsm8k(10, 3);
    c.correct_rate = 1;
    c.accept_lengths = {4.0, 2.0};
    c.threads = 16;
    server_ = std::make_unique<TestServer>(c);
    server_->start();
    prompt_ = "Question: " + c.items[0].question + "\nAnswer:";
    answer_ = c.items[0].answer;
  }
  std::unique_ptr<TestServer> server_;
  std::string prompt_, answer_;
  const json stops_ = {"Question", "Assistant:", "<|separator|>"};
};

TEST_F(TestServerHttp, GenerateShapeAndStops) {
  HttpResult r =
      post(server_->url() + "/generate",
           {{"text", prompt_}, {"sampling_params", {{"max_new_tokens", 512}, {"stop", stops_}}}});
  ASSERT_TRUE(r.ok()) << r.error_message;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["text"], " " + answer_ + "\n\n");
  const json& m = j["meta_info"];
  EXPECT_EQ(m["finish_reason"], (json{{"type", "stop"}, {"matched", "Question"}}));
  EXPECT_GT(m["completion_tokens"].get<int>(), 3);
  EXPECT_GT(m["prompt_tokens"].get<int>(), 5);
  const int ct = m["completion_tokens"], v = m["spec_verify_ct"];
  const size_t rank = dp_rank(prompt_, 2);
  EXPECT_EQ(uint64_t(v), spec_verify_steps(uint64_t(ct), rank == 0 ? 4.0 : 2.0));
  // Without stops the model runs on into the next question; max_new_tokens cuts it.
  r = post(server_->url() + "/generate",
           {{"text", prompt_}, {"sampling_params", {{"max_new_tokens", 5}}}});
  ASSERT_TRUE(r.ok()) << r.error_message;
  const json k = json::parse(r.body);
  EXPECT_EQ(k["meta_info"]["finish_reason"], (json{{"type", "length"}, {"length", 5}}));
  EXPECT_EQ(k["meta_info"]["completion_tokens"], 5);
  r = post(server_->url() + "/generate",
           {{"text", prompt_}, {"sampling_params", {{"max_new_tokens", 4000}}}});
  const json e = json::parse(r.body);
  EXPECT_NE(e["text"].get<std::string>().find("\n\nQuestion: "), std::string::npos);
  EXPECT_EQ(e["meta_info"]["finish_reason"], (json{{"type", "stop"}, {"matched", 1}}));
}

std::vector<json> stream_chunks(const std::string& url, const json& body, bool* done) {
  std::vector<json> out;
  HttpRequest r;
  r.url = url;
  r.body = body.dump();
  r.sse = true;
  r.max_attempts = 1;
  r.on_event = [&](const eval::SseEvent& ev) {
    if (ev.data != "[DONE]") out.push_back(json::parse(ev.data));
    return std::string();
  };
  HttpResult res = eval::http_fetch(r);
  EXPECT_TRUE(res.ok()) << res.error_message;
  *done = res.saw_done;
  return out;
}

TEST_F(TestServerHttp, GenerateStreamsCumulativeText) {
  bool done = false;
  auto chunks = stream_chunks(server_->url() + "/generate",
                              {{"text", prompt_},
                               {"stream", true},
                               {"sampling_params", {{"max_new_tokens", 512}, {"stop", stops_}}}},
                              &done);
  ASSERT_GT(chunks.size(), 3u);
  EXPECT_TRUE(done);
  for (size_t i = 1; i < chunks.size(); ++i) {
    const std::string prev = chunks[i - 1]["text"], cur = chunks[i]["text"];
    EXPECT_EQ(cur.rfind(prev, 0), 0u) << "text is not cumulative at chunk " << i;
    EXPECT_TRUE(chunks[i - 1]["meta_info"]["finish_reason"].is_null());
  }
  EXPECT_EQ(chunks.back()["text"], " " + answer_ + "\n\n");
  EXPECT_EQ(chunks.back()["meta_info"]["finish_reason"]["matched"], "Question");
}

TEST_F(TestServerHttp, OpenAICompletionsAndChat) {
  HttpResult r = post(server_->url() + "/v1/completions",
                      {{"model", "m"}, {"prompt", prompt_}, {"max_tokens", 512}, {"stop", stops_}});
  ASSERT_TRUE(r.ok()) << r.error_message;
  json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], " " + answer_ + "\n\n");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][0]["matched_stop"], "Question");
  EXPECT_EQ(j["usage"]["total_tokens"].get<int>(),
            j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>());
  r = post(server_->url() + "/v1/chat/completions",
           {{"model", "m"},
            {"messages", {{{"role", "user"}, {"content", prompt_}}}},
            {"max_tokens", 512},
            {"stop", stops_}});
  ASSERT_TRUE(r.ok()) << r.error_message;
  j = json::parse(r.body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["content"], " " + answer_ + "\n\n");
  bool done = false;
  auto chunks = stream_chunks(server_->url() + "/v1/chat/completions",
                              {{"messages", {{{"role", "user"}, {"content", prompt_}}}},
                               {"stream", true},
                               {"stream_options", {{"include_usage", true}}},
                               {"stop", stops_}},
                              &done);
  ASSERT_GT(chunks.size(), 3u);
  EXPECT_EQ(chunks.front()["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(chunks.back()["choices"].empty());
  EXPECT_GT(chunks.back()["usage"]["completion_tokens"].get<int>(), 0);
  std::string text;
  for (const auto& c : chunks)
    if (!c["choices"].empty() && c["choices"][0]["delta"].contains("content"))
      text += c["choices"][0]["delta"]["content"].get<std::string>();
  EXPECT_EQ(text, " " + answer_ + "\n\n");
}

TEST_F(TestServerHttp, ServerInfoFlushAndModels) {
  for (int i = 0; i < 6; ++i)
    post(server_->url() + "/generate", {{"text", "Question: q" + std::to_string(i) + "\nAnswer:"},
                                        {"sampling_params", {{"max_new_tokens", 50}}}});
  HttpResult r = get(server_->url() + "/server_info");
  ASSERT_TRUE(r.ok()) << r.error_message;
  json j = json::parse(r.body);
  EXPECT_EQ(j["dp_size"], 2);
  ASSERT_EQ(j["internal_states"].size(), 2u);
  const auto st = server_->stats();
  for (size_t k = 0; k < 2; ++k) {
    if (st.rank_verify[k] == 0) continue;
    EXPECT_DOUBLE_EQ(j["internal_states"][k]["avg_spec_accept_length"].get<double>(),
                     double(st.rank_tokens[k]) / double(st.rank_verify[k]));
  }
  r = post(server_->url() + "/flush_cache", json::object());
  ASSERT_TRUE(r.ok()) << r.error_message;
  EXPECT_NE(r.body.find("Cache flushed"), std::string::npos);
  j = json::parse(get(server_->url() + "/get_server_info").body);
  for (const auto& s : j["internal_states"]) EXPECT_FALSE(s.contains("avg_spec_accept_length"));
  j = json::parse(get(server_->url() + "/v1/models").body);
  EXPECT_EQ(j["data"][0]["id"], server_->config().model);
  EXPECT_EQ(get(server_->url() + "/health_generate").status, 200);
  EXPECT_EQ(get(server_->url() + "/health").status, 200);
}

TEST_F(TestServerHttp, BadBodiesAreNamed400s) {
  HttpResult r = post(server_->url() + "/generate", {{"text", 5}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("field 'text' must be a string"), std::string::npos) << r.body;
  r = post(server_->url() + "/generate",
           {{"text", "x"}, {"sampling_params", {{"max_new_tokens", -1}}}});
  EXPECT_NE(r.body.find("max_new_tokens"), std::string::npos) << r.body;
  r = post(server_->url() + "/v1/chat/completions", {{"messages", json::array()}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("'messages'"), std::string::npos) << r.body;
}

// SGLang's /v1/detokenize shapes (one list or a batch), BOS kept or skipped, and the count the
// server prefills for the decoded text: BOS plus one token per id.
TEST_F(TestServerHttp, DetokenizeAndTheTextItPrefills) {
  HttpResult r = post(server_->url() + "/v1/detokenize",
                      {{"tokens", {0, 61, 62, 3844}}, {"skip_special_tokens", false}});
  ASSERT_TRUE(r.ok()) << r.error_message;
  EXPECT_EQ(json::parse(r.body)["text"], "<s> Z 10 100");  // base 62: 61, 62, 62^2
  r = post(server_->url() + "/detokenize",
           {{"tokens", json::array({json::array({0, 5}), json::array(), json::array({7})})}});
  ASSERT_TRUE(r.ok()) << r.error_message;
  EXPECT_EQ(json::parse(r.body)["text"], (json{" 5", "", " 7"}));  // skip_special_tokens: true
  r = post(server_->url() + "/v1/detokenize", {{"tokens", {1, -2}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("'tokens'"), std::string::npos) << r.body;
  // The empty text with special tokens is BOS alone: num_special_tokens_to_add() is 1.
  r = post(server_->url() + "/v1/tokenize", {{"prompt", ""}, {"add_special_tokens", true}});
  ASSERT_TRUE(r.ok()) << r.error_message;
  EXPECT_EQ(json::parse(r.body)["count"], 1);
  r = post(server_->url() + "/generate",
           {{"text", "<s> Z 10 100"}, {"sampling_params", {{"max_new_tokens", 1}}}});
  ASSERT_TRUE(r.ok()) << r.error_message;
  EXPECT_EQ(json::parse(r.body)["meta_info"]["prompt_tokens"], 5);  // BOS, "<s>" and three ids
}

TEST_F(TestServerHttp, ListensOnLoopbackOnly) {
  char want[16];
  std::snprintf(want, sizeof want, "0100007F:%04X", server_->port());
  const std::string tcp = slurp("/proc/net/tcp");
  ASSERT_NE(tcp.find(want), std::string::npos) << "no 127.0.0.1 listener for " << want;
  char any[16];
  std::snprintf(any, sizeof any, "00000000:%04X", server_->port());
  EXPECT_EQ(tcp.find(any), std::string::npos) << "bound to every address";
}

TEST(TestServerReadiness, NotReadyThenReady) {
  TestServerConfig c;
  c.ready_after_s = 0.4;
  c.threads = 8;
  TestServer s(c);
  s.start();
  EXPECT_EQ(get(s.url() + "/health_generate").status, 503);
  EXPECT_EQ(post(s.url() + "/generate", {{"text", "x"}}).status, 503);
  std::this_thread::sleep_for(std::chrono::milliseconds(450));
  EXPECT_EQ(get(s.url() + "/health_generate").status, 200);
  EXPECT_EQ(get(s.url() + "/v1/models").status, 200);
}

pid_t spawn(std::vector<std::string> args, const std::string& out_path) {
  const pid_t pid = e2e_test::spawn_process(DSV4_TEST_SERVER_BIN, std::move(args), out_path);
  EXPECT_GT(pid, 0);
  return pid;
}

int wait_for_file(const std::string& path, double seconds) {
  return e2e_test::wait_for_port_file(path, seconds);
}

TEST(TestServerBinary, PortFileListeningLineAndExitAfter) {
  TempDir d;
  const pid_t pid = spawn({"--port", "0", "--port-file", d.str("port"), "--threads", "8",
                           "--exit-after", "2", "--exit-status", "17"},
                          d.str("stdout"));
  const int port = wait_for_file(d.str("port"), 10);
  ASSERT_GT(port, 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  std::string out;
  for (int i = 0; i < 100 && out.empty(); ++i) {
    out = slurp(d.str("stdout"));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(out, "listening on " + url + "\n");
  EXPECT_TRUE(post(url + "/generate", {{"text", "a"}}).ok());
  EXPECT_TRUE(post(url + "/generate", {{"text", "b"}}).ok());
  HttpResult third = post(url + "/generate", {{"text", "c"}});  // the process dies
  EXPECT_FALSE(third.ok());
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 17);
  EXPECT_EQ(get(url + "/health").error, eval::HttpErrorKind::kConnect);
}

TEST(TestServerBinary, SigtermExitsZeroAndBadFlagExitsTwo) {
  TempDir d;
  pid_t pid = spawn({"--port", "0", "--port-file", d.str("port"), "--threads", "4"}, d.str("o"));
  ASSERT_GT(wait_for_file(d.str("port"), 10), 0);
  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  pid = spawn({"--correct-rate", "2"}, d.str("o2"));
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status;
}

}  // namespace
}  // namespace dsv4::test_server

namespace dsv4::test_server {
namespace {

TEST(TestServerData, CommittedSampleEqualsTheGenerator) {
  TempDir d;
  write_gsm8k(d.str("q.jsonl"), synth_gsm8k(50, 1));
  const std::string committed = std::string(DSV4_E2E_DATA_DIR) + "/gsm8k_synthetic_50.jsonl";
  EXPECT_EQ(slurp(committed), slurp(d.str("q.jsonl")));
  const auto items = load_gsm8k(committed);
  ASSERT_EQ(items.size(), 50u);
  std::set<std::string> questions;
  for (const auto& it : items) {
    questions.insert(it.question);
    EXPECT_FALSE(gsm_label(it.answer).empty());
  }
  EXPECT_EQ(questions.size(), 50u) << "questions must be unique (the model looks them up)";
}

}  // namespace
}  // namespace dsv4::test_server

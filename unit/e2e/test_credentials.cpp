// The API key stays with the server it was given for: sent to that origin only (never to the
// dataset host or a redirect elsewhere), written as *** in every file, line and message the runner
// produces, taken by wait-ready, and a refused key named by every command.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <thread>

#include "gsm8k_runner_util.hpp"
#include "http/process_setup.hpp"
#include "http/sha256.hpp"

namespace dsv4::e2e_test {
namespace {

using json = nlohmann::json;
using test_server::TestServer;
using test_server::TestServerConfig;

constexpr const char* kKey = "sek-SECRET-42";

// Clears the process-wide key whatever the test did.
struct KeyReset {
  ~KeyReset() {
    eval::set_api_key("");
    ::unsetenv("OPENAI_API_KEY");
    ::unsetenv("GITHUB_STEP_SUMMARY");
  }
};

// A started test server that requires kKey.
std::unique_ptr<TestServer> keyed_server() {
  TestServerConfig cfg;
  cfg.threads = 8;
  cfg.api_key = kKey;
  auto server = std::make_unique<TestServer>(cfg);
  server->start();
  return server;
}

// Every regular file under `dir` (recursively) that holds `needle`.
std::vector<std::string> files_holding(const fs::path& dir, const std::string& needle) {
  std::vector<std::string> hits;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && slurp(e.path().string()).find(needle) != std::string::npos)
      hits.push_back(e.path().string());
  return hits;
}

TEST(Credentials, OriginOfAUrl) {
  EXPECT_EQ(eval::url_origin("http://127.0.0.1:30000/generate"), "http://127.0.0.1:30000");
  EXPECT_EQ(eval::url_origin("HTTP://Example.COM/x?y#z"), "http://example.com:80");
  EXPECT_EQ(eval::url_origin("https://user:pw@host.org/a"), "https://host.org:443");
  EXPECT_EQ(eval::url_origin("https://host.org:443"), "https://host.org:443");
  EXPECT_EQ(eval::url_origin("http://[::1]:8080/v1"), "http://[::1]:8080");
  EXPECT_EQ(eval::url_origin("no-scheme/x"), "");
  KeyReset reset;
  eval::set_api_key(kKey, "http://127.0.0.1:30000");
  EXPECT_TRUE(eval::api_key_goes_to("http://127.0.0.1:30000/flush_cache"));
  EXPECT_FALSE(eval::api_key_goes_to("http://127.0.0.1:30001/generate"));   // another port
  EXPECT_FALSE(eval::api_key_goes_to("https://127.0.0.1:30000/generate"));  // another scheme
  EXPECT_FALSE(eval::api_key_goes_to("http://localhost:30000/generate"));   // another host
  EXPECT_FALSE(eval::api_key_goes_to(
      "https://raw.githubusercontent.com/openai/grade-school-math/master/test.jsonl"));
  eval::set_api_key(kKey);  // no server: the key goes nowhere
  EXPECT_FALSE(eval::api_key_goes_to("http://127.0.0.1:30000/generate"));
}

TEST(Credentials, RecordedCommandLineAndRedaction) {
  KeyReset reset;
  std::vector<std::string> args = {"gsm8k",    "--url",          "http://h:1", "--api-key",
                                   "sek-flag", "--api-k=sek-eq", "--gate",     "accuracy>0.5"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  eval::register_secrets_from_args(int(argv.size()), argv.data());
  const std::string line = eval::recorded_command_line(int(argv.size()), argv.data());
  EXPECT_EQ(line,
            "dsv4-eval gsm8k --url http://h:1 --api-key *** --api-k=*** --gate 'accuracy>0.5'");
  EXPECT_EQ(eval::redact("a sek-flag b sek-eq c"), "a *** b *** c");
  const json j = eval::redact_json({{"server_info", {{"api_key", "sek-flag"}}}, {"n", 1}});
  EXPECT_EQ(j["server_info"]["api_key"], "***");
  EXPECT_EQ(j["n"], 1);
}

// A keyed gsm8k run whose data comes from a second loopback server (the dataset host): the host
// sees no Authorization, the server sees it on every request.
TEST(Credentials, DatasetHostNeverSeesTheKey) {
  KeyReset reset;
  TempDir d;
  fs::create_directories(d.path() / "host");
  const std::string data = write_questions(d, 8, 21, "host/test.jsonl");
  TestServerConfig hc;
  hc.serve_dir = d.str("host");
  hc.threads = 8;
  TestServer host(hc);
  host.start();
  auto cfg = base_config(data, 21);
  cfg.api_key = kKey;
  TestServer server(cfg);
  server.start();
  const std::string sha = *eval::sha256_file(data);
  std::string err;
  const int rc = run_eval_capture(
      {"gsm8k", "--url", server.url(), "--num-questions", "0", "--api-key", kKey, "--data-url",
       host.url() + "/files/test.jsonl", "--data-sha256", sha, "--cache-dir", d.str("cache"),
       "--out", d.str("dl"), "--num-shots", "2", "--progress-interval", "0"},
      err);
  ASSERT_EQ(rc, 0) << err;
  EXPECT_EQ(host.stats().with_authorization, 0u) << "the dataset host saw an Authorization header";
  EXPECT_GE(server.stats().with_authorization, 9u);  // flush, 8 questions, server_info
  EXPECT_EQ(server.stats().unauthorized, 0u);
}

// A keyed request redirected to another origin: the redirect is an answer, never followed, so the
// other origin receives nothing (neither the request nor the key).
TEST(Credentials, RedirectElsewhereIsNotFollowed) {
  KeyReset reset;
  TestServerConfig oc;
  oc.threads = 8;
  TestServer other(oc);
  other.start();
  httplib::Server redirector;
  int seen_auth = 0;
  redirector.Get("/flush_cache", [&](const httplib::Request& q, httplib::Response& res) {
    seen_auth += q.has_header("Authorization");
    res.set_redirect(other.url() + "/server_info");
  });
  const int port = redirector.bind_to_any_port("127.0.0.1");
  std::thread t([&] { redirector.listen_after_bind(); });
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  eval::set_api_key(kKey, base);
  eval::HttpRequest r;
  r.method = "GET";
  r.url = base + "/flush_cache";
  r.max_attempts = 1;
  const eval::HttpResult res = eval::http_fetch(std::move(r));
  redirector.stop();
  t.join();
  EXPECT_EQ(res.status, 302);
  EXPECT_FALSE(res.ok());
  EXPECT_EQ(seen_auth, 1);                   // the key went to its own origin
  EXPECT_EQ(other.stats().server_info, 0u);  // the redirect target saw no request
  EXPECT_EQ(other.stats().with_authorization, 0u);
}

// libcurl's trace (HttpClientOptions::verbose) prints the request headers: the key is ***.
TEST(Credentials, DebugDumpRedactsAuthorization) {
  KeyReset reset;
  const auto keyed = keyed_server();
  TestServer& server = *keyed;
  eval::set_api_key(kKey, server.url());
  eval::HttpClient client(eval::HttpClientOptions{.max_in_flight = 1, .verbose = true});
  eval::HttpRequest r;
  r.method = "GET";
  r.url = server.url() + "/server_info";
  bool ok = false;
  r.on_done = [&](eval::HttpResult& res) { ok = res.ok(); };
  ::testing::internal::CaptureStderr();
  client.submit(std::move(r));
  client.run();
  const std::string trace = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(ok);
  EXPECT_EQ(trace.find(kKey), std::string::npos) << trace;
  EXPECT_NE(trace.find("Authorization: ***"), std::string::npos) << trace;
}

// Every output file of keyed runs (gsm8k and serve-bench, the key given as --api-key V and as
// --api-key=V, a passing run and a refused one), the step summary and stderr: no key anywhere.
TEST(Credentials, KeyedRunFilesHoldNoKey) {
  KeyReset reset;
  TempDir d;
  const std::string data = write_questions(d, 10, 22);
  auto cfg = base_config(data, 22);
  cfg.api_key = kKey;
  TestServer server(cfg);
  server.start();
  const std::string summary = d.str("summary.md");
  ::setenv("GITHUB_STEP_SUMMARY", summary.c_str(), 1);
  fs::create_directories(d.path() / "runs");
  std::string err, all_err;
  int rc = run_eval_capture(
      {"gsm8k", "--url", server.url(), "--num-questions", "0", "--data", data, "--num-shots", "2",
       "--api-key", kKey, "--out", d.str("runs/g1"), "--result-file", d.str("runs/result.jsonl"),
       "--gate", "accuracy>0.5", "--progress-interval", "0"},
      err);
  all_err += err;
  ASSERT_EQ(rc, 0) << err;
  rc = run_eval_capture({"gsm8k", "--url", server.url(), "--num-questions", "0", "--data", data,
                         "--num-shots", "2", std::string("--api-key=") + kKey, "--out",
                         d.str("runs/g2"), "--progress-interval", "0", "--stream"},
                        err);
  all_err += err;
  ASSERT_EQ(rc, 0) << err;
  // A refused key: the errored report records the command line too.
  rc = run_eval_capture(
      {"gsm8k", "--url", server.url(), "--num-questions", "0", "--data", data, "--api-key",
       std::string(kKey) + "-old", "--out", d.str("runs/g3"), "--progress-interval", "0"},
      err);
  all_err += err;
  EXPECT_EQ(rc, 3) << err;
  rc = run_eval_capture({"serve-bench", "--url", server.url(), "--api-key", kKey, "--vocab-size",
                         "1000", "--random-input-len", "8", "--random-output-len", "4",
                         "--num-prompts", "4", "--disable-tqdm", "--details", "--output-file",
                         d.str("runs/bench.jsonl"), "--out", d.str("runs/s1")},
                        err);
  all_err += err;
  ASSERT_EQ(rc, 0) << err;
  ::setenv("OPENAI_API_KEY", kKey, 1);
  rc = run_eval_capture({"serve-bench", "--url", server.url(), "--vocab-size", "1000",
                         "--random-input-len", "8", "--random-output-len", "4", "--num-prompts",
                         "2", "--disable-tqdm", "--out", d.str("runs/s2")},
                        err);
  all_err += err;
  ASSERT_EQ(rc, 0) << err;
  // The bench_serving record keeps /server_info, where SGLang lists its own --api-key.
  const std::string bench = slurp(d.str("runs/bench.jsonl"));
  EXPECT_NE(bench.find("\"api_key\":\"***\""), std::string::npos) << bench;
  for (const auto& f : {"runs/g1/report.json", "runs/g1/report.md", "runs/g1/junit.xml",
                        "runs/g1/results.jsonl", "runs/g3/report.json", "runs/s1/report.json",
                        "runs/s1/requests.jsonl", "runs/result.jsonl", "summary.md"})
    EXPECT_TRUE(fs::exists(d.str(f))) << f;
  const auto leaks = files_holding(d.path() / "runs", kKey);
  EXPECT_TRUE(leaks.empty()) << "the key is in " << leaks.front();
  EXPECT_EQ(slurp(summary).find(kKey), std::string::npos);
  EXPECT_EQ(all_err.find(kKey), std::string::npos) << all_err;
  const json g1 = read_report(d.str("runs/g1"));
  EXPECT_NE(g1["context"]["command"].get<std::string>().find("--api-key ***"), std::string::npos)
      << g1["context"]["command"];
  const json g2 = read_report(d.str("runs/g2"));
  EXPECT_NE(g2["context"]["command"].get<std::string>().find("--api-key=***"), std::string::npos)
      << g2["context"]["command"];
  const json s1 = read_report(d.str("runs/s1"));
  EXPECT_NE(s1["context"]["command"].get<std::string>().find("--api-key ***"), std::string::npos)
      << s1["context"]["command"];
}

// wait-ready takes --api-key and OPENAI_API_KEY; a refused key is exit 3 at once, naming it.
TEST(Credentials, WaitReadyTakesTheKey) {
  KeyReset reset;
  const auto keyed = keyed_server();
  TestServer& server = *keyed;
  std::string err;
  EXPECT_EQ(run_eval_capture({"wait-ready", "--url", server.url(), "--api", "openai-chat",
                              "--api-key", kKey, "--timeout", "10"},
                             err),
            0)
      << err;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(run_eval_capture({"wait-ready", "--url", server.url(), "--api", "openai-chat",
                              "--timeout", "60", "--interval", "0.2"},
                             err),
            3);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(waited, 10.0) << "a 401 must not be waited out";
  EXPECT_NE(err.find("--api-key or set OPENAI_API_KEY"), std::string::npos) << err;
  EXPECT_EQ(run_eval_capture({"wait-ready", "--url", server.url(), "--api", "openai-chat",
                              "--api-key", "sek-wrong", "--timeout", "60"},
                             err),
            3);
  EXPECT_NE(err.find("API key"), std::string::npos) << err;
  EXPECT_EQ(err.find("sek-wrong"), std::string::npos) << err;
  ::setenv("OPENAI_API_KEY", kKey, 1);
  EXPECT_EQ(
      run_eval_capture(
          {"wait-ready", "--url", server.url(), "--api", "openai-chat", "--timeout", "10"}, err),
      0)
      << err;
}

// serve-bench names a refused key (exit 3), as gsm8k does, before any timed request.
TEST(Credentials, ServeBenchNamesARejectedKey) {
  KeyReset reset;
  const auto keyed = keyed_server();
  TestServer& server = *keyed;
  TempDir d;
  std::string err;
  const std::vector<std::string> base = {
      "serve-bench",   "--url", server.url(),     "--vocab-size", "100",
      "--num-prompts", "2",     "--disable-tqdm", "--out",        d.str("out")};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  EXPECT_EQ(run_eval_capture(with({}), err), 3);
  EXPECT_NE(err.find("--api-key or set OPENAI_API_KEY"), std::string::npos) << err;
  EXPECT_EQ(run_eval_capture(with({"--api-key", "sek-wrong"}), err), 3);
  EXPECT_NE(err.find("the API key (from --api-key or OPENAI_API_KEY) is wrong"), std::string::npos)
      << err;
  EXPECT_EQ(server.stats().generate_requests, 0u);
  const json rep = read_report(d.str("out"));
  EXPECT_EQ(rep["status"], "ERROR");
  EXPECT_NE(rep["error"].get<std::string>().find("API key"), std::string::npos);
}

}  // namespace
}  // namespace dsv4::e2e_test

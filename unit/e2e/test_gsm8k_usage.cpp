// `dsv4-eval gsm8k` usage: bad flags and bad data give exit 2 with a message naming the field,
// line and value; the canonical-URL download path (cache, sha256) against the local test server.
#include <gtest/gtest.h>

#include "gsm8k_runner_util.hpp"
#include "http/download.hpp"
#include "http/sha256.hpp"

namespace dsv4::e2e_test {
namespace {

struct UsageCase {
  const char* name;
  std::vector<std::string> args;
  std::vector<std::string> message_parts;
};
void PrintTo(const UsageCase& c, std::ostream* os) { *os << c.name; }

class BadFlags : public ::testing::TestWithParam<UsageCase> {};

TEST_P(BadFlags, ExitTwoNamingFlagAndValue) {
  const UsageCase& c = GetParam();
  TempDir d;
  const std::string data = write_questions(d, 8, 1);
  std::vector<std::string> args = {"gsm8k", "--url",      "http://127.0.0.1:9", "--data", data,
                                   "--out", d.str("out"), "--num-questions",    "0"};
  args.insert(args.end(), c.args.begin(), c.args.end());
  std::string err;
  EXPECT_EQ(run_eval_capture(args, err), 2) << err;
  for (const auto& part : c.message_parts)
    EXPECT_NE(err.find(part), std::string::npos) << "'" << part << "' not in: " << err;
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadFlags,
    ::testing::Values(
        UsageCase{"api", {"--api", "grpc"}, {"--api 'grpc'", "sglang"}},
        UsageCase{"url_scheme", {"--url", "ftp://x"}, {"--url 'ftp://x'"}},
        UsageCase{"gate_syntax", {"--gate", "accuracy=>0.9"}, {"accuracy=>0.9", "'=>'"}},
        UsageCase{"gate_metric", {"--gate", "acuracy>0.9"}, {"unknown metric 'acuracy'"}},
        UsageCase{"gate_value", {"--gate", "accuracy>high"}, {"'high' is not a number"}},
        UsageCase{"parallel", {"--parallel", "0"}, {"--parallel 0"}},
        UsageCase{"parallel_text", {"--parallel", "many"}, {"--parallel 'many'"}},
        UsageCase{"num_questions_text", {"--num-questions", "abc"}, {"--num-questions 'abc'"}},
        UsageCase{"timeout_joined_text", {"--timeout=soon"}, {"--timeout 'soon'"}},
        UsageCase{"progress_interval", {"--progress-interval", "-1"}, {"--progress-interval -1"}},
        UsageCase{"stop_grace", {"--stop-grace", "-2"}, {"--stop-grace"}},
        UsageCase{"timeout", {"--timeout", "0"}, {"--timeout"}},
        UsageCase{"retries", {"--retries", "-1"}, {"--retries -1"}},
        UsageCase{"num_questions", {"--num-questions", "9"}, {"--num-questions 9", "8 questions"}},
        UsageCase{"num_shots", {"--num-shots", "20"}, {"--num-shots 20", "8 records"}},
        UsageCase{"sha_format", {"--data-sha256", "abc"}, {"--data-sha256 'abc'"}},
        UsageCase{"sha_mismatch",
                  {"--data-sha256", std::string(64, '0')},
                  {"sha256 of --data", std::string(64, '0')}},
        UsageCase{"unknown_flag", {"--bogus"}, {"bogus"}},
        UsageCase{"stray_argument", {"extra"}, {"'extra'"}},
        UsageCase{"missing_data", {"--data", "/nonexistent/q.jsonl"}, {"/nonexistent/q.jsonl"}},
        UsageCase{
            "missing_shots", {"--shots-from", "/nonexistent/s.jsonl"}, {"/nonexistent/s.jsonl"}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(BadData, ExitTwoNamingFileLineFieldValue) {
  TempDir d;
  const std::string data = d.str("bad.jsonl");
  write_text(data,
             "{\"question\":\"a\",\"answer\":\"#### 1\"}\n"
             "{\"question\":\"b\",\"answer\":\"#### 2\"}\n"
             "{\"question\":\"c\",\"answer\":\"the answer is twelve\"}\n");
  std::string err;
  EXPECT_EQ(run_eval_capture({"gsm8k", "--url", "http://127.0.0.1:9", "--data", data, "--out",
                              d.str("out"), "--num-questions", "0", "--num-shots", "1"},
                             err),
            2);
  for (const char* part : {"bad data", "bad.jsonl:3", "field 'answer'", "the answer is twelve"})
    EXPECT_NE(err.find(part), std::string::npos) << "'" << part << "' not in: " << err;
}

// bench_sglang's --host with a port in it (127.0.0.1:8000) would become
// http://127.0.0.1:8000:30000: refused by name, pointing at --port.
TEST(BadFlags, HostWithAPortIsRefusedByName) {
  TempDir d;
  const std::string data = write_questions(d, 8, 1);
  for (const std::string host : {"127.0.0.1:8000", "http://127.0.0.1:8000", "[::1]:8000"}) {
    std::string err;
    EXPECT_EQ(run_eval_capture({"gsm8k", "--host", host, "--data", data, "--num-questions", "0",
                                "--out", d.str("out")},
                               err),
              2)
        << host << ": " << err;
    EXPECT_NE(err.find("--host '" + host + "' holds a port (8000)"), std::string::npos) << err;
    EXPECT_NE(err.find("--port 8000"), std::string::npos) << err;
  }
  // A bare IPv6 address has colons and no port: it is not refused as one.
  std::string err;
  EXPECT_EQ(run_eval_capture({"gsm8k", "--host", "http://[::1]", "--port", "9", "--data", data,
                              "--num-questions", "0", "--out", d.str("v6"), "--retries", "0"},
                             err),
            3)
      << err;
}

// A data line that is not UTF-8 is named with U+FFFD in place of its bytes, never echoed raw.
TEST(BadData, BytesThatAreNotUtf8AreNotEchoed) {
  TempDir d;
  const std::string data = d.str("latin1.jsonl");
  write_text(data, "{\"question\":\"caf\xe9 \xff\xfe\",\"answer\":\"#### 1\"}\n");
  std::string err;
  EXPECT_EQ(run_eval_capture({"gsm8k", "--url", "http://127.0.0.1:9", "--data", data, "--out",
                              d.str("out"), "--num-questions", "0", "--num-shots", "0"},
                             err),
            2);
  EXPECT_NE(err.find("latin1.jsonl:1"), std::string::npos) << err;
  EXPECT_NE(err.find("caf\xEF\xBF\xBD"), std::string::npos) << err;
  for (char bad : {'\xe9', '\xff', '\xfe'})
    EXPECT_EQ(err.find(bad), std::string::npos) << "a raw byte in: " << err;
}

TEST(Help, ListsOptionsAndExitsZero) {
  ::testing::internal::CaptureStdout();
  const int rc = run_eval({"gsm8k", "--help"});
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  for (const char* f :
       {"--url", "--api", "--num-questions", "--num-shots", "--parallel", "--max-new-tokens",
        "--gate", "--out", "--resume", "--stream", "--data", "--shots-from", "--timeout",
        "--retries", "--overwrite", "--allow-changed-settings", "--stop-grace"})
    EXPECT_NE(out.find(f), std::string::npos) << f;
}

// The download path of the canonical test set, served by the local test server.
class Download : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_.str("www"));
    data_ = write_questions(dir_, 12, 21, "www/test.jsonl");
    sha_ = eval::sha256_file(data_).value();
    test_server::TestServerConfig cfg = base_config(data_, 21);
    cfg.serve_dir = dir_.str("www");
    server_ = std::make_unique<test_server::TestServer>(cfg);
    server_->start();
    url_ = server_->url() + "/files/test.jsonl";
  }
  std::vector<std::string> args(const std::string& sha, const std::string& out) {
    return {"gsm8k",
            "--url",
            server_->url(),
            "--data-url",
            url_,
            "--data-sha256",
            sha,
            "--cache-dir",
            dir_.str("cache"),
            "--out",
            dir_.str(out),
            "--num-questions",
            "0",
            "--num-shots",
            "2",
            "--progress-interval",
            "0"};
  }
  TempDir dir_;
  std::string data_, sha_, url_;
  std::unique_ptr<test_server::TestServer> server_;
};

TEST_F(Download, FetchesVerifiesCachesAndReuses) {
  std::string err;
  ASSERT_EQ(run_eval_capture(args(sha_, "out1"), err), 0) << err;
  const std::string cached = dir_.str("cache/test-" + sha_.substr(0, 12) + ".jsonl");
  ASSERT_TRUE(fs::exists(cached));
  EXPECT_EQ(slurp(cached), slurp(data_));
  EXPECT_EQ(read_report(dir_.str("out1"))["context"]["data"], cached);
  EXPECT_EQ(read_report(dir_.str("out1"))["metrics"]["questions"].get<double>(), 12);
  fs::remove(data_);  // the second run must not need the network
  ASSERT_EQ(run_eval_capture(args(sha_, "out2"), err), 0) << err;
  // A corrupt cache entry is fetched again (and here fails: the file is gone).
  write_text(cached, "corrupt");
  EXPECT_EQ(run_eval_capture(args(sha_, "out3"), err), 3) << err;
  EXPECT_NE(err.find("HTTP 404"), std::string::npos) << err;
  const auto report = read_report(dir_.str("out3"));
  EXPECT_EQ(report["status"], "ERROR");
  EXPECT_NE(slurp(dir_.str("out3/junit.xml")).find("<error message="), std::string::npos);
}

TEST_F(Download, ChecksumMismatchIsBadData) {
  const std::string wrong = std::string(63, 'a') + "b";
  std::string err;
  EXPECT_EQ(run_eval_capture(args(wrong, "out"), err), 2) << err;
  EXPECT_NE(err.find("sha256 of " + url_), std::string::npos) << err;
  EXPECT_NE(err.find("is " + sha_), std::string::npos) << err;
  EXPECT_NE(err.find("expected " + wrong), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir_.str("cache/test-" + wrong.substr(0, 12) + ".jsonl")))
      << "a file failing its checksum must not be cached";
}

TEST_F(Download, FetchCachedApi) {
  const std::string path = eval::fetch_cached(url_, sha_, dir_.str("c2"));
  EXPECT_EQ(eval::sha256_file(path).value(), sha_);
  EXPECT_THROW(eval::fetch_cached(server_->url() + "/files/none.jsonl", "", dir_.str("c2")),
               eval::DownloadError);
  EXPECT_THROW(eval::fetch_cached(url_, std::string(64, 'f'), dir_.str("c3")), eval::ChecksumError);
}

TEST(CanonicalData, UrlAndChecksumAreTheIssuedOnes) {
  EXPECT_STREQ(eval::gsm8k::kCanonicalSha256,
               "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14");
  EXPECT_NE(std::string(eval::gsm8k::kCanonicalUrl).find("openai/grade-school-math"),
            std::string::npos);
  EXPECT_NE(std::string(eval::gsm8k::kCanonicalUrl).find("test.jsonl"), std::string::npos);
}

}  // namespace
}  // namespace dsv4::e2e_test

// `dsv4-eval gsm8k --out`: an earlier run there is never lost (refused without --resume or
// --overwrite; a run refused for its server or flags leaves it whole), and --resume refuses a run
// whose settings (settings.json) differ, naming each, unless --allow-changed-settings.
#include <gtest/gtest.h>

#include "gsm8k_runner_util.hpp"

namespace dsv4::e2e_test {
namespace {

constexpr size_t kN = 24;

class RunFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = write_questions(dir_, kN, 7);
    auto cfg = base_config(data_, 7);
    cfg.correct_rate = 0.75;
    server_ = std::make_unique<test_server::TestServer>(cfg);
    server_->start();
    out_ = dir_.str("out");
    first_ = run_gsm8k(server_->url(), data_, out_, {});
    ASSERT_EQ(first_.rc, 0) << first_.err;
    ASSERT_EQ(first_.results.size(), kN);
  }
  // The earlier run's files are exactly as it left them.
  void expect_untouched() {
    EXPECT_EQ(read_results(out_).size(), kN);
    EXPECT_EQ(read_report(out_)["status"], "PASS");
    EXPECT_EQ(read_report(out_)["metrics"]["accuracy"], first_.report["metrics"]["accuracy"]);
  }
  TempDir dir_;
  std::string data_, out_;
  std::unique_ptr<test_server::TestServer> server_;
  GsmRun first_;
};

TEST_F(RunFolder, SettingsAreRecorded) {
  const auto s = nlohmann::json::parse(slurp(out_ + "/settings.json"));
  EXPECT_EQ(s["url"], server_->url());
  EXPECT_EQ(s["api"], "sglang");
  EXPECT_EQ(s["max_new_tokens"], 512);
  EXPECT_EQ(s["temperature"], 0.0);
  EXPECT_EQ(s["stops"].size(), 3u);
}

TEST_F(RunFolder, NewRunIntoAFolderWithResultsIsRefused) {
  const uint64_t before = server_->stats().generate_requests;
  const GsmRun again = run_gsm8k(server_->url(), data_, out_, {});
  EXPECT_EQ(again.rc, 2) << again.err;
  EXPECT_NE(again.err.find("holds an earlier run"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("--resume"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("--overwrite"), std::string::npos) << again.err;
  EXPECT_EQ(server_->stats().generate_requests, before);
  expect_untouched();
}

// A URL typo, a file-descriptor limit refused: exit 2 or 3 before any request, the earlier run
// stays whole even with --overwrite.
TEST_F(RunFolder, OverwriteRefusedBeforeTheFirstRequestLeavesTheEarlierRun) {
  const GsmRun typo = run_gsm8k("http://127.0.0.1:" + std::to_string(free_port()), data_, out_,
                                {"--overwrite", "--retries", "0"});
  EXPECT_EQ(typo.rc, 3) << typo.err;
  EXPECT_NE(typo.err.find("left as it was"), std::string::npos) << typo.err;
  expect_untouched();
  std::string err;
  EXPECT_EQ(run_limited(300,
                        {"gsm8k", "--url", server_->url(), "--data", data_, "--num-questions", "0",
                         "--parallel", "500", "--out", out_, "--overwrite"},
                        dir_.str("fd.err"), err),
            2)
      << err;
  expect_untouched();
  const GsmRun bad = run_gsm8k(server_->url(), data_, out_, {"--overwrite", "--num-shots", "99"});
  EXPECT_EQ(bad.rc, 2) << bad.err;
  expect_untouched();
}

TEST_F(RunFolder, OverwriteReplacesTheEarlierRunOnceItCanStart) {
  const GsmRun again =
      run_gsm8k(server_->url(), data_, out_, {"--overwrite", "--num-questions", "10"});
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_EQ(again.results.size(), 10u) << "old answers left beside the new run";
  EXPECT_EQ(again.report["metrics"]["questions"], 10);
  const GsmRun both = run_gsm8k(server_->url(), data_, out_, {"--overwrite", "--resume"});
  EXPECT_EQ(both.rc, 2) << both.err;
}

TEST_F(RunFolder, ResumeWithOtherSettingsIsRefusedNamingEach) {
  const GsmRun other = run_gsm8k(server_->url(), data_, out_,
                                 {"--resume", "--max-new-tokens", "256", "--temperature", "0.5"});
  EXPECT_EQ(other.rc, 2) << other.err;
  EXPECT_NE(other.err.find("max_new_tokens: recorded 512, now 256"), std::string::npos)
      << other.err;
  EXPECT_NE(other.err.find("temperature: recorded 0.0, now 0.5"), std::string::npos) << other.err;
  EXPECT_NE(other.err.find("--allow-changed-settings"), std::string::npos) << other.err;
  expect_untouched();
  // Another server (URL) and another API.
  test_server::TestServer second(base_config(data_, 7));
  second.start();
  const GsmRun url = run_gsm8k(second.url(), data_, out_, {"--resume"});
  EXPECT_EQ(url.rc, 2) << url.err;
  EXPECT_NE(url.err.find("url: recorded \"" + server_->url() + "\""), std::string::npos) << url.err;
  const GsmRun api =
      run_gsm8k(server_->url(), data_, out_, {"--resume", "--api", "openai-completions"});
  EXPECT_EQ(api.rc, 2) << api.err;
  EXPECT_NE(api.err.find("api: recorded \"sglang\", now \"openai-completions\""), std::string::npos)
      << api.err;
  EXPECT_EQ(second.stats().generate_requests, 0u);
}

// The OpenAI model is known only once /v1/models answers: compared then, before any question.
TEST(RunFolderModel, ResumeAgainstAnotherModelIsRefused) {
  TempDir d;
  const std::string data = write_questions(d, 12, 3);
  auto cfg = base_config(data, 3);
  const std::string out = d.str("out");
  // Cut after 4 answers: the server dies, the run stops.
  {
    auto dying_cfg = cfg;
    dying_cfg.exit_after = 4;
    test_server::TestServer dying(dying_cfg);
    dying.start();
    const GsmRun cut =
        run_gsm8k(dying.url(), data, out,
                  {"--api", "openai-completions", "--parallel", "1", "--retries", "0"});
    ASSERT_EQ(cut.rc, 3) << cut.err;
    EXPECT_EQ(nlohmann::json::parse(slurp(out + "/settings.json"))["model"], cfg.model);
  }
  auto other_cfg = cfg;
  other_cfg.model = "another/model";
  test_server::TestServer other(other_cfg);
  other.start();
  auto s = nlohmann::json::parse(slurp(out + "/settings.json"));
  s["url"] = other.url();  // the same address, another model behind it
  write_text(out + "/settings.json", s.dump());
  const GsmRun r = run_gsm8k(other.url(), data, out, {"--resume", "--api", "openai-completions"});
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("model: recorded \"" + cfg.model + "\", now \"another/model\""),
            std::string::npos)
      << r.err;
  EXPECT_EQ(other.stats().generate_requests, 0u);
}

TEST_F(RunFolder, AllowChangedSettingsResumesAndNotesEachDifference) {
  // Cut the recorded run to half its answers, then resume it with another token budget.
  const std::string full = slurp(out_ + "/results.jsonl");
  size_t pos = 0;
  for (size_t line = 0; line < kN / 2; ++line) pos = full.find('\n', pos) + 1;
  write_text(out_ + "/results.jsonl", full.substr(0, pos));
  const GsmRun r = run_gsm8k(server_->url(), data_, out_,
                             {"--resume", "--max-new-tokens", "400", "--allow-changed-settings"});
  ASSERT_EQ(r.rc, 0) << r.err;
  bool noted = false;
  for (const auto& n : r.report["notes"])
    noted |=
        n.get<std::string>().find("max_new_tokens: recorded 512, now 400") != std::string::npos;
  EXPECT_TRUE(noted) << r.report["notes"].dump();
  EXPECT_EQ(nlohmann::json::parse(slurp(out_ + "/settings.json"))["max_new_tokens"], 512)
      << "the recorded settings were replaced";
  const GsmRun without = run_gsm8k(server_->url(), data_, out_, {"--allow-changed-settings"});
  EXPECT_EQ(without.rc, 2) << without.err;
  EXPECT_NE(without.err.find("--allow-changed-settings needs --resume"), std::string::npos);
}

}  // namespace
}  // namespace dsv4::e2e_test

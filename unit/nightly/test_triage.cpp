// The report's triage: each failure of this run (gate, ctest test, could not run) labelled new or
// pre-existing against earlier runs' artifact folders; the latest attempt of a suite counts.
#include <gtest/gtest.h>

#include "helpers.hpp"
#include "triage.hpp"

namespace dsv4::nightly {
namespace {

using nlohmann::json;

// A suite.json as run-suite writes it, in `dir`/`artifact`/.
void suite_json(const std::string& dir, const std::string& artifact, const std::string& suite,
                const std::string& run, int attempt, int exit_code, json failures) {
  test::write_file(dir + "/" + artifact + "/suite.json",
                   json{{"suite", suite},
                        {"run_id", run},
                        {"run_attempt", std::to_string(attempt)},
                        {"exit_code", exit_code},
                        {"reason", "r"},
                        {"failures", failures}}
                       .dump());
}

json gate(const std::string& text) {
  return {{"kind", "gate"}, {"id", text}, {"detail", text + " failed"}};
}

TEST(Triage, NewAndPreExistingFailures) {
  test::TempDir d;
  const std::string cur = d / "current", prev = d / "previous";
  // This run: the MTP accept-length gate (failed before too) and the accuracy gate (new).
  suite_json(cur, "nightly-e2e-mtp-attempt1", "e2e-mtp", "300", 1, 1,
             {gate("accept_length>2.8"), gate("accuracy>0.92")});
  suite_json(cur, "nightly-kernels-attempt1", "kernels", "300", 1, 1,
             {{{"kind", "test"}, {"id", "kernels/KvStore.Hostile"}, {"detail", "mismatch"}}});
  for (const char* run : {"200", "100"})
    suite_json(prev + "/" + run, "nightly-e2e-mtp-attempt1", "e2e-mtp", run, 1, 1,
               {gate("accept_length>2.8")});
  suite_json(prev + "/200", "nightly-kernels-attempt1", "kernels", "200", 1, 0, json::array());
  TriageOptions o;
  o.current = cur;
  o.previous = prev;
  int fresh = -1;
  const std::string md = triage(o, fresh);
  EXPECT_EQ(fresh, 2) << md;
  EXPECT_NE(md.find("| e2e-mtp | gate | `accept_length>2.8` | accept_length>2.8 failed | "
                    "pre-existing (2 of 2 earlier runs: 200, 100) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| e2e-mtp | gate | `accuracy>0.92` | accuracy>0.92 failed | new (passed in "
                    "the 2 earlier runs) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| kernels | test | `kernels/KvStore.Hostile` | mismatch | new (passed in the "
                    "1 earlier runs) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("3 failures, 2 new, 1 pre-existing"), std::string::npos) << md;
}

TEST(Triage, CouldNotRunIsClassifiedAndTheLatestAttemptCounts) {
  test::TempDir d;
  const std::string cur = d / "current", prev = d / "previous";
  suite_json(cur, "a-attempt1", "e2e-x", "9", 1, 3,
             {{{"kind", "could-not-run"}, {"id", ""}, {"detail", "server never ready"}}});
  // The rerun of the workflow (attempt 2) could not run either: it is the one that counts.
  suite_json(cur, "a-attempt2", "e2e-x", "9", 2, 3,
             {{{"kind", "could-not-run"}, {"id", ""}, {"detail", "still not ready"}}});
  suite_json(prev + "/8", "a-attempt1", "e2e-x", "8", 1, 3,
             {{{"kind", "could-not-run"}, {"id", ""}, {"detail", "not ready"}}});
  TriageOptions o;
  o.current = cur;
  o.previous = prev;
  // A suite job that failed before run-suite wrote anything.
  o.needs = json::parse(R"({"tools": {"result": "success"}, "e2e-x": {"result": "failure"},
                            "e2e-y": {"result": "failure"}, "e2e-z": {"result": "skipped"}})");
  int fresh = -1;
  const std::string md = triage(o, fresh);
  EXPECT_EQ(fresh, 1) << md;
  EXPECT_NE(md.find("| e2e-x | could-not-run | — | still not ready | pre-existing (1 of 1 earlier "
                    "runs: 8) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| e2e-y | could-not-run | — | the job e2e-y failure before run-suite ran this "
                    "suite | new (no earlier run of this suite to compare) |"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("e2e-z"), std::string::npos) << "a skipped job is not a failure: " << md;
}

// A job that runs several suites (both FlashMLA backends) and died before run-suite: each of its
// suites could not run; a suite of it that wrote its report keeps its own result.
TEST(Triage, AJobOfSeveralSuitesThatDiedCountsForEachOfThem) {
  test::TempDir d;
  suite_json(d / "current", "dsv4-e2e-mtp-ukv-attempt1", "e2e-mtp-ukv", "9", 1, 1,
             {gate("accuracy>0.92")});
  TriageOptions o;
  o.current = d / "current";
  o.job_suites = {{"e2e-mtp", {"e2e-mtp-ukv", "e2e-mtp-triton"}}};
  o.needs = json::parse(R"({"tools": {"result": "success"}, "e2e-mtp": {"result": "cancelled"}})");
  int fresh = -1;
  const std::string md = triage(o, fresh);
  EXPECT_EQ(fresh, 2) << md;
  EXPECT_NE(md.find("| e2e-mtp-triton | could-not-run | — | the job e2e-mtp cancelled before "
                    "run-suite ran this suite |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| e2e-mtp-ukv | gate | `accuracy>0.92` |"), std::string::npos) << md;
  EXPECT_EQ(md.find("| e2e-mtp | could-not-run"), std::string::npos) << md;
}

// The report job's triage step: NEEDS from the environment, the jobs' suites from the registry.
TEST(Triage, CommandLineReadsNeedsAndTheRegistry) {
  test::TempDir d;
  std::filesystem::create_directories(d / "current");
  const auto r = test::run_command(
      "NEEDS='{\"tools\": {\"result\": \"success\"}, \"e2e-v4pro-mtp\": {\"result\": "
      "\"failure\"}}' " +
      std::string(DSV4_NIGHTLY_BIN) + " triage --registry " +
      test::quote(DSV4_SOURCE_DIR "/nightly/suites.json") + " --current " +
      test::quote(d / "current") + " --previous " + test::quote(d / "none"));
  EXPECT_EQ(r.code, 0) << r.output;
  for (const char* suite : {"e2e-v4pro-mtp-ukv", "e2e-v4pro-mtp-triton"})
    EXPECT_NE(r.output.find(std::string("| ") + suite + " | could-not-run |"), std::string::npos)
        << r.output;
}

// A CTest JUnit file with the given test cases: name -> "pass", "skip" or "fail".
void junit(const std::string& path, const std::vector<std::pair<std::string, std::string>>& tests) {
  std::string x = "<testsuite>";
  for (const auto& [name, outcome] : tests) {
    x += "<testcase name=\"" + name + "\" status=\"run\">";
    if (outcome == "skip") x += "<skipped message=\"no GPU: GPU test skipped\"/>";
    if (outcome == "fail") x += "<failure message=\"m\"/>";
    x += "</testcase>";
  }
  test::write_file(path, x + "</testsuite>");
}

const std::string kReplay = "replay/CompactPagesAdapter.DeviceReplayMatchesTheReference";
const std::string kTorch = "fixtures/SafetensorsTorchInterop.ReadsEveryDtypeTorchWrote";

// Dormant: skipped in every run that has it. A GPU test labelled cpu skips in the PR run and is
// absent from the nightly's gpu-label run; a test that needs a variable no workflow sets skips
// everywhere. A test that ran (passed or failed) in any run is not dormant.
TEST(Dormant, TestsSkippedInEveryRunOfEveryWorkflowAreFound) {
  test::TempDir d;
  junit(d / "pr/1/pr-junit-attempt1/junit.xml",
        {{kReplay, "skip"}, {kTorch, "skip"}, {"reference/A.B", "pass"}, {"kernels/K.P", "skip"}});
  junit(d / "pr/2/pr-junit-attempt1/junit.xml",
        {{kReplay, "skip"}, {kTorch, "skip"}, {"reference/A.B", "pass"}, {"kernels/K.P", "skip"}});
  junit(d / "nightly/3/dsv4-kernels-attempt1/junit.xml", {{"kernels/K.P", "fail"}});
  test::write_file(d / "nightly/4/empty.txt", "no junit here");
  int runs = 0, tests = 0;
  auto dormant = dormant_tests(
      {d / "pr/1", d / "pr/2", d / "nightly/3", d / "nightly/4", d / "absent", d / "pr/2/"}, runs,
      tests);
  EXPECT_EQ(runs, 3);
  EXPECT_EQ(tests, 4);
  ASSERT_EQ(dormant.size(), 2u);
  EXPECT_EQ(dormant[0].name, kTorch);
  EXPECT_EQ(dormant[1].name, kReplay);
  EXPECT_EQ(dormant[1].runs, 2);
  EXPECT_EQ(dormant[1].reason, "no GPU: GPU test skipped");
  // Labelled gpu, the replay test runs in the kernels suite: no longer dormant.
  junit(d / "nightly/3/dsv4-kernels-attempt1/junit.xml",
        {{"kernels/K.P", "pass"}, {kReplay, "pass"}});
  dormant = dormant_tests({d / "pr/1", d / "pr/2", d / "nightly/3"}, runs, tests);
  ASSERT_EQ(dormant.size(), 1u);
  EXPECT_EQ(dormant[0].name, kTorch);
}

TEST(Dormant, CommandLineFailsOnDormantTestsAndCannotRunWithoutJUnit) {
  test::TempDir d;
  junit(d / "1/a/junit.xml", {{kTorch, "skip"}, {"reference/A.B", "pass"}});
  auto r = test::run_command(std::string(DSV4_NIGHTLY_BIN) + " dormant --summary " +
                             test::quote(d / "summary.md") + " " + test::quote(d / "1"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(test::read_file(d / "summary.md").find("| `" + kTorch + "` | 1 |"), std::string::npos)
      << test::read_file(d / "summary.md");
  junit(d / "1/a/junit.xml", {{kTorch, "pass"}, {"reference/A.B", "pass"}});
  r = test::run_command(std::string(DSV4_NIGHTLY_BIN) + " dormant " + test::quote(d / "1"));
  EXPECT_EQ(r.code, 0) << r.output;
  r = test::run_command(std::string(DSV4_NIGHTLY_BIN) + " dormant " + test::quote(d / "none"));
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_NE(r.output.find("nothing could be checked"), std::string::npos) << r.output;
}

// The one failure load_run derives from an older report (no failure list) with this JUnit file.
Failure derived_failure(const test::TempDir& d, const std::string& junit) {
  test::write_file(d / "run/k/suite.json", R"({"suite": "kernels", "exit_code": 1})");
  test::write_file(d / "run/k/junit.xml", junit);
  const auto runs = load_run(d / "run");
  if (runs.count("kernels") != 1 || runs.at("kernels").failures.size() != 1) {
    ADD_FAILURE() << "not one failure of the suite 'kernels'";
    return {};
  }
  return runs.at("kernels").failures[0];
}

TEST(Triage, OlderReportsWithoutAFailureListAreRead) {
  test::TempDir d;
  EXPECT_EQ(derived_failure(d,
                            "<testsuite><testcase name=\"kernels/A.B\"><failure message=\"m\"/>"
                            "</testcase><testcase name=\"kernels/A.C\"/></testsuite>")
                .id,
            "kernels/A.B");
}

TEST(Triage, OlderShardReportsNameTheGoogleTestTests) {
  test::TempDir d;
  test::write_file(d / "run/k/junit/kernels_test_x/shard-1-of-2.xml",
                   "<testsuites><testcase name=\"B\" classname=\"A\"><failure message=\"m\"/>"
                   "</testcase><testcase name=\"C\" classname=\"A\"/></testsuites>");
  const Failure f =
      derived_failure(d,
                      "<testsuite><testcase name=\"kernels_test_x/shard-1-of-2\" status=\"fail\">"
                      "<failure message=\"\"/></testcase><testcase "
                      "name=\"kernels_test_x/shard-2-of-2\" status=\"run\"/></testsuite>");
  EXPECT_EQ(f.id, "kernels_test_x/A.B");
  EXPECT_EQ(f.detail, "m");
}

TEST(Triage, CommandLineAppendsToTheSummary) {
  test::TempDir d;
  suite_json(d / "current", "k-attempt1", "kernels", "5", 1, 0, json::array());
  const auto r = test::run_command(
      std::string(DSV4_NIGHTLY_BIN) + " triage --current " + test::quote(d / "current") +
      " --previous " + test::quote(d / "none") + " --summary " + test::quote(d / "summary.md"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(test::read_file(d / "summary.md").find("No failures in this run's 1 suite reports"),
            std::string::npos)
      << r.output;
  const auto bad = test::run_command(std::string(DSV4_NIGHTLY_BIN) + " triage --bogus 1");
  EXPECT_EQ(bad.code, 2) << bad.output;
}

}  // namespace
}  // namespace dsv4::nightly

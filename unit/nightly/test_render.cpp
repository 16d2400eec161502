// Workflow rendering and the drift check: a hand edit, a suite without a job, a job for an
// unregistered suite are each caught; the final report job fails on failed or cancelled suites.
#include <gtest/gtest.h>

#include <regex>

#include "helpers.hpp"
#include "registry.hpp"
#include "render.hpp"

namespace dsv4::nightly {
namespace {

const std::string kRegistry = DSV4_SOURCE_DIR "/nightly/suites.json";

Registry committed() { return load_registry(kRegistry); }

// The rendered workflow `name` (nightly.yml, weekly.yml, pr.yml).
std::string rendered(const Registry& reg, const std::string& name) {
  for (const auto& f : render_all(reg, default_templates_dir()))
    if (f.name == name) return f.text;
  ADD_FAILURE() << "no rendered " << name;
  return "";
}
std::string render_nightly(const Registry& reg) { return rendered(reg, "nightly.yml"); }

std::vector<std::string> check_dir(const Registry& reg, const std::string& dir) {
  return check_workflows(reg, dir, default_templates_dir());
}

// Writes the rendering of `reg` into `dir`.
void render_into(const Registry& reg, const std::string& dir) {
  for (const auto& f : render_all(reg, default_templates_dir()))
    test::write_file(dir + "/" + f.name, f.text);
}

std::string replace_once(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "'" << from << "' not in the text";
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// The text of the job `name`: from its "  name:" line to the next job's line.
std::string job_block(const std::string& yml, const std::string& name) {
  const std::string head = "\n  " + name + ":\n";
  const size_t start = yml.find(head);
  if (start == std::string::npos) return "";
  static const std::regex next_job("\n  [A-Za-z_][A-Za-z0-9_-]*:\n");
  std::smatch m;
  const auto from = yml.cbegin() + static_cast<long>(start + head.size() - 1);
  if (std::regex_search(from, yml.cend(), m, next_job))
    return yml.substr(start + 1, static_cast<size_t>(m[0].first - yml.cbegin()) - start);
  return yml.substr(start + 1);
}

TEST(Render, DeterministicWithOneJobPerSuiteAndAReportJob) {
  const Registry reg = committed();
  const std::string a = render_nightly(reg), b = render_nightly(reg);
  EXPECT_EQ(a, b);
  EXPECT_TRUE(check_jobs(reg, Schedule::kNightly, a).empty());
  for (const auto& s : reg.suites) {
    if (s.schedule != Schedule::kNightly) continue;
    const std::string job = job_block(a, s.name);
    ASSERT_FALSE(job.empty()) << "no job " << s.name;
    EXPECT_NE(job.find("nightly/run-suite " + s.name + " --out"), std::string::npos) << job;
    // The container as the AMD fleets run it: no container key, this pod's GPUs, VRAM cleared
    // first, docker exec, an always() teardown, the repository guard.
    EXPECT_EQ(job.find("    container:"), std::string::npos) << job;
    EXPECT_NE(job.find("ci/gpu-container.sh clear-vram"), std::string::npos) << job;
    EXPECT_NE(job.find("ci/gpu-container.sh start \"$DSV4_CONTAINER\""), std::string::npos) << job;
    EXPECT_NE(job.find("ci/gpu-container.sh exec \"$DSV4_CONTAINER\""), std::string::npos) << job;
    EXPECT_LT(job.find("clear-vram"), job.find("gpu-container.sh start")) << job;
    EXPECT_NE(job.find("if: always()\n        timeout-minutes: 5\n        run: bash "
                       "ci/gpu-container.sh stop"),
              std::string::npos)
        << job;
    EXPECT_NE(job.find("if: github.repository == '" + reg.nightly.repository + "' && ("),
              std::string::npos)
        << job;
    EXPECT_NE(job.find("-attempt${{ github.run_attempt }}"), std::string::npos) << job;
    // Every step has its own time limit.
    size_t steps = 0, limits = 0;
    for (size_t at = job.find("      - name:"); at != std::string::npos;
         at = job.find("      - name:", at + 1))
      ++steps;
    for (size_t at = job.find("        timeout-minutes:"); at != std::string::npos;
         at = job.find("        timeout-minutes:", at + 1))
      ++limits;
    EXPECT_EQ(steps, limits) << job;
    if (s.kind == Kind::kE2e) {
      EXPECT_NE(job.find("needs: tools"), std::string::npos) << job;
      EXPECT_NE(job.find("HF_TOKEN: ${{ secrets.HF_TOKEN }}"), std::string::npos) << job;
      EXPECT_NE(job.find("--hf-cache " + reg.nightly.hf_cache.host_path), std::string::npos) << job;
      EXPECT_NE(job.find("repository: " + reg.nightly.sglang.repository), std::string::npos) << job;
    } else {
      EXPECT_NE(job.find("DSV4_CASE_DIR="), std::string::npos) << job;
    }
    EXPECT_NE(job.find("runs-on: " + s.runs_on + "\n"), std::string::npos) << job;
    EXPECT_NE(job.find("timeout-minutes: " + std::to_string(s.timeout_minutes) + "\n"),
              std::string::npos)
        << job;
    EXPECT_NE(job.find("uses: actions/upload-artifact@v4"), std::string::npos) << job;
    EXPECT_NE(job.find("'," + s.name + ",'"), std::string::npos) << "job filter: " << job;
    EXPECT_NE(a.find("      - " + s.name + "\n"), std::string::npos) << "report needs " << s.name;
  }
  EXPECT_NE(a.find("  schedule:\n    - cron: \"" + reg.nightly.cron + "\""), std::string::npos);
  EXPECT_NE(a.find("  workflow_dispatch:"), std::string::npos);
  EXPECT_NE(a.find("format('dispatch-{0}', github.run_id)"), std::string::npos)
      << "a concurrency group per dispatch";
  EXPECT_NE(a.find("dsv4-nightly triage"), std::string::npos);
  EXPECT_NE(a.find("--limit " + std::to_string(reg.nightly.triage_runs)), std::string::npos);
  const std::string pr = rendered(reg, "pr.yml");
  EXPECT_NE(pr.find("run: " + reg.pr.test_command + "\n"), std::string::npos) << pr;
  EXPECT_NE(pr.find("bash ci/actionlint.sh\n"), std::string::npos) << pr;
  EXPECT_NE(pr.find("bash ci/shellcheck.sh\n"), std::string::npos) << pr;
  EXPECT_NE(pr.find("cmake --preset " + reg.pr.hip_preset), std::string::npos) << pr;
  EXPECT_NE(pr.find("start --no-gpu \"$DSV4_CONTAINER\" \"" + reg.pr.hip_image), std::string::npos)
      << pr;
  const std::string weekly = rendered(reg, "weekly.yml");
  EXPECT_NE(weekly.find("nightly/run-suite kernels-mi35x-asan"), std::string::npos) << weekly;
  EXPECT_EQ(a.find("kernels-mi35x-asan"), std::string::npos) << "a weekly suite in nightly.yml";
}

TEST(Render, TemplatesNameEveryValue) {
  EXPECT_EQ(fill("a @@x@@ b @@y@@", {{"x", "1"}, {"y", "2"}}), "a 1 b 2");
  EXPECT_EQ(fill("uses: actions/checkout@v4 ${{ github.sha }}", {}),
            "uses: actions/checkout@v4 ${{ github.sha }}");
  EXPECT_THROW(fill("@@missing@@", {}), std::invalid_argument);
}

TEST(Dormant, PresetsAndTestsNoWorkflowRunsAreCaught) {
  const Registry reg = committed();
  const auto wfs = render_all(reg, default_templates_dir());
  const std::string presets = DSV4_SOURCE_DIR "/CMakePresets.json";
  // The committed presets and a cpu build's kind of tests: nothing dormant.
  const std::vector<std::pair<std::string, std::vector<std::string>>> tests = {
      {"reference/A.B", {"cpu"}}, {"kernels/K.P", {"gpu"}}, {"e2e/E.F", {"e2e"}}};
  for (const auto& p : check_dormant(reg, DSV4_SOURCE_DIR, presets, wfs, tests)) ADD_FAILURE() << p;
  // A test only the manual `nightly` preset would run (label slow) is dormant.
  auto p =
      check_dormant(reg, DSV4_SOURCE_DIR, presets, wfs, {{"reference/Slow.X", {"cpu", "slow"}}});
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("test 'reference/Slow.X' (labels cpu,slow) is dormant"), std::string::npos)
      << p[0];
  // A preset no workflow names and `manual` does not list.
  test::TempDir dir;
  std::string text = test::read_file(presets);
  text =
      replace_once(text, "\"configurePresets\": [",
                   "\"configurePresets\": [\n    {\"name\": \"orphan\", \"inherits\": \"base\"},");
  test::write_file(dir / "CMakePresets.json", text);
  p = check_dormant(reg, DSV4_SOURCE_DIR, dir / "CMakePresets.json", wfs, {});
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("configure preset 'orphan' is dormant"), std::string::npos) << p[0];
  // Listing a preset as manual that a workflow runs is an error too.
  Registry bad = reg;
  bad.manual.push_back({false, "hip", "x"});
  p = check_dormant(bad, DSV4_SOURCE_DIR, presets, wfs, {});
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("configure preset 'hip' is listed as manual"), std::string::npos) << p[0];
}

TEST(Render, CommittedWorkflowsAreTheRendering) {
  const auto problems = check_dir(committed(), DSV4_SOURCE_DIR "/.github/workflows");
  for (const auto& p : problems) ADD_FAILURE() << p;
}

TEST(Drift, HandEditIsCaughtWithItsLine) {
  const Registry reg = committed();
  test::TempDir dir;
  render_into(reg, dir.path());
  ASSERT_TRUE(check_dir(reg, dir.path()).empty());
  const std::string yml = test::read_file(dir / "nightly.yml");
  const std::string edited = replace_once(yml, "retention-days: 14", "retention-days: 30");
  test::write_file(dir / "nightly.yml", edited);
  const auto problems = check_dir(reg, dir.path());
  ASSERT_EQ(problems.size(), 1u);
  // the line of the first difference
  size_t line = 1;
  for (size_t i = 0; i < edited.find("retention-days: 30"); ++i) line += edited[i] == '\n';
  EXPECT_NE(problems[0].find("nightly.yml differs"), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find("at line " + std::to_string(line) + ":"), std::string::npos)
      << problems[0];
  const std::string indent(10, ' ');
  EXPECT_NE(problems[0].find("committed: " + indent + "retention-days: 30"), std::string::npos)
      << problems[0];
  EXPECT_NE(problems[0].find("rendered:  " + indent + "retention-days: 14"), std::string::npos)
      << problems[0];

  // The command line tool, as the ctest drift test runs it, fails and says how to fix it.
  const auto r =
      test::run_command(std::string(DSV4_NIGHTLY_BIN) + " check --registry " +
                        test::quote(kRegistry) + " --workflows " + test::quote(dir.path()));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("differs from the rendering"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("dsv4-nightly render"), std::string::npos) << r.output;

  test::write_file(dir / "nightly.yml", yml);
  const auto ok =
      test::run_command(std::string(DSV4_NIGHTLY_BIN) + " check --registry " +
                        test::quote(kRegistry) + " --workflows " + test::quote(dir.path()));
  EXPECT_EQ(ok.code, 0) << ok.output;
}

TEST(Drift, SuiteWithoutJobIsCaught) {
  const Registry reg = committed();
  const std::string yml = render_nightly(reg);
  const std::string& victim = reg.suites.front().name;
  const std::string job = job_block(yml, victim);
  ASSERT_FALSE(job.empty());
  const std::string edited = replace_once(yml, job, "");
  const auto problems = check_jobs(reg, Schedule::kNightly, edited);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("suite '" + victim + "' is registered"), std::string::npos)
      << problems[0];
  EXPECT_NE(problems[0].find("no job"), std::string::npos) << problems[0];
}

TEST(Drift, JobForUnregisteredSuiteIsCaught) {
  const Registry reg = committed();
  const std::string yml = render_nightly(reg);
  const std::string ghost =
      "  e2e-ghost:\n    runs-on: linux-mi35x-gpu-8\n    steps:\n"
      "      - run: nightly/run-suite e2e-ghost --out out/nightly/e2e-ghost\n";
  const std::string edited = replace_once(yml, "  report:\n", ghost + "  report:\n");
  const auto problems = check_jobs(reg, Schedule::kNightly, edited);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("job 'e2e-ghost' runs suite 'e2e-ghost', which is not registered"),
            std::string::npos)
      << problems[0];

  const std::string idle = "  lint:\n    runs-on: ubuntu-latest\n    steps:\n      - run: true\n";
  const auto p2 =
      check_jobs(reg, Schedule::kNightly, replace_once(yml, "  report:\n", idle + "  report:\n"));
  ASSERT_EQ(p2.size(), 1u);
  EXPECT_NE(p2[0].find("job 'lint' runs no suite"), std::string::npos) << p2[0];
}

TEST(Drift, MissingWorkflowIsCaught) {
  const Registry reg = committed();
  test::TempDir dir;
  render_into(reg, dir.path());
  std::filesystem::remove(dir / "pr.yml");
  const auto problems = check_dir(reg, dir.path());
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("pr.yml is missing"), std::string::npos) << problems[0];
}

// Runs the report job's script (Python) with the given `needs` results and event.
test::CommandResult run_report(const std::string& needs, const std::string& event,
                               std::string& summary) {
  const std::string yml = render_nightly(committed());
  const size_t at =
      yml.find("        run: |\n", yml.find("shell: python", yml.find("\n  report:\n")));
  EXPECT_NE(at, std::string::npos);
  std::string script;
  std::istringstream in(yml.substr(at + 15));
  for (std::string line; std::getline(in, line);)
    script += line.substr(std::min<size_t>(10, line.size())) + "\n";
  test::TempDir dir;
  test::write_file(dir / "report.py", script);
  const auto r = test::run_command("NEEDS=" + test::quote(needs) + " GITHUB_EVENT_NAME=" + event +
                                   " GITHUB_STEP_SUMMARY=" + test::quote(dir / "summary.md") +
                                   " python3 " + test::quote(dir / "report.py"));
  summary = test::read_file(dir / "summary.md");
  return r;
}

TEST(ReportJob, FailsWhenASuiteFailedOrWasCancelled) {
  std::string summary;
  auto r = run_report(R"({"a": {"result": "success"}, "b": {"result": "failure"}})", "schedule",
                      summary);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("b=failure"), std::string::npos) << r.output;
  EXPECT_NE(summary.find("| b | failure |"), std::string::npos) << summary;

  r = run_report(R"({"a": {"result": "cancelled"}})", "workflow_dispatch", summary);
  EXPECT_EQ(r.code, 1) << r.output;

  r = run_report(R"({"a": {"result": "success"}, "b": {"result": "skipped"}})", "workflow_dispatch",
                 summary);
  EXPECT_EQ(r.code, 0) << r.output;  // the job filter skipped b

  r = run_report(R"({"a": {"result": "success"}, "b": {"result": "skipped"}})", "schedule",
                 summary);
  EXPECT_EQ(r.code, 1) << "a scheduled run that skips a suite must fail: " << r.output;
}

}  // namespace
}  // namespace dsv4::nightly

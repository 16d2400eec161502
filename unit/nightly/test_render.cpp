// Workflow rendering and the drift check: a hand edit, a suite without a job, a job for an
// unregistered suite are each caught; dormant presets and tests are found (the jobs' structure:
// test_render_jobs.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "helpers.hpp"
#include "registry.hpp"
#include "render.hpp"
#include "render_helpers.hpp"

namespace dsv4::nightly {
namespace {

using test::committed;
using test::kRegistry;
using test::render_reusable;
using test::rendered;

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

// Counts `needle` in `text`.
size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(Render, OneReusableWorkflowWithAJobPerSuiteGroupAndAReportJob) {
  const Registry reg = committed();
  const std::string a = render_reusable(reg), b = render_reusable(reg);
  EXPECT_EQ(a, b);
  EXPECT_TRUE(check_jobs(reg, a).empty());
  EXPECT_NE(a.find("on:\n  workflow_call:\n    inputs:\n"), std::string::npos) << a;
  // What the fleet that owns the runners passes: runner labels, images, model cache, SGLang.
  for (const char* input :
       {"      schedule:", "      suites:", "      dsv4_repository:", "      dsv4_ref:",
        "      runs_on_mi35x_8:", "      kernels_image:", "      e2e_image:", "      model_cache:",
        "      sglang_repository:", "      sglang_ref:", "      sglang_install:"})
    EXPECT_NE(a.find(std::string(input) + "\n"), std::string::npos) << input;
  EXPECT_NE(a.find("        default: linux-mi35x-gpu-8\n"), std::string::npos);
  EXPECT_NE(a.find("        default: " + reg.nightly.hf_cache.host_path + "\n"), std::string::npos);
  EXPECT_EQ(a.find("github.repository =="), std::string::npos)
      << "the guard belongs to the caller, whose repository it is";
  for (const auto& s : reg.suites) {
    const std::string job = job_block(a, s.job);
    ASSERT_FALSE(job.empty()) << "no job " << s.job;
    EXPECT_NE(job.find("nightly/run-suite " + s.name + " --out \"$GITHUB_WORKSPACE/"),
              std::string::npos)
        << job;
    // The container as the AMD fleets run it: no container key, this pod's GPUs, VRAM cleared
    // first, docker exec, an always() teardown.
    EXPECT_EQ(job.find("    container:"), std::string::npos) << job;
    EXPECT_NE(job.find("ci/gpu-container.sh clear-vram --vendor amd"), std::string::npos) << job;
    EXPECT_NE(job.find("ci/gpu-container.sh start --vendor amd"), std::string::npos) << job;
    EXPECT_NE(job.find("ci/gpu-container.sh exec \"$DSV4_CONTAINER\""), std::string::npos) << job;
    EXPECT_LT(job.find("clear-vram"), job.find("gpu-container.sh start")) << job;
    EXPECT_NE(job.find("if: always()\n        timeout-minutes: 5\n        run: bash "
                       "ci/gpu-container.sh stop"),
              std::string::npos)
        << job;
    EXPECT_NE(job.find("repository: ${{ inputs.dsv4_repository }}"), std::string::npos) << job;
    EXPECT_NE(job.find("runs-on: ${{ inputs." +
                       std::string(s.runner == "mi300-8" ? "runs_on_mi300_8" : "runs_on_mi35x_8") +
                       " }}\n"),
              std::string::npos)
        << job;
    EXPECT_NE(
        job.find("if: inputs.schedule == '" +
                 std::string(s.schedule == Schedule::kWeekly ? "weekly" : "nightly") + "' && ("),
        std::string::npos)
        << job;
    EXPECT_NE(job.find("name: dsv4-" + s.name + "-attempt${{ github.run_attempt }}"),
              std::string::npos)
        << job;
    EXPECT_NE(job.find("'," + s.name + ",'"), std::string::npos) << "job filter: " << job;
    // Every step has its own time limit.
    EXPECT_EQ(count(job, "      - name:"), count(job, "        timeout-minutes:")) << job;
    EXPECT_EQ(job.find("--ipc"), std::string::npos) << job;
    // The Docker Hub login reads the secrets the inputs name (SGLang's by default).
    EXPECT_NE(job.find("DOCKERHUB_TOKEN: ${{ secrets[inputs.dockerhub_token_secret] }}"),
              std::string::npos)
        << job;
    EXPECT_NE(job.find("IMAGE: ${{ needs.preflight.outputs.image_"), std::string::npos) << job;
    if (s.kind == Kind::kE2e) {
      EXPECT_NE(job.find("needs: [preflight, tools]"), std::string::npos) << job;
      EXPECT_NE(job.find("HF_TOKEN: ${{ secrets.HF_TOKEN }}"), std::string::npos) << job;
      EXPECT_NE(job.find("--hf-cache \"$MODEL_CACHE:" + reg.nightly.hf_cache.mount),
                std::string::npos)
          << job;
      EXPECT_NE(job.find("MODEL_CACHE: ${{ inputs.model_cache }}"), std::string::npos) << job;
      EXPECT_NE(job.find("repository: ${{ inputs.sglang_repository }}"), std::string::npos) << job;
      EXPECT_NE(a.find("resolve-image \"$PATTERN\" sglang --days 7 --not-before " +
                       s.container.not_before),
                std::string::npos)
          << "the preflight resolves the image";
      // Nothing is pulled or installed before the model cache is known to hold the snapshots;
      // SGLang is fetched at depth 1 at the commit the preflight resolved.
      EXPECT_LT(job.find("bash ci/model-cache.sh \"$MODEL_CACHE/hf-cache\" " + s.server.model),
                job.find("path: sglang"))
          << job;
      EXPECT_NE(job.find("ref: ${{ needs.preflight.outputs.sglang_commit }}\n          path: "
                         "sglang\n          fetch-depth: 1\n"),
                std::string::npos)
          << job;
      EXPECT_EQ(job.find("fetch-depth: 0"), std::string::npos) << job;
      // The Dockerfile stage, GPU arch and extras come from the image (its GPU_ARCH), not from
      // the workflow.
      EXPECT_NE(job.find("bash ci/sglang-install.sh sglang\n"), std::string::npos) << job;
      EXPECT_EQ(job.find("--stage gfx950"), std::string::npos) << job;
      EXPECT_NE(job.find("sglang-install.sh sglang --image-from-commit"), std::string::npos);
      EXPECT_NE(job.find("-e DSV4_SGLANG_COMMIT=\"$(git -C sglang rev-parse HEAD)\""),
                std::string::npos)
          << job;
      // Re-run failed jobs: the run's tools bundle has one name whatever the attempt.
      EXPECT_NE(job.find("          name: dsv4-tools\n"), std::string::npos) << job;
    } else {
      EXPECT_NE(job.find(s.build.ship ? "needs: [preflight, build-" + s.build.preset + "]"
                                      : "needs: preflight\n"),
                std::string::npos)
          << job;
      // Case files land in the uploaded folder: an absolute DSV4_CASE_DIR.
      EXPECT_NE(job.find("-e DSV4_CASE_DIR=\"$GITHUB_WORKSPACE/$DSV4_ARTIFACTS/cases\""),
                std::string::npos)
          << job;
      EXPECT_NE(job.find("timeout-minutes: " + std::to_string(s.timeout_minutes) + "\n"),
                std::string::npos)
          << job;
    }
    EXPECT_NE(a.find("      - " + s.job + "\n"), std::string::npos) << "report needs " << s.job;
  }
  // Both FlashMLA backends: two steps of one job with one setup; the second runs after a failed
  // first, and the job's limit covers both.
  const std::string mtp = job_block(a, "e2e-v4pro-mtp");
  EXPECT_EQ(count(mtp, "nightly/run-suite "), 2u) << mtp;
  EXPECT_EQ(count(mtp, "sglang-install.sh sglang\n"), 1u) << mtp;
  EXPECT_LT(mtp.find("run-suite e2e-v4pro-mtp-ukv"), mtp.find("run-suite e2e-v4pro-mtp-triton"));
  EXPECT_NE(mtp.find("if: ${{ !cancelled() && (inputs.suites == 'all' || "
                     "contains(format(',{0},', inputs.suites), ',e2e-v4pro-mtp-triton,')) }}"),
            std::string::npos)
      << mtp;
  const Suite* ukv = reg.find("e2e-v4pro-mtp-ukv");
  const Suite* triton = reg.find("e2e-v4pro-mtp-triton");
  EXPECT_NE(mtp.find("timeout-minutes: " +
                     std::to_string(ukv->timeout_minutes + triton->timeout_minutes - 30) + "\n"),
            std::string::npos)
      << mtp;
  // The weekly ASan suite qualifies GPU ASan after its build and before the suite.
  const std::string asan = job_block(a, "kernels-mi35x-asan");
  EXPECT_LT(asan.find("Configure and build"), asan.find("bash ci/asan-qualify.sh --install"));
  EXPECT_LT(asan.find("bash ci/asan-qualify.sh"), asan.find("nightly/run-suite"));
  // The gfx942 code runs nightly on SGLang's 8-GPU MI300 runners.
  const std::string mi300 = job_block(a, "kernels-mi300");
  EXPECT_NE(mi300.find("runs-on: ${{ inputs.runs_on_mi300_8 }}\n"), std::string::npos) << mi300;
  EXPECT_NE(mi300.find("if: inputs.schedule == 'nightly'"), std::string::npos) << mi300;
  EXPECT_NE(a.find("      runs_on_mi300_8:\n        description: \"Runner label of the mi300-8 "
                   "suites (amd GPUs)\"\n        type: string\n        required: false\n"
                   "        default: linux-mi300-8gpu-sglang\n"),
            std::string::npos);
  // The torch interop tests run where torch is, with their junit in the artifact.
  const std::string kernels = job_block(a, "kernels-mi35x");
  EXPECT_NE(kernels.find("bash -c 'bash ci/torch-interop.sh build/hip "
                         "$GITHUB_WORKSPACE/out/nightly/kernels-mi35x/torch-interop'"),
            std::string::npos)
      << kernels;
  // The tools bundle: one per run, overwritten by a re-run of the tools job.
  const std::string tools = job_block(a, "tools");
  EXPECT_NE(tools.find("name: dsv4-tools\n          path: dist/dsv4-tools.tar.gz"),
            std::string::npos)
      << tools;
  EXPECT_NE(tools.find("overwrite: true"), std::string::npos) << tools;
  // The report: every attempt's artifacts, the jobs' results for the triage, dormant tests.
  const std::string report = job_block(a, "report");
  EXPECT_NE(report.find("pattern: dsv4-*-attempt*\n"), std::string::npos) << report;
  const size_t triage = report.find("dsv4-nightly triage --registry nightly/suites.json");
  ASSERT_NE(triage, std::string::npos) << report;
  const size_t triage_step = report.rfind("      - name:", triage);
  EXPECT_NE(report.substr(triage_step, triage - triage_step).find("NEEDS: ${{ toJSON(needs) }}"),
            std::string::npos)
      << "the triage step does not see the jobs' results: " << report;
  EXPECT_NE(report.find("dsv4-nightly dormant"), std::string::npos) << report;
  EXPECT_NE(report.find("for w in $DORMANCY_WORKFLOWS; do"), std::string::npos) << report;
  EXPECT_NE(a.find("      dormancy_workflows:\n"), std::string::npos);
  EXPECT_NE(a.find("        default: \"nightly weekly pr\"\n"), std::string::npos);
  EXPECT_NE(report.find("GH_REPO: ${{ github.repository }}"), std::string::npos) << report;
  EXPECT_NE(report.find("--limit " + std::to_string(reg.nightly.triage_runs)), std::string::npos);

  // This repository's scheduled callers.
  const std::string nightly = rendered(reg, "nightly.yml");
  EXPECT_NE(nightly.find("  schedule:\n    - cron: \"" + reg.nightly.cron + "\""),
            std::string::npos);
  EXPECT_NE(nightly.find("  workflow_dispatch:"), std::string::npos);
  EXPECT_NE(nightly.find("format('dispatch-{0}', github.run_id)"), std::string::npos)
      << "a concurrency group per dispatch";
  EXPECT_NE(nightly.find("    if: github.repository == '" + reg.nightly.repository + "'\n"),
            std::string::npos)
      << nightly;
  EXPECT_NE(nightly.find("    uses: ./.github/workflows/nightly-suites.yml\n"), std::string::npos);
  EXPECT_NE(nightly.find("      schedule: nightly\n"), std::string::npos) << nightly;
  EXPECT_NE(nightly.find("    secrets: inherit\n"), std::string::npos) << nightly;
  const std::string weekly = rendered(reg, "weekly.yml");
  EXPECT_NE(weekly.find("      schedule: weekly\n"), std::string::npos) << weekly;
  EXPECT_NE(weekly.find("    - cron: \"" + reg.nightly.weekly_cron + "\""), std::string::npos);
  // Failed jobs of a scheduled run are re-run once, when the verdict says so.
  const std::string retry = rendered(reg, "auto-retry.yml");
  EXPECT_NE(retry.find("workflows: [nightly, weekly]"), std::string::npos) << retry;
  EXPECT_NE(retry.find("gh run rerun \"$RUN_ID\" --failed"), std::string::npos) << retry;
  EXPECT_NE(retry.find("github.event.workflow_run.run_attempt == 1"), std::string::npos) << retry;
  EXPECT_LT(retry.find("gh run download \"$RUN_ID\" --name dsv4-verdict-attempt1"),
            retry.find("gh run rerun"))
      << retry;

  const std::string pr = rendered(reg, "pr.yml");
  EXPECT_NE(pr.find("run: " + reg.pr.test_command + "\n"), std::string::npos) << pr;
  EXPECT_NE(pr.find("bash ci/actionlint.sh\n"), std::string::npos) << pr;
  EXPECT_NE(pr.find("bash ci/shellcheck.sh\n"), std::string::npos) << pr;
  EXPECT_NE(pr.find("cmake --preset " + reg.pr.hip_preset), std::string::npos) << pr;
  EXPECT_NE(pr.find("start --no-gpu \"$DSV4_CONTAINER\" \"" + reg.pr.hip_image), std::string::npos)
      << pr;
}

// A registry can put a suite of a CTest label on another runner class (an NVIDIA one), weekly.
TEST(Render, ASuiteOfALabelOnAnotherRunnerClassWeekly) {
  nlohmann::json doc = nlohmann::json::parse(test::read_file(kRegistry));
  doc["nightly"]["runners"]["h200-1"] = {{"label", "linux-h200-gpu-1"}, {"vendor", "nvidia"}};
  nlohmann::json soak = doc["suites"][0];
  soak["name"] = "kernels-h200-soak";
  soak["runner"] = "h200-1";
  soak["schedule"] = "weekly";
  soak["build"] = {{"preset", "cuda"}};
  soak["ctest"].erase("test_preset");
  soak["ctest"]["test_dir"] = "build/cuda";
  soak["ctest"]["label"] = "soak";
  soak.erase("extra_steps");
  doc["suites"].push_back(soak);
  const Registry reg = parse_registry(doc, "soak.json");
  const std::string a = render_reusable(reg);
  const std::string job = job_block(a, "kernels-h200-soak");
  EXPECT_NE(job.find("runs-on: ${{ inputs.runs_on_h200_1 }}"), std::string::npos) << job;
  EXPECT_NE(job.find("if: inputs.schedule == 'weekly'"), std::string::npos) << job;
  EXPECT_NE(job.find("clear-vram --vendor nvidia"), std::string::npos) << job;
  EXPECT_NE(job.find("start --vendor nvidia"), std::string::npos) << job;
  EXPECT_NE(a.find("      runs_on_h200_1:\n"), std::string::npos);
  EXPECT_NE(job_block(a, "report").find("      - kernels-h200-soak\n"), std::string::npos)
      << "the report needs the new job";
  EXPECT_TRUE(check_jobs(reg, a).empty());
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
  const std::string yml = test::read_file(dir / "nightly-suites.yml");
  const std::string edited = replace_once(yml, "retention-days: 14", "retention-days: 30");
  test::write_file(dir / "nightly-suites.yml", edited);
  const auto problems = check_dir(reg, dir.path());
  ASSERT_EQ(problems.size(), 1u);
  // the line of the first difference
  size_t line = 1;
  for (size_t i = 0; i < edited.find("retention-days: 30"); ++i) line += edited[i] == '\n';
  EXPECT_NE(problems[0].find("nightly-suites.yml differs"), std::string::npos) << problems[0];
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

  test::write_file(dir / "nightly-suites.yml", yml);
  const auto ok =
      test::run_command(std::string(DSV4_NIGHTLY_BIN) + " check --registry " +
                        test::quote(kRegistry) + " --workflows " + test::quote(dir.path()));
  EXPECT_EQ(ok.code, 0) << ok.output;
}

TEST(Drift, SuiteWithoutJobIsCaught) {
  const Registry reg = committed();
  const std::string yml = render_reusable(reg);
  const std::string& victim = reg.suites.front().name;
  const std::string job = job_block(yml, victim);
  ASSERT_FALSE(job.empty());
  const std::string edited = replace_once(yml, job, "");
  const auto problems = check_jobs(reg, edited);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("suite '" + victim + "' is registered"), std::string::npos)
      << problems[0];
  EXPECT_NE(problems[0].find("no job"), std::string::npos) << problems[0];
}

TEST(Drift, JobForUnregisteredSuiteIsCaught) {
  const Registry reg = committed();
  const std::string yml = render_reusable(reg);
  const std::string ghost =
      "  e2e-ghost:\n    runs-on: linux-mi35x-gpu-8\n    steps:\n"
      "      - run: nightly/run-suite e2e-ghost --out out/nightly/e2e-ghost\n";
  const std::string edited = replace_once(yml, "  report:\n", ghost + "  report:\n");
  const auto problems = check_jobs(reg, edited);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("job 'e2e-ghost' runs suite 'e2e-ghost', which is not registered"),
            std::string::npos)
      << problems[0];

  const std::string idle = "  lint:\n    runs-on: ubuntu-latest\n    steps:\n      - run: true\n";
  const auto p2 = check_jobs(reg, replace_once(yml, "  report:\n", idle + "  report:\n"));
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

// The rendered workflow as data (PyYAML, as ci/shellcheck.sh reads it), for structural checks.

}  // namespace
}  // namespace dsv4::nightly

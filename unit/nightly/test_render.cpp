// Workflow rendering and the drift check: a hand edit, a suite without a job, a job for an
// unregistered suite are each caught; the final report job fails on failed or cancelled suites.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

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

std::string render_reusable(const Registry& reg) { return rendered(reg, "nightly-suites.yml"); }

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
nlohmann::json workflow_json(const std::string& yml) {
  test::TempDir dir;
  test::write_file(dir / "w.yml", yml);
  const auto r = test::run_command(
      "python3 -c 'import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))' " +
      test::quote(dir / "w.yml"));
  EXPECT_EQ(r.code, 0) << r.output;
  return r.code == 0 ? nlohmann::json::parse(r.output) : nlohmann::json::object();
}

std::vector<std::string> needs_of(const nlohmann::json& job) {
  if (!job.contains("needs")) return {};
  if (job["needs"].is_string()) return {job["needs"].get<std::string>()};
  return job["needs"].get<std::vector<std::string>>();
}

// A kernels suite with ctest.sglang_source judges the night's SGLang: its job checks out SGLang
// at depth 1 at the commit the preflight resolved from the sglang_ref input, before the suite's
// step, which hands the checkout (at the container's path of the workspace) and its commit in.
TEST(SglangSource, TheJobChecksOutSglangAtTheRefAndPassesItToTheSuite) {
  const Registry reg = committed();
  const nlohmann::json w = workflow_json(render_reusable(reg));
  ASSERT_TRUE(w.contains("jobs"));
  bool preflight_resolves_ref = false;
  for (const auto& step : w["jobs"]["preflight"]["steps"])
    if (step.value("id", "") == "sglang")
      preflight_resolves_ref =
          step["env"].value("REF", "") == "${{ inputs.sglang_ref }}" &&
          step["env"].value("REPOSITORY", "") == "${{ inputs.sglang_repository }}" &&
          step.value("run", "").find("commit=$commit") != std::string::npos;
  EXPECT_TRUE(preflight_resolves_ref) << w["jobs"]["preflight"].dump(2);
  int judged = 0;
  for (const auto& s : reg.suites) {
    if (s.kind != Kind::kKernels) continue;
    const auto& job = w["jobs"][s.job];
    ASSERT_TRUE(job.is_object()) << s.job;
    long checkout = -1, suite = -1, i = 0;
    std::string run;
    for (const auto& step : job["steps"]) {
      if (step.value("uses", "").rfind("actions/checkout@", 0) == 0 &&
          step["with"].value("path", "") == "sglang") {
        checkout = i;
        EXPECT_EQ(step["with"].value("repository", ""), "${{ inputs.sglang_repository }}");
        EXPECT_EQ(step["with"].value("ref", ""), "${{ needs.preflight.outputs.sglang_commit }}");
        EXPECT_EQ(step["with"].value("fetch-depth", 0), 1) << step.dump();
      }
      if (step.value("run", "").find("nightly/run-suite " + s.name + " ") != std::string::npos)
        suite = i, run = step["run"];
      ++i;
    }
    ASSERT_GE(suite, 0) << s.name;
    const bool src = run.find("-e DSV4_SGLANG_SRC=\"$DSV4_WORKDIR/sglang\"") < run.find(" -- ");
    const bool commit =
        run.find("-e DSV4_SGLANG_COMMIT=\"$(git -C sglang rev-parse HEAD)\"") < run.find(" -- ");
    if (!s.ctest.sglang_source) {
      EXPECT_EQ(checkout, -1) << s.name << ": no SGLang checkout for a suite that imports none";
      EXPECT_FALSE(src || commit) << run;
      continue;
    }
    ++judged;
    EXPECT_GE(checkout, 0) << s.name;
    EXPECT_LT(checkout, suite) << s.name;
    EXPECT_TRUE(src) << run;
    EXPECT_TRUE(commit) << run;
    // The container mounts the workspace at DSV4_WORKDIR, where the checkout then lies.
    EXPECT_EQ(job["env"].value("DSV4_WORKDIR", ""), "/dsv4-ci");
    bool mounted = false;
    for (const auto& step : job["steps"])
      mounted = mounted || step.value("run", "").find(
                               "start --vendor amd --workdir "
                               "\"$DSV4_WORKDIR\"") != std::string::npos;
    EXPECT_TRUE(mounted) << s.name;
    const auto needs = needs_of(job);
    EXPECT_NE(std::find(needs.begin(), needs.end(), "preflight"), needs.end()) << s.name;
  }
  EXPECT_EQ(judged, 1) << "sglang-kernels";
  const Suite* sk = nullptr;
  for (const auto& s : reg.suites)
    if (s.name == "sglang-kernels") sk = &s;
  ASSERT_NE(sk, nullptr);
  EXPECT_TRUE(sk->ctest.sglang_source);
}

// "Re-run failed jobs" starts new attempts of the failed jobs only: every artifact they download
// must be found by run id (any attempt's), and the bundle must come from a job that is not re-run
// with them (the tools job, which they need) under a name that does not depend on the attempt.
TEST(Rerun, EveryDownloadFindsAnyAttemptsArtifactsOfTheRun) {
  const nlohmann::json w = workflow_json(render_reusable(committed()));
  ASSERT_TRUE(w.contains("jobs"));
  int tools_downloads = 0, downloads = 0;
  std::string tools_name;
  for (const auto& step : w["jobs"]["tools"]["steps"])
    if (step.value("uses", "").rfind("actions/upload-artifact@", 0) == 0) {
      tools_name = step["with"]["name"];
      EXPECT_EQ(step["with"].value("overwrite", false), true) << step.dump();
    }
  ASSERT_FALSE(tools_name.empty());
  EXPECT_EQ(tools_name.find("${{"), std::string::npos) << "the bundle's name names no attempt";
  for (const auto& [id, job] : w["jobs"].items()) {
    for (const auto& step : job.value("steps", nlohmann::json::array())) {
      if (step.value("uses", "").rfind("actions/download-artifact@", 0) != 0) continue;
      ++downloads;
      const auto& with = step["with"];
      EXPECT_EQ(with.value("run-id", ""), "${{ github.run_id }}") << id << ": " << step.dump();
      EXPECT_EQ(with.value("github-token", ""), "${{ github.token }}") << id << ": " << step.dump();
      if (with.value("name", "") == tools_name) {
        ++tools_downloads;
        const auto needs = needs_of(job);
        EXPECT_NE(std::find(needs.begin(), needs.end(), "tools"), needs.end()) << id;
      }
    }
  }
  EXPECT_EQ(tools_downloads, 4) << "three e2e jobs and the report";
  // The shipped build: one per run under one name, uploaded by the job its suites need.
  int build_downloads = 0;
  for (const auto& [id, job] : w["jobs"].items())
    for (const auto& step : job.value("steps", nlohmann::json::array()))
      if (step.value("uses", "").rfind("actions/download-artifact@", 0) == 0 &&
          step["with"].value("name", "") == "dsv4-build-hip") {
        ++build_downloads;
        const auto needs = needs_of(job);
        EXPECT_NE(std::find(needs.begin(), needs.end(), "build-hip"), needs.end()) << id;
      }
  EXPECT_EQ(build_downloads, 3) << "kernels-mi35x, kernels-mi300, soak-mi35x";
  for (const auto& step : w["jobs"]["build-hip"]["steps"])
    if (step.value("uses", "").rfind("actions/upload-artifact@", 0) == 0) {
      EXPECT_EQ(step["with"].value("name", ""), "dsv4-build-hip") << step.dump();
      EXPECT_EQ(step["with"].value("overwrite", false), true) << step.dump();
    }
  EXPECT_EQ(downloads, 8);
  // The token reads artifacts: the callers grant actions: read.
  for (const char* caller : {"nightly.yml", "weekly.yml", "callers/dsv4-nightly.yml"}) {
    const nlohmann::json c = workflow_json(rendered(committed(), caller));
    EXPECT_EQ(c["permissions"].value("actions", ""), "read") << caller;
  }
}

// Nothing that needs no GPU node is checked on one: every GPU job needs the preflight, which
// runs on the hosted runner and checks the suites, the pin, the SGLang ref and each image.
TEST(Preflight, GpuJobsNeedItAndItRunsOnTheHostedRunner) {
  const Registry reg = committed();
  const nlohmann::json w = workflow_json(render_reusable(reg));
  const auto& pre = w["jobs"]["preflight"];
  EXPECT_EQ(pre["runs-on"], "${{ inputs.tools_runs_on }}");
  std::string runs;
  for (const auto& step : pre["steps"]) runs += step.value("run", "") + "\n";
  EXPECT_NE(runs.find("bash ci/preflight.sh suites nightly/suites.json"), std::string::npos);
  EXPECT_NE(runs.find("bash ci/preflight.sh pin "), std::string::npos);
  EXPECT_NE(runs.find("bash ci/preflight.sh sglang-ref"), std::string::npos);
  for (const auto& s : reg.suites) {
    const auto needs = needs_of(w["jobs"][s.job]);
    EXPECT_NE(std::find(needs.begin(), needs.end(), "preflight"), needs.end()) << s.job;
    const std::string out = "image_" + std::regex_replace(s.job, std::regex("-"), "_");
    EXPECT_TRUE(pre["outputs"].contains(out)) << out;
  }
}

// The pin: the fingerprint the preflight checks is the one ci/preflight.sh computes from this
// checkout; a checkout of another revision fails it.
TEST(Preflight, PinMatchesThisCheckoutAndRefusesAnother) {
  const std::string yml = render_reusable(committed());
  std::smatch m;
  ASSERT_TRUE(std::regex_search(yml, m, std::regex("ci/preflight.sh pin ([0-9a-f]{64})")));
  const std::string sha = m[1];
  auto r = test::run_command("bash " DSV4_SOURCE_DIR "/ci/preflight.sh pin " + sha);
  EXPECT_EQ(r.code, 0) << r.output;
  r = test::run_command("bash " DSV4_SOURCE_DIR "/ci/preflight.sh pin " + std::string(64, '0'));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("pin the caller's 'uses: ...@REF' and 'dsv4_ref' to the same ref"),
            std::string::npos)
      << r.output;
  // The shipped callers pin both to one ref, and carry a concurrency group.
  for (const char* caller : {"callers/dsv4-nightly.yml", "callers/dsv4-weekly.yml"}) {
    const nlohmann::json c = workflow_json(rendered(committed(), caller));
    const auto& job = c["jobs"]["dsv4"];
    const std::string uses = job["uses"];
    EXPECT_EQ(uses.substr(uses.rfind('@') + 1), job["with"]["dsv4_ref"].get<std::string>())
        << caller;
    EXPECT_TRUE(c.contains("concurrency")) << caller;
    EXPECT_EQ(c["concurrency"].value("cancel-in-progress", true), false) << caller;
  }
  EXPECT_NE(rendered(committed(), "callers/dsv4-weekly.yml").find("schedule: weekly"),
            std::string::npos);
}

// The runs of a job's steps, in order.
std::vector<std::string> runs_of(const nlohmann::json& job) {
  std::vector<std::string> runs;
  for (const auto& step : job.value("steps", nlohmann::json::array()))
    runs.push_back(step.value("run", ""));
  return runs;
}

// The index of the first step whose run (or uses) matches `re`; -1 when none does.
int step_index(const nlohmann::json& job, const std::string& re) {
  const std::regex r(re);
  int i = 0;
  for (const auto& step : job.value("steps", nlohmann::json::array())) {
    if (std::regex_search(step.value("run", ""), r) || std::regex_search(step.value("uses", ""), r))
      return i;
    ++i;
  }
  return -1;
}

// A preset shipped to GPU jobs is built once per run, by its build job, in the suites' image at
// the fixed container path; the jobs that run it need that job, download its build, unpack and
// verify it at the same path, and build nothing.
TEST(ShippedBuild, GpuJobsNeedTheBuildJobDownloadItAndBuildNothing) {
  const Registry reg = committed();
  const nlohmann::json w = workflow_json(render_reusable(reg));
  ASSERT_TRUE(w.contains("jobs"));
  const std::regex any_build(R"(cmake\s+--build)");
  // How often each preset is built across the whole workflow.
  std::map<std::string, int> builds;
  for (const auto& [id, job] : w["jobs"].items())
    for (const auto& run : runs_of(job)) {
      static const std::regex build_re(R"(cmake\s+--build\s+--preset\s+([A-Za-z0-9_-]+))");
      for (std::sregex_iterator m(run.begin(), run.end(), build_re), e; m != e; ++m)
        ++builds[(*m)[1].str() + " in " + id];
    }
  std::set<std::string> shipped;
  for (const auto& s : reg.suites) {
    const auto& job = w["jobs"][s.job];
    if (!s.build.ship) {
      // Built in the job itself (asan: its only suite; sglang-kernels: a cpu target).
      if (s.kind == Kind::kKernels) {
        EXPECT_EQ(builds[s.build.preset + " in " + s.job], 1) << s.job;
      }
      continue;
    }
    shipped.insert(s.build.preset);
    const std::string build_job = "build-" + s.build.preset;
    const auto needs = needs_of(job);
    EXPECT_NE(std::find(needs.begin(), needs.end(), build_job), needs.end()) << s.job;
    EXPECT_NE(std::find(needs.begin(), needs.end(), "preflight"), needs.end()) << s.job;
    for (const auto& run : runs_of(job))
      EXPECT_FALSE(std::regex_search(run, any_build)) << s.job << ": " << run;
    int download = -1, i = 0;
    for (const auto& step : job["steps"]) {
      if (step.value("uses", "").rfind("actions/download-artifact@", 0) == 0 &&
          step["with"].value("name", "") == "dsv4-build-" + s.build.preset) {
        download = i;
        EXPECT_EQ(step["with"].value("run-id", ""), "${{ github.run_id }}");
        EXPECT_EQ(step["with"].value("github-token", ""), "${{ github.token }}");
        EXPECT_EQ(step["with"].value("path", ""), "dist");
      }
      ++i;
    }
    ASSERT_GE(download, 0) << s.job << " downloads no build";
    const int start = step_index(job, "gpu-container.sh start ");
    const int setup = step_index(job, "echo \"done=true\"");
    const int unpack = step_index(job, "bash ci/ship-build.sh unpack dist/dsv4-build-" +
                                           s.build.preset + "\\.tar\\.gz " + s.build.preset + "$");
    const int suite = step_index(job, "nightly/run-suite " + s.name);
    // Downloaded before the image is pulled; unpacked and verified after the setup, before the
    // suite; run where it was built.
    EXPECT_LT(download, start) << s.job;
    EXPECT_LT(setup, unpack) << s.job;
    ASSERT_GE(unpack, 0) << s.job;
    EXPECT_LT(unpack, suite) << s.job;
    EXPECT_NE(job["steps"][start].value("run", "").find("--workdir \"$DSV4_WORKDIR\""),
              std::string::npos)
        << s.job;
    EXPECT_EQ(job["env"].value("DSV4_WORKDIR", ""),
              w["jobs"][build_job]["env"].value("DSV4_WORKDIR", ""));
    EXPECT_EQ(job["env"].value("DSV4_WORKDIR", "").rfind('/', 0), 0u) << "an absolute path";
    // The build job runs whenever this suite does.
    EXPECT_NE(w["jobs"][build_job].value("if", "").find("'," + s.name + ",'"), std::string::npos)
        << w["jobs"][build_job].dump();
  }
  ASSERT_FALSE(shipped.empty()) << "the committed registry ships no build";
  for (const auto& preset : shipped) {
    const std::string id = "build-" + preset;
    const auto& job = w["jobs"][id];
    ASSERT_TRUE(job.is_object()) << "no job " << id;
    // Built once in the whole workflow, by this job, and packed with its manifest.
    int total = 0;
    for (const auto& [k, n] : builds)
      if (k.rfind(preset + " in ", 0) == 0) total += n;
    EXPECT_EQ(total, 1) << preset;
    EXPECT_EQ(builds[preset + " in " + id], 1) << preset;
    EXPECT_LT(step_index(job, "cmake --build --preset " + preset),
              step_index(job, "ci/ship-build.sh pack " + preset + " dist/dsv4-build-" + preset))
        << id;
    EXPECT_EQ(needs_of(job), std::vector<std::string>{"preflight"}) << id;
    // In the image the suites run, resolved by the preflight whenever the build runs; no GPU.
    const auto& pre = w["jobs"]["preflight"];
    EXPECT_EQ(pre["outputs"].value("image_build_" + preset, ""),
              "${{ steps.image_build_" + preset + ".outputs.image }}");
    const int start =
        step_index(job, "gpu-container.sh start --no-gpu --workdir \"\\$DSV4_WORKDIR\"");
    ASSERT_GE(start, 0) << job.dump();
    EXPECT_EQ(job["steps"][start]["env"].value("IMAGE", ""),
              "${{ needs.preflight.outputs.image_build_" + preset + " }}");
    EXPECT_EQ(job.value("runs-on", ""), "${{ inputs.build_runs_on || inputs.runs_on_mi35x_8 }}");
    EXPECT_EQ(job["outputs"].value("setup", ""), "${{ steps.setup.outputs.done }}");
    // The report waits for it and judges it.
    const auto report_needs = needs_of(w["jobs"]["report"]);
    EXPECT_NE(std::find(report_needs.begin(), report_needs.end(), id), report_needs.end());
  }
  EXPECT_TRUE(check_jobs(reg, render_reusable(reg)).empty());
}

// Runs the report job's verdict step as rendered (its `run:`), in a folder laid out as the job's.
test::CommandResult run_verdict(const std::string& needs, const std::string& event,
                                std::string& summary) {
  const nlohmann::json w = workflow_json(render_reusable(committed()));
  std::string run;
  for (const auto& step : w["jobs"]["report"]["steps"])
    if (step.value("run", "").find("nightly-verdict.py") != std::string::npos) run = step["run"];
  EXPECT_FALSE(run.empty());
  test::TempDir dir;
  std::filesystem::create_directory_symlink(DSV4_SOURCE_DIR "/ci", dir / "ci");
  std::filesystem::create_directory_symlink(DSV4_SOURCE_DIR "/nightly", dir / "nightly");
  std::filesystem::create_directories(dir / "triage/current");
  const auto r =
      test::run_command("cd " + test::quote(dir.path()) + " && NEEDS=" + test::quote(needs) +
                        " SCHEDULE=nightly GITHUB_EVENT_NAME=" + event + " GITHUB_STEP_SUMMARY=" +
                        test::quote(dir / "summary.md") + " bash -c " + test::quote(run));
  summary = test::read_file(dir / "summary.md");
  return r;
}

TEST(ReportJob, NoGpuJobRanIsCouldNotRunOnEveryTrigger) {
  const Registry reg = committed();
  std::string skipped = R"({"preflight": {"result": "success"}, "tools": {"result": "success"})";
  std::string passed = skipped;
  for (const auto& s : reg.suites)
    if (s.schedule == Schedule::kNightly) {
      skipped += ", \"" + s.job + "\": {\"result\": \"skipped\"}";
      passed += ", \"" + s.job + "\": {\"result\": \"success\"}";
    }
  for (const char* event : {"workflow_dispatch", "schedule", "workflow_call"}) {
    std::string summary;
    const auto r = run_verdict(skipped + "}", event, summary);
    EXPECT_EQ(r.code, 3) << event << ": " << r.output;
    EXPECT_NE(summary.find("no GPU job of this schedule ran"), std::string::npos) << summary;
  }
  std::string summary;
  EXPECT_EQ(run_verdict(passed + "}", "schedule", summary).code, 0) << summary;
  // A failed job fails the run; the table names it.
  const auto r = run_verdict(
      std::regex_replace(passed, std::regex("\"kernels-mi35x\": \\{\"result\": \"success\"\\}"),
                         "\"kernels-mi35x\": {\"result\": \"failure\", \"outputs\": {\"setup\": "
                         "\"true\"}}") +
          "}",
      "schedule", summary);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(summary.find("| kernels-mi35x | failure | its build or qualification failed |"),
            std::string::npos)
      << summary;
  // A failed build of the shipped preset: the suites that need it are could-not-run, not passed.
  std::string no_build = passed;
  for (const char* job : {"kernels-mi35x", "kernels-mi300", "soak-mi35x"})
    no_build = std::regex_replace(
        no_build, std::regex("\"" + std::string(job) + "\": \\{\"result\": \"success\"\\}"),
        "\"" + std::string(job) + "\": {\"result\": \"skipped\"}");
  const auto b = run_verdict(
      no_build + R"(, "build-hip": {"result": "failure", "outputs": {"setup": "true"}}})",
      "schedule", summary);
  EXPECT_EQ(b.code, 1) << b.output;
  EXPECT_NE(summary.find("| build-hip | failure | the build of preset hip failed |"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find(
                "| soak-mi35x | skipped | could not run: the build it needs (build-hip) failed |"),
            std::string::npos)
      << summary;
}

}  // namespace
}  // namespace dsv4::nightly

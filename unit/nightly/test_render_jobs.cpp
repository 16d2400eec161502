// The reusable workflow's jobs read as parsed YAML: SGLang's checkout for the sglang-kernels suite,
// downloads that find any attempt's artifacts, the preflight, the shipped hip build, the report
// job's verdict when no GPU job ran.
#include <gtest/gtest.h>

#include <algorithm>
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
using test::render_reusable;
using test::rendered;

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

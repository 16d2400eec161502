// Renders the reusable workflow (a preflight job, a tools job, a build job per shipped preset, one
// job per suite or group of suites, a report job with the triage and the verdict), its callers,
// auto-retry.yml and pr.yml from the templates in nightly/templates/.
#include "render.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "run_suite.hpp"

namespace dsv4::nightly {

namespace {

const char* schedule_name(Schedule s) { return s == Schedule::kWeekly ? "weekly" : "nightly"; }

std::string workflow_name(const Registry& reg, Schedule s) {
  return s == Schedule::kNightly ? reg.nightly.name : "weekly";
}

std::string load_template(const std::string& dir, const std::string& name) {
  const std::string path = name.empty() ? dir : dir + "/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("workflow template '" + path + "' cannot be read");
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The SHA-256 of the registry file and the templates (by file name), as ci/preflight.sh pin
// computes it from a checkout: the reusable workflow carries it, so a run whose `uses: ...@REF`
// and `dsv4_ref` name different revisions stops before any GPU job.
std::string fingerprint(const Registry& reg, const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".yml") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  std::string bytes;
  std::ifstream in(reg.file, std::ios::binary);
  if (in) bytes.assign(std::istreambuf_iterator<char>(in), {});
  for (const auto& f : files) bytes += load_template(f, "");
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) out += {hex[md[i] >> 4], hex[md[i] & 15]};
  return out;
}

std::string selected(const std::string& suite) {
  return "contains(format(',{0},', inputs.suites), '," + suite + ",')";
}

std::string underscored(std::string s) {
  for (auto& c : s)
    if (c == '-') c = '_';
  return s;
}

std::string runner_input(const std::string& runner_class) {
  return underscored("runs_on_" + runner_class);
}

// The `if:` expression selecting a job of `suites` by the `suites` input.
std::string select_of(const std::vector<const Suite*>& suites) {
  std::string select = "inputs.suites == 'all'";
  for (const Suite* x : suites) select += " || " + selected(x->name);
  return select;
}

// The preflight job's output with the image of a job (resolved and checked on a hosted runner).
std::string image_output(const Suite& s) { return underscored("image_" + s.job); }

// The fixed path inside the container where kernels and build jobs mount the workspace and run:
// CTest and the build tree hold absolute paths, so a build made in one job runs in another only
// at the path it was made at, whatever each runner's workspace.
constexpr const char* kWorkdir = "/dsv4-ci";

std::map<std::string, std::string> common_vars(const Registry& reg) {
  const NightlyWorkflow& n = reg.nightly;
  return {{"repository", n.repository},
          {"reusable", n.reusable},
          {"retention_days", std::to_string(n.retention_days)},
          {"tools_image", n.tools.image},
          {"tools_runs_on", n.tools.runs_on},
          {"max_glibc", n.tools.max_glibc},
          {"max_glibcxx", n.tools.max_glibcxx},
          {"report_runs_on", n.report_runs_on},
          {"triage_runs", std::to_string(n.triage_runs)},
          {"sglang_repository", n.sglang.repository},
          {"sglang_ref", n.sglang.ref},
          {"install_args", n.sglang.install_args.empty() ? "" : " " + n.sglang.install_args},
          {"hf_host", n.hf_cache.host_path},
          {"hf_mount", n.hf_cache.mount},
          {"hf_home", n.hf_cache.hf_home},
          {"caller_ref", n.caller_ref},
          {"dockerhub_username_secret", n.dockerhub_username_secret},
          {"dockerhub_token_secret", n.dockerhub_token_secret},
          {"workdir", kWorkdir}};
}

// The artifact of a shipped preset's build (one per run: re-run jobs find it by the run id).
std::string build_artifact(const std::string& preset) { return "dsv4-build-" + preset; }

// The suites of each shipped preset, by preset, in registry order of their first suite.
std::vector<std::vector<const Suite*>> shipped_builds(const Registry& reg) {
  std::vector<std::vector<const Suite*>> out;
  for (const auto& s : reg.suites) {
    if (!s.build.ship) continue;
    bool found = false;
    for (auto& b : out)
      if (b.front()->build.preset == s.build.preset) b.push_back(&s), found = true;
    if (!found) out.push_back({&s});
  }
  return out;
}

std::string targets_of(const Build& b) {
  std::string targets;
  for (const auto& t : b.targets) targets += (targets.empty() ? " --target " : " ") + t;
  return targets;
}

// The `if:` of a shipped preset's build: any of its suites runs (per schedule, the suites input
// selecting one of them).
std::string build_if(const std::vector<const Suite*>& suites) {
  std::string cond;
  for (const Schedule sch : {Schedule::kNightly, Schedule::kWeekly}) {
    std::vector<const Suite*> of;
    for (const Suite* x : suites)
      if (x->schedule == sch) of.push_back(x);
    if (of.empty()) continue;
    cond += std::string(cond.empty() ? "" : " || ") + "(inputs.schedule == '" + schedule_name(sch) +
            "' && (" + select_of(of) + "))";
  }
  return cond;
}

// The job that builds a shipped preset once, for every suite that ships it, in their image.
std::string build_job_text(const std::string& dir, const Registry& reg,
                           const std::vector<const Suite*>& suites) {
  const Suite& s = *suites.front();
  auto v = common_vars(reg);
  v["build_job"] = build_job_of(s.build.preset);
  v["preset"] = s.build.preset;
  v["targets"] = targets_of(s.build);
  v["artifact"] = build_artifact(s.build.preset);
  v["image"] = s.container.image;
  v["runner_input"] = runner_input(s.runner);
  v["login_env"] = load_template(dir, "login-env.yml");
  std::string consumers;
  for (const Suite* x : suites) consumers += (consumers.empty() ? "" : ", ") + x->name;
  v["consumers"] = consumers;
  v["image_output"] = underscored("image_" + v["build_job"]);
  v["build_if"] = build_if(suites);
  return fill(load_template(dir, "job-build.yml"), v);
}

// What a job spends besides its suites: image pull, VRAM clearing, installs (e2e), and the
// build (kernels); the registry checks each suite's timeout_minutes against the same figures.
constexpr int kE2eSetupMinutes = 30;

std::string suite_minutes(const Suite& s) {
  if (s.kind == Kind::kKernels) return std::to_string(s.ctest.timeout_s / 60 + 10);
  return std::to_string((1 + s.retries) * (s.server.ready_timeout_s + s.run.timeout_s) / 60 + 5);
}

// The job of `suites` (one kernels suite, or e2e suites sharing a job).
std::string job_text(const std::string& dir, const Registry& reg,
                     const std::vector<const Suite*>& suites) {
  const Suite& s = *suites.front();
  auto v = common_vars(reg);
  v["job"] = s.job;
  v["id"] = s.name;
  v["schedule"] = schedule_name(s.schedule);
  std::string names;
  for (const Suite* x : suites) names += (names.empty() ? "" : ", ") + x->name;
  v["select"] = select_of(suites);
  v["image_output"] = image_output(s);
  v["login_env"] = load_template(dir, "login-env.yml");
  v["suite_names"] = names;
  v["runner"] = s.runner;
  v["runner_input"] = runner_input(s.runner);
  v["vendor"] = reg.nightly.runner(s.runner)->vendor;
  v["artifacts"] = reg.nightly.artifact_dir + "/" + s.name;
  v["image"] = s.container.image;
  v["days"] = std::to_string(s.container.days);
  v["checkout_sglang"] = load_template(dir, "step-checkout-sglang.yml");
  v["not_before"] = s.container.not_before.empty() ? "" : " --not-before " + s.container.not_before;
  v["options"] = s.container.options;
  if (s.kind == Kind::kKernels) {
    v["timeout_minutes"] = std::to_string(s.timeout_minutes);
    v["preset"] = s.build.preset;
    v["targets"] = targets_of(s.build);
    v["build_job"] = build_job_of(s.build.preset);
    v["artifact"] = build_artifact(s.build.preset);
    // A shipped build: downloaded before the image is pulled, unpacked and verified in place of
    // the build; no cmake --build on this node.
    v["needs"] = s.build.ship ? "[preflight, " + v["build_job"] + "]" : "preflight";
    v["download_build"] =
        s.build.ship ? fill(load_template(dir, "step-download-build.yml"), v) : "";
    v["build_steps"] =
        fill(load_template(dir, s.build.ship ? "step-unpack-build.yml" : "step-build-here.yml"), v);
    v["suite_minutes"] = suite_minutes(s);
    v["qualify_step"] =
        s.qualify == "asan" ? fill(load_template(dir, "step-qualify-asan.yml"), v) : "";
    std::string extra;
    for (const auto& e : s.extra_steps)
      extra +=
          fill(load_template(dir, "step-extra.yml"),
               {{"name", e.name},
                {"run", substitute(e.run, {{"artifacts", "$GITHUB_WORKSPACE/" + v["artifacts"]},
                                           {"build", "build/" + s.build.preset}})}});
    v["extra_steps"] = extra;
    // A suite judging the night's SGLang: its checkout (compiled dependencies stay the image's)
    // is imported by the tests in the container, and the report names its commit.
    if (!s.ctest.sglang_source) v["checkout_sglang"] = "";
    v["sglang_env"] = s.ctest.sglang_source
                          ? "\n          -e DSV4_SGLANG_SRC=\"$DSV4_WORKDIR/sglang\""
                            " -e DSV4_SGLANG_COMMIT=\"$(git -C sglang rev-parse HEAD)\""
                          : "";
    return fill(load_template(dir, "job-kernels.yml"), v);
  }
  std::string models;
  for (const Suite* x : suites)
    if ((" " + models + " ").find(" " + x->server.model + " ") == std::string::npos)
      models += (models.empty() ? "" : " ") + x->server.model;
  v["models"] = models;
  // The container's HF_HOME below the cache's mount, as a folder of the host's cache.
  const HfCache& hf = reg.nightly.hf_cache;
  v["hf_subdir"] = hf.hf_home.rfind(hf.mount, 0) == 0 ? hf.hf_home.substr(hf.mount.size()) : "";
  v["download_tools"] = load_template(dir, "step-download-tools.yml");
  int minutes = kE2eSetupMinutes;
  std::string steps;
  for (const Suite* x : suites) {
    minutes += x->timeout_minutes - kE2eSetupMinutes;
    auto sv = v;
    sv["id"] = x->name;
    sv["step_select"] = "inputs.suites == 'all' || " + selected(x->name);
    sv["suite_minutes"] = suite_minutes(*x);
    sv["artifacts"] = reg.nightly.artifact_dir + "/" + x->name;
    steps += fill(load_template(dir, "step-e2e.yml"), sv);
  }
  v["timeout_minutes"] = std::to_string(minutes);
  v["suite_steps"] = steps;
  return fill(load_template(dir, "job-e2e.yml"), v);
}

// The jobs in registry order: each job once, with its suites.
std::vector<std::vector<const Suite*>> jobs_of(const Registry& reg) {
  std::vector<std::vector<const Suite*>> jobs;
  for (const auto& s : reg.suites) {
    bool found = false;
    for (auto& j : jobs)
      if (j.front()->job == s.job) j.push_back(&s), found = true;
    if (!found) jobs.push_back({&s});
  }
  return jobs;
}

std::string render_reusable(const Registry& reg, const std::string& dir) {
  auto v = common_vars(reg);
  std::string inputs;
  for (const auto& c : reg.nightly.runners)
    inputs += "      " + runner_input(c.name) + ":\n        description: \"Runner label of the " +
              c.name + " suites (" + c.vendor + " GPUs)\"\n        type: string\n" +
              "        required: false\n        default: " + c.label + "\n";
  v["runner_inputs"] = inputs;
  v["fingerprint"] = fingerprint(reg, dir);
  std::string image_outputs, image_steps;
  for (const auto& group : jobs_of(reg)) {
    const Suite& s = *group.front();
    const std::string id = image_output(s);
    image_outputs += "      " + id + ": ${{ steps." + id + ".outputs.image }}\n";
    const bool e2e = s.kind == Kind::kE2e;
    image_steps +=
        fill(load_template(dir, "step-preflight-image.yml"),
             {{"job", s.job},
              {"step_id", id},
              {"if", "inputs.schedule == '" + std::string(schedule_name(s.schedule)) + "' && (" +
                         select_of(group) + ")"},
              {"image_input", e2e ? "e2e_image" : "kernels_image"},
              {"image", s.container.image},
              {"resolve_args", !e2e ? ""
                                    : " --days " + std::to_string(s.container.days) +
                                          (s.container.not_before.empty()
                                               ? ""
                                               : " --not-before " + s.container.not_before)}});
  }
  // A build job's image, resolved whenever it builds (its first suite may not be selected).
  for (const auto& b : shipped_builds(reg)) {
    const Suite& s = *b.front();
    const std::string id = underscored("image_" + build_job_of(s.build.preset));
    image_outputs += "      " + id + ": ${{ steps." + id + ".outputs.image }}\n";
    image_steps +=
        fill(load_template(dir, "step-preflight-image.yml"), {{"job", build_job_of(s.build.preset)},
                                                              {"step_id", id},
                                                              {"if", build_if(b)},
                                                              {"image_input", "kernels_image"},
                                                              {"image", s.container.image},
                                                              {"resolve_args", ""}});
  }
  v["image_outputs"] = image_outputs;
  v["image_steps"] = image_steps;
  v["login_env"] = load_template(dir, "login-env.yml");
  std::string jobs = fill(load_template(dir, "job-preflight.yml"), v);
  jobs += fill(load_template(dir, "job-tools.yml"), v);
  // The report's verdict reads each job's schedule from the registry (ci/nightly-verdict.py).
  std::string needs = "      - preflight\n      - tools\n";
  for (const auto& b : shipped_builds(reg)) {
    jobs += build_job_text(dir, reg, b);
    needs += "      - " + build_job_of(b.front()->build.preset) + "\n";
  }
  for (const auto& group : jobs_of(reg)) {
    jobs += job_text(dir, reg, group);
    needs += "      - " + group.front()->job + "\n";
  }
  needs.pop_back();
  v["needs"] = needs;
  std::string dormancy;
  for (const auto& w : reg.nightly.dormancy_workflows)
    dormancy += (dormancy.empty() ? "" : " ") + w;
  v["dormancy_workflows"] = dormancy;
  jobs += fill(load_template(dir, "job-report.yml"), v);
  jobs.pop_back();  // the template's line end after @@jobs@@ ends the file
  v["jobs"] = jobs;
  return fill(load_template(dir, "reusable.yml"), v);
}

std::string render_caller(const Registry& reg, Schedule sch, const std::string& dir) {
  auto v = common_vars(reg);
  v["workflow"] = workflow_name(reg, sch);
  v["schedule"] = schedule_name(sch);
  v["cron"] = sch == Schedule::kNightly ? reg.nightly.cron : reg.nightly.weekly_cron;
  return fill(load_template(dir, "caller.yml"), v);
}

std::string render_pr(const Registry& reg, const std::string& dir) {
  const PrWorkflow& p = reg.pr;
  return fill(load_template(dir, "pr.yml"), {{"name", p.name},
                                             {"runs_on", p.runs_on},
                                             {"timeout_minutes", std::to_string(p.timeout_minutes)},
                                             {"image", p.image},
                                             {"deps_command", p.deps_command},
                                             {"test_command", p.test_command},
                                             {"junit", p.junit},
                                             {"hip_image", p.hip_image},
                                             {"hip_preset", p.hip_preset}});
}

}  // namespace

std::string default_templates_dir() { return DSV4_NIGHTLY_TEMPLATES; }

std::string fill(const std::string& text, const std::map<std::string, std::string>& vars) {
  static const std::regex key_re("@@([a-z_]+)@@");
  std::string out;
  auto last = text.cbegin();
  for (std::sregex_iterator m(text.begin(), text.end(), key_re), e; m != e; ++m) {
    out.append(last, (*m)[0].first);
    const auto it = vars.find((*m)[1].str());
    if (it == vars.end())
      throw std::invalid_argument("workflow template: no value for @@" + (*m)[1].str() + "@@");
    out += it->second;
    last = (*m)[0].second;
  }
  out.append(last, text.cend());
  return out;
}

std::vector<RenderedFile> render_all(const Registry& reg, const std::string& dir) {
  std::vector<RenderedFile> out = {
      {reg.nightly.reusable + ".yml", render_reusable(reg, dir)},
      {reg.nightly.name + ".yml", render_caller(reg, Schedule::kNightly, dir)}};
  bool weekly = false;
  for (const auto& s : reg.suites) weekly = weekly || s.schedule == Schedule::kWeekly;
  std::string callers = reg.nightly.name;
  if (weekly) {
    out.push_back({"weekly.yml", render_caller(reg, Schedule::kWeekly, dir)});
    callers += ", weekly";
  }
  // The callers another repository (SGLang, aiter) adds, beside the workflows and never run here
  // (GitHub reads no subfolder of .github/workflows): `uses: ...@REF` and `dsv4_ref` one value.
  std::vector<Schedule> schedules = {Schedule::kNightly};
  if (weekly) schedules.push_back(Schedule::kWeekly);
  for (const Schedule sch : schedules) {
    auto v = common_vars(reg);
    v["schedule"] = schedule_name(sch);
    v["cron"] = sch == Schedule::kNightly ? reg.nightly.cron : reg.nightly.weekly_cron;
    out.push_back({std::string("callers/dsv4-") + schedule_name(sch) + ".yml",
                   fill(load_template(dir, "caller-external.yml"), v)});
  }
  out.push_back(
      {"auto-retry.yml", fill(load_template(dir, "auto-retry.yml"),
                              {{"workflows", callers}, {"repository", reg.nightly.repository}})});
  out.push_back({reg.pr.name + ".yml", render_pr(reg, dir)});
  return out;
}

std::vector<std::string> check_jobs(const Registry& reg, const std::string& workflow_text) {
  std::vector<std::string> problems;
  static const std::regex job_re(R"(^  ([A-Za-z_][A-Za-z0-9_-]*):\s*$)");
  static const std::regex run_re(R"(nightly/run-suite\s+([^\s'"]+))");
  std::vector<std::pair<std::string, std::vector<std::string>>> jobs;  // job -> suites it runs
  bool in_jobs = false;
  for (const auto& line : lines_of(workflow_text)) {
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
    if (job == "report") have_report = true;
    if (job == "report" || job == "tools" || job == "preflight") continue;
    bool builds = false;
    for (const auto& s : reg.suites)
      builds = builds || (s.build.ship && job == build_job_of(s.build.preset));
    if (builds) continue;
    if (suites.empty())
      problems.push_back("job '" + job + "' runs no suite (expected 'nightly/run-suite " + job +
                         "')");
    for (const auto& s : suites) {
      const Suite* found = reg.find(s);
      if (!found)
        problems.push_back("job '" + job + "' runs suite '" + s + "', which is not registered in " +
                           reg.file);
      else if (found->job != job)
        problems.push_back("job '" + job + "' runs suite '" + s + "', whose job is '" + found->job +
                           "'");
      scheduled.insert(s);
    }
  }
  for (const auto& s : reg.suites)
    if (!scheduled.count(s.name))
      problems.push_back("suite '" + s.name + "' is registered in " + reg.file +
                         " but no job of the workflow runs it");
  if (!have_report)
    problems.push_back("the workflow has no final 'report' job that fails on failed suites");
  return problems;
}

std::vector<std::string> check_workflows(const Registry& reg, const std::string& dir,
                                         const std::string& templates_dir) {
  std::vector<std::string> problems;
  for (const auto& f : render_all(reg, templates_dir)) {
    const std::string path = dir + "/" + f.name;
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      problems.push_back(path + " is missing: render it from " + reg.file);
      continue;
    }
    std::ostringstream buf;
    buf << in.rdbuf();
    const std::string committed = buf.str();
    if (f.name == reg.nightly.reusable + ".yml")
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

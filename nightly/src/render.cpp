// Renders nightly.yml and weekly.yml (a tools job, one job per suite of that schedule, a report
// job with the triage) and pr.yml from the templates in nightly/templates/.
#include "render.hpp"

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "run_suite.hpp"

namespace dsv4::nightly {

namespace {

std::string workflow_name(const Registry& reg, Schedule s) {
  return s == Schedule::kNightly ? reg.nightly.name : "weekly";
}

std::string load_template(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
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

std::string suite_if(const std::string& name) {
  return "github.event_name != 'workflow_dispatch' || inputs.suites == 'all' || "
         "contains(format(',{0},', inputs.suites), '," +
         name + ",')";
}

std::map<std::string, std::string> common_vars(const Registry& reg, Schedule sch) {
  const NightlyWorkflow& n = reg.nightly;
  return {{"workflow", workflow_name(reg, sch)},
          {"repository", n.repository},
          {"retention_days", std::to_string(n.retention_days)},
          {"tools_image", n.tools.image},
          {"tools_runs_on", n.tools.runs_on},
          {"max_glibc", n.tools.max_glibc},
          {"max_glibcxx", n.tools.max_glibcxx},
          {"report_runs_on", n.report_runs_on},
          {"triage_runs", std::to_string(n.triage_runs)},
          {"sglang_repository", n.sglang.repository},
          {"sglang_ref", n.sglang.ref},
          {"sglang_install", n.sglang.install},
          {"hf_host", n.hf_cache.host_path},
          {"hf_mount", n.hf_cache.mount},
          {"hf_home", n.hf_cache.hf_home}};
}

std::string suite_job(const std::string& dir, const Registry& reg, Schedule sch, const Suite& s) {
  auto v = common_vars(reg, sch);
  v["id"] = s.name;
  v["select"] = suite_if(s.name);
  v["runs_on"] = s.runs_on;
  v["timeout_minutes"] = std::to_string(s.timeout_minutes);
  v["artifacts"] = reg.nightly.artifact_dir + "/" + s.name;
  v["image"] = s.container.image;
  v["fallback_image"] = s.container.fallback_image;
  v["options"] = s.container.options;
  if (s.kind == Kind::kKernels) {
    v["preset"] = s.build.preset;
    std::string targets;
    for (const auto& t : s.build.targets) targets += (targets.empty() ? " --target " : " ") + t;
    v["targets"] = targets;
    v["suite_minutes"] = std::to_string(s.ctest.timeout_s / 60 + 10);
    return fill(load_template(dir, "job-kernels.yml"), v);
  }
  const int attempts = 1 + s.retries;
  v["suite_minutes"] =
      std::to_string(attempts * (s.server.ready_timeout_s + s.run.timeout_s) / 60 + 5);
  return fill(load_template(dir, "job-e2e.yml"), v);
}

std::string render_workflow(const Registry& reg, Schedule sch, const std::string& dir) {
  auto v = common_vars(reg, sch);
  v["cron"] = sch == Schedule::kNightly ? reg.nightly.cron : reg.nightly.weekly_cron;
  std::string jobs = fill(load_template(dir, "job-tools.yml"), v);
  std::string needs = "      - tools\n";
  for (const auto& s : reg.suites) {
    if (s.schedule != sch) continue;
    jobs += suite_job(dir, reg, sch, s);
    needs += "      - " + s.name + "\n";
  }
  needs.pop_back();
  v["needs"] = needs;
  jobs += fill(load_template(dir, "job-report.yml"), v);
  jobs.pop_back();  // the template's line end after @@jobs@@ ends the file
  v["jobs"] = jobs;
  return fill(load_template(dir, "workflow.yml"), v);
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
      {reg.nightly.name + ".yml", render_workflow(reg, Schedule::kNightly, dir)}};
  bool weekly = false;
  for (const auto& s : reg.suites) weekly = weekly || s.schedule == Schedule::kWeekly;
  if (weekly) out.push_back({"weekly.yml", render_workflow(reg, Schedule::kWeekly, dir)});
  out.push_back({reg.pr.name + ".yml", render_pr(reg, dir)});
  return out;
}

std::vector<std::string> check_jobs(const Registry& reg, Schedule schedule,
                                    const std::string& workflow_text) {
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
    if (job == "report" || job == "tools") continue;
    if (suites.empty())
      problems.push_back("job '" + job + "' runs no suite (expected 'nightly/run-suite " + job +
                         "')");
    for (const auto& s : suites) {
      const Suite* found = reg.find(s);
      if (!found || found->schedule != schedule)
        problems.push_back("job '" + job + "' runs suite '" + s +
                           "', which is not registered for this schedule in " + reg.file);
      else if (s != job)
        problems.push_back("job '" + job + "' runs suite '" + s +
                           "' (a job is named after its suite)");
      scheduled.insert(s);
    }
  }
  for (const auto& s : reg.suites)
    if (s.schedule == schedule && !scheduled.count(s.name))
      problems.push_back("suite '" + s.name + "' is registered in " + reg.file +
                         " but no job of its workflow runs it");
  if (!have_report)
    problems.push_back(
        "the nightly workflow has no final 'report' job that fails on failed suites");
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
    if (f.name == reg.nightly.name + ".yml" || f.name == "weekly.yml") {
      const Schedule sch = f.name == "weekly.yml" ? Schedule::kWeekly : Schedule::kNightly;
      for (auto& p : check_jobs(reg, sch, committed)) problems.push_back(path + ": " + p);
    }
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

namespace {

// The text a workflow runs: its own, and each ci/*.sh or nightly/* script it names, recursively.
std::string reachable_text(const std::string& source_dir, const std::vector<RenderedFile>& wfs) {
  static const std::regex script_re(R"((ci/[A-Za-z0-9_.-]+\.sh|nightly/run-suite))");
  std::string all;
  std::vector<std::string> todo;
  std::set<std::string> seen;
  for (const auto& w : wfs) todo.push_back(w.text);
  while (!todo.empty()) {
    const std::string text = todo.back();
    todo.pop_back();
    all += text + "\n";
    for (std::sregex_iterator m(text.begin(), text.end(), script_re), e; m != e; ++m)
      if (seen.insert((*m)[1].str()).second)
        todo.push_back(read_text(source_dir + "/" + (*m)[1].str()));
  }
  return all;
}

bool selects(const nlohmann::json& filter, const std::vector<std::string>& labels) {
  auto any = [&](const std::string& re) {
    const std::regex r(re);
    for (const auto& l : labels)
      if (std::regex_search(l, r)) return true;
    return false;
  };
  const std::string inc = filter.value("/include/label"_json_pointer, std::string());
  const std::string exc = filter.value("/exclude/label"_json_pointer, std::string());
  if (!inc.empty() && !any(inc)) return false;
  if (!exc.empty() && any(exc)) return false;
  return true;
}

}  // namespace

std::vector<std::string> check_dormant(
    const Registry& reg, const std::string& source_dir, const std::string& presets_path,
    const std::vector<RenderedFile>& workflows,
    const std::vector<std::pair<std::string, std::vector<std::string>>>& tests) {
  std::vector<std::string> problems;
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(read_text(presets_path));
  } catch (const std::exception& e) {
    return {presets_path + " is not valid JSON: " + e.what()};
  }
  // Presets a workflow names (directly, through the scripts it runs, or through a suite).
  std::set<std::string> configured, tested;
  const std::string text = reachable_text(source_dir, workflows);
  static const std::regex cmake_re(R"(cmake\s+(?:--build\s+)?--preset[= ]+([A-Za-z0-9_-]+))");
  static const std::regex ctest_re(R"(ctest\b[^\n]*?--preset[= ]+([A-Za-z0-9_-]+))");
  for (std::sregex_iterator m(text.begin(), text.end(), cmake_re), e; m != e; ++m)
    configured.insert((*m)[1].str());
  for (std::sregex_iterator m(text.begin(), text.end(), ctest_re), e; m != e; ++m)
    tested.insert((*m)[1].str());
  for (const auto& s : reg.suites) {
    if (!s.build.preset.empty()) configured.insert(s.build.preset);
    if (!s.ctest.test_preset.empty()) tested.insert(s.ctest.test_preset);
  }
  std::set<std::string> manual_configure, manual_test;
  for (const auto& m : reg.manual) (m.test ? manual_test : manual_configure).insert(m.preset);
  std::map<std::string, nlohmann::json> test_presets;
  // Configure presets whose builds hold other tests than a full build (the compile-only check).
  std::set<std::string> other_tests;
  for (const auto& p : doc.value("configurePresets", nlohmann::json::array()))
    if (p.value("/cacheVariables/DSV4_GPU_BACKEND"_json_pointer, std::string()) == "hip-compile")
      other_tests.insert(p.value("name", ""));
  for (const char* key : {"configurePresets", "testPresets"}) {
    for (const auto& p : doc.value(key, nlohmann::json::array())) {
      const std::string name = p.value("name", "");
      const bool test = std::string(key) == "testPresets";
      if (test) test_presets[name] = p;
      if (p.value("hidden", false) || (test ? tested : configured).count(name) ||
          (test ? manual_test : manual_configure).count(name))
        continue;
      problems.push_back(std::string(key == std::string("testPresets") ? "test" : "configure") +
                         " preset '" + name +
                         "' is dormant: no workflow runs it and the registry's `manual` does not "
                         "list it");
    }
  }
  for (const auto& m : reg.manual)
    if ((m.test ? tested : configured).count(m.preset))
      problems.push_back(std::string(m.test ? "test" : "configure") + " preset '" + m.preset +
                         "' is listed as manual but a workflow runs it");
  // The label filters of the jobs that run tests: the PR's test presets and the kernels suites.
  std::vector<std::pair<std::string, nlohmann::json>> filters;
  for (const auto& [name, p] : test_presets)
    if (tested.count(name) && !other_tests.count(p.value("configurePreset", ""))) {
      nlohmann::json f = p.value("filter", nlohmann::json::object());
      // Inherited filters (one level is what CMakePresets.json uses).
      if (f.empty() && p.contains("inherits") && test_presets.count(p.value("inherits", "")))
        f = test_presets[p.value("inherits", "")].value("filter", nlohmann::json::object());
      filters.emplace_back("test preset " + name, f);
    }
  for (const auto& s : reg.suites)
    if (s.kind == Kind::kKernels && s.ctest.test_preset.empty())
      filters.emplace_back("suite " + s.name,
                           nlohmann::json{{"include", {{"label", s.ctest.label}}}});
  for (const auto& [name, labels] : tests) {
    bool covered = false;
    for (const auto& [job, f] : filters) covered = covered || selects(f, labels);
    if (!covered) {
      std::string l;
      for (const auto& x : labels) l += (l.empty() ? "" : ",") + x;
      problems.push_back("test '" + name + "' (labels " + (l.empty() ? "none" : l) +
                         ") is dormant: no workflow's label filter selects it");
    }
  }
  return problems;
}

}  // namespace dsv4::nightly

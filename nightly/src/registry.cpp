// Loader of nightly/suites.json: every field is checked, and a problem names its path and value.
#include "registry.hpp"

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "registry_reader.hpp"

namespace dsv4::nightly {

using nlohmann::json;

using detail::at;
using detail::join;
using detail::name_re;
using detail::parse_suite;
using detail::Reader;
using detail::word_re;

RegistryError::RegistryError(std::string file, std::string path, std::string problem,
                             std::string value)
    : std::runtime_error(file + ": " + path + ": " + problem + " (got " + value + ")"),
      path_(std::move(path)),
      value_(std::move(value)) {}

const char* kind_name(Kind k) { return k == Kind::kE2e ? "e2e" : "kernels"; }

const std::vector<std::string>& launch_fields() {
  static const std::vector<std::string> fields = {
      "container.image",        "env",      "server.model", "server.command", "server.env",
      "server.ready_timeout_s", "run.gates"};
  return fields;
}

const RunnerClass* NightlyWorkflow::runner(const std::string& name) const {
  for (const auto& c : runners)
    if (c.name == name) return &c;
  return nullptr;
}

const Suite* Registry::find(const std::string& name) const {
  for (const auto& s : suites)
    if (s.name == name) return &s;
  return nullptr;
}

namespace {

void parse_nightly(const Reader& r, const json& n, NightlyWorkflow& w) {
  r.keys(n, "nightly",
         {"name", "cron", "weekly_cron", "repository", "artifact_dir", "retention_days",
          "triage_runs", "report_runs_on", "reusable", "dormancy_workflows", "runners", "tools",
          "hf_cache", "sglang", "caller_ref", "dockerhub"},
         {"cron", "weekly_cron", "repository", "runners", "tools", "hf_cache", "sglang"});
  w.name = r.str(n, "nightly", "name", false, "nightly");
  static const std::regex cron_re(R"(^\S+( \S+){4}$)");
  for (const char* key : {"cron", "weekly_cron"}) {
    const std::string c = r.str(n, "nightly", key, true);
    if (!std::regex_match(c, cron_re))
      r.fail(join("nightly", key), "must have five fields (minute hour day month weekday)",
             &n.at(key));
    (std::string(key) == "cron" ? w.cron : w.weekly_cron) = c;
  }
  static const std::regex repo_re("^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$");
  w.repository = r.matching(n, "nightly", "repository", true, repo_re, "owner/name");
  w.artifact_dir = r.matching(n, "nightly", "artifact_dir", false, word_re(),
                              "a relative path without spaces", "out/nightly");
  w.retention_days = r.integer(n, "nightly", "retention_days", 1, 90, false, 14);
  w.triage_runs = r.integer(n, "nightly", "triage_runs", 3, 20, false, 3);
  w.report_runs_on = r.matching(n, "nightly", "report_runs_on", false, word_re(), "a runner label",
                                "ubuntu-latest");
  w.reusable = r.matching(n, "nightly", "reusable", false, name_re(), "a workflow file name",
                          "nightly-suites");
  w.caller_ref = r.matching(n, "nightly", "caller_ref", false, word_re(), "a git ref", "main");
  if (n.contains("dockerhub")) {
    const json& d = n.at("dockerhub");
    r.keys(d, "nightly.dockerhub", {"username_secret", "token_secret"},
           {"username_secret", "token_secret"});
    static const std::regex secret_re("^[A-Za-z_][A-Za-z0-9_]*$");
    w.dockerhub_username_secret =
        r.matching(d, "nightly.dockerhub", "username_secret", true, secret_re, "a secret name");
    w.dockerhub_token_secret =
        r.matching(d, "nightly.dockerhub", "token_secret", true, secret_re, "a secret name");
  }
  w.dormancy_workflows = r.strings(n, "nightly", "dormancy_workflows", false, false);
  for (size_t i = 0; i < w.dormancy_workflows.size(); ++i)
    if (!std::regex_match(w.dormancy_workflows[i], name_re()))
      r.fail(at("nightly.dormancy_workflows", i), "must be a workflow name like pr",
             &n.at("dormancy_workflows")[i]);
  const json& rc = n.at("runners");
  r.object(rc, "nightly.runners");
  if (rc.empty()) r.fail("nightly.runners", "must name at least one runner class", &rc);
  static const std::regex class_re("^[a-z][a-z0-9]*(-[a-z0-9]+)*$");
  for (auto it = rc.begin(); it != rc.end(); ++it) {
    const std::string cp = join("nightly.runners", it.key());
    if (!std::regex_match(it.key(), class_re))
      r.fail(cp, "is not a runner class name (lower-case letters, digits and '-')", &it.value());
    r.keys(it.value(), cp, {"label", "vendor"}, {"label", "vendor"});
    RunnerClass c;
    c.name = it.key();
    c.label = r.matching(it.value(), cp, "label", true, word_re(), "a runner label");
    c.vendor = r.str(it.value(), cp, "vendor", true);
    if (c.vendor != "amd" && c.vendor != "nvidia")
      r.fail(join(cp, "vendor"), "must be \"amd\" or \"nvidia\"", &it.value().at("vendor"));
    w.runners.push_back(c);
  }
  const json& t = n.at("tools");
  r.keys(t, "nightly.tools", {"runs_on", "image", "max_glibc", "max_glibcxx"},
         {"image", "max_glibc", "max_glibcxx"});
  w.tools.runs_on = r.matching(t, "nightly.tools", "runs_on", false, word_re(), "a runner label",
                               "ubuntu-latest");
  w.tools.image = r.str(t, "nightly.tools", "image", true);
  static const std::regex glibc_re("^2\\.[0-9]+$");
  w.tools.max_glibc = r.matching(t, "nightly.tools", "max_glibc", true, glibc_re, "2.N");
  static const std::regex glibcxx_re("^3\\.4\\.[0-9]+$");
  w.tools.max_glibcxx = r.matching(t, "nightly.tools", "max_glibcxx", true, glibcxx_re, "3.4.N");
  const json& h = n.at("hf_cache");
  r.keys(h, "nightly.hf_cache", {"host_path", "mount", "hf_home"},
         {"host_path", "mount", "hf_home"});
  static const std::regex abs_re("^/[A-Za-z0-9_./-]*$");
  w.hf_cache.host_path =
      r.matching(h, "nightly.hf_cache", "host_path", true, abs_re, "an absolute path");
  w.hf_cache.mount = r.matching(h, "nightly.hf_cache", "mount", true, abs_re, "an absolute path");
  w.hf_cache.hf_home =
      r.matching(h, "nightly.hf_cache", "hf_home", true, abs_re, "an absolute path");
  const json& g = n.at("sglang");
  r.keys(g, "nightly.sglang", {"repository", "ref", "install_args"}, {"repository", "ref"});
  w.sglang.repository = r.matching(g, "nightly.sglang", "repository", true, repo_re, "owner/name");
  w.sglang.ref = r.matching(g, "nightly.sglang", "ref", true, word_re(), "a git ref");
  static const std::regex args_re("^[A-Za-z0-9_.=, -]*$");
  w.sglang.install_args = r.matching(g, "nightly.sglang", "install_args", false, args_re,
                                     "ci/sglang-install.sh options without quotes");
}

}  // namespace

Registry parse_registry(const json& doc, const std::string& file) {
  Reader r(file);
  Registry reg;
  reg.file = file;
  r.keys(doc, "(top level)",
         {"$comment", "schema", "nightly", "pr", "manual", "e2e_defaults", "suites"},
         {"schema", "nightly", "pr", "suites"});
  if (!doc.at("schema").is_number_integer() || doc.at("schema").get<long>() != 3)
    r.fail("schema", "must be 3 (the version this loader reads)", &doc.at("schema"));
  parse_nightly(r, doc.at("nightly"), reg.nightly);

  const json& pr = doc.at("pr");
  r.keys(pr, "pr",
         {"name", "runs_on", "image", "timeout_minutes", "deps_command", "test_command", "junit",
          "hip_image", "hip_preset"},
         {"deps_command", "test_command", "hip_image"});
  reg.pr.name = r.str(pr, "pr", "name", false, "pr");
  reg.pr.runs_on =
      r.matching(pr, "pr", "runs_on", false, word_re(), "a runner label", "ubuntu-latest");
  reg.pr.image = r.str(pr, "pr", "image", false);
  reg.pr.timeout_minutes = r.integer(pr, "pr", "timeout_minutes", 1, 360, false, 40);
  reg.pr.deps_command = r.str(pr, "pr", "deps_command", true);
  reg.pr.test_command = r.str(pr, "pr", "test_command", true);
  reg.pr.junit = r.matching(pr, "pr", "junit", false, word_re(), "a relative path without spaces");
  reg.pr.hip_image = r.str(pr, "pr", "hip_image", true);
  reg.pr.hip_preset = r.matching(pr, "pr", "hip_preset", false, name_re(), "a preset name", "hip");

  if (doc.contains("manual")) {
    const json& m = doc.at("manual");
    if (!m.is_array())
      r.fail("manual", "must be an array of {configure_preset | test_preset, reason}", &m);
    for (size_t i = 0; i < m.size(); ++i) {
      const std::string mp = at("manual", i);
      r.keys(m[i], mp, {"configure_preset", "test_preset", "reason"}, {"reason"});
      const bool test = m[i].contains("test_preset");
      if (test == m[i].contains("configure_preset"))
        r.fail(mp, "needs exactly one of configure_preset and test_preset", &m[i]);
      const char* key = test ? "test_preset" : "configure_preset";
      reg.manual.push_back({test, r.matching(m[i], mp, key, true, name_re(), "a preset name"),
                            r.str(m[i], mp, "reason", true)});
    }
  }
  // Fields every e2e suite shares (container, environment, their sources, ...); a suite's own
  // fields win, objects merge key by key.
  json e2e_defaults = json::object();
  if (doc.contains("e2e_defaults")) {
    e2e_defaults = doc.at("e2e_defaults");
    r.object(e2e_defaults, "e2e_defaults");
  }

  const json& suites = doc.at("suites");
  if (!suites.is_array() || suites.empty()) r.fail("suites", "must be a non-empty array", &suites);
  std::set<std::string> names;
  for (size_t i = 0; i < suites.size(); ++i) {
    Suite s;
    json sj = suites[i];
    if (sj.is_object() && sj.value("kind", "") == "e2e") {
      json merged = e2e_defaults;
      merged.merge_patch(sj);
      sj = merged;
    }
    parse_suite(r, sj, at("suites", i), s);
    for (const char* reserved : {"report", "tools"})
      if (s.name == reserved)
        r.fail(at("suites", i) + ".name", std::string("\"") + reserved + "\" is the name of a job",
               &suites[i].at("name"));
    if (!names.insert(s.name).second)
      r.fail(at("suites", i) + ".name", "is registered twice", &suites[i].at("name"));
    const RunnerClass* rc = reg.nightly.runner(s.runner);
    if (rc == nullptr) {
      std::string known;
      for (const auto& c : reg.nightly.runners) known += (known.empty() ? "" : ", ") + c.name;
      r.fail(at("suites", i) + ".runner",
             "is not a class of nightly.runners (known: " + known + ")", &sj.at("runner"));
    }
    s.runs_on = rc->label;
    reg.suites.push_back(std::move(s));
  }
  // Suites sharing a job run in one container one after the other: same kind (e2e), schedule,
  // runner and container; a job id is not also another suite's own name.
  for (size_t i = 0; i < reg.suites.size(); ++i) {
    const Suite& s = reg.suites[i];
    if (s.job != s.name && names.count(s.job))
      r.fail(at("suites", i) + ".job", "is the name of another suite", &suites[i].at("job"));
    for (const char* reserved : {"report", "tools"})
      if (s.job == reserved)
        r.fail(at("suites", i) + ".job", std::string("\"") + reserved + "\" is the name of a job",
               &suites[i].at("job"));
    for (const Suite& o : reg.suites)
      if (o.build.ship && s.job == build_job_of(o.build.preset))
        r.fail(at("suites", i) + (s.job == s.name ? ".name" : ".job"),
               "is the name of the job that builds preset " + o.build.preset + " for " + o.name,
               &suites[i].at(s.job == s.name ? "name" : "job"));
    for (size_t k = 0; k < i; ++k) {
      const Suite& o = reg.suites[k];
      // One build of a shipped preset serves every suite that ships it: one image, one target list.
      if (s.build.ship && o.build.ship && o.build.preset == s.build.preset) {
        const char* differs = o.container.image != s.container.image ? "container.image"
                              : o.build.targets != s.build.targets   ? "build.targets"
                                                                     : nullptr;
        if (differs)
          r.fail(at("suites", i) + ".build.ship",
                 "ships preset " + s.build.preset + " with " + o.name + " but not its " + differs +
                     " (one build serves both)",
                 &suites[i].at("build").at("ship"));
      }
      if (o.job != s.job) continue;
      const char* differs = o.schedule != s.schedule                     ? "schedule"
                            : o.runner != s.runner                       ? "runner"
                            : o.container.image != s.container.image     ? "container.image"
                            : o.container.options != s.container.options ? "container.options"
                            : o.container.not_before != s.container.not_before
                                ? "container.not_before"
                                : nullptr;
      if (differs)
        r.fail(at("suites", i) + ".job",
               "shares job '" + s.job + "' with " + o.name + " but not its " + differs,
               &suites[i].at("job"));
    }
  }
  return reg;
}

Registry load_registry(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw RegistryError(path, "(file)", "cannot be read", "\"" + path + "\"");
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::parse_error& e) {
    throw RegistryError(path, "(file)", std::string("is not valid JSON: ") + e.what(),
                        "byte " + std::to_string(e.byte));
  }
  return parse_registry(doc, path);
}

std::string substitute(const std::string& text, const std::map<std::string, std::string>& vars) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const size_t open = text.find('{', i);
    if (open == std::string::npos) break;
    const size_t close = text.find('}', open);
    if (close == std::string::npos) break;
    const std::string key = text.substr(open + 1, close - open - 1);
    static const std::regex key_re("^[A-Za-z_]+$");
    out += text.substr(i, open - i);
    if (std::regex_match(key, key_re)) {
      auto it = vars.find(key);
      if (it == vars.end())
        throw std::invalid_argument("unknown placeholder {" + key + "} in '" + text + "'");
      out += it->second;
    } else {
      out += text.substr(open, close - open + 1);
    }
    i = close + 1;
  }
  out += text.substr(i);
  return out;
}

}  // namespace dsv4::nightly

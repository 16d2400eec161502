// Loader of nightly/suites.json: every field is checked, and a problem names its path and value.
#include "registry.hpp"

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "report/gates.hpp"  // dsv4-eval's gate parser: the registry accepts what dsv4-eval does

namespace dsv4::nightly {

using nlohmann::json;

namespace {

std::string shown(const json* v) {
  if (v == nullptr) return "(missing)";
  std::string s = v->dump();
  if (s.size() > 160) s = s.substr(0, 157) + "...";
  return s;
}

std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string at(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

const std::regex& name_re() {
  static const std::regex r("^[a-z][a-z0-9-]{0,62}$");
  return r;
}
const std::regex& env_re() {
  static const std::regex r("^[A-Za-z_][A-Za-z0-9_]*$");
  return r;
}
const std::regex& word_re() {
  static const std::regex r("^[A-Za-z0-9][A-Za-z0-9_.:/-]*$");
  return r;
}

// Field access with named errors; `file` goes into every message.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& problem, const json* v) const {
    throw RegistryError(file_, path, problem, shown(v));
  }

  void object(const json& v, const std::string& path) const {
    if (!v.is_object()) fail(path, "must be an object", &v);
  }

  void keys(const json& obj, const std::string& path, std::initializer_list<const char*> allowed,
            std::initializer_list<const char*> required = {}) const {
    object(obj, path);
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool ok = false;
      for (const char* k : allowed) ok = ok || it.key() == k;
      if (!ok) {
        std::string list;
        for (const char* k : allowed) list += std::string(list.empty() ? "" : ", ") + k;
        fail(join(path, it.key()), "unknown field (known: " + list + ")", &it.value());
      }
    }
    for (const char* k : required)
      if (!obj.contains(k)) fail(join(path, k), "is required", nullptr);
  }

  std::string str(const json& obj, const std::string& path, const char* key, bool required,
                  const std::string& def = "") const {
    const std::string p = join(path, key);
    if (!obj.contains(key)) {
      if (required) fail(p, "is required", nullptr);
      return def;
    }
    const json& v = obj.at(key);
    if (!v.is_string()) fail(p, "must be a string", &v);
    if (v.get<std::string>().empty()) fail(p, "must not be empty", &v);
    return v.get<std::string>();
  }

  std::string matching(const json& obj, const std::string& path, const char* key, bool required,
                       const std::regex& re, const char* what, const std::string& def = "") const {
    std::string s = str(obj, path, key, required, def);
    if ((required || obj.contains(key)) && !std::regex_match(s, re))
      fail(join(path, key), std::string("must be ") + what, &obj.at(key));
    return s;
  }

  int integer(const json& obj, const std::string& path, const char* key, long lo, long hi,
              bool required, int def) const {
    const std::string p = join(path, key);
    if (!obj.contains(key)) {
      if (required) fail(p, "is required", nullptr);
      return def;
    }
    const json& v = obj.at(key);
    if (!v.is_number_integer())
      fail(p, "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", &v);
    const long n = v.get<long>();
    if (n < lo || n > hi)
      fail(p, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", &v);
    return static_cast<int>(n);
  }

  bool boolean(const json& obj, const std::string& path, const char* key, bool def) const {
    if (!obj.contains(key)) return def;
    const json& v = obj.at(key);
    if (!v.is_boolean()) fail(join(path, key), "must be true or false", &v);
    return v.get<bool>();
  }

  std::vector<std::string> strings(const json& obj, const std::string& path, const char* key,
                                   bool required, bool nonempty) const {
    const std::string p = join(path, key);
    std::vector<std::string> out;
    if (!obj.contains(key)) {
      if (required) fail(p, "is required", nullptr);
      return out;
    }
    const json& v = obj.at(key);
    if (!v.is_array()) fail(p, "must be an array of strings", &v);
    if (nonempty && v.empty()) fail(p, "must not be empty", &v);
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string() || v[i].get<std::string>().empty())
        fail(at(p, i), "must be a non-empty string", &v[i]);
      out.push_back(v[i].get<std::string>());
    }
    return out;
  }

  std::map<std::string, std::string> env(const json& obj, const std::string& path,
                                         const char* key) const {
    std::map<std::string, std::string> out;
    if (!obj.contains(key)) return out;
    const std::string p = join(path, key);
    const json& v = obj.at(key);
    object(v, p);
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!std::regex_match(it.key(), env_re()))
        fail(join(p, it.key()), "is not a valid environment variable name", &it.value());
      if (!it.value().is_string()) fail(join(p, it.key()), "must be a string", &it.value());
      out[it.key()] = it.value().get<std::string>();
    }
    return out;
  }

  // Every {placeholder} in `args` must be one of `allowed`.
  void placeholders(const std::vector<std::string>& args, const std::string& path, const json& arr,
                    const std::set<std::string>& allowed) const {
    static const std::regex ph(R"(\{([A-Za-z_]+)\})");
    for (size_t i = 0; i < args.size(); ++i) {
      for (std::sregex_iterator m(args[i].begin(), args[i].end(), ph), e; m != e; ++m) {
        if (!allowed.count((*m)[1].str())) {
          std::string list;
          for (const auto& a : allowed) list += (list.empty() ? "{" : ", {") + a + "}";
          fail(at(path, i), "unknown placeholder {" + (*m)[1].str() + "} (known: " + list + ")",
               &arr[i]);
        }
      }
    }
  }

 private:
  std::string file_;
};

// What a job spends besides its suite: image pull, VRAM clearing, installs (e2e), and the
// build (kernels).
constexpr long kSetupS = 30 * 60;
constexpr long kBuildS = 60 * 60;
constexpr long kStepS = 30 * 60;

bool mentions(const std::vector<std::string>& args, const std::string& token) {
  for (const auto& a : args)
    if (a.find(token) != std::string::npos) return true;
  return false;
}

void parse_container(const Reader& r, const json& j, const std::string& p, Container& c) {
  if (!j.contains("container")) r.fail(join(p, "container"), "is required", nullptr);
  const std::string cp = join(p, "container");
  const json& cj = j.at("container");
  if (cj.is_object() && cj.contains("fallback_image"))
    r.fail(join(cp, "fallback_image"),
           "is gone: an image older than the code under test is never used (set not_before)",
           &cj.at("fallback_image"));
  r.keys(cj, cp, {"image", "not_before", "days", "options"}, {"image"});
  c.image = r.str(cj, cp, "image", true);
  static const std::regex day_re("^20[0-9]{2}(0[1-9]|1[0-2])(0[1-9]|[12][0-9]|3[01])$");
  c.not_before = r.matching(cj, cp, "not_before", false, day_re, "a date YYYYMMDD");
  if (c.image.find("{date}") != std::string::npos && c.not_before.empty())
    r.fail(join(cp, "not_before"),
           "is required with {date}: the oldest image day that holds the code under test", nullptr);
  c.days = r.integer(cj, cp, "days", 1, 30, false, 7);
  c.options = r.str(cj, cp, "options", false);
  if (c.options.find('\'') != std::string::npos || c.options.find('"') != std::string::npos)
    r.fail(join(cp, "options"), "must not contain quotes (it is split on spaces)",
           &cj.at("options"));
  if (c.options.find("--ipc") != std::string::npos)
    r.fail(join(cp, "options"), "must not set --ipc (host IPC voids --shm-size)",
           &cj.at("options"));
}

void parse_e2e(const Reader& r, const json& j, const std::string& p, Suite& s) {
  for (const char* k : {"ctest", "build"})
    if (j.contains(k))
      r.fail(join(p, k), "is for kernels suites only (e2e suites use the tools job's build)",
             &j.at(k));
  if (!j.contains("server")) r.fail(join(p, "server"), "is required for an e2e suite", nullptr);
  if (!j.contains("run")) r.fail(join(p, "run"), "is required for an e2e suite", nullptr);
  const std::string sp = join(p, "server");
  const json& sj = j.at("server");
  r.keys(sj, sp,
         {"model", "command", "env", "port", "ready_timeout_s", "stop_grace_s", "allow_download"},
         {"model", "command"});
  s.server.model = r.matching(sj, sp, "model", true, word_re(), "a Hugging Face model id");
  s.server.command = r.strings(sj, sp, "command", true, true);
  r.placeholders(s.server.command, join(sp, "command"), sj.at("command"),
                 {"host", "port", "port_file", "out", "model"});
  if (!mentions(s.server.command, "{port}") && !mentions(s.server.command, "{port_file}"))
    r.fail(join(sp, "command"), "must contain {port} or {port_file}", &sj.at("command"));
  if (!mentions(s.server.command, "{model}"))
    r.fail(join(sp, "command"), "must load {model}", &sj.at("command"));
  s.server.env = r.env(sj, sp, "env");
  s.server.port = r.integer(sj, sp, "port", 0, 65535, false, 0);
  s.server.ready_timeout_s = r.integer(sj, sp, "ready_timeout_s", 1, 86400, false, 1800);
  s.server.stop_grace_s = r.integer(sj, sp, "stop_grace_s", 1, 600, false, 30);
  s.server.allow_download = r.boolean(sj, sp, "allow_download", false);

  const std::string rp = join(p, "run");
  const json& rj = j.at("run");
  r.keys(rj, rp, {"command", "gates", "timeout_s"}, {"command"});
  s.run.command = r.strings(rj, rp, "command", true, true);
  r.placeholders(s.run.command, join(rp, "command"), rj.at("command"), {"url", "out"});
  if (!mentions(s.run.command, "{url}"))
    r.fail(join(rp, "command"), "must pass the server's {url}", &rj.at("command"));
  s.run.gates = r.strings(rj, rp, "gates", false, false);
  for (size_t i = 0; i < s.run.gates.size(); ++i) {
    try {
      eval::parse_gate(s.run.gates[i]);
    } catch (const eval::GateError& e) {
      r.fail(at(join(rp, "gates"), i), std::string("dsv4-eval rejects it: ") + e.what(),
             &rj.at("gates")[i]);
    }
  }
  s.run.timeout_s = r.integer(rj, rp, "timeout_s", 1, 7 * 86400, false, 3600);
  s.retries = r.integer(j, p, "retries", 0, 1, false, 0);
  // The job must outlast every attempt's readiness wait and run, with room for its setup steps.
  const long need = (1L + s.retries) * (s.server.ready_timeout_s + s.run.timeout_s) + kSetupS;
  if (s.timeout_minutes * 60L < need)
    r.fail(join(p, "timeout_minutes"),
           "is shorter than (1 + retries) x (server.ready_timeout_s + run.timeout_s) + " +
               std::to_string(kSetupS / 60) + " min of setup = " + std::to_string(need / 60) +
               " min",
           &j.at("timeout_minutes"));
  for (const auto& f : launch_fields())
    if (!s.sources.count(f))
      r.fail(join(join(p, "sources"), f), "is required: name where SGLang sets this launch field",
             nullptr);
}

void parse_kernels(const Reader& r, const json& j, const std::string& p, Suite& s) {
  for (const char* k : {"server", "run", "retries", "job"})
    if (j.contains(k)) r.fail(join(p, k), "is for e2e suites only", &j.at(k));
  s.qualify = r.str(j, p, "qualify", false);
  if (!s.qualify.empty() && s.qualify != "asan")
    r.fail(join(p, "qualify"), "must be \"asan\" (ci/asan-qualify.sh)", &j.at("qualify"));
  if (j.contains("extra_steps")) {
    const std::string xp = join(p, "extra_steps");
    const json& xj = j.at("extra_steps");
    if (!xj.is_array()) r.fail(xp, "must be an array of {\"name\": ..., \"run\": ...}", &xj);
    for (size_t i = 0; i < xj.size(); ++i) {
      r.keys(xj[i], at(xp, i), {"name", "run"}, {"name", "run"});
      ExtraStep e{r.str(xj[i], at(xp, i), "name", true), r.str(xj[i], at(xp, i), "run", true)};
      if (e.run.find('\'') != std::string::npos)
        r.fail(at(xp, i) + ".run", "must not contain single quotes (it runs in bash -c '...')",
               &xj[i].at("run"));
      try {
        (void)substitute(e.run, {{"artifacts", ""}, {"build", ""}});
      } catch (const std::invalid_argument& ex) {
        r.fail(at(xp, i) + ".run", std::string(ex.what()) + " (known: {artifacts}, {build})",
               &xj[i].at("run"));
      }
      s.extra_steps.push_back(e);
    }
  }
  if (!j.contains("build")) r.fail(join(p, "build"), "is required for a kernels suite", nullptr);
  const std::string bp = join(p, "build");
  r.keys(j.at("build"), bp, {"preset", "targets", "ship"}, {"preset"});
  s.build.preset = r.matching(j.at("build"), bp, "preset", true, name_re(), "a preset name");
  s.build.targets = r.strings(j.at("build"), bp, "targets", false, false);
  s.build.ship = r.boolean(j.at("build"), bp, "ship", false);
  // A shipped build is made and checked against one image name: no per-day placeholders.
  if (s.build.ship && s.container.image.find('{') != std::string::npos)
    r.fail(join(bp, "ship"),
           "needs a container.image without placeholders (the build job and the suites must use "
           "one image; got '" +
               s.container.image + "')",
           &j.at("build").at("ship"));
  if (!j.contains("ctest")) r.fail(join(p, "ctest"), "is required for a kernels suite", nullptr);
  const std::string cp = join(p, "ctest");
  const json& cj = j.at("ctest");
  r.keys(cj, cp,
         {"test_preset", "test_dir", "label", "parallel", "slots_per_gpu", "timeout_s", "families",
          "checks", "sglang_source"},
         {"label"});
  s.ctest.test_preset = r.matching(cj, cp, "test_preset", false, name_re(), "a preset name");
  s.ctest.test_dir = r.str(cj, cp, "test_dir", false);
  if (s.ctest.test_preset.empty() == s.ctest.test_dir.empty())
    r.fail(cp, "needs exactly one of test_preset and test_dir", &cj);
  s.ctest.label = r.matching(cj, cp, "label", true, word_re(), "a CTest label");
  s.ctest.parallel = r.integer(cj, cp, "parallel", 1, 1024, false, 1);
  s.ctest.slots_per_gpu = r.integer(cj, cp, "slots_per_gpu", 1, 64, false, 1);
  s.ctest.timeout_s = r.integer(cj, cp, "timeout_s", 1, 7 * 86400, false, 3600);
  s.ctest.sglang_source = r.boolean(cj, cp, "sglang_source", false);
  // The qualification and each extra step have 30 minutes each (their steps' limits).
  const long steps_s =
      kStepS * ((s.qualify.empty() ? 0 : 1) + static_cast<long>(s.extra_steps.size()));
  if (s.timeout_minutes * 60L < s.ctest.timeout_s + kBuildS + steps_s)
    r.fail(join(p, "timeout_minutes"),
           "is shorter than ctest.timeout_s + " + std::to_string(kBuildS / 60) +
               " min for the container, dependencies and build + " + std::to_string(kStepS / 60) +
               " min per qualify or extra step = " +
               std::to_string((s.ctest.timeout_s + kBuildS + steps_s) / 60) + " min",
           &j.at("timeout_minutes"));
  s.ctest.families = r.strings(cj, cp, "families", true, true);
  static const std::regex family_re("^[a-z][a-z0-9_]*$");
  std::set<std::string> seen;
  for (size_t i = 0; i < s.ctest.families.size(); ++i) {
    if (!std::regex_match(s.ctest.families[i], family_re))
      r.fail(at(join(cp, "families"), i), "must be a family name like kv_store",
             &cj.at("families")[i]);
    if (!seen.insert(s.ctest.families[i]).second)
      r.fail(at(join(cp, "families"), i), "is listed twice", &cj.at("families")[i]);
  }
  const std::string kp = join(cp, "checks");
  if (!cj.contains("checks")) r.fail(kp, "is required", nullptr);
  const json& kj = cj.at("checks");
  if (!kj.is_array() || kj.empty())
    r.fail(kp, "must be a non-empty array of {\"name\": ..., \"match\": regex}", &kj);
  for (size_t i = 0; i < kj.size(); ++i) {
    const std::string ip = at(kp, i);
    r.keys(kj[i], ip, {"name", "match"}, {"name", "match"});
    const std::string name = r.str(kj[i], ip, "name", true);
    const std::string match = r.str(kj[i], ip, "match", true);
    try {
      std::regex check(match, std::regex::ECMAScript | std::regex::icase);
    } catch (const std::regex_error& e) {
      r.fail(join(ip, "match"), std::string("is not a valid regular expression: ") + e.what(),
             &kj[i].at("match"));
    }
    s.ctest.checks.emplace_back(name, match);
  }
}

void parse_suite(const Reader& r, const json& j, const std::string& p, Suite& s) {
  r.keys(
      j, p,
      {"name", "job", "kind", "schedule", "description", "runner", "timeout_minutes", "container",
       "env", "sources", "build", "server", "run", "retries", "ctest", "qualify", "extra_steps"},
      {"name", "kind", "runner", "timeout_minutes", "container"});
  s.name = r.matching(j, p, "name", true, name_re(),
                      "lower-case letters, digits and '-', starting with a letter");
  for (const char* word : {"y", "n", "yes", "no", "on", "off", "true", "false", "null"})
    if (s.name == word) r.fail(join(p, "name"), "must not be a YAML keyword", &j.at("name"));
  const std::string kind = r.str(j, p, "kind", true);
  if (kind == "kernels")
    s.kind = Kind::kKernels;
  else if (kind == "e2e")
    s.kind = Kind::kE2e;
  else
    r.fail(join(p, "kind"), "must be \"kernels\" or \"e2e\"", &j.at("kind"));
  const std::string schedule = r.str(j, p, "schedule", false, "nightly");
  if (schedule == "weekly")
    s.schedule = Schedule::kWeekly;
  else if (schedule != "nightly")
    r.fail(join(p, "schedule"), "must be \"nightly\" or \"weekly\"", &j.at("schedule"));
  s.description = r.str(j, p, "description", false);
  s.runner = r.str(j, p, "runner", true);
  s.job = r.matching(j, p, "job", false, name_re(),
                     "lower-case letters, digits and '-', starting with a letter", s.name);
  s.timeout_minutes = r.integer(j, p, "timeout_minutes", 1, 4320, true, 60);
  parse_container(r, j, p, s.container);
  s.env = r.env(j, p, "env");
  if (j.contains("sources")) {
    const std::string sp = join(p, "sources");
    r.object(j.at("sources"), sp);
    for (auto it = j.at("sources").begin(); it != j.at("sources").end(); ++it) {
      const auto& known = launch_fields();
      if (std::find(known.begin(), known.end(), it.key()) == known.end()) {
        std::string list;
        for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
        r.fail(join(sp, it.key()), "is not a launch field (known: " + list + ")", &it.value());
      }
      s.sources[it.key()] = r.str(j.at("sources"), sp, it.key().c_str(), true);
    }
  }
  if (s.kind == Kind::kE2e)
    parse_e2e(r, j, p, s);
  else
    parse_kernels(r, j, p, s);
}

}  // namespace

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

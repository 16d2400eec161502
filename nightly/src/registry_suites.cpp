// The registry's suites (nightly/suites.json suites[]): container, e2e and kernels fields, each
// checked, a problem naming its path and value.
#include <algorithm>
#include <set>
#include <sstream>

#include "registry_reader.hpp"
#include "report/gates.hpp"  // dsv4-eval's gate parser: the registry accepts what dsv4-eval does

namespace dsv4::nightly::detail {

namespace {

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

}  // namespace

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

}  // namespace dsv4::nightly::detail

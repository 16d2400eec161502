// Loader of nightly/suites.json: every field is checked, and a problem names its path and value.
#include "registry.hpp"

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

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
const std::regex& gate_re() {
  static const std::regex r(R"(^[a-z_][a-z0-9_]* *(>=|<=|==|!=|>|<) *-?[0-9]+(\.[0-9]+)?$)");
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

bool mentions(const std::vector<std::string>& args, const std::string& token) {
  for (const auto& a : args)
    if (a.find(token) != std::string::npos) return true;
  return false;
}

void parse_suite(const Reader& r, const json& j, const std::string& p, Suite& s) {
  r.keys(j, p,
         {"name", "kind", "description", "runs_on", "timeout_minutes", "container", "env", "build",
          "server", "run", "ctest"},
         {"name", "kind", "runs_on", "timeout_minutes", "build"});
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
  s.description = r.str(j, p, "description", false);
  s.runs_on = r.matching(j, p, "runs_on", true, word_re(), "a runner label without spaces");
  s.timeout_minutes = r.integer(j, p, "timeout_minutes", 1, 4320, true, 60);
  if (j.contains("container")) {
    const std::string cp = join(p, "container");
    r.keys(j.at("container"), cp, {"image", "options"}, {"image"});
    s.container.image = r.str(j.at("container"), cp, "image", true);
    s.container.options = r.str(j.at("container"), cp, "options", false);
  }
  s.env = r.env(j, p, "env");

  const std::string bp = join(p, "build");
  r.keys(j.at("build"), bp, {"preset", "targets"}, {"preset"});
  s.build.preset = r.matching(j.at("build"), bp, "preset", true, name_re(), "a preset name");
  s.build.targets = r.strings(j.at("build"), bp, "targets", false, false);

  if (s.kind == Kind::kE2e) {
    if (j.contains("ctest")) r.fail(join(p, "ctest"), "is for kernels suites only", &j.at("ctest"));
    if (!j.contains("server")) r.fail(join(p, "server"), "is required for an e2e suite", nullptr);
    if (!j.contains("run")) r.fail(join(p, "run"), "is required for an e2e suite", nullptr);
    const std::string sp = join(p, "server");
    const json& sj = j.at("server");
    r.keys(sj, sp, {"command", "env", "port", "ready_timeout_s", "stop_grace_s"}, {"command"});
    s.server.command = r.strings(sj, sp, "command", true, true);
    r.placeholders(s.server.command, join(sp, "command"), sj.at("command"),
                   {"host", "port", "port_file", "out"});
    if (!mentions(s.server.command, "{port}") && !mentions(s.server.command, "{port_file}"))
      r.fail(join(sp, "command"), "must contain {port} or {port_file}", &sj.at("command"));
    s.server.env = r.env(sj, sp, "env");
    s.server.port = r.integer(sj, sp, "port", 0, 65535, false, 0);
    s.server.ready_timeout_s = r.integer(sj, sp, "ready_timeout_s", 1, 86400, false, 1800);
    s.server.stop_grace_s = r.integer(sj, sp, "stop_grace_s", 1, 600, false, 30);

    const std::string rp = join(p, "run");
    const json& rj = j.at("run");
    r.keys(rj, rp, {"command", "gates", "timeout_s"}, {"command"});
    s.run.command = r.strings(rj, rp, "command", true, true);
    r.placeholders(s.run.command, join(rp, "command"), rj.at("command"), {"url", "out"});
    if (!mentions(s.run.command, "{url}"))
      r.fail(join(rp, "command"), "must pass the server's {url}", &rj.at("command"));
    s.run.gates = r.strings(rj, rp, "gates", false, false);
    for (size_t i = 0; i < s.run.gates.size(); ++i)
      if (!std::regex_match(s.run.gates[i], gate_re()))
        r.fail(at(join(rp, "gates"), i),
               "must read 'metric op number', op one of > >= < <= == !=", &rj.at("gates")[i]);
    s.run.timeout_s = r.integer(rj, rp, "timeout_s", 1, 7 * 86400, false, 3600);
  } else {
    for (const char* k : {"server", "run"})
      if (j.contains(k)) r.fail(join(p, k), "is for e2e suites only", &j.at(k));
    if (!j.contains("ctest")) r.fail(join(p, "ctest"), "is required for a kernels suite", nullptr);
    const std::string cp = join(p, "ctest");
    const json& cj = j.at("ctest");
    r.keys(cj, cp,
           {"test_preset", "test_dir", "label", "parallel", "slots_per_gpu", "timeout_s",
            "families", "checks"},
           {"label"});
    s.ctest.test_preset = r.matching(cj, cp, "test_preset", false, name_re(), "a preset name");
    s.ctest.test_dir = r.str(cj, cp, "test_dir", false);
    if (s.ctest.test_preset.empty() == s.ctest.test_dir.empty())
      r.fail(cp, "needs exactly one of test_preset and test_dir", &cj);
    s.ctest.label = r.matching(cj, cp, "label", true, word_re(), "a CTest label");
    s.ctest.parallel = r.integer(cj, cp, "parallel", 1, 1024, false, 1);
    s.ctest.slots_per_gpu = r.integer(cj, cp, "slots_per_gpu", 1, 64, false, 1);
    s.ctest.timeout_s = r.integer(cj, cp, "timeout_s", 1, 7 * 86400, false, 3600);
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
}

}  // namespace

RegistryError::RegistryError(std::string file, std::string path, std::string problem,
                             std::string value)
    : std::runtime_error(file + ": " + path + ": " + problem + " (got " + value + ")"),
      path_(std::move(path)),
      value_(std::move(value)) {}

const char* kind_name(Kind k) { return k == Kind::kE2e ? "e2e" : "kernels"; }

const Suite* Registry::find(const std::string& name) const {
  for (const auto& s : suites)
    if (s.name == name) return &s;
  return nullptr;
}

Registry parse_registry(const json& doc, const std::string& file) {
  Reader r(file);
  Registry reg;
  reg.file = file;
  r.keys(doc, "(top level)", {"$comment", "schema", "nightly", "pr", "suites"},
         {"schema", "nightly", "pr", "suites"});
  if (!doc.at("schema").is_number_integer() || doc.at("schema").get<long>() != 1)
    r.fail("schema", "must be 1 (the version this loader reads)", &doc.at("schema"));

  const json& n = doc.at("nightly");
  r.keys(n, "nightly", {"name", "cron", "artifact_dir", "retention_days", "report_runs_on"},
         {"cron"});
  reg.nightly.name = r.str(n, "nightly", "name", false, "nightly");
  reg.nightly.cron = r.str(n, "nightly", "cron", true);
  static const std::regex cron_re(R"(^\S+( \S+){4}$)");
  if (!std::regex_match(reg.nightly.cron, cron_re))
    r.fail("nightly.cron", "must have five fields (minute hour day month weekday)", &n.at("cron"));
  reg.nightly.artifact_dir = r.matching(n, "nightly", "artifact_dir", false, word_re(),
                                        "a relative path without spaces", "out/nightly");
  reg.nightly.retention_days = r.integer(n, "nightly", "retention_days", 1, 90, false, 14);
  reg.nightly.report_runs_on = r.matching(n, "nightly", "report_runs_on", false, word_re(),
                                          "a runner label", "ubuntu-latest");

  const json& pr = doc.at("pr");
  r.keys(pr, "pr",
         {"name", "runs_on", "image", "timeout_minutes", "deps_command", "test_command", "junit"},
         {"deps_command", "test_command"});
  reg.pr.name = r.str(pr, "pr", "name", false, "pr");
  reg.pr.runs_on =
      r.matching(pr, "pr", "runs_on", false, word_re(), "a runner label", "ubuntu-latest");
  reg.pr.image = r.str(pr, "pr", "image", false);
  reg.pr.timeout_minutes = r.integer(pr, "pr", "timeout_minutes", 1, 360, false, 40);
  reg.pr.deps_command = r.str(pr, "pr", "deps_command", true);
  reg.pr.test_command = r.str(pr, "pr", "test_command", true);
  reg.pr.junit = r.matching(pr, "pr", "junit", false, word_re(), "a relative path without spaces");

  const json& suites = doc.at("suites");
  if (!suites.is_array() || suites.empty()) r.fail("suites", "must be a non-empty array", &suites);
  std::set<std::string> names;
  for (size_t i = 0; i < suites.size(); ++i) {
    Suite s;
    parse_suite(r, suites[i], at("suites", i), s);
    if (s.name == "report")
      r.fail(at("suites", i) + ".name", "\"report\" is the name of the final job",
             &suites[i].at("name"));
    if (!names.insert(s.name).second)
      r.fail(at("suites", i) + ".name", "is registered twice", &suites[i].at("name"));
    reg.suites.push_back(std::move(s));
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

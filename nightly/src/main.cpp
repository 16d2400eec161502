// dsv4-nightly: renders and checks the workflows from nightly/suites.json, runs a suite, and runs
// the GPU tests under compute-sanitizer.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "junit.hpp"
#include "registry.hpp"
#include "render.hpp"
#include "run_suite.hpp"

namespace fs = std::filesystem;
using namespace dsv4::nightly;

namespace {

const char* kUsageText = R"(usage: dsv4-nightly <command> [options]

commands:
  validate [--registry F]                       load and check the registry, list its suites
  render   [--registry F] [--out DIR]           write nightly.yml and pr.yml into DIR
  check    [--registry F] [--workflows DIR] [--presets CMakePresets.json]
                                                fail when the committed workflows differ from the
                                                rendering, or a suite has no job, or a job runs an
                                                unregistered suite, or a preset is unknown
  run SUITE [--registry F] [--out DIR] [--source-dir DIR] [--build-dir DIR]
                                                run one suite (nightly/run-suite wraps this)
  sanitize --build-dir DIR [--tool memcheck] [--label gpu] [--out DIR] [--sanitizer PATH]
           [--timeout-s N] [--skip-unless-env VAR] [-- extra compute-sanitizer options]
                                                the labelled tests under compute-sanitizer
  table --junit FILE --suite NAME [--registry F] the families x checks table of a JUnit file

defaults: --registry nightly/suites.json, --workflows/--out .github/workflows
exit codes: 0 pass, 1 check or gate failed, 2 bad usage or registry, 3 could not run
)";

struct Args {
  std::map<std::string, std::string> opts;
  std::vector<std::string> positional;
  std::vector<std::string> rest;  // after --
};

bool parse_args(int argc, char** argv, const std::set<std::string>& known, Args& a) {
  for (int i = 0; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--") {
      for (++i; i < argc; ++i) a.rest.push_back(argv[i]);
      break;
    }
    if (s.rfind("--", 0) == 0) {
      std::string key = s.substr(2), value;
      const size_t eq = key.find('=');
      if (eq != std::string::npos) {
        value = key.substr(eq + 1);
        key = key.substr(0, eq);
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        std::cerr << "dsv4-nightly: option --" << key << " needs a value\n";
        return false;
      }
      if (!known.count(key)) {
        std::cerr << "dsv4-nightly: unknown option --" << key << "\n";
        return false;
      }
      a.opts[key] = value;
    } else {
      a.positional.push_back(s);
    }
  }
  return true;
}

std::string opt(const Args& a, const std::string& k, const std::string& def) {
  auto it = a.opts.find(k);
  return it == a.opts.end() ? def : it->second;
}

// Build and test presets named by the suites must exist in CMakePresets.json.
std::vector<std::string> check_presets(const Registry& reg, const std::string& presets_path) {
  std::vector<std::string> problems;
  nlohmann::json doc;
  try {
    std::ifstream in(presets_path);
    if (!in) return {presets_path + " cannot be read"};
    doc = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    return {presets_path + " is not valid JSON: " + e.what()};
  }
  auto names = [&](const char* key) {
    std::set<std::string> out;
    for (const auto& p : doc.value(key, nlohmann::json::array()))
      if (!p.value("hidden", false)) out.insert(p.value("name", ""));
    return out;
  };
  const auto configure = names("configurePresets"), build = names("buildPresets"),
             test = names("testPresets");
  for (size_t i = 0; i < reg.suites.size(); ++i) {
    const Suite& s = reg.suites[i];
    const std::string where = "suites[" + std::to_string(i) + "] (" + s.name + ")";
    if (!configure.count(s.build.preset) || !build.count(s.build.preset))
      problems.push_back(where + ".build.preset: '" + s.build.preset +
                         "' is not a configure and build preset of " + presets_path);
    if (s.kind == Kind::kKernels && !s.ctest.test_preset.empty() &&
        !test.count(s.ctest.test_preset))
      problems.push_back(where + ".ctest.test_preset: '" + s.ctest.test_preset +
                         "' is not a test preset of " + presets_path);
  }
  return problems;
}

int cmd_validate(const Args& a) {
  const Registry reg = load_registry(opt(a, "registry", "nightly/suites.json"));
  std::cout << reg.file << ": " << reg.suites.size() << " suites\n";
  for (const auto& s : reg.suites)
    std::cout << "  " << s.name << "  " << kind_name(s.kind) << "  " << s.runs_on << "  "
              << s.timeout_minutes << " min\n";
  return 0;
}

int cmd_render(const Args& a) {
  const Registry reg = load_registry(opt(a, "registry", "nightly/suites.json"));
  const std::string dir = opt(a, "out", ".github/workflows");
  fs::create_directories(dir);
  for (const auto& f : render_all(reg)) {
    write_text(dir + "/" + f.name, f.text);
    std::cout << "wrote " << dir << "/" << f.name << "\n";
  }
  return 0;
}

int cmd_check(const Args& a) {
  const Registry reg = load_registry(opt(a, "registry", "nightly/suites.json"));
  const std::string dir = opt(a, "workflows", ".github/workflows");
  auto problems = check_workflows(reg, dir);
  const bool drift = !problems.empty();
  if (a.opts.count("presets"))
    for (auto& p : check_presets(reg, a.opts.at("presets"))) problems.push_back(p);
  if (problems.empty()) {
    std::cout << "workflows in " << dir << " match " << reg.file << " (" << reg.suites.size()
              << " suites, each with its job)\n";
    return 0;
  }
  for (const auto& p : problems) std::cerr << "FAIL " << p << "\n";
  if (drift)
    std::cerr << "\nRe-render with: dsv4-nightly render --registry " << reg.file << " --out " << dir
              << "\n";
  return 1;
}

int cmd_run(const Args& a) {
  if (a.positional.size() != 1) {
    std::cerr << "dsv4-nightly run: name one suite\n" << kUsageText;
    return kUsage;
  }
  const Registry reg = load_registry(opt(a, "registry", "nightly/suites.json"));
  RunOptions o;
  o.suite = a.positional[0];
  o.out = opt(a, "out", "");
  o.source_dir = opt(a, "source-dir", ".");
  o.build_dir = opt(a, "build-dir", "");
  return run_suite(reg, o);
}

int cmd_sanitize(const Args& a) {
  const std::string env = opt(a, "skip-unless-env", "");
  if (!env.empty() && (std::getenv(env.c_str()) == nullptr || !*std::getenv(env.c_str()))) {
    std::cout << "skipped: " << env
              << " is not set; `ctest --preset sanitizer` sets it (nightly/README.md)\n";
    return 77;
  }
  SanitizeOptions o;
  o.build_dir = opt(a, "build-dir", "");
  if (o.build_dir.empty()) {
    std::cerr << "dsv4-nightly sanitize: --build-dir is required\n";
    return kUsage;
  }
  o.tool = opt(a, "tool", "memcheck");
  o.label = opt(a, "label", "gpu");
  o.out = opt(a, "out", "");
  o.sanitizer = opt(a, "sanitizer", "");
  o.timeout_s = std::atoi(opt(a, "timeout-s", "7200").c_str());
  if (o.timeout_s <= 0) {
    std::cerr << "dsv4-nightly sanitize: --timeout-s must be a positive number of seconds\n";
    return kUsage;
  }
  o.extra_args = a.rest;
  return sanitize(o);
}

int cmd_table(const Args& a) {
  const Registry reg = load_registry(opt(a, "registry", "nightly/suites.json"));
  const Suite* s = reg.find(opt(a, "suite", ""));
  if (s == nullptr || s->kind != Kind::kKernels) {
    std::cerr << "dsv4-nightly table: --suite must name a kernels suite of " << reg.file << "\n";
    return kUsage;
  }
  std::cout << summary_table(s->name, read_junit(opt(a, "junit", "")), s->ctest);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsageText;
    return kUsage;
  }
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::cout << kUsageText;
    return 0;
  }
  static const std::map<std::string, std::pair<int (*)(const Args&), std::set<std::string>>>
      commands = {
          {"validate", {cmd_validate, {"registry"}}},
          {"render", {cmd_render, {"registry", "out"}}},
          {"check", {cmd_check, {"registry", "workflows", "presets"}}},
          {"run", {cmd_run, {"registry", "out", "source-dir", "build-dir"}}},
          {"sanitize",
           {cmd_sanitize,
            {"build-dir", "tool", "label", "out", "sanitizer", "timeout-s", "skip-unless-env"}}},
          {"table", {cmd_table, {"registry", "junit", "suite"}}},
      };
  auto it = commands.find(cmd);
  if (it == commands.end()) {
    std::cerr << "dsv4-nightly: unknown command '" << cmd << "'\n" << kUsageText;
    return kUsage;
  }
  Args a;
  if (!parse_args(argc - 2, argv + 2, it->second.second, a)) return kUsage;
  try {
    return it->second.first(a);
  } catch (const RegistryError& e) {
    std::cerr << "dsv4-nightly: " << e.what() << "\n";
    return kUsage;
  } catch (const std::exception& e) {
    std::cerr << "dsv4-nightly " << cmd << ": " << e.what() << "\n";
    return kCouldNotRun;
  }
}

// dsv4-nightly: renders and checks the workflows from nightly/suites.json and the templates, runs a
// suite, triages a run's failures against earlier runs, and runs the GPU tests under
// compute-sanitizer.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include <cxxopts.hpp>

#include "junit.hpp"
#include "process.hpp"
#include "registry.hpp"
#include "render.hpp"
#include "run_suite.hpp"
#include "triage.hpp"

namespace fs = std::filesystem;
using namespace dsv4::nightly;

namespace {

const char* kUsageText =
    R"(usage: dsv4-nightly <command> [options]   (dsv4-nightly <command> --help)

commands:
  validate  load and check the registry, list its suites
  render    write the workflows (nightly-suites.yml, its callers, auto-retry.yml, pr.yml) from the
            registry and templates
  check     fail when the committed workflows differ from the rendering, a suite has no job, a job
            runs an unregistered suite, a preset is unknown, or a preset or test runs in no workflow
  run       run one suite (nightly/run-suite wraps this)
  triage    label this run's failures new or pre-existing against earlier runs' artifacts
  dormant   list the tests that skipped in every run of every workflow given (exit 1 when any)
  sanitize  the labelled tests under compute-sanitizer
  table     the families x checks table of a JUnit file

exit codes: 0 pass, 1 check or gate failed, 2 bad usage or registry, 3 could not run
)";

struct Usage : std::runtime_error {
  using std::runtime_error::runtime_error;
};

cxxopts::Options options(const std::string& cmd, const std::string& what) {
  cxxopts::Options o("dsv4-nightly " + cmd, what);
  o.add_options()("h,help", "print this help");
  return o;
}

void add_registry(cxxopts::Options& o) {
  o.add_options()("registry", "the suite registry",
                  cxxopts::value<std::string>()->default_value("nightly/suites.json"));
}

void add_templates(cxxopts::Options& o) {
  o.add_options()("templates", "workflow templates folder",
                  cxxopts::value<std::string>()->default_value(default_templates_dir()));
}

// Parses; prints the help and returns nothing on --help; throws Usage on a bad option.
std::optional<cxxopts::ParseResult> parse(cxxopts::Options& o, int argc, char** argv) {
  try {
    auto r = o.parse(argc, argv);
    if (r.count("help")) {
      std::cout << o.help();
      return std::nullopt;
    }
    if (!r.unmatched().empty()) throw Usage("unexpected argument '" + r.unmatched().front() + "'");
    return r;
  } catch (const cxxopts::exceptions::exception& e) {
    throw Usage(e.what());
  }
}

std::string str(const cxxopts::ParseResult& r, const char* k) {
  return r.count(k) || r[k].has_default() ? r[k].as<std::string>() : "";
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
    if (s.kind == Kind::kKernels &&
        (!configure.count(s.build.preset) || !build.count(s.build.preset)))
      problems.push_back(where + ".build.preset: '" + s.build.preset +
                         "' is not a configure and build preset of " + presets_path);
    if (s.kind == Kind::kKernels && !s.ctest.test_preset.empty() &&
        !test.count(s.ctest.test_preset))
      problems.push_back(where + ".ctest.test_preset: '" + s.ctest.test_preset +
                         "' is not a test preset of " + presets_path);
  }
  return problems;
}

// Tests of a build tree with their labels, from `ctest --show-only=json-v1`.
std::vector<std::pair<std::string, std::vector<std::string>>> list_tests(const std::string& build) {
  const std::string out = build + "/dsv4-nightly-tests.json";
  fs::remove(out);  // the process log appends
  Process p =
      Process::start({{"ctest", "--test-dir", build, "--show-only=json-v1"}, {}, out, false, ""});
  auto rc = p.wait(120);
  if (!rc || *rc != 0) throw std::runtime_error("ctest --show-only=json-v1 failed in " + build);
  const auto doc = nlohmann::json::parse(read_text(out));
  std::vector<std::pair<std::string, std::vector<std::string>>> tests;
  for (const auto& t : doc.value("tests", nlohmann::json::array())) {
    std::vector<std::string> labels;
    for (const auto& prop : t.value("properties", nlohmann::json::array()))
      if (prop.value("name", "") == "LABELS")
        for (const auto& l : prop.value("value", nlohmann::json::array())) labels.push_back(l);
    tests.emplace_back(t.value("name", ""), labels);
  }
  return tests;
}

int cmd_validate(int argc, char** argv) {
  auto o = options("validate", "Load and check the registry, list its suites");
  add_registry(o);
  const auto r = parse(o, argc, argv);
  if (!r) return 0;
  const Registry reg = load_registry(str(*r, "registry"));
  std::cout << reg.file << ": " << reg.suites.size() << " suites\n";
  for (const auto& s : reg.suites)
    std::cout << "  " << s.name << "  " << kind_name(s.kind) << "  "
              << (s.schedule == Schedule::kWeekly ? "weekly" : "nightly") << "  job " << s.job
              << "  " << s.runner << " (" << s.runs_on << ")"
              << "  " << s.timeout_minutes << " min\n";
  for (const auto& m : reg.manual)
    std::cout << "  manual " << (m.test ? "test" : "configure") << " preset " << m.preset << ": "
              << m.reason << "\n";
  return 0;
}

int cmd_render(int argc, char** argv) {
  auto o = options("render", "Write the workflows rendered from the registry and the templates");
  add_registry(o);
  add_templates(o);
  o.add_options()("out", "folder",
                  cxxopts::value<std::string>()->default_value(".github/workflows"));
  const auto r = parse(o, argc, argv);
  if (!r) return 0;
  const Registry reg = load_registry(str(*r, "registry"));
  const std::string dir = str(*r, "out");
  fs::create_directories(dir);
  for (const auto& f : render_all(reg, str(*r, "templates"))) {
    fs::create_directories(fs::path(dir + "/" + f.name).parent_path());
    write_text(dir + "/" + f.name, f.text);
    std::cout << "wrote " << dir << "/" << f.name << "\n";
  }
  return 0;
}

int cmd_check(int argc, char** argv) {
  auto o = options("check", "Drift, unknown presets, and presets or tests no workflow runs");
  add_registry(o);
  add_templates(o);
  o.add_options()("workflows", "committed workflows",
                  cxxopts::value<std::string>()->default_value(".github/workflows"))(
      "presets", "CMakePresets.json (unknown and dormant presets)", cxxopts::value<std::string>())(
      "build-dir", "a configured build: its tests must each be run by some workflow",
      cxxopts::value<std::string>());
  const auto r = parse(o, argc, argv);
  if (!r) return 0;
  const Registry reg = load_registry(str(*r, "registry"));
  const std::string dir = str(*r, "workflows"), templates = str(*r, "templates");
  auto problems = check_workflows(reg, dir, templates);
  const bool drift = !problems.empty();
  if (r->count("presets")) {
    const std::string presets = str(*r, "presets");
    for (auto& p : check_presets(reg, presets)) problems.push_back(p);
    std::vector<std::pair<std::string, std::vector<std::string>>> tests;
    if (r->count("build-dir")) tests = list_tests(str(*r, "build-dir"));
    const std::string source = fs::path(presets).parent_path().string();
    for (auto& p : check_dormant(reg, source.empty() ? "." : source, presets,
                                 render_all(reg, templates), tests))
      problems.push_back(p);
    if (problems.empty())
      std::cout << "every preset is run by a workflow or listed as manual; " << tests.size()
                << " tests, each selected by a workflow\n";
  }
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

int cmd_run(int argc, char** argv) {
  auto o = options("run", "Run one suite (nightly/run-suite wraps this)");
  add_registry(o);
  o.add_options()("out", "artifact folder", cxxopts::value<std::string>()->default_value(""))(
      "source-dir", "repository root", cxxopts::value<std::string>()->default_value("."))(
      "build-dir", "build whose tools go first on PATH",
      cxxopts::value<std::string>()->default_value(""))("suite", "suite name",
                                                        cxxopts::value<std::vector<std::string>>());
  o.parse_positional({"suite"});
  o.positional_help("SUITE");
  const auto r = parse(o, argc, argv);
  if (!r) return 0;
  if (!r->count("suite") || (*r)["suite"].as<std::vector<std::string>>().size() != 1)
    throw Usage("name one suite");
  const Registry reg = load_registry(str(*r, "registry"));
  RunOptions ro;
  ro.suite = (*r)["suite"].as<std::vector<std::string>>()[0];
  ro.out = str(*r, "out");
  ro.source_dir = str(*r, "source-dir");
  ro.build_dir = str(*r, "build-dir");
  return run_suite(reg, ro);
}

int cmd_triage(int argc, char** argv) {
  auto o = options("triage", "Label this run's failures new or pre-existing");
  o.add_options()("current", "this run's artifacts", cxxopts::value<std::string>())(
      "previous", "one folder per earlier run", cxxopts::value<std::string>()->default_value(""))(
      "runs", "earlier runs asked for", cxxopts::value<int>()->default_value("3"))(
      "needs-env", "variable holding the report job's toJSON(needs)",
      cxxopts::value<std::string>()->default_value("NEEDS"))(
      "summary", "append the Markdown here (e.g. $GITHUB_STEP_SUMMARY)",
      cxxopts::value<std::string>()->default_value(""))(
      "registry", "the suite registry: which suites each job runs",
      cxxopts::value<std::string>()->default_value(""));
  const auto r = parse(o, argc, argv);
  if (!r) return 0;
  if (!r->count("current")) throw Usage("--current is required");
  TriageOptions t;
  t.current = str(*r, "current");
  t.previous = str(*r, "previous");
  t.runs = (*r)["runs"].as<int>();
  if (const char* n = std::getenv(str(*r, "needs-env").c_str()); n && *n)
    t.needs = nlohmann::json::parse(n);
  if (!str(*r, "registry").empty())
    for (const auto& s : load_registry(str(*r, "registry")).suites)
      t.job_suites[s.job].push_back(s.name);
  int fresh = 0;
  const std::string md = triage(t, fresh);
  std::cout << md;
  if (!str(*r, "summary").empty()) append_text(str(*r, "summary"), md + "\n");
  return 0;
}

int cmd_dormant(int argc, char** argv) {
  auto o = options("dormant", "Tests that skipped in every run given (each folder one run)");
  o.add_options()("summary", "append the Markdown here (e.g. $GITHUB_STEP_SUMMARY)",
                  cxxopts::value<std::string>()->default_value(""))(
      "runs", "run folders", cxxopts::value<std::vector<std::string>>());
  o.parse_positional({"runs"});
  o.positional_help("RUN_DIR...");
  const auto r = parse(o, argc, argv);
  if (!r) return 0;
  if (!r->count("runs")) throw Usage("name at least one run folder");
  int runs = 0, tests = 0;
  const auto dormant = dormant_tests((*r)["runs"].as<std::vector<std::string>>(), runs, tests);
  std::ostringstream md;
  md << "## Dormant tests: skipped in every run that has them\n\n";
  if (runs == 0) {
    md << "No JUnit file in any of the run folders given: nothing could be checked.\n";
    std::cout << md.str();
    if (!str(*r, "summary").empty()) append_text(str(*r, "summary"), md.str() + "\n");
    return kCouldNotRun;
  }
  md << runs << " runs read, " << tests << " tests; " << dormant.size()
     << " skipped in every run that has them.\n";
  if (!dormant.empty()) {
    md << "\n| test | runs | skip reason |\n|---|---|---|\n";
    for (const auto& d : dormant) {
      std::string why = d.reason;
      for (auto& c : why)
        if (c == '|' || c == '\n') c = ' ';
      md << "| `" << d.name << "` | " << d.runs << " | " << why << " |\n";
    }
    md << "\nA dormant test checks nothing: give it a label a workflow runs where it can run "
          "(e.g. gpu), or set what it needs in a suite.\n";
  }
  std::cout << md.str();
  if (!str(*r, "summary").empty()) append_text(str(*r, "summary"), md.str() + "\n");
  return dormant.empty() ? kPass : kGateFailed;
}

int cmd_sanitize(int argc, char** argv) {
  // Everything after "--" goes to compute-sanitizer.
  std::vector<std::string> rest;
  for (int i = 0; i < argc; ++i)
    if (std::strcmp(argv[i], "--") == 0) {
      for (int j = i + 1; j < argc; ++j) rest.push_back(argv[j]);
      argc = i;
      break;
    }
  auto o = options("sanitize", "The labelled tests under compute-sanitizer");
  o.add_options()("build-dir", "cuda build", cxxopts::value<std::string>())(
      "tool", "compute-sanitizer tool", cxxopts::value<std::string>()->default_value("memcheck"))(
      "label", "ctest label", cxxopts::value<std::string>()->default_value("gpu"))(
      "out", "report folder", cxxopts::value<std::string>()->default_value(""))(
      "sanitizer", "compute-sanitizer binary", cxxopts::value<std::string>()->default_value(""))(
      "timeout-s", "per test executable", cxxopts::value<int>()->default_value("7200"))(
      "gtest-filter", "GoogleTest filter every executable runs under (a slow tool's subset)",
      cxxopts::value<std::string>()->default_value(""))(
      "skip-unless-env", "report skipped (77) unless this variable is set",
      cxxopts::value<std::string>()->default_value(""));
  o.positional_help("[-- compute-sanitizer options]");
  const auto r = parse(o, argc, argv);
  if (!r) return 0;
  const std::string env = str(*r, "skip-unless-env");
  if (!env.empty() && (std::getenv(env.c_str()) == nullptr || !*std::getenv(env.c_str()))) {
    std::cout << "skipped: " << env
              << " is not set; `ctest --preset sanitizer` sets it (nightly/README.md)\n";
    return 77;
  }
  SanitizeOptions so;
  if (!r->count("build-dir")) throw Usage("--build-dir is required");
  so.build_dir = str(*r, "build-dir");
  so.tool = str(*r, "tool");
  so.label = str(*r, "label");
  so.out = str(*r, "out");
  so.sanitizer = str(*r, "sanitizer");
  so.timeout_s = (*r)["timeout-s"].as<int>();
  if (so.timeout_s <= 0) throw Usage("--timeout-s must be a positive number of seconds");
  so.extra_args = rest;
  so.gtest_filter = str(*r, "gtest-filter");
  return sanitize(so);
}

int cmd_table(int argc, char** argv) {
  auto o = options("table", "The families x checks table of a JUnit file");
  add_registry(o);
  o.add_options()("junit", "JUnit XML", cxxopts::value<std::string>())(
      "suite", "a kernels suite", cxxopts::value<std::string>()->default_value(""));
  const auto r = parse(o, argc, argv);
  if (!r) return 0;
  const Registry reg = load_registry(str(*r, "registry"));
  const Suite* s = reg.find(str(*r, "suite"));
  if (s == nullptr || s->kind != Kind::kKernels)
    throw Usage("--suite must name a kernels suite of " + reg.file);
  if (!r->count("junit")) throw Usage("--junit is required");
  std::cout << summary_table(s->name, read_junit(str(*r, "junit")), s->ctest);
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
  static const std::map<std::string, int (*)(int, char**)> commands = {
      {"validate", cmd_validate}, {"render", cmd_render}, {"check", cmd_check},
      {"run", cmd_run},           {"triage", cmd_triage}, {"sanitize", cmd_sanitize},
      {"dormant", cmd_dormant},   {"table", cmd_table}};
  auto it = commands.find(cmd);
  if (it == commands.end()) {
    std::cerr << "dsv4-nightly: unknown command '" << cmd << "'\n" << kUsageText;
    return kUsage;
  }
  try {
    // cxxopts sees the command as its program name.
    return it->second(argc - 1, argv + 1);
  } catch (const Usage& e) {
    std::cerr << "dsv4-nightly " << cmd << ": " << e.what() << " (dsv4-nightly " << cmd
              << " --help)\n";
    return kUsage;
  } catch (const RegistryError& e) {
    std::cerr << "dsv4-nightly: " << e.what() << "\n";
    return kUsage;
  } catch (const std::exception& e) {
    std::cerr << "dsv4-nightly " << cmd << ": " << e.what() << "\n";
    return kCouldNotRun;
  }
}

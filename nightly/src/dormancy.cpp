// Dormancy: the configure and test presets and the tests that no workflow runs (check_dormant,
// declared in render.hpp).
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "render.hpp"  // and registry.hpp: nlohmann::json
#include "run_suite.hpp"

namespace dsv4::nightly {

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

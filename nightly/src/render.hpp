// Renders the GitHub workflows from the registry and the templates in nightly/templates/, and
// checks the committed ones for drift and for presets and tests that no workflow runs.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "registry.hpp"

namespace dsv4::nightly {

// The rendered workflows: file name (relative to .github/workflows) and text.
struct RenderedFile {
  std::string name;
  std::string text;
};

// The compiled-in template folder (nightly/templates of the source tree).
std::string default_templates_dir();

// Replaces every @@key@@ of `text` from `vars`; throws std::invalid_argument naming a key that
// `vars` lacks.
std::string fill(const std::string& text, const std::map<std::string, std::string>& vars);

std::vector<RenderedFile> render_all(const Registry& reg, const std::string& templates_dir);

// Structural check of the reusable workflow's text: every registered suite has a job that runs
// it (its `job`), every job runs one (or is the tools or report job). Returns the problems found.
std::vector<std::string> check_jobs(const Registry& reg, const std::string& workflow_text);

// Compares the committed workflows in `dir` with the rendering; returns the problems found
// (structural ones first, then the first differing line of each file).
std::vector<std::string> check_workflows(const Registry& reg, const std::string& dir,
                                         const std::string& templates_dir);

// Dormancy: every configure and test preset of `presets_path` is named by a workflow (or a script
// it runs, or a suite) or listed in the registry's `manual`; every test of `tests` (name ->
// labels, from ctest --show-only=json-v1) is selected by some job's label filter.
std::vector<std::string> check_dormant(
    const Registry& reg, const std::string& source_dir, const std::string& presets_path,
    const std::vector<RenderedFile>& workflows,
    const std::vector<std::pair<std::string, std::vector<std::string>>>& tests);

}  // namespace dsv4::nightly

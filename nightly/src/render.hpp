// Renders the GitHub workflows from the registry and checks the committed ones for drift.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "registry.hpp"

namespace dsv4::nightly {

// The two rendered workflows: file name (relative to .github/workflows) and text.
struct RenderedFile {
  std::string name;
  std::string text;
};

std::string render_nightly(const Registry& reg);
std::string render_pr(const Registry& reg);
std::vector<RenderedFile> render_all(const Registry& reg);

// Structural check of a nightly workflow's text: every registered suite has a job that runs it,
// every job runs a registered suite (or is the final report job). Returns the problems found.
std::vector<std::string> check_jobs(const Registry& reg, const std::string& nightly_text);

// Compares the committed workflows in `dir` with the rendering; returns the problems found
// (structural ones first, then the first differing line of each file).
std::vector<std::string> check_workflows(const Registry& reg, const std::string& dir);

}  // namespace dsv4::nightly

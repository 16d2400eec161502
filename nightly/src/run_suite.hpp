// run-suite: runs one registered suite and leaves its reports and logs in one artifact folder.
#pragma once

#include <string>
#include <vector>

#include "registry.hpp"

namespace dsv4::nightly {

// Exit codes, shared with dsv4-eval.
enum SuiteExit : int { kPass = 0, kGateFailed = 1, kUsage = 2, kCouldNotRun = 3 };
const char* exit_meaning(int code);

struct RunOptions {
  std::string suite;
  std::string out;         // artifact folder; default <nightly.artifact_dir>/<suite>
  std::string source_dir;  // repository root: ctest presets, nightly/gpu-resource-spec.sh
  std::string build_dir;   // its e2e/, fixtures/server/ and nightly/ go first on PATH
};

int run_suite(const Registry& reg, const RunOptions& opt);

struct SanitizeOptions {
  std::string build_dir;
  std::string tool = "memcheck";  // compute-sanitizer --tool
  std::string label = "gpu";      // which tests (ctest -L)
  std::string out;                // default <build_dir>/sanitizer/<tool>
  std::string sanitizer;          // compute-sanitizer binary; default found on PATH or CUDA's bin
  std::vector<std::string> extra_args;
  int timeout_s = 7200;      // per test executable
  std::string gtest_filter;  // narrows every executable's tests (a slow tool's subset)
};

// Runs every test executable carrying `label` under compute-sanitizer (one process per
// executable, its tests selected by --gtest_filter); exit 0 clean, 1 findings or failed tests,
// 3 could not run.
int sanitize(const SanitizeOptions& opt);

// Shared helpers.
std::string read_text(const std::string& path);
void write_text(const std::string& path, const std::string& text);
void append_text(const std::string& path, const std::string& text);
std::vector<std::string> tail_lines(const std::string& path, size_t n);

}  // namespace dsv4::nightly

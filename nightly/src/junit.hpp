// Reads JUnit XML (CTest's --output-junit and GoogleTest's --gtest_output=xml) and lays the test
// results out as a families x checks Markdown table for the step summary.
#pragma once

#include <string>
#include <vector>

#include "registry.hpp"

namespace dsv4::nightly {

enum class Outcome { kPass, kFail, kSkip };

struct TestResult {
  std::string name;  // CTest's test name, or GoogleTest's "Suite.Test"
  Outcome outcome = Outcome::kPass;
  std::string message;  // first failure or skip message
  std::string output;   // CTest's <system-out>: the test's output
};

// Throws std::runtime_error naming the byte offset and the problem on malformed XML.
std::vector<TestResult> parse_junit(const std::string& xml);
std::vector<TestResult> read_junit(const std::string& path);

// CTest results with each GoogleTest shard ("<executable>/shard-<i>-of-<N>", registered by
// cmake/Dsv4GpuTests.cmake) replaced by its tests, named "<executable>/<Suite.Test>". A shard's
// GoogleTest XML is the file its output names ("[dsv4] shard ... GoogleTest XML: <path>"), else
// `<junit_dir>/junit/<shard name>.xml`; with `collect_dir`, found files are copied to
// `<collect_dir>/junit/<shard name>.xml` (the artifact). Without an XML (the shard crashed or timed
// out) its tests come from the [ RUN ] / [ OK ] lines of its output, the one it stopped in failed;
// a shard that failed though every test passed stays a failure of its own.
std::vector<TestResult> expand_shards(const std::vector<TestResult>& ctest,
                                      const std::string& junit_dir,
                                      const std::string& collect_dir = "");

struct Counts {
  int pass = 0, fail = 0, skip = 0;
  int total() const { return pass + fail + skip; }
};

// The family a test belongs to (longest family whose letters and digits appear in the test name,
// case-insensitive), or "other".
std::string family_of(const std::string& test, const std::vector<std::string>& families);
// The first check whose regex matches the test name (case-insensitive), or "other".
std::string check_of(const std::string& test,
                     const std::vector<std::pair<std::string, std::string>>& checks);

// Markdown: a headline with totals, the families x checks table, and the failed tests.
std::string summary_table(const std::string& title, const std::vector<TestResult>& results,
                          const Ctest& spec);

}  // namespace dsv4::nightly

// Triage: labels every failure of this run's suites (failed gate, failed ctest test, could not run)
// as new or pre-existing against the artifacts of earlier scheduled runs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dsv4::nightly {

struct Failure {
  std::string kind;  // "gate", "test" or "could-not-run"
  std::string id;    // gate text, test name; empty for could-not-run
  std::string detail;
};

// One suite's result in one run, read from its suite.json (run-suite writes it).
struct SuiteOutcome {
  std::string suite;
  std::string run_id;
  int attempt = 0;
  int exit_code = 0;
  std::string reason;
  std::vector<Failure> failures;
};

// Every suite.json under `dir` (artifact folders of one run); of several attempts of a suite the
// latest. Keyed by suite name.
std::map<std::string, SuiteOutcome> load_run(const std::string& dir);

struct TriageOptions {
  std::string current;   // this run's artifacts
  std::string previous;  // one folder per earlier run (ci/fetch-runs.sh lays them out)
  int runs = 3;          // how many earlier runs were asked for
  nlohmann::json needs;  // toJSON(needs) of the report job; may be null
};

// Markdown for the step summary; `new_failures` counts the failures not seen in earlier runs.
std::string triage(const TriageOptions& opt, int& new_failures);

}  // namespace dsv4::nightly

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
  // Job id -> the suites it runs (a job may run several); a job not listed runs the suite of its
  // name.
  std::map<std::string, std::vector<std::string>> job_suites;
};

// Markdown for the step summary; `new_failures` counts the failures not seen in earlier runs.
std::string triage(const TriageOptions& opt, int& new_failures);

// A test that skipped in every run that has it, with the reason of its first skip and where.
struct DormantTest {
  std::string name;
  std::string reason;
  int runs = 0;  // runs that have it
};

// Reads every junit.xml under each run folder (GoogleTest shards expanded by the XML beside
// them) and returns the tests that never passed or failed in any run: dormant. `runs_read`
// counts the folders that held at least one JUnit file; a run folder named by a run id already
// read (fetched once as the caller's run and once by its workflow's name) is read once.
std::vector<DormantTest> dormant_tests(const std::vector<std::string>& run_dirs, int& runs_read,
                                       int& tests_seen);

}  // namespace dsv4::nightly

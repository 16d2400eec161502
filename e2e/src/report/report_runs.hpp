// Run records for `dsv4-eval report`: one gsm8k or serve-bench report.json read into labels,
// metrics and gate outcomes, wherever in the file the runner put them.
//
// What is read from a run's JSON object:
//  - kind: "suite" (what the runners write), else "kind"; else inferred ("gsm8k" when the metrics
//    hold accuracy, "serve-bench" when they hold mean_tpot_ms).
//  - metrics: every number in "metrics" (null = not measured, skipped), then every top-level number
//    not already taken (bench_serving-style flat files).
//  - labels (the run's configuration, e.g. backend=aiter, spec=mtp): "labels" (an object of
//    scalars), then a labels.json beside the file (the nightly writes one per suite folder); a
//    group-by key found in neither is looked up in "context" and then among top-level strings.
//  - gates: "gates", each with metric, op, threshold, value, pass (or verdict "pass").
//  - when: "timestamp" / "started_at" / "created_at" if present (text, for display only).
//  - status: "status" (PASS, FAIL or ERROR as the runners write it) and "error". Only PASS, FAIL
//    and a file without a status (a bench_serving-style record) are completed measurements; any
//    other run (ERROR: interrupted, failed requests, could not run) is listed, never compared.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dsv4::eval::report {

// Bad input for the report (unreadable file, bad JSON, missing label, conflicting runs): exit 2.
struct ReportError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct GateOutcome {
  std::string text;  // "accuracy>0.92"
  std::string metric;
  std::string op;
  double threshold = 0;
  std::optional<double> value;
  bool pass = false;
  // Identity across nights: metric and op (a threshold may be tightened between runs).
  std::string key() const { return metric + op; }
};

struct RunRecord {
  std::string path;
  std::string kind;
  std::map<std::string, std::string> labels;    // explicit configuration labels
  std::map<std::string, std::string> fallback;  // context entries and top-level strings
  std::map<std::string, double> metrics;
  std::vector<GateOutcome> gates;
  std::string when;
  std::string status;  // "PASS", "FAIL", "ERROR", ... ("" when the file has none)
  std::string error;   // why a run with status ERROR did not complete

  // PASS, FAIL or no status: a completed measurement, its numbers may be compared and charted.
  bool measured() const { return status.empty() || status == "PASS" || status == "FAIL"; }
  // "status ERROR: why" for a run that is not a measurement.
  std::string status_text() const;

  // The value of configuration key `key`: labels first, then the fallback fields.
  std::optional<std::string> label(const std::string& key) const;
};

// Parses one run from its JSON (path is used in messages and to find labels.json).
RunRecord parse_run(const nlohmann::json& j, const std::string& path);
// Reads and parses one file; throws ReportError naming the file and what is wrong.
RunRecord load_run(const std::filesystem::path& file);
// True when `j` looks like a run report: a "metrics" object, or a top-level accuracy or
// mean_tpot_ms number (and not a comparison report written by `dsv4-eval report`).
bool looks_like_run(const nlohmann::json& j);
// Runs named on the command line: files are loaded (and must be runs); directories are searched
// recursively for *.json run reports, in sorted path order (a file there that is not valid JSON is
// skipped with a line in `warnings`, except a report.json: a run folder's report that cannot be
// read is an error). Throws ReportError.
std::vector<RunRecord> collect_runs(const std::vector<std::string>& paths,
                                    std::vector<std::string>* warnings = nullptr);

}  // namespace dsv4::eval::report

// Report writers shared by dsv4-eval commands: report.json, report.md (+ $GITHUB_STEP_SUMMARY)
// and junit.xml (one test case per gate) from one generic RunReport.
//
//   RunReport r;
//   r.suite = "gsm8k";  r.title = "GSM8K against http://127.0.0.1:30000";
//   r.context = {{"url", url}, {"api", "sglang"}};
//   r.metrics.push_back({"accuracy", 0.95, "", "fraction of correct answers"});
//   r.gates = evaluate_gates(gates, metrics);
//   r.exit_code = kExitPass;  r.status = "PASS";
//   std::string err;
//   if (!write_reports(r, out_dir, &err)) ...;  // err names the file that could not be written
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/files.hpp"
#include "report/gates.hpp"

namespace dsv4::eval {

struct ReportMetric {
  std::string name;
  std::optional<double> value;  // absent: not measured (the note says why)
  std::string unit;             // "", "s", "tok/s", ...
  std::string description;
  std::string note;  // e.g. "speculative decoding off"
};

struct ReportTable {
  std::string title;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
};

struct RunReport {
  std::string suite;  // JUnit testsuite name, report.json "suite"
  std::string title;  // Markdown heading
  std::vector<std::pair<std::string, std::string>> context;  // url, api, data, command line, ...
  std::vector<ReportMetric> metrics;
  std::vector<GateResult> gates;
  std::vector<ReportTable> tables;
  std::vector<std::string> notes;  // free lines under the tables (warnings, errors)
  nlohmann::json extra = nlohmann::json::object();  // merged into report.json
  int exit_code = 0;
  std::string status;  // "PASS", "FAIL" (a gate failed) or "ERROR" (could not run)
  std::string error;   // why the run could not complete (status ERROR)
  double duration_s = 0;
};

nlohmann::json report_to_json(const RunReport& r);
std::string report_to_markdown(const RunReport& r);
std::string report_to_junit(const RunReport& r);

// Escapes text for XML attributes and character data.
std::string xml_escape(const std::string& s);

// `r` with every registered secret (the API key) written as *** in each of its texts.
RunReport redact_report(RunReport r);

// Writes dir/report.json, dir/report.md and dir/junit.xml (creating dir), and appends the Markdown
// to the file named by $GITHUB_STEP_SUMMARY when that variable is set and not empty. Every text
// is redacted first (redact_report): no file holds the API key.
bool write_reports(const RunReport& r, const std::filesystem::path& dir, std::string* error);

}  // namespace dsv4::eval

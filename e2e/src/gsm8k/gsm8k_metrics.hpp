// GSM8K result records and the metrics computed from them (one path for fresh and resumed runs).
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "gsm8k/gsm8k_data.hpp"
#include "http/server_api.hpp"
#include "report/gates.hpp"
#include "report/run_report.hpp"

namespace dsv4::eval {

// What this invocation did (a resumed run only counts its own requests here).
struct InvocationStats {
  size_t submitted = 0;
  size_t requests = 0;  // finished (answered or failed), cancellations excluded
  size_t retries = 0;
  size_t completion_tokens = 0;
  size_t resumed = 0;  // answers read back from results.jsonl
  double wall_s = 0;
  double cpu_s = 0;                              // CPU time of the thread driving the client
  std::map<std::string, size_t> errors;          // final failures by kind
  std::map<std::string, size_t> attempt_causes;  // failed attempts (retried or final) by cause
  // Questions whose latest request failed after retries (in this invocation, or in an earlier one
  // and not asked again since): counted as failed, apart from the questions never asked.
  std::set<size_t> failed_questions;
};

// One results.jsonl line for an answered question: index, prompt_sha256, label, output, pred
// (null = INVALID), correct, invalid, completion_tokens, prompt_tokens, spec_verify_ct,
// accept_length (completion_tokens / spec_verify_ct), latency_s, attempts, finish_reason.
nlohmann::json make_gsm8k_record(size_t index, const std::string& prompt_hash,
                                 const std::string& label, const Completion& c,
                                 const std::vector<std::string>& stops, double latency_s,
                                 int attempts,
                                 std::optional<double> simple_eval_label = std::nullopt);
// With simple_eval_label (the protocol simple-eval), pred is gsm8k::simple_eval_answer of the
// whole output and correct is numeric equality with it; otherwise the bench_sglang rule.

struct Gsm8kSummary {
  Metrics metrics;
  std::map<std::string, std::string> missing;  // metric -> why it is not available
  std::vector<ReportMetric> report_metrics;
  std::vector<ReportTable> tables;
  size_t correct = 0, wrong = 0, invalid = 0;
  size_t failed = 0;        // the request failed after retries
  size_t not_asked = 0;     // never asked, or cancelled in flight when the run stopped
  size_t truncated = 0;     // answers whose finish_reason is length (the token budget ran out)
  std::string accept_note;  // DP ranks left out of the accept-length figures, or ""
  // How the server accept length was obtained: "single" (one invocation's counters), "combined"
  // (several invocations' parts, each read at its stop or end), "partial" (a part could not be
  // read, or an invocation was killed first: the figure covers only some answers), "" (none).
  std::string accept_status, accept_detail;
  size_t accept_parts = 0;
};

// accept_rows: server_accept.jsonl rows, one per invocation that sent requests:
// {"completion_tokens": T, "per_rank": [a_0 | null, ...]} read at its end or at its stop, or
// {"completion_tokens": T, "unread": why} when /server_info could not be read. Each rank's accept
// length over the whole run is sum(T) / sum(T / a) over the rows that report it (for one row: a
// itself; T / a rounded to the integer verify count it is); a row unread, or answered tokens no
// row accounts for (an invocation killed before it read the counters), make it partial.
Gsm8kSummary summarize_gsm8k(const std::vector<gsm8k::Record>& questions,
                             const std::map<size_t, nlohmann::json>& answered,
                             const InvocationStats& inv,
                             const std::vector<nlohmann::json>& accept_rows);

// Puts the summary's metrics and tables into a report; accept_note explains a missing server
// accept length (empty: the default explanation).
void fill_gsm8k_report(RunReport& report, const Gsm8kSummary& s, const InvocationStats& inv,
                       const std::string& accept_note);

}  // namespace dsv4::eval

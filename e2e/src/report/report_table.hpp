// The comparison table of `dsv4-eval report`: runs grouped into configurations, baselines,
// speedups, changes against a previous night and gate status.
//
// Rows: one per configuration, i.e. per distinct tuple of the --group-by label values; the runs of
// one configuration (say its gsm8k and its serve-bench report) fill one row together. Groups: rows
// that agree on every group-by key that --baseline does not name (--group-by backend,spec
// --baseline spec=off compares every spec of one backend with that backend's spec=off row).
// Speedups against the group's baseline row: for throughputs this/baseline, for latencies
// (TTFT, TPOT, ...) baseline/this, so above 1 is better in both.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "report/report_runs.hpp"

namespace dsv4::eval::report {

// A column: a metric read from the first run kind that has it.
struct Column {
  std::string key;                   // stable id (JSON, --columns, --max-drop, history files)
  std::string header;                // Markdown header
  std::vector<std::string> sources;  // "kind:metric" or "metric" (any kind), first found wins
  int direction = 0;                 // +1 higher is better, -1 lower is better
  bool speedup = false;              // add a speedup column against the baseline
  int decimals = 2;
  std::string short_name;  // in the speedup header ("TTFT speedup"); empty: the header
};

// Known columns: accuracy, invalid, accept_length (SGLang's: DP rank 0), ttt (total token
// throughput), output_throughput, request_throughput, ttft, tpot, itl, e2e, p99_ttft, p99_tpot,
// p99_itl, accept_length_mean, accept_length_min, accept_length_rank0..7.
const std::vector<Column>& column_catalogue();
// The default table: accuracy, accept_length, ttt, ttft, tpot.
std::vector<Column> default_columns();
// The default table for these runs: accuracy, accept_length, then accept_length_mean,
// accept_length_min and accept_length_rank<i> wherever a run reports them, then ttt, ttft, tpot.
std::vector<Column> default_columns(const std::vector<RunRecord>& runs);
// Columns by key; throws ReportError naming an unknown key and the known ones.
std::vector<Column> columns_by_keys(const std::vector<std::string>& keys);

struct GateRef {
  std::string run_path;
  std::string kind;
  GateOutcome gate;
  std::string status;  // failed gates with --previous: "new" or "pre-existing"
  std::string detail;  // e.g. "passed in the previous run", "no previous result"
};

// A metric's change against the previous night: change = (current - previous) / |previous|;
// regression = the worsening part of it in the column's direction (0 when it improved).
struct MetricChange {
  double previous = 0;
  double current = 0;
  double change = 0;
  double regression = 0;
  std::optional<double> limit;  // --max-drop for this column
  bool over_limit = false;
};

struct Row {
  std::vector<std::string> config;  // group-by values, in --group-by order
  std::string name;                 // "backend=aiter, spec=mtp"
  std::string group;                // values of the non-baseline keys, "" with no --baseline
  bool baseline = false;
  std::map<std::string, RunRecord> runs;   // by kind
  std::map<std::string, double> values;    // column key -> value
  std::map<std::string, double> speedups;  // column key -> speedup against the group's baseline
  std::map<std::string, MetricChange> changes;
  bool has_previous = false;
  int gates_total = 0;
  std::vector<GateRef> failed_gates;
  // Runs of this row that are not completed measurements (RunRecord::measured): kind -> status
  // text. Their numbers are in no value, speedup, change or chart.
  std::map<std::string, std::string> not_measured;
};

struct ComparisonOptions {
  std::vector<std::string> group_by;  // empty: every explicit label key seen, sorted
  std::vector<std::pair<std::string, std::string>> baseline;
  std::vector<Column> columns = default_columns();
};

struct Comparison {
  std::vector<std::string> group_by;
  std::vector<std::pair<std::string, std::string>> baseline;
  std::vector<Column> columns;
  std::vector<Row> rows;           // sorted by group, baseline first, then configuration
  std::vector<std::string> notes;  // e.g. a group without a baseline row
  bool compared_with_previous = false;
  std::vector<std::string> regressions;  // one line per change over its --max-drop
};

// Parses "k=v,k2=v2" (used by --baseline); throws ReportError naming the bad part.
std::vector<std::pair<std::string, std::string>> parse_pairs(const std::string& text,
                                                             const std::string& flag);

// Builds the table. Throws ReportError when a run lacks a group-by label, when two runs of one kind
// claim one configuration, or when a --baseline key is not a --group-by key.
Comparison build_comparison(const std::vector<RunRecord>& runs, const ComparisonOptions& opts);

// --max-drop: a default limit for every column and per-column limits ("tpot=0.05").
struct DropLimits {
  std::optional<double> all;
  std::map<std::string, double> per_column;
  std::optional<double> for_column(const std::string& key) const;
};
// Parses one --max-drop value ("0.05" or "key=0.05"); throws ReportError.
void parse_max_drop(const std::string& text, DropLimits& limits);

// Fills changes and gate status from the previous night's comparison (built with the same
// options) and lists every change whose regression exceeds its limit in `regressions`.
void compare_with_previous(Comparison& current, const Comparison& previous,
                           const DropLimits& limits);

}  // namespace dsv4::eval::report

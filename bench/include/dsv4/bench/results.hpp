// dsv4-bench's results: each row's figures, its targets judged, and the run's JSON and Markdown.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dsv4/bench/peers.hpp"
#include "dsv4/bench/plan.hpp"

namespace dsv4::bench {

enum class TargetState { kMet, kMissed, kUnjudged };

struct TargetResult {
  std::string text = {};
  TargetState state = TargetState::kUnjudged;
  std::string why = {};  // the figures it was judged on, or why it could not be
};

struct Measured {
  PlannedRow planned;
  std::string name = {};    // the adapter's name of the case
  std::string launch = {};  // what the launcher chose (fx::KernelCase::launch_note)
  double us = 0;            // median time per launch
  double bytes = 0;         // the work a launch must do (fx::KernelCase::work)
  double flops = 0;
  double copy_gbps = 0;  // the copy ceiling over the same bytes, measured beside the row
  int sets = 1;          // input sets rotated so that each launch reads from memory
  std::optional<Peer> peer = {};
  std::string error = {};      // the row could not be measured or its output was wrong
  bool wrong = false;          // the output differed from the reference (a failure, not a number)
  bool not_here = false;       // not built for this device: listed, not a failure of the run
  std::string case_file = {};  // the case file of a wrong output
  std::vector<TargetResult> targets = {};
  bool measured() const { return error.empty(); }
  double gbps() const { return us > 0 ? bytes / (us * 1e3) : 0; }
  double tflops() const { return us > 0 ? flops / (us * 1e6) : 0; }
};

// Judges row `m`'s targets against its own figures, its peer and the rows already measured
// (`by_id`).
void judge(Measured& m, const std::map<std::string, const Measured*>& by_id);

struct RunInfo {
  std::string device = {}, arch = {}, backend = {}, driver = {}, commit = {}, date = {},
              command = {};
  int compute_units = 0;
  std::optional<double> matmul_tflops =
      {};  // torch's dense bf16 rate in the same run (the math ceiling)
  std::string matmul_shape = {};
  std::string peers_note = {};  // "" or why there are no peers
};

// 0 every target met; 1 a target missed or an output wrong; 3 nothing could be judged: no row
// measured, or a target left unjudged (no peer, a row it needs failed).
int exit_code(const std::vector<Measured>& rows);
// The verdict line: "targets: all met (12)", "targets: 2 MISSED, 1 wrong output", ...
std::string verdict_line(const std::vector<Measured>& rows);

std::string to_json(const RunInfo& info, const std::vector<Measured>& rows);  // one object
std::string to_markdown(const RunInfo& info, const std::vector<Measured>& rows);
// One row as a JSON object (the results' "rows" element, also streamed as JSON Lines).
std::string row_json(const Measured& m);

// The table's columns and a row's cells (the terminal table and the Markdown share them).
std::vector<std::string> table_header();
std::vector<std::string> table_cells(const Measured& m);

}  // namespace dsv4::bench

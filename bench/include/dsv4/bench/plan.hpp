// dsv4-bench's plan: the registered families' benchmark rows, selected by family and shape.
#pragma once

#include <string>
#include <vector>

#include "dsv4/cases/bench_rows.hpp"

namespace dsv4::bench {

struct Selection {
  std::vector<std::string> families = {};  // empty: every family that declares rows
  // Each filter is a list of vars words ("B=64,v41"); a row is selected when some filter's every
  // word is one of the row's words. Empty: every row.
  std::vector<std::string> shapes = {};
};

struct PlannedRow {
  std::string family = {};
  cases::BenchRow row = {};
  std::string id = {};      // cases::bench_row_id
  bool for_target = false;  // not selected, timed because a selected row's target needs it
};

// Why a selection cannot be planned: an unknown family (the known ones listed), a family that
// declares no rows, a shape filter no row of the selected families matches, a target naming a
// row no family declares.
class PlanError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The selected rows, every row another's target refers to added, in an order in which a row comes
// after the rows its targets compare it with (families in that order, then declaration order).
std::vector<PlannedRow> plan(const Selection& s);

// Every family's rows with their targets, as --list prints them.
std::string describe(const std::vector<PlannedRow>& rows);

}  // namespace dsv4::bench

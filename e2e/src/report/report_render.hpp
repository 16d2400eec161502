// Markdown and JSON renderings of a `dsv4-eval report` comparison.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/report_table.hpp"

namespace dsv4::eval::report {

// A chart written by --history, referenced from the Markdown.
struct ChartRef {
  std::string column;  // column key
  std::string title;
  std::string file;  // path relative to the Markdown file
};

struct RenderInput {
  const Comparison* comparison = nullptr;
  std::vector<ChartRef> charts;
  std::vector<std::string> warnings;
  std::string previous_dir;  // empty: no --previous
  bool failed = false;       // a regression over --max-drop
};

// One cell's text: the column's fixed decimals, "n/a" when absent.
std::string format_value(double v, int decimals);
// "1.23x".
std::string format_speedup(double s);

// The Markdown: the table (one row per configuration), failed gates (new / pre-existing with
// --previous), regressions over --max-drop, notes, and the history charts.
std::string render_markdown(const RenderInput& in);
// The same content as JSON ("kind": "comparison-report", so a later report skips it as a run).
nlohmann::json render_json(const RenderInput& in);

}  // namespace dsv4::eval::report

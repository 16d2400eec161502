// `dsv4-eval report --history DIR`: metric values over past runs and hand-written SVG line charts.
//
// DIR holds one folder per past run of the nightly (any name; folders sort by name, so dated names
// such as 2026-11-29 give time order), each with that night's run reports anywhere inside. Each
// configuration of the comparison (its --group-by values) is one line; the current runs are the
// last point, labelled "current" unless they already sit in DIR.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "report/report_table.hpp"

namespace dsv4::eval::report {

struct Series {
  std::string name;                           // configuration, "backend=aiter, spec=mtp"
  std::vector<std::optional<double>> values;  // one per point label; absent: no run that night
};

struct Chart {
  std::string title;                  // "accuracy over nightly runs"
  std::string y_label;                // column header
  std::vector<std::string> x_labels;  // night names
  std::vector<Series> series;
};

// One comparison per night found in `dir`, built with `opts`; each element is {night name, table}.
// Nights without any run report are skipped; `warnings` collects unreadable files.
std::vector<std::pair<std::string, Comparison>> load_history(const std::filesystem::path& dir,
                                                             const ComparisonOptions& opts,
                                                             std::vector<std::string>* warnings);

// The chart of column `col` over the nights (and `current` as the last point when given).
Chart history_chart(const Column& col,
                    const std::vector<std::pair<std::string, Comparison>>& nights,
                    const Comparison* current);

// "Nice" axis ticks covering [lo, hi]: steps of 1, 2 or 5 times a power of ten, about `target`
// of them, first <= lo, last >= hi.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

// A standalone SVG document (XML declaration, one <svg> root with width, height and viewBox):
// axes, grid, tick labels, one polyline with point markers per series (a missing value breaks the
// line), a legend, every text XML-escaped.
std::string render_svg(const Chart& chart, int width = 760, int height = 380);

}  // namespace dsv4::eval::report

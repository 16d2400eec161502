// `dsv4-eval report`: several gsm8k / serve-bench runs -> one comparison table (Markdown + JSON),
// optionally against the previous night (--previous, --max-drop) and with history charts.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <cxxopts.hpp>

#include "commands/command.hpp"
#include "common/files.hpp"
#include "report/report_history_svg.hpp"
#include "report/report_render.hpp"
#include "report/report_table.hpp"

namespace dsv4::eval::report {
namespace fs = std::filesystem;

namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size() && !s.empty()) {
    const size_t comma = std::min(s.find(',', pos), s.size());
    if (comma > pos) out.push_back(s.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return out;
}

int run(int argc, char** argv) {
  cxxopts::Options o("dsv4-eval report",
                     "Compare gsm8k and serve-bench runs in one table (Markdown and JSON).");
  o.positional_help("RUN.json|DIR...");
  // clang-format off
  o.add_options()
    ("runs", "run reports (report.json files, or folders searched for them)",
     cxxopts::value<std::vector<std::string>>())
    ("group-by", "label keys that make a configuration (one row each), comma separated",
     cxxopts::value<std::string>()->default_value(""))
    ("baseline", "the baseline row of each group, e.g. spec=off", cxxopts::value<std::string>()->default_value(""))
    ("columns", "columns, comma separated (default: accuracy, accept_length, then accept_length_mean, accept_length_min and accept_length_rank<i> where a run reports them, then ttt, ttft, tpot)",
     cxxopts::value<std::string>()->default_value(""))
    ("previous", "folder of the previous night's reports", cxxopts::value<std::string>()->default_value(""))
    ("max-drop", "regression limit as a fraction, for every column (0.05) or one (tpot=0.05); "
     "repeatable; a larger regression against --previous fails the report",
     cxxopts::value<std::vector<std::string>>()->default_value(""))
    ("history", "folder with one sub-folder per past night, for line charts",
     cxxopts::value<std::string>()->default_value(""))
    ("history-columns", "columns to chart", cxxopts::value<std::string>()->default_value("accuracy,accept_length,tpot"))
    ("out", "output folder for comparison.md, comparison.json and the charts",
     cxxopts::value<std::string>()->default_value("."))
    ("quiet", "do not print the Markdown on stdout")
    ("h,help", "this help");
  // clang-format on
  o.parse_positional({"runs"});
  try {
    auto a = o.parse(argc, argv);
    if (a.count("help")) {
      std::cout << o.help()
                << "\nExit codes: 0 pass, 1 a regression over --max-drop, 2 bad "
                   "usage or data, 3 could not write the outputs.\n";
      return kExitPass;
    }
    if (!a.count("runs")) {
      std::cerr << "dsv4-eval report: no run reports given\n" << o.help();
      return kExitUsage;
    }
    ComparisonOptions opts;
    opts.group_by = split_list(a["group-by"].as<std::string>());
    if (const auto b = a["baseline"].as<std::string>(); !b.empty())
      opts.baseline = parse_pairs(b, "--baseline");
    const std::string columns = a["columns"].as<std::string>();
    if (!columns.empty()) opts.columns = columns_by_keys(split_list(columns));
    DropLimits limits;
    for (const auto& d : a["max-drop"].as<std::vector<std::string>>())
      if (!d.empty()) parse_max_drop(d, limits);
    const std::string previous = a["previous"].as<std::string>();
    if ((limits.all || !limits.per_column.empty()) && previous.empty())
      throw ReportError("--max-drop needs --previous (the run to compare against)");
    const auto history_cols = columns_by_keys(split_list(a["history-columns"].as<std::string>()));

    RenderInput in;
    const auto runs = collect_runs(a["runs"].as<std::vector<std::string>>(), &in.warnings);
    if (runs.empty()) throw ReportError("no run report found in the given paths");
    if (columns.empty()) opts.columns = default_columns(runs);  // the accept-length figures too
    Comparison cmp = build_comparison(runs, opts);
    if (!previous.empty()) {
      if (!fs::is_directory(previous))
        throw ReportError("--previous: '" + previous + "' is not a directory");
      const auto prev_runs = collect_runs({previous}, &in.warnings);
      if (prev_runs.empty()) in.warnings.push_back("--previous: no run report in " + previous);
      ComparisonOptions popts = opts;
      popts.group_by = cmp.group_by;
      compare_with_previous(cmp, build_comparison(prev_runs, popts), limits);
      in.previous_dir = previous;
    }
    in.comparison = &cmp;
    in.failed = !cmp.regressions.empty();

    const fs::path out = a["out"].as<std::string>();
    std::error_code ec;
    fs::create_directories(out, ec);
    std::string err;
    if (const auto hist = a["history"].as<std::string>(); !hist.empty()) {
      ComparisonOptions hopts = opts;
      hopts.group_by = cmp.group_by;
      hopts.columns = history_cols;
      const auto nights = load_history(hist, hopts, &in.warnings);
      Comparison cur_hist = build_comparison(runs, hopts);
      for (const auto& col : history_cols) {
        const Chart chart = history_chart(col, nights, &cur_hist);
        const std::string file = "history_" + col.key + ".svg";
        if (!write_file_atomic(out / file, render_svg(chart), &err)) {
          std::cerr << "dsv4-eval report: " << err << "\n";
          return kExitCouldNotRun;
        }
        in.charts.push_back({col.key, chart.title, file});
      }
    }
    const std::string md = render_markdown(in);
    if (!write_file_atomic(out / "comparison.md", md, &err) ||
        !write_file_atomic(out / "comparison.json", render_json(in).dump(2) + "\n", &err)) {
      std::cerr << "dsv4-eval report: " << err << "\n";
      return kExitCouldNotRun;
    }
    if (!append_step_summary(md, &err)) std::cerr << "dsv4-eval report: " << err << "\n";
    if (!a.count("quiet")) std::cout << md;
    for (const auto& w : in.warnings) std::cerr << "dsv4-eval report: warning: " << w << "\n";
    for (const auto& r : cmp.regressions)
      std::cerr << "dsv4-eval report: regression: " << r << "\n";
    return in.failed ? kExitGateFailed : kExitPass;
  } catch (const cxxopts::exceptions::exception& e) {
    std::cerr << "dsv4-eval report: " << e.what() << "\n";
    return kExitUsage;
  } catch (const ReportError& e) {
    std::cerr << "dsv4-eval report: " << e.what() << "\n";
    return kExitUsage;
  }
}

}  // namespace

DSV4_EVAL_COMMAND("report",
                  "compare gsm8k and serve-bench runs: table, speedups, regressions, history", run);

}  // namespace dsv4::eval::report

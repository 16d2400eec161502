// `dsv4-eval report`: run loading, the comparison table cell by cell, speedups, --previous
// (new vs pre-existing failed gates, changes, --max-drop) and bad input, from fixture runs in
// unit/e2e/data/report (current/ and previous/: aiter and triton, spec off and mtp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "e2e_test_util.hpp"
#include "report/report_render.hpp"
#include "report/report_runs.hpp"
#include "report/report_table.hpp"

namespace {

namespace fs = std::filesystem;
using namespace dsv4::eval::report;
using dsv4::e2e_test::slurp;
using dsv4::e2e_test::TempDir;
using nlohmann::json;

fs::path data_dir() { return fs::path(DSV4_E2E_UNIT_DIR) / "data" / "report"; }

int run_report(std::vector<std::string> args) {
  args.insert(args.begin(), "report");
  return dsv4::e2e_test::run_eval(std::move(args));
}

// The first Markdown table of `md`: header cells, then body rows (the alignment row dropped).
std::vector<std::vector<std::string>> first_table(const std::string& md) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(md);
  bool started = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("|", 0) != 0) {
      if (started) break;
      continue;
    }
    started = true;
    std::vector<std::string> cells;
    std::string cur;
    for (size_t i = 1; i < line.size(); ++i) {
      if (line[i] == '|' && line[i - 1] != '\\') {
        const size_t a = cur.find_first_not_of(' '), b = cur.find_last_not_of(' ');
        cells.push_back(a == std::string::npos ? "" : cur.substr(a, b - a + 1));
        cur.clear();
      } else {
        cur += line[i];
      }
    }
    if (cells.size() && cells[0].rfind("---", 0) == 0) continue;
    rows.push_back(cells);
  }
  return rows;
}

ComparisonOptions spec_options() {
  ComparisonOptions o;
  o.group_by = {"backend", "spec"};
  o.baseline = {{"spec", "off"}};
  return o;
}

TEST(ReportRuns, ReadsGsm8kAndServeBenchReportsAndSidecarLabels) {
  const RunRecord g = load_run(data_dir() / "current" / "aiter_mtp_gsm8k.json");
  EXPECT_EQ(g.kind, "gsm8k");
  EXPECT_EQ(g.label("backend").value_or("?"), "aiter");
  EXPECT_EQ(g.label("spec").value_or("?"), "mtp");
  EXPECT_DOUBLE_EQ(g.metrics.at("accuracy"), 0.948);
  EXPECT_DOUBLE_EQ(g.metrics.at("accept_length"), 3.2);
  ASSERT_EQ(g.gates.size(), 2u);
  EXPECT_EQ(g.gates[1].text, "accept_length>3.0");
  EXPECT_TRUE(g.gates[1].pass);
  EXPECT_EQ(g.label("api").value_or("?"), "sglang");  // from "context"

  const RunRecord t = load_run(data_dir() / "current" / "triton_off" / "gsm8k.json");
  EXPECT_EQ(t.label("backend").value_or("?"), "triton");  // from labels.json beside it
  EXPECT_EQ(t.metrics.count("accept_length"), 0u);        // null: spec off, not measured
  const RunRecord s = load_run(data_dir() / "current" / "triton_off" / "serve.json");
  EXPECT_EQ(s.kind, "serve-bench");
  EXPECT_DOUBLE_EQ(s.metrics.at("mean_tpot_ms"), 25.0);

  std::vector<std::string> warnings;
  const auto all = collect_runs({(data_dir() / "current").string()}, &warnings);
  EXPECT_EQ(all.size(), 8u);  // labels.json files are not runs
  EXPECT_TRUE(warnings.empty());
}

TEST(ReportRuns, FlatBenchServingStyleFileAndKindInference) {
  const RunRecord r = parse_run(
      json{{"backend", "sglang"}, {"mean_tpot_ms", 12.0}, {"total_throughput", 5.0}}, "flat.json");
  EXPECT_EQ(r.kind, "serve-bench");
  EXPECT_EQ(r.label("backend").value_or("?"), "sglang");
  EXPECT_DOUBLE_EQ(r.metrics.at("total_throughput"), 5.0);
  EXPECT_THROW(parse_run(json{{"foo", 1}}, "x.json"), ReportError);
}

TEST(ReportRuns, FoldersKeepOnlyRunReports) {
  TempDir tmp;
  const fs::path d = tmp.path();
  fs::copy_file(data_dir() / "current" / "aiter_mtp_gsm8k.json", d / "report.json");
  std::ofstream(d / "suite.json") << R"({"suite": "nightly-e2e", "jobs": []})";
  std::ofstream(d / "comparison.json") << R"({"kind": "comparison-report", "metrics": {}})";
  std::ofstream(d / "half.json") << R"({"metrics": {"accuracy": 0.9)";
  std::vector<std::string> warnings;
  const auto runs = collect_runs({d.string()}, &warnings);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].kind, "gsm8k");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("half.json: not valid JSON"), std::string::npos) << warnings[0];
  // Named explicitly, a file that is not a run is an error.
  EXPECT_THROW(load_run(d / "suite.json"), ReportError);
}

TEST(ReportTable, MarkdownCellByCell) {
  TempDir dir;
  const fs::path out = dir.path() / "out";
  ASSERT_EQ(run_report({(data_dir() / "current").string(), "--group-by", "backend,spec",
                        "--baseline", "spec=off", "--out", out.string(), "--quiet"}),
            0);
  const auto t = first_table(slurp((out / "comparison.md").string()));
  const std::vector<std::vector<std::string>> want = {
      {"backend", "spec", "accuracy", "accept length", "TTT (tok/s)", "TTT speedup",
       "mean TTFT (ms)", "TTFT speedup", "mean TPOT (ms)", "TPOT speedup", "gates"},
      {"aiter", "off", "0.950", "n/a", "10000.0", "1.00x", "200.0", "1.00x", "20.00", "1.00x",
       "pass 2/2"},
      {"aiter", "mtp", "0.948", "3.20", "16000.0", "1.60x", "250.0", "0.80x", "12.50", "1.60x",
       "pass 3/3"},
      {"triton", "off", "0.940", "n/a", "8000.0", "1.00x", "300.0", "1.00x", "25.00", "1.00x",
       "pass 1/1"},
      {"triton", "mtp", "0.900", "2.50", "12000.0", "1.50x", "400.0", "0.75x", "20.00", "1.25x",
       "**2 failed** of 2"},
  };
  ASSERT_EQ(t.size(), want.size()) << slurp((out / "comparison.md").string());
  for (size_t r = 0; r < want.size(); ++r) {
    ASSERT_EQ(t[r].size(), want[r].size()) << "row " << r;
    for (size_t c = 0; c < want[r].size(); ++c)
      EXPECT_EQ(t[r][c], want[r][c]) << "row " << r << " column " << want[0][c];
  }
  const json j = json::parse(slurp((out / "comparison.json").string()));
  EXPECT_EQ(j["kind"], "comparison-report");
  ASSERT_EQ(j["rows"].size(), 4u);
  EXPECT_EQ(j["rows"][1]["config"]["spec"], "mtp");
  EXPECT_DOUBLE_EQ(j["rows"][1]["speedups"]["tpot"].get<double>(), 20.0 / 12.5);
  EXPECT_DOUBLE_EQ(j["rows"][1]["speedups"]["ttft"].get<double>(), 200.0 / 250.0);
  EXPECT_DOUBLE_EQ(j["rows"][1]["speedups"]["ttt"].get<double>(), 16000.0 / 10000.0);
  EXPECT_TRUE(j["rows"][1]["values"]["accept_length"].is_number());
  EXPECT_TRUE(j["rows"][0]["values"]["accept_length"].is_null());
  EXPECT_EQ(j["rows"][3]["failed_gates"].size(), 2u);
  EXPECT_EQ(j["verdict"], "pass");
}

TEST(ReportTable, GroupByDefaultsToTheLabelKeysAndMissingBaselineIsANote) {
  const auto runs = collect_runs({(data_dir() / "current").string()});
  ComparisonOptions o;
  o.baseline = {{"spec", "none"}};
  const Comparison c = build_comparison(runs, o);
  EXPECT_EQ(c.group_by, (std::vector<std::string>{"backend", "spec"}));
  ASSERT_EQ(c.rows.size(), 4u);
  for (const auto& r : c.rows) EXPECT_TRUE(r.speedups.empty()) << r.name;
  ASSERT_EQ(c.notes.size(), 2u);  // groups backend=aiter and backend=triton
  EXPECT_NE(c.notes[0].find("no baseline row in group {backend=aiter}"), std::string::npos);
}

TEST(ReportPrevious, NewVersusPreExistingFailedGatesAndChanges) {
  const auto cur =
      build_comparison(collect_runs({(data_dir() / "current").string()}), spec_options());
  const auto prev =
      build_comparison(collect_runs({(data_dir() / "previous").string()}), spec_options());
  Comparison c = cur;
  compare_with_previous(c, prev, DropLimits{});
  const Row& tm = c.rows[3];
  ASSERT_EQ(tm.name, "backend=triton, spec=mtp");
  ASSERT_EQ(tm.failed_gates.size(), 2u);
  EXPECT_EQ(tm.failed_gates[0].gate.text, "accuracy>0.92");
  EXPECT_EQ(tm.failed_gates[0].status, "new");  // 0.94 passed the night before
  EXPECT_EQ(tm.failed_gates[0].detail, "passed in the previous run, value 0.94");
  EXPECT_EQ(tm.failed_gates[1].gate.text, "accept_length>3.0");
  EXPECT_EQ(tm.failed_gates[1].status, "pre-existing");  // 2.6 failed too
  EXPECT_NEAR(tm.changes.at("accuracy").change, (0.90 - 0.94) / 0.94, 1e-12);
  EXPECT_NEAR(tm.changes.at("accuracy").regression, 0.04 / 0.94, 1e-12);
  const Row& am = c.rows[1];
  EXPECT_NEAR(am.changes.at("tpot").change, 0.5 / 12.0, 1e-12);
  EXPECT_NEAR(am.changes.at("tpot").regression, 0.5 / 12.0, 1e-12);  // lower is better: a rise
  EXPECT_EQ(am.changes.at("ttt").regression, 0.0);
  EXPECT_TRUE(c.regressions.empty());  // no --max-drop

  // A configuration the previous night did not run: its failed gates are new, without history.
  Comparison lonely = cur;
  compare_with_previous(lonely, Comparison{}, DropLimits{});
  EXPECT_EQ(lonely.rows[3].failed_gates[1].status, "new");
  EXPECT_EQ(lonely.rows[3].failed_gates[1].detail, "no previous result");
  EXPECT_FALSE(lonely.rows[3].has_previous);
}

TEST(ReportPrevious, MaxDropFailsOnlyOverItsLimit) {
  const std::string cur = (data_dir() / "current").string(),
                    prev = (data_dir() / "previous").string();
  TempDir dir;
  const fs::path out = dir.path() / "out";
  const std::vector<std::string> base = {cur,          "--group-by", "backend,spec", "--baseline",
                                         "spec=off",   "--previous", prev,           "--out",
                                         out.string(), "--quiet"};
  auto with = [&](std::vector<std::string> extra) {
    auto a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return run_report(a);
  };
  // Worst changes: triton/mtp accuracy -4.26%, aiter/mtp TPOT +4.17%.
  EXPECT_EQ(with({"--max-drop", "0.05"}), 0);
  EXPECT_EQ(with({"--max-drop", "0.04"}), 1);
  json j = json::parse(slurp((out / "comparison.json").string()));
  EXPECT_EQ(j["verdict"], "fail");
  EXPECT_EQ(j["regressions"].size(), 2u);
  EXPECT_EQ(with({"--max-drop", "0.05", "--max-drop", "tpot=0.04"}), 1);
  j = json::parse(slurp((out / "comparison.json").string()));
  ASSERT_EQ(j["regressions"].size(), 1u);
  EXPECT_NE(j["regressions"][0].get<std::string>().find("{backend=aiter, spec=mtp} tpot"),
            std::string::npos);
  EXPECT_TRUE(j["rows"][1]["changes"]["tpot"]["over_limit"].get<bool>());
  const auto t = first_table(slurp((out / "comparison.md").string()));
  EXPECT_EQ(t[2][8], "12.50 **(+4.2%)**");
  EXPECT_EQ(t[4][2], "0.900 (-4.3%)");
  EXPECT_EQ(t[1][2], "0.950 (=)");
  const std::string md = slurp((out / "comparison.md").string());
  EXPECT_NE(md.find("| backend=triton, spec=mtp | gsm8k | `accuracy>0.92` | 0.9000 | **new**"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("`accept_length>3.0` | 2.5000 | pre-existing"), std::string::npos) << md;
}

TEST(ReportCli, BadInputIsExitTwoWithTheFieldNamed) {
  TempDir tmp;
  const fs::path dir = tmp.path();
  const std::string cur = (data_dir() / "current").string();
  EXPECT_EQ(run_report({cur, "--group-by", "backend,spec", "--baseline", "mode=x", "--quiet",
                        "--out", dir.string()}),
            2);
  EXPECT_EQ(
      run_report({cur, "--max-drop", "lots", "--previous", cur, "--quiet", "--out", dir.string()}),
      2);
  EXPECT_EQ(run_report({cur, "--max-drop", "0.1", "--quiet", "--out", dir.string()}),
            2);  // no --previous
  EXPECT_EQ(run_report({cur, "--columns", "accuracy,nope", "--quiet", "--out", dir.string()}), 2);
  EXPECT_EQ(run_report({(dir / "missing.json").string(), "--quiet", "--out", dir.string()}), 2);
  EXPECT_EQ(run_report({"--quiet"}), 2);
  std::ofstream(dir / "broken.json") << "{\"suite\": ";
  EXPECT_EQ(run_report({(dir / "broken.json").string(), "--quiet", "--out", dir.string()}), 2);

  // Messages name the file and the field.
  const auto runs = collect_runs({cur});
  ComparisonOptions o;
  o.group_by = {"backend", "attention"};
  try {
    build_comparison(runs, o);
    FAIL() << "a missing group-by label was accepted";
  } catch (const ReportError& e) {
    EXPECT_NE(std::string(e.what()).find("no label 'attention'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(".json"), std::string::npos) << e.what();
  }
  o.group_by = {"backend"};  // two gsm8k runs per backend now collide
  try {
    build_comparison(runs, o);
    FAIL() << "two runs of one kind in one configuration were accepted";
  } catch (const ReportError& e) {
    EXPECT_NE(std::string(e.what()).find("two gsm8k runs for configuration {backend=aiter}"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse_pairs("spec", "--baseline"), ReportError);
  EXPECT_THROW(parse_pairs("spec=off,", "--baseline"), ReportError);
  EXPECT_EQ(parse_pairs("a=1,b=2", "--baseline").size(), 2u);
  EXPECT_THROW(
      parse_run(json{{"suite", "gsm8k"}, {"metrics", json::object()}, {"labels", json::array()}},
                "l.json"),
      ReportError);
}

TEST(ReportCli, AppendsToTheStepSummary) {
  TempDir tmp;
  const fs::path dir = tmp.path();
  const fs::path summary = dir / "summary.md";
  std::ofstream(summary) << "before\n";
  ::setenv("GITHUB_STEP_SUMMARY", summary.c_str(), 1);
  const int rc = run_report({(data_dir() / "current").string(), "--group-by", "backend,spec",
                             "--quiet", "--out", (dir / "out").string()});
  ::unsetenv("GITHUB_STEP_SUMMARY");
  EXPECT_EQ(rc, 0);
  const std::string s = slurp(summary.string());
  EXPECT_EQ(s.rfind("before\n", 0), 0u);
  EXPECT_NE(s.find("| aiter | mtp | 0.948 |"), std::string::npos) << s;
}

}  // namespace

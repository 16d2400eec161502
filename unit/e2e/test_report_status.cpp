// `dsv4-eval report` and runs that are not completed measurements (status ERROR: interrupted,
// too many failed requests): listed as such, never compared, charted or taken as a regression;
// a run folder's report.json that cannot be read is an error.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "e2e_test_util.hpp"
#include "report/report_history_svg.hpp"
#include "report/report_runs.hpp"
#include "report/report_table.hpp"

namespace {

namespace fs = std::filesystem;
using namespace dsv4::eval::report;
using dsv4::e2e_test::slurp;
using dsv4::e2e_test::TempDir;
using dsv4::e2e_test::write_text;
using nlohmann::json;

int run_report(std::vector<std::string> args, std::string& err) {
  args.insert(args.begin(), "report");
  return dsv4::e2e_test::run_eval_capture(std::move(args), err);
}

json gsm8k_run(const std::string& status, double accuracy) {
  json j = {{"suite", "gsm8k"},
            {"status", status},
            {"labels", {{"backend", "aiter"}}},
            {"metrics", {{"accuracy", accuracy}, {"accept_length", 3.1}}}};
  if (status == "ERROR") j["error"] = "interrupted by SIGTERM";
  return j;
}

json serve_run(const std::string& status, double throughput) {
  json j = {
      {"suite", "serve-bench"},
      {"status", status},
      {"labels", {{"backend", "aiter"}}},
      {"metrics", {{"total_throughput", throughput}, {"mean_tpot_ms", 20.0}, {"failed", 60}}}};
  if (status == "ERROR") j["error"] = "60 of 64 requests failed (--max-failed 0)";
  return j;
}

void put(const fs::path& file, const json& j) {
  fs::create_directories(file.parent_path());
  write_text(file.string(), j.dump(2));
}

// An interrupted gsm8k run (accuracy 0.198) and a serve-bench run with 60 of 64 requests failed,
// against a previous night that completed: no regression, exit 0, each named as not measured.
TEST(ReportStatus, ErroredRunsAreListedNotComparedAgainstThePreviousNight) {
  TempDir d;
  put(d.path() / "prev" / "gsm8k" / "report.json", gsm8k_run("PASS", 0.95));
  put(d.path() / "prev" / "serve" / "report.json", serve_run("PASS", 9000));
  put(d.path() / "cur" / "gsm8k" / "report.json", gsm8k_run("ERROR", 0.198));
  put(d.path() / "cur" / "serve" / "report.json", serve_run("ERROR", 1200));
  std::string err;
  const int rc = run_report({d.str("cur"), "--previous", d.str("prev"), "--max-drop", "0.05",
                             "--columns", "accuracy,ttt", "--out", d.str("out"), "--quiet"},
                            err);
  EXPECT_EQ(rc, 0) << err;
  EXPECT_EQ(err.find("regression"), std::string::npos) << err;
  const json cmp = json::parse(slurp(d.str("out/comparison.json")));
  ASSERT_EQ(cmp["rows"].size(), 1u);
  const json& row = cmp["rows"][0];
  EXPECT_TRUE(row["values"]["accuracy"].is_null()) << row.dump();
  EXPECT_TRUE(row["values"]["ttt"].is_null()) << row.dump();
  EXPECT_EQ(row["changes"].size(), 0u) << row.dump();
  ASSERT_TRUE(row["not_measured"].contains("gsm8k"));
  EXPECT_NE(row["not_measured"]["gsm8k"].get<std::string>().find("interrupted by SIGTERM"),
            std::string::npos);
  ASSERT_TRUE(row["not_measured"].contains("serve-bench"));
  const std::string md = slurp(d.str("out/comparison.md"));
  EXPECT_NE(md.find("not measured: gsm8k ERROR, serve-bench ERROR"), std::string::npos) << md;
  EXPECT_NE(md.find("is not a completed measurement"), std::string::npos) << md;
  EXPECT_NE(md.find("no comparison with the previous run: this run is not a completed"),
            std::string::npos)
      << md;
}

// The other way round: the previous night was interrupted, the current one completed.
TEST(ReportStatus, ComparisonAgainstAnErroredPreviousRunSaysSo) {
  TempDir d;
  put(d.path() / "prev" / "gsm8k" / "report.json", gsm8k_run("ERROR", 0.198));
  put(d.path() / "cur" / "gsm8k" / "report.json", gsm8k_run("PASS", 0.95));
  std::string err;
  const int rc = run_report({d.str("cur"), "--previous", d.str("prev"), "--max-drop", "0.05",
                             "--out", d.str("out"), "--quiet"},
                            err);
  EXPECT_EQ(rc, 0) << err;
  const json cmp = json::parse(slurp(d.str("out/comparison.json")));
  EXPECT_DOUBLE_EQ(cmp["rows"][0]["values"]["accuracy"].get<double>(), 0.95);
  EXPECT_EQ(cmp["rows"][0]["changes"].size(), 0u);
  bool said = false;
  for (const auto& n : cmp["notes"])
    said |= n.get<std::string>().find(
                "no comparison with the previous run, which is not a "
                "completed measurement") != std::string::npos;
  EXPECT_TRUE(said) << cmp["notes"].dump();
}

// History: an errored night is no point on the chart.
TEST(ReportStatus, ErroredRunsAreNotPlotted) {
  TempDir d;
  put(d.path() / "hist" / "2026-11-01" / "report.json", gsm8k_run("PASS", 0.95));
  put(d.path() / "hist" / "2026-11-02" / "report.json", gsm8k_run("ERROR", 0.198));
  put(d.path() / "hist" / "2026-11-03" / "report.json", gsm8k_run("PASS", 0.94));
  ComparisonOptions o;
  o.group_by = {"backend"};
  o.columns = columns_by_keys({"accuracy"});
  const auto nights = load_history(d.path() / "hist", o, nullptr);
  const Chart chart = history_chart(o.columns[0], nights, nullptr);
  ASSERT_EQ(chart.series.size(), 1u);
  ASSERT_EQ(chart.series[0].values.size(), 3u);
  EXPECT_TRUE(chart.series[0].values[0].has_value());
  EXPECT_FALSE(chart.series[0].values[1].has_value()) << "the interrupted night was plotted";
  EXPECT_TRUE(chart.series[0].values[2].has_value());
}

TEST(ReportStatus, RunRecordsKeepStatusAndError) {
  const RunRecord r = parse_run(gsm8k_run("ERROR", 0.198), "x/report.json");
  EXPECT_EQ(r.status, "ERROR");
  EXPECT_FALSE(r.measured());
  EXPECT_EQ(r.status_text(), "status ERROR: interrupted by SIGTERM");
  EXPECT_TRUE(parse_run(gsm8k_run("FAIL", 0.5), "y").measured());
  EXPECT_TRUE(parse_run(json{{"accuracy", 0.9}}, "flat.json").measured());
}

// A corrupt report.json in a run folder is exit 2 naming the file, not a skip with exit 0.
TEST(ReportStatus, CorruptReportJsonInARunFolderIsAnError) {
  TempDir d;
  put(d.path() / "cur" / "good" / "report.json", gsm8k_run("PASS", 0.95));
  fs::create_directories(d.path() / "cur" / "bad");
  write_text(d.str("cur/bad/report.json"), "{\"suite\": \"gsm8k\", \"metrics\": {");
  write_text(d.str("cur/good/other.json"), "not json");  // not a report: still only a warning
  std::string err;
  EXPECT_EQ(run_report({d.str("cur"), "--out", d.str("out"), "--quiet"}, err), 2);
  EXPECT_NE(err.find("bad/report.json"), std::string::npos) << err;
  EXPECT_NE(err.find("not valid JSON"), std::string::npos) << err;
  fs::remove(d.path() / "cur" / "bad" / "report.json");
  EXPECT_EQ(run_report({d.str("cur"), "--out", d.str("out"), "--quiet"}, err), 0) << err;
  EXPECT_NE(err.find("other.json"), std::string::npos) << err;
}

}  // namespace

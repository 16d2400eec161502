// Gates (parsing, evaluation, missing metrics) and the report writers (JSON, Markdown, JUnit,
// $GITHUB_STEP_SUMMARY).
#include <gtest/gtest.h>

#include <cstdlib>

#include "e2e_test_util.hpp"
#include "report/gates.hpp"
#include "report/run_report.hpp"

namespace dsv4::eval {
namespace {

using e2e_test::slurp;
using e2e_test::TempDir;

TEST(Gates, ParseEveryOperator) {
  struct Row {
    const char* text;
    const char* metric;
    GateOp op;
    double v;
  };
  const Row rows[] = {{"accuracy>0.92", "accuracy", GateOp::kGt, 0.92},
                      {" accept_length >= 3 ", "accept_length", GateOp::kGe, 3},
                      {"latency_p99<12.5", "latency_p99", GateOp::kLt, 12.5},
                      {"invalid<=1e-2", "invalid", GateOp::kLe, 0.01},
                      {"failed==0", "failed", GateOp::kEq, 0},
                      {"a.b_c>-1", "a.b_c", GateOp::kGt, -1}};
  for (const Row& r : rows) {
    const Gate g = parse_gate(r.text);
    EXPECT_EQ(g.metric, r.metric) << r.text;
    EXPECT_EQ(g.op, r.op) << r.text;
    EXPECT_DOUBLE_EQ(g.threshold, r.v) << r.text;
    EXPECT_EQ(g.text, r.text);
  }
}

TEST(Gates, ParseErrorsNameTheGateAndProblem) {
  struct Row {
    const char* text;
    const char* part;
  };
  const Row rows[] = {{"accuracy", "no comparison operator"},
                      {"accuracy=>0.9", "operator '=>'"},
                      {"accuracy=0.9", "operator '='"},
                      {"accuracy!=0.9", "operator '!='"},
                      {">0.9", "metric name is empty"},
                      {"9acc>1", "must start with a letter"},
                      {"acc-uracy>1", "character '-'"},
                      {"accuracy>", "threshold value is missing"},
                      {"accuracy>high", "'high' is not a number"},
                      {"accuracy>0.9x", "'0.9x' is not a number"},
                      {"accuracy>inf", "not finite"},
                      {"accuracy>nan", "not finite"}};
  for (const Row& r : rows) {
    try {
      parse_gate(r.text);
      ADD_FAILURE() << "no error for '" << r.text << "'";
    } catch (const GateError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::string("gate '") + r.text + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find(r.part), std::string::npos) << "'" << r.part << "' not in: " << msg;
    }
  }
}

TEST(Gates, EvaluateBoundariesAndMissing) {
  const Metrics m = {{"accuracy", 0.92}, {"failed", 0}, {"nan_metric", std::nan("")}};
  const auto r = evaluate_gates(
      parse_gates({"accuracy>0.92", "accuracy>=0.92", "accuracy<0.92", "accuracy<=0.92",
                   "accuracy==0.92", "failed==0", "accept_length>3", "nan_metric>0", "other>1"}),
      m, {{"accept_length", "speculative decoding off"}});
  ASSERT_EQ(r.size(), 9u);
  const bool want[] = {false, true, false, true, true, true, false, false, false};
  for (size_t i = 0; i < r.size(); ++i) EXPECT_EQ(r[i].pass, want[i]) << r[i].gate.text;
  EXPECT_EQ(r[0].verdict, "FAIL");
  EXPECT_EQ(r[1].verdict, "pass");
  EXPECT_EQ(r[6].verdict, "missing");
  EXPECT_FALSE(r[6].value.has_value());
  EXPECT_NE(r[6].detail.find("speculative decoding off"), std::string::npos) << r[6].detail;
  EXPECT_NE(r[8].detail.find("not measured"), std::string::npos) << r[8].detail;
  EXPECT_NE(r[0].detail.find("accuracy = 0.92, wanted > 0.92: FAIL"), std::string::npos)
      << r[0].detail;
  EXPECT_FALSE(all_pass(r));
  EXPECT_TRUE(all_pass({r[1], r[3]}));
  EXPECT_TRUE(all_pass({}));
}

RunReport sample_report() {
  RunReport r;
  r.suite = "gsm8k";
  r.title = "GSM8K <test> & co";
  r.context = {{"url", "http://127.0.0.1:1"}, {"command", "dsv4-eval gsm8k --gate 'a>1'"}};
  r.metrics = {{"accuracy", 0.95, "", "correct / questions", ""},
               {"accept_length", std::nullopt, "", "server", "speculative decoding off"}};
  r.gates = evaluate_gates(parse_gates({"accuracy>0.9", "accuracy>0.99", "accept_length>3"}),
                           {{"accuracy", 0.95}}, {{"accept_length", "speculative decoding off"}});
  r.tables = {{"Outcomes", {"correct", "wrong|x"}, {{"19", "1"}}}};
  r.notes = {"a note"};
  r.exit_code = 1;
  r.status = "FAIL";
  r.duration_s = 1.5;
  return r;
}

TEST(Reports, JsonCarriesEverything) {
  const auto j = report_to_json(sample_report());
  EXPECT_EQ(j["suite"], "gsm8k");
  EXPECT_EQ(j["status"], "FAIL");
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_DOUBLE_EQ(j["metrics"]["accuracy"].get<double>(), 0.95);
  EXPECT_TRUE(j["metrics"]["accept_length"].is_null());
  EXPECT_EQ(j["metric_notes"]["accept_length"], "speculative decoding off");
  ASSERT_EQ(j["gates"].size(), 3u);
  EXPECT_EQ(j["gates"][0]["verdict"], "pass");
  EXPECT_EQ(j["gates"][1]["verdict"], "FAIL");
  EXPECT_EQ(j["gates"][2]["verdict"], "missing");
  EXPECT_DOUBLE_EQ(j["gates"][1]["threshold"].get<double>(), 0.99);
  EXPECT_EQ(j["context"]["url"], "http://127.0.0.1:1");
}

TEST(Reports, MarkdownListsGatesMetricsTables) {
  const std::string md = report_to_markdown(sample_report());
  EXPECT_NE(md.find("## GSM8K <test> & co: FAIL"), std::string::npos) << md;
  EXPECT_NE(md.find("| `accuracy>0.9` | 0.95 | > 0.9 | pass |"), std::string::npos) << md;
  EXPECT_NE(md.find("| `accuracy>0.99` | 0.95 | > 0.99 | **FAIL** |"), std::string::npos) << md;
  EXPECT_NE(md.find("**missing** (accept_length not available: speculative decoding off)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| accept_length | n/a | server (speculative decoding off) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| correct | wrong\\|x |"), std::string::npos) << md;  // escaped pipe
  EXPECT_NE(md.find("- a note"), std::string::npos);
}

TEST(Reports, JunitOneCasePerGateEscaped) {
  const std::string x = report_to_junit(sample_report());
  EXPECT_NE(x.find("<testsuite name=\"gsm8k\" tests=\"3\" failures=\"2\" errors=\"0\""),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("<testcase classname=\"gsm8k.gates\" name=\"accuracy&gt;0.9\""),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("<failure message=\"accuracy = 0.95, wanted &gt; 0.99: FAIL\" type=\"FAIL\">"),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("type=\"missing\""), std::string::npos) << x;
  EXPECT_NE(x.find("value=\"dsv4-eval gsm8k --gate &apos;a&gt;1&apos;\""), std::string::npos) << x;
  EXPECT_EQ(x.find("<test>"), std::string::npos) << "unescaped text in " << x;
}

TEST(Reports, JunitErrorCaseWhenRunCouldNotComplete) {
  RunReport r = sample_report();
  r.gates.clear();
  r.status = "ERROR";
  r.error = "server unreachable <127.0.0.1>";
  const std::string x = report_to_junit(r);
  EXPECT_NE(x.find("errors=\"1\""), std::string::npos) << x;
  EXPECT_NE(x.find("<error message=\"server unreachable &lt;127.0.0.1&gt;\">"), std::string::npos)
      << x;
}

TEST(Reports, WriteFilesAndAppendStepSummary) {
  TempDir d;
  const std::string summary = d.str("summary.md");
  e2e_test::write_text(summary, "previous step\n");
  ::setenv("GITHUB_STEP_SUMMARY", summary.c_str(), 1);
  std::string err;
  const bool ok = write_reports(sample_report(), d.path() / "out", &err);
  ::unsetenv("GITHUB_STEP_SUMMARY");
  ASSERT_TRUE(ok) << err;
  const auto j = nlohmann::json::parse(slurp(d.str("out/report.json")));
  EXPECT_EQ(j["status"], "FAIL");
  const std::string md = slurp(d.str("out/report.md"));
  EXPECT_EQ(slurp(summary), "previous step\n" + md + "\n");
  EXPECT_NE(slurp(d.str("out/junit.xml")).find("<testsuites"), std::string::npos);
  // Without the variable nothing is appended.
  ASSERT_TRUE(write_reports(sample_report(), d.path() / "out", &err)) << err;
  EXPECT_EQ(slurp(summary), "previous step\n" + md + "\n");
}

TEST(Reports, UnwritableDirectoryIsAnError) {
  TempDir d;
  e2e_test::write_text(d.str("file"), "x");
  std::string err;
  EXPECT_FALSE(write_reports(sample_report(), d.path() / "file" / "sub", &err));
  EXPECT_NE(err.find("file/sub"), std::string::npos) << err;
}

}  // namespace
}  // namespace dsv4::eval

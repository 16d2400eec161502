// The benchmark rows every family declares: each builds its adapter, names itself by its own
// vars, draws, and states its work; the plan selects, adds and orders rows as documented.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "dsv4/bench/plan.hpp"
#include "dsv4/replay/replay.hpp"

namespace dsv4::bench {
namespace {

std::vector<PlannedRow> all_rows() { return plan({}); }

// Every registered kernel family (the harness's own smoke family aside) declares rows.
TEST(BenchRows, EveryKernelFamilyDeclaresRows) {
  std::set<std::string> with_rows;
  for (const PlannedRow& r : all_rows()) with_rows.insert(r.family);
  for (const std::string& f : replay::family_names()) {
    if (f == "smoke") continue;
    EXPECT_TRUE(with_rows.count(f)) << f << " declares no benchmark row (bench_rows())";
  }
}

// A row's adapter built from its vars has the same vars: --draw --shape and the case file's
// dsv4.shape name the row exactly, so the peers' lines find it.
TEST(BenchRows, EachRowIsTheCaseItsVarsName) {
  for (const PlannedRow& r : all_rows()) {
    const replay::Family* f = replay::find_family(r.family);
    std::unique_ptr<fx::KernelCase> k;
    ASSERT_NO_THROW(k = f->drawing->from_vars(r.row.vars)) << r.id;
    EXPECT_EQ(k->shape_spec(), r.row.vars.spec()) << r.id;
    EXPECT_EQ(r.id, r.family + ":" + r.row.vars.spec());
  }
}

// A family's first rows (its smallest) draw, and their declared work is what a launch must at
// least move: positive bytes, no FLOPs where the family only moves data. (The device run draws
// every row; drawing them all here would cost minutes of CI.)
TEST(BenchRows, TheFirstRowsDrawAndStateTheirWork) {
  std::map<std::string, int> taken;
  for (const PlannedRow& r : all_rows()) {
    if (r.family == "sparse_decode" || taken[r.family]++ >= 2) continue;  // its own test below
    const auto k = replay::find_family(r.family)->drawing->from_vars(r.row.vars);
    fx::Rng rng(7);
    const fx::Tensors in = k->draw(rng);
    const fx::Work w = k->work(in, k->reference(in));
    EXPECT_GT(w.bytes, 0) << r.id;
    EXPECT_EQ(w.flops, 0) << r.id;
  }
  EXPECT_EQ(taken.size(), replay::family_names().size() - 2);  // all but smoke and sparse_decode
}

// sparse_decode's work counts the keys a query reads: 4 * 512 flops per key and head, and each
// key's bytes once, on a case small enough to count by hand.
TEST(BenchRows, SparseDecodeWorkCountsTheKeysRead) {
  const auto k = replay::find_family("sparse_decode")
                     ->drawing->from_vars(fx::Vars::parse("B=2,H=16,K=64,v41,P=64"));
  fx::Rng rng(3);
  fx::Tensors in = k->draw(rng);
  auto idx = in.at("indices").values<int32_t>();
  auto len = in.at("lengths").values<int32_t>();
  double keys = 0;
  for (size_t b = 0; b < 2; ++b)
    for (size_t j = 0; j < 64 && int64_t(j) < len[b]; ++j) keys += idx[b * 64 + j] >= 0;
  ASSERT_GT(keys, 0);
  const fx::Work w = k->work(in, k->reference(in));
  EXPECT_DOUBLE_EQ(w.flops, keys * 16 * 4 * 512);
  const double token = double(in.at("pool").shape[1]) / 64;  // v41: 528 bytes a token
  EXPECT_GE(w.bytes, keys * token + double(in.at("q").data.size()));
}

TEST(BenchPlan, SelectsByFamilyAndShapeWords) {
  const auto rows = plan({.families = {"split_combine"}, .shapes = {"B=64,sink,rope"}});
  ASSERT_EQ(rows.size(), 2u);  // the rope row, and its weights-per-lane variant
  for (const PlannedRow& r : rows) {
    EXPECT_EQ(r.family, "split_combine");
    EXPECT_NE(r.row.vars.spec().find("rope"), std::string::npos);
    EXPECT_FALSE(r.for_target);
  }
}

// candidate_blocks's target compares it with the indexer's sorted top-k, whose own target compares
// it with the unsorted select: both rows are timed too, first, and marked.
TEST(BenchPlan, AddsAndOrdersTheRowsATargetComparesWith) {
  const auto rows = plan({.families = {"candidate_blocks"}, .shapes = {"B=32,len=8192"}});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].id, "indexer_topk:B=32,width=8192,K=512,len=8192");
  EXPECT_EQ(rows[1].id, "indexer_topk:B=32,width=8192,K=512,len=8192,sorted");
  EXPECT_TRUE(rows[0].for_target);
  EXPECT_TRUE(rows[1].for_target);
  EXPECT_EQ(rows[2].family, "candidate_blocks");
  EXPECT_FALSE(rows[2].for_target);
  // In the whole plan, every row a target names comes before the row.
  std::set<std::string> seen;
  for (const PlannedRow& r : all_rows()) {
    for (const cases::BenchTarget& t : r.row.targets)
      if (!t.row.empty()) {
        EXPECT_TRUE(seen.count(t.row)) << r.id << " before " << t.row;
      }
    seen.insert(r.id);
  }
}

TEST(BenchPlan, BadSelectionsNameWhatIsWrong) {
  try {
    plan({.families = {"kv_stor"}});
    FAIL() << "an unknown family was planned";
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("--family kv_stor: no such family"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("sparse_decode"), std::string::npos) << e.what();
  }
  try {
    plan({.families = {"smoke"}});
    FAIL() << "a family without rows was planned";
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("declares no benchmark rows"), std::string::npos);
  }
  try {
    plan({.families = {"kv_store"}, .shapes = {"T=3"}});
    FAIL() << "a filter matching nothing was planned";
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("--shape T=3"), std::string::npos) << e.what();
  }
}

TEST(BenchPlan, DescribeListsRowsAndTargets) {
  const std::string d = describe(plan({.families = {"ring_layout"}, .shapes = {"n=65536"}}));
  EXPECT_NE(d.find("ring_layout\n"), std::string::npos) << d;
  EXPECT_NE(d.find("launcher=window_rows  target: >= 50% of copy"), std::string::npos) << d;
}

}  // namespace
}  // namespace dsv4::bench

namespace dsv4::bench {
namespace {
// What the runner's check does with a row's output before timing it, on the host: every family's
// comparator given an output of the declared dtype and shape (its start state, not the reference's
// values) reports a mismatch, and one given the reference's own output a match.
TEST(BenchRows, EachFamilysComparatorJudgesADeclaredOutput) {
  std::map<std::string, int> taken;
  for (const PlannedRow& r : plan({})) {
    if (r.family == "sparse_decode" || taken[r.family]++ >= 1) continue;
    const auto k = replay::find_family(r.family)->drawing->from_vars(r.row.vars);
    fx::Rng rng(7);
    const fx::Tensors in = k->draw(rng);
    const fx::Tensors want = k->reference(in);
    for (const fx::OutputSpec& spec : k->outputs(in)) {
      ASSERT_TRUE(want.count(spec.name)) << r.id << ": no reference output " << spec.name;
      const fx::st::Tensor start = fx::filled(spec.dtype, spec.shape, 0xA5);
      EXPECT_TRUE(k->compare(spec, want.at(spec.name), want.at(spec.name), in))
          << r.id << " " << spec.name;
      (void)k->compare(spec, start, want.at(spec.name), in);  // must not crash
    }
  }
}
}  // namespace
}  // namespace dsv4::bench

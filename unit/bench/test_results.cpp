// dsv4-bench's judgement: each target kind met, missed or not judged; the exit code; the peers'
// lines; the JSON and Markdown reports.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "dsv4/bench/peers.hpp"
#include "dsv4/bench/results.hpp"

namespace dsv4::bench {
namespace {

namespace t = cases::target;

Measured row(const std::string& spec, std::vector<cases::BenchTarget> targets, double us,
             double bytes = 1e6, double copy_gbps = 1000, double flops = 0) {
  Measured m;
  m.planned.family = "kv_store";
  m.planned.row = {fx::Vars::parse(spec), std::move(targets)};
  m.planned.id = cases::bench_row_id("kv_store", m.planned.row.vars);
  m.us = us, m.bytes = bytes, m.copy_gbps = copy_gbps, m.flops = flops;
  return m;
}

TargetState state(Measured m, const std::map<std::string, const Measured*>& by_id = {}) {
  judge(m, by_id);
  EXPECT_EQ(m.targets.size(), 1u);
  return m.targets.empty() ? TargetState::kUnjudged : m.targets[0].state;
}

TEST(BenchTargets, TimeCopyShareAndRate) {
  EXPECT_EQ(state(row("T=1", {t::max_us(8)}, 7.9)), TargetState::kMet);
  EXPECT_EQ(state(row("T=1", {t::max_us(8)}, 8.1)), TargetState::kMissed);
  // 1 MB in 2 us = 500 GB/s against a 1000 GB/s copy: 50%.
  EXPECT_EQ(state(row("T=1", {t::of_copy(0.5)}, 2.0)), TargetState::kMet);
  EXPECT_EQ(state(row("T=1", {t::of_copy(0.5)}, 2.1)), TargetState::kMissed);
  EXPECT_EQ(state(row("T=1", {t::of_copy(0.5)}, 2.0, 1e6, 0)), TargetState::kUnjudged);
  // 5e8 flops in 2 us = 250 TFLOP/s.
  EXPECT_EQ(state(row("T=1", {t::tflops(250)}, 2.0, 1e6, 1000, 5e8)), TargetState::kMet);
  EXPECT_EQ(state(row("T=1", {t::tflops(250)}, 2.1, 1e6, 1000, 5e8)), TargetState::kMissed);
  EXPECT_EQ(state(row("T=1", {t::tflops(250)}, 2.0)), TargetState::kUnjudged);  // no FLOPs
}

TEST(BenchTargets, SpeedupOverThePeers) {
  Measured m = row("T=1", {t::speedup(3)}, 10);
  EXPECT_EQ(state(m), TargetState::kUnjudged);  // no peer: not a pass
  m.peer = Peer{.name = "x", .eager_us = 40, .compile_us = 29};
  EXPECT_EQ(state(m), TargetState::kMissed);  // the faster peer is 2.9x
  m.peer->compile_us = 31;
  EXPECT_EQ(state(m), TargetState::kMet);
  Measured c = row("T=1", {t::speedup(1.5, "compile")}, 10);
  c.peer = Peer{.name = "x", .eager_us = 100};
  EXPECT_EQ(state(c), TargetState::kUnjudged);  // no torch.compile time
}

TEST(BenchTargets, AgainstAnotherRow) {
  const Measured other = row("T=2", {}, 10);
  const std::map<std::string, const Measured*> by_id = {{other.planned.id, &other}};
  EXPECT_EQ(state(row("T=1", {t::times_row("kv_store", fx::Vars::parse("T=2"), 2)}, 20), by_id),
            TargetState::kMet);
  EXPECT_EQ(state(row("T=1", {t::times_row("kv_store", fx::Vars::parse("T=2"), 2)}, 21), by_id),
            TargetState::kMissed);
  EXPECT_EQ(state(row("T=1", {t::plus_row("kv_store", fx::Vars::parse("T=2"), 4)}, 14), by_id),
            TargetState::kMet);
  EXPECT_EQ(state(row("T=1", {t::plus_row("kv_store", fx::Vars::parse("T=2"), 4)}, 14.5), by_id),
            TargetState::kMissed);
  EXPECT_EQ(state(row("T=1", {t::plus_row("kv_store", fx::Vars::parse("T=9"), 4)}, 1), by_id),
            TargetState::kUnjudged);
}

TEST(BenchTargets, ExitCodeSaysWhatHappened) {
  Measured met = row("T=1", {t::max_us(8)}, 1), missed = row("T=2", {t::max_us(8)}, 9),
           untargeted = row("T=3", {}, 1), wrong = row("T=4", {}, 0);
  wrong.wrong = true;
  wrong.error = "WRONG output, not timed";
  for (Measured* m : {&met, &missed, &untargeted, &wrong}) judge(*m, {});
  EXPECT_EQ(exit_code({met, untargeted}), 0);
  EXPECT_EQ(verdict_line({met, untargeted}), "targets: all met (1)");
  EXPECT_EQ(exit_code({met, missed}), 1);
  EXPECT_EQ(exit_code({met, wrong}), 1);  // a wrong output is a failure, never a figure
  EXPECT_EQ(verdict_line({met, missed, wrong}),
            "targets: 1 MISSED, 1 rows with a WRONG output, 1 met");
  Measured unjudged = row("T=5", {t::speedup(2)}, 1);
  judge(unjudged, {});
  EXPECT_EQ(exit_code({met, unjudged}), 3);  // a target nobody could judge is not met
  Measured failed = row("T=6", {}, 0);
  failed.error = "failed on the device: out of memory";
  EXPECT_EQ(exit_code({failed}), 3);
  EXPECT_EQ(exit_code({}), 3);  // nothing measured
}

// A row whose launch this device's build does not have (kv_store lanes=64 on CUDA) is listed,
// not a run that could not run; one with a target is still a target nobody judged.
TEST(BenchTargets, ARowNotBuiltForThisDeviceIsListedNotFailed) {
  Measured met = row("T=1", {t::max_us(8)}, 1), elsewhere = row("T=2", {}, 0),
           targeted = row("T=3", {t::max_us(8)}, 0);
  for (Measured* m : {&elsewhere, &targeted}) {
    m->error = "not on this device: lanes=64 is not built for backend cuda";
    m->not_here = true;
  }
  for (Measured* m : {&met, &elsewhere, &targeted}) judge(*m, {});
  EXPECT_EQ(exit_code({met, elsewhere}), 0);
  EXPECT_EQ(verdict_line({met, elsewhere}), "targets: all met (1); 1 rows not for this device");
  EXPECT_EQ(exit_code({met, targeted}), 3);
  EXPECT_EQ(exit_code({elsewhere}), 3);  // nothing measured
  EXPECT_EQ(table_cells(elsewhere)[2], "n/a");
}

TEST(BenchReports, JsonAndMarkdownCarryEveryRow) {
  Measured a = row("T=1", {t::max_us(8)}, 2.5);
  a.peer = Peer{.name = "index_copy_", .eager_us = 12.5, .compile_us = 9.0};
  judge(a, {});
  Measured b = row("T=2", {}, 0);
  b.wrong = true;
  b.error = "WRONG output, not timed: out.pool differs";
  const RunInfo info{.device = "NVIDIA H200",
                     .arch = "sm_90",
                     .backend = "cuda",
                     .driver = "driver 13000, runtime 13000",
                     .commit = "abc1234",
                     .date = "2026-12-01T00:00:00Z",
                     .command = "dsv4-bench",
                     .compute_units = 132,
                     .matmul_tflops = 700.0,
                     .matmul_shape = "8192x8192x8192"};
  const auto j = nlohmann::json::parse(to_json(info, {a, b}));
  EXPECT_EQ(j["device"], "NVIDIA H200");
  EXPECT_EQ(j["commit"], "abc1234");
  EXPECT_EQ(j["driver"], "driver 13000, runtime 13000");
  EXPECT_EQ(j["exit_code"], 1);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["id"], "kv_store:T=1");
  EXPECT_DOUBLE_EQ(j["rows"][0]["us"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(j["rows"][0]["torch_compile_us"].get<double>(), 9.0);
  EXPECT_EQ(j["rows"][0]["targets"][0]["state"], "met");
  EXPECT_TRUE(j["rows"][1]["us"].is_null());
  EXPECT_EQ(j["rows"][1]["wrong"], true);
  EXPECT_EQ(table_header().size(), table_cells(a).size());
  EXPECT_EQ(table_header().size(), table_cells(b).size());
  EXPECT_EQ(table_header()[1], "launch");
  const std::string md = to_markdown(info, {a, b});
  EXPECT_NE(md.find("## kv_store"), std::string::npos) << md;
  EXPECT_NE(md.find("| T=1 |  | 2.50 |"), std::string::npos) << md;
  EXPECT_NE(md.find("3.60x"), std::string::npos) << md;  // 9.0 / 2.5, the faster peer
  EXPECT_NE(md.find("| T=2 |  | WRONG |"), std::string::npos) << md;
  EXPECT_NE(md.find("math ceiling: 700.0 TFLOP/s"), std::string::npos) << md;
  EXPECT_NE(md.find("targets: 1 rows with a WRONG output, 1 met"), std::string::npos) << md;
}

std::string write(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(BenchPeers, ReadsTheScriptsLines) {
  const Peers p = read_peers(write(
      "peers.jsonl",
      R"({"file": "a.safetensors", "family": "kv_store", "shape": "T=1", "peer": "index_copy_",)"
      R"( "device": "NVIDIA H200", "torch": "2.11", "eager_us": 12.5, "compile_us": null,)"
      R"( "eager_error": null, "compile_error": "Inductor refused"})"
      "\n\n"
      R"({"ceiling": "bf16_matmul", "tflops": 701.5, "shape": "8192x8192x8192"})"
      "\n"));
  ASSERT_NE(p.find("kv_store:T=1"), nullptr);
  const Peer& k = *p.find("kv_store:T=1");
  EXPECT_EQ(k.name, "index_copy_");
  EXPECT_EQ(k.eager_us, 12.5);
  EXPECT_FALSE(k.compile_us);
  EXPECT_EQ(k.compile_error, "Inductor refused");
  EXPECT_EQ(k.best_us(), 12.5);
  EXPECT_EQ(p.device, "NVIDIA H200");
  EXPECT_EQ(p.matmul_tflops, 701.5);
  EXPECT_EQ(p.find("kv_store:T=2"), nullptr);
}

TEST(BenchPeers, ABadLineNamesTheFileAndLine) {
  const std::string path =
      write("bad.jsonl", "{\"family\": \"kv_store\", \"shape\": \"T=1\"}\nnot json\n");
  try {
    read_peers(path);
    FAIL() << "a line that is not JSON was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ", line 2: not JSON"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(read_peers(write("noshape.jsonl", "{\"family\": \"kv_store\"}\n")),
               std::runtime_error);
  EXPECT_THROW(read_peers(::testing::TempDir() + "absent.jsonl"), std::runtime_error);
}

// The peers' script that exits 3 (no torch, no device) leaves no rows and says why; one that
// exits 1 (some peer failed) keeps what it measured.
TEST(BenchPeers, RunningTheScriptReportsWhyThereAreNoPeers) {
  const std::string dir = ::testing::TempDir();
  const std::string fail = write("fail.sh", "exit 3\n");
  const Peers none = run_peers("sh", fail, dir, dir + "out-none.jsonl");
  EXPECT_TRUE(none.rows.empty());
  EXPECT_NE(none.error.find("exited 3"), std::string::npos) << none.error;
  const std::string some =
      write("some.sh",
            "while [ $# -gt 0 ]; do [ \"$1\" = --out ] && out=$2; shift; done\n"
            "echo '{\"family\": \"kv_store\", \"shape\": \"T=1\", \"eager_us\": 3}' > "
            "\"$out\"\nexit 1\n");
  const Peers p = run_peers("sh", some, dir, dir + "out-some.jsonl");
  EXPECT_EQ(p.error, "");
  ASSERT_NE(p.find("kv_store:T=1"), nullptr);
  EXPECT_EQ(p.find("kv_store:T=1")->eager_us, 3);
  // Cut short by timeout(1) (exit 124): the rows written so far are kept, and the run says so.
  const std::string cut = write("cut.sh",
                                "while [ $# -gt 0 ]; do [ \"$1\" = --out ] && out=$2; shift; done\n"
                                "echo '{\"family\": \"kv_store\", \"shape\": \"T=1\", "
                                "\"eager_us\": 3}' > \"$out\"\nexit 124\n");
  const Peers c = run_peers("sh", cut, dir, dir + "out-cut.jsonl");
  EXPECT_NE(c.error.find("ran out of time after 1 rows"), std::string::npos) << c.error;
  EXPECT_NE(c.find("kv_store:T=1"), nullptr);
}

}  // namespace
}  // namespace dsv4::bench

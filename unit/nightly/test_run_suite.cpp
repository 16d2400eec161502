// run-suite and sanitize orchestration with stand-in tools (shell scripts): exit codes, the
// server always stopped, logs and reports kept in the artifact folder, the kernels table.
#include <gtest/gtest.h>

#include <chrono>

#include "helpers.hpp"
#include "registry.hpp"
#include "run_suite.hpp"

namespace dsv4::nightly {
namespace {

using nlohmann::json;

// dsv4-eval stand-in: behaviour from FAKE_* variables of the suite's environment.
const char* kFakeEval = R"X(#!/bin/sh
cmd=$1; shift
echo "fake dsv4-eval $cmd $*"
case "$cmd" in
  wait-ready)
    [ -n "$FAKE_READY_SLEEP" ] && sleep "$FAKE_READY_SLEEP"
    exit "${FAKE_READY_EXIT:-0}" ;;
  gsm8k)
    out=
    while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
    if [ "${FAKE_RUN_EXIT:-0}" = 1 ]; then pass=false; else pass=true; fi
    echo "{\"gates\": [{\"gate\": \"accuracy>0.92\", \"pass\": $pass, \"value\": 0.5, \"verdict\": \"x\", \"detail\": \"accuracy = 0.5\"}]}" > "$out/report.json"
    [ -n "$FAKE_RUN_SLEEP" ] && sleep "$FAKE_RUN_SLEEP"
    exit "${FAKE_RUN_EXIT:-0}" ;;
esac
exit 2
)X";

// Server stand-in: writes the port file (when given one) and serves nothing until stopped.
const char* kFakeServer = R"X(#!/bin/sh
echo "fake server $*"
echo "fake server: HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-unset}"
portfile=
while [ $# -gt 0 ]; do [ "$1" = --port-file ] && portfile=$2; shift; done
if [ -n "$FAKE_SERVER_EXIT" ]; then sleep 0.3; echo "fake server: failing"; exit "$FAKE_SERVER_EXIT"; fi
[ -n "$portfile" ] && echo 12345 > "$portfile"
exec sleep 300
)X";

// A sharded GoogleTest executable: names and writes its XML as fixtures/main/test_main.cpp and
// GoogleTest do; shard 2 has a failing test.
const char* kFakeShard = R"X(#!/bin/sh
x=${1#--gtest_output=xml:}
echo "[dsv4] shard $((GTEST_SHARD_INDEX + 1)) of $GTEST_TOTAL_SHARDS of $0; GoogleTest XML: $x"
mkdir -p "$(dirname "$x")"
if [ "$GTEST_SHARD_INDEX" = 0 ]; then
  echo '<testsuites><testcase name="Poison" classname="KvStore" status="run" result="completed"/></testsuites>' > "$x"
  exit 0
fi
echo '<testsuites><testcase name="Hostile" classname="KvStore" status="run" result="completed"><failure message="mismatch at 3"/></testcase><testcase name="GraphReplay" classname="KvStore" status="run" result="completed"/></testsuites>' > "$x"
exit 1
)X";

const char* kFakeNvidiaSmi = R"X(#!/bin/sh
[ -n "$FAKE_NO_GPU" ] || printf '0\n1\n'
)X";

class RunSuite : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("GITHUB_STEP_SUMMARY");
    ::unsetenv("HF_HOME");
    ::unsetenv("DSV4_CASE_DIR");
    test::write_file(dir_ / "build/e2e/dsv4-eval", kFakeEval, true);
    test::write_file(dir_ / "build/fixtures/server/fake-server", kFakeServer, true);
    test::write_file(dir_ / "build/nightly/nvidia-smi", kFakeNvidiaSmi, true);
    test::write_file(dir_ / "src/nightly/gpu-resource-spec.sh",
                     test::read_file(DSV4_SOURCE_DIR "/nightly/gpu-resource-spec.sh"), true);
    // A ctest tree standing in for a GPU build: two families, one test needing two GPUs.
    test::write_file(dir_ / "src/ct-pass/CTestTestfile.cmake",
                     "add_test(kernels/KvStore.Poison /bin/true)\n"
                     "add_test(kernels/RingLayout.GraphReplay /bin/sh -c \"exit 0\")\n"
                     "add_test(cpu/Other.Test /bin/false)\n"
                     "set_tests_properties(kernels/KvStore.Poison kernels/RingLayout.GraphReplay "
                     "PROPERTIES LABELS gpu RESOURCE_GROUPS gpus:1)\n"
                     "set_tests_properties(cpu/Other.Test PROPERTIES LABELS cpu)\n");
    // Shards as cmake/Dsv4GpuTests.cmake registers them; the second has a failing test.
    test::write_file(dir_ / "build/kernels_test_kv_store", kFakeShard, true);
    std::string shards;
    for (int i = 1; i <= 2; ++i) {
      const std::string name = "kernels_test_kv_store/shard-" + std::to_string(i) + "-of-2";
      shards += "add_test(" + name + " " + dir_ / "build/kernels_test_kv_store" +
                " --gtest_output=xml:" + dir_ / ("build/junit/" + name + ".xml") + ")\n" +
                "set_tests_properties(" + name + " PROPERTIES LABELS gpu RESOURCE_GROUPS gpus:1 " +
                "ENVIRONMENT \"GTEST_TOTAL_SHARDS=2;GTEST_SHARD_INDEX=" + std::to_string(i - 1) +
                "\")\n";
    }
    test::write_file(dir_ / "src/ct-shards/CTestTestfile.cmake", shards);
    // Every test skips (as GPU tests do without a GPU): SKIP_RETURN_CODE, as GoogleTest's skip
    // marker makes CTest report them.
    test::write_file(
        dir_ / "src/ct-skip/CTestTestfile.cmake",
        "add_test(kernels/KvStore.Poison /bin/sh -c \"echo no GPU; exit 77\")\n"
        "add_test(kernels/RingLayout.GraphReplay /bin/sh -c \"echo no GPU; exit 77\")\n"
        "set_tests_properties(kernels/KvStore.Poison kernels/RingLayout.GraphReplay "
        "PROPERTIES LABELS gpu RESOURCE_GROUPS gpus:1 SKIP_RETURN_CODE 77)\n");
    test::write_file(
        dir_ / "src/ct-family-skip/CTestTestfile.cmake",
        "add_test(kernels/KvStore.Poison /bin/true)\n"
        "add_test(kernels/RingLayout.GraphReplay /bin/sh -c \"echo no GPU; exit 77\")\n"
        "add_test(kernels/RingLayout.Hostile /bin/sh -c \"echo no GPU; exit 77\")\n"
        "set_tests_properties(kernels/KvStore.Poison kernels/RingLayout.GraphReplay "
        "kernels/RingLayout.Hostile PROPERTIES LABELS gpu RESOURCE_GROUPS gpus:1 "
        "SKIP_RETURN_CODE 77)\n");
    // A test that writes a case file where DSV4_CASE_DIR says (from its own working folder).
    test::write_file(dir_ / "src/ct-casedir/CTestTestfile.cmake",
                     "add_test(kernels/KvStore.Poison /bin/sh -c \"mkdir -p $DSV4_CASE_DIR && "
                     "touch $DSV4_CASE_DIR/kv_store.safetensors\")\n"
                     "set_tests_properties(kernels/KvStore.Poison PROPERTIES LABELS gpu "
                     "RESOURCE_GROUPS gpus:1)\n");
    test::write_file(dir_ / "src/ct-fail/CTestTestfile.cmake",
                     "add_test(kernels/KvStore.Poison /bin/true)\n"
                     "add_test(kernels/KvStore.Hostile /bin/sh -c \"echo mismatch; exit 1\")\n"
                     "set_tests_properties(kernels/KvStore.Poison kernels/KvStore.Hostile "
                     "PROPERTIES LABELS gpu RESOURCE_GROUPS gpus:1)\n");
    json e2e = {
        {"kind", "e2e"},
        {"runner", "mi35x-8"},
        {"timeout_minutes", 40},
        {"container", {{"image", "img"}}},
        {"sources", test::e2e_sources()},
        {"server",
         {{"model", "org/model"},
          {"command",
           {"fake-server", "--model", "{model}", "--port", "0", "--port-file", "{port_file}"}},
          {"ready_timeout_s", 20},
          {"stop_grace_s", 2},
          {"allow_download", true}}},
        {"run",
         {{"command", {"dsv4-eval", "gsm8k", "--url", "{url}", "--out", "{out}"}},
          {"gates", {"accuracy>0.92"}},
          {"timeout_s", 20}}}};
    auto with = [&](const char* name, json env) {
      json s = e2e;
      s["name"] = name;
      s["env"] = env;
      return s;
    };
    json fixed_port =
        with("e2e-server-dies", {{"FAKE_SERVER_EXIT", "7"}, {"FAKE_READY_SLEEP", "30"}});
    fixed_port["server"]["command"] = {"fake-server", "--model", "{model}", "--port", "{port}"};
    json timeout = with("e2e-runner-timeout", {{"FAKE_RUN_SLEEP", "30"}});
    timeout["run"]["timeout_s"] = 1;
    json retried = with("e2e-retried", {{"FAKE_READY_EXIT", "3"}});
    retried["retries"] = 1;
    json cached = with("e2e-cached", {{"HF_HOME", dir_ / "hf"}});
    test::write_file(dir_ / "hf/hub/models--org--model/snapshots/abc/config.json", "{}");
    json nocache = with("e2e-no-cache", {{"HF_HOME", dir_ / "empty-hf"}});
    nocache["server"]["allow_download"] = false;
    json uncached = with("e2e-no-hf-home", json::object());
    uncached["server"]["allow_download"] = false;
    json triton = with("e2e-triton-mtp", {{"SGLANG_HACK_FLASHMLA_BACKEND", "triton"}});
    triton["server"]["command"] = {"fake-server", "--model",
                                   "{model}",     "--port-file",
                                   "{port_file}", "--tp",
                                   "8",           "--attention-backend",
                                   "dsv4",        "--speculative-algorithm",
                                   "EAGLE"};
    json missing = with("e2e-missing-runner", json::object());
    missing["run"]["command"] = {"dsv4-eval-absent", "--url", "{url}"};
    json kernels = {{"kind", "kernels"},
                    {"runner", "mi35x-8"},
                    {"timeout_minutes", 70},
                    {"container", {{"image", "rocm"}}},
                    {"build", {{"preset", "hip"}}},
                    {"ctest",
                     {{"test_dir", "ct-pass"},
                      {"label", "gpu"},
                      {"parallel", 2},
                      {"timeout_s", 60},
                      {"families", {"kv_store", "ring_layout"}},
                      {"checks",
                       {{{"name", "graph"}, {"match", "Graph"}},
                        {{"name", "poison"}, {"match", "Poison"}},
                        {{"name", "hostile"}, {"match", "Hostile"}}}}}}};
    json kfail = kernels, knogpu = kernels, kshards = kernels, kskip = kernels, kcase = kernels;
    kskip["name"] = "kernels-all-skipped";
    kskip["ctest"]["test_dir"] = "ct-skip";
    kcase["name"] = "kernels-case-dir";
    kcase["ctest"]["test_dir"] = "ct-casedir";
    kcase["ctest"]["families"] = {"kv_store"};
    // One family passes, the other's tests all skip: the second family was not checked.
    json kfam = kernels;
    kfam["name"] = "kernels-family-skipped";
    kfam["ctest"]["test_dir"] = "ct-family-skip";
    json kabsent = kernels;
    kabsent["name"] = "kernels-family-absent";
    kabsent["ctest"]["families"] = {"kv_store", "ring_layout", "sparse_decode"};
    kshards["name"] = "kernels-shards";
    kshards["ctest"]["test_dir"] = "ct-shards";
    kernels["name"] = "kernels-pass";
    kfail["name"] = "kernels-fail";
    kfail["ctest"]["test_dir"] = "ct-fail";
    knogpu["name"] = "kernels-no-gpu";
    knogpu["env"] = {{"FAKE_NO_GPU", "1"}};
    json doc = test::registry_doc({with("e2e-green", json::object()),
                                   with("e2e-gate", {{"FAKE_RUN_EXIT", "1"}}),
                                   with("e2e-not-ready", {{"FAKE_READY_EXIT", "3"}}), fixed_port,
                                   timeout, missing, retried, cached, nocache, uncached, triton,
                                   kernels, kfail, knogpu, kshards, kskip, kcase, kfam, kabsent});
    reg_ = parse_registry(doc, "test-suites.json");
  }

  int run(const std::string& suite) {
    RunOptions o;
    o.suite = suite;
    o.out = dir_ / ("out/" + suite);
    o.source_dir = dir_ / "src";
    o.build_dir = dir_ / "build";
    const auto t0 = std::chrono::steady_clock::now();
    const int code = run_suite(reg_, o);
    seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    manifest_ = json::parse(test::read_file(o.out + "/suite.json"));
    return code;
  }
  std::string artifact(const std::string& suite, const std::string& file) {
    return test::read_file(dir_ / ("out/" + suite + "/" + file));
  }
  // The server run-suite started is gone.
  void expect_server_stopped() {
    ASSERT_TRUE(manifest_.contains("server_pid")) << manifest_.dump(2);
    EXPECT_FALSE(test::process_alive(manifest_["server_pid"].get<long>()))
        << "server still running: " << manifest_.dump(2);
  }

  test::TempDir dir_;
  Registry reg_;
  json manifest_;
  double seconds_ = 0;
};

TEST_F(RunSuite, E2eGreenPath) {
  EXPECT_EQ(run("e2e-green"), 0) << manifest_.dump(2);
  expect_server_stopped();
  EXPECT_EQ(manifest_["result"], "pass");
  EXPECT_EQ(manifest_["url"], "http://127.0.0.1:12345");  // from the port file
  const std::string runner = artifact("e2e-green", "runner.log");
  EXPECT_NE(runner.find("fake dsv4-eval gsm8k --url http://127.0.0.1:12345 --out " +
                        dir_ / "out/e2e-green/eval" + " --gate accuracy>0.92"),
            std::string::npos)
      << runner;
  EXPECT_NE(artifact("e2e-green", "wait-ready.log").find("wait-ready --url http://127.0.0.1:12345"),
            std::string::npos);
  EXPECT_NE(artifact("e2e-green", "server.log")
                .find("fake server --model org/model --port 0 --port-file"),
            std::string::npos);
  EXPECT_FALSE(artifact("e2e-green", "eval/report.json").empty());
  EXPECT_NE(artifact("e2e-green", "summary.md").find("## e2e-green: ✅ pass (exit 0)"),
            std::string::npos);
  const auto files = manifest_["files"].get<std::vector<std::string>>();
  for (const char* f : {"server.log", "wait-ready.log", "runner.log", "run-suite.log",
                        "eval/report.json", "suite.json", "summary.md"})
    EXPECT_NE(std::find(files.begin(), files.end(), f), files.end()) << f;
}

TEST_F(RunSuite, E2eGateFailureIsExit1) {
  EXPECT_EQ(run("e2e-gate"), 1) << manifest_.dump(2);
  expect_server_stopped();
  EXPECT_EQ(manifest_["result"], "gate failed");
  // What the report's triage reads: the failed gate by its text, and no retry of a result.
  ASSERT_EQ(manifest_["failures"].size(), 1u) << manifest_.dump(2);
  EXPECT_EQ(manifest_["failures"][0]["kind"], "gate");
  EXPECT_EQ(manifest_["failures"][0]["id"], "accuracy>0.92");
  EXPECT_EQ(manifest_["attempts"].size(), 1u);
  EXPECT_NE(artifact("e2e-gate", "summary.md").find("| `accuracy>0.92` | 0.5 | x |"),
            std::string::npos)
      << artifact("e2e-gate", "summary.md");
}

TEST_F(RunSuite, E2eCouldNotRunIsRetriedOnceOfflineAndRecorded) {
  EXPECT_EQ(run("e2e-retried"), 3) << manifest_.dump(2);
  ASSERT_EQ(manifest_["attempts"].size(), 2u) << manifest_.dump(2);
  EXPECT_EQ(manifest_["attempts"][0]["exit_code"], 3);
  EXPECT_FALSE(manifest_["attempts"][0]["offline"].get<bool>());
  EXPECT_TRUE(manifest_["attempts"][1]["offline"].get<bool>());
  EXPECT_NE(artifact("e2e-retried", "attempt-1/server.log").find("HF_HUB_OFFLINE=unset"),
            std::string::npos);
  EXPECT_NE(artifact("e2e-retried", "server.log").find("HF_HUB_OFFLINE=1"), std::string::npos);
  EXPECT_NE(artifact("e2e-retried", "summary.md").find("Retried: attempt 1 exit 3"),
            std::string::npos)
      << artifact("e2e-retried", "summary.md");
  ASSERT_EQ(manifest_["failures"].size(), 1u);
  EXPECT_EQ(manifest_["failures"][0]["kind"], "could-not-run");
}

TEST_F(RunSuite, E2eRunsOfflineWhenTheCacheHoldsTheModel) {
  EXPECT_EQ(run("e2e-cached"), 0) << manifest_.dump(2);
  EXPECT_NE(manifest_["model_cached"].get<std::string>().find("models--org--model/snapshots/abc"),
            std::string::npos);
  EXPECT_NE(artifact("e2e-cached", "server.log").find("--model org/model"), std::string::npos);
  EXPECT_NE(artifact("e2e-cached", "server.log").find("HF_HUB_OFFLINE=1"), std::string::npos);
  EXPECT_EQ(run("e2e-green"), 0) << manifest_.dump(2);
  EXPECT_NE(artifact("e2e-green", "server.log").find("HF_HUB_OFFLINE=unset"), std::string::npos)
      << "no cache, no offline mode";
}

TEST_F(RunSuite, E2eNeverReadyIsExit3WithLogsKept) {
  EXPECT_EQ(run("e2e-not-ready"), 3) << manifest_.dump(2);
  expect_server_stopped();
  EXPECT_NE(manifest_["reason"].get<std::string>().find("wait-ready exited with 3"),
            std::string::npos);
  EXPECT_FALSE(artifact("e2e-not-ready", "server.log").empty());
  EXPECT_NE(artifact("e2e-not-ready", "summary.md").find("last lines of server.log"),
            std::string::npos);
}

TEST_F(RunSuite, E2eServerThatExitsIsNoticedWhileWaiting) {
  EXPECT_EQ(run("e2e-server-dies"), 3) << manifest_.dump(2);
  EXPECT_LT(seconds_, 15.0) << "run-suite waited for wait-ready instead of watching the server";
  EXPECT_NE(manifest_["reason"].get<std::string>().find("server exited (exit code 7)"),
            std::string::npos)
      << manifest_["reason"];
  EXPECT_NE(artifact("e2e-server-dies", "server.log").find("fake server: failing"),
            std::string::npos);
}

TEST_F(RunSuite, E2eRunnerTimeoutIsExit3) {
  EXPECT_EQ(run("e2e-runner-timeout"), 3) << manifest_.dump(2);
  EXPECT_LT(seconds_, 15.0);
  expect_server_stopped();
  EXPECT_NE(manifest_["reason"].get<std::string>().find("did not finish within 1 s"),
            std::string::npos)
      << manifest_["reason"];
}

TEST_F(RunSuite, E2eMissingRunnerIsExit3) {
  EXPECT_EQ(run("e2e-missing-runner"), 3) << manifest_.dump(2);
  expect_server_stopped();
  EXPECT_NE(manifest_["reason"].get<std::string>().find("dsv4-eval-absent"), std::string::npos)
      << manifest_["reason"];
}

TEST_F(RunSuite, E2eWithoutTheModelInTheCacheFailsFastNamingThePath) {
  EXPECT_EQ(run("e2e-no-cache"), 3) << manifest_.dump(2);
  EXPECT_LT(seconds_, 5.0);
  const std::string why = manifest_["reason"];
  EXPECT_NE(why.find("no snapshot of org/model: looked for " + dir_ / "empty-hf" +
                     "/hub/models--org--model/snapshots/*/config.json"),
            std::string::npos)
      << why;
  EXPECT_FALSE(manifest_.contains("server_pid")) << "a server was started: " << manifest_.dump(2);
  EXPECT_EQ(manifest_["failures"][0]["kind"], "could-not-run");
  EXPECT_EQ(run("e2e-no-hf-home"), 3) << manifest_.dump(2);
  EXPECT_NE(manifest_["reason"].get<std::string>().find("HF_HOME is not set"), std::string::npos)
      << manifest_["reason"];
}

TEST_F(RunSuite, E2eWritesTheLabelsDsv4EvalReportGroupsBy) {
  EXPECT_EQ(run("e2e-triton-mtp"), 0) << manifest_.dump(2);
  const json labels = json::parse(artifact("e2e-triton-mtp", "eval/labels.json"));
  EXPECT_EQ(labels, json({{"suite", "e2e-triton-mtp"},
                          {"model", "org/model"},
                          {"backend", "triton"},
                          {"spec", "eagle"},
                          {"attention", "dsv4"},
                          {"tp", "8"},
                          {"dp", "1"}}))
      << labels.dump(2);
  EXPECT_EQ(manifest_["labels"], labels);
  EXPECT_EQ(run("e2e-green"), 0) << manifest_.dump(2);
  const json plain = json::parse(artifact("e2e-green", "eval/labels.json"));
  EXPECT_EQ(plain["backend"], "default");
  EXPECT_EQ(plain["spec"], "off");
}

TEST_F(RunSuite, ReportsRecordTheImageDigestAndTheSglangCommit) {
  ::setenv("DSV4_IMAGE", "rocm/sgl-dev:v0.5.10-rocm720-mi35x-20261130", 1);
  ::setenv("DSV4_IMAGE_DIGEST", "rocm/sgl-dev@sha256:abc123", 1);
  ::setenv("DSV4_SGLANG_COMMIT", "0123456789abcdef0123456789abcdef01234567", 1);
  const int code = run("e2e-green");
  ::unsetenv("DSV4_IMAGE");
  ::unsetenv("DSV4_IMAGE_DIGEST");
  ::unsetenv("DSV4_SGLANG_COMMIT");
  EXPECT_EQ(code, 0) << manifest_.dump(2);
  EXPECT_EQ(manifest_["image"], "rocm/sgl-dev:v0.5.10-rocm720-mi35x-20261130");
  EXPECT_EQ(manifest_["image_digest"], "rocm/sgl-dev@sha256:abc123");
  EXPECT_EQ(manifest_["sglang_commit"], "0123456789abcdef0123456789abcdef01234567");
  const std::string md = artifact("e2e-green", "summary.md");
  EXPECT_NE(md.find("Image `rocm/sgl-dev:v0.5.10-rocm720-mi35x-20261130`, digest "
                    "`rocm/sgl-dev@sha256:abc123`; SGLang commit "
                    "`0123456789abcdef0123456789abcdef01234567`."),
            std::string::npos)
      << md;
  // Unset, the summary says so instead of staying silent.
  EXPECT_EQ(run("e2e-green"), 0);
  EXPECT_NE(artifact("e2e-green", "summary.md")
                .find("digest not recorded (DSV4_IMAGE_DIGEST unset); SGLang commit not recorded"),
            std::string::npos)
      << artifact("e2e-green", "summary.md");
}

TEST_F(RunSuite, UnknownSuiteIsExit2) {
  RunOptions o;
  o.suite = "nope";
  EXPECT_EQ(run_suite(reg_, o), 2);
}

TEST_F(RunSuite, KernelsPass) {
  ::setenv("GITHUB_STEP_SUMMARY", (dir_ / "step-summary.md").c_str(), 1);
  EXPECT_EQ(run("kernels-pass"), 0) << manifest_.dump(2);
  ::unsetenv("GITHUB_STEP_SUMMARY");
  EXPECT_EQ(manifest_["tests"], 2) << "only the gpu label runs";
  const std::string spec = artifact("kernels-pass", "resource-spec.json");
  EXPECT_EQ(json::parse(spec)["local"][0]["gpus"].size(), 2u) << spec;
  EXPECT_NE(artifact("kernels-pass", "junit.xml").find("kernels/KvStore.Poison"),
            std::string::npos);
  const std::string summary = test::read_file(dir_ / "step-summary.md");
  EXPECT_NE(summary.find("| kv_store | — | ✅ 1/1 | — | ✅ 1/1 |"), std::string::npos) << summary;
  EXPECT_NE(summary.find("| ring_layout | ✅ 1/1 | — | — | ✅ 1/1 |"), std::string::npos) << summary;
  EXPECT_NE(artifact("kernels-pass", "run-suite.log").find("--resource-spec-file"),
            std::string::npos);
}

TEST_F(RunSuite, KernelsFailureIsExit1WithTheTable) {
  EXPECT_EQ(run("kernels-fail"), 1) << manifest_.dump(2);
  EXPECT_EQ(manifest_["tests_failed"], 1);
  const std::string md = artifact("kernels-fail", "summary.md");
  EXPECT_NE(md.find("| kv_store | — | ✅ 1/1 | ❌ 0/1 | ❌ 1/2 |"), std::string::npos) << md;
  EXPECT_NE(md.find("- `kernels/KvStore.Hostile`"), std::string::npos) << md;
  ASSERT_EQ(manifest_["failures"].size(), 1u);
  EXPECT_EQ(manifest_["failures"][0]["id"], "kernels/KvStore.Hostile");
  EXPECT_EQ(manifest_["case_dir"], dir_ / "out/kernels-fail/cases") << "case files are uploaded";
}

TEST_F(RunSuite, KernelsShardsAreReportedByTheirTests) {
  EXPECT_EQ(run("kernels-shards"), 1) << manifest_.dump(2);
  EXPECT_EQ(manifest_["tests"], 3) << "the shards' GoogleTest tests, not the 2 shards";
  EXPECT_EQ(manifest_["tests_failed"], 1);
  ASSERT_EQ(manifest_["failures"].size(), 1u) << manifest_.dump(2);
  EXPECT_EQ(manifest_["failures"][0]["id"], "kernels_test_kv_store/KvStore.Hostile");
  EXPECT_EQ(manifest_["failures"][0]["detail"], "mismatch at 3");
  const std::string md = artifact("kernels-shards", "summary.md");
  EXPECT_NE(md.find("| kv_store | ✅ 1/1 | ✅ 1/1 | ❌ 0/1 | ❌ 2/3 |"), std::string::npos) << md;
  EXPECT_NE(
      artifact("kernels-shards", "junit/kernels_test_kv_store/shard-2-of-2.xml").find("Hostile"),
      std::string::npos)
      << "the shards' XML travels with the artifact";
}

TEST_F(RunSuite, KernelsRunWhereEveryTestSkippedCannotPass) {
  EXPECT_EQ(run("kernels-all-skipped"), 3) << manifest_.dump(2);
  EXPECT_EQ(manifest_["tests"], 2);
  EXPECT_EQ(manifest_["tests_skipped"], 2);
  EXPECT_EQ(manifest_["tests_passed"], 0);
  EXPECT_NE(manifest_["reason"].get<std::string>().find("every one of the 2 tests skipped"),
            std::string::npos)
      << manifest_["reason"];
  EXPECT_EQ(manifest_["failures"][0]["kind"], "could-not-run");
}

TEST_F(RunSuite, KernelsFamilyWhoseTestsAllSkippedIsCouldNotRunNamingIt) {
  EXPECT_EQ(run("kernels-family-skipped"), 3) << manifest_.dump(2);
  EXPECT_EQ(manifest_["tests_passed"], 1);
  EXPECT_EQ(manifest_["tests_skipped"], 2);
  const std::string why = manifest_["reason"];
  EXPECT_NE(why.find("no test ran for the families ring_layout (2 skipped)"), std::string::npos)
      << why;
  EXPECT_EQ(why.find("kv_store"), std::string::npos) << why;
}

TEST_F(RunSuite, KernelsFamilyWithoutAnyTestIsCouldNotRunNamingIt) {
  EXPECT_EQ(run("kernels-family-absent"), 3) << manifest_.dump(2);
  const std::string why = manifest_["reason"];
  EXPECT_NE(why.find("sparse_decode (no test)"), std::string::npos) << why;
}

TEST_F(RunSuite, KernelsCaseDirIsAbsoluteSoCaseFilesLandInTheArtifact) {
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir_.path());
  ::setenv("DSV4_CASE_DIR", "out/kernels-case-dir/cases", 1);
  const int code = run("kernels-case-dir");
  ::unsetenv("DSV4_CASE_DIR");
  std::filesystem::current_path(cwd);
  EXPECT_EQ(code, 0) << manifest_.dump(2);
  EXPECT_EQ(manifest_["case_dir"], dir_ / "out/kernels-case-dir/cases") << manifest_.dump(2);
  EXPECT_TRUE(std::filesystem::exists(dir_ / "out/kernels-case-dir/cases/kv_store.safetensors"))
      << "the case file is not in the artifact folder";
  EXPECT_FALSE(std::filesystem::exists(dir_ / "src/ct-casedir/out"))
      << "the case file landed in the test's build folder";
}

TEST_F(RunSuite, KernelsWithoutGpuIsExit3) {
  EXPECT_EQ(run("kernels-no-gpu"), 3) << manifest_.dump(2);
  EXPECT_NE(artifact("kernels-no-gpu", "resource-spec.log").find("no GPU found"),
            std::string::npos);
}

// compute-sanitizer stand-in: runs the command; FAKE_SANITIZER_ERRORS plants a finding.
const char* kFakeSanitizer = R"X(#!/bin/sh
log= tool=
while [ $# -gt 0 ]; do
  case "$1" in
    --tool) tool=$2; shift 2 ;;
    --error-exitcode|--print-limit) shift 2 ;;
    --log-file) log=$2; shift 2 ;;
    --*) shift ;;
    *) break ;;
  esac
done
echo "========= COMPUTE-SANITIZER" > "$log"
"$@"; rc=$?
if [ "$tool" = racecheck ]; then  # as compute-sanitizer 2025 writes it
  if [ "${1##*/}" = "$FAKE_SANITIZER_ERRORS" ]; then
    printf '========= Error: Race reported between Write access at race(int *)+0x90\n' >> "$log"
    printf '=========     and Read access at race(int *)+0xa0 [512 hazards]\n' >> "$log"
    echo "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)" >> "$log"
    exit 86
  fi
  echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)" >> "$log"
  exit $rc
fi
if [ -n "$FAKE_SANITIZER_ERRORS" ] && [ "${1##*/}" = "$FAKE_SANITIZER_ERRORS" ]; then
  printf '========= Invalid __global__ write of size 2 bytes\n=========     at kv_store+0x40\n' >> "$log"
  printf '========= Invalid __global__ write of size 2 bytes\n' >> "$log"
  echo "========= ERROR SUMMARY: 2 errors" >> "$log"
  exit 86
fi
echo "========= ERROR SUMMARY: 0 errors" >> "$log"
exit $rc
)X";

// GoogleTest stand-in: writes a passing XML report for the tests its filter names.
const char* kFakeGtest = R"X(#!/bin/sh
for a; do
  case "$a" in
    --gtest_filter=*) f=${a#--gtest_filter=} ;;
    --gtest_output=xml:*) x=${a#--gtest_output=xml:} ;;
  esac
done
echo "filter $f" >> "$0.calls"
[ -n "$f" ] || f=Whole.Executable
{
  echo '<testsuites>'
  IFS=:
  for t in $f; do
    echo "<testcase name=\"${t#*.}\" classname=\"${t%%.*}\" status=\"run\" result=\"completed\"/>"
  done
  echo '</testsuites>'
} > "$x"
)X";

class Sanitize : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("GITHUB_STEP_SUMMARY");
    ::unsetenv("FAKE_SANITIZER_ERRORS");
    test::write_file(dir_ / "bin/compute-sanitizer", kFakeSanitizer, true);
    for (const char* exe : {"kernels_test_kv_store", "kernels_test_ring_layout", "cpu_test"})
      test::write_file(dir_ / (std::string("build/") + exe), kFakeGtest, true);
    std::string ct;
    auto add = [&](const std::string& exe, const std::string& test, const std::string& label) {
      const std::string name = "kernels/" + test;
      ct += "add_test(" + name + " " + dir_ / ("build/" + exe) + " --gtest_filter=" + test +
            " --gtest_also_run_disabled_tests --gtest_output=xml:" + dir_ / "ignored.xml" + ")\n";
      ct += "set_tests_properties(" + name + " PROPERTIES LABELS " + label + " WORKING_DIRECTORY " +
            dir_.path() + ")\n";
    };
    add("kernels_test_kv_store", "KvStore.Poison", "gpu");
    add("kernels_test_kv_store", "KvStore.Hostile", "gpu");
    add("kernels_test_ring_layout", "RingLayout.Read", "gpu");
    add("cpu_test", "Cpu.Only", "cpu");
    test::write_file(dir_ / "build/CTestTestfile.cmake", ct);
    opt_.build_dir = dir_ / "build";
    opt_.sanitizer = dir_ / "bin/compute-sanitizer";
    opt_.out = dir_ / "out";
    opt_.timeout_s = 60;
  }
  test::TempDir dir_;
  SanitizeOptions opt_;
};

TEST_F(Sanitize, CleanRunOneProcessPerExecutable) {
  EXPECT_EQ(sanitize(opt_), 0);
  EXPECT_EQ(test::read_file(dir_ / "build/kernels_test_kv_store.calls"),
            "filter KvStore.Poison:KvStore.Hostile\n");
  EXPECT_EQ(test::read_file(dir_ / "build/kernels_test_ring_layout.calls"),
            "filter RingLayout.Read\n");
  EXPECT_TRUE(test::read_file(dir_ / "build/cpu_test.calls").empty()) << "label cpu ran";
  const std::string md = test::read_file(dir_ / "out/summary.md");
  EXPECT_NE(md.find("2 executables, 3 tests: 3 passed, 0 failed, 0 skipped; 0 sanitizer errors"),
            std::string::npos)
      << md;
}

TEST_F(Sanitize, FindingsFailTheRunAndAreListed) {
  ::setenv("FAKE_SANITIZER_ERRORS", "kernels_test_kv_store", 1);
  EXPECT_EQ(sanitize(opt_), 1);
  ::unsetenv("FAKE_SANITIZER_ERRORS");
  const std::string md = test::read_file(dir_ / "out/summary.md");
  EXPECT_NE(md.find("2 sanitizer errors"), std::string::npos) << md;
  EXPECT_NE(md.find("| kernels_test_kv_store | 2 | 0 | 0 | 2 | exit 86 |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("- kernels_test_kv_store: Invalid __global__ write of size 2 bytes (x2)"),
            std::string::npos)
      << md;
}

TEST_F(Sanitize, RacecheckSummaryIsRead) {
  opt_.tool = "racecheck";
  EXPECT_EQ(sanitize(opt_), 0);
  std::string md = test::read_file(dir_ / "out/summary.md");
  EXPECT_NE(md.find("| kernels_test_kv_store | 2 | 0 | 0 | 0 | exit 0 |"), std::string::npos) << md;
  EXPECT_EQ(md.find("Findings"), std::string::npos) << "a clean summary is no finding: " << md;
  ::setenv("FAKE_SANITIZER_ERRORS", "kernels_test_ring_layout", 1);
  EXPECT_EQ(sanitize(opt_), 1);
  ::unsetenv("FAKE_SANITIZER_ERRORS");
  md = test::read_file(dir_ / "out/summary.md");
  EXPECT_NE(md.find("| kernels_test_ring_layout | 1 | 0 | 0 | 1 | exit 86 |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("- kernels_test_ring_layout: Error: Race reported between Write access"),
            std::string::npos)
      << md;
}

// Shards (GTEST_TOTAL_SHARDS in their environment) of one executable: one unfiltered process.
TEST_F(Sanitize, ShardsRunTheirExecutableOnceWhole) {
  test::write_file(dir_ / "build/kernels_test_sharded", kFakeGtest, true);
  std::string ct = test::read_file(dir_ / "build/CTestTestfile.cmake");
  for (const char* shard : {"shard-1-of-2", "shard-2-of-2"})
    ct += std::string("add_test(kernels_test_sharded/") + shard + " " +
          dir_ / "build/kernels_test_sharded" + " --gtest_output=xml:" + dir_ / "ignored.xml" +
          ")\nset_tests_properties(kernels_test_sharded/" + shard +
          " PROPERTIES LABELS gpu ENVIRONMENT \"GTEST_TOTAL_SHARDS=2;GTEST_SHARD_INDEX=0\")\n";
  test::write_file(dir_ / "build/CTestTestfile.cmake", ct);
  EXPECT_EQ(sanitize(opt_), 0);
  EXPECT_EQ(test::read_file(dir_ / "build/kernels_test_sharded.calls"), "filter \n");
  const std::string md = test::read_file(dir_ / "out/summary.md");
  EXPECT_NE(md.find("3 executables, 4 tests: 4 passed"), std::string::npos) << md;
}

TEST_F(Sanitize, MissingSanitizerOrTestsCannotRun) {
  SanitizeOptions o = opt_;
  o.sanitizer = dir_ / "bin/absent";
  EXPECT_EQ(sanitize(o), 3);
  o = opt_;
  o.label = "no-such-label";
  EXPECT_EQ(sanitize(o), 3);
}

}  // namespace
}  // namespace dsv4::nightly

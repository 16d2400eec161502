// The registry loader: the committed registry loads; every kind of bad field is named with its
// path and value.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "helpers.hpp"
#include "registry.hpp"

namespace dsv4::nightly {
namespace {

using nlohmann::json;

json valid_registry() {
  return json::parse(R"X({
    "schema": 3,
    "nightly": {"cron": "0 2 * * *", "weekly_cron": "0 4 * * 6", "repository": "o/r",
                "runners": {"mi35x-1": {"label": "linux-mi35x-gpu-1", "vendor": "amd"},
                            "mi35x-8": {"label": "linux-mi35x-gpu-8", "vendor": "amd"}},
                "tools": {"image": "debian:12", "max_glibc": "2.35", "max_glibcxx": "3.4.30"},
                "hf_cache": {"host_path": "/h", "mount": "/m", "hf_home": "/m/hf"},
                "sglang": {"repository": "sgl-project/sglang", "ref": "main", "install_args": "--extras dev_hip"}},
    "pr": {"deps_command": "bash ci/deps.sh", "test_command": "bash ci/test.sh",
           "hip_image": "rocm/dev-ubuntu-24.04:7.2-complete"},
    "manual": [{"configure_preset": "cuda", "reason": "no NVIDIA runner"}],
    "e2e_defaults": {"container": {"image": "img:{date}", "not_before": "20260424",
                                   "options": "--shm-size 32g"},
                     "env": {"SGLANG_ENABLE_ASYNC_ASSERT": "0"},
                     "sources": {"container.image": "start script", "env": "exec script"}},
    "suites": [
      {"name": "kernels-a", "kind": "kernels", "runner": "mi35x-1",
       "timeout_minutes": 70, "build": {"preset": "hip"}, "container": {"image": "rocm:7"},
       "env": {"HIP_LAUNCH_BLOCKING": "1"},
       "ctest": {"test_preset": "nightly", "label": "gpu", "families": ["kv_store"], "timeout_s": 600,
                 "checks": [{"name": "poison", "match": "Poison"}]}},
      {"name": "e2e-a", "kind": "e2e", "runner": "mi35x-8", "timeout_minutes": 90,
       "retries": 1, "env": {"X": "1"},
       "server": {"model": "org/m", "command": ["serve", "--host", "{host}", "--port", "{port}",
                                               "--model-path", "{model}"], "port": 0,
                  "ready_timeout_s": 600},
       "run": {"command": ["dsv4-eval", "gsm8k", "--url", "{url}", "--out", "{out}"], "timeout_s": 600,
               "gates": ["accuracy>0.92", "accept_length >= 3.0"]},
       "sources": {"server.model": "t", "server.command": "t", "server.env": "t",
                   "server.ready_timeout_s": "t", "run.gates": "t"}}
    ]})X");
}

TEST(Registry, CommittedRegistryLoads) {
  const Registry reg = load_registry(DSV4_SOURCE_DIR "/nightly/suites.json");
  int kernels = 0, e2e = 0;
  for (const auto& s : reg.suites) {
    if (s.kind == Kind::kKernels) {
      ++kernels;
      EXPECT_FALSE(s.ctest.families.empty()) << s.name;
      EXPECT_FALSE(s.ctest.checks.empty()) << s.name;
    } else {
      ++e2e;
      EXPECT_FALSE(s.run.gates.empty()) << s.name << " has no gate";
      EXPECT_GT(s.server.ready_timeout_s, 0) << s.name;
    }
  }
  EXPECT_GE(kernels, 1);
  EXPECT_GE(e2e, 1);
}

TEST(Registry, ValidDocumentParsesEveryField) {
  const Registry reg = parse_registry(valid_registry(), "t.json");
  ASSERT_EQ(reg.suites.size(), 2u);
  const Suite& k = reg.suites[0];
  EXPECT_EQ(k.kind, Kind::kKernels);
  EXPECT_EQ(k.ctest.test_preset, "nightly");
  EXPECT_EQ(k.ctest.parallel, 1);
  EXPECT_EQ(k.env.at("HIP_LAUNCH_BLOCKING"), "1");
  const Suite& e = reg.suites[1];
  EXPECT_EQ(e.kind, Kind::kE2e);
  EXPECT_EQ(e.server.command[4], "{port}");
  EXPECT_EQ(e.run.gates[1], "accept_length >= 3.0");
  EXPECT_EQ(e.server.stop_grace_s, 30);  // default
  EXPECT_EQ(reg.nightly.artifact_dir, "out/nightly");
  EXPECT_EQ(reg.find("e2e-a"), &reg.suites[1]);
  EXPECT_EQ(reg.find("nope"), nullptr);
  // e2e_defaults merge under the suite's own fields.
  EXPECT_EQ(e.container.image, "img:{date}");
  EXPECT_EQ(e.env.at("SGLANG_ENABLE_ASYNC_ASSERT"), "0");
  EXPECT_EQ(e.env.at("X"), "1");
  EXPECT_EQ(e.sources.at("env"), "exec script");
  EXPECT_EQ(e.retries, 1);
  EXPECT_EQ(e.server.model, "org/m");
  EXPECT_EQ(reg.manual.at(0).preset, "cuda");
  EXPECT_EQ(reg.nightly.triage_runs, 3);
}

// The registry takes a gate exactly when dsv4-eval's own parser does.
TEST(Registry, GatesAreDsv4EvalsGates) {
  for (const char* ok : {"accuracy>0.92", "accept_length>2.8", "latency_p99 <= 1e-3", "failed==0",
                         "accept_length_mean>=2.5"}) {
    json doc = valid_registry();
    doc["suites"][1]["run"]["gates"] = {ok};
    EXPECT_NO_THROW(parse_registry(doc, "t.json")) << ok;
  }
  for (const char* bad :
       {"accuracy!=0.9", "accuracy >> 0.9", "accuracy>", "9x>1", "accuracy>nan"}) {
    json doc = valid_registry();
    doc["suites"][1]["run"]["gates"] = {bad};
    try {
      parse_registry(doc, "t.json");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const RegistryError& e) {
      EXPECT_NE(std::string(e.what()).find("dsv4-eval rejects it"), std::string::npos) << e.what();
    }
  }
}

TEST(Registry, CommittedE2eLaunchesNameTheirSources) {
  const Registry reg = load_registry(DSV4_SOURCE_DIR "/nightly/suites.json");
  for (const auto& s : reg.suites) {
    if (s.kind != Kind::kE2e) continue;
    for (const auto& f : launch_fields())
      EXPECT_FALSE(s.sources.at(f).empty()) << s.name << " " << f;
    EXPECT_EQ(s.server.ready_timeout_s, 5400) << s.name;
    EXPECT_EQ(s.env.at("SGLANG_ENABLE_ASYNC_ASSERT"), "0") << s.name;
    EXPECT_EQ(s.retries, 1) << s.name;
  }
  const Suite* mtp = reg.find("e2e-v4pro-mtp-ukv");
  ASSERT_NE(mtp, nullptr);
  EXPECT_NE(std::find(mtp->run.gates.begin(), mtp->run.gates.end(), "accept_length>2.8"),
            mtp->run.gates.end());
  EXPECT_EQ(mtp->server.env.at("SGLANG_HACK_FLASHMLA_BACKEND"), "unified_kv_triton");
  EXPECT_EQ(reg.find("e2e-v4pro-mtp-triton")->server.env.at("SGLANG_HACK_FLASHMLA_BACKEND"),
            "triton");
  const auto& dspark = reg.find("e2e-v4pro-dspark")->server.command;
  for (const char* flag : {"--dp", "--enable-dp-attention", "DSPARK"})
    EXPECT_NE(std::find(dspark.begin(), dspark.end(), flag), dspark.end()) << flag;
  EXPECT_EQ(reg.find("e2e-v4pro-dspark")->server.model, "deepseek-ai/DeepSeek-V4-Pro-DSpark");
}

struct BadCase {
  const char* what;
  std::function<void(json&)> edit;
  const char* path;
  const char* in_message;  // also expected in the message: the value or the problem
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.what; }

class RegistryErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(RegistryErrors, NamesFieldAndValue) {
  const BadCase& c = GetParam();
  json doc = valid_registry();
  c.edit(doc);
  try {
    parse_registry(doc, "t.json");
    FAIL() << c.what << ": no error for " << doc.dump();
  } catch (const RegistryError& e) {
    EXPECT_EQ(e.path(), c.path) << e.what();
    EXPECT_NE(std::string(e.what()).find(c.in_message), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << c.in_message;
    EXPECT_EQ(std::string(e.what()).rfind("t.json: " + std::string(c.path) + ": ", 0), 0u)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fields, RegistryErrors,
    ::testing::Values(
        BadCase{"kind", [](json& d) { d["suites"][0]["kind"] = "gpu"; }, "suites[0].kind",
                "\"gpu\""},
        BadCase{"port", [](json& d) { d["suites"][1]["server"]["port"] = 70000; },
                "suites[1].server.port", "70000"},
        BadCase{"gate", [](json& d) { d["suites"][1]["run"]["gates"][0] = "accuracy >> 0.9"; },
                "suites[1].run.gates[0]", "accuracy >> 0.9"},
        BadCase{"source", [](json& d) { d["suites"][1]["sources"].erase("run.gates"); },
                "suites[1].sources.run.gates", "where SGLang sets"},
        BadCase{"no model", [](json& d) { d["suites"][1]["server"]["command"][6] = "m"; },
                "suites[1].server.command", "{model}"},
        BadCase{"retries", [](json& d) { d["suites"][1]["retries"] = 2; }, "suites[1].retries",
                "[0, 1]"},
        BadCase{"repository", [](json& d) { d["nightly"]["repository"] = "nope"; },
                "nightly.repository", "owner/name"},
        BadCase{"docker hub secret",
                [](json& d) {
                  d["nightly"]["dockerhub"] = {{"username_secret", "DOCKERHUB AMD"},
                                               {"token_secret", "T"}};
                },
                "nightly.dockerhub.username_secret", "a secret name"},
        BadCase{"caller ref", [](json& d) { d["nightly"]["caller_ref"] = "a b"; },
                "nightly.caller_ref", "a git ref"},
        BadCase{"build on e2e",
                [](json& d) {
                  d["suites"][1]["build"] = {{"preset", "cpu"}};
                },
                "suites[1].build", "tools job"},
        BadCase{"e2e job too short",
                [](json& d) { d["suites"][1]["server"]["ready_timeout_s"] = 5400; },
                "suites[1].timeout_minutes", "(1 + retries) x"},
        BadCase{"kernels job too short",
                [](json& d) { d["suites"][0]["ctest"]["timeout_s"] = 3600; },
                "suites[0].timeout_minutes", "ctest.timeout_s + 60 min"},
        BadCase{"schedule", [](json& d) { d["suites"][0]["schedule"] = "daily"; },
                "suites[0].schedule", "weekly"},
        BadCase{"manual", [](json& d) { d["manual"][0]["test_preset"] = "cuda"; }, "manual[0]",
                "exactly one"},
        BadCase{"duplicate", [](json& d) { d["suites"][1]["name"] = "kernels-a"; },
                "suites[1].name", "registered twice"},
        BadCase{"unknown field", [](json& d) { d["suites"][0]["timeout"] = 5; },
                "suites[0].timeout", "unknown field"},
        BadCase{"missing", [](json& d) { d["suites"][0].erase("runner"); }, "suites[0].runner",
                "(missing)"},
        BadCase{"runner class", [](json& d) { d["suites"][0]["runner"] = "h100"; },
                "suites[0].runner", "known: mi35x-1, mi35x-8"},
        BadCase{"vendor", [](json& d) { d["nightly"]["runners"]["mi35x-1"]["vendor"] = "intel"; },
                "nightly.runners.mi35x-1.vendor", "\"intel\""},
        BadCase{"fallback image",
                [](json& d) { d["suites"][0]["container"]["fallback_image"] = "old:1"; },
                "suites[0].container.fallback_image", "never used"},
        BadCase{"date without floor",
                [](json& d) { d["e2e_defaults"]["container"].erase("not_before"); },
                "suites[1].container.not_before", "required with {date}"},
        BadCase{"bad floor",
                [](json& d) { d["e2e_defaults"]["container"]["not_before"] = "2026-04-24"; },
                "suites[1].container.not_before", "YYYYMMDD"},
        BadCase{
            "ipc host",
            [](json& d) { d["suites"][0]["container"]["options"] = "--ipc=host --shm-size 8g"; },
            "suites[0].container.options", "--shm-size"},
        BadCase{"job on kernels", [](json& d) { d["suites"][0]["job"] = "k"; }, "suites[0].job",
                "e2e suites only"},
        BadCase{"job mates differ",
                [](json& d) {
                  json twin = d["suites"][1];
                  twin["name"] = "e2e-b";
                  twin["job"] = "e2e";
                  twin["runner"] = "mi35x-1";
                  d["suites"][1]["job"] = "e2e";
                  d["suites"].push_back(twin);
                },
                "suites[2].job", "shares job 'e2e' with e2e-a but not its runner"},
        BadCase{"job is a suite", [](json& d) { d["suites"][1]["job"] = "kernels-a"; },
                "suites[1].job", "name of another suite"},
        BadCase{"qualify budget", [](json& d) { d["suites"][0]["qualify"] = "asan"; },
                "suites[0].timeout_minutes", "per qualify or extra step = 100 min"},
        BadCase{"qualify", [](json& d) { d["suites"][0]["qualify"] = "tsan"; }, "suites[0].qualify",
                "\"tsan\""},
        BadCase{"extra step placeholder",
                [](json& d) {
                  d["suites"][0]["extra_steps"] = {{{"name", "x"}, {"run", "run {artefacts}"}}};
                },
                "suites[0].extra_steps[0].run", "{artefacts}"},
        BadCase{"download flag", [](json& d) { d["suites"][1]["server"]["allow_download"] = "no"; },
                "suites[1].server.allow_download", "true or false"},
        BadCase{"no port", [](json& d) { d["suites"][1]["server"]["command"] = {"serve"}; },
                "suites[1].server.command", "{port}"},
        BadCase{"placeholder", [](json& d) { d["suites"][1]["server"]["command"][4] = "{prot}"; },
                "suites[1].server.command[4]", "{prot}"},
        BadCase{"runner url", [](json& d) { d["suites"][1]["run"]["command"] = {"dsv4-eval"}; },
                "suites[1].run.command", "{url}"},
        BadCase{"regex", [](json& d) { d["suites"][0]["ctest"]["checks"][0]["match"] = "Poison("; },
                "suites[0].ctest.checks[0].match", "Poison("},
        BadCase{"preset and dir", [](json& d) { d["suites"][0]["ctest"]["test_dir"] = "build"; },
                "suites[0].ctest", "exactly one"},
        BadCase{"name", [](json& d) { d["suites"][0]["name"] = "Bad_Name"; }, "suites[0].name",
                "Bad_Name"},
        BadCase{"yaml word", [](json& d) { d["suites"][0]["name"] = "on"; }, "suites[0].name",
                "YAML"},
        BadCase{"report", [](json& d) { d["suites"][0]["name"] = "report"; }, "suites[0].name",
                "name of a job"},
        BadCase{"env name", [](json& d) { d["suites"][0]["env"]["1X"] = "v"; }, "suites[0].env.1X",
                "environment variable"},
        BadCase{"ctest on e2e", [](json& d) { d["suites"][1]["ctest"] = json::object(); },
                "suites[1].ctest", "kernels suites only"},
        BadCase{"server on kernels", [](json& d) { d["suites"][0]["server"] = json::object(); },
                "suites[0].server", "e2e suites only"},
        BadCase{"no server", [](json& d) { d["suites"][1].erase("server"); }, "suites[1].server",
                "required"},
        BadCase{"schema", [](json& d) { d["schema"] = 1; }, "schema", "1"},
        BadCase{"cron", [](json& d) { d["nightly"]["cron"] = "daily"; }, "nightly.cron",
                "\"daily\""},
        BadCase{"string number", [](json& d) { d["suites"][0]["timeout_minutes"] = "60"; },
                "suites[0].timeout_minutes", "\"60\""},
        BadCase{"family", [](json& d) { d["suites"][0]["ctest"]["families"][0] = "KvStore"; },
                "suites[0].ctest.families[0]", "KvStore"},
        BadCase{"ship flag", [](json& d) { d["suites"][0]["build"]["ship"] = "yes"; },
                "suites[0].build.ship", "true or false"},
        BadCase{"shipped build of a daily image",
                [](json& d) {
                  d["suites"][0]["container"] = {{"image", "rocm:{date}"},
                                                 {"not_before", "20260424"}};
                  d["suites"][0]["build"]["ship"] = true;
                },
                "suites[0].build.ship", "without placeholders"},
        BadCase{"one shipped build, two images",
                [](json& d) {
                  d["suites"][0]["build"]["ship"] = true;
                  json twin = d["suites"][0];
                  twin["name"] = "kernels-b";
                  twin["container"]["image"] = "rocm:8";
                  d["suites"].push_back(twin);
                },
                "suites[2].build.ship",
                "ships preset hip with kernels-a but not its container.image"},
        BadCase{"one shipped build, two target lists",
                [](json& d) {
                  d["suites"][0]["build"]["ship"] = true;
                  json twin = d["suites"][0];
                  twin["name"] = "kernels-b";
                  twin["build"]["targets"] = {"dsv4-nightly"};
                  d["suites"].push_back(twin);
                },
                "suites[2].build.ship", "but not its build.targets"},
        BadCase{"job named as a build job",
                [](json& d) {
                  d["suites"][0]["build"]["ship"] = true;
                  d["suites"][1]["job"] = "build-hip";
                },
                "suites[1].job", "the job that builds preset hip for kernels-a"},
        BadCase{"no suites", [](json& d) { d["suites"] = json::array(); }, "suites", "[]"},
        BadCase{"pr", [](json& d) { d["pr"].erase("test_command"); }, "pr.test_command",
                "required"}));

TEST(Registry, UnreadableAndMalformedFilesAreNamed) {
  test::TempDir dir;
  try {
    load_registry(dir / "absent.json");
    FAIL();
  } catch (const RegistryError& e) {
    EXPECT_NE(std::string(e.what()).find("absent.json"), std::string::npos) << e.what();
  }
  test::write_file(dir / "bad.json", "{\"schema\": 1,,}");
  try {
    load_registry(dir / "bad.json");
    FAIL();
  } catch (const RegistryError& e) {
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
  }
}

TEST(Registry, SubstitutesPlaceholders) {
  EXPECT_EQ(substitute("http://{host}:{port}/x", {{"host", "127.0.0.1"}, {"port", "80"}}),
            "http://127.0.0.1:80/x");
  EXPECT_EQ(substitute("{\"a\": 1}", {}), "{\"a\": 1}");  // not a placeholder
  EXPECT_EQ(substitute("no braces", {}), "no braces");
  EXPECT_THROW(substitute("--port {prot}", {{"port", "1"}}), std::invalid_argument);
}

}  // namespace
}  // namespace dsv4::nightly

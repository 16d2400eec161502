// The registry loader: the committed registry loads; every kind of bad field is named with its
// path and value.
#include <gtest/gtest.h>

#include <functional>

#include "helpers.hpp"
#include "registry.hpp"

namespace dsv4::nightly {
namespace {

using nlohmann::json;

json valid_registry() {
  return json::parse(R"X({
    "schema": 1,
    "nightly": {"cron": "0 2 * * *"},
    "pr": {"deps_command": "bash ci/deps.sh", "test_command": "bash ci/test.sh"},
    "suites": [
      {"name": "kernels-a", "kind": "kernels", "runs_on": "linux-mi35x-gpu-1",
       "timeout_minutes": 30, "build": {"preset": "hip"},
       "env": {"HIP_LAUNCH_BLOCKING": "1"},
       "ctest": {"test_preset": "nightly", "label": "gpu", "families": ["kv_store"],
                 "checks": [{"name": "poison", "match": "Poison"}]}},
      {"name": "e2e-a", "kind": "e2e", "runs_on": "linux-mi35x-gpu-8", "timeout_minutes": 60,
       "build": {"preset": "cpu", "targets": ["dsv4-eval"]},
       "server": {"command": ["serve", "--host", "{host}", "--port", "{port}"], "port": 0},
       "run": {"command": ["dsv4-eval", "gsm8k", "--url", "{url}", "--out", "{out}"],
               "gates": ["accuracy>0.92", "accept_length >= 3.0"]}}
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
        BadCase{"duplicate", [](json& d) { d["suites"][1]["name"] = "kernels-a"; },
                "suites[1].name", "registered twice"},
        BadCase{"unknown field", [](json& d) { d["suites"][0]["timeout"] = 5; },
                "suites[0].timeout", "unknown field"},
        BadCase{"missing", [](json& d) { d["suites"][0].erase("runs_on"); }, "suites[0].runs_on",
                "(missing)"},
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
                "final job"},
        BadCase{"env name", [](json& d) { d["suites"][0]["env"]["1X"] = "v"; }, "suites[0].env.1X",
                "environment variable"},
        BadCase{"ctest on e2e", [](json& d) { d["suites"][1]["ctest"] = json::object(); },
                "suites[1].ctest", "kernels suites only"},
        BadCase{"server on kernels", [](json& d) { d["suites"][0]["server"] = json::object(); },
                "suites[0].server", "e2e suites only"},
        BadCase{"no server", [](json& d) { d["suites"][1].erase("server"); }, "suites[1].server",
                "required"},
        BadCase{"schema", [](json& d) { d["schema"] = 2; }, "schema", "2"},
        BadCase{"cron", [](json& d) { d["nightly"]["cron"] = "daily"; }, "nightly.cron",
                "\"daily\""},
        BadCase{"string number", [](json& d) { d["suites"][0]["timeout_minutes"] = "60"; },
                "suites[0].timeout_minutes", "\"60\""},
        BadCase{"family", [](json& d) { d["suites"][0]["ctest"]["families"][0] = "KvStore"; },
                "suites[0].ctest.families[0]", "KvStore"},
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

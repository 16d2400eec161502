// nightly/gpu-resource-spec.sh on faked rocminfo and nvidia-smi: the JSON CTest reads.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "helpers.hpp"

namespace dsv4::nightly {
namespace {

using nlohmann::json;

const std::string kScript = DSV4_SOURCE_DIR "/nightly/gpu-resource-spec.sh";

// A rocminfo listing with one CPU agent and `gpus` GPU agents (the lines the script reads).
std::string rocminfo_listing(int gpus) {
  std::string s = "ROCk module is loaded\n=====================\nHSA Agents\n==========\n";
  s += "*******\nAgent 1\n*******\n  Name:                    AMD EPYC 9575F\n"
       "  Device Type:             CPU                                \n";
  for (int i = 0; i < gpus; ++i)
    s += "*******\nAgent " + std::to_string(i + 2) +
         "\n*******\n  Name:                    gfx950\n  Marketing Name:          AMD "
         "Instinct MI355X\n  Device Type:             GPU                                \n";
  return s;
}

class ResourceSpec : public ::testing::Test {
 protected:
  // Fakes `tool` in the bin folder, printing `output`.
  void fake(const std::string& tool, const std::string& output) {
    test::write_file(dir_ / ("out-" + tool), output);
    test::write_file(dir_ / ("bin/" + tool),
                     "#!/bin/sh\ncat " + test::quote(dir_ / ("out-" + tool)) + "\n", true);
  }
  test::CommandResult run(const std::string& args, const std::string& env = "") {
    return test::run_command(
        "env -u CUDA_VISIBLE_DEVICES -u HIP_VISIBLE_DEVICES -u "
        "ROCR_VISIBLE_DEVICES " +
        env + " PATH=" + test::quote(dir_ / "bin") + ":/usr/bin:/bin bash " + test::quote(kScript) +
        " " + args);
  }
  json spec(const std::string& args, const std::string& env = "") {
    const auto r = run(args + " --output " + test::quote(dir_ / "spec.json"), env);
    EXPECT_EQ(r.code, 0) << r.output;
    return json::parse(test::read_file(dir_ / "spec.json"));
  }
  static std::vector<std::string> ids(const json& j) {
    EXPECT_EQ(j.at("version").at("major"), 1);
    EXPECT_EQ(j.at("version").at("minor"), 0);
    EXPECT_EQ(j.at("local").size(), 1u);
    std::vector<std::string> out;
    for (const auto& g : j.at("local").at(0).at("gpus")) out.push_back(g.at("id"));
    return out;
  }
  test::TempDir dir_;
};

TEST_F(ResourceSpec, NvidiaSmiGpus) {
  fake("nvidia-smi", "0\n1\n2\n3\n");
  const json j = spec("--slots 2");
  EXPECT_EQ(ids(j), (std::vector<std::string>{"0", "1", "2", "3"}));
  for (const auto& g : j["local"][0]["gpus"]) EXPECT_EQ(g["slots"], 2);
}

TEST_F(ResourceSpec, RocminfoGpuAgentsOnly) {
  fake("rocminfo", rocminfo_listing(8));
  fake("nvidia-smi", "0\n");  // rocminfo comes first
  const json j = spec("");
  EXPECT_EQ(ids(j).size(), 8u);
  EXPECT_EQ(ids(j).back(), "7");
  EXPECT_EQ(j["local"][0]["gpus"][0]["slots"], 1);
  EXPECT_EQ(ids(spec("--backend cuda")).size(), 1u);
}

TEST_F(ResourceSpec, VisibleDevicesNarrowAndRenumber) {
  fake("rocminfo", rocminfo_listing(8));
  EXPECT_EQ(ids(spec("", "HIP_VISIBLE_DEVICES=5,7")), (std::vector<std::string>{"0", "1"}));
  fake("nvidia-smi", "0\n1\n2\n3\n");
  EXPECT_EQ(ids(spec("--backend cuda", "CUDA_VISIBLE_DEVICES=3")), (std::vector<std::string>{"0"}));
}

TEST_F(ResourceSpec, NoGpuIsAnErrorUnlessAllowed) {
  fake("nvidia-smi", "");
  auto r = run("");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("no GPU found"), std::string::npos) << r.output;
  EXPECT_TRUE(ids(spec("--allow-none")).empty());
  fake("rocminfo", rocminfo_listing(2));
  r = run("", "ROCR_VISIBLE_DEVICES=");
  EXPECT_EQ(r.code, 1) << "an empty visible list hides every GPU: " << r.output;
}

TEST_F(ResourceSpec, BadArgumentsAreNamed) {
  fake("nvidia-smi", "0\n");
  auto r = run("--slots 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("--slots must be a positive integer, got '0'"), std::string::npos)
      << r.output;
  r = run("--backend metal");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("got 'metal'"), std::string::npos) << r.output;
}

// Slots sized by what a GPU holds: the smallest GPU's memory over the MiB one slot may use.
TEST_F(ResourceSpec, MibPerSlotFollowsTheSmallestGpu) {
  test::write_file(dir_ / "bin/nvidia-smi",
                   "#!/bin/sh\ncase \"$*\" in\n"
                   "  *memory.total*) printf '143771\\n81559\\n' ;;\n"
                   "  *) printf '0\\n1\\n' ;;\nesac\n",
                   true);
  json j = spec("--mib-per-slot 4096");
  ASSERT_EQ(ids(j).size(), 2u);
  for (const auto& g : j["local"][0]["gpus"]) EXPECT_EQ(g["slots"], 81559 / 4096);
  j = spec("--mib-per-slot 1000000");
  EXPECT_EQ(j["local"][0]["gpus"][0]["slots"], 1) << "at least one slot";

  fake("rocminfo", rocminfo_listing(2));
  test::write_file(dir_ / "bin/rocm-smi",
                   "#!/bin/sh\necho 'device,VRAM Total Memory (B),VRAM Total Used Memory (B)'\n"
                   "echo 'card0,309220868096,295047168'\necho 'card1,309220868096,295047168'\n",
                   true);
  j = spec("--mib-per-slot 8192");
  EXPECT_EQ(j["local"][0]["gpus"][1]["slots"], 309220868096 / 1048576 / 8192);

  test::write_file(dir_ / "bin/rocm-smi", "#!/bin/sh\nexit 1\n", true);
  auto r = run("--mib-per-slot 8192");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("cannot read the GPUs' memory"), std::string::npos) << r.output;
  r = run("--mib-per-slot 0");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--mib-per-slot must be a positive integer, got '0'"), std::string::npos)
      << r.output;
  r = run("--slots");
  EXPECT_EQ(r.code, 2) << "an option without its value: " << r.output;
}

TEST_F(ResourceSpec, CtestAcceptsTheSpec) {
  fake("nvidia-smi", "0\n1\n");
  spec("");
  // A test that asks for two GPUs of one slot each runs; one that asks for three does not.
  test::write_file(dir_ / "ct/CTestTestfile.cmake",
                   "add_test(two /bin/sh -c \"echo $CTEST_RESOURCE_GROUP_0_GPUS\")\n"
                   "set_tests_properties(two PROPERTIES RESOURCE_GROUPS \"2,gpus:1\")\n"
                   "add_test(three /bin/true)\n"
                   "set_tests_properties(three PROPERTIES RESOURCE_GROUPS \"3,gpus:1\")\n");
  const auto r = test::run_command("ctest --test-dir " + test::quote(dir_ / "ct") +
                                   " -V --resource-spec-file " + test::quote(dir_ / "spec.json"));
  EXPECT_NE(r.output.find("id:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Insufficient resources for test three"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1/2 Test #1: two ."), std::string::npos) << r.output;
}

}  // namespace
}  // namespace dsv4::nightly

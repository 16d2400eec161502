// The labels of this build's tests decide which workflow runs them: a test that needs a GPU and
// carries the cpu label only ever skips (it is dormant). Read from ctest's listing of the build.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "helpers.hpp"

namespace dsv4::nightly {
namespace {

using nlohmann::json;

// ctest's properties of the test `name` in this build, or null.
json test_properties(const std::string& name) {
  test::TempDir dir;
  const auto r = test::run_command("ctest --test-dir " + test::quote(DSV4_BINARY_DIR) +
                                   " --show-only=json-v1 > " + test::quote(dir / "tests.json"));
  if (r.code != 0) {
    ADD_FAILURE() << "ctest --show-only failed: " << r.output;
    return nullptr;
  }
  const json listing = json::parse(test::read_file(dir / "tests.json"));
  for (const auto& t : listing.value("tests", json::array()))
    if (t.value("name", "") == name) return t.value("properties", json::array());
  return nullptr;
}

TEST(TestLabels, TheDeviceReplayOfCompactPagesIsAGpuTestWithAGpuSlot) {
  const std::string name = "replay/CompactPagesAdapter.DeviceReplayMatchesTheReference";
  const json props = test_properties(name);
  ASSERT_FALSE(props.is_null()) << name << " is not a test of " << DSV4_BINARY_DIR
                                << " (build replay_test_compact_pages_adapter)";
  json labels, groups;
  for (const auto& p : props) {
    if (p.value("name", "") == "LABELS") labels = p["value"];
    if (p.value("name", "") == "RESOURCE_GROUPS") groups = p["value"];
  }
  // CTest adds labels to the directory's (cpu): the gpu label puts it in the kernels suites.
  EXPECT_NE(std::find(labels.begin(), labels.end(), "gpu"), labels.end()) << props.dump();
  EXPECT_FALSE(groups.is_null()) << "no GPU slot: " << props.dump();
}

}  // namespace
}  // namespace dsv4::nightly

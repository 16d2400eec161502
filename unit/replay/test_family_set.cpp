// The kernel families named everywhere the project keeps them: the registry, the golden folders,
// the kernel and reference sources, the GPU tests, the soak sweeps and the nightly registry.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dsv4/fixtures/kernel_case.hpp"
#include "dsv4/replay/replay.hpp"

namespace dsv4::replay {
namespace {

namespace fs = std::filesystem;
using Set = std::set<std::string>;
// Where a list of families is kept -> the families it names.
using Sources = std::map<std::string, Set>;

// Every family any source names, less the harness's own, checked against each source: one line
// per family a source lacks ("F: missing from S"), or "" when every source names the same set.
std::string missing_members(const Sources& sources) {
  Set all;
  for (const auto& [where, names] : sources) all.insert(names.begin(), names.end());
  all.erase(kHarnessFamily);
  std::string out;
  for (const std::string& f : all)
    for (const auto& [where, names] : sources)
      if (!names.count(f)) out += f + ": missing from " + where + "\n";
  return out;
}

// The stems of the files of `dir` ending in `ext` (after `prefix`, which is dropped).
Set stems(const fs::path& dir, const std::string& ext, const std::string& prefix = "") {
  Set out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && e.path().extension() == ext && name.rfind(prefix, 0) == 0)
      out.insert(e.path().stem().string().substr(prefix.size()));
  }
  return out;
}

// The GPU tests: test_<family>.cpp, and test_<family>_<part>.cpp for a family's further files;
// a file whose name starts with no registered family counts as the family its stem names.
Set gpu_test_families(const fs::path& dir, const Set& registered) {
  Set out;
  for (const std::string& stem : stems(dir, ".cpp", "test_")) {
    std::string family = stem;
    for (const std::string& f : registered)
      if (stem == f || stem.rfind(f + "_", 0) == 0) family = f;
    out.insert(family);
  }
  return out;
}

Set soak_families() {
  Set out;
  for (const std::string& n : family_names())
    if (const Family* f = find_family(n); f->drawing)
      for (const auto& s : f->drawing->sweeps)
        if (s.name == "soak") out.insert(n);
  return out;
}

// Each family list of the nightly registry: suites[<name>].ctest.families.
void add_nightly_lists(const fs::path& registry, Sources* sources) {
  std::ifstream in(registry);
  ASSERT_TRUE(in) << "cannot read " << registry;
  const nlohmann::json doc = nlohmann::json::parse(in);
  size_t lists = 0;
  for (const auto& s : doc.at("suites"))
    if (s.contains("ctest") && s.at("ctest").contains("families")) {
      ++lists;
      (*sources)["nightly/suites.json suites[" + s.at("name").get<std::string>() +
                 "].ctest.families"] = s.at("ctest").at("families").get<Set>();
    }
  ASSERT_GT(lists, 0u) << registry << " names no family list";
}

Sources tree_sources() {
  const fs::path root = DSV4_SOURCE_DIR;
  const std::vector<std::string> names = kernel_family_names();
  const Set registered(names.begin(), names.end());
  const std::vector<std::string> golden = fx::golden_families();
  Sources s;
  s["the family registry (replay::kernel_family_names)"] = registered;
  s["fixtures/data/golden/<family>"] = Set(golden.begin(), golden.end());
  s["kernels/src/<family>.hip"] = stems(root / "kernels/src", ".hip");
  s["reference/src/<family>.cpp"] = stems(root / "reference/src", ".cpp");
  s["unit/kernels/test_<family>.cpp"] = gpu_test_families(root / "unit/kernels", registered);
  s["the adapters' \"soak\" sweeps"] = soak_families();
  add_nightly_lists(root / "nightly/suites.json", &s);
  return s;
}

TEST(FamilySet, TheHarnessFamilyIsRegisteredAndLeftOutByName) {
  const auto all = family_names(), kernels = kernel_family_names();
  EXPECT_THAT(all, ::testing::Contains(std::string(kHarnessFamily)));
  EXPECT_THAT(kernels, ::testing::Not(::testing::Contains(std::string(kHarnessFamily))));
  EXPECT_EQ(kernels.size() + 1, all.size());
}

TEST(FamilySet, EverySourceNamesTheRegisteredKernelFamilies) {
  const Sources s = tree_sources();
  ASSERT_FALSE(s.begin()->second.empty()) << "no kernel family is registered";
  for (const auto& [where, names] : s)
    EXPECT_FALSE(names.empty()) << where << " names no family: nothing was compared";
  EXPECT_EQ(missing_members(s), "")
      << "the kernel families differ between the places that list them";
  // What the comparison saw, for the log.
  for (const auto& [where, names] : s) {
    std::string line;
    for (const auto& n : names) line += (line.empty() ? "" : " ") + n;
    std::printf("[families] %s: %s\n", where.c_str(), line.c_str());
  }
}

TEST(FamilySet, AFamilyOneListForgetsIsNamedWithTheList) {
  Sources s = tree_sources();
  const std::string gone = *s.at("kernels/src/<family>.hip").begin();
  s.at("the adapters' \"soak\" sweeps").erase(gone);
  s["nightly/suites.json suites[x].ctest.families"] = {"kv_store", "new_family"};
  const std::string why = missing_members(s);
  EXPECT_THAT(why, ::testing::HasSubstr(gone + ": missing from the adapters' \"soak\" sweeps\n"));
  EXPECT_THAT(why, ::testing::HasSubstr("new_family: missing from the family registry"));
  EXPECT_THAT(why, ::testing::HasSubstr("new_family: missing from kernels/src/<family>.hip"));
  EXPECT_THAT(why, ::testing::HasSubstr(
                       "ring_layout: missing from nightly/suites.json suites[x].ctest.families"));
}

TEST(FamilySet, AGpuTestFileOfNoRegisteredFamilyCountsAsAFamily) {
  const fs::path dir = fs::temp_directory_path() / ("dsv4-family-set-" + std::to_string(getpid()));
  fs::create_directories(dir);
  for (const char* f :
       {"test_kv_store.cpp", "test_kv_store_codecs.cpp", "test_kv_stor.cpp", "helpers.hpp"})
    std::ofstream(dir / f) << "\n";
  EXPECT_EQ(gpu_test_families(dir, {"kv_store", "ring_layout"}), (Set{"kv_store", "kv_stor"}));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dsv4::replay

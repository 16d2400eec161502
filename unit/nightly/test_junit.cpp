// JUnit reading (CTest's and GoogleTest's formats) and the families x checks summary table.
#include <gtest/gtest.h>

#include "helpers.hpp"
#include "junit.hpp"

namespace dsv4::nightly {
namespace {

// As CTest 3.25 writes it (--output-junit), with a name that needs XML escapes.
const char* kCtestXml = R"X(<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="(empty)" tests="4" failures="1" disabled="0" skipped="1" hostname="" time="0">
	<testcase name="kernels/KvStore.PoisonOutsideTargets" classname="kernels/KvStore.PoisonOutsideTargets" time="0.01" status="run">
		<system-out>ok
</system-out>
	</testcase>
	<testcase name="kernels/Sweep/RingLayout.Shapes/T1 &lt;&amp;&gt;" classname="kernels/Sweep/RingLayout.Shapes/T1 &lt;&amp;&gt;" time="0.01" status="fail">
		<failure message="mismatch at [3]"/>
		<system-out>bad</system-out>
	</testcase>
	<testcase name="kernels/SplitCombine.GraphReplayMatchesEager" classname="kernels/SplitCombine.GraphReplayMatchesEager" time="0" status="notrun">
		<skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>
		<system-out>[  SKIPPED ] no device</system-out>
	</testcase>
	<testcase name="kernels/Smoke.Launch" classname="kernels/Smoke.Launch" time="0.1" status="run"/>
</testsuite>
)X";

// As GoogleTest writes it (--gtest_output=xml), CDATA and a skipped result included.
const char* kGtestXml = R"X(<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="3" failures="1" disabled="0" errors="0" time="0.2" name="AllTests">
  <testsuite name="KvStore" tests="3" failures="1" disabled="0" skipped="1" errors="0" time="0.2">
    <testcase name="Hostile" status="run" result="completed" time="0.1" classname="KvStore">
      <failure message="a.cpp:10&#x0A;Expected: 1" type=""><![CDATA[a.cpp:10
Expected: <testcase name="fake"/>]]></failure>
    </testcase>
    <testcase name="Determinism" status="run" result="skipped" time="0" classname="KvStore">
      <skipped message="no GPU"/>
    </testcase>
    <testcase name="Bitwise" status="run" result="completed" time="0.1" classname="KvStore" />
  </testsuite>
</testsuites>
)X";

TEST(Junit, ReadsCtestOutput) {
  const auto r = parse_junit(kCtestXml);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].name, "kernels/KvStore.PoisonOutsideTargets");
  EXPECT_EQ(r[0].outcome, Outcome::kPass);
  EXPECT_EQ(r[1].name, "kernels/Sweep/RingLayout.Shapes/T1 <&>");
  EXPECT_EQ(r[1].outcome, Outcome::kFail);
  EXPECT_EQ(r[1].message, "mismatch at [3]");
  EXPECT_EQ(r[2].outcome, Outcome::kSkip);
  EXPECT_EQ(r[3].outcome, Outcome::kPass);
}

TEST(Junit, ReadsGtestOutputIgnoringCdata) {
  const auto r = parse_junit(kGtestXml);
  ASSERT_EQ(r.size(), 3u) << "the <testcase> inside CDATA is text, not a test";
  EXPECT_EQ(r[0].name, "KvStore.Hostile");
  EXPECT_EQ(r[0].outcome, Outcome::kFail);
  EXPECT_EQ(r[0].message, "a.cpp:10\nExpected: 1");
  EXPECT_EQ(r[1].outcome, Outcome::kSkip);
  EXPECT_EQ(r[2].outcome, Outcome::kPass);
}

TEST(Junit, MalformedInputThrows) {
  EXPECT_THROW(parse_junit("<testsuite><testcase name=\"a\" status=\"run\">"), std::runtime_error);
  EXPECT_THROW(parse_junit("<testcase name=\"a"), std::runtime_error);
  EXPECT_THROW(parse_junit("<testcase name=a>"), std::runtime_error);
  EXPECT_TRUE(parse_junit("<testsuite/>").empty());
  try {
    parse_junit("<testsuite><testcase name=\"a\"></testsuite>");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("at byte"), std::string::npos) << e.what();
  }
}

// Characters above U+FFFF (four UTF-8 bytes) from references and literally, and a name with
// every predefined entity.
TEST(Junit, DecodesEveryCharacterReference) {
  const auto r = parse_junit(
      "<testsuite><testcase name=\"T.&#x1F600;&#128512;\xF0\x9F\x98\x80 "
      "&quot;&apos;&lt;&gt;&amp;\">"
      "<failure message=\"&#x10FFFF;&#xE9;\"/></testcase></testsuite>");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].name, "T.\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80 \"'<>&");
  EXPECT_EQ(r[0].message, "\xF4\x8F\xBF\xBF\xC3\xA9");
  EXPECT_EQ(r[0].outcome, Outcome::kFail);
}

TEST(Junit, FamilyAndCheckOfATestName) {
  const std::vector<std::string> fams = {"kv_store", "ring_layout", "split_combine"};
  EXPECT_EQ(family_of("kernels/KvStore.Poison", fams), "kv_store");
  EXPECT_EQ(family_of("kernels/Sweep/RingLayoutShapes.Read/T4", fams), "ring_layout");
  EXPECT_EQ(family_of("kernels/kv_store_fused.Rope", fams), "kv_store");
  EXPECT_EQ(family_of("kernels/Smoke.Launch", fams), "other");
  const std::vector<std::pair<std::string, std::string>> checks = {
      {"graph", "Graph|Replay"}, {"poison", "Poison"}, {"sweep", "Sweep"}};
  EXPECT_EQ(check_of("kernels/KvStore.PoisonAfterGraphReplay", checks), "graph");  // first wins
  EXPECT_EQ(check_of("kernels/KvStore.poisonoutside", checks), "poison");  // case-insensitive
  EXPECT_EQ(check_of("kernels/Sweep/RingLayout.Shapes/T1", checks), "sweep");
  EXPECT_EQ(check_of("kernels/Smoke.Launch", checks), "other");
}

TEST(Junit, SummaryTableLaysOutFamiliesByChecks) {
  Ctest spec;
  spec.families = {"kv_store", "ring_layout", "split_combine", "sampling_renorm"};
  spec.checks = {{"graph", "Graph|Replay"}, {"poison", "Poison"}, {"sweep", "Sweep|Shape"}};
  const std::string md = summary_table("kernels-x", parse_junit(kCtestXml), spec);
  EXPECT_NE(md.find("### kernels-x: 4 tests, 2 passed, 1 failed, 1 skipped"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| family | graph | poison | sweep | other | all |"), std::string::npos) << md;
  EXPECT_NE(md.find("| kv_store | — | ✅ 1/1 | — | — | ✅ 1/1 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| ring_layout | — | — | ❌ 0/1 | — | ❌ 0/1 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| split_combine | ⏭ 1 skipped | — | — | — | ⏭ 1 skipped |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| sampling_renorm | — | — | — | — | no tests |"), std::string::npos) << md;
  EXPECT_NE(md.find("| other | — | — | — | ✅ 1/1 | ✅ 1/1 |"), std::string::npos) << md;
  EXPECT_NE(md.find("Failed tests:\n- `kernels/Sweep/RingLayout.Shapes/T1 <&>`"), std::string::npos)
      << md;
}

// CTest's JUnit with three shards of kernels_test_kv_store and one per-test result: shard 1
// names its GoogleTest XML, shard 2's lies beside the JUnit, shard 3 timed out without one.
std::string sharded_ctest_xml(const std::string& named_xml) {
  return R"X(<testsuite>
	<testcase name="kernels_test_kv_store/shard-1-of-3" status="fail">
		<failure message=""/>
		<system-out>[dsv4] shard 1 of 3 of /b/kernels_test_kv_store; GoogleTest XML: )X" +
         named_xml + R"X(
[==========] Running 2 tests</system-out>
	</testcase>
	<testcase name="kernels_test_kv_store/shard-2-of-3" status="fail">
		<failure message=""/>
		<system-out>[dsv4] shard 2 of 3 of /b/kernels_test_kv_store; GoogleTest XML: /absent/shard-2-of-3.xml
</system-out>
	</testcase>
	<testcase name="kernels_test_kv_store/shard-3-of-3" status="fail">
		<failure message="Timeout"/>
		<system-out>[dsv4] shard 3 of 3 of /b/kernels_test_kv_store; GoogleTest XML: /absent/shard-3-of-3.xml
[ RUN      ] KvStore.Quick
[       OK ] KvStore.Quick (3 ms)
[ RUN      ] KvStore.Slow
</system-out>
	</testcase>
	<testcase name="replay/Replay.Cli" status="run"/>
</testsuite>
)X";
}

TEST(Junit, ShardsStandForTheirGoogleTestTests) {
  test::TempDir d;
  test::write_file(d / "build/junit/kernels_test_kv_store/shard-1-of-3.xml", kGtestXml);
  // Shard 2 failed, though its one test passed (e.g. it crashed at exit).
  test::write_file(d / "artifact/junit/kernels_test_kv_store/shard-2-of-3.xml",
                   "<testsuites><testcase name=\"Read\" classname=\"KvStore\" status=\"run\" "
                   "result=\"completed\"/></testsuites>");
  const auto ctest =
      parse_junit(sharded_ctest_xml(d / "build/junit/kernels_test_kv_store/shard-1-of-3.xml"));
  ASSERT_EQ(ctest.size(), 4u);
  EXPECT_NE(ctest[0].output.find("GoogleTest XML: "), std::string::npos) << "system-out is kept";
  const auto r = expand_shards(ctest, d / "artifact", d / "artifact");
  std::vector<std::string> names;
  for (const auto& t : r) names.push_back(t.name);
  EXPECT_EQ(
      names,
      (std::vector<std::string>{
          "kernels_test_kv_store/KvStore.Hostile", "kernels_test_kv_store/KvStore.Determinism",
          "kernels_test_kv_store/KvStore.Bitwise", "kernels_test_kv_store/KvStore.Read",
          "kernels_test_kv_store/shard-2-of-3", "kernels_test_kv_store/KvStore.Quick",
          "kernels_test_kv_store/KvStore.Slow", "replay/Replay.Cli"}));
  ASSERT_EQ(r.size(), 8u);
  EXPECT_EQ(r[0].outcome, Outcome::kFail);
  EXPECT_EQ(r[0].message, "a.cpp:10\nExpected: 1");
  EXPECT_EQ(r[1].outcome, Outcome::kSkip);
  EXPECT_EQ(r[3].outcome, Outcome::kPass);
  EXPECT_EQ(r[4].outcome, Outcome::kFail);
  EXPECT_NE(r[4].message.find("none of its tests did"), std::string::npos) << r[4].message;
  EXPECT_EQ(r[5].outcome, Outcome::kPass);
  EXPECT_EQ(r[6].outcome, Outcome::kFail);
  EXPECT_EQ(r[6].message, "the shard stopped in this test: Timeout");
  EXPECT_EQ(r[7].outcome, Outcome::kPass);
  // The XML the shard named was copied beside the artifact's JUnit, so a later triage finds it.
  EXPECT_EQ(test::read_file(d / "artifact/junit/kernels_test_kv_store/shard-1-of-3.xml"),
            kGtestXml);
  const auto again =
      expand_shards(parse_junit(sharded_ctest_xml("/moved/away.xml")), d / "artifact");
  EXPECT_EQ(again.size(), 8u);
  EXPECT_EQ(again[0].name, "kernels_test_kv_store/KvStore.Hostile");
}

TEST(Junit, ShardWithoutXmlOrOutputStaysAsItIs) {
  const auto r = expand_shards(
      parse_junit(
          "<testsuite><testcase name=\"x_test/shard-1-of-2\" status=\"notrun\">"
          "<skipped message=\"SKIP_REGULAR_EXPRESSION_MATCHED\"/></testcase>"
          "<testcase name=\"x_test/shard-2-of-2\" status=\"fail\"><failure message=\"SEGFAULT\"/>"
          "</testcase></testsuite>"),
      "/nonexistent");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].outcome, Outcome::kSkip);
  EXPECT_EQ(r[1].name, "x_test/shard-2-of-2");
  EXPECT_EQ(r[1].outcome, Outcome::kFail);
}

}  // namespace
}  // namespace dsv4::nightly

// GSM8K data rules: the answer extraction table, labels, prompt format, data-file errors.
#include <gtest/gtest.h>

#include "e2e_test_util.hpp"
#include "gsm8k/gsm8k_data.hpp"
#include "http/sha256.hpp"

namespace dsv4::eval::gsm8k {
namespace {

using e2e_test::TempDir;
using e2e_test::write_text;

struct ExtractCase {
  const char* name;
  const char* output;
  const char* want;  // nullptr: INVALID
};

// One row per rule of extract_answer; "sglang" notes where lm-eval's flexible-extract differs.
const ExtractCase kCases[] = {
    {"plain", "She has 42 apples.", "42"},
    {"last_of_several", "3 + 4 = 7, then 7 * 2 = 14. The answer is 14 apples, not 15.", "15"},
    {"gsm_answer_line", "48/2 = <<48/2=24>>24\n#### 72", "72"},
    {"thousands_commas", "It costs $1,000 in total.", "1000"},
    {"commas_everywhere", "1,234,567", "1234567"},
    {"dollar_sign", "$18", "18"},
    {"negative_drops_sign", "The temperature fell to -5 degrees.", "5"},  // lm-eval: "-5"
    {"decimal_last_digits", "Each costs 3.50 dollars.", "50"},            // lm-eval: "3.50"
    {"decimal_zero_fraction", "x = 12.0", "0"},                           // lm-eval: "12.0"
    {"trailing_period", "So 18.", "18"},
    {"no_digits", "I cannot solve this problem.", nullptr},
    {"empty", "", nullptr},
    {"leading_zero_invalid", "code 007", nullptr},  // Python literal_eval rejects "007"
    {"all_zeros_is_zero", "00", "0"},
    {"zero", "The answer is 0", "0"},
    {"huge_number", "123456789012345678901234567890", "123456789012345678901234567890"},
    {"number_after_stop", "The answer is 5.\n\nQuestion: 17 cows and 25 more?\nAnswer: 42", "5"},
    {"number_after_assistant_stop", "so 8 Assistant: 99", "8"},
    {"number_after_separator_stop", "total 11<|separator|>12", "11"},
    {"only_number_after_stop", "Question 1: 7", nullptr},
    {"unicode_digits_ignored", "\xd9\xa3 apples", nullptr},  // Arabic-Indic three
    {"adjacent_text", "abc123def", "123"},
};

void PrintTo(const ExtractCase& c, std::ostream* os) { *os << c.name; }

class ExtractAnswer : public ::testing::TestWithParam<ExtractCase> {};

TEST_P(ExtractAnswer, FollowsTheRule) {
  const ExtractCase& c = GetParam();
  const auto got = extract_answer(c.output);
  if (c.want == nullptr) {
    EXPECT_FALSE(got.has_value()) << "output '" << c.output << "' gave '" << got.value_or("")
                                  << "', want INVALID";
  } else {
    ASSERT_TRUE(got.has_value()) << "output '" << c.output << "' gave INVALID, want " << c.want;
    EXPECT_EQ(*got, c.want) << "output '" << c.output << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(Table, ExtractAnswer, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ExtractAnswerStops, NoStopsMeansWholeOutput) {
  EXPECT_EQ(extract_answer("5\nQuestion: 42", {}).value_or("INVALID"), "42");
  EXPECT_EQ(extract_answer("5\nEND 42", {"END"}).value_or("INVALID"), "5");
  EXPECT_EQ(extract_answer("5 X 6 Y 7", {"Y", "X"}).value_or("INVALID"), "5");  // earliest stop
}

TEST(Label, NumberAfterHashes) {
  EXPECT_EQ(label_of("Natalia sold 48/2 = 24 clips.\n#### 72"), "72");
  EXPECT_EQ(label_of("#### 1,250"), "1250");
  EXPECT_EQ(label_of("10 - 15 = -5\n#### -5"), "5");  // same rule as predictions
  EXPECT_EQ(label_of("a #### 3 then #### 4"), "4");
  EXPECT_THROW(label_of("no hashes 12"), DataError);
  EXPECT_THROW(label_of("#### none"), DataError);
}

TEST(Prompt, SglangFormat) {
  Record a{"What is 1+1?", "1+1=2\n#### 2", "2", 1};
  Record b{"What is 2+2?", "#### 4", "4", 2};
  EXPECT_EQ(format_example(a, false), "Question: What is 1+1?\nAnswer:");
  EXPECT_EQ(format_example(a, true), "Question: What is 1+1?\nAnswer: 1+1=2\n#### 2");
  EXPECT_EQ(few_shot_prefix({a, b}),
            "Question: What is 1+1?\nAnswer: 1+1=2\n#### 2\n\n"
            "Question: What is 2+2?\nAnswer: #### 4\n\n");
  EXPECT_EQ(few_shot_prefix({}), "");
}

TEST(Sha256, KnownVectors) {
  using eval::sha256_file;
  using eval::sha256_hex;
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  TempDir d;
  write_text(d.str("f"), "abc");
  EXPECT_EQ(sha256_file(d.str("f")), sha256_hex("abc"));
  EXPECT_EQ(sha256_file(d.str("missing")), std::nullopt);
}

TEST(LoadJsonl, ReadsRecordsAndSkipsBlankLines) {
  TempDir d;
  write_text(d.str("q.jsonl"),
             "{\"question\": \"Q1\", \"answer\": \"#### 1,000\"}\n\n"
             "{\"question\": \"Q2\", \"answer\": \"x\\n#### 7\"}\n");
  const auto r = load_jsonl(d.str("q.jsonl"));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].label, "1000");
  EXPECT_EQ(r[1].question, "Q2");
  EXPECT_EQ(r[1].line, 3u);
}

struct BadData {
  const char* name;
  const char* text;
  std::vector<std::string> message_parts;  // every part must appear in the error
};

void PrintTo(const BadData& c, std::ostream* os) { *os << c.name; }

class LoadJsonlErrors : public ::testing::TestWithParam<BadData> {};

TEST_P(LoadJsonlErrors, NameFileLineFieldAndValue) {
  const BadData& c = GetParam();
  TempDir d;
  const std::string path = d.str("bad.jsonl");
  write_text(path, c.text);
  try {
    load_jsonl(path);
    FAIL() << "no error for " << c.name;
  } catch (const DataError& e) {
    const std::string msg = e.what();
    for (const auto& part : c.message_parts)
      EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' missing from: " << msg;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, LoadJsonlErrors,
    ::testing::Values(
        BadData{"not_json",
                "{\"question\":\"a\",\"answer\":\"#### 1\"}\n{oops\n",
                {"bad.jsonl:2", "not valid JSON", "{oops"}},
        BadData{"missing_answer", "{\"question\":\"a\"}\n", {"bad.jsonl:1", "'answer'", "missing"}},
        BadData{"question_not_string",
                "{\"question\":5,\"answer\":\"#### 1\"}\n",
                {"bad.jsonl:1", "'question'", "must be a string", "5"}},
        BadData{"no_label",
                "{\"question\":\"a\",\"answer\":\"#### 1\"}\n"
                "{\"question\":\"b\",\"answer\":\"forty two\"}\n",
                {"bad.jsonl:2", "'answer'", "####", "forty two"}},
        BadData{"label_not_number",
                "{\"question\":\"a\",\"answer\":\"#### many\"}\n",
                {"bad.jsonl:1", "'answer'", "#### many"}},
        BadData{"array_line", "[1,2]\n", {"bad.jsonl:1", "JSON object", "[1,2]"}},
        BadData{"empty_file", "\n\n", {"bad.jsonl", "no records"}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(LoadJsonl, MissingFileNamesPath) {
  try {
    load_jsonl("/nonexistent/dsv4/q.jsonl");
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dsv4/q.jsonl"), std::string::npos);
  }
}

}  // namespace
}  // namespace dsv4::eval::gsm8k

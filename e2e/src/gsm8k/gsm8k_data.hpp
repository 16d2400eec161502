// GSM8K data for dsv4-eval: JSONL loading with line-precise errors, labels, the answer extraction
// rule, k-shot prompts and the canonical test set's location and checksum.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dsv4::eval::gsm8k {

// The canonical GSM8K test set (openai/grade-school-math, 1319 questions) and its sha256.
inline constexpr const char* kCanonicalUrl =
    "https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data/"
    "test.jsonl";
inline constexpr const char* kCanonicalSha256 =
    "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14";

// SGLang's GSM8K stop strings.
inline const std::vector<std::string>& default_stops() {
  static const std::vector<std::string> s = {"Question", "Assistant:", "<|separator|>"};
  return s;
}

struct Record {
  std::string question;
  std::string answer;  // worked answer ending in "#### <number>"
  std::string label;   // canonical digits of the number after the last "#### "
  size_t line = 0;     // 1-based line in its file
};

// Bad data: the message names the file, line, field and value.
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Loads every non-blank line as {"question": str, "answer": str}; the label must be a number
// after "#### ". Throws DataError (file missing, not JSON, field missing or wrong type, no label,
// no records).
std::vector<Record> load_jsonl(const std::string& path);

// The prediction rule, one function for the runner, the tests and the docs:
//  1. cut the output at the earliest stop string (a server that honours stops has done so already;
//     this keeps a number the model wrote after "Question" out of the prediction);
//  2. remove every ','; 3. take the LAST maximal run of ASCII digits; none: INVALID (nullopt);
//  4. a run with a leading zero and more digits ("007") is INVALID, "00" is 0.
// Steps 2-4 are SGLang's benchmark/gsm8k get_answer_value (regex \d+ over the comma-free text, the
// last match through Python's literal_eval, which rejects leading zeros). Consequences, shared with
// SGLang: the sign is dropped ("-5" gives 5), a decimal gives its last digit run ("3.50" gives 50),
// "$1,000" gives 1000. lm-eval's gsm8k "flexible-extract" differs: it takes the last match of
// (-?[$0-9.,]{2,})|(-?[0-9]+), keeps the minus sign and the decimal point ("-5", "3.50"), strips
// '$', ',' and one trailing '.', and compares strings; its "strict-match" reads only "#### N".
// SGLang's current simple_eval_gsm8k rule (python/sglang/test/simple_eval_gsm8k.py,
// get_answer_value): commas removed, the last match of -?\d+\.?\d* read as a Python literal, so
// the sign and the decimals stay ("-5" gives -5, "3.50" gives 3.5, "5." gives 5); an integer with a
// leading zero ("007") is INVALID (literal_eval rejects it). Nothing is cut at stop strings. The
// value, compared numerically with the answer's own value (the same rule over the worked answer).
std::optional<double> simple_eval_answer(std::string_view text);

std::optional<std::string> extract_answer(std::string_view output,
                                          const std::vector<std::string>& stops = default_stops());

// The label of a GSM8K answer: the extraction rule (steps 2-4) applied to the text after the last
// "#### ". Throws DataError("... '####' ...") when there is no "#### " or no number after it.
std::string label_of(std::string_view answer);

// "Question: <q>\nAnswer:" (+ " <answer>" for a shot).
std::string format_example(const Record& r, bool with_answer);
// The k-shot prefix: each shot formatted with its answer and followed by a blank line.
std::string few_shot_prefix(const std::vector<Record>& shots);

}  // namespace dsv4::eval::gsm8k

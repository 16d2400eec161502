// GSM8K data loading, label and prediction extraction, prompt formatting.
#include "gsm8k/gsm8k_data.hpp"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>

#include "serve_bench/bpe_decoder.hpp"  // utf8_lossy

namespace dsv4::eval::gsm8k {

using serve::utf8_lossy;

namespace {
// At most n bytes of `s` for a message, bytes that are not UTF-8 shown as U+FFFD (never echoed).
std::string shorten(std::string_view s, size_t n = 80) {
  if (s.size() <= n) return utf8_lossy(s);
  return utf8_lossy(s.substr(0, n)) + "...";
}

// Steps 2-4 of extract_answer on text already cut at the stops.
std::optional<std::string> last_integer(std::string_view text) {
  // Scan from the end, skipping commas, for the last maximal digit run.
  std::string digits;
  size_t i = text.size();
  while (i > 0 && !(text[i - 1] >= '0' && text[i - 1] <= '9')) --i;
  if (i == 0) return std::nullopt;
  while (i > 0) {
    const char c = text[i - 1];
    if (c >= '0' && c <= '9')
      digits.push_back(c);
    else if (c != ',')
      break;
    --i;
  }
  std::string run(digits.rbegin(), digits.rend());
  if (run.size() > 1 && run[0] == '0') {
    if (run.find_first_not_of('0') != std::string::npos) return std::nullopt;  // "007"
    return std::string("0");                                                   // "00"
  }
  return run;
}
}  // namespace

std::optional<std::string> extract_answer(std::string_view output,
                                          const std::vector<std::string>& stops) {
  size_t cut = output.size();
  for (const auto& s : stops) {
    if (s.empty()) continue;
    const size_t p = output.find(s);
    if (p != std::string_view::npos && p < cut) cut = p;
  }
  return last_integer(output.substr(0, cut));
}

std::string label_of(std::string_view answer) {
  const size_t p = answer.rfind("#### ");
  if (p == std::string_view::npos)
    throw DataError("no '#### <number>' in '" + shorten(answer) + "'");
  auto v = last_integer(answer.substr(p + 5));
  if (!v) throw DataError("no number after '####' in '" + shorten(answer.substr(p)) + "'");
  return *v;
}

std::vector<Record> load_jsonl(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw DataError("cannot open data file '" + path + "'");
  std::vector<Record> out;
  std::string line;
  size_t n = 0;
  while (std::getline(f, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(n) + ": ";
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      throw DataError(where + "not valid JSON ('" + shorten(line) + "'): " + utf8_lossy(e.what()));
    }
    if (!j.is_object())
      throw DataError(where + "expected a JSON object, got '" + shorten(line) + "'");
    for (const char* field : {"question", "answer"}) {
      if (!j.contains(field)) throw DataError(where + "field '" + field + "' is missing");
      if (!j[field].is_string())
        throw DataError(where + "field '" + field + "' must be a string, got " +
                        shorten(j[field].dump()));
    }
    Record r;
    r.question = j["question"].get<std::string>();
    r.answer = j["answer"].get<std::string>();
    r.line = n;
    if (r.question.empty()) throw DataError(where + "field 'question' is empty");
    try {
      r.label = label_of(r.answer);
    } catch (const DataError& e) {
      throw DataError(where + "field 'answer': " + e.what());
    }
    out.push_back(std::move(r));
  }
  if (f.bad()) throw DataError("error reading data file '" + path + "'");
  if (out.empty()) throw DataError("data file '" + path + "' has no records");
  return out;
}

std::string format_example(const Record& r, bool with_answer) {
  std::string s = "Question: " + r.question + "\nAnswer:";
  if (with_answer) s += " " + r.answer;
  return s;
}

std::optional<double> simple_eval_answer(std::string_view text) {
  std::string s;
  for (char ch : text)
    if (ch != ',') s += ch;
  std::optional<std::string> last;
  auto digit = [&](size_t i) { return i < s.size() && s[i] >= '0' && s[i] <= '9'; };
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    size_t j = i + (s[i] == '-' ? 1 : 0);
    if (!digit(j)) {
      ++i;
      continue;
    }
    while (digit(j)) ++j;
    if (j < s.size() && s[j] == '.') {
      ++j;
      while (digit(j)) ++j;
    }
    last = s.substr(start, j - start);
    i = j;
  }
  if (!last) return std::nullopt;
  const std::string& m = *last;
  const bool is_float = m.find('.') != std::string::npos;
  const size_t d = m[0] == '-' ? 1 : 0;
  if (!is_float && m.size() - d > 1 && m[d] == '0') return std::nullopt;  // "007": SyntaxError
  return std::strtod(m.c_str(), nullptr);
}

std::string few_shot_prefix(const std::vector<Record>& shots) {
  std::string s;
  for (const auto& r : shots) s += format_example(r, true) + "\n\n";
  return s;
}

}  // namespace dsv4::eval::gsm8k

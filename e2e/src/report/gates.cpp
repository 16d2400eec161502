// Gate parsing and evaluation.
#include "report/gates.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace dsv4::eval {

const char* to_string(GateOp op) {
  switch (op) {
    case GateOp::kGt:
      return ">";
    case GateOp::kGe:
      return ">=";
    case GateOp::kLt:
      return "<";
    case GateOp::kLe:
      return "<=";
    case GateOp::kEq:
      return "==";
  }
  return "?";
}

namespace {
std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}
bool is_op_char(char c) { return c == '<' || c == '>' || c == '=' || c == '!'; }
}  // namespace

Gate parse_gate(std::string_view text) {
  const std::string quoted = "gate '" + std::string(text) + "': ";
  const std::string_view s = trim(text);
  size_t i = 0;
  while (i < s.size() && !is_op_char(s[i])) ++i;
  if (i == s.size())
    throw GateError(quoted +
                    "no comparison operator; expected 'metric op value' with op one of "
                    "> >= < <= ==");
  size_t j = i;
  while (j < s.size() && is_op_char(s[j])) ++j;
  const std::string_view metric = trim(s.substr(0, i));
  const std::string op_text(s.substr(i, j - i));
  const std::string value_text(trim(s.substr(j)));
  Gate g;
  g.text = std::string(text);
  if (metric.empty()) throw GateError(quoted + "metric name is empty");
  if (!(std::isalpha(static_cast<unsigned char>(metric[0])) || metric[0] == '_'))
    throw GateError(quoted + "metric name '" + std::string(metric) +
                    "' must start with a letter or '_'");
  for (char c : metric)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'))
      throw GateError(quoted + "metric name '" + std::string(metric) + "' has the character '" +
                      std::string(1, c) + "' (allowed: letters, digits, '_', '.')");
  g.metric = std::string(metric);
  if (op_text == ">")
    g.op = GateOp::kGt;
  else if (op_text == ">=")
    g.op = GateOp::kGe;
  else if (op_text == "<")
    g.op = GateOp::kLt;
  else if (op_text == "<=")
    g.op = GateOp::kLe;
  else if (op_text == "==")
    g.op = GateOp::kEq;
  else
    throw GateError(quoted + "operator '" + op_text + "' is not one of > >= < <= ==");
  if (value_text.empty()) throw GateError(quoted + "threshold value is missing");
  char* end = nullptr;
  const double v = std::strtod(value_text.c_str(), &end);
  if (end == value_text.c_str() || *end != '\0')
    throw GateError(quoted + "threshold '" + value_text + "' is not a number");
  if (!std::isfinite(v)) throw GateError(quoted + "threshold '" + value_text + "' is not finite");
  g.threshold = v;
  return g;
}

std::vector<Gate> parse_gates(const std::vector<std::string>& texts) {
  std::vector<Gate> out;
  out.reserve(texts.size());
  for (const auto& t : texts) out.push_back(parse_gate(t));
  return out;
}

std::string format_number(double v, int digits) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::vector<GateResult> evaluate_gates(const std::vector<Gate>& gates, const Metrics& metrics,
                                       const std::map<std::string, std::string>& missing_reasons) {
  std::vector<GateResult> out;
  for (const Gate& g : gates) {
    GateResult r;
    r.gate = g;
    const auto it = metrics.find(g.metric);
    if (it == metrics.end()) {
      r.verdict = "missing";
      const auto why = missing_reasons.find(g.metric);
      r.detail = g.metric + " not available: " +
                 (why != missing_reasons.end() ? why->second : std::string("metric not measured"));
      out.push_back(r);
      continue;
    }
    const double v = it->second;
    r.value = v;
    switch (g.op) {
      case GateOp::kGt:
        r.pass = v > g.threshold;
        break;
      case GateOp::kGe:
        r.pass = v >= g.threshold;
        break;
      case GateOp::kLt:
        r.pass = v < g.threshold;
        break;
      case GateOp::kLe:
        r.pass = v <= g.threshold;
        break;
      case GateOp::kEq:
        r.pass = v == g.threshold;
        break;
    }
    r.verdict = r.pass ? "pass" : "FAIL";
    r.detail = g.metric + " = " + format_number(v) + (r.pass ? " " : ", wanted ") +
               to_string(g.op) + " " + format_number(g.threshold) + ": " + r.verdict;
    out.push_back(r);
  }
  return out;
}

bool all_pass(const std::vector<GateResult>& results) {
  for (const auto& r : results)
    if (!r.pass) return false;
  return true;
}

}  // namespace dsv4::eval

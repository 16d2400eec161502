// Gates `metric op value` (op one of > >= < <= ==): parsing and evaluation against named metrics.
//
//   std::vector<Gate> gates = {parse_gate("accuracy>0.92"), parse_gate("accept_length >= 3")};
//   Metrics m = {{"accuracy", 0.95}};
//   auto results = evaluate_gates(gates, m, {{"accept_length", "speculative decoding off"}});
//   bool ok = all_pass(results);  // false: accept_length is missing, which fails its gate
//
// Whitespace around the parts is allowed. The metric is [A-Za-z_][A-Za-z0-9_.]*, the value a finite
// decimal number (strtod syntax). `==` compares exactly, so use it for counts (failed==0).
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dsv4::eval {

enum class GateOp { kGt, kGe, kLt, kLe, kEq };
const char* to_string(GateOp op);

struct Gate {
  std::string metric;
  GateOp op = GateOp::kGt;
  double threshold = 0;
  std::string text;  // as given, for messages
};

// Thrown by parse_gate with a message naming the gate text and what is wrong with it.
struct GateError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

Gate parse_gate(std::string_view text);
std::vector<Gate> parse_gates(const std::vector<std::string>& texts);

using Metrics = std::map<std::string, double>;

struct GateResult {
  Gate gate;
  std::optional<double> value;  // absent: the metric was not measured
  bool pass = false;
  std::string verdict;  // "pass", "FAIL" or "missing"
  std::string detail;   // "accuracy = 0.9500 > 0.92: pass" or why the metric is missing
};

// A gate on a metric absent from `metrics` fails with verdict "missing"; its detail is the
// reason from `missing_reasons` when given, else "metric not measured". A NaN value fails.
std::vector<GateResult> evaluate_gates(
    const std::vector<Gate>& gates, const Metrics& metrics,
    const std::map<std::string, std::string>& missing_reasons = {});
bool all_pass(const std::vector<GateResult>& results);

// Compact number for reports: up to `digits` significant digits, no trailing zeros.
std::string format_number(double v, int digits = 6);

}  // namespace dsv4::eval

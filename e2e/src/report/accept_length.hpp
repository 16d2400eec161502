// Speculative accept length from /server_info, defined as SGLang defines it, and the figures
// dsv4-eval reports beside it (one definition for gsm8k and serve-bench).
//
// - accept_length: internal_states[0].avg_spec_accept_length, DP rank 0 (of the first decode
//   server behind a prefill/decode router). SGLang's few-shot GSM8K tests and bench_serving read
//   exactly this number, so a gate on it means what it means in SGLang's CI.
// - accept_length_mean / accept_length_min: over the DP ranks that report the key.
// - accept_length_rank<i>: each rank.
// A rank without avg_spec_accept_length ran no speculative forward step since the flush (SGLang's
// scheduler omits the key when its forward count is 0): it is skipped, never counted as 0, and
// the report names it. When rank 0 is such a rank, accept_length is missing (its gate fails as
// missing) while the mean and minimum still stand.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "report/gates.hpp"

namespace dsv4::eval {

struct AcceptFigures {
  std::optional<double> rank0, mean, min;
  std::vector<size_t> skipped;  // ranks without the key
  size_t ranks = 0;
};

AcceptFigures accept_figures(const std::vector<std::optional<double>>& per_rank);

// Adds accept_length, accept_length_mean, accept_length_min and accept_length_rank<i> to
// `metrics`; each one that cannot be given gets its reason in `missing` (`why_none` when no rank
// reports the key). Returns a note naming the skipped ranks ("" when none were skipped).
std::string put_accept_metrics(const std::vector<std::optional<double>>& per_rank,
                               const std::string& why_none, Metrics& metrics,
                               std::map<std::string, std::string>& missing);

// The metric names above except the per-rank ones, and what each means (for report rows).
const std::vector<std::pair<std::string, std::string>>& accept_metric_definitions();
bool is_accept_rank_metric(const std::string& name);  // accept_length_rank<N>

}  // namespace dsv4::eval

// SGLang's accept length (DP rank 0) and the per-rank figures beside it.
#include "report/accept_length.hpp"

#include <algorithm>
#include <regex>

namespace dsv4::eval {

AcceptFigures accept_figures(const std::vector<std::optional<double>>& per_rank) {
  AcceptFigures f;
  f.ranks = per_rank.size();
  double sum = 0;
  size_t n = 0;
  for (size_t r = 0; r < per_rank.size(); ++r) {
    if (!per_rank[r]) {
      f.skipped.push_back(r);
      continue;
    }
    sum += *per_rank[r];
    f.min = f.min ? std::min(*f.min, *per_rank[r]) : *per_rank[r];
    ++n;
  }
  if (!per_rank.empty()) f.rank0 = per_rank[0];
  if (n) f.mean = sum / double(n);
  return f;
}

std::string put_accept_metrics(const std::vector<std::optional<double>>& per_rank,
                               const std::string& why_none, Metrics& m,
                               std::map<std::string, std::string>& missing) {
  const AcceptFigures f = accept_figures(per_rank);
  if (!f.mean) {
    for (const auto& [name, what] : accept_metric_definitions()) missing[name] = why_none;
    return "";
  }
  for (size_t r = 0; r < per_rank.size(); ++r)
    if (per_rank[r]) m["accept_length_rank" + std::to_string(r)] = *per_rank[r];
  m["accept_length_mean"] = *f.mean;
  m["accept_length_min"] = *f.min;
  if (f.rank0)
    m["accept_length"] = *f.rank0;
  else
    missing["accept_length"] =
        "DP rank 0 reported no avg_spec_accept_length (no speculative forward step since the "
        "flush); SGLang's number is undefined, accept_length_mean covers the other ranks";
  if (f.skipped.empty()) return "";
  std::string ranks;
  for (size_t r : f.skipped) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  return "DP rank" + std::string(f.skipped.size() > 1 ? "s " : " ") + ranks + " of " +
         std::to_string(f.ranks) +
         " reported no avg_spec_accept_length (no speculative forward step since the flush) and "
         "are left out of accept_length_mean and accept_length_min, not counted as 0";
}

const std::vector<std::pair<std::string, std::string>>& accept_metric_definitions() {
  static const std::vector<std::pair<std::string, std::string>> d = {
      {"accept_length", "server avg_spec_accept_length of DP rank 0 (SGLang's number)"},
      {"accept_length_mean", "server avg_spec_accept_length, mean over the DP ranks reporting it"},
      {"accept_length_min", "server avg_spec_accept_length, lowest DP rank"},
  };
  return d;
}

bool is_accept_rank_metric(const std::string& name) {
  static const std::regex rank(R"(accept_length_rank[0-9]+)");
  return std::regex_match(name, rank);
}

}  // namespace dsv4::eval

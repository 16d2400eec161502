// The comparison table of `dsv4-eval report`: columns, configurations, groups and speedups.
#include "report/report_table.hpp"

#include <algorithm>
#include <set>

namespace dsv4::eval::report {

const std::vector<Column>& column_catalogue() {
  static const std::vector<Column> c = [] {
    std::vector<Column> v = {
        {"accuracy", "accuracy", {"gsm8k:accuracy", "accuracy"}, +1, false, 3, ""},
        {"invalid", "invalid", {"gsm8k:invalid", "invalid"}, -1, false, 3, ""},
        {"accept_length",
         "accept length",
         {"gsm8k:accept_length", "serve-bench:accept_length", "accept_length"},
         +1,
         false,
         2,
         ""},
        {"ttt", "TTT (tok/s)", {"serve-bench:total_throughput"}, +1, true, 1, "TTT"},
        {"output_throughput",
         "output (tok/s)",
         {"serve-bench:output_throughput", "output_throughput"},
         +1,
         true,
         1,
         "output"},
        {"request_throughput", "req/s", {"serve-bench:request_throughput"}, +1, true, 2, "req/s"},
        {"ttft", "mean TTFT (ms)", {"serve-bench:mean_ttft_ms"}, -1, true, 1, "TTFT"},
        {"tpot", "mean TPOT (ms)", {"serve-bench:mean_tpot_ms"}, -1, true, 2, "TPOT"},
        {"itl", "mean ITL (ms)", {"serve-bench:mean_itl_ms"}, -1, true, 2, "ITL"},
        {"e2e", "mean E2E (ms)", {"serve-bench:mean_e2e_latency_ms"}, -1, true, 1, "E2E"},
        {"p99_ttft", "P99 TTFT (ms)", {"serve-bench:p99_ttft_ms"}, -1, true, 1, "P99 TTFT"},
        {"p99_tpot", "P99 TPOT (ms)", {"serve-bench:p99_tpot_ms"}, -1, true, 2, "P99 TPOT"},
        {"p99_itl", "P99 ITL (ms)", {"serve-bench:p99_itl_ms"}, -1, true, 2, "P99 ITL"},
        {"accept_length_mean",
         "accept length (mean of ranks)",
         {"gsm8k:accept_length_mean", "serve-bench:accept_length_mean", "accept_length_mean"},
         +1,
         false,
         2,
         ""},
        {"accept_length_min",
         "accept length (lowest rank)",
         {"gsm8k:accept_length_min", "serve-bench:accept_length_min", "accept_length_min"},
         +1,
         false,
         2,
         ""},
    };
    for (int r = 0; r < 8; ++r) {  // DP ranks 0..7
      const std::string k = "accept_length_rank" + std::to_string(r);
      v.push_back({k,
                   "accept length rank " + std::to_string(r),
                   {"gsm8k:" + k, "serve-bench:" + k, k},
                   +1,
                   false,
                   2,
                   ""});
    }
    return v;
  }();
  return c;
}

std::vector<Column> columns_by_keys(const std::vector<std::string>& keys) {
  std::vector<Column> out;
  for (const auto& k : keys) {
    const auto& cat = column_catalogue();
    auto it = std::find_if(cat.begin(), cat.end(), [&](const Column& c) { return c.key == k; });
    if (it == cat.end()) {
      std::string known;
      for (const auto& c : cat) known += (known.empty() ? "" : ", ") + c.key;
      throw ReportError("--columns: unknown column '" + k + "' (known: " + known + ")");
    }
    out.push_back(*it);
  }
  return out;
}

std::vector<Column> default_columns() {
  return columns_by_keys({"accuracy", "accept_length", "ttt", "ttft", "tpot"});
}

std::vector<Column> default_columns(const std::vector<RunRecord>& runs) {
  std::vector<std::string> keys = {"accuracy", "accept_length"};
  auto reported = [&](const std::string& metric) {
    for (const auto& r : runs)
      if (r.metrics.count(metric)) return true;
    return false;
  };
  for (const char* k : {"accept_length_mean", "accept_length_min"})
    if (reported(k)) keys.push_back(k);
  for (int rank = 0; rank < 8; ++rank)
    if (reported("accept_length_rank" + std::to_string(rank)))
      keys.push_back("accept_length_rank" + std::to_string(rank));
  for (const char* k : {"ttt", "ttft", "tpot"}) keys.push_back(k);
  return columns_by_keys(keys);
}

std::vector<std::pair<std::string, std::string>> parse_pairs(const std::string& text,
                                                             const std::string& flag) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string part = text.substr(pos, comma - pos);
    const size_t eq = part.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == part.size())
      throw ReportError(flag + ": '" + part + "' is not key=value (in '" + text + "')");
    out.emplace_back(part.substr(0, eq), part.substr(eq + 1));
    pos = comma + 1;
  }
  return out;
}

namespace {

std::optional<double> column_value(const Row& row, const Column& c) {
  for (const auto& src : c.sources) {
    const size_t colon = src.find(':');
    if (colon != std::string::npos) {
      auto run = row.runs.find(src.substr(0, colon));
      if (run == row.runs.end() || !run->second.measured()) continue;
      auto m = run->second.metrics.find(src.substr(colon + 1));
      if (m != run->second.metrics.end()) return m->second;
    } else {
      for (const auto& [kind, run] : row.runs)
        if (auto m = run.metrics.find(src); run.measured() && m != run.metrics.end())
          return m->second;
    }
  }
  return std::nullopt;
}

std::string join_pairs(const std::vector<std::string>& keys, const std::vector<std::string>& vals,
                       const std::vector<bool>& take) {
  std::string s;
  for (size_t i = 0; i < keys.size(); ++i)
    if (take[i]) s += (s.empty() ? "" : ", ") + keys[i] + "=" + vals[i];
  return s;
}

}  // namespace

Comparison build_comparison(const std::vector<RunRecord>& runs, const ComparisonOptions& opts) {
  Comparison cmp;
  cmp.baseline = opts.baseline;
  cmp.columns = opts.columns;
  cmp.group_by = opts.group_by;
  if (cmp.group_by.empty()) {
    std::set<std::string> keys;
    for (const auto& r : runs)
      for (const auto& [k, v] : r.labels) keys.insert(k);
    cmp.group_by.assign(keys.begin(), keys.end());
  }
  for (const auto& [k, v] : cmp.baseline)
    if (std::find(cmp.group_by.begin(), cmp.group_by.end(), k) == cmp.group_by.end())
      throw ReportError("--baseline: key '" + k + "' is not one of the --group-by keys");
  std::vector<bool> in_group(cmp.group_by.size(), true);
  for (size_t i = 0; i < cmp.group_by.size(); ++i)
    for (const auto& [k, v] : cmp.baseline)
      if (k == cmp.group_by[i]) in_group[i] = false;

  std::map<std::vector<std::string>, Row> rows;
  for (const auto& run : runs) {
    std::vector<std::string> config;
    for (const auto& key : cmp.group_by) {
      auto v = run.label(key);
      if (!v && !opts.group_by.empty()) {
        std::string have;
        for (const auto& [k, val] : run.labels) have += (have.empty() ? "" : ", ") + k + "=" + val;
        throw ReportError(run.path + ": no label '" + key +
                          "' to group by (labels: " + (have.empty() ? "none" : have) +
                          "); add it with --label or a labels.json beside the file");
      }
      config.push_back(v.value_or("-"));
    }
    Row& row = rows[config];
    if (row.runs.empty()) {
      row.config = config;
      row.name = join_pairs(cmp.group_by, config, std::vector<bool>(config.size(), true));
      if (row.name.empty()) row.name = "unlabelled";
      row.group = join_pairs(cmp.group_by, config, in_group);
      row.baseline = !cmp.baseline.empty();
      for (const auto& [k, v] : cmp.baseline)
        for (size_t i = 0; i < cmp.group_by.size(); ++i)
          if (cmp.group_by[i] == k && config[i] != v) row.baseline = false;
    }
    if (auto it = row.runs.find(run.kind); it != row.runs.end())
      throw ReportError("two " + run.kind + " runs for configuration {" + row.name +
                        "}: " + it->second.path + " and " + run.path);
    row.runs.emplace(run.kind, run);
    if (!run.measured()) {
      row.not_measured[run.kind] = run.status_text();
      cmp.notes.push_back("{" + row.name + "} " + run.kind + " run " + run.path +
                          " is not a completed measurement (" + run.status_text() +
                          "): left out of the values, speedups, comparisons and charts");
    }
    for (const auto& g : run.gates) {
      ++row.gates_total;
      if (!g.pass) row.failed_gates.push_back({run.path, run.kind, g, "", ""});
    }
  }

  for (auto& [config, row] : rows) {
    for (const auto& c : cmp.columns)
      if (auto v = column_value(row, c)) row.values[c.key] = *v;
    cmp.rows.push_back(std::move(row));
  }
  std::stable_sort(cmp.rows.begin(), cmp.rows.end(), [](const Row& a, const Row& b) {
    if (a.group != b.group) return a.group < b.group;
    if (a.baseline != b.baseline) return a.baseline;
    return a.config < b.config;
  });

  if (cmp.baseline.empty()) return cmp;
  std::map<std::string, const Row*> base_of;
  for (const auto& r : cmp.rows)
    if (r.baseline) base_of[r.group] = &r;
  std::set<std::string> missing;
  for (auto& r : cmp.rows) {
    auto b = base_of.find(r.group);
    if (b == base_of.end()) {
      if (missing.insert(r.group).second)
        cmp.notes.push_back("no baseline row in group {" + r.group + "}: speedups n/a");
      continue;
    }
    for (const auto& c : cmp.columns) {
      if (!c.speedup) continue;
      auto tv = r.values.find(c.key);
      auto bv = b->second->values.find(c.key);
      if (tv == r.values.end() || bv == b->second->values.end()) continue;
      const double num = c.direction > 0 ? tv->second : bv->second;
      const double den = c.direction > 0 ? bv->second : tv->second;
      if (den > 0 && num >= 0) r.speedups[c.key] = num / den;
    }
  }
  return cmp;
}

}  // namespace dsv4::eval::report

// `dsv4-eval report --previous`: metric changes, --max-drop regressions and new vs pre-existing
// gate failures against the previous night's runs.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "report/report_table.hpp"

namespace dsv4::eval::report {

std::optional<double> DropLimits::for_column(const std::string& key) const {
  if (auto it = per_column.find(key); it != per_column.end()) return it->second;
  return all;
}

namespace {

double parse_fraction(const std::string& text, const std::string& whole) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v < 0)
    throw ReportError("--max-drop: '" + whole +
                      "' is not a non-negative fraction (e.g. 0.05 for 5%), nor key=fraction");
  return v;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.2f%%", 100.0 * x);
  return buf;
}

}  // namespace

void parse_max_drop(const std::string& text, DropLimits& limits) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos) {
    limits.all = parse_fraction(text, text);
    return;
  }
  const std::string key = text.substr(0, eq);
  columns_by_keys({key});  // throws for an unknown column
  limits.per_column[key] = parse_fraction(text.substr(eq + 1), text);
}

void compare_with_previous(Comparison& cur, const Comparison& prev, const DropLimits& limits) {
  cur.compared_with_previous = true;
  for (auto& row : cur.rows) {
    const Row* before = nullptr;
    for (const auto& p : prev.rows)
      if (p.config == row.config) before = &p;
    row.has_previous = before != nullptr;
    for (auto& g : row.failed_gates) {
      g.status = "new";
      g.detail = "no previous result";
      if (!before) continue;
      auto run = before->runs.find(g.kind);
      if (run == before->runs.end()) continue;
      for (const auto& pg : run->second.gates)
        if (pg.key() == g.gate.key()) {
          g.status = pg.pass ? "new" : "pre-existing";
          g.detail = std::string(pg.pass ? "passed" : "failed") + " in the previous run";
          if (pg.value) g.detail += ", value " + fmt(*pg.value);
          break;
        }
      if (g.detail == "no previous result") g.detail = "not gated in the previous run";
    }
    if (!before) continue;
    for (const auto& [kind, why] : before->not_measured)
      cur.notes.push_back("{" + row.name + "} " + kind +
                          ": no comparison with the previous run, which is not a completed "
                          "measurement (" +
                          before->runs.at(kind).path + ", " + why + ")");
    for (const auto& [kind, why] : row.not_measured)
      if (before->runs.count(kind))
        cur.notes.push_back("{" + row.name + "} " + kind +
                            ": no comparison with the previous run: this run is not a completed "
                            "measurement (" +
                            why + ")");
    for (const auto& c : cur.columns) {
      auto now = row.values.find(c.key);
      auto was = before->values.find(c.key);
      if (now == row.values.end() || was == before->values.end()) continue;
      MetricChange ch;
      ch.previous = was->second;
      ch.current = now->second;
      if (ch.previous != 0)
        ch.change = (ch.current - ch.previous) / std::fabs(ch.previous);
      else
        ch.change = ch.current == 0 ? 0.0 : std::copysign(INFINITY, ch.current);
      ch.regression = std::max(0.0, -double(c.direction) * ch.change);
      ch.limit = limits.for_column(c.key);
      ch.over_limit = ch.limit && ch.regression > *ch.limit;
      if (ch.over_limit) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.6g -> %.6g", ch.previous, ch.current);
        cur.regressions.push_back("{" + row.name + "} " + c.key + ": " + buf + " (" +
                                  percent(ch.change) + ", limit " + percent(*ch.limit).substr(1) +
                                  " worse)");
      }
      row.changes[c.key] = ch;
    }
  }
}

}  // namespace dsv4::eval::report

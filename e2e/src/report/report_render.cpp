// Markdown and JSON renderings of a `dsv4-eval report` comparison.
#include "report/report_render.hpp"

#include "common/markdown.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace dsv4::eval::report {
using nlohmann::json;

std::string format_value(double v, int decimals) {
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string format_speedup(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", s);
  return buf;
}

namespace {

std::string change_text(const MetricChange& ch) {
  if (!std::isfinite(ch.change)) return ch.change > 0 ? "+inf%" : "-inf%";
  if (ch.change == 0) return "=";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100.0 * ch.change);
  return buf;
}

std::string gates_cell(const Row& r) {
  std::string not_measured;
  for (const auto& [kind, why] : r.not_measured)
    not_measured += (not_measured.empty() ? "" : ", ") + kind + " " +
                    (r.runs.at(kind).status.empty() ? "?" : r.runs.at(kind).status);
  if (!not_measured.empty()) not_measured = "**not measured: " + md_cell(not_measured) + "**";
  if (r.gates_total == 0) return not_measured.empty() ? "-" : not_measured;
  if (!not_measured.empty()) not_measured += "; ";
  const size_t failed = r.failed_gates.size();
  if (failed == 0)
    return not_measured + "pass " + std::to_string(r.gates_total) + "/" +
           std::to_string(r.gates_total);
  return not_measured + "**" + std::to_string(failed) + " failed** of " +
         std::to_string(r.gates_total);
}

json number_or_null(const std::map<std::string, double>& m, const std::string& k) {
  auto it = m.find(k);
  if (it == m.end() || !std::isfinite(it->second)) return nullptr;
  return it->second;
}

}  // namespace

std::string render_markdown(const RenderInput& in) {
  const Comparison& c = *in.comparison;
  std::ostringstream o;
  o << "## Comparison of " << c.rows.size() << " configuration" << (c.rows.size() == 1 ? "" : "s");
  if (!c.baseline.empty()) {
    o << " (baseline";
    for (const auto& [k, v] : c.baseline) o << " " << k << "=" << v;
    o << ")";
  }
  o << (in.failed ? ": FAIL" : "") << "\n\n";

  std::vector<std::string> header(c.group_by.begin(), c.group_by.end());
  if (header.empty()) header.push_back("configuration");
  for (const auto& col : c.columns) {
    header.push_back(col.header);
    if (col.speedup && !c.baseline.empty())
      header.push_back((col.short_name.empty() ? col.header : col.short_name) + " speedup");
  }
  header.push_back("gates");
  o << "|";
  for (const auto& h : header) o << " " << md_cell(h) << " |";
  o << "\n|";
  const size_t label_cols = std::max<size_t>(c.group_by.size(), 1);
  for (size_t i = 0; i < header.size(); ++i)
    o << (i < label_cols || i + 1 == header.size() ? "---|" : "---:|");
  o << "\n";
  for (const auto& r : c.rows) {
    o << "|";
    if (c.group_by.empty()) o << " " << md_cell(r.name) << " |";
    for (const auto& v : r.config) o << " " << md_cell(v) << " |";
    for (const auto& col : c.columns) {
      auto v = r.values.find(col.key);
      std::string text = v == r.values.end() ? "n/a" : format_value(v->second, col.decimals);
      if (auto ch = r.changes.find(col.key); ch != r.changes.end()) {
        const std::string t = "(" + change_text(ch->second) + ")";
        text += " " + (ch->second.over_limit ? "**" + t + "**" : t);
      }
      o << " " << text << " |";
      if (col.speedup && !c.baseline.empty()) {
        auto s = r.speedups.find(col.key);
        o << " " << (s == r.speedups.end() ? "n/a" : format_speedup(s->second)) << " |";
      }
    }
    o << " " << gates_cell(r) << " |\n";
  }
  o << "\n";
  if (!c.baseline.empty())
    o << "Speedups against the baseline row of each group: throughput this/baseline, latency "
         "baseline/this (above 1.00x is better).";
  if (c.compared_with_previous)
    o << (c.baseline.empty() ? "" : " ") << "Changes in parentheses against the previous run"
      << (in.previous_dir.empty() ? "" : " (" + in.previous_dir + ")") << ".";
  if (!c.baseline.empty() || c.compared_with_previous) o << "\n\n";

  std::vector<const GateRef*> failed;
  for (const auto& r : c.rows)
    for (const auto& g : r.failed_gates) failed.push_back(&g);
  if (!failed.empty()) {
    o << "### Failed gates\n\n| configuration | run | gate | value |"
      << (c.compared_with_previous ? " status |" : "") << "\n|---|---|---|---:|"
      << (c.compared_with_previous ? "---|" : "") << "\n";
    for (const auto& r : c.rows)
      for (const auto& g : r.failed_gates) {
        o << "| " << md_cell(r.name) << " | " << md_cell(g.kind) << " | `" << md_cell(g.gate.text)
          << "` | " << (g.gate.value ? format_value(*g.gate.value, 4) : std::string("n/a")) << " |";
        if (c.compared_with_previous)
          o << " " << (g.status == "new" ? "**new**" : g.status) << " (" << md_cell(g.detail)
            << ") |";
        o << "\n";
      }
    o << "\n";
  }
  if (!c.regressions.empty()) {
    o << "### Regressions over --max-drop\n\n";
    for (const auto& line : c.regressions) o << "- " << md_cell(line) << "\n";
    o << "\n";
  }
  if (!c.notes.empty() || !in.warnings.empty()) {
    for (const auto& n : c.notes) o << "- " << n << "\n";
    for (const auto& w : in.warnings) o << "- warning: " << w << "\n";
    o << "\n";
  }
  if (!in.charts.empty()) {
    o << "### History\n\n";
    for (const auto& ch : in.charts) o << "![" << ch.title << "](" << ch.file << ")\n\n";
  }
  return o.str();
}

json render_json(const RenderInput& in) {
  const Comparison& c = *in.comparison;
  json j;
  j["kind"] = "comparison-report";
  j["version"] = 1;
  j["verdict"] = in.failed ? "fail" : "pass";
  j["group_by"] = c.group_by;
  json base = json::object();
  for (const auto& [k, v] : c.baseline) base[k] = v;
  j["baseline"] = base;
  json cols = json::array();
  for (const auto& col : c.columns)
    cols.push_back({{"key", col.key},
                    {"header", col.header},
                    {"sources", col.sources},
                    {"direction", col.direction > 0 ? "higher is better" : "lower is better"},
                    {"speedup", col.speedup}});
  j["columns"] = cols;
  json rows = json::array();
  for (const auto& r : c.rows) {
    json row;
    json config = json::object();
    for (size_t i = 0; i < c.group_by.size(); ++i) config[c.group_by[i]] = r.config[i];
    row["config"] = config;
    row["name"] = r.name;
    row["group"] = r.group;
    row["baseline"] = r.baseline;
    json runs = json::object();
    for (const auto& [kind, run] : r.runs) runs[kind] = run.path;
    row["runs"] = runs;
    json not_measured = json::object();
    for (const auto& [kind, why] : r.not_measured) not_measured[kind] = why;
    row["not_measured"] = not_measured;
    json values = json::object(), speedups = json::object(), changes = json::object();
    for (const auto& col : c.columns) {
      values[col.key] = number_or_null(r.values, col.key);
      if (col.speedup && !c.baseline.empty())
        speedups[col.key] = number_or_null(r.speedups, col.key);
      if (auto ch = r.changes.find(col.key); ch != r.changes.end()) {
        json cj = {{"previous", ch->second.previous},
                   {"current", ch->second.current},
                   {"change", std::isfinite(ch->second.change) ? json(ch->second.change) : json()},
                   {"regression", ch->second.regression},
                   {"over_limit", ch->second.over_limit}};
        cj["limit"] = ch->second.limit ? json(*ch->second.limit) : json();
        changes[col.key] = cj;
      }
    }
    row["values"] = values;
    if (!c.baseline.empty()) row["speedups"] = speedups;
    if (c.compared_with_previous) {
      row["has_previous"] = r.has_previous;
      row["changes"] = changes;
    }
    row["gates_total"] = r.gates_total;
    json fg = json::array();
    for (const auto& g : r.failed_gates) {
      json gj = {{"run", g.run_path},       {"kind", g.kind},  {"gate", g.gate.text},
                 {"metric", g.gate.metric}, {"op", g.gate.op}, {"threshold", g.gate.threshold}};
      gj["value"] = g.gate.value ? json(*g.gate.value) : json();
      if (c.compared_with_previous) {
        gj["status"] = g.status;
        gj["detail"] = g.detail;
      }
      fg.push_back(gj);
    }
    row["failed_gates"] = fg;
    rows.push_back(row);
  }
  j["rows"] = rows;
  j["regressions"] = c.regressions;
  j["notes"] = c.notes;
  j["warnings"] = in.warnings;
  if (!in.previous_dir.empty()) j["previous"] = in.previous_dir;
  json charts = json::array();
  for (const auto& ch : in.charts)
    charts.push_back({{"column", ch.column}, {"title", ch.title}, {"file", ch.file}});
  j["history_charts"] = charts;
  return j;
}

}  // namespace dsv4::eval::report

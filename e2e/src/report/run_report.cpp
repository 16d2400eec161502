// JSON, Markdown and JUnit XML renderings of a RunReport.
#include "report/run_report.hpp"

#include "common/markdown.hpp"
#include "http/process_setup.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace dsv4::eval {

namespace {
nlohmann::json number_or_null(std::optional<double> v) {
  if (!v || !std::isfinite(*v)) return nullptr;
  return *v;
}

std::string metric_text(const ReportMetric& m) {
  if (!m.value) return "n/a";
  std::string s = format_number(*m.value, 6);
  if (!m.unit.empty()) s += " " + m.unit;
  return s;
}
}  // namespace

nlohmann::json report_to_json(const RunReport& r) {
  nlohmann::json j;
  j["suite"] = r.suite;
  j["title"] = r.title;
  j["status"] = r.status;
  j["exit_code"] = r.exit_code;
  if (!r.error.empty()) j["error"] = r.error;
  j["duration_s"] = r.duration_s;
  nlohmann::json ctx = nlohmann::json::object();
  for (const auto& [k, v] : r.context) ctx[k] = v;
  j["context"] = ctx;
  nlohmann::json metrics = nlohmann::json::object();
  nlohmann::json metric_notes = nlohmann::json::object();
  for (const auto& m : r.metrics) {
    metrics[m.name] = number_or_null(m.value);
    if (!m.note.empty()) metric_notes[m.name] = m.note;
  }
  j["metrics"] = metrics;
  if (!metric_notes.empty()) j["metric_notes"] = metric_notes;
  nlohmann::json gates = nlohmann::json::array();
  for (const auto& g : r.gates) {
    gates.push_back({{"gate", g.gate.text},
                     {"metric", g.gate.metric},
                     {"op", to_string(g.gate.op)},
                     {"threshold", g.gate.threshold},
                     {"value", number_or_null(g.value)},
                     {"verdict", g.verdict},
                     {"pass", g.pass},
                     {"detail", g.detail}});
  }
  j["gates"] = gates;
  nlohmann::json tables = nlohmann::json::array();
  for (const auto& t : r.tables)
    tables.push_back({{"title", t.title}, {"columns", t.columns}, {"rows", t.rows}});
  j["tables"] = tables;
  j["notes"] = r.notes;
  for (const auto& [k, v] : r.extra.items()) j[k] = v;
  return j;
}

std::string report_to_markdown(const RunReport& r) {
  std::ostringstream o;
  const char* badge = r.status == "PASS" ? "PASS" : r.status == "FAIL" ? "FAIL" : "ERROR";
  o << "## " << r.title << ": " << badge << "\n\n";
  if (!r.error.empty()) o << "**Could not complete:** " << md_cell(r.error) << "\n\n";
  if (!r.context.empty()) {
    o << "| | |\n|---|---|\n";
    for (const auto& [k, v] : r.context) o << "| " << md_cell(k) << " | " << md_cell(v) << " |\n";
    o << "\n";
  }
  if (!r.gates.empty()) {
    o << "### Gates\n\n| gate | value | threshold | verdict |\n|---|---|---|---|\n";
    for (const auto& g : r.gates) {
      o << "| `" << md_cell(g.gate.text) << "` | "
        << (g.value ? format_number(*g.value) : std::string("n/a")) << " | " << to_string(g.gate.op)
        << " " << format_number(g.gate.threshold) << " | "
        << (g.pass ? "pass" : "**" + g.verdict + "**");
      if (!g.value) o << " (" << md_cell(g.detail) << ")";
      o << " |\n";
    }
    o << "\n";
  }
  if (!r.metrics.empty()) {
    o << "### Metrics\n\n| metric | value | |\n|---|---|---|\n";
    for (const auto& m : r.metrics) {
      std::string what = m.description;
      if (!m.note.empty()) what += what.empty() ? m.note : " (" + m.note + ")";
      o << "| " << md_cell(m.name) << " | " << metric_text(m) << " | " << md_cell(what) << " |\n";
    }
    o << "\n";
  }
  for (const auto& t : r.tables) {
    o << "### " << t.title << "\n\n|";
    for (const auto& c : t.columns) o << " " << md_cell(c) << " |";
    o << "\n|";
    for (size_t i = 0; i < t.columns.size(); ++i) o << "---|";
    o << "\n";
    for (const auto& row : t.rows) {
      o << "|";
      for (const auto& c : row) o << " " << md_cell(c) << " |";
      o << "\n";
    }
    o << "\n";
  }
  for (const auto& n : r.notes) o << "- " << n << "\n";
  if (!r.notes.empty()) o << "\n";
  return o.str();
}

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if (c < 0x20 && c != '\n' && c != '\t' && c != '\r')
          out += "?";  // not representable in XML 1.0
        else
          out += char(c);
    }
  }
  return out;
}

std::string report_to_junit(const RunReport& r) {
  // One test case per gate; a run that could not complete adds an errored case "run".
  const bool errored = r.status == "ERROR";
  size_t failures = 0;
  for (const auto& g : r.gates)
    if (!g.pass) ++failures;
  const size_t tests = r.gates.size() + (errored || r.gates.empty() ? 1 : 0);
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << "<testsuites name=\"dsv4-eval\" tests=\"" << tests << "\" failures=\"" << failures
    << "\" errors=\"" << (errored ? 1 : 0) << "\">\n";
  o << "  <testsuite name=\"" << xml_escape(r.suite) << "\" tests=\"" << tests << "\" failures=\""
    << failures << "\" errors=\"" << (errored ? 1 : 0) << "\" time=\"" << r.duration_s << "\">\n";
  o << "    <properties>\n";
  for (const auto& [k, v] : r.context)
    o << "      <property name=\"" << xml_escape(k) << "\" value=\"" << xml_escape(v) << "\"/>\n";
  for (const auto& m : r.metrics)
    o << "      <property name=\"metric." << xml_escape(m.name) << "\" value=\""
      << (m.value ? format_number(*m.value, 10) : std::string("n/a")) << "\"/>\n";
  o << "    </properties>\n";
  if (errored || r.gates.empty()) {
    o << "    <testcase classname=\"" << xml_escape(r.suite) << "\" name=\"run\" time=\""
      << r.duration_s << "\">\n";
    if (errored)
      o << "      <error message=\"" << xml_escape(r.error) << "\">" << xml_escape(r.error)
        << "</error>\n";
    o << "    </testcase>\n";
  }
  for (const auto& g : r.gates) {
    o << "    <testcase classname=\"" << xml_escape(r.suite) << ".gates\" name=\""
      << xml_escape(g.gate.text) << "\" time=\"0\">\n";
    if (!g.pass)
      o << "      <failure message=\"" << xml_escape(g.detail) << "\" type=\"" << g.verdict << "\">"
        << xml_escape(g.detail) << "</failure>\n";
    else
      o << "      <system-out>" << xml_escape(g.detail) << "</system-out>\n";
    o << "    </testcase>\n";
  }
  o << "  </testsuite>\n</testsuites>\n";
  return o.str();
}

RunReport redact_report(RunReport r) {
  r.suite = redact(r.suite);
  r.title = redact(r.title);
  for (auto& [k, v] : r.context) k = redact(k), v = redact(v);
  for (auto& m : r.metrics) m.description = redact(m.description), m.note = redact(m.note);
  for (auto& g : r.gates) g.detail = redact(g.detail), g.gate.text = redact(g.gate.text);
  for (auto& t : r.tables) {
    t.title = redact(t.title);
    for (auto& c : t.columns) c = redact(c);
    for (auto& row : t.rows)
      for (auto& c : row) c = redact(c);
  }
  for (auto& n : r.notes) n = redact(n);
  r.extra = redact_json(std::move(r.extra));
  r.error = redact(r.error);
  r.status = redact(r.status);
  return r;
}

bool write_reports(const RunReport& report, const std::filesystem::path& dir, std::string* error) {
  const RunReport r = redact_report(report);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    if (error) *error = "cannot create directory " + dir.string() + ": " + ec.message();
    return false;
  }
  // Each rendering is redacted once more: a secret split by escaping in one field is not in the
  // fields, and one whole in the rendered text is cut there.
  const std::string md = redact(report_to_markdown(r));
  if (!write_file_atomic(
          dir / "report.json",
          redact(report_to_json(r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) +
              "\n",
          error))
    return false;
  if (!write_file_atomic(dir / "report.md", md, error)) return false;
  if (!write_file_atomic(dir / "junit.xml", redact(report_to_junit(r)), error)) return false;
  return append_step_summary(md, error);
}

}  // namespace dsv4::eval

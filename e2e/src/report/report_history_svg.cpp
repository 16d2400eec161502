// `dsv4-eval report --history DIR`: metric values over past runs and hand-written SVG line charts.
#include "report/report_history_svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "report/run_report.hpp"

namespace dsv4::eval::report {
namespace fs = std::filesystem;

std::vector<std::pair<std::string, Comparison>> load_history(const fs::path& dir,
                                                             const ComparisonOptions& opts,
                                                             std::vector<std::string>* warnings) {
  if (!fs::is_directory(dir))
    throw ReportError("--history: '" + dir.string() + "' is not a directory");
  std::vector<fs::path> nights;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory()) nights.push_back(e.path());
  std::sort(nights.begin(), nights.end());
  std::vector<std::pair<std::string, Comparison>> out;
  for (const auto& n : nights) {
    auto runs = collect_runs({n.string()}, warnings);
    if (runs.empty()) continue;
    try {
      out.emplace_back(n.filename().string(), build_comparison(runs, opts));
    } catch (const ReportError& e) {
      if (warnings)
        warnings->push_back("--history: night " + n.filename().string() + " skipped: " + e.what());
    }
  }
  return out;
}

namespace {

std::set<std::string> run_paths(const Comparison& c) {
  std::set<std::string> out;
  for (const auto& r : c.rows)
    for (const auto& [kind, run] : r.runs) {
      std::error_code ec;
      const auto p = fs::weakly_canonical(run.path, ec);
      out.insert(ec ? run.path : p.string());
    }
  return out;
}

std::string esc(const std::string& s) { return xml_escape(s); }

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string tick_text(double v, double step) {
  char buf[32];
  const int decimals = std::clamp(int(std::ceil(-std::log10(step) + 1e-9)), 0, 6);
  std::snprintf(buf, sizeof buf, "%.*f", decimals, std::fabs(v) < step * 1e-6 ? 0.0 : v);
  return buf;
}

// Dash patterns by series, so lines that coincide (equal values) still show every colour.
const char* kDashes[] = {"", "8 4", "3 3", "12 3 3 3"};

const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                          "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

}  // namespace

Chart history_chart(const Column& col,
                    const std::vector<std::pair<std::string, Comparison>>& nights,
                    const Comparison* current) {
  Chart ch;
  ch.title = col.header + " over nightly runs";
  ch.y_label = col.header;
  std::vector<std::pair<std::string, const Comparison*>> points;
  bool current_in_history = false;
  const auto cur_paths = current ? run_paths(*current) : std::set<std::string>{};
  for (const auto& [name, cmp] : nights) {
    points.emplace_back(name, &cmp);
    for (const auto& p : run_paths(cmp))
      if (cur_paths.count(p)) current_in_history = true;
  }
  if (current && !current_in_history) points.emplace_back("current", current);
  std::vector<std::string> order;  // series in order of first appearance
  std::map<std::string, Series> by_name;
  for (size_t i = 0; i < points.size(); ++i) {
    ch.x_labels.push_back(points[i].first);
    for (const auto& row : points[i].second->rows) {
      auto v = row.values.find(col.key);
      if (v == row.values.end()) continue;
      auto [it, fresh] = by_name.try_emplace(row.name);
      if (fresh) {
        order.push_back(row.name);
        it->second.name = row.name;
        it->second.values.assign(points.size(), std::nullopt);
      }
      it->second.values[i] = v->second;
    }
  }
  for (const auto& n : order) ch.series.push_back(by_name[n]);
  return ch;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) {
    const double pad = lo == 0 ? 1.0 : std::fabs(lo) * 0.05;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / std::max(target, 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  const double first = std::floor(lo / step) * step;
  for (double v = first; v < hi + step * 0.999; v += step) t.push_back(v);
  if (t.size() < 2) t.push_back(first + step);
  return t;
}

std::string render_svg(const Chart& c, int width, int height) {
  const double left = 78, right = 210, top = 44, bottom = 86;
  const double x0 = left, x1 = width - right, y0 = top, y1 = height - bottom;
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& s : c.series)
    for (const auto& v : s.values)
      if (v && std::isfinite(*v)) {
        lo = std::min(lo, *v);
        hi = std::max(hi, *v);
      }
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  const auto ticks = nice_ticks(lo, hi);
  const double tlo = ticks.front(), thi = ticks.back();
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
  auto ypos = [&](double v) { return y1 - (v - tlo) / (thi - tlo) * (y1 - y0); };
  const size_t n = c.x_labels.size();
  auto xpos = [&](size_t i) {
    return n <= 1 ? (x0 + x1) / 2 : x0 + 16 + (x1 - x0 - 32) * double(i) / double(n - 1);
  };

  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" viewBox=\"0 0 " << width << " " << height
    << "\" font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"12\">\n";
  o << "  <title>" << esc(c.title) << "</title>\n";
  o << "  <rect x=\"0\" y=\"0\" width=\"" << width << "\" height=\"" << height
    << "\" fill=\"#ffffff\"/>\n";
  o << "  <text x=\"" << num((x0 + x1) / 2)
    << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\" "
    << "font-weight=\"bold\">" << esc(c.title) << "</text>\n";
  o << "  <g stroke=\"#dddddd\" stroke-width=\"1\">\n";
  for (double t : ticks)
    o << "    <line x1=\"" << num(x0) << "\" y1=\"" << num(ypos(t)) << "\" x2=\"" << num(x1)
      << "\" y2=\"" << num(ypos(t)) << "\"/>\n";
  o << "  </g>\n";
  o << "  <g text-anchor=\"end\" fill=\"#333333\">\n";
  for (double t : ticks)
    o << "    <text x=\"" << num(x0 - 6) << "\" y=\"" << num(ypos(t) + 4) << "\">"
      << esc(tick_text(t, step)) << "</text>\n";
  o << "  </g>\n";
  o << "  <g stroke=\"#333333\" stroke-width=\"1\">\n"
    << "    <line x1=\"" << num(x0) << "\" y1=\"" << num(y0) << "\" x2=\"" << num(x0) << "\" y2=\""
    << num(y1) << "\"/>\n"
    << "    <line x1=\"" << num(x0) << "\" y1=\"" << num(y1) << "\" x2=\"" << num(x1) << "\" y2=\""
    << num(y1) << "\"/>\n  </g>\n";
  o << "  <g text-anchor=\"end\" fill=\"#333333\" font-size=\"11\">\n";
  for (size_t i = 0; i < n; ++i) {
    const double x = xpos(i), y = y1 + 14;
    o << "    <text x=\"" << num(x) << "\" y=\"" << num(y) << "\" transform=\"rotate(-35 " << num(x)
      << " " << num(y) << ")\">" << esc(c.x_labels[i]) << "</text>\n";
  }
  o << "  </g>\n";
  o << "  <text x=\"16\" y=\"" << num((y0 + y1) / 2)
    << "\" text-anchor=\"middle\" transform=\"rotate(-90 16 " << num((y0 + y1) / 2) << ")\">"
    << esc(c.y_label) << "</text>\n";

  for (size_t s = 0; s < c.series.size(); ++s) {
    const auto& ser = c.series[s];
    const char* color = kPalette[s % (sizeof kPalette / sizeof *kPalette)];
    const std::string dash = kDashes[s % 4][0]
                                 ? std::string(" stroke-dasharray=\"") + kDashes[s % 4] + "\""
                                 : std::string();
    o << "  <g class=\"series\" data-name=\"" << esc(ser.name) << "\">\n";
    std::string pts;
    auto flush = [&] {
      if (pts.find(' ') != std::string::npos)
        o << "    <polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\"" << dash
          << " points=\"" << pts << "\"/>\n";
      pts.clear();
    };
    for (size_t i = 0; i < ser.values.size() && i < n; ++i) {
      if (!ser.values[i] || !std::isfinite(*ser.values[i])) {
        flush();
        continue;
      }
      pts += (pts.empty() ? "" : " ") + num(xpos(i)) + "," + num(ypos(*ser.values[i]));
    }
    flush();
    for (size_t i = 0; i < ser.values.size() && i < n; ++i) {
      if (!ser.values[i] || !std::isfinite(*ser.values[i])) continue;
      char val[32];
      std::snprintf(val, sizeof val, "%.6g", *ser.values[i]);
      o << "    <circle cx=\"" << num(xpos(i)) << "\" cy=\"" << num(ypos(*ser.values[i]))
        << "\" r=\"3.5\" fill=\"" << color << "\"><title>"
        << esc(ser.name + " @ " + c.x_labels[i] + ": " + val) << "</title></circle>\n";
    }
    o << "  </g>\n";
    const double ly = y0 + 8 + 20.0 * double(s);
    o << "  <line x1=\"" << num(x1 + 18) << "\" y1=\"" << num(ly) << "\" x2=\"" << num(x1 + 40)
      << "\" y2=\"" << num(ly) << "\" stroke=\"" << color << "\" stroke-width=\"2\"" << dash
      << "/>\n";
    o << "  <text x=\"" << num(x1 + 46) << "\" y=\"" << num(ly + 4) << "\" font-size=\"11\">"
      << esc(ser.name) << "</text>\n";
  }
  if (c.series.empty())
    o << "  <text x=\"" << num((x0 + x1) / 2) << "\" y=\"" << num((y0 + y1) / 2)
      << "\" text-anchor=\"middle\" fill=\"#888888\">no data</text>\n";
  o << "</svg>\n";
  return o.str();
}

}  // namespace dsv4::eval::report

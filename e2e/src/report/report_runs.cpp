// Run records for `dsv4-eval report`: reading gsm8k and serve-bench report.json files.
#include "report/report_runs.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace dsv4::eval::report {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::optional<std::string> scalar_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number()) {
    std::ostringstream o;
    o << v.get<double>();
    return o.str();
  }
  return std::nullopt;
}

json read_json(const fs::path& file) {
  std::ifstream f(file);
  if (!f) throw ReportError(file.string() + ": cannot open the file");
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::parse_error& e) {
    throw ReportError(file.string() + ": not valid JSON (" + e.what() + ")");
  }
}

void read_labels(const json& obj, const std::string& where,
                 std::map<std::string, std::string>& out) {
  if (!obj.is_object()) throw ReportError(where + ": \"labels\" must be an object of key: value");
  for (const auto& [k, v] : obj.items()) {
    auto t = scalar_text(v);
    if (!t) throw ReportError(where + ": label \"" + k + "\" must be a string or a number");
    out.emplace(k, *t);
  }
}

GateOutcome parse_gate(const json& g, const std::string& where) {
  if (!g.is_object()) throw ReportError(where + ": each entry of \"gates\" must be an object");
  GateOutcome o;
  o.metric = g.value("metric", "");
  o.op = g.value("op", "");
  if (o.metric.empty()) throw ReportError(where + ": a gate has no \"metric\"");
  if (g.contains("threshold") && g["threshold"].is_number()) o.threshold = g["threshold"];
  if (g.contains("value") && g["value"].is_number()) o.value = g["value"].get<double>();
  if (g.contains("pass") && g["pass"].is_boolean())
    o.pass = g["pass"];
  else if (g.contains("passed") && g["passed"].is_boolean())
    o.pass = g["passed"];
  else
    o.pass = g.value("verdict", "") == "pass";
  o.text =
      g.value("gate", o.metric + o.op + (scalar_text(g.value("threshold", json())).value_or("")));
  return o;
}

}  // namespace

std::optional<std::string> RunRecord::label(const std::string& key) const {
  if (auto it = labels.find(key); it != labels.end()) return it->second;
  if (auto it = fallback.find(key); it != fallback.end()) return it->second;
  return std::nullopt;
}

std::string RunRecord::status_text() const {
  return "status " + (status.empty() ? std::string("none") : status) +
         (error.empty() ? std::string() : ": " + error);
}

bool looks_like_run(const json& j) {
  if (!j.is_object()) return false;
  if (j.value("kind", "") == "comparison-report") return false;
  if (j.contains("metrics") && j["metrics"].is_object()) return true;
  for (const char* k : {"accuracy", "mean_tpot_ms"})  // a flat, bench_serving-style file
    if (j.contains(k) && j[k].is_number()) return true;
  return false;
}

RunRecord parse_run(const json& j, const std::string& path) {
  if (!j.is_object()) throw ReportError(path + ": a run report must be a JSON object");
  RunRecord r;
  r.path = path;
  if (j.contains("metrics")) {
    if (!j["metrics"].is_object()) throw ReportError(path + ": \"metrics\" must be an object");
    for (const auto& [k, v] : j["metrics"].items())
      if (v.is_number()) r.metrics[k] = v.get<double>();
  }
  for (const auto& [k, v] : j.items()) {
    if (v.is_number() && !r.metrics.count(k) && k != "exit_code" && k != "version")
      r.metrics[k] = v.get<double>();
    else if (v.is_string())
      r.fallback.emplace(k, v.get<std::string>());
  }
  if (j.contains("context") && j["context"].is_object())
    for (const auto& [k, v] : j["context"].items())
      if (auto t = scalar_text(v)) r.fallback[k] = *t;  // context wins over top-level strings
  if (j.contains("labels")) read_labels(j["labels"], path, r.labels);
  const fs::path side = fs::path(path).parent_path() / "labels.json";
  if (fs::exists(side)) {
    std::map<std::string, std::string> extra;
    read_labels(read_json(side), side.string(), extra);
    r.labels.insert(extra.begin(), extra.end());  // the run's own labels win
  }
  r.kind = j.value("suite", j.value("kind", ""));
  if (r.kind.empty()) {
    if (r.metrics.count("accuracy"))
      r.kind = "gsm8k";
    else if (r.metrics.count("mean_tpot_ms"))
      r.kind = "serve-bench";
    else
      throw ReportError(path +
                        ": cannot tell the run's kind (no \"suite\" or \"kind\", and no "
                        "accuracy or mean_tpot_ms metric)");
  }
  if (j.contains("gates")) {
    if (!j["gates"].is_array()) throw ReportError(path + ": \"gates\" must be an array");
    for (const auto& g : j["gates"]) r.gates.push_back(parse_gate(g, path));
  }
  if (j.contains("status") && j["status"].is_string()) r.status = j["status"];
  if (j.contains("error") && j["error"].is_string()) r.error = j["error"];
  for (const char* k : {"timestamp", "started_at", "created_at"})
    if (j.contains(k) && j[k].is_string()) {
      r.when = j[k];
      break;
    }
  return r;
}

RunRecord load_run(const fs::path& file) {
  const json j = read_json(file);
  if (!looks_like_run(j))
    throw ReportError(file.string() +
                      ": not a run report (no \"metrics\" object, no accuracy or mean_tpot_ms)");
  return parse_run(j, file.string());
}

std::vector<RunRecord> collect_runs(const std::vector<std::string>& paths,
                                    std::vector<std::string>* warnings) {
  std::vector<RunRecord> out;
  for (const auto& p : paths) {
    const fs::path path(p);
    if (fs::is_directory(path)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::recursive_directory_iterator(path))
        if (e.is_regular_file() && e.path().extension() == ".json" &&
            e.path().filename() != "labels.json")
          files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        json j;
        try {
          j = read_json(f);
        } catch (const ReportError& e) {
          if (f.filename() == "report.json")  // a run's own report: never silently left out
            throw ReportError(
                std::string(e.what()) +
                " (a run folder's report.json; remove the folder or repair the file)");
          if (warnings) warnings->push_back(std::string(e.what()) + " (skipped)");
          continue;
        }
        if (looks_like_run(j)) out.push_back(parse_run(j, f.string()));
      }
    } else if (fs::exists(path)) {
      out.push_back(load_run(path));
    } else {
      throw ReportError(p + ": no such file or directory");
    }
  }
  return out;
}

}  // namespace dsv4::eval::report

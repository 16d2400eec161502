// dsv4-replay --json: a replay's result as one JSON object.
#include <cmath>

#include <nlohmann/json.hpp>

#include "dsv4/replay/replay.hpp"

namespace dsv4::replay {
namespace {

using nlohmann::json;

json value_json(const fx::Value& v) {
  switch (v.kind) {
    case fx::Value::kInteger:
      return v.integer;
    case fx::Value::kNumber:
      if (std::isnan(v.number)) return "nan";
      if (std::isinf(v.number)) return v.number > 0 ? "inf" : "-inf";
      return v.number;
    default:
      return v.text;
  }
}

const char* verdict_word(int exit_code) {
  switch (exit_code) {
    case 0:
      return "match";
    case 1:
      return "mismatch";
    case 2:
      return "bad_case";
    default:
      return "could_not_run";
  }
}

json optional_count(const std::optional<size_t>& n) { return n ? json(*n) : json(nullptr); }

json or_null(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

}  // namespace

std::string result_json(const Request& req, const Result& res) {
  const bool device = req.mode == Mode::kDevice;
  json outs = json::array();
  for (const OutputVerdict& o : res.outputs) {
    json first = json::array();
    for (const fx::Mismatch& m : o.first)
      first.push_back(
          {{"index", m.index}, {"got", value_json(m.got)}, {"want", value_json(m.want)}});
    outs.push_back({{"name", o.name},
                    {"comparator", o.comparator},
                    {"ok", o.ok},
                    {"checked", optional_count(o.checked)},
                    {"mismatched", optional_count(o.mismatched)},
                    {"first", first},
                    {"message", o.message}});
  }
  std::string mode_flag = device ? "--device" : "--reference";
  if (req.verdict != Verdict::kAuto) mode_flag += std::string(" --") + verdict_name(req.verdict);
  json j = {
      {"family", or_null(res.family)},
      {"case", or_null(res.case_name)},
      {"path", req.path},
      {"mode", device ? "device" : "reference"},
      {"source", or_null(res.source)},
      {"rule", or_null(res.rule)},
      {"verdict", verdict_word(res.exit_code)},
      {"exit_code", res.exit_code},
      {"outputs", outs},
      {"rerun", res.family.empty() ? json(nullptr)
                                   : json(fx::replay_command(req.path, res.family, mode_flag))},
      {"redraw", or_null(res.redraw)},
      {"error", or_null(res.error)}};
  return j.dump();
}

}  // namespace dsv4::replay

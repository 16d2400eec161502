// dsv4-bench's results: targets judged, exit code, JSON and Markdown.
#include "dsv4/bench/results.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "dsv4/bench/timing.hpp"

namespace dsv4::bench {

using nlohmann::json;
using Kind = cases::BenchTarget::Kind;

namespace {

TargetResult judge_one(const cases::BenchTarget& t, const Measured& m,
                       const std::map<std::string, const Measured*>& by_id) {
  TargetResult r{t.text()};
  auto set = [&](bool met, std::string why) {
    r.state = met ? TargetState::kMet : TargetState::kMissed;
    r.why = std::move(why);
  };
  if (!m.measured()) {
    r.why = "the row was not measured: " + m.error;
    return r;
  }
  switch (t.kind) {
    case Kind::kMaxUs:
      set(m.us <= t.value, fmt("%.2f us", m.us));
      break;
    case Kind::kMinOfCopy:
      if (m.copy_gbps <= 0 || m.bytes <= 0) {
        r.why = "no copy ceiling or no bytes declared";
      } else {
        const double of = m.gbps() / m.copy_gbps;
        set(of >= t.value, fmt("%.1f%% of copy", 100 * of));
      }
      break;
    case Kind::kMinTflops:
      if (m.flops <= 0)
        r.why = "the family declares no FLOPs";
      else
        set(m.tflops() >= t.value, fmt("%.1f TFLOP/s", m.tflops()));
      break;
    case Kind::kMinSpeedup: {
      const std::optional<double> p = m.peer ? m.peer->us(t.peer) : std::nullopt;
      if (!p) {
        r.why = "no PyTorch peer time (" + t.peer + ")";
        if (m.peer && !m.peer->eager_error.empty()) r.why += ": " + m.peer->eager_error;
      } else {
        set(*p >= t.value * m.us, fmt("%.2fx", *p / m.us) + " torch " + t.peer);
      }
      break;
    }
    case Kind::kMaxTimesRow:
    case Kind::kMaxPlusRow: {
      const auto it = by_id.find(t.row);
      if (it == by_id.end() || !it->second->measured()) {
        r.why = "the row it compares with (" + t.row + ") was not measured";
        break;
      }
      const double other = it->second->us;
      if (t.kind == Kind::kMaxTimesRow)
        set(m.us <= t.value * other, fmt("%.2fx", m.us / other) + " of " + fmt("%.2f us", other));
      else
        set(m.us <= other + t.value,
            fmt("%+.2f us", m.us - other) + " over " + fmt("%.2f us", other));
      break;
    }
  }
  return r;
}

const char* state_name(TargetState s) {
  return s == TargetState::kMet ? "met" : s == TargetState::kMissed ? "MISSED" : "not judged";
}

std::optional<double> opt_us(const std::optional<Peer>& p, const char* which) {
  return p ? p->us(which) : std::nullopt;
}

json num_or_null(std::optional<double> v) { return v ? json(*v) : json(nullptr); }

}  // namespace

void judge(Measured& m, const std::map<std::string, const Measured*>& by_id) {
  m.targets.clear();
  for (const cases::BenchTarget& t : m.planned.row.targets)
    m.targets.push_back(judge_one(t, m, by_id));
}

int exit_code(const std::vector<Measured>& rows) {
  bool any_measured = false, missed = false, unjudged = false;
  for (const Measured& m : rows) {
    any_measured = any_measured || m.measured();
    missed = missed || m.wrong;
    unjudged = unjudged || (!m.measured() && !m.wrong && !m.not_here);
    for (const TargetResult& t : m.targets) {
      missed = missed || t.state == TargetState::kMissed;
      unjudged = unjudged || t.state == TargetState::kUnjudged;
    }
  }
  if (missed) return 1;
  if (!any_measured || unjudged) return 3;
  return 0;
}

std::string verdict_line(const std::vector<Measured>& rows) {
  int met = 0, missed = 0, unjudged = 0, wrong = 0, failed = 0, not_here = 0;
  for (const Measured& m : rows) {
    if (m.wrong) ++wrong;
    if (m.not_here)
      ++not_here;
    else if (!m.measured() && !m.wrong)
      ++failed;
    for (const TargetResult& t : m.targets)
      (t.state == TargetState::kMet ? met : t.state == TargetState::kMissed ? missed : unjudged)++;
  }
  std::string s = "targets: ";
  const std::string elsewhere =
      not_here ? "; " + std::to_string(not_here) + " rows not for this device" : "";
  if (!missed && !unjudged && !wrong && !failed)
    return s + "all met (" + std::to_string(met) + ")" + elsewhere;
  std::vector<std::string> parts;
  if (missed) parts.push_back(std::to_string(missed) + " MISSED");
  if (wrong) parts.push_back(std::to_string(wrong) + " rows with a WRONG output");
  if (failed) parts.push_back(std::to_string(failed) + " rows not measured");
  if (unjudged) parts.push_back(std::to_string(unjudged) + " not judged");
  parts.push_back(std::to_string(met) + " met");
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + parts[i];
  return s + elsewhere;
}

std::vector<std::string> table_header() {
  return {"shape",         "launch",  "us",      "MB moved",       "GB/s",
          "copy GB/s",     "of copy", "TFLOP/s", "torch eager us", "torch.compile us",
          "vs best torch", "target",  "verdict"};
}

std::vector<std::string> table_cells(const Measured& m) {
  std::string target, verdict;
  for (size_t i = 0; i < m.targets.size(); ++i) {
    target += (i ? "; " : "") + m.targets[i].text;
    verdict += (i ? "; " : "") + std::string(state_name(m.targets[i].state)) +
               (m.targets[i].why.empty() ? "" : " (" + m.targets[i].why + ")");
  }
  const std::string shape = m.planned.row.vars.str() + (m.planned.for_target ? " *" : "");
  if (!m.measured())
    return {shape,
            m.launch,
            m.wrong ? "WRONG" : m.not_here ? "n/a" : "error",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            target,
            m.error + (verdict.empty() ? "" : "; " + verdict)};
  const std::optional<double> eager = opt_us(m.peer, "eager"), comp = opt_us(m.peer, "compile"),
                              best = m.peer ? m.peer->best_us() : std::nullopt;
  return {shape,
          m.launch,
          fmt("%.2f", m.us),
          fmt("%.3f", m.bytes / 1e6),
          fmt("%.0f", m.gbps()),
          fmt("%.0f", m.copy_gbps),
          m.copy_gbps > 0 ? fmt("%.0f%%", 100 * m.gbps() / m.copy_gbps) : "n/a",
          m.flops > 0 ? fmt("%.1f", m.tflops()) : "",
          eager ? fmt("%.2f", *eager) : "n/a",
          comp ? fmt("%.2f", *comp) : "n/a",
          best ? fmt("%.2fx", *best / m.us) : "n/a",
          target,
          verdict};
}

std::string row_json(const Measured& m) {
  json targets = json::array();
  for (const TargetResult& t : m.targets)
    targets.push_back({{"target", t.text}, {"state", state_name(t.state)}, {"why", t.why}});
  json j = {{"family", m.planned.family},
            {"shape", m.planned.row.vars.spec()},
            {"id", m.planned.id},
            {"name", m.name},
            {"launch", m.launch},
            {"note", m.planned.row.note},
            {"for_target", m.planned.for_target},
            {"measured", m.measured()},
            {"wrong", m.wrong},
            {"not_here", m.not_here},
            {"error", m.error},
            {"case_file", m.case_file},
            {"us", m.measured() ? json(m.us) : json(nullptr)},
            {"bytes", m.bytes},
            {"flops", m.flops},
            {"gbps", m.measured() ? json(m.gbps()) : json(nullptr)},
            {"copy_gbps", m.copy_gbps > 0 ? json(m.copy_gbps) : json(nullptr)},
            {"tflops", m.flops > 0 && m.measured() ? json(m.tflops()) : json(nullptr)},
            {"sets", m.sets},
            {"peer", m.peer ? json(m.peer->name) : json(nullptr)},
            {"torch_eager_us", num_or_null(opt_us(m.peer, "eager"))},
            {"torch_compile_us", num_or_null(opt_us(m.peer, "compile"))},
            {"targets", targets}};
  return j.dump();
}

std::string to_json(const RunInfo& info, const std::vector<Measured>& rows) {
  json r = json::array();
  for (const Measured& m : rows) r.push_back(json::parse(row_json(m)));
  json j = {{"device", info.device},
            {"arch", info.arch},
            {"compute_units", info.compute_units},
            {"backend", info.backend},
            {"driver", info.driver},
            {"commit", info.commit},
            {"date", info.date},
            {"command", info.command},
            {"matmul_tflops", num_or_null(info.matmul_tflops)},
            {"matmul_shape", info.matmul_shape},
            {"peers_note", info.peers_note},
            {"verdict", verdict_line(rows)},
            {"exit_code", exit_code(rows)},
            {"rows", r}};
  return j.dump(2) + "\n";
}

std::string to_markdown(const RunInfo& info, const std::vector<Measured>& rows) {
  std::ostringstream o;
  o << "# dsv4-bench on " << info.device << " (" << info.arch << ", " << info.compute_units
    << " compute units)\n\n";
  o << "- backend " << info.backend << ", " << info.driver << "\n- commit " << info.commit << ", "
    << info.date << "\n- command: `" << info.command << "`\n";
  if (info.matmul_tflops)
    o << "- math ceiling: " << fmt("%.1f", *info.matmul_tflops) << " TFLOP/s (torch bf16 matmul "
      << info.matmul_shape << ", same run)\n";
  if (!info.peers_note.empty()) o << "- PyTorch peers: " << info.peers_note << "\n";
  o << "- copy ceiling: a device-to-device copy of the row's bytes, measured beside each row\n";
  const std::vector<std::string> header = table_header();
  std::string family;
  for (const Measured& m : rows) {
    if (m.planned.family != family) {
      family = m.planned.family;
      o << "\n## " << family << "\n\n|";
      for (const auto& h : header) o << " " << h << " |";
      o << "\n|";
      for (size_t i = 0; i < header.size(); ++i) o << "---|";
      o << "\n";
    }
    o << "|";
    for (const auto& c : table_cells(m)) o << " " << c << " |";
    o << "\n";
  }
  o << "\n`*`: timed for another row's target.\n\n" << verdict_line(rows) << "\n";
  return o.str();
}

}  // namespace dsv4::bench

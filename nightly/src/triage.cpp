// Triage of a run's failures against earlier runs: a failure is identified by suite, kind and id
// (a gate's text, a test's name), so a renamed metric behind an unchanged gate still matches.
#include "triage.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <sstream>

#include "junit.hpp"
#include "run_suite.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace dsv4::nightly {

namespace {

int to_int(const json& v) {
  if (v.is_number_integer()) return v.get<int>();
  if (v.is_string() && !v.get<std::string>().empty()) {
    try {
      return std::stoi(v.get<std::string>());
    } catch (const std::exception&) {
    }
  }
  return 0;
}

// Failures of an older suite.json that has no "failures": from its JUnit file (shards named by
// their GoogleTest tests, from the XML beside it) or its gates.
std::vector<Failure> derive_failures(const fs::path& dir, const json& m) {
  std::vector<Failure> out;
  if (fs::exists(dir / "junit.xml")) {
    for (const auto& r : expand_shards(read_junit((dir / "junit.xml").string()), dir.string()))
      if (r.outcome == Outcome::kFail) out.push_back({"test", r.name, r.message});
  }
  if (fs::exists(dir / "eval/report.json")) {
    const json rep = json::parse(read_text((dir / "eval/report.json").string()));
    for (const auto& g : rep.value("gates", json::array()))
      if (!g.value("pass", false))
        out.push_back({"gate", g.value("gate", ""), g.value("detail", "")});
  }
  if (out.empty() && m.value("exit_code", 0) >= kCouldNotRun)
    out.push_back({"could-not-run", "", m.value("reason", "")});
  return out;
}

std::string key(const Failure& f) { return f.kind + "\x1f" + f.id; }

std::string cell(std::string s) {
  for (auto& c : s)
    if (c == '|' || c == '\n') c = ' ';
  if (s.size() > 160) s = s.substr(0, 157) + "...";
  return s;
}

}  // namespace

std::map<std::string, SuiteOutcome> load_run(const std::string& dir) {
  std::map<std::string, SuiteOutcome> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (!e.is_regular_file() || e.path().filename() != "suite.json") continue;
    json m;
    try {
      m = json::parse(read_text(e.path().string()));
    } catch (const std::exception&) {
      continue;
    }
    SuiteOutcome o;
    o.suite = m.value("suite", "");
    if (o.suite.empty()) continue;
    o.run_id =
        m.contains("run_id") && m["run_id"].is_string() ? m["run_id"].get<std::string>() : "";
    o.attempt = m.contains("run_attempt") ? to_int(m["run_attempt"]) : 0;
    o.exit_code = m.value("exit_code", 0);
    o.reason = m.value("reason", "");
    if (m.contains("failures") && m["failures"].is_array()) {
      for (const auto& f : m["failures"])
        o.failures.push_back({f.value("kind", ""), f.value("id", ""), f.value("detail", "")});
    } else {
      o.failures = derive_failures(e.path().parent_path(), m);
    }
    auto it = out.find(o.suite);
    if (it == out.end() || o.attempt >= it->second.attempt) out[o.suite] = o;
  }
  return out;
}

std::string triage(const TriageOptions& opt, int& new_failures) {
  new_failures = 0;
  auto current = load_run(opt.current);
  // Suites of jobs that failed before run-suite wrote anything: could not run.
  if (opt.needs.is_object())
    for (const auto& [job, r] : opt.needs.items()) {
      const std::string result = r.value("result", "");
      if (job == "tools" || job == "report") continue;
      if (result != "failure" && result != "cancelled") continue;
      auto it = opt.job_suites.find(job);
      const std::vector<std::string> suites =
          it != opt.job_suites.end() ? it->second : std::vector<std::string>{job};
      for (const auto& suite : suites)
        if (!current.count(suite))
          current[suite] = {
              suite,
              "",
              0,
              kCouldNotRun,
              "the job " + job + " ended (" + result + ") before run-suite wrote suite.json",
              {{"could-not-run", "",
                "the job " + job + " " + result + " before run-suite ran this suite"}}};
    }
  // Earlier runs: one folder each, newest first by run id.
  std::vector<std::pair<std::string, std::map<std::string, SuiteOutcome>>> earlier;
  std::error_code ec;
  if (fs::is_directory(opt.previous, ec))
    for (const auto& e : fs::directory_iterator(opt.previous, ec))
      if (e.is_directory())
        earlier.emplace_back(e.path().filename().string(), load_run(e.path().string()));
  std::sort(earlier.begin(), earlier.end(), [](const auto& a, const auto& b) {
    return a.first.size() != b.first.size() ? a.first.size() > b.first.size() : a.first > b.first;
  });

  std::ostringstream md;
  md << "## Triage: this run's failures against the last " << opt.runs << " scheduled runs\n\n";
  md << "Earlier runs found: " << earlier.size();
  for (const auto& [id, _] : earlier) md << " `" << id << "`";
  md << "\n\n";
  int total = 0;
  std::ostringstream rows;
  for (const auto& [suite, o] : current) {
    for (const auto& f : o.failures) {
      ++total;
      int seen = 0, ran = 0;
      std::string where;
      for (const auto& [run, suites] : earlier) {
        auto it = suites.find(suite);
        if (it == suites.end()) continue;
        ++ran;
        for (const auto& g : it->second.failures)
          if (key(g) == key(f)) {
            ++seen;
            where += (where.empty() ? "" : ", ") + run;
            break;
          }
      }
      std::string verdict;
      if (seen > 0) {
        verdict = "pre-existing (" + std::to_string(seen) + " of " + std::to_string(ran) +
                  " earlier runs: " + where + ")";
      } else {
        ++new_failures;
        verdict = ran == 0 ? "new (no earlier run of this suite to compare)"
                           : "new (passed in the " + std::to_string(ran) + " earlier runs)";
      }
      rows << "| " << suite << " | " << f.kind << " | "
           << (f.id.empty() ? "—" : "`" + cell(f.id) + "`") << " | " << cell(f.detail) << " | "
           << verdict << " |\n";
    }
  }
  if (total == 0) {
    md << "No failures in this run's " << current.size() << " suite reports.\n";
  } else {
    md << total << " failures, " << new_failures << " new, " << total - new_failures
       << " pre-existing.\n\n| suite | kind | failure | detail | verdict |\n|---|---|---|---|---|\n"
       << rows.str();
  }
  // Failures of the latest earlier run that this run no longer has (its suite ran and passed them).
  if (!earlier.empty()) {
    std::ostringstream fixed;
    for (const auto& [suite, o] : earlier.front().second) {
      auto it = current.find(suite);
      if (it == current.end()) continue;
      std::set<std::string> now;
      for (const auto& f : it->second.failures) now.insert(key(f));
      for (const auto& f : o.failures)
        if (!now.count(key(f)))
          fixed << "- " << suite << " " << f.kind << (f.id.empty() ? "" : " `" + cell(f.id) + "`")
                << " (failed in " << earlier.front().first << ")\n";
    }
    if (!fixed.str().empty()) md << "\nNo longer failing:\n" << fixed.str();
  }
  return md.str();
}

}  // namespace dsv4::nightly

namespace dsv4::nightly {

std::vector<DormantTest> dormant_tests(const std::vector<std::string>& run_dirs, int& runs_read,
                                       int& tests_seen) {
  struct Seen {
    int runs = 0;
    bool ran = false;  // passed or failed somewhere
    std::string reason;
  };
  std::map<std::string, Seen> seen;
  std::set<std::string> run_ids;  // a run fetched twice (as the caller's and by its workflow)
  runs_read = 0;
  for (const auto& dir : run_dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    fs::path norm = fs::path(dir).lexically_normal();
    if (norm.filename().empty()) norm = norm.parent_path();
    const std::string id = norm.filename().string();
    if (std::all_of(id.begin(), id.end(), ::isdigit) && !id.empty() && !run_ids.insert(id).second)
      continue;
    std::map<std::string, Outcome> in_run;  // a test's best outcome in this run
    std::map<std::string, std::string> reason;
    bool any = false;
    for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
      if (!e.is_regular_file() || e.path().filename() != "junit.xml") continue;
      any = true;
      const std::string folder = e.path().parent_path().string();
      for (const auto& r : expand_shards(read_junit(e.path().string()), folder)) {
        auto it = in_run.find(r.name);
        if (it == in_run.end() || it->second == Outcome::kSkip) in_run[r.name] = r.outcome;
        if (r.outcome == Outcome::kSkip && !reason.count(r.name)) reason[r.name] = r.message;
      }
    }
    if (!any) continue;
    ++runs_read;
    for (const auto& [name, outcome] : in_run) {
      Seen& s = seen[name];
      ++s.runs;
      s.ran = s.ran || outcome != Outcome::kSkip;
      if (s.reason.empty() && reason.count(name)) s.reason = reason[name];
    }
  }
  tests_seen = static_cast<int>(seen.size());
  std::vector<DormantTest> out;
  for (const auto& [name, s] : seen)
    if (!s.ran) out.push_back({name, s.reason, s.runs});
  return out;
}

}  // namespace dsv4::nightly

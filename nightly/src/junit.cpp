// JUnit XML reader (pugixml; CTest's and GoogleTest's files) and the families x checks table.
#include "junit.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>

#include <pugixml.hpp>

namespace dsv4::nightly {

namespace {

std::string normalized(const std::string& s) {
  std::string out;
  for (char c : s)
    if (isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(tolower(c));
  return out;
}

std::string cell(const Counts& c) {
  if (c.total() == 0) return "—";
  const std::string frac = std::to_string(c.pass) + "/" + std::to_string(c.total());
  if (c.fail > 0) return "❌ " + frac;
  if (c.skip == c.total()) return "⏭ " + std::to_string(c.skip) + " skipped";
  if (c.skip > 0) return "✅ " + frac + " (" + std::to_string(c.skip) + " skipped)";
  return "✅ " + frac;
}

}  // namespace

std::vector<TestResult> parse_junit(const std::string& xml) {
  pugi::xml_document doc;
  const pugi::xml_parse_result ok = doc.load_buffer(xml.data(), xml.size());
  if (!ok)
    throw std::runtime_error(std::string("malformed JUnit XML at byte ") +
                             std::to_string(ok.offset) + ": " + ok.description());
  std::vector<TestResult> out;
  // Every <testcase>, wherever it sits (<testsuites>/<testsuite> nesting differs by writer).
  for (const pugi::xpath_node& n : doc.select_nodes("//testcase")) {
    const pugi::xml_node tc = n.node();
    TestResult r;
    const std::string name = tc.attribute("name").value(), cls = tc.attribute("classname").value();
    r.name = (!cls.empty() && cls != name) ? cls + "." + name : name;
    const std::string status = tc.attribute("status").value(),
                      result = tc.attribute("result").value();
    if (status == "notrun" || status == "disabled" || result == "skipped" || result == "suppressed")
      r.outcome = Outcome::kSkip;
    for (const pugi::xml_node child : tc.children()) {
      const std::string tag = child.name();
      if (tag == "failure" || tag == "error") {
        r.outcome = Outcome::kFail;
        if (r.message.empty()) r.message = child.attribute("message").value();
      } else if (tag == "skipped") {
        if (r.outcome != Outcome::kFail) r.outcome = Outcome::kSkip;
        if (r.message.empty()) r.message = child.attribute("message").value();
      } else if (tag == "system-out") {
        r.output = child.child_value();
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<TestResult> read_junit(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read JUnit file '" + path + "'");
  std::ostringstream buf;
  buf << in.rdbuf();
  try {
    return parse_junit(buf.str());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

namespace {

// The tests a shard's output shows: "[ RUN      ] X" then "[       OK ] X", "[  FAILED  ] X" or
// "[  SKIPPED ] X"; a test started but never ended failed (the shard stopped in it).
std::vector<TestResult> tests_from_output(const std::string& exe, const std::string& output,
                                          const std::string& why) {
  std::vector<TestResult> out;
  std::string running;
  std::istringstream in(output);
  const std::string run = "[ RUN      ] ";
  const std::map<std::string, Outcome> ends = {{"[       OK ] ", Outcome::kPass},
                                               {"[  FAILED  ] ", Outcome::kFail},
                                               {"[  SKIPPED ] ", Outcome::kSkip}};
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(run, 0) == 0) {
      running = line.substr(run.size());
      continue;
    }
    if (running.empty()) continue;
    for (const auto& [mark, outcome] : ends)
      if (line.rfind(mark + running, 0) == 0) {
        out.push_back({exe + "/" + running, outcome,
                       outcome == Outcome::kFail ? "failed (no GoogleTest XML: " + why + ")" : "",
                       ""});
        running.clear();
        break;
      }
  }
  if (!running.empty())
    out.push_back(
        {exe + "/" + running, Outcome::kFail, "the shard stopped in this test: " + why, ""});
  return out;
}

}  // namespace

std::vector<TestResult> expand_shards(const std::vector<TestResult>& ctest,
                                      const std::string& junit_dir,
                                      const std::string& collect_dir) {
  namespace fs = std::filesystem;
  static const std::regex shard(R"(^(.+)/shard-[0-9]+-of-[0-9]+$)");
  static const std::regex named(
      R"(\[dsv4\] shard [0-9]+ of [0-9]+ of .*; GoogleTest XML: ([^\n]+))");
  std::vector<TestResult> out;
  for (const auto& r : ctest) {
    std::smatch m;
    if (!std::regex_match(r.name, m, shard)) {
      out.push_back(r);
      continue;
    }
    const std::string exe = m[1].str();
    std::vector<fs::path> places;
    if (std::smatch x; std::regex_search(r.output, x, named)) places.emplace_back(x[1].str());
    places.push_back(fs::path(junit_dir) / "junit" / (r.name + ".xml"));
    std::vector<TestResult> tests;
    bool read = false;
    for (const auto& p : places) {
      std::error_code ec;
      if (!fs::is_regular_file(p, ec)) continue;
      try {
        tests = read_junit(p.string());
      } catch (const std::runtime_error&) {
        continue;
      }
      read = true;
      if (!collect_dir.empty()) {
        const fs::path to = fs::path(collect_dir) / "junit" / (r.name + ".xml");
        fs::create_directories(to.parent_path(), ec);
        if (!fs::equivalent(p, to, ec))
          fs::copy_file(p, to, fs::copy_options::overwrite_existing, ec);
      }
      break;
    }
    if (read) {
      for (auto& t : tests) t.name = exe + "/" + t.name;
    } else {
      tests = tests_from_output(exe, r.output,
                                r.message.empty() ? "the shard did not finish" : r.message);
    }
    if (tests.empty()) {
      out.push_back(r);
      continue;
    }
    bool failed = false;
    for (auto& t : tests) {
      failed = failed || t.outcome == Outcome::kFail;
      out.push_back(std::move(t));
    }
    if (r.outcome == Outcome::kFail && !failed) {
      TestResult s = r;
      s.message = "the shard failed though none of its tests did" +
                  (r.message.empty() ? "" : " (" + r.message + ")") + ": see its output";
      out.push_back(std::move(s));
    }
  }
  return out;
}

std::string family_of(const std::string& test, const std::vector<std::string>& families) {
  const std::string t = normalized(test);
  std::string best = "other";
  size_t best_len = 0;
  for (const auto& f : families) {
    const std::string key = normalized(f);
    if (!key.empty() && key.size() > best_len && t.find(key) != std::string::npos) {
      best = f;
      best_len = key.size();
    }
  }
  return best;
}

std::string check_of(const std::string& test,
                     const std::vector<std::pair<std::string, std::string>>& checks) {
  for (const auto& [name, pattern] : checks)
    if (std::regex_search(test, std::regex(pattern, std::regex::ECMAScript | std::regex::icase)))
      return name;
  return "other";
}

std::string summary_table(const std::string& title, const std::vector<TestResult>& results,
                          const Ctest& spec) {
  std::vector<std::string> rows = spec.families, cols;
  for (const auto& c : spec.checks) cols.push_back(c.first);
  std::map<std::string, std::map<std::string, Counts>> grid;
  Counts all;
  bool other_row = false, other_col = false;
  std::vector<const TestResult*> failed;
  for (const auto& r : results) {
    const std::string f = family_of(r.name, spec.families), c = check_of(r.name, spec.checks);
    other_row = other_row || f == "other";
    other_col = other_col || c == "other";
    Counts& k = grid[f][c];
    Counts* both[] = {&k, &all};
    for (Counts* x : both) {
      if (r.outcome == Outcome::kPass) ++x->pass;
      if (r.outcome == Outcome::kFail) ++x->fail;
      if (r.outcome == Outcome::kSkip) ++x->skip;
    }
    if (r.outcome == Outcome::kFail) failed.push_back(&r);
  }
  if (other_row) rows.push_back("other");
  if (other_col) cols.push_back("other");

  std::ostringstream o;
  o << "### " << title << ": " << all.total() << " tests, " << all.pass << " passed, " << all.fail
    << " failed, " << all.skip << " skipped\n\n";
  o << "| family |";
  for (const auto& c : cols) o << " " << c << " |";
  o << " all |\n|---|";
  for (size_t i = 0; i <= cols.size(); ++i) o << "---|";
  o << "\n";
  for (const auto& f : rows) {
    Counts row;
    o << "| " << f << " |";
    for (const auto& c : cols) {
      const Counts k = grid[f][c];
      row.pass += k.pass;
      row.fail += k.fail;
      row.skip += k.skip;
      o << " " << cell(k) << " |";
    }
    o << " " << (row.total() == 0 ? "no tests" : cell(row)) << " |\n";
  }
  if (!failed.empty()) {
    o << "\nFailed tests:\n";
    const size_t shown = std::min<size_t>(failed.size(), 50);
    for (size_t i = 0; i < shown; ++i) o << "- `" << failed[i]->name << "`\n";
    if (failed.size() > shown) o << "- ... and " << failed.size() - shown << " more\n";
  }
  return o.str();
}

}  // namespace dsv4::nightly

// dsv4-nightly sanitize: the GPU tests of a cuda build under compute-sanitizer (memcheck,
// racecheck, ...), one process per test executable, with counts and findings in a report.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "junit.hpp"
#include "process.hpp"
#include "run_suite.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace dsv4::nightly {

namespace {

struct Group {
  std::string exe;
  std::string cwd;
  std::vector<std::string> filters;  // GoogleTest names from --gtest_filter=
  bool whole = false;                // shards of the executable: every test of it, unfiltered
  std::vector<std::string> command;  // a test that is not a GoogleTest case: run as it is
};

struct ExeResult {
  std::string name;
  Counts counts;
  int errors = -1;  // from "ERROR SUMMARY: N errors"; -1 when the log has none
  std::string exit;
  std::vector<std::string> findings;
  bool ok = false;
};

std::string locate_sanitizer(const std::string& given) {
  if (!given.empty()) return find_program(given, "");
  const char* path = std::getenv("PATH");
  std::string p = find_program("compute-sanitizer", path ? path : "");
  if (!p.empty()) return p;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* h = std::getenv(var); h && *h) {
      p = find_program(std::string(h) + "/bin/compute-sanitizer", "");
      if (!p.empty()) return p;
    }
  return find_program("/usr/local/cuda/bin/compute-sanitizer", "");
}

// Headline lines of compute-sanitizer's report ("========= Invalid __global__ read ...") and its
// summaries: "ERROR SUMMARY: N errors" (memcheck, initcheck, synccheck) and racecheck's
// "RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)".
void scan_log(const std::string& path, ExeResult& r) {
  static const std::regex error_summary(R"(ERROR SUMMARY: ([0-9]+) error)");
  static const std::regex race_summary(
      R"(RACECHECK SUMMARY: .*\(([0-9]+) errors?, ([0-9]+) warnings?\))");
  std::map<std::string, int> seen;
  std::vector<std::string> order;
  std::istringstream in(read_text(path));
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, error_summary)) {
      r.errors = std::max(r.errors, 0) + std::stoi(m[1].str());
      continue;
    }
    if (std::regex_search(line, m, race_summary)) {
      r.errors = std::max(r.errors, 0) + std::stoi(m[1].str());
      if (std::stoi(m[2].str()) > 0) order.push_back("racecheck: " + m[2].str() + " warnings");
      continue;
    }
    const std::string mark = "========= ";
    if (line.rfind(mark, 0) != 0 || line.size() <= mark.size() || line[mark.size()] == ' ')
      continue;
    const std::string head = line.substr(mark.size());
    if (head.rfind("COMPUTE-SANITIZER", 0) == 0 || head.find(" SUMMARY: ") != std::string::npos)
      continue;
    if (seen[head]++ == 0) order.push_back(head);
  }
  for (const auto& h : order)
    r.findings.push_back(h + (seen[h] > 1 ? " (x" + std::to_string(seen[h]) + ")" : ""));
}

}  // namespace

int sanitize(const SanitizeOptions& opt) {
  const std::string out =
      fs::absolute(opt.out.empty() ? opt.build_dir + "/sanitizer/" + opt.tool : opt.out)
          .lexically_normal()
          .string();
  fs::create_directories(out);
  const std::string sanitizer = locate_sanitizer(opt.sanitizer);
  if (sanitizer.empty()) {
    std::cerr << "sanitize: compute-sanitizer not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)"
                 "; it ships with the CUDA toolkit\n";
    return kCouldNotRun;
  }

  // The tests: what ctest would run with this label.
  const std::string listing = out + "/tests.json";
  fs::remove(listing);
  {
    Process p = Process::start(
        {{"ctest", "--test-dir", opt.build_dir, "-L", opt.label, "--show-only=json-v1"},
         {},
         listing,
         false,
         ""});
    auto rc = p.wait(120);
    if (!rc || *rc != 0) {
      if (!rc) p.stop(5);
      std::cerr << "sanitize: listing the tests with ctest failed (see " << listing << ")\n";
      return kCouldNotRun;
    }
  }
  json tests;
  try {
    tests = json::parse(read_text(listing)).at("tests");
  } catch (const std::exception& e) {
    std::cerr << "sanitize: cannot read ctest's test list " << listing << ": " << e.what() << "\n";
    return kCouldNotRun;
  }
  std::map<std::string, Group> groups;
  std::vector<Group> singles;
  for (const auto& t : tests) {
    if (!t.contains("command") || t["command"].empty()) continue;
    const auto cmd = t["command"].get<std::vector<std::string>>();
    std::string cwd;
    bool shard = false;  // cmake/Dsv4GpuTests.cmake's shards: GTEST_TOTAL_SHARDS in ENVIRONMENT
    for (const auto& prop : t.value("properties", json::array())) {
      if (prop.value("name", "") == "WORKING_DIRECTORY") cwd = prop["value"].get<std::string>();
      if (prop.value("name", "") == "ENVIRONMENT" && prop["value"].is_array())
        for (const auto& v : prop["value"])
          shard =
              shard || (v.is_string() && v.get<std::string>().rfind("GTEST_TOTAL_SHARDS=", 0) == 0);
    }
    std::string filter;
    for (const auto& a : cmd)
      if (a.rfind("--gtest_filter=", 0) == 0) filter = a.substr(15);
    if (filter.empty() && !shard) {
      singles.push_back({cmd[0], cwd, {}, false, cmd});
      continue;
    }
    Group& g = groups[cmd[0]];
    g.exe = cmd[0];
    g.cwd = cwd;
    if (shard)
      g.whole = true;
    else
      g.filters.push_back(filter);
  }
  std::vector<Group> all;
  for (auto& [exe, g] : groups) all.push_back(g);
  all.insert(all.end(), singles.begin(), singles.end());
  if (all.empty()) {
    std::cerr << "sanitize: no test carries the label '" << opt.label << "' in " << opt.build_dir
              << "\n";
    return kCouldNotRun;
  }

  std::vector<ExeResult> results;
  Counts total;
  int total_errors = 0;
  std::set<std::string> used;
  for (const auto& g : all) {
    ExeResult r;
    r.name = fs::path(g.exe).filename().string();
    std::string base = r.name;
    for (int i = 2; used.count(base); ++i) base = r.name + "-" + std::to_string(i);
    used.insert(base);
    const std::string xml = out + "/" + base + ".xml", slog = out + "/" + base + ".sanitizer.log";
    fs::remove(xml);
    fs::remove(slog);
    std::vector<std::string> argv = {sanitizer, "--tool",        opt.tool, "--error-exitcode",
                                     "86",      "--print-limit", "200",    "--log-file",
                                     slog};
    argv.insert(argv.end(), opt.extra_args.begin(), opt.extra_args.end());
    if (g.whole) {
      argv.insert(argv.end(), {g.exe, "--gtest_output=xml:" + xml});
      if (!opt.gtest_filter.empty()) argv.push_back("--gtest_filter=" + opt.gtest_filter);
    } else if (g.command.empty()) {
      std::string filter;
      for (const auto& f : g.filters) filter += (filter.empty() ? "" : ":") + f;
      // A subset of exclusions only ("-A:B") applies to the named tests as well.
      if (opt.gtest_filter.rfind('-', 0) == 0) filter += opt.gtest_filter;
      argv.insert(argv.end(), {g.exe, "--gtest_filter=" + filter, "--gtest_output=xml:" + xml});
    } else {
      argv.insert(argv.end(), g.command.begin(), g.command.end());
    }
    std::cerr << "sanitize: " << opt.tool << " " << r.name << " ("
              << (g.whole ? "every" : std::to_string(g.command.empty() ? g.filters.size() : 1))
              << " tests)" << std::endl;
    Process p = Process::start(
        {argv, {{"DSV4_SANITIZE", opt.tool}}, out + "/" + base + ".log", false, g.cwd});
    auto rc = p.wait(opt.timeout_s);
    if (!rc) p.stop(10);
    r.exit = rc ? "exit " + std::to_string(*rc)
                : "timed out after " + std::to_string(opt.timeout_s) + " s";
    scan_log(slog, r);
    if (fs::exists(xml)) {
      for (const auto& t : read_junit(xml)) {
        if (t.outcome == Outcome::kPass) ++r.counts.pass;
        if (t.outcome == Outcome::kFail) ++r.counts.fail;
        if (t.outcome == Outcome::kSkip) ++r.counts.skip;
      }
    } else if (!g.command.empty() && rc) {
      (*rc == 0 ? r.counts.pass : r.counts.fail) += 1;
    } else {
      r.findings.push_back("no test report: the executable did not finish (" + r.exit + ")");
      r.counts.fail += std::max<int>(1, static_cast<int>(g.filters.size()));
    }
    r.ok = rc && (*rc == 0) && r.errors <= 0 && r.counts.fail == 0;
    total.pass += r.counts.pass;
    total.fail += r.counts.fail;
    total.skip += r.counts.skip;
    total_errors += std::max(r.errors, 0);
    results.push_back(r);
  }

  std::ostringstream md;
  md << "### compute-sanitizer " << opt.tool << ", label " << opt.label << ": " << results.size()
     << " executables, " << total.total() << " tests: " << total.pass << " passed, " << total.fail
     << " failed, " << total.skip << " skipped; " << total_errors << " sanitizer errors\n\n"
     << "| executable | passed | failed | skipped | sanitizer errors | exit |\n"
     << "|---|---|---|---|---|---|\n";
  for (const auto& r : results)
    md << "| " << r.name << " | " << r.counts.pass << " | " << r.counts.fail << " | "
       << r.counts.skip << " | " << (r.errors < 0 ? "no summary" : std::to_string(r.errors))
       << " | " << r.exit << " |\n";
  bool any = false;
  for (const auto& r : results)
    for (size_t i = 0; i < r.findings.size() && i < 20; ++i) {
      if (!any) md << "\nFindings:\n";
      any = true;
      md << "- " << r.name << ": " << r.findings[i] << "\n";
    }
  write_text(out + "/summary.md", md.str());
  std::cout << md.str() << "\nreports and logs: " << out << "\n";
  if (const char* gs = std::getenv("GITHUB_STEP_SUMMARY"); gs && *gs) append_text(gs, md.str());
  if (total.pass + total.fail == 0) {
    std::cerr << "sanitize: no test ran (every test skipped: is a GPU visible?)\n";
    return kCouldNotRun;
  }
  const bool clean = std::all_of(results.begin(), results.end(), [](auto& r) { return r.ok; });
  return clean ? kPass : kGateFailed;
}

}  // namespace dsv4::nightly

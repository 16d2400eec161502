// dsv4-bench's command line (cxxopts): plan, draw, peers, measure, judge, report.
#include "dsv4/bench/cli.hpp"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
// A --shape SPEC is one filter of comma-separated words: vector values are not split.
#define CXXOPTS_VECTOR_DELIMITER '\0'
#include <cxxopts.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "dsv4/bench/measure.hpp"
#include "dsv4/bench/results.hpp"
#include "dsv4/bench/timing.hpp"
#include "dsv4/fixtures/case_file.hpp"
#include "dsv4/fixtures/kernel_case.hpp"

#include "dsv4_commit.hpp"  // DSV4_SOURCE_COMMIT, written at build time (bench/CMakeLists.txt)

#ifndef DSV4_SOURCE_DIR
#define DSV4_SOURCE_DIR "."
#endif

namespace dsv4::bench {

namespace {

constexpr const char* kUsage =
    "usage: dsv4-bench [--family F]... [--shape SPEC]... [--torch | --peers FILE] [--out DIR]\n"
    "                  [--seed N] [--reps N] [--jobs N] [--python EXE] [--peer-script PY]\n"
    "                  [--peer-timeout S]\n"
    "       dsv4-bench --list [--family F]... [--shape SPEC]...\n"
    "       dsv4-bench --draw DIR [--family F]... [--shape SPEC]...\n"
    "Draws each benchmark row through its family's adapter, checks it against the reference,\n"
    "times it beside the copy ceiling and the PyTorch peers (--torch runs bench/torch_peers.py\n"
    "on the same case files), and writes DIR/dsv4-bench.{json,md} and DIR/dsv4-bench.rows.jsonl.\n"
    "A --shape SPEC selects the rows having every word of SPEC (\"B=64,v41\").\n"
    "Exit codes: 0 every target met, 1 a target missed or an output wrong, 2 bad usage,\n"
    "3 could not run (no GPU, no row measured, a target not judged).\n";

int usage(std::ostream& err, const std::string& why) {
  err << "dsv4-bench: " << why << "\n" << kUsage;
  return 2;
}

std::vector<std::string> split_list(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const std::string& v : values) {
    std::stringstream ss(v);
    std::string item;
    while (std::getline(ss, item, ','))
      if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool parse_count(const std::string& v, uint64_t& n) {
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  return !v.empty() && ec == std::errc() && end == v.data() + v.size();
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string commit() {
  const char* c = std::getenv("DSV4_COMMIT");
  return c && *c ? c : DSV4_SOURCE_COMMIT;
}

}  // namespace

int main_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  cxxopts::Options o("dsv4-bench", "The kernel families' benchmark rows");
  o.add_options()("family", "a family (repeatable, or comma-separated)",
                  cxxopts::value<std::vector<std::string>>())(
      "shape", "rows having every word of SPEC (repeatable)",
      cxxopts::value<std::vector<std::string>>())("list", "list the rows and their targets")(
      "draw", "write the rows' case files into DIR and stop", cxxopts::value<std::string>())(
      "torch", "run the PyTorch peers on the rows' case files")(
      "peers", "the PyTorch peers' JSON Lines of an earlier run", cxxopts::value<std::string>())(
      "python", "the Python that runs the peers", cxxopts::value<std::string>())(
      "peer-script", "the peers' script", cxxopts::value<std::string>())(
      "peer-timeout", "seconds the peers may take (0: no limit)", cxxopts::value<std::string>())(
      "rows-dir", "where --torch writes the rows' case files (default DIR/rows)",
      cxxopts::value<std::string>())("out", "the results directory", cxxopts::value<std::string>())(
      "seed", "the seed rows are drawn from", cxxopts::value<std::string>())(
      "reps", "timed samples per row", cxxopts::value<std::string>())(
      "jobs", "threads drawing the rows and running the references", cxxopts::value<std::string>())(
      "h,help", "print this help")("rest", "", cxxopts::value<std::vector<std::string>>());
  o.parse_positional({"rest"});
  cxxopts::ParseResult r;
  try {
    r = o.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    return usage(err, e.what());
  }
  if (r.count("help")) {
    out << kUsage;
    return 0;
  }
  if (r.count("rest"))
    return usage(err, "unexpected argument '" + r["rest"].as<std::vector<std::string>>()[0] + "'");
  if (r.count("torch") && r.count("peers"))
    return usage(err, "--torch and --peers exclude each other");
  Selection sel;
  if (r.count("family")) sel.families = split_list(r["family"].as<std::vector<std::string>>());
  if (r.count("shape")) sel.shapes = r["shape"].as<std::vector<std::string>>();
  uint64_t seed = fx::case_seeds().front(), reps = 30, jobs = 0, peer_timeout = 0;
  for (auto [flag, dst] : {std::pair{"seed", &seed},
                           {"reps", &reps},
                           {"jobs", &jobs},
                           {"peer-timeout", &peer_timeout}})
    if (r.count(flag)) {
      const std::string v = r[flag].as<std::string>();
      if (!parse_count(v, *dst) || (*dst == 0 && std::string(flag) == "reps"))
        return usage(err, std::string("--") + flag + " " + v + " is not a " +
                              (std::string(flag) == "seed" ? "non-negative" : "positive") +
                              " integer");
    }
  std::vector<PlannedRow> rows;
  try {
    rows = plan(sel);
  } catch (const std::invalid_argument& e) {  // PlanError, or a filter's VarsError
    return usage(err, e.what());
  }
  if (r.count("list")) {
    out << describe(rows);
    return 0;
  }
  if (r.count("draw")) {
    const std::string dir = r["draw"].as<std::string>();
    const std::vector<Prepared> prepared = prepare(rows, seed, unsigned(jobs), false);
    int failed = 0;
    for (const Prepared& p : prepared)
      if (!p.error.empty()) {
        err << "dsv4-bench: " << p.planned.id << ": " << p.error << "\n";
        ++failed;
      }
    try {
      for (const std::string& path : write_cases(prepared, dir)) out << path << "\n";
    } catch (const std::exception& e) {
      err << "dsv4-bench: cannot write the cases into " << dir << ": " << e.what() << "\n";
      return 3;
    }
    return failed ? 3 : 0;
  }

  std::string why;
  if (!gpu::available(&why)) {
    err << "dsv4-bench: could not run: " << why << "\n";
    return 3;
  }
  const std::string dir = r.count("out") ? r["out"].as<std::string>() : "bench-out";
  try {
    std::filesystem::create_directories(dir);
  } catch (const std::exception& e) {
    err << "dsv4-bench: --out " << dir << ": " << e.what() << "\n";
    return 3;
  }
  const gpu::DeviceInfo d = gpu::device_info();
  RunInfo info{.device = d.name,
               .arch = d.arch,
               .backend = gpu::backend(),
               .driver = d.driver,
               .commit = commit(),
               .date = now_utc(),
               .compute_units = d.compute_units};
  for (int i = 0; i < argc; ++i) info.command += (i ? " " : "") + fx::shell_quoted(argv[i]);
  std::printf("dsv4-bench on %s (%s), %d compute units, backend %s, %s, commit %s\n",
              d.name.c_str(), d.arch.c_str(), d.compute_units, gpu::backend(), d.driver.c_str(),
              info.commit.c_str());
  std::fflush(stdout);

  std::vector<Prepared> prepared = prepare(rows, seed, unsigned(jobs), true);
  // Every row measured first, the GPU to itself (the peers, and what their compilers leave
  // running, come after), each row's figures streamed as it finishes.
  MeasureOptions mo;
  mo.reps = int(reps);
  mo.case_dir = dir + "/wrong";
  std::vector<Measured> results;
  results.reserve(prepared.size());
  {
    std::ofstream stream_rows(dir + "/dsv4-bench.rows.jsonl");
    gpu::StreamHandle s;
    for (size_t i = 0; i < prepared.size(); ++i) {
      results.push_back(measure(prepared[i], {}, s, mo));
      const Measured& m = results.back();
      stream_rows << row_json(m) << std::endl;  // flushed as measured
      std::printf("[%zu/%zu] %s: %s\n", i + 1, prepared.size(), m.planned.id.c_str(),
                  m.measured()
                      ? (fmt("%.2f us", m.us) + (m.launch.empty() ? "" : ", " + m.launch)).c_str()
                      : m.error.c_str());
      std::fflush(stdout);
    }
  }
  Peers peers;
  if (r.count("torch")) {
    const std::string py = r.count("python")            ? r["python"].as<std::string>()
                           : std::getenv("DSV4_PYTHON") ? std::getenv("DSV4_PYTHON")
                                                        : "python3";
    const std::string script = r.count("peer-script")
                                   ? r["peer-script"].as<std::string>()
                                   : std::string(DSV4_SOURCE_DIR) + "/bench/torch_peers.py";
    const std::string rows_dir =
        r.count("rows-dir") ? r["rows-dir"].as<std::string>() : dir + "/rows";
    try {
      write_cases(prepared, rows_dir);
      // A peer run cut short keeps the lines it wrote (the script flushes each case).
      const std::string runner =
          peer_timeout ? "timeout " + std::to_string(peer_timeout) + " " + fx::shell_quoted(py)
                       : fx::shell_quoted(py);
      peers = run_peers(runner, script, rows_dir, dir + "/peers.jsonl");
    } catch (const std::exception& e) {
      peers.error = e.what();
    }
  } else if (r.count("peers")) {
    try {
      peers = read_peers(r["peers"].as<std::string>());
    } catch (const std::exception& e) {
      return usage(err, std::string("--peers: ") + e.what());
    }
  } else {
    peers.error = "not run (pass --torch)";
  }
  info.peers_note = peers.error;
  info.matmul_tflops = peers.matmul_tflops;
  info.matmul_shape = peers.matmul_shape;
  if (!peers.error.empty()) std::printf("PyTorch peers: %s\n", peers.error.c_str());
  if (peers.matmul_tflops)
    std::printf("math ceiling: %.1f TFLOP/s (torch bf16 matmul %s)\n", *peers.matmul_tflops,
                peers.matmul_shape.c_str());

  // The targets judged in plan order (a row after the rows it compares with), one table a family.
  std::map<std::string, const Measured*> by_id;
  std::unique_ptr<Table> table;
  std::string family;
  for (Measured& m : results) {
    if (const Peer* peer = peers.find(m.planned.id)) m.peer = *peer;
    judge(m, by_id);
    by_id[m.planned.id] = &m;
    if (m.planned.family != family) {
      family = m.planned.family;
      std::printf("\n%s\n", family.c_str());
      table = std::make_unique<Table>(table_header(), family);
    }
    table->row(table_cells(m));
  }
  const std::string verdict = verdict_line(results);
  std::printf("\n%s\n", verdict.c_str());
  std::ofstream(dir + "/dsv4-bench.json") << to_json(info, results);
  std::ofstream(dir + "/dsv4-bench.md") << to_markdown(info, results);
  std::printf("results: %s/dsv4-bench.json, %s/dsv4-bench.md\n", dir.c_str(), dir.c_str());
  std::fflush(stdout);
  return exit_code(results);
}

}  // namespace dsv4::bench

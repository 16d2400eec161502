// serve-bench's outputs after a run: the result block on stdout, bench_serving's JSONL record
// (--output-file), report.json / report.md / junit.xml with gates, and requests.jsonl (--details).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/gates.hpp"
#include "serve_bench/serve_bench_run.hpp"

namespace dsv4::eval::serve {

// What the command line asked for beyond the run itself.
struct ServeBenchJob {
  BenchOptions bench;
  std::vector<Gate> gates;
  nlohmann::json labels = nlohmann::json::object();
  std::string out_dir = "serve-bench-out";
  std::string output_file;  // bench_serving's --output-file: one JSON line appended per run
  std::string request_rate_text = "inf";
  int64_t max_failed = 0;
  bool details = false;
  std::string command_line;
};

// The metric names gates may use, in report order (accept_length_rank<N> aside).
std::vector<std::string> serve_bench_metric_names();

// bench_serving's result record (its key names) for --output-file.
nlohmann::json bench_serving_record(const ServeBenchJob& job, const BenchOutcome& res);

// Prints the block, writes every output and returns the exit code (0 pass, 1 a gate failed,
// 3 more than max_failed requests failed or an output could not be written).
int report_serve_bench(const ServeBenchJob& job, const BenchOutcome& res);

// Writes the errored reports of a run that could not start or finish; returns exit 3.
int report_serve_bench_error(const ServeBenchJob& job, const std::string& error);

}  // namespace dsv4::eval::serve

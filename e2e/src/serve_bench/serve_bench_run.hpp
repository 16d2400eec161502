// serve-bench's run against a live SGLang server: reachability and key check, warmup, cache flush,
// the timed streaming request loop (request rate and/or concurrency limit) and the accept length
// after it (SGLang's: DP rank 0 of /server_info's internal_states, the first decode server behind
// a prefill/decode router; every rank kept beside it).
//
// Each request is POST /generate {"input_ids": [...], "sampling_params": {"temperature": 0,
// "max_new_tokens": L, "ignore_eos": true}, "stream": true}; every stream line is timestamped on
// arrival and the cumulative meta_info.completion_tokens of each chunk gives the tokens it carries.
// As in SGLang's bench_serving: warmup requests repeat the first prompt with at most 32 new tokens;
// a finite --request-rate spaces sends by a seeded Poisson process; --max-concurrency caps the
// requests in flight (a request waits for both its arrival time and a free slot); a request is not
// retried (a failure counts as failed, as bench_serving does). The cache is flushed after the
// warmup, so the accept length read from /server_info afterwards covers the timed requests only.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve_bench/serve_bench_metrics.hpp"
#include "serve_bench/serve_bench_workload.hpp"

namespace dsv4::eval::serve {

// Why serve-bench stopped early; exit_code is kExitUsage (2) or kExitCouldNotRun (3).
struct BenchError : std::runtime_error {
  BenchError(int code, const std::string& what) : std::runtime_error(what), exit_code(code) {}
  int exit_code;
};

struct BenchOptions {
  std::string url;           // server base URL
  WorkloadSpec workload;     // vocab_size from --tokenizer or --vocab-size (required)
  std::string vocab_source;  // where vocab_size came from, for the report
  std::string dataset_path;  // ShareGPT JSON for the `random` dataset
  std::optional<int64_t> max_concurrency;
  int64_t warmup_requests = 1;
  double request_timeout_s = 6 * 3600.0;  // per request, as bench_serving's session timeout
  bool flush_cache = true;
  bool progress = true;  // a line on stderr every few seconds (live on a terminal)
};

struct BenchOutcome {
  ServingMetrics metrics;
  BenchContext context;
  std::vector<RequestTiming> timings;  // one per request, in workload order
  std::vector<int64_t> requested_output;
  int64_t vocab_size = 0;
  std::string vocab_source;    // "--vocab-size" or "--tokenizer PATH"
  nlohmann::json server_info;  // /server_info after the run (bench_serving's record keeps it)
  int64_t warmup_ok = 0, warmup_failed = 0;
  bool flushed = false;
  std::string flush_note;             // why the flush did not happen
  int64_t short_outputs = 0;          // successful requests with fewer tokens than asked
  int64_t prompt_len_mismatches = 0;  // meta_info.prompt_tokens differs from the ids sent
  std::vector<std::optional<double>> accept_per_rank;
  std::string accept_note;          // "speculative decoding off", or why it could not be read
  std::vector<std::string> errors;  // distinct request errors, the first few
};

// The /generate body of one benchmark request.
std::string generate_body(const std::vector<int32_t>& input_ids, int64_t max_new_tokens);

// Reads a stream payload into the timer: returns "" or why the payload is unusable (an error
// chunk, not JSON, no completion_tokens). `prompt_tokens` receives meta_info.prompt_tokens when
// present. Finds the counts without parsing the whole (growing) cumulative text.
std::string read_chunk(const std::string& payload, double t, StreamTimer& timer,
                       int64_t* prompt_tokens);

// Runs the benchmark; throws BenchError when it cannot start (bad workload, too few open files,
// server unreachable or refusing the API key, every warmup request failed).
BenchOutcome run_serve_bench(const BenchOptions& opts);

}  // namespace dsv4::eval::serve

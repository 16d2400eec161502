// Serving-benchmark statistics: per-request stream timing and the bench_serving metric set.
//
// Definitions follow SGLang's python/sglang/bench_serving.py (its sglang /generate request path and
// calculate_metrics), restated here:
//  - TTFT: request sent -> first stream chunk that carries a generated token.
//  - E2E latency: request sent -> last line of the stream (the final data line or [DONE]).
//  - ITL: after the first token chunk, each chunk whose cumulative completion_tokens grew by n adds
//    n equal gaps of (chunk time - previous token chunk time) / n; a chunk adding no token adds no
//    gap and does not move the previous-chunk time. Gaps of all requests are pooled.
//  - TPOT: (E2E latency - TTFT) / (output_len - 1), one value per request with output_len > 1.
//  - Concurrency: sum of E2E latencies / benchmark duration.
//  - Throughputs: completed requests, input tokens, output tokens and input+output tokens per
//  second
//    of benchmark duration. Failed requests count for nothing.
//  - Peak output throughput: tokens bucketed by whole seconds since the earliest request start,
//    each token at its reconstructed time (start + TTFT, then + each ITL gap); the fullest bucket.
//    bench_serving counts the first chunk as one token; here it counts as the tokens it carries,
//    which is the same number whenever the first chunk carries one token (SGLang's case).
//  - Peak concurrent requests: per whole second, the requests in flight during it; the maximum.
//  - Summaries as numpy computes them: mean, median, population std (ddof 0), percentiles by
//    linear interpolation between order statistics; an empty sample summarises to zeros.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/percentile.hpp"

namespace dsv4::eval::serve {

// Timing of one streamed request. Seconds; start_s is on the run's monotonic clock, the others
// are relative to start_s.
struct RequestTiming {
  bool success = false;
  bool aborted = false;            // the server ended it with an HTTP-200 abort (a failure)
  int64_t prompt_len = 0;          // input tokens sent
  int64_t output_len = 0;          // last cumulative completion_tokens seen
  int64_t first_chunk_tokens = 0;  // tokens carried by the first token chunk
  double start_s = 0;
  double ttft_s = 0;
  double latency_s = 0;
  std::vector<double> itl_s;
  std::string error;
};

// Turns stream events into a RequestTiming as they arrive (times on one monotonic clock).
class StreamTimer {
 public:
  explicit StreamTimer(int64_t prompt_len);
  // A data line whose cumulative completion token count is `completion_tokens`, received at `t`.
  void on_tokens(double t, int64_t completion_tokens);
  // Any non-empty stream line (data or [DONE]) received at `t`: moves the E2E end.
  void on_line(double t);
  // The server aborted the request (HTTP 200, finish_reason abort): finish() reports a failure
  // marked aborted.
  void on_abort() { aborted_ = true; }
  // Forgets everything received (a new attempt of the request starts over).
  void reset();
  // Completes the timing of a request sent at `start_s`: success when at least one token arrived
  // and no error is given.
  RequestTiming finish(double start_s, const std::string& error = "") const;
  int64_t tokens() const { return output_len_; }

 private:
  int64_t prompt_len_;
  int64_t output_len_ = 0;
  int64_t first_chunk_tokens_ = 0;
  double first_token_t_ = 0;
  double last_token_t_ = 0;
  double last_line_t_ = 0;
  bool any_line_ = false;
  bool aborted_ = false;
  std::vector<double> itl_;
};

// mean, median, std, P90, P95, P99 and max of one sample, in the sample's unit.
struct Summary {
  size_t count = 0;
  double mean = 0, median = 0, std = 0, p90 = 0, p95 = 0, p99 = 0, max = 0;
};
Summary summarize(std::vector<double> values);

struct ServingMetrics {
  int64_t completed = 0;
  int64_t failed = 0;   // every request that did not succeed, aborted ones included
  int64_t aborted = 0;  // HTTP-200 aborts (finish_reason abort): failed, never successes
  int64_t total_input = 0;
  int64_t total_output = 0;
  double duration_s = 0;
  double request_throughput = 0;  // req/s
  double input_throughput = 0;    // tok/s
  double output_throughput = 0;   // tok/s
  double total_throughput = 0;    // tok/s, input + output
  double max_output_tokens_per_s = 0;
  int64_t max_concurrent_requests = 0;
  double concurrency = 0;
  Summary ttft_ms, tpot_ms, itl_ms, e2e_ms;
};

// The metric set over `requests` for a benchmark that lasted `duration_s` seconds.
ServingMetrics compute_metrics(const std::vector<RequestTiming>& requests, double duration_s);

// Context printed in the result block and stored in the JSON.
struct BenchContext {
  std::string backend = "sglang";
  std::optional<double> request_rate;      // empty: infinite
  std::optional<int64_t> max_concurrency;  // empty: not set
  std::optional<double> accept_length;  // DP rank 0's; empty: speculative decoding off or unknown
};

// The "Serving Benchmark Result" block in bench_serving's layout (40-column labels, 10-column
// values, 50-character rules; Mean, Median, P90, P95 and P99 of E2E, TTFT, TPOT and ITL, and Max
// ITL), ending with a newline. Failed and aborted requests get a row each when there are any.
// bench_serving's retokenized-output and input-text-token rows are left out: dsv4-eval does not
// re-encode the outputs.
std::string format_result_block(const ServingMetrics& m, const BenchContext& ctx);
// The block's label/value rows (rules left out), for report tables built from the metrics.
std::vector<std::pair<std::string, std::string>> result_block_rows(const ServingMetrics& m,
                                                                   const BenchContext& ctx);

// The metrics as a flat JSON object with bench_serving's key names (duration, completed,
// total_input_tokens, mean_ttft_ms, p99_itl_ms, ...) plus std/P90/P95 for every latency.
nlohmann::json metrics_to_json(const ServingMetrics& m);

}  // namespace dsv4::eval::serve

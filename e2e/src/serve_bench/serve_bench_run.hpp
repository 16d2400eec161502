// serve-bench's run against a live SGLang server: reachability and key check, warmup, cache flush,
// the timed streaming request loop (request rate and/or concurrency limit) and the accept length
// after it (SGLang's: DP rank 0 of /server_info's internal_states, the first decode server behind
// a prefill/decode router; every rank kept beside it).
//
// Each request is POST /generate {"text": str, "sampling_params": {"temperature": 0,
// "max_new_tokens": L, "ignore_eos": true}, "stream": true}, bench_serving's default form: the
// drawn ids shortened by the tokenizer's special tokens and decoded, special tokens kept
// (transformers' decode). With --tokenizer (a byte-level BPE tokenizer.json) both come from that
// tokenizer here, as bench_serving decodes with the user's tokenizer, and no server endpoint is
// needed; otherwise (or with --server-tokenizer) from the server: the length of its /v1/tokenize
// of "" with special tokens, and its POST /v1/detokenize {"tokens": [[...]],
// "skip_special_tokens": false}. With --tokenize-prompt the body carries "input_ids" instead, the
// drawn lengths exactly. The input
// tokens counted are the ids decoded or sent (bench_serving's prompt_len); the server's
// meta_info.prompt_tokens is compared with it plus the special tokens. Every stream line is
// timestamped on arrival and the cumulative meta_info.completion_tokens of each chunk gives the
// tokens it carries. As in SGLang's bench_serving: warmup requests repeat the first prompt with at
// most 32 new tokens; a finite --request-rate spaces sends by a seeded Poisson process;
// --max-concurrency caps the requests in flight (a request waits for both its arrival time and a
// free slot); a request is not retried (a failure counts as failed, as bench_serving does; an
// HTTP-200 abort, finish_reason {"type": "abort"}, is a failure counted as aborted). The cache is
// flushed after the warmup (bench_serving's --flush-cache), so the accept length read from
// /server_info afterwards covers the timed requests only. --profile brackets the timed requests
// with the server's POST /start_profile (num_steps with --profile-num-steps) and /stop_profile.
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
  // Every other request (tokenizer endpoints, flush, /server_info, profiler), per attempt:
  // --timeout when given; unset, 60 s (600 s for /stop_profile, which writes the trace first).
  std::optional<double> control_timeout_s;
  bool flush_cache = true;
  bool tokenize_prompt = false;  // send input_ids (bench_serving's --tokenize-prompt), not text
  bool progress = true;          // a line on stderr every few seconds (live on a terminal)
  // --tokenizer: decode text prompts with this tokenizer.json here (byte-level BPE); empty, or
  // server_tokenizer, or a tokenizer that is not byte-level: the server's /v1/detokenize.
  std::string tokenizer_path;
  bool server_tokenizer = false;
  bool profile = false;                      // POST /start_profile before the timed requests
  std::optional<int64_t> profile_num_steps;  // its num_steps (the server then stops by itself)
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
  int64_t prompt_len_mismatches = 0;  // meta_info.prompt_tokens differs from the ids sent (plus
                                      // the special tokens when sent as text)
  int64_t special_tokens = 0;         // text form: the tokenizer's special tokens per prompt
  std::string prompt_form;            // how prompts were built and sent (text decoded by whom, or
                                      // input_ids)
  std::string profile_note;           // what the profiler endpoints answered (--profile)
  std::string encode_note;            // random: who encoded the ShareGPT text
  std::vector<std::optional<double>> accept_per_rank;
  std::string accept_note;          // "speculative decoding off", or why it could not be read
  std::vector<std::string> errors;  // distinct request errors, the first few
  std::string interrupted;  // a signal stopped the timed requests: what was sent, what finished
};

// The /generate body of one benchmark request: "text" when req.as_text, else "input_ids".
std::string generate_body(const BenchRequest& req, int64_t max_new_tokens);

// Reads a stream payload into the timer: returns "" or why the payload is unusable (an error
// chunk, not JSON, no completion_tokens, or an HTTP-200 abort: finish_reason {"type": "abort"},
// which also marks the timer aborted). `prompt_tokens` receives meta_info.prompt_tokens when
// present. Finds the counts without parsing the whole (growing) cumulative text.
std::string read_chunk(const std::string& payload, double t, StreamTimer& timer,
                       int64_t* prompt_tokens);

// Runs the benchmark; throws BenchError when it cannot start (bad workload, too few open files,
// server unreachable or refusing the API key, every warmup request failed).
BenchOutcome run_serve_bench(const BenchOptions& opts);

}  // namespace dsv4::eval::serve

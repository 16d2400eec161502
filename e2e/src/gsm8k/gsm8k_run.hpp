// The GSM8K evaluation engine behind `dsv4-eval gsm8k`: prompts, concurrent requests, streamed
// results, resume, metrics, gates and reports.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "http/server_api.hpp"
#include "report/gates.hpp"

namespace dsv4::eval {

struct Gsm8kConfig {
  std::string url;  // base URL, normalised
  Api api = Api::kSglang;
  std::string model;      // OpenAI "model"; empty: the first id of /v1/models
  std::string data_path;  // local GSM8K JSONL; empty: data_url through the cache
  std::string data_url;
  std::string data_sha256;  // checked for downloads (and for data_path when set explicitly)
  std::string cache_dir;
  std::string shots_from;       // shots file; empty: the data file
  size_t num_questions = 1319;  // 0: every question in the file
  size_t num_shots = 5;
  int parallel = 64;
  size_t max_new_tokens = 512;
  double temperature = 0;
  std::vector<std::string> stops;
  bool stream = false;
  std::optional<bool> thinking;  // chat: chat_template_kwargs thinking switch
  // bench-sglang: benchmark/gsm8k's questions (the first N, shots included) and rule;
  // simple-eval: simple_eval_gsm8k's (the N after the shots, sign and decimals kept, no stop cut).
  bool simple_eval = false;
  std::string result_file;  // append bench_sglang's result line here
  bool incremental_stream = false;
  std::vector<Gate> gates;
  std::string out_dir;
  bool resume = false;
  bool overwrite = false;               // replace the run already in out_dir
  bool allow_changed_settings = false;  // resume although settings.json records other settings
  double timeout_s = 600;
  int retries = 3;
  double backoff_s = 0.5;
  size_t max_failed = 0;     // more final request failures than this: exit 3
  double stop_grace_s = 10;  // a run that stops lets the requests in flight finish this long
  double progress_interval_s = 30;
  bool flush_cache = true;
  std::string command_line;
};

// Metric names a gate may use (plus accept_length_rank<N>).
const std::vector<std::string>& gsm8k_metric_names();
bool is_gsm8k_metric(const std::string& name);

// Runs the evaluation and writes results.jsonl, settings.json, server_accept.jsonl, report.json,
// report.md, junit.xml into out_dir (refusing, exit 2, a folder that holds another run unless
// resume or overwrite).
// Returns an Exit code (command.hpp); problems are explained on stderr and in the reports.
int run_gsm8k(const Gsm8kConfig& cfg);

}  // namespace dsv4::eval

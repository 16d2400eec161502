// `dsv4-eval gsm8k`: command-line options of the GSM8K evaluation.
#include <cxxopts.hpp>

#include <cstdio>

#include "commands/command.hpp"
#include "gsm8k/gsm8k_data.hpp"
#include "gsm8k/gsm8k_run.hpp"
#include "http/download.hpp"
#include "http/http_client.hpp"
#include "http/process_setup.hpp"

namespace dsv4::eval {
namespace {

int gsm8k_main(int argc, char** argv) {
  cxxopts::Options o("dsv4-eval gsm8k",
                     "GSM8K k-shot evaluation of a live SGLang (or OpenAI-compatible) server, "
                     "behind gates.\nExit: 0 gates pass, 1 a gate failed, 2 bad usage/config/data, "
                     "3 could not run.");
  // clang-format off
  o.add_options()
    ("url", "server base URL (else --host and --port)", cxxopts::value<std::string>()->default_value("http://127.0.0.1:30000"))
    ("host", "server host, as bench_sglang's --host (a scheme may lead)", cxxopts::value<std::string>()->default_value("http://127.0.0.1"))
    ("port", "server port, as bench_sglang's --port", cxxopts::value<long long>()->default_value("30000"))
    ("api-key", "bearer token for the server's requests, sent to its origin only and written as *** everywhere (default: $OPENAI_API_KEY)", cxxopts::value<std::string>())
    ("backend", "bench_sglang's --backend: srt (the server's native /generate, the same as --api sglang)", cxxopts::value<std::string>())
    ("thinking", "chat: thinking on or off through chat_template_kwargs (default: the template's)", cxxopts::value<std::string>())
    ("result-file", "append bench_sglang's JSON result line to this file", cxxopts::value<std::string>())
    ("protocol", "bench-sglang (benchmark/gsm8k) or simple-eval (SGLang's run_eval --eval-name gsm8k: the questions after the shots, sign and decimals kept; chat without stops, or with --api openai-completions its completion mode with the stops; --parallel 512 and --max-new-tokens 2048 unless given, run_eval's --num-threads and --max-tokens)", cxxopts::value<std::string>()->default_value("bench-sglang"))
    ("api", "sglang | openai-completions | openai-chat", cxxopts::value<std::string>()->default_value("sglang"))
    ("model", "model name for OpenAI APIs (default: first id of /v1/models)", cxxopts::value<std::string>())
    ("data-path", "local GSM8K JSONL, as bench_sglang's --data-path (default: the canonical test set, downloaded and cached)", cxxopts::value<std::string>())
    ("data", "the same as --data-path", cxxopts::value<std::string>())
    ("data-url", "URL of the test set", cxxopts::value<std::string>()->default_value(gsm8k::kCanonicalUrl))
    ("data-sha256", "expected sha256 of the downloaded test set (checked for --data too when given)", cxxopts::value<std::string>())
    ("cache-dir", "download cache", cxxopts::value<std::string>())
    ("shots-from", "take the shots from this file instead of the data's first lines", cxxopts::value<std::string>())
    ("num-questions", "questions to ask, the data's first N (0: all); bench_sglang's default is 200, this one the whole test set the nightly gates are set on", cxxopts::value<long long>()->default_value("1319"))
    ("num-shots", "few-shot examples in each prompt", cxxopts::value<long long>()->default_value("5"))
    ("parallel", "requests in flight", cxxopts::value<long long>()->default_value("64"))
    ("max-new-tokens", "generation limit", cxxopts::value<long long>()->default_value("512"))
    ("temperature", "sampling temperature", cxxopts::value<double>()->default_value("0"))
    ("stop", "stop string (repeatable; default: Question, Assistant:, <|separator|>)", cxxopts::value<std::vector<std::string>>())
    ("stream", "stream responses (SSE)")
    ("incremental-stream", "SGLang streams text deltas (server started with --incremental-streaming-output)")
    ("gate", "gate 'metric op value', op one of > >= < <= == (repeatable)", cxxopts::value<std::vector<std::string>>())
    ("out", "output directory (results.jsonl, report.json, report.md, junit.xml)", cxxopts::value<std::string>()->default_value("gsm8k-out"))
    ("resume", "continue the run recorded in --out/results.jsonl (its settings.json must match this run's)")
    ("overwrite", "replace the run already in --out (without it, and without --resume, such a folder is refused)")
    ("allow-changed-settings", "with --resume: continue although settings.json records other settings (url, api, model, temperature, token budget, stops, ...); the report lists each difference")
    ("stop-grace", "seconds the requests in flight may take to finish when the run stops (a signal, --max-failed); a second signal cancels them at once", cxxopts::value<double>()->default_value("10"))
    ("timeout", "per-attempt request timeout in seconds", cxxopts::value<double>()->default_value("600"))
    ("retries", "retries per request (connection errors, timeouts, 5xx, 429, bad bodies)", cxxopts::value<long long>()->default_value("3"))
    ("backoff", "first retry delay in seconds, doubling", cxxopts::value<double>()->default_value("0.5"))
    ("max-failed", "requests allowed to fail after retries before the run stops with exit 3", cxxopts::value<long long>()->default_value("0"))
    ("progress-interval", "seconds between progress lines when stderr is not a terminal (0: none)", cxxopts::value<double>()->default_value("30"))
    ("no-flush", "do not POST /flush_cache before the run")
    ("list-metrics", "print the metric names gates may use")
    ("h,help", "print this help");
  // clang-format on
  Gsm8kConfig c;
  register_secrets_from_args(argc, argv);
  try {
    const auto parsed = parse_options(o, argc, argv);
    if (!parsed) return kExitPass;
    const auto& r = *parsed;
    if (r.count("list-metrics")) {
      for (const auto& m : gsm8k_metric_names()) std::printf("%s\n", m.c_str());
      std::printf("accept_length_rank<N>\n");
      return kExitPass;
    }
    auto positive = [&](const char* flag, long long lo) {
      const long long v = r[flag].as<long long>();
      if (v < lo)
        throw std::invalid_argument(std::string("--") + flag + " " + std::to_string(v) +
                                    " must be >= " + std::to_string(lo));
      return v;
    };
    c.url = base_url_from(r);
    set_api_key(api_key_from(r.count("api-key") ? r["api-key"].as<std::string>() : ""), c.url);
    if (r.count("thinking")) {
      const std::string t = r["thinking"].as<std::string>();
      if (t != "on" && t != "off")
        throw std::invalid_argument("--thinking '" + t + "' is not on or off");
      c.thinking = t == "on";
    }
    if (r.count("result-file")) c.result_file = r["result-file"].as<std::string>();
    const std::string api = r["api"].as<std::string>();
    const auto parsed_api = parse_api(api);
    if (!parsed_api)
      throw std::invalid_argument("--api '" + api +
                                  "' is not one of sglang, openai-completions, openai-chat");
    c.api = *parsed_api;
    if (r.count("backend")) {  // bench_sglang: srt is the SGLang runtime's native API
      const std::string backend = r["backend"].as<std::string>();
      if (backend != "srt")
        throw std::invalid_argument("--backend '" + backend +
                                    "': only srt (the native /generate) is supported; "
                                    "OpenAI-compatible servers take --api");
      if (r.count("api") && c.api != Api::kSglang)
        throw std::invalid_argument("--backend srt and --api " + api +
                                    " name different APIs; give one");
    }
    if (r.count("model")) c.model = r["model"].as<std::string>();
    if (r.count("data") && r.count("data-path"))
      throw std::invalid_argument("--data and --data-path name the same file; give one");
    for (const char* k : {"data", "data-path"})
      if (r.count(k)) c.data_path = r[k].as<std::string>();
    c.data_url = r["data-url"].as<std::string>();
    if (r.count("data-sha256")) {
      c.data_sha256 = r["data-sha256"].as<std::string>();
      if (c.data_sha256.size() != 64 ||
          c.data_sha256.find_first_not_of("0123456789abcdef") != std::string::npos)
        throw std::invalid_argument("--data-sha256 '" + c.data_sha256 +
                                    "' is not 64 lowercase hex digits");
    } else if (c.data_path.empty() && c.data_url == gsm8k::kCanonicalUrl) {
      c.data_sha256 = gsm8k::kCanonicalSha256;
    }
    c.cache_dir = r.count("cache-dir") ? r["cache-dir"].as<std::string>() : default_cache_dir();
    if (r.count("shots-from")) c.shots_from = r["shots-from"].as<std::string>();
    c.num_questions = size_t(positive("num-questions", 0));
    c.num_shots = size_t(positive("num-shots", 0));
    c.parallel = int(std::min<long long>(positive("parallel", 1), 100000));
    c.max_new_tokens = size_t(positive("max-new-tokens", 1));
    const bool simple_eval = r["protocol"].as<std::string>() == "simple-eval";
    if (simple_eval && !r.count("parallel")) c.parallel = 512;  // run_eval's --num-threads
    if (simple_eval && !r.count("max-new-tokens")) c.max_new_tokens = 2048;  // --max-tokens
    c.temperature = r["temperature"].as<double>();
    if (!(c.temperature >= 0))
      throw std::invalid_argument("--temperature " + std::to_string(c.temperature) +
                                  " must be >= 0");
    const std::string protocol = r["protocol"].as<std::string>();
    if (protocol != "bench-sglang" && protocol != "simple-eval")
      throw std::invalid_argument("--protocol '" + protocol +
                                  "' is not one of bench-sglang, simple-eval");
    c.simple_eval = protocol == "simple-eval";
    if (c.simple_eval && !r.count("api")) c.api = Api::kOpenAIChat;  // its sampler is chat
    // run_eval's chat sampler sends no stops; its completion mode sends few_shot_gsm8k's.
    c.stops = r.count("stop") ? r["stop"].as<std::vector<std::string>>()
              : c.simple_eval && c.api == Api::kOpenAIChat ? std::vector<std::string>{}
                                                           : gsm8k::default_stops();
    c.stream = r.count("stream") > 0;
    c.incremental_stream = r.count("incremental-stream") > 0;
    if (r.count("gate")) {
      for (const auto& g : r["gate"].as<std::vector<std::string>>()) {
        Gate gate = parse_gate(g);
        if (!is_gsm8k_metric(gate.metric))
          throw std::invalid_argument("gate '" + g + "': unknown metric '" + gate.metric +
                                      "' (dsv4-eval gsm8k --list-metrics names them)");
        c.gates.push_back(gate);
      }
    }
    c.out_dir = r["out"].as<std::string>();
    c.resume = r.count("resume") > 0;
    c.overwrite = r.count("overwrite") > 0;
    if (c.resume && c.overwrite)
      throw std::invalid_argument(
          "--resume continues the run in --out and --overwrite replaces "
          "it; give one");
    c.allow_changed_settings = r.count("allow-changed-settings") > 0;
    if (c.allow_changed_settings && !c.resume)
      throw std::invalid_argument("--allow-changed-settings needs --resume");
    c.stop_grace_s = r["stop-grace"].as<double>();
    if (!(c.stop_grace_s >= 0))
      throw std::invalid_argument("--stop-grace " + std::to_string(c.stop_grace_s) +
                                  " must be >= 0");
    c.timeout_s = r["timeout"].as<double>();
    if (!(c.timeout_s > 0))
      throw std::invalid_argument("--timeout " + std::to_string(c.timeout_s) + " must be > 0");
    c.retries = int(std::min<long long>(positive("retries", 0), 100));
    c.backoff_s = r["backoff"].as<double>();
    if (!(c.backoff_s >= 0))
      throw std::invalid_argument("--backoff " + std::to_string(c.backoff_s) + " must be >= 0");
    c.max_failed = size_t(positive("max-failed", 0));
    c.progress_interval_s = r["progress-interval"].as<double>();
    if (!(c.progress_interval_s >= 0))
      throw std::invalid_argument("--progress-interval " + format_number(c.progress_interval_s) +
                                  " must be >= 0 (0: no progress lines)");
    c.flush_cache = r.count("no-flush") == 0;
    c.command_line = recorded_command_line(argc, argv);
  } catch (const std::exception& e) {  // cxxopts, gates and our own checks
    std::fprintf(stderr, "dsv4-eval gsm8k: %s\n(see dsv4-eval gsm8k --help)\n",
                 redact(e.what()).c_str());
    return kExitUsage;
  }
  return run_gsm8k(c);
}

}  // namespace
}  // namespace dsv4::eval

DSV4_EVAL_COMMAND("gsm8k", "GSM8K accuracy and accept length of a live server, behind gates",
                  dsv4::eval::gsm8k_main);

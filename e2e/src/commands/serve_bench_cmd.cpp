// `dsv4-eval serve-bench`: the command line (bench_serving's flags and this project's gates);
// the run is serve_bench/serve_bench_run.hpp, its outputs serve_bench/serve_bench_report.hpp.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <cxxopts.hpp>

#include "commands/command.hpp"
#include "http/http_client.hpp"
#include "http/process_setup.hpp"
#include "http/server_api.hpp"
#include "http/stop_signals.hpp"
#include "report/accept_length.hpp"
#include "report/gates.hpp"
#include "serve_bench/serve_bench_report.hpp"
#include "serve_bench/tokenizer_vocab.hpp"

namespace dsv4::eval::serve {
namespace {

const char* kEpilogue =
    "Flags are SGLang bench_serving's where it has them (unambiguous prefixes such as\n"
    "--random-input or --num-prompt are accepted, as argparse does). Defaults are bench_serving's\n"
    "except: --dataset-name random-ids (bench_serving: sharegpt, which this program does not\n"
    "build) and the cache flush after the warmup (bench_serving: off) so the accept length read\n"
    "after the run covers exactly the timed requests (--no-flush turns it off).\n"
    "Prompts: as bench_serving, text by default: the drawn ids are shortened by the tokenizer's\n"
    "special tokens (its num_special_tokens_to_add) and decoded, special tokens kept (as\n"
    "transformers' decode). With --tokenizer (a byte-level BPE tokenizer.json) both happen here,\n"
    "as bench_serving decodes with the user's tokenizer, and no server endpoint is needed;\n"
    "without it (or with --server-tokenizer) the server's /v1/tokenize of \"\" counts the special\n"
    "tokens and its POST /v1/detokenize decodes. The server re-tokenises the text, so the tokens\n"
    "it prefills can differ from the ids drawn (a decoded id sequence need not encode back).\n"
    "--tokenize-prompt sends the drawn ids as input_ids, exactly the drawn lengths. Input tokens\n"
    "counted are bench_serving's prompt_len (the ids decoded or sent); requests whose\n"
    "meta_info.prompt_tokens differs from it (plus the special tokens for text) are counted in\n"
    "prompt_len_mismatches. --dataset-name random encodes the ShareGPT text (special tokens\n"
    "included, as transformers' encode) with --tokenizer, else with the server's /v1/tokenize,\n"
    "before repeating or cutting it. Output tokens are meta_info.completion_tokens.\n"
    "Exit codes: 0 pass, 1 a gate failed, 2 bad usage or config, 3 could not run (server\n"
    "unreachable or refusing the API key, warmup failed, more than --max-failed failures).\n";

int run(int argc, char** argv) {
  cxxopts::Options o("dsv4-eval serve-bench",
                     "Serving benchmark with SGLang bench_serving's definitions (random-ids "
                     "prompts sent as text, or input_ids with --tokenize-prompt; streaming) "
                     "behind gates.");
  // clang-format off
  o.add_options()
    ("url", "server base URL (else --base-url, or --host and --port)", cxxopts::value<std::string>()->default_value("http://127.0.0.1:30000"))
    ("base-url", "the same as --url (bench_serving's name)", cxxopts::value<std::string>())
    ("host", "server host", cxxopts::value<std::string>()->default_value("127.0.0.1"))
    ("port", "server port", cxxopts::value<long long>()->default_value("30000"))
    ("backend", "sglang or sglang-native (both POST /generate)", cxxopts::value<std::string>()->default_value("sglang"))
    ("api-key", "bearer token for the server's requests, sent to its origin only and written as *** everywhere (default: $OPENAI_API_KEY)", cxxopts::value<std::string>())
    ("dataset-name", "random-ids or random (bench_serving's), or uniform-ids (ids uniform in [0, vocab))", cxxopts::value<std::string>()->default_value("random-ids"))
    ("dataset-path", "ShareGPT JSON for --dataset-name random (random-ids and uniform-ids read no file)", cxxopts::value<std::string>())
    ("tokenizer", "tokenizer.json, or a model folder holding one: the vocabulary size, and (byte-level BPE) the decoder of text prompts", cxxopts::value<std::string>())
    ("server-tokenizer", "decode text prompts with the server's /v1/tokenize and /v1/detokenize even when --tokenizer is given")
    ("vocab-size", "the vocabulary size, instead of --tokenizer", cxxopts::value<long long>())
    ("tokenize-prompt", "send the drawn ids as input_ids (default: text decoded by --tokenizer, else by the server's /v1/detokenize)")
    ("model", "accepted for bench_serving's command lines (/generate takes no model)", cxxopts::value<std::string>())
    ("random-input-len", "input length L: lengths in [max(int(L*ratio), 1), L]", cxxopts::value<long long>()->default_value("1024"))
    ("random-output-len", "output length L (max_new_tokens, ignore_eos)", cxxopts::value<long long>()->default_value("1024"))
    ("random-range-ratio", "lower end of the lengths as a fraction of L", cxxopts::value<double>()->default_value("0.0"))
    ("num-prompts", "timed requests", cxxopts::value<long long>()->default_value("1000"))
    ("max-concurrency", "requests in flight at most (default: unlimited)", cxxopts::value<long long>())
    ("request-rate", "requests per second, Poisson arrivals (default inf: all at once)", cxxopts::value<std::string>()->default_value("inf"))
    ("warmup-requests", "untimed requests first (the first prompt, at most 32 new tokens)", cxxopts::value<long long>()->default_value("1"))
    ("seed", "seed of lengths, token ids and arrivals (np.random.seed for random-ids)", cxxopts::value<unsigned long long>()->default_value("1"))
    ("output-file", "append bench_serving's JSON result line to this file", cxxopts::value<std::string>())
    ("disable-tqdm", "no progress lines on stderr (the same as --no-progress)")
    ("timeout", "per-attempt timeout in seconds of every request (default: 21600 for the benchmark's own, bench_serving's session timeout, and 60 for the others: tokenizer, flush, /server_info, profiler)", cxxopts::value<double>()->default_value("21600"))
    ("no-flush", "do not POST /flush_cache after the warmup")
    ("flush-cache", "POST /flush_cache after the warmup, before the timed requests (bench_serving's flag; this program's default)")
    ("profile", "POST /start_profile before the timed requests and /stop_profile after them (bench_serving's --profile)")
    ("profile-num-steps", "with --profile: the profiler's num_steps (the server stops it by itself)", cxxopts::value<long long>())
    ("max-failed", "failed requests allowed before the run counts as not run (exit 3)", cxxopts::value<long long>()->default_value("0"))
    ("gate", "gate 'metric op value', e.g. 'mean_tpot_ms<50' (repeatable)", cxxopts::value<std::vector<std::string>>())
    ("label", "configuration label key=value for dsv4-eval report (repeatable)", cxxopts::value<std::vector<std::string>>())
    ("out", "output directory (report.json, report.md, junit.xml)", cxxopts::value<std::string>()->default_value("serve-bench-out"))
    ("details", "also write requests.jsonl (per request: lengths, TTFT, latency, ITLs, error)")
    ("no-progress", "no progress lines on stderr")
    ("list-metrics", "print the metric names gates may use")
    ("h,help", "print this help");
  // clang-format on
  ServeBenchJob job;
  BenchOptions& b = job.bench;
  WorkloadSpec& w = b.workload;
  register_secrets_from_args(argc, argv);
  try {
    const auto parsed = parse_options(o, argc, argv, kEpilogue);
    if (!parsed) return kExitPass;
    const auto& r = *parsed;
    if (r.count("list-metrics")) {
      for (const auto& m : serve_bench_metric_names()) std::printf("%s\n", m.c_str());
      std::printf("accept_length_rank<N>\n");
      return kExitPass;
    }
    const std::string backend = r["backend"].as<std::string>();
    if (backend != "sglang" && backend != "sglang-native")
      throw std::invalid_argument("--backend '" + backend +
                                  "': only sglang and sglang-native (/generate) are supported");
    if (r.count("base-url") && (r.count("url") || r.count("host") || r.count("port")))
      throw std::invalid_argument(std::string("--base-url and --") +
                                  (r.count("url")    ? "url"
                                   : r.count("host") ? "host"
                                                     : "port") +
                                  " both name the server; give one");
    b.url = r.count("base-url") ? normalize_base_url(r["base-url"].as<std::string>())
                                : base_url_from(r);
    set_api_key(api_key_from(r.count("api-key") ? r["api-key"].as<std::string>() : ""), b.url);
    w.dataset = r["dataset-name"].as<std::string>();
    if (w.dataset != "random-ids" && w.dataset != "uniform-ids" && w.dataset != "random")
      throw std::invalid_argument("--dataset-name '" + w.dataset +
                                  "' is not one of random-ids, random, uniform-ids");
    if (w.dataset == "random") {
      if (!r.count("dataset-path"))
        throw std::invalid_argument(
            "--dataset-name random takes its text from ShareGPT: pass --dataset-path "
            "(ShareGPT_V3_unfiltered_cleaned_split.json)");
      b.dataset_path = r["dataset-path"].as<std::string>();
    }
    w.input_len = r["random-input-len"].as<long long>();
    w.output_len = r["random-output-len"].as<long long>();
    w.range_ratio = r["random-range-ratio"].as<double>();
    w.num_prompts = r["num-prompts"].as<long long>();
    w.seed = r["seed"].as<unsigned long long>();
    if (r.count("vocab-size") && r.count("tokenizer"))
      throw std::invalid_argument(
          "--vocab-size and --tokenizer both give the vocabulary; give one");
    if (w.dataset == "random") {
      b.vocab_source = "not needed (the server's /v1/tokenize)";
    } else if (r.count("vocab-size")) {
      w.vocab_size = r["vocab-size"].as<long long>();
      b.vocab_source = "--vocab-size";
    } else if (r.count("tokenizer")) {
      const TokenizerVocab v = read_tokenizer_vocab(r["tokenizer"].as<std::string>());
      w.vocab_size = v.vocab_size;
      b.vocab_source = "--tokenizer " + v.path;
    } else {
      throw std::invalid_argument(
          "--dataset-name " + w.dataset +
          " draws token ids below the vocabulary size, which SGLang's servers do not report: "
          "pass --tokenizer (a tokenizer.json or a model folder holding one) or --vocab-size");
    }
    job.request_rate_text = r["request-rate"].as<std::string>();
    char* end = nullptr;
    const double rv = std::strtod(job.request_rate_text.c_str(), &end);
    if (job.request_rate_text.empty() || *end != '\0' || !(rv > 0))
      throw std::invalid_argument("--request-rate '" + job.request_rate_text +
                                  "' must be a positive number or inf");
    if (!std::isinf(rv)) w.request_rate = rv;
    if (r.count("max-concurrency")) b.max_concurrency = r["max-concurrency"].as<long long>();
    b.warmup_requests = r["warmup-requests"].as<long long>();
    b.request_timeout_s = r["timeout"].as<double>();
    if (!(b.request_timeout_s > 0))
      throw std::invalid_argument("--timeout " + std::to_string(b.request_timeout_s) +
                                  " must be > 0");
    if (r.count("timeout")) b.control_timeout_s = b.request_timeout_s;
    if (r.count("tokenizer")) b.tokenizer_path = r["tokenizer"].as<std::string>();
    b.server_tokenizer = r.count("server-tokenizer") > 0;
    if (r.count("no-flush") && r.count("flush-cache"))
      throw std::invalid_argument("--flush-cache and --no-flush contradict each other; give one");
    b.flush_cache = !r.count("no-flush");
    b.profile = r.count("profile") > 0;
    if (r.count("profile-num-steps")) {
      if (!b.profile) throw std::invalid_argument("--profile-num-steps needs --profile");
      const long long n = r["profile-num-steps"].as<long long>();
      if (n < 1)
        throw std::invalid_argument("--profile-num-steps " + std::to_string(n) + " must be >= 1");
      b.profile_num_steps = n;
    }
    b.tokenize_prompt = r.count("tokenize-prompt") > 0;
    b.progress = !r.count("no-progress") && !r.count("disable-tqdm");
    job.max_failed = r["max-failed"].as<long long>();
    if (job.max_failed < 0) throw std::invalid_argument("--max-failed must be >= 0");
    if (r.count("gate")) {
      job.gates = parse_gates(r["gate"].as<std::vector<std::string>>());
      const auto names = serve_bench_metric_names();
      for (const auto& g : job.gates)
        if (std::find(names.begin(), names.end(), g.metric) == names.end() &&
            !is_accept_rank_metric(g.metric)) {
          std::string known;
          for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
          throw std::invalid_argument("gate '" + g.text + "': unknown metric '" + g.metric +
                                      "' (known: " + known + ", accept_length_rank<N>)");
        }
    }
    if (r.count("label"))
      for (const auto& l : r["label"].as<std::vector<std::string>>()) {
        const size_t eq = l.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == l.size())
          throw std::invalid_argument("--label '" + l + "' is not key=value");
        job.labels[l.substr(0, eq)] = l.substr(eq + 1);
      }
    job.out_dir = r["out"].as<std::string>();
    job.details = r.count("details") > 0;
    if (r.count("output-file")) job.output_file = r["output-file"].as<std::string>();
    job.command_line = recorded_command_line(argc, argv);
  } catch (const std::exception& e) {  // cxxopts, GateError and bad values
    std::fprintf(stderr, "dsv4-eval serve-bench: %s\n", redact(e.what()).c_str());
    return kExitUsage;
  }
  StopSignals signals;  // SIGINT/SIGTERM: an errored report, the finished requests kept, exit 3
  try {
    return report_serve_bench(job, run_serve_bench(b));
  } catch (const BenchError& e) {
    std::fprintf(stderr, "dsv4-eval serve-bench: %s\n", redact(e.what()).c_str());
    if (e.exit_code != kExitCouldNotRun) return e.exit_code;
    return report_serve_bench_error(job, e.what());
  }
}

}  // namespace

DSV4_EVAL_COMMAND("serve-bench", "serving benchmark (bench_serving's random-ids) behind gates",
                  run);

}  // namespace dsv4::eval::serve

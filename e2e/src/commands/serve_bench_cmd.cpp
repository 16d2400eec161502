// `dsv4-eval serve-bench`: SGLang bench_serving's random-token benchmark behind gates, with the
// "Serving Benchmark Result" block on stdout and report.json / report.md / junit.xml in --out.
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>

#include <cxxopts.hpp>

#include "commands/command.hpp"
#include "common/clock.hpp"
#include "report/gates.hpp"
#include "report/run_report.hpp"
#include "serve_bench/serve_bench_run.hpp"

namespace dsv4::eval::serve {
namespace {

using nlohmann::json;

struct MetricSpec {
  const char* key;
  const char* unit;
};
// The metrics gates may use, in report order (accept_length and accept_length_rank<N> aside).
const std::vector<MetricSpec>& metric_specs() {
  static const std::vector<MetricSpec> m = [] {
    std::vector<MetricSpec> v = {{"completed", ""},
                                 {"failed", ""},
                                 {"short_outputs", ""},
                                 {"prompt_len_mismatches", ""},
                                 {"duration", "s"},
                                 {"total_input_tokens", ""},
                                 {"total_output_tokens", ""},
                                 {"request_throughput", "req/s"},
                                 {"input_throughput", "tok/s"},
                                 {"output_throughput", "tok/s"},
                                 {"total_throughput", "tok/s"},
                                 {"max_output_tokens_per_s", "tok/s"},
                                 {"max_concurrent_requests", ""},
                                 {"concurrency", ""}};
    static std::vector<std::string> names;
    for (const char* lat : {"e2e_latency", "ttft", "tpot", "itl"})
      for (const char* stat : {"mean", "median", "std", "p90", "p95", "p99", "max"})
        names.push_back(std::string(stat) + "_" + lat + "_ms");
    for (const auto& n : names) v.push_back({n.c_str(), "ms"});
    return v;
  }();
  return m;
}

std::string command_line(int argc, char** argv) {
  std::string s = "dsv4-eval";
  for (int i = 0; i < argc; ++i) s += std::string(" ") + argv[i];
  return s;
}

// The result block as a two-column table (rules dropped).
ReportTable block_table(const std::string& block) {
  ReportTable t{"Serving Benchmark Result", {"", ""}, {}};
  size_t pos = 0;
  while (pos < block.size()) {
    const size_t nl = block.find('\n', pos);
    const std::string line = block.substr(pos, nl - pos);
    pos = nl == std::string::npos ? block.size() : nl + 1;
    if (line.size() <= 41 || line[0] == '=' || line[0] == '-') continue;
    auto trim = [](std::string s) {
      while (!s.empty() && s.back() == ' ') s.pop_back();
      return s;
    };
    t.rows.push_back({trim(line.substr(0, 40)), trim(line.substr(41))});
  }
  return t;
}

int run(int argc, char** argv) {
  cxxopts::Options o("dsv4-eval serve-bench",
                     "Serving benchmark with random token prompts (SGLang bench_serving's random "
                     "dataset, sent as input_ids), streaming, behind gates.");
  // clang-format off
  o.add_options()
    ("url", "server base URL", cxxopts::value<std::string>()->default_value("http://127.0.0.1:30000"))
    ("backend", "protocol: sglang (/generate with input_ids)", cxxopts::value<std::string>()->default_value("sglang"))
    ("random-input", "input length L: lengths uniform in [L*ratio, L]", cxxopts::value<long long>()->default_value("1024"))
    ("random-output", "output length L (max_new_tokens, ignore_eos)", cxxopts::value<long long>()->default_value("1024"))
    ("random-range-ratio", "lower end of the lengths as a fraction of L", cxxopts::value<double>()->default_value("0.0"))
    ("num-prompts", "timed requests", cxxopts::value<long long>()->default_value("1000"))
    ("max-concurrency", "requests in flight at most (default: unlimited)", cxxopts::value<long long>())
    ("request-rate", "requests per second, Poisson arrivals (default inf: all at once)", cxxopts::value<std::string>()->default_value("inf"))
    ("warmup-requests", "untimed requests first (the first prompt, at most 32 new tokens)", cxxopts::value<long long>()->default_value("1"))
    ("seed", "seed of lengths, token ids and arrivals", cxxopts::value<unsigned long long>()->default_value("1"))
    ("vocab-size", "token ids are drawn in [0, N) (default: /get_model_info's vocab_size)", cxxopts::value<long long>()->default_value("0"))
    ("timeout", "per-request timeout in seconds", cxxopts::value<double>()->default_value("21600"))
    ("no-flush", "do not POST /flush_cache after the warmup")
    ("max-failed", "failed requests allowed before the run counts as not run (exit 3)", cxxopts::value<long long>()->default_value("0"))
    ("gate", "gate 'metric op value', e.g. 'mean_tpot_ms<50' (repeatable)", cxxopts::value<std::vector<std::string>>())
    ("label", "configuration label key=value for dsv4-eval report (repeatable)", cxxopts::value<std::vector<std::string>>())
    ("out", "output directory (report.json, report.md, junit.xml)", cxxopts::value<std::string>()->default_value("serve-bench-out"))
    ("details", "also write requests.jsonl (per request: lengths, TTFT, latency, ITLs, error)")
    ("no-progress", "no progress lines on stderr")
    ("list-metrics", "print the metric names gates may use")
    ("h,help", "print this help");
  // clang-format on
  BenchOptions b;
  std::vector<Gate> gates;
  json labels = json::object(), args = json::object();
  std::string out_dir;
  int64_t max_failed = 0;
  bool details = false;
  try {
    const auto parsed =
        parse_options(o, argc, argv,
                      "Exit codes: 0 pass, 1 a gate failed, 2 bad usage or config, 3 could not run "
                      "(server unreachable, warmup failed, more than --max-failed failures).\n");
    if (!parsed) return kExitPass;
    const auto& r = *parsed;
    if (r.count("list-metrics")) {
      for (const auto& m : metric_specs()) std::printf("%s\n", m.key);
      std::printf("accept_length\naccept_length_rank<N>\n");
      return kExitPass;
    }
    if (r["backend"].as<std::string>() != "sglang")
      throw std::invalid_argument("--backend '" + r["backend"].as<std::string>() +
                                  "': only sglang (/generate with input_ids) is supported");
    b.url = r["url"].as<std::string>();
    WorkloadSpec& w = b.workload;
    w.input_len = r["random-input"].as<long long>();
    w.output_len = r["random-output"].as<long long>();
    w.range_ratio = r["random-range-ratio"].as<double>();
    w.num_prompts = r["num-prompts"].as<long long>();
    w.seed = r["seed"].as<unsigned long long>();
    w.vocab_size = r["vocab-size"].as<long long>();
    if (w.vocab_size < 0)
      throw std::invalid_argument("--vocab-size " + std::to_string(w.vocab_size) + " must be >= 0");
    const std::string rate = r["request-rate"].as<std::string>();
    char* end = nullptr;
    const double rv = std::strtod(rate.c_str(), &end);
    if (rate.empty() || *end != '\0' || !(rv > 0))
      throw std::invalid_argument("--request-rate '" + rate + "' must be a positive number or inf");
    if (!std::isinf(rv)) w.request_rate = rv;
    if (r.count("max-concurrency")) b.max_concurrency = r["max-concurrency"].as<long long>();
    b.warmup_requests = r["warmup-requests"].as<long long>();
    b.request_timeout_s = r["timeout"].as<double>();
    if (!(b.request_timeout_s > 0))
      throw std::invalid_argument("--timeout " + std::to_string(b.request_timeout_s) +
                                  " must be > 0");
    b.flush_cache = !r.count("no-flush");
    b.progress = !r.count("no-progress");
    max_failed = r["max-failed"].as<long long>();
    if (max_failed < 0) throw std::invalid_argument("--max-failed must be >= 0");
    if (r.count("gate")) gates = parse_gates(r["gate"].as<std::vector<std::string>>());
    if (r.count("label"))
      for (const auto& l : r["label"].as<std::vector<std::string>>()) {
        const size_t eq = l.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == l.size())
          throw std::invalid_argument("--label '" + l + "' is not key=value");
        labels[l.substr(0, eq)] = l.substr(eq + 1);
      }
    out_dir = r["out"].as<std::string>();
    details = r.count("details") > 0;
    args = {{"random_input_len", w.input_len},
            {"random_output_len", w.output_len},
            {"random_range_ratio", w.range_ratio},
            {"num_prompts", w.num_prompts},
            {"request_rate", rate},
            {"warmup_requests", b.warmup_requests},
            {"seed", w.seed},
            {"max_concurrency", b.max_concurrency ? json(*b.max_concurrency) : json()}};
  } catch (const std::exception& e) {  // cxxopts, GateError and bad values
    std::fprintf(stderr, "dsv4-eval serve-bench: %s\n", e.what());
    return kExitUsage;
  }

  RunReport rep;
  rep.suite = "serve-bench";
  rep.title = "serve-bench against " + b.url;
  rep.context = {{"url", b.url},
                 {"backend", "sglang"},
                 {"dataset", "random input_ids: input " + std::to_string(b.workload.input_len) +
                                 ", output " + std::to_string(b.workload.output_len) + ", ratio " +
                                 format_number(b.workload.range_ratio)},
                 {"num prompts", std::to_string(b.workload.num_prompts)},
                 {"command", command_line(argc, argv)}};
  rep.extra = {
      {"kind", "serve-bench"}, {"labels", labels}, {"args", args}, {"timestamp", utc_timestamp()}};
  auto write = [&] {
    std::string err;
    if (!write_reports(rep, out_dir, &err)) {
      std::fprintf(stderr, "dsv4-eval serve-bench: %s\n", err.c_str());
      return false;
    }
    return true;
  };

  BenchOutcome res;
  try {
    res = run_serve_bench(b);
  } catch (const BenchError& e) {
    std::fprintf(stderr, "dsv4-eval serve-bench: %s\n", e.what());
    if (e.exit_code != kExitCouldNotRun) return e.exit_code;
    rep.status = "ERROR";
    rep.error = e.what();
    rep.exit_code = kExitCouldNotRun;
    write();
    return kExitCouldNotRun;
  }

  const std::string block = format_result_block(res.metrics, res.context);
  std::printf("\n%s", block.c_str());
  std::fflush(stdout);

  Metrics values;
  const json mj = metrics_to_json(res.metrics);
  for (const auto& [k, v] : mj.items()) values[k] = v.get<double>();
  values["short_outputs"] = double(res.short_outputs);
  values["prompt_len_mismatches"] = double(res.prompt_len_mismatches);
  std::map<std::string, std::string> missing;
  if (res.context.accept_length)
    values["accept_length"] = *res.context.accept_length;
  else
    missing["accept_length"] = res.accept_note;
  json per_rank = json::array();
  for (size_t i = 0; i < res.accept_per_rank.size(); ++i) {
    per_rank.push_back(res.accept_per_rank[i] ? json(*res.accept_per_rank[i]) : json());
    if (res.accept_per_rank[i])
      values["accept_length_rank" + std::to_string(i)] = *res.accept_per_rank[i];
  }
  for (const auto& m : metric_specs())
    rep.metrics.push_back({m.key, values.at(m.key), m.unit, "", ""});
  rep.metrics.push_back({"accept_length", res.context.accept_length, "", "mean over DP ranks",
                         res.context.accept_length ? "" : res.accept_note});
  rep.gates = evaluate_gates(gates, values, missing);
  rep.tables.push_back(block_table(block));
  rep.duration_s = res.metrics.duration_s;
  rep.context.push_back(
      {"vocab size", std::to_string(res.vocab_size) + " (" + res.vocab_source + ")"});
  rep.context.push_back({"warmup", std::to_string(res.warmup_ok) + " ok, " +
                                       std::to_string(res.warmup_failed) + " failed"});
  rep.context.push_back({"cache flush", res.flushed              ? "after the warmup"
                                        : res.flush_note.empty() ? "off"
                                                                 : res.flush_note});
  if (res.metrics.failed)
    rep.notes.push_back(std::to_string(res.metrics.failed) +
                        " request(s) failed (not in the metrics)");
  for (const auto& e : res.errors) rep.notes.push_back("request error: " + e);
  if (res.short_outputs)
    rep.notes.push_back(
        std::to_string(res.short_outputs) +
        " request(s) returned fewer tokens than max_new_tokens (ignore_eos not honoured?)");
  if (res.prompt_len_mismatches)
    rep.notes.push_back(
        std::to_string(res.prompt_len_mismatches) +
        " request(s) where meta_info.prompt_tokens differs from the input_ids sent");
  rep.extra["accept_length_per_rank"] = per_rank;
  rep.extra["vocab_size"] = res.vocab_size;
  rep.extra["result_block"] = block;

  if (res.metrics.failed > max_failed) {
    rep.status = "ERROR";
    rep.exit_code = kExitCouldNotRun;
    rep.error = std::to_string(res.metrics.failed) + " of " + std::to_string(res.timings.size()) +
                " requests failed (--max-failed " + std::to_string(max_failed) + ")";
    std::fprintf(stderr, "dsv4-eval serve-bench: %s\n", rep.error.c_str());
  } else {
    rep.exit_code = all_pass(rep.gates) ? kExitPass : kExitGateFailed;
    rep.status = rep.exit_code == kExitPass ? "PASS" : "FAIL";
  }
  for (const auto& g : rep.gates) std::fprintf(stderr, "gate %s\n", g.detail.c_str());
  if (details) {
    std::filesystem::create_directories(out_dir);
    std::ofstream f(std::filesystem::path(out_dir) / "requests.jsonl");
    for (size_t i = 0; i < res.timings.size(); ++i) {
      const auto& t = res.timings[i];
      f << json{{"index", i},
                {"input_len", t.prompt_len},
                {"requested_output", res.requested_output[i]},
                {"output_len", t.output_len},
                {"success", t.success},
                {"ttft_s", t.ttft_s},
                {"latency_s", t.latency_s},
                {"itl_s", t.itl_s},
                {"error", t.error}}
               .dump()
        << "\n";
    }
  }
  if (!write()) return kExitCouldNotRun;
  return rep.exit_code;
}

}  // namespace

DSV4_EVAL_COMMAND("serve-bench", "serving benchmark (random input_ids, streaming) behind gates",
                  run);

}  // namespace dsv4::eval::serve

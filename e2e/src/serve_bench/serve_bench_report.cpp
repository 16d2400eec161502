// serve-bench's outputs: result block, bench_serving JSONL record, reports with gates, details.
#include "serve_bench/serve_bench_report.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/clock.hpp"
#include "common/exit_codes.hpp"
#include "http/process_setup.hpp"
#include "report/accept_length.hpp"
#include "report/results_log.hpp"
#include "report/run_report.hpp"

namespace dsv4::eval::serve {

using nlohmann::json;

namespace {

struct MetricSpec {
  std::string key, unit;
};

const std::vector<MetricSpec>& metric_specs() {
  static const std::vector<MetricSpec> m = [] {
    std::vector<MetricSpec> v = {{"completed", ""},
                                 {"failed", ""},
                                 {"aborted", ""},
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
    for (const char* lat : {"e2e_latency", "ttft", "tpot", "itl"})
      for (const char* stat : {"mean", "median", "std", "p90", "p95", "p99", "max"})
        v.push_back({std::string(stat) + "_" + lat + "_ms", "ms"});
    return v;
  }();
  return m;
}

RunReport base_report(const ServeBenchJob& job) {
  const WorkloadSpec& w = job.bench.workload;
  RunReport rep;
  rep.suite = "serve-bench";
  rep.title = "serve-bench against " + job.bench.url;
  rep.context = {
      {"url", job.bench.url},
      {"backend", "sglang"},
      {"dataset", w.dataset + (job.bench.tokenize_prompt ? " (input_ids)" : " (text)") +
                      ": input " + std::to_string(w.input_len) + ", output " +
                      std::to_string(w.output_len) + ", ratio " + format_number(w.range_ratio)},
      {"num prompts", std::to_string(w.num_prompts)},
      {"command", job.command_line}};
  rep.extra = {{"kind", "serve-bench"},
               {"labels", job.labels},
               {"args",
                {{"dataset_name", w.dataset},
                 {"random_input_len", w.input_len},
                 {"random_output_len", w.output_len},
                 {"random_range_ratio", w.range_ratio},
                 {"num_prompts", w.num_prompts},
                 {"request_rate", job.request_rate_text},
                 {"warmup_requests", job.bench.warmup_requests},
                 {"seed", w.seed},
                 {"max_concurrency",
                  job.bench.max_concurrency ? json(*job.bench.max_concurrency) : json()}}},
               {"timestamp", utc_timestamp()}};
  return rep;
}

bool write(const RunReport& rep, const std::string& out_dir) {
  std::string err;
  if (write_reports(rep, out_dir, &err)) return true;
  std::fprintf(stderr, "dsv4-eval serve-bench: %s\n", err.c_str());
  return false;
}

void write_details(const std::string& out_dir, const BenchOutcome& res) {
  std::filesystem::create_directories(out_dir);
  std::ofstream f(std::filesystem::path(out_dir) / "requests.jsonl");
  for (size_t i = 0; i < res.timings.size(); ++i) {
    const auto& t = res.timings[i];
    f << redact_json(json{{"index", i},
                          {"input_len", t.prompt_len},
                          {"requested_output", res.requested_output[i]},
                          {"output_len", t.output_len},
                          {"success", t.success},
                          {"ttft_s", t.ttft_s},
                          {"latency_s", t.latency_s},
                          {"itl_s", t.itl_s},
                          {"error", t.error}})
             .dump(-1, ' ', false, json::error_handler_t::replace)
      << "\n";
  }
}

}  // namespace

std::vector<std::string> serve_bench_metric_names() {
  std::vector<std::string> v;
  for (const auto& m : metric_specs()) v.push_back(m.key);
  for (const auto& [name, what] : accept_metric_definitions()) v.push_back(name);
  return v;
}

json bench_serving_record(const ServeBenchJob& job, const BenchOutcome& res) {
  const WorkloadSpec& w = job.bench.workload;
  const ServingMetrics& m = res.metrics;
  json j = {{"tag", nullptr},
            {"backend", "sglang"},
            {"dataset_name", w.dataset},
            {"request_rate", w.request_rate ? json(*w.request_rate) : json("inf")},
            {"max_concurrency",
             job.bench.max_concurrency ? json(*job.bench.max_concurrency) : json(nullptr)},
            {"sharegpt_output_len", nullptr},
            {"random_input_len", w.input_len},
            {"random_output_len", w.output_len},
            {"random_range_ratio", w.range_ratio},
            {"server_info", res.server_info.is_null() ? json(nullptr) : res.server_info},
            {"accept_length",
             res.context.accept_length ? json(*res.context.accept_length) : json(nullptr)}};
  // bench_serving's result keys, from the same metrics (and the P90/P95 of every latency)
  const json all = metrics_to_json(m);
  for (const char* k : {"duration",
                        "completed",
                        "total_input_tokens",
                        "total_output_tokens",
                        "request_throughput",
                        "input_throughput",
                        "output_throughput",
                        "total_throughput",
                        "concurrency",
                        "max_output_tokens_per_s",
                        "max_concurrent_requests",
                        "mean_e2e_latency_ms",
                        "median_e2e_latency_ms",
                        "std_e2e_latency_ms",
                        "p90_e2e_latency_ms",
                        "p95_e2e_latency_ms",
                        "p99_e2e_latency_ms",
                        "mean_ttft_ms",
                        "median_ttft_ms",
                        "std_ttft_ms",
                        "p90_ttft_ms",
                        "p95_ttft_ms",
                        "p99_ttft_ms",
                        "mean_tpot_ms",
                        "median_tpot_ms",
                        "std_tpot_ms",
                        "p90_tpot_ms",
                        "p95_tpot_ms",
                        "p99_tpot_ms",
                        "mean_itl_ms",
                        "median_itl_ms",
                        "std_itl_ms",
                        "p90_itl_ms",
                        "p95_itl_ms",
                        "p99_itl_ms"})
    j[k] = all.at(k);
  return j;
}

int report_serve_bench_error(const ServeBenchJob& job, const std::string& error) {
  RunReport rep = base_report(job);
  rep.status = "ERROR";
  rep.error = error;
  rep.exit_code = kExitCouldNotRun;
  write(rep, job.out_dir);
  return kExitCouldNotRun;
}

int report_serve_bench(const ServeBenchJob& job, const BenchOutcome& res) {
  const std::string block = format_result_block(res.metrics, res.context);
  std::printf("\n%s", block.c_str());
  std::fflush(stdout);

  RunReport rep = base_report(job);
  Metrics values;
  const json mj = metrics_to_json(res.metrics);
  for (const auto& [k, v] : mj.items()) values[k] = v.get<double>();
  values["short_outputs"] = double(res.short_outputs);
  values["prompt_len_mismatches"] = double(res.prompt_len_mismatches);
  std::map<std::string, std::string> missing;
  const std::string skipped = put_accept_metrics(
      res.accept_per_rank, res.accept_note.empty() ? "no accept length" : res.accept_note, values,
      missing);
  if (!skipped.empty()) rep.notes.push_back(skipped);
  for (const auto& m : metric_specs())
    rep.metrics.push_back({m.key, values.at(m.key), m.unit, "", ""});
  for (const auto& [name, what] : accept_metric_definitions()) {
    auto v = values.find(name);
    auto why = missing.find(name);
    rep.metrics.push_back({name,
                           v == values.end() ? std::nullopt : std::optional<double>(v->second), "",
                           what, why == missing.end() ? "" : why->second});
  }
  for (const auto& [k, v] : values)
    if (is_accept_rank_metric(k))
      rep.metrics.push_back(
          {k, v, "", "server avg_spec_accept_length of DP rank " + k.substr(18), ""});
  rep.gates = evaluate_gates(job.gates, values, missing);
  ReportTable table{"Serving Benchmark Result", {"", ""}, {}};
  for (const auto& [label, value] : result_block_rows(res.metrics, res.context))
    table.rows.push_back({label, value});
  rep.tables.push_back(table);
  rep.duration_s = res.metrics.duration_s;
  rep.context.push_back(
      {"vocab size", std::to_string(res.vocab_size) + " (" + res.vocab_source + ")"});
  rep.context.push_back({"prompts", res.prompt_form});
  rep.context.push_back({"warmup", std::to_string(res.warmup_ok) + " ok, " +
                                       std::to_string(res.warmup_failed) + " failed"});
  rep.context.push_back({"cache flush", res.flushed              ? "after the warmup"
                                        : res.flush_note.empty() ? "off"
                                                                 : res.flush_note});
  if (res.metrics.failed)
    rep.notes.push_back(std::to_string(res.metrics.failed) +
                        " request(s) failed (not in the metrics)" +
                        (res.metrics.aborted ? ", " + std::to_string(res.metrics.aborted) +
                                                   " of them aborted by the server with HTTP 200 "
                                                   "(finish_reason abort)"
                                             : std::string()));
  if (!res.profile_note.empty()) rep.context.push_back({"profile", res.profile_note});
  if (!res.encode_note.empty()) rep.context.push_back({"encoding", res.encode_note});
  for (const auto& e : res.errors) rep.notes.push_back("request error: " + e);
  if (res.short_outputs)
    rep.notes.push_back(
        std::to_string(res.short_outputs) +
        " request(s) returned fewer tokens than max_new_tokens (ignore_eos not honoured?)");
  if (res.prompt_len_mismatches)
    rep.notes.push_back(
        std::to_string(res.prompt_len_mismatches) +
        " request(s) where meta_info.prompt_tokens differs from the ids sent" +
        (res.special_tokens ? " plus " + std::to_string(res.special_tokens) + " special token(s)"
                            : std::string()) +
        (res.prompt_form.rfind("text", 0) == 0 ? " (the text form re-tokenises the decoded ids)"
                                               : ""));
  json per_rank = json::array();
  for (const auto& v : res.accept_per_rank) per_rank.push_back(v ? json(*v) : json());
  rep.extra["accept_length_per_rank"] = per_rank;
  rep.extra["vocab_size"] = res.vocab_size;
  rep.extra["prompt_form"] = res.prompt_form;
  rep.extra["special_tokens"] = res.special_tokens;
  rep.extra["result_block"] = block;

  if (!res.interrupted.empty()) {
    rep.status = "ERROR";
    rep.exit_code = kExitCouldNotRun;
    rep.error = res.interrupted;
    std::fprintf(stderr, "dsv4-eval serve-bench: %s\n", rep.error.c_str());
  } else if (res.metrics.failed > job.max_failed) {
    rep.status = "ERROR";
    rep.exit_code = kExitCouldNotRun;
    rep.error = std::to_string(res.metrics.failed) + " of " + std::to_string(res.timings.size()) +
                " requests failed (--max-failed " + std::to_string(job.max_failed) + ")";
    std::fprintf(stderr, "dsv4-eval serve-bench: %s\n", rep.error.c_str());
  } else {
    rep.exit_code = all_pass(rep.gates) ? kExitPass : kExitGateFailed;
    rep.status = rep.exit_code == kExitPass ? "PASS" : "FAIL";
  }
  for (const auto& g : rep.gates) std::fprintf(stderr, "gate %s\n", g.detail.c_str());
  if (job.details) write_details(job.out_dir, res);
  if (!job.output_file.empty()) {
    JsonlWriter w;
    if (auto e = w.open(job.output_file, true);
        !e.empty() || !w.write(bench_serving_record(job, res))) {
      std::fprintf(stderr, "dsv4-eval serve-bench: cannot append to --output-file %s\n",
                   job.output_file.c_str());
      return kExitCouldNotRun;
    }
    std::printf("Results saved to %s\n", job.output_file.c_str());
  }
  if (!write(rep, job.out_dir)) return kExitCouldNotRun;
  return rep.exit_code;
}

}  // namespace dsv4::eval::serve

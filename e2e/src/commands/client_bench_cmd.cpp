// `dsv4-eval client-bench`: the runner's own throughput (requests/s) and CPU time per request
// against a server that answers at once (the test server without sleeps).
#include <cxxopts.hpp>

#include <cstdio>

#include "commands/command.hpp"
#include "common/percentile.hpp"
#include "gsm8k/gsm8k_data.hpp"
#include "http/http_client.hpp"
#include "http/server_api.hpp"
#include "report/results_log.hpp"
#include "report/run_report.hpp"

namespace dsv4::eval {
namespace {

int client_bench_main(int argc, char** argv) {
  cxxopts::Options o("dsv4-eval client-bench",
                     "Measures dsv4-eval's HTTP client: requests/s at a given parallelism and the "
                     "client thread's CPU time per request (GSM8K-shaped requests).\n"
                     "Exit: 0 gates pass, 1 a gate failed, 2 bad usage, 3 could not run.");
  // clang-format off
  o.add_options()
    ("url", "server base URL", cxxopts::value<std::string>()->default_value("http://127.0.0.1:30000"))
    ("api", "sglang | openai-completions | openai-chat", cxxopts::value<std::string>()->default_value("sglang"))
    ("data", "GSM8K JSONL for the prompts (default: one built-in question)", cxxopts::value<std::string>())
    ("num-shots", "few-shot examples per prompt (with --data)", cxxopts::value<long long>()->default_value("5"))
    ("parallel", "requests in flight", cxxopts::value<long long>()->default_value("512"))
    ("requests", "requests to send", cxxopts::value<long long>()->default_value("20000"))
    ("max-new-tokens", "max_new_tokens of each request", cxxopts::value<long long>()->default_value("512"))
    ("stream", "stream responses (SSE)")
    ("warmup", "requests sent first and not measured (opens the connections)", cxxopts::value<long long>()->default_value("1024"))
    ("gate", "gate on req_per_s, cpu_ms_per_request, latency_p50, latency_p99, failed (repeatable)", cxxopts::value<std::vector<std::string>>())
    ("out", "write report.json, report.md, junit.xml here", cxxopts::value<std::string>())
    ("h,help", "print this help");
  // clang-format on
  std::string url, out;
  Api api = Api::kSglang;
  std::vector<std::string> prompts;
  long long parallel = 0, requests = 0, warmup = 0;
  GenParams gp;
  std::vector<Gate> gates;
  try {
    const auto parsed = parse_options(o, argc, argv);
    if (!parsed) return kExitPass;
    const auto& r = *parsed;
    url = normalize_base_url(r["url"].as<std::string>());
    const auto a = parse_api(r["api"].as<std::string>());
    if (!a) throw std::invalid_argument("--api '" + r["api"].as<std::string>() + "' is unknown");
    api = *a;
    parallel = r["parallel"].as<long long>();
    requests = r["requests"].as<long long>();
    warmup = r["warmup"].as<long long>();
    if (parallel < 1) throw std::invalid_argument("--parallel must be >= 1");
    if (requests < 1) throw std::invalid_argument("--requests must be >= 1");
    if (warmup < 0) throw std::invalid_argument("--warmup must be >= 0");
    gp.max_new_tokens = size_t(std::max<long long>(1, r["max-new-tokens"].as<long long>()));
    gp.stops = gsm8k::default_stops();
    gp.stream = r.count("stream") > 0;
    gp.model = "default";
    if (r.count("data")) {
      auto recs = gsm8k::load_jsonl(r["data"].as<std::string>());
      const size_t k = size_t(std::max<long long>(0, r["num-shots"].as<long long>()));
      if (k >= recs.size()) throw std::invalid_argument("--num-shots exceeds the data");
      const std::string prefix =
          gsm8k::few_shot_prefix(std::vector<gsm8k::Record>(recs.begin(), recs.begin() + long(k)));
      for (const auto& rec : recs) prompts.push_back(prefix + gsm8k::format_example(rec, false));
    } else {
      prompts.push_back("Question: Tom has 3 apples and buys 4 more. How many apples?\nAnswer:");
    }
    if (r.count("gate")) gates = parse_gates(r["gate"].as<std::vector<std::string>>());
    if (r.count("out")) out = r["out"].as<std::string>();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsv4-eval client-bench: %s\n", e.what());
    return kExitUsage;
  }
  std::vector<std::string> bodies;
  for (const auto& p : prompts) bodies.push_back(generation_body(api, p, gp));

  HttpClient client(HttpClientOptions{.max_in_flight = int(parallel)});
  std::vector<double> latency;
  latency.reserve(size_t(requests));
  size_t failed = 0, ok = 0;
  std::string first_error;
  std::vector<Completion> scratch(1);
  auto submit = [&](size_t k, bool measured) {
    HttpRequest r;
    r.url = url + generation_path(api);
    r.body = bodies[k % bodies.size()];
    r.timeout_s = 60;
    r.sse = gp.stream;
    if (gp.stream) {
      auto acc = std::make_shared<StreamAccumulator>(api);
      r.on_event = [acc](const SseEvent& ev) { return acc->feed(ev); };
      r.validate = [acc](const HttpResult&) {
        Completion c;
        return acc->finish(c);
      };
    } else {
      r.validate = [api](const HttpResult& res) {
        Completion c;
        return parse_completion(api, res.body, c);
      };
    }
    r.on_done = [&, measured](HttpResult& res) {
      if (!measured) return;
      if (res.ok()) {
        ++ok;
        latency.push_back(res.end_s - res.start_s);
      } else {
        ++failed;
        if (first_error.empty()) first_error = res.error_message;
      }
    };
    client.submit(std::move(r));
  };
  for (long long k = 0; k < warmup; ++k) submit(size_t(k), false);
  client.run();
  const double cpu0 = thread_cpu_seconds(), t0 = monotonic_seconds();
  for (long long k = 0; k < requests; ++k) submit(size_t(k), true);
  client.run();
  const double wall = monotonic_seconds() - t0, cpu = thread_cpu_seconds() - cpu0;

  Metrics m = {{"req_per_s", double(ok) / wall},
               {"cpu_ms_per_request", 1e3 * cpu / double(requests)},
               {"cpu_fraction", cpu / wall},
               {"latency_p50", percentile(latency, 50)},
               {"latency_p99", percentile(latency, 99)},
               {"failed", double(failed)},
               {"wall_s", wall}};
  std::printf(
      "client-bench: %lld requests, parallel %lld, %s%s: %.0f req/s, client CPU %.3f ms "
      "per request (%.1f%% of wall), latency p50 %.4f s p99 %.4f s, failed %zu\n",
      requests, parallel, to_string(api), gp.stream ? " stream" : "", m["req_per_s"],
      m["cpu_ms_per_request"], 100 * m["cpu_fraction"], m["latency_p50"], m["latency_p99"], failed);
  if (!first_error.empty()) std::printf("first error: %s\n", first_error.c_str());
  RunReport rep;
  rep.suite = "client-bench";
  rep.title = "dsv4-eval client throughput against " + url;
  rep.context = {{"url", url},
                 {"api", to_string(api)},
                 {"parallel", std::to_string(parallel)},
                 {"requests", std::to_string(requests)},
                 {"stream", gp.stream ? "yes" : "no"}};
  for (const auto& [k, v] : m) rep.metrics.push_back({k, v, "", "", ""});
  rep.gates = evaluate_gates(gates, m);
  const bool pass = all_pass(rep.gates) && ok > 0;
  rep.status = ok == 0 ? "ERROR" : pass ? "PASS" : "FAIL";
  rep.exit_code = ok == 0 ? kExitCouldNotRun : pass ? kExitPass : kExitGateFailed;
  if (ok == 0) rep.error = "no request succeeded: " + first_error;
  rep.duration_s = wall;
  if (!out.empty()) {
    std::string err;
    if (!write_reports(rep, out, &err)) {
      std::fprintf(stderr, "dsv4-eval client-bench: %s\n", err.c_str());
      return kExitCouldNotRun;
    }
  }
  return rep.exit_code;
}

}  // namespace
}  // namespace dsv4::eval

DSV4_EVAL_COMMAND("client-bench", "throughput and CPU cost of the HTTP client (test server)",
                  dsv4::eval::client_bench_main);

// Serving-benchmark statistics: stream timing, numpy-style summaries, the result block and JSON.
#include "serve_bench/serve_bench_metrics.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace dsv4::eval::serve {

StreamTimer::StreamTimer(int64_t prompt_len) : prompt_len_(prompt_len) {}

void StreamTimer::reset() { *this = StreamTimer(prompt_len_); }

void StreamTimer::on_line(double t) {
  last_line_t_ = t;
  any_line_ = true;
}

void StreamTimer::on_tokens(double t, int64_t completion_tokens) {
  on_line(t);
  const int64_t added = completion_tokens - output_len_;
  if (added <= 0) return;  // a chunk without a new token: no gap, the previous time stays
  if (output_len_ == 0) {
    first_token_t_ = t;
    first_chunk_tokens_ = added;
  } else {
    itl_.insert(itl_.end(), size_t(added), (t - last_token_t_) / double(added));
  }
  last_token_t_ = t;
  output_len_ = completion_tokens;
}

RequestTiming StreamTimer::finish(double start_s, const std::string& error) const {
  RequestTiming r;
  r.prompt_len = prompt_len_;
  r.output_len = output_len_;
  r.first_chunk_tokens = first_chunk_tokens_;
  r.start_s = start_s;
  r.ttft_s = output_len_ > 0 ? first_token_t_ - start_s : 0.0;
  r.latency_s = any_line_ ? last_line_t_ - start_s : 0.0;
  r.itl_s = itl_;
  r.error = error;
  r.aborted = aborted_;
  if (r.error.empty() && aborted_) r.error = "the server aborted the request (HTTP 200)";
  if (r.error.empty() && output_len_ == 0) r.error = "the stream carried no generated token";
  r.success = r.error.empty();
  return r;
}

Summary summarize(std::vector<double> v) {
  Summary s;
  s.count = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const double n = double(v.size());
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
  double ss = 0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(ss / n);
  s.median = percentile_sorted(v, 50);
  s.p90 = percentile_sorted(v, 90);
  s.p95 = percentile_sorted(v, 95);
  s.p99 = percentile_sorted(v, 99);
  s.max = v.back();
  return s;
}

namespace {

std::vector<double> to_ms(const std::vector<double>& s) {
  std::vector<double> out(s.size());
  std::transform(s.begin(), s.end(), out.begin(), [](double x) { return x * 1000.0; });
  return out;
}

// Token counts per whole second and requests in flight per whole second (bench_serving's buckets).
void peaks(const std::vector<RequestTiming>& rs, ServingMetrics& m) {
  double t0 = INFINITY, t1 = -INFINITY;
  for (const auto& r : rs)
    if (r.success) {
      t0 = std::min(t0, r.start_s);
      t1 = std::max(t1, r.start_s + r.latency_s);
    }
  if (!(t0 <= t1)) return;
  const int64_t seconds = int64_t(std::ceil(t1 - t0)) + 1;
  std::vector<double> tokens(size_t(seconds), 0.0), inflight(size_t(seconds), 0.0);
  auto bucket = [&](double t) { return int64_t(t - t0); };  // truncation, as int() does for t >= 0
  for (const auto& r : rs) {
    if (!r.success) continue;
    double t = r.start_s + r.ttft_s;
    const int64_t b0 = bucket(t);
    if (b0 >= 0 && b0 < seconds)
      tokens[size_t(b0)] += double(std::max<int64_t>(1, r.first_chunk_tokens));
    for (double gap : r.itl_s) {
      t += gap;
      const int64_t b = bucket(t);
      if (b >= 0 && b < seconds) tokens[size_t(b)] += 1;
    }
    const int64_t s0 = bucket(r.start_s), s1 = bucket(r.start_s + r.latency_s);
    for (int64_t s = std::max<int64_t>(s0, 0); s < std::min(s1 + 1, seconds); ++s)
      inflight[size_t(s)] += 1;
  }
  m.max_output_tokens_per_s = *std::max_element(tokens.begin(), tokens.end());
  m.max_concurrent_requests = int64_t(*std::max_element(inflight.begin(), inflight.end()));
}

}  // namespace

ServingMetrics compute_metrics(const std::vector<RequestTiming>& rs, double duration_s) {
  ServingMetrics m;
  m.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2e;
  for (const auto& r : rs) {
    if (!r.success) {
      ++m.failed;
      if (r.aborted) ++m.aborted;
      continue;
    }
    ++m.completed;
    m.total_input += r.prompt_len;
    m.total_output += r.output_len;
    ttft.push_back(r.ttft_s);
    e2e.push_back(r.latency_s);
    if (r.output_len > 1) tpot.push_back((r.latency_s - r.ttft_s) / double(r.output_len - 1));
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
  }
  if (duration_s > 0) {
    m.request_throughput = double(m.completed) / duration_s;
    m.input_throughput = double(m.total_input) / duration_s;
    m.output_throughput = double(m.total_output) / duration_s;
    m.total_throughput = double(m.total_input + m.total_output) / duration_s;
    m.concurrency = std::accumulate(e2e.begin(), e2e.end(), 0.0) / duration_s;
  }
  m.ttft_ms = summarize(to_ms(ttft));
  m.tpot_ms = summarize(to_ms(tpot));
  m.itl_ms = summarize(to_ms(itl));
  m.e2e_ms = summarize(to_ms(e2e));
  peaks(rs, m);
  return m;
}

namespace {

// Python's repr of a float: the shortest round-tripping digits, ".0" appended to whole numbers.
std::string py_float(double x) {
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, x);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string centered(const std::string& s, char fill, size_t width) {
  if (s.size() >= width) return s;
  const size_t pad = width - s.size();
  return std::string(pad / 2, fill) + s + std::string(pad - pad / 2, fill);  // extra on the right
}

struct Block {
  std::string out;
  std::vector<std::pair<std::string, std::string>> rows;
  void text(const std::string& label, const std::string& value) {
    rows.emplace_back(label, value);
    char buf[160];
    std::snprintf(buf, sizeof buf, "%-40s %-10s\n", label.c_str(), value.c_str());
    out += buf;
  }
  void num(const std::string& label, double v) {
    char val[64];
    std::snprintf(val, sizeof val, "%.2f", v);
    text(label, val);
  }
  void integer(const std::string& label, int64_t v) { text(label, std::to_string(v)); }
  void rule(const std::string& title, char c) { out += centered(title, c, 50) + "\n"; }
};

Block build_block(const ServingMetrics& m, const BenchContext& ctx) {
  Block b;
  b.rule(" Serving Benchmark Result ", '=');
  b.text("Backend:", ctx.backend);
  b.text("Traffic request rate:", py_float(ctx.request_rate.value_or(INFINITY)));
  b.text("Max request concurrency:",
         ctx.max_concurrency ? std::to_string(*ctx.max_concurrency) : "not set");
  b.integer("Successful requests:", m.completed);
  if (m.failed > 0) b.integer("Failed requests:", m.failed);
  if (m.aborted > 0) b.integer("Aborted requests (HTTP 200):", m.aborted);
  b.num("Benchmark duration (s):", m.duration_s);
  b.integer("Total input tokens:", m.total_input);
  b.integer("Total generated tokens:", m.total_output);
  b.num("Request throughput (req/s):", m.request_throughput);
  b.num("Input token throughput (tok/s):", m.input_throughput);
  b.num("Output token throughput (tok/s):", m.output_throughput);
  b.num("Peak output token throughput (tok/s):", m.max_output_tokens_per_s);
  b.integer("Peak concurrent requests:", m.max_concurrent_requests);
  b.num("Total token throughput (tok/s):", m.total_throughput);
  b.num("Concurrency:", m.concurrency);
  if (ctx.accept_length && *ctx.accept_length != 0) b.num("Accept length:", *ctx.accept_length);
  b.rule("End-to-End Latency", '-');
  b.num("Mean E2E Latency (ms):", m.e2e_ms.mean);
  b.num("Median E2E Latency (ms):", m.e2e_ms.median);
  b.num("P90 E2E Latency (ms):", m.e2e_ms.p90);
  b.num("P95 E2E Latency (ms):", m.e2e_ms.p95);
  b.num("P99 E2E Latency (ms):", m.e2e_ms.p99);
  b.rule("Time to First Token", '-');
  b.num("Mean TTFT (ms):", m.ttft_ms.mean);
  b.num("Median TTFT (ms):", m.ttft_ms.median);
  b.num("P90 TTFT (ms):", m.ttft_ms.p90);
  b.num("P95 TTFT (ms):", m.ttft_ms.p95);
  b.num("P99 TTFT (ms):", m.ttft_ms.p99);
  b.rule("Time per Output Token (excl. 1st token)", '-');
  b.num("Mean TPOT (ms):", m.tpot_ms.mean);
  b.num("Median TPOT (ms):", m.tpot_ms.median);
  b.num("P90 TPOT (ms):", m.tpot_ms.p90);
  b.num("P95 TPOT (ms):", m.tpot_ms.p95);
  b.num("P99 TPOT (ms):", m.tpot_ms.p99);
  b.rule("Inter-Token Latency", '-');
  b.num("Mean ITL (ms):", m.itl_ms.mean);
  b.num("Median ITL (ms):", m.itl_ms.median);
  b.num("P90 ITL (ms):", m.itl_ms.p90);
  b.num("P95 ITL (ms):", m.itl_ms.p95);
  b.num("P99 ITL (ms):", m.itl_ms.p99);
  b.num("Max ITL (ms):", m.itl_ms.max);
  b.out += std::string(50, '=') + "\n";
  return b;
}

}  // namespace

std::string format_result_block(const ServingMetrics& m, const BenchContext& ctx) {
  return build_block(m, ctx).out;
}

std::vector<std::pair<std::string, std::string>> result_block_rows(const ServingMetrics& m,
                                                                   const BenchContext& ctx) {
  return build_block(m, ctx).rows;
}

nlohmann::json metrics_to_json(const ServingMetrics& m) {
  nlohmann::json j = {
      {"duration", m.duration_s},
      {"completed", m.completed},
      {"failed", m.failed},
      {"aborted", m.aborted},
      {"total_input_tokens", m.total_input},
      {"total_output_tokens", m.total_output},
      {"request_throughput", m.request_throughput},
      {"input_throughput", m.input_throughput},
      {"output_throughput", m.output_throughput},
      {"total_throughput", m.total_throughput},
      {"max_output_tokens_per_s", m.max_output_tokens_per_s},
      {"max_concurrent_requests", m.max_concurrent_requests},
      {"concurrency", m.concurrency},
  };
  auto put = [&](const std::string& name, const Summary& s) {
    j["mean_" + name + "_ms"] = s.mean;
    j["median_" + name + "_ms"] = s.median;
    j["std_" + name + "_ms"] = s.std;
    j["p90_" + name + "_ms"] = s.p90;
    j["p95_" + name + "_ms"] = s.p95;
    j["p99_" + name + "_ms"] = s.p99;
    j["max_" + name + "_ms"] = s.max;
  };
  put("e2e_latency", m.e2e_ms);
  put("ttft", m.ttft_ms);
  put("tpot", m.tpot_ms);
  put("itl", m.itl_ms);
  return j;
}

}  // namespace dsv4::eval::serve

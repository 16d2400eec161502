// Serving-benchmark maths: stream timing, numpy-style summaries, metric set, result block,
// workload.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <sstream>

#include "dsv4/fixtures/seed.hpp"
#include "serve_bench/serve_bench_metrics.hpp"
#include "serve_bench/serve_bench_workload.hpp"

namespace {

using namespace dsv4::eval::serve;
using dsv4::eval::percentile_sorted;

// A timing built by hand: start, first token after ttft, then the listed gaps, end at latency.
RequestTiming timing(double start, double ttft, std::vector<double> itl, double latency,
                     int64_t prompt = 10, int64_t first_chunk = 1) {
  RequestTiming r;
  r.success = true;
  r.start_s = start;
  r.ttft_s = ttft;
  r.itl_s = std::move(itl);
  r.latency_s = latency;
  r.prompt_len = prompt;
  r.first_chunk_tokens = first_chunk;
  r.output_len = first_chunk + int64_t(r.itl_s.size());
  return r;
}

TEST(StreamTimer, ChunkOfNTokensCountsAsNEqualGaps) {
  StreamTimer t(7);
  t.on_tokens(10.5, 1);  // first token: TTFT 0.5
  t.on_tokens(10.8, 4);  // 3 tokens in one chunk after 0.3 s: three gaps of 0.1
  t.on_tokens(10.9, 4);  // no new token: no gap, the previous token time stays 10.8
  t.on_tokens(11.2, 5);  // one token 0.4 s after the last token chunk
  t.on_line(11.25);      // [DONE]
  const RequestTiming r = t.finish(10.0);
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_EQ(r.prompt_len, 7);
  EXPECT_EQ(r.output_len, 5);
  EXPECT_EQ(r.first_chunk_tokens, 1);
  EXPECT_NEAR(r.ttft_s, 0.5, 1e-12);
  EXPECT_NEAR(r.latency_s, 1.25, 1e-12);
  ASSERT_EQ(r.itl_s.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(r.itl_s[i], 0.1, 1e-12) << "gap " << i;
  EXPECT_NEAR(r.itl_s[3], 0.4, 1e-12);
}

TEST(StreamTimer, FirstChunkWithSeveralTokensGivesNoGap) {
  StreamTimer t(3);
  t.on_tokens(0.2, 3);
  t.on_tokens(0.5, 6);
  const RequestTiming r = t.finish(0.0);
  ASSERT_TRUE(r.success);
  EXPECT_EQ(r.first_chunk_tokens, 3);
  EXPECT_EQ(r.output_len, 6);
  ASSERT_EQ(r.itl_s.size(), 3u);
  for (double g : r.itl_s) EXPECT_NEAR(g, 0.1, 1e-12);
  EXPECT_NEAR(r.latency_s, 0.5, 1e-12);
}

TEST(StreamTimer, NoTokenIsAFailureAndAnErrorIsKept) {
  StreamTimer a(3);
  a.on_line(0.1);
  const auto ra = a.finish(0.0);
  EXPECT_FALSE(ra.success);
  EXPECT_NE(ra.error.find("no generated token"), std::string::npos) << ra.error;
  StreamTimer b(3);
  b.on_tokens(0.1, 2);
  const auto rb = b.finish(0.0, "stream truncated");
  EXPECT_FALSE(rb.success);
  EXPECT_EQ(rb.error, "stream truncated");
  b.reset();  // a retried attempt starts over
  b.on_tokens(0.4, 1);
  const auto rc = b.finish(0.3);
  EXPECT_TRUE(rc.success);
  EXPECT_EQ(rc.output_len, 1);
  EXPECT_NEAR(rc.ttft_s, 0.1, 1e-12);
}

TEST(Summary, MatchesNumpyDefinitions) {
  // numpy: mean 2.5, median 2.5, std (ddof 0) sqrt(1.25); percentile(q) at position q/100*(n-1).
  const Summary s = summarize({4, 1, 3, 2});
  EXPECT_EQ(s.count, 4u);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.std, std::sqrt(1.25));
  EXPECT_NEAR(s.p90, 3.7, 1e-12);
  EXPECT_NEAR(s.p95, 3.85, 1e-12);
  EXPECT_NEAR(s.p99, 3.97, 1e-12);
  EXPECT_DOUBLE_EQ(s.max, 4);
  const Summary odd = summarize({5, 1, 9});
  EXPECT_DOUBLE_EQ(odd.median, 5);
  EXPECT_DOUBLE_EQ(percentile_sorted({1, 5, 9}, 25), 3);
  const Summary one = summarize({7});
  EXPECT_DOUBLE_EQ(one.p99, 7);
  EXPECT_DOUBLE_EQ(one.std, 0);
  const Summary none = summarize({});
  EXPECT_EQ(none.count, 0u);
  EXPECT_EQ(none.mean, 0);
  EXPECT_EQ(none.p99, 0);
}

TEST(ComputeMetrics, HandComputedRun) {
  std::vector<RequestTiming> rs;
  // Request A: sent at 0, first token at 0.5, gaps 0.1 x 4 (5 tokens), stream ends at 1.0.
  rs.push_back(timing(0.0, 0.5, {0.1, 0.1, 0.1, 0.1}, 1.0, 100));
  // Request B: sent at 1.0, first token 0.2 later, gaps 0.3 x 2 (3 tokens), ends at 0.8.
  rs.push_back(timing(1.0, 0.2, {0.3, 0.3}, 0.8, 50));
  // Request C failed: counts nowhere but in `failed`.
  RequestTiming c;
  c.success = false;
  c.prompt_len = 999;
  c.output_len = 3;
  c.error = "boom";
  rs.push_back(c);
  const ServingMetrics m = compute_metrics(rs, 2.0);
  EXPECT_EQ(m.completed, 2);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input, 150);
  EXPECT_EQ(m.total_output, 8);
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(m.input_throughput, 75.0);
  EXPECT_DOUBLE_EQ(m.output_throughput, 4.0);
  EXPECT_DOUBLE_EQ(m.total_throughput, 79.0);
  EXPECT_NEAR(m.concurrency, (1.0 + 0.8) / 2.0, 1e-12);
  EXPECT_NEAR(m.ttft_ms.mean, 350, 1e-9);
  EXPECT_NEAR(m.ttft_ms.median, 350, 1e-9);
  EXPECT_NEAR(m.ttft_ms.std, 150, 1e-9);
  // TPOT: A (1.0-0.5)/4 = 125 ms, B (0.8-0.2)/2 = 300 ms.
  EXPECT_NEAR(m.tpot_ms.mean, 212.5, 1e-9);
  EXPECT_EQ(m.tpot_ms.count, 2u);
  // ITL pooled: four gaps of 100 ms and two of 300 ms.
  EXPECT_EQ(m.itl_ms.count, 6u);
  EXPECT_NEAR(m.itl_ms.mean, 1000.0 / 6.0, 1e-9);
  EXPECT_NEAR(m.itl_ms.median, 100, 1e-9);
  EXPECT_NEAR(m.itl_ms.max, 300, 1e-9);
  EXPECT_NEAR(m.e2e_ms.mean, 900, 1e-9);
  // Token times: A at 0.5..0.9 (5 in second 0); B at 1.2, 1.5, 1.8 (3 in second 1).
  EXPECT_DOUBLE_EQ(m.max_output_tokens_per_s, 5);
  // A spans second 0, B spans second 1: A's end (1.0) touches second 1, so 2 there.
  EXPECT_EQ(m.max_concurrent_requests, 2);
}

TEST(ComputeMetrics, SingleTokenRequestsHaveNoTpotAndFirstChunkCountsItsTokens) {
  std::vector<RequestTiming> rs = {timing(0.0, 0.25, {}, 0.25, 4, 1),
                                   timing(0.0, 0.3, {}, 0.3, 4, 6)};
  const ServingMetrics m = compute_metrics(rs, 1.0);
  EXPECT_EQ(m.tpot_ms.count, 1u);  // only the 6-token request has output_len > 1
  EXPECT_DOUBLE_EQ(m.tpot_ms.mean, 0.0);
  EXPECT_EQ(m.itl_ms.count, 0u);
  EXPECT_DOUBLE_EQ(m.max_output_tokens_per_s, 7);
}

TEST(ResultBlock, BenchServingLayout) {
  std::vector<RequestTiming> rs = {timing(0.0, 0.5, {0.1, 0.1, 0.1, 0.1}, 1.0, 100)};
  const ServingMetrics m = compute_metrics(rs, 1.0);
  BenchContext ctx;
  ctx.max_concurrency = 256;
  ctx.accept_length = 3.25;
  const std::string block = format_result_block(m, ctx);
  std::vector<std::string> lines;
  std::istringstream in(block);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_GE(lines.size(), 30u) << block;
  EXPECT_EQ(lines.front(), "============ Serving Benchmark Result ============");
  EXPECT_EQ(lines.back(), std::string(50, '='));
  auto has = [&](const std::string& want) {
    for (const auto& l : lines)
      if (l == want) return true;
    return false;
  };
  EXPECT_TRUE(has("Backend:                                 sglang    ")) << block;
  EXPECT_TRUE(has("Traffic request rate:                    inf       ")) << block;
  EXPECT_TRUE(has("Max request concurrency:                 256       ")) << block;
  EXPECT_TRUE(has("Successful requests:                     1         ")) << block;
  EXPECT_TRUE(has("Total generated tokens:                  5         ")) << block;
  EXPECT_TRUE(has("Accept length:                           3.25      ")) << block;
  EXPECT_TRUE(has("Mean TTFT (ms):                          500.00    ")) << block;
  EXPECT_TRUE(has("Mean TPOT (ms):                          125.00    ")) << block;
  EXPECT_TRUE(has("-----Time per Output Token (excl. 1st token)------")) << block;
  EXPECT_TRUE(has("----------------End-to-End Latency----------------")) << block;
  ctx.accept_length.reset();
  ctx.request_rate = 16;
  ctx.max_concurrency.reset();
  const std::string b2 = format_result_block(m, ctx);
  EXPECT_EQ(b2.find("Accept length"), std::string::npos);
  EXPECT_NE(b2.find("Traffic request rate:                    16.0      \n"), std::string::npos);
  EXPECT_NE(b2.find("Max request concurrency:                 not set   \n"), std::string::npos);
}

TEST(MetricsJson, CarriesBenchServingKeys) {
  std::vector<RequestTiming> rs = {timing(0.0, 0.5, {0.1, 0.1}, 0.7, 9)};
  const auto j = metrics_to_json(compute_metrics(rs, 1.0));
  for (const char* k : {"duration",
                        "completed",
                        "total_input_tokens",
                        "total_output_tokens",
                        "request_throughput",
                        "input_throughput",
                        "output_throughput",
                        "total_throughput",
                        "mean_ttft_ms",
                        "median_ttft_ms",
                        "p99_ttft_ms",
                        "mean_tpot_ms",
                        "p90_tpot_ms",
                        "mean_itl_ms",
                        "p95_itl_ms",
                        "max_itl_ms",
                        "mean_e2e_latency_ms",
                        "std_e2e_latency_ms",
                        "concurrency",
                        "max_output_tokens_per_s",
                        "max_concurrent_requests"})
    EXPECT_TRUE(j.contains(k)) << "missing key " << k;
  EXPECT_NEAR(j["mean_tpot_ms"].get<double>(), 100.0, 1e-9);
  EXPECT_EQ(j["total_input_tokens"].get<int64_t>(), 9);
}

TEST(Workload, LengthsStayInTheRandomDatasetRangeAndCoverIt) {
  const uint64_t seed = dsv4::fx::test_seed();
  DSV4_CASE(seed, "lengths of L=10 ratio=0.25 x4000 and L=8192 ratio=1 x50");
  WorkloadRng rng(seed);
  EXPECT_EQ(min_random_len(8192, 1.0), 8192);
  EXPECT_EQ(min_random_len(10, 0.25), 2);
  EXPECT_EQ(min_random_len(10, 0.0), 1);
  const auto lens = sample_lengths(rng, 10, 0.25, 4000);
  std::set<int64_t> seen(lens.begin(), lens.end());
  EXPECT_EQ(*seen.begin(), 2);
  EXPECT_EQ(*seen.rbegin(), 10);
  EXPECT_EQ(seen.size(), 9u);  // every value of [2, 10] drawn
  const auto fixed = sample_lengths(rng, 8192, 1.0, 50);
  for (auto v : fixed) EXPECT_EQ(v, 8192);
}

TEST(Workload, SeedReproducesAndInputIdsAreExact) {
  WorkloadSpec s;
  s.dataset = "uniform-ids";
  s.num_prompts = 20;
  s.input_len = 64;
  s.output_len = 16;
  s.range_ratio = 0.5;
  s.vocab_size = 1000;
  s.request_rate = 50.0;
  s.seed = dsv4::fx::test_seed();
  DSV4_CASE(s.seed, "num_prompts=20 input=64 output=16 ratio=0.5 vocab=1000 rate=50");
  const auto a = make_workload(s);
  const auto b = make_workload(s);
  ASSERT_EQ(a.size(), 20u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].input_ids, b[i].input_ids) << "request " << i;
    EXPECT_EQ(a[i].output_len, b[i].output_len);
    EXPECT_EQ(a[i].send_at_s, b[i].send_at_s);
    EXPECT_GE(a[i].input_ids.size(), 32u);
    EXPECT_LE(a[i].input_ids.size(), 64u);
    EXPECT_GE(a[i].output_len, 8);
    EXPECT_LE(a[i].output_len, 16);
    for (int32_t id : a[i].input_ids) {
      ASSERT_TRUE(id >= 0 && id < 1000) << id;
    }
    if (i) {
      EXPECT_GE(a[i].send_at_s, a[i - 1].send_at_s);
    }
  }
  EXPECT_EQ(a[0].send_at_s, 0.0);
  s.seed += 1;
  EXPECT_NE(make_workload(s)[0].input_ids, a[0].input_ids);
}

TEST(Workload, PoissonGapsHaveTheRequestedMean) {
  const uint64_t seed = dsv4::fx::test_seed();
  DSV4_CASE(seed, "n=20000 rate=4");
  WorkloadRng rng(seed);
  const auto at = arrival_offsets(rng, 20000, 4.0);
  const double mean_gap = at.back() / double(at.size() - 1);
  EXPECT_NEAR(mean_gap, 0.25, 0.25 * 0.03);  // 20000 draws: std of the mean ~0.7%
  WorkloadRng r2(seed);
  for (double t : arrival_offsets(r2, 10, std::nullopt)) EXPECT_EQ(t, 0.0);
}

TEST(Workload, BadValuesNameTheField) {
  WorkloadSpec s;
  s.vocab_size = 0;
  try {
    make_workload(s);
    FAIL() << "vocab_size 0 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("vocab-size=0"), std::string::npos) << e.what();
  }
  s.vocab_size = 10;
  s.range_ratio = 1.5;
  EXPECT_THROW(make_workload(s), std::invalid_argument);
  s.range_ratio = 0.5;
  s.request_rate = -1.0;
  EXPECT_THROW(make_workload(s), std::invalid_argument);
}

}  // namespace

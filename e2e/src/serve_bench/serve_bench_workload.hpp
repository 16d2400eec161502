// Serving-benchmark workload: seeded random lengths, random token prompts and Poisson arrivals.
//
// Lengths follow SGLang bench_serving's random dataset: each request's input and output length is
// an integer drawn uniformly from [max(floor(L * ratio), 1), L]. Prompts are random token ids in
// [0, vocab_size) sent as input_ids, so the server sees exactly the drawn input length. Arrivals
// for a finite request rate R are a Poisson process: exponential gaps with mean 1/R after each
// request. Everything comes from one seeded generator in a fixed order (input lengths, output
// lengths, token ids, arrival gaps), so a seed reproduces the workload on any machine and compiler.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

namespace dsv4::eval::serve {

// std::mt19937_64 (its output sequence is fixed by the C++ standard) with this file's own mappings
// to ranges (std:: distributions differ between standard libraries): the same stream everywhere.
class WorkloadRng {
 public:
  explicit WorkloadRng(uint64_t seed) : engine_(seed) {}
  uint64_t next() { return engine_(); }
  double uniform();                       // [0, 1)
  int64_t range(int64_t lo, int64_t hi);  // integer in [lo, hi], inclusive, unbiased
  double exponential(double rate);        // mean 1/rate

 private:
  std::mt19937_64 engine_;
};

struct WorkloadSpec {
  int64_t num_prompts = 1000;
  int64_t input_len = 1024;
  int64_t output_len = 1024;
  double range_ratio = 0.0;
  int64_t vocab_size = 0;
  std::optional<double> request_rate;  // empty: all requests at time 0
  uint64_t seed = 1;
};

struct BenchRequest {
  std::vector<int32_t> input_ids;
  int64_t output_len = 0;
  double send_at_s = 0;  // offset from the benchmark start at which the request may be sent
};

// Smallest length the random dataset draws for full length `full_len` and `ratio`.
int64_t min_random_len(int64_t full_len, double ratio);
// `n` lengths uniform in [min_random_len(full_len, ratio), full_len].
std::vector<int64_t> sample_lengths(WorkloadRng& rng, int64_t full_len, double ratio, int64_t n);
// Cumulative send offsets: 0 for the first request, then exponential gaps (all 0 without a rate).
std::vector<double> arrival_offsets(WorkloadRng& rng, int64_t n, std::optional<double> rate);

// The benchmark's requests. Throws std::invalid_argument naming the field for bad values.
std::vector<BenchRequest> make_workload(const WorkloadSpec& spec);

}  // namespace dsv4::eval::serve

// Serving-benchmark workloads: seeded lengths, token-id prompts and Poisson arrivals.
//
// Datasets (--dataset-name):
//  - random-ids: SGLang bench_serving's random-ids, draw for draw. After np.random.seed(seed):
//    input lengths = randint(max(int(L_in * ratio), 1), L_in + 1, n), output lengths likewise,
//    offsets = randint(0, V, n), prompt i = [(offsets[i] + i + j) % V for j < input_len[i]]; a
//    finite request rate draws exponential(1 / rate) gaps from the same generator. numpy's
//    legacy RandomState is MT19937 seeded by init_genrand (std::mt19937 is the same engine),
//    randint is masked rejection on 32-bit draws, exponential is -log(1 - u) with u from two
//    draws (a >> 5, b >> 6). The prompt goes out as input_ids, the form bench_serving sends with
//    --tokenize-prompt: by default it decodes the ids to text for the server to re-tokenise,
//    shortened by the tokenizer's special tokens, which changes the counts (the lengths here are
//    exactly the drawn ones).
//  - uniform-ids: this project's earlier workload: lengths uniform in [max(floor(L * ratio), 1), L]
//    and ids uniform in [0, V) from one std::mt19937_64 stream (input lengths, output lengths,
//    ids, arrival gaps), reproducible on any machine and compiler.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
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

// numpy's legacy RandomState (np.random.seed / randint / exponential), bit for bit.
class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed) : mt_(seed) {}
  uint32_t next32() { return uint32_t(mt_()); }
  // np.random.randint(low, high, size=n) for int64 (high exclusive).
  std::vector<int64_t> randint(int64_t low, int64_t high, int64_t n);
  double random_double();            // np.random.random_sample()
  double exponential(double scale);  // np.random.exponential(scale)

 private:
  std::mt19937 mt_;
};

struct WorkloadSpec {
  std::string dataset = "random-ids";  // random-ids | uniform-ids
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

// bench_serving's compute_random_lens: n lengths randint(max(int(full * ratio), 1), full + 1).
std::vector<int64_t> compute_random_lens(NumpyRandomState& rs, int64_t full, double ratio,
                                         int64_t n);
// bench_serving's get_request pacing: each request sent, then exponential(1 / rate) waited (no
// draw without a finite rate).
void exponential_arrivals(NumpyRandomState& rs, std::optional<double> rate,
                          std::vector<BenchRequest>& reqs);

// The benchmark's requests. Throws std::invalid_argument naming the field for bad values.
std::vector<BenchRequest> make_workload(const WorkloadSpec& spec);

}  // namespace dsv4::eval::serve

// Serving-benchmark workload: seeded random lengths, random token prompts and Poisson arrivals.
#include "serve_bench/serve_bench_workload.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace dsv4::eval::serve {
namespace {

[[noreturn]] void bad(const std::string& field, const std::string& value, const std::string& why) {
  throw std::invalid_argument(field + "=" + value + ": " + why);
}

}  // namespace

double WorkloadRng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

int64_t WorkloadRng::range(int64_t lo, int64_t hi) {
  const uint64_t span = uint64_t(hi - lo) + 1;  // 0 means the full 2^64 range
  if (span == 0) return int64_t(next());
  const uint64_t limit = UINT64_MAX - UINT64_MAX % span;  // reject the biased tail
  uint64_t x;
  do x = next();
  while (x >= limit);
  return lo + int64_t(x % span);
}

double WorkloadRng::exponential(double rate) { return -std::log1p(-uniform()) / rate; }

int64_t min_random_len(int64_t full_len, double ratio) {
  return std::max<int64_t>(int64_t(std::floor(double(full_len) * ratio)), 1);
}

std::vector<int64_t> sample_lengths(WorkloadRng& rng, int64_t full_len, double ratio, int64_t n) {
  const int64_t lo = min_random_len(full_len, ratio);
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (auto& v : out) v = rng.range(lo, full_len);
  return out;
}

std::vector<double> arrival_offsets(WorkloadRng& rng, int64_t n, std::optional<double> rate) {
  std::vector<double> out(size_t(n), 0.0);
  if (!rate || std::isinf(*rate)) return out;
  double t = 0;
  for (int64_t i = 0; i < n; ++i) {
    out[size_t(i)] = t;
    t += rng.exponential(*rate);
  }
  return out;
}

std::vector<int64_t> NumpyRandomState::randint(int64_t low, int64_t high, int64_t n) {
  std::vector<int64_t> out(size_t(std::max<int64_t>(n, 0)), low);
  const uint64_t rng = uint64_t(high - 1 - low);  // inclusive span; 0 draws nothing
  if (rng == 0) return out;
  if (rng > 0xFFFFFFFFull) throw std::invalid_argument("randint span above 2^32");
  uint32_t mask = uint32_t(rng);
  for (int s = 1; s < 32; s <<= 1) mask |= mask >> s;
  for (auto& v : out) {
    uint32_t x;
    do x = next32() & mask;
    while (x > rng);
    v = low + int64_t(x);
  }
  return out;
}

double NumpyRandomState::random_double() {
  const uint32_t a = next32() >> 5, b = next32() >> 6;
  return (double(a) * 67108864.0 + double(b)) / 9007199254740992.0;
}

double NumpyRandomState::exponential(double scale) {
  return -std::log(1.0 - random_double()) * scale;
}

std::vector<int64_t> compute_random_lens(NumpyRandomState& rs, int64_t full, double ratio,
                                         int64_t n) {
  return rs.randint(std::max<int64_t>(int64_t(double(full) * ratio), 1), full + 1, n);
}

void exponential_arrivals(NumpyRandomState& rs, std::optional<double> rate,
                          std::vector<BenchRequest>& reqs) {
  double t = 0;
  for (auto& r : reqs) {  // bench_serving's get_request: send, then wait exponential(1 / rate)
    r.send_at_s = t;
    if (rate && !std::isinf(*rate)) t += rs.exponential(1.0 / *rate);
  }
}

namespace {

std::vector<BenchRequest> random_ids_workload(const WorkloadSpec& s) {
  NumpyRandomState rs(uint32_t(s.seed));
  const auto in_lens = compute_random_lens(rs, s.input_len, s.range_ratio, s.num_prompts);
  const auto out_lens = compute_random_lens(rs, s.output_len, s.range_ratio, s.num_prompts);
  const auto offsets = rs.randint(0, s.vocab_size, s.num_prompts);
  std::vector<BenchRequest> reqs(size_t(s.num_prompts));
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].output_len = out_lens[i];
    reqs[i].input_ids.resize(size_t(in_lens[i]));
    for (size_t j = 0; j < reqs[i].input_ids.size(); ++j)
      reqs[i].input_ids[j] = int32_t((offsets[i] + int64_t(i) + int64_t(j)) % s.vocab_size);
  }
  exponential_arrivals(rs, s.request_rate, reqs);
  return reqs;
}

}  // namespace

std::vector<BenchRequest> make_workload(const WorkloadSpec& s) {
  if (s.num_prompts < 1) bad("num-prompts", std::to_string(s.num_prompts), "must be at least 1");
  if (s.input_len < 1) bad("random-input", std::to_string(s.input_len), "must be at least 1");
  if (s.output_len < 1) bad("random-output", std::to_string(s.output_len), "must be at least 1");
  if (!(s.range_ratio >= 0.0 && s.range_ratio <= 1.0))
    bad("random-range-ratio", std::to_string(s.range_ratio), "must lie in [0, 1]");
  if (s.vocab_size < 1 || s.vocab_size > (int64_t(1) << 31))
    bad("vocab-size", std::to_string(s.vocab_size), "must lie in [1, 2^31]");
  if (s.request_rate && !(*s.request_rate > 0))
    bad("request-rate", std::to_string(*s.request_rate), "must be positive (or inf)");

  if (s.dataset == "random-ids") {
    if (s.seed > 0xFFFFFFFFull)
      bad("seed", std::to_string(s.seed), "must be below 2^32 (numpy's np.random.seed)");
    return random_ids_workload(s);
  }
  if (s.dataset != "uniform-ids")
    bad("dataset-name", s.dataset, "is not one of random-ids, uniform-ids");
  WorkloadRng rng(s.seed);
  const auto in_lens = sample_lengths(rng, s.input_len, s.range_ratio, s.num_prompts);
  const auto out_lens = sample_lengths(rng, s.output_len, s.range_ratio, s.num_prompts);
  std::vector<BenchRequest> reqs(size_t(s.num_prompts));
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].output_len = out_lens[i];
    reqs[i].input_ids.resize(size_t(in_lens[i]));
    for (auto& id : reqs[i].input_ids) id = int32_t(rng.range(0, s.vocab_size - 1));
  }
  const auto at = arrival_offsets(rng, s.num_prompts, s.request_rate);
  for (size_t i = 0; i < reqs.size(); ++i) reqs[i].send_at_s = at[i];
  return reqs;
}

}  // namespace dsv4::eval::serve

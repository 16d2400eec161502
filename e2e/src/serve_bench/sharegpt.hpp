// bench_serving's `random` dataset: ShareGPT prompts shuffled by Python's random (seeded like
// bench_serving's random.seed(seed)), encoded by the user's tokenizer or the server's
// /v1/tokenize, repeated or cut to the drawn length, sent as input_ids (or decoded to text).
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "serve_bench/serve_bench_workload.hpp"

namespace dsv4::eval::serve {

// CPython's random module for what bench_serving uses of it: seed(int), getrandbits(k <= 32),
// shuffle (Fisher-Yates from the end with _randbelow by rejection on getrandbits).
class PythonRandom {
 public:
  explicit PythonRandom(uint64_t seed);
  uint32_t getrandbits(int k);
  uint64_t randbelow(uint64_t n);
  template <class T>
  void shuffle(std::vector<T>& x) {
    for (size_t i = x.size(); i-- > 1;) std::swap(x[i], x[size_t(randbelow(i + 1))]);
  }

 private:
  uint32_t next();
  uint32_t mt_[624];
  int index_ = 624;
};

// The first two turns of every ShareGPT conversation with at least two ("conversations" or
// "conversation", each turn's "value"). Throws std::invalid_argument naming the path.
std::vector<std::pair<std::string, std::string>> load_sharegpt(const std::string& path);

// Token ids of each text as the server's tokenizer gives them (special tokens included, as
// transformers' encode does).
using Encoder = std::function<std::vector<std::vector<int32_t>>(const std::vector<std::string>&)>;

// bench_serving's sample_random_requests with random_sample (dataset `random`), its
// --tokenize-prompt form: lengths from np.random as random-ids, the conversations shuffled by
// random.shuffle, each first turn encoded, empty ones skipped, repeated or cut to its length.
std::vector<BenchRequest> random_sharegpt_workload(
    const WorkloadSpec& spec, std::vector<std::pair<std::string, std::string>> conversations,
    const Encoder& encode);

}  // namespace dsv4::eval::serve

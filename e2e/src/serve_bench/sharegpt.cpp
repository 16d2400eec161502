// bench_serving's `random` dataset over ShareGPT, with CPython's random for the shuffle.
#include "serve_bench/sharegpt.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

namespace dsv4::eval::serve {

// init_by_array of MT19937 with the 32-bit words of the seed (CPython's random.seed(int)).
PythonRandom::PythonRandom(uint64_t seed) {
  std::vector<uint32_t> key;
  for (uint64_t s = seed; s; s >>= 32) key.push_back(uint32_t(s));
  if (key.empty()) key.push_back(0);
  mt_[0] = 19650218u;
  for (int i = 1; i < 624; ++i)
    mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + uint32_t(i);
  int i = 1;
  size_t j = 0;
  for (size_t k = std::max<size_t>(624, key.size()); k; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525u)) + key[j] + uint32_t(j);
    if (++i >= 624) mt_[0] = mt_[623], i = 1;
    if (++j >= key.size()) j = 0;
  }
  for (int k = 623; k; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941u)) - uint32_t(i);
    if (++i >= 624) mt_[0] = mt_[623], i = 1;
  }
  mt_[0] = 0x80000000u;
}

uint32_t PythonRandom::next() {
  if (index_ >= 624) {
    for (int k = 0; k < 624; ++k) {
      const uint32_t y = (mt_[k] & 0x80000000u) | (mt_[(k + 1) % 624] & 0x7fffffffu);
      mt_[k] = mt_[(k + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    index_ = 0;
  }
  uint32_t y = mt_[index_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  return y ^ (y >> 18);
}

uint32_t PythonRandom::getrandbits(int k) { return next() >> (32 - k); }

uint64_t PythonRandom::randbelow(uint64_t n) {
  int k = 0;
  while ((uint64_t(1) << k) <= n && k < 32) ++k;  // n.bit_length()
  uint64_t r = getrandbits(k);
  while (r >= n) r = getrandbits(k);
  return r;
}

std::vector<std::pair<std::string, std::string>> load_sharegpt(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::invalid_argument("--dataset-path '" + path + "': cannot open");
  const nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.is_array())
    throw std::invalid_argument("--dataset-path '" + path + "': not a JSON list (ShareGPT)");
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& d : j) {
    if (!d.is_object()) continue;
    const char* key = d.contains("conversations") ? "conversations" : "conversation";
    if (!d.contains(key) || !d[key].is_array() || d[key].size() < 2) continue;
    const auto& c = d[key];
    if (!c[0].is_object() || !c[1].is_object() || !c[0].contains("value") ||
        !c[1].contains("value") || !c[0]["value"].is_string() || !c[1]["value"].is_string())
      throw std::invalid_argument("--dataset-path '" + path +
                                  "': a conversation turn has no string 'value'");
    out.emplace_back(c[0]["value"].get<std::string>(), c[1]["value"].get<std::string>());
  }
  return out;
}

std::vector<BenchRequest> random_sharegpt_workload(
    const WorkloadSpec& s, std::vector<std::pair<std::string, std::string>> conversations,
    const Encoder& encode) {
  if (s.num_prompts < 1 || s.input_len < 1 || s.output_len < 1)
    throw std::invalid_argument("num-prompts, random-input-len and random-output-len must be >= 1");
  if (!(s.range_ratio >= 0.0 && s.range_ratio <= 1.0))
    throw std::invalid_argument("random-range-ratio=" + std::to_string(s.range_ratio) +
                                ": must lie in [0, 1]");
  if (s.seed > 0xFFFFFFFFull)
    throw std::invalid_argument("seed=" + std::to_string(s.seed) +
                                ": must be below 2^32 (numpy's np.random.seed)");
  NumpyRandomState rs(uint32_t(s.seed));
  const auto in_lens = compute_random_lens(rs, s.input_len, s.range_ratio, s.num_prompts);
  const auto out_lens = compute_random_lens(rs, s.output_len, s.range_ratio, s.num_prompts);
  PythonRandom pr(s.seed);
  pr.shuffle(conversations);
  std::vector<BenchRequest> reqs;
  constexpr size_t kBatch = 64;  // prompts per /v1/tokenize call
  for (size_t at = 0; at < conversations.size() && int64_t(reqs.size()) < s.num_prompts;
       at += kBatch) {
    std::vector<std::string> texts;
    for (size_t k = at; k < std::min(conversations.size(), at + kBatch); ++k)
      texts.push_back(conversations[k].first);
    const auto ids = encode(texts);
    for (const auto& p : ids) {
      const size_t i = reqs.size();
      if (int64_t(i) == s.num_prompts) break;
      if (p.empty()) continue;
      BenchRequest r;
      r.output_len = out_lens[i];
      r.input_ids.resize(size_t(in_lens[i]));
      for (size_t j = 0; j < r.input_ids.size(); ++j) r.input_ids[j] = p[j % p.size()];
      reqs.push_back(std::move(r));
    }
  }
  if (int64_t(reqs.size()) < s.num_prompts)
    throw std::invalid_argument("dataset-path: " + std::to_string(reqs.size()) +
                                " usable conversations, fewer than --num-prompts " +
                                std::to_string(s.num_prompts));
  exponential_arrivals(rs, s.request_rate, reqs);
  return reqs;
}

}  // namespace dsv4::eval::serve

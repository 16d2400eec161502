// indexer_topk reference: per-row top-K by SGLang's radix order key, page transform, inverse.
#include "dsv4/ref/indexer_topk.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace dsv4::ref::indexer_topk {
namespace {

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("indexer_topk: " + what);
}

void need(size_t have, size_t want, const char* field) {
  if (have < want)
    bad(std::string(field) + " has " + std::to_string(have) + " entries, needs " +
        std::to_string(want));
}

}  // namespace

bool select_valid(int v) { return v >= 0 && v <= 2; }

const char* select_name(Select s) {
  switch (s) {
    case Select::kSglang:
      return "sglang";
    case Select::kSglangMasked:
      return "sglang_masked";
    default:
      return "dsv4";
  }
}

void mask_topk_scores(std::span<const float> scores, const Rows& r, std::span<int32_t> raw) {
  need(raw.size(), r.B * r.K, "raw");
  if (r.B > 0) need(scores.size(), (r.B - 1) * r.stride + r.width, "scores");
  for (size_t b = 0; b < r.B; ++b)
    for (size_t j = 0; j < r.K; ++j) {
      int32_t& i = raw[b * r.K + j];
      if (i < 0 || size_t(i) >= r.width || !(scores[b * r.stride + size_t(i)] > -INFINITY)) i = -1;
    }
}

uint32_t order_key(float score) {
  uint32_t b;
  std::memcpy(&b, &score, 4);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

bool eligible(float score) { return order_key(score) > 0x007fffffu; }  // key(-inf) = 0x007fffff

void topk(std::span<const float> scores, std::span<const int32_t> lens, const Rows& r, bool sorted,
          std::span<int32_t> raw, Select sel) {
  if (!select_valid(int(sel))) bad("select=" + std::to_string(int(sel)) + " must be 0, 1 or 2");
  if (r.K < 1 || r.K > 2048) bad("K=" + std::to_string(r.K) + " must be in [1, 2048]");
  if (r.stride < r.width)
    bad("stride=" + std::to_string(r.stride) + " must be >= width=" + std::to_string(r.width));
  if (r.B > 0) need(scores.size(), (r.B - 1) * r.stride + r.width, "scores");
  need(lens.size(), r.B, "lens");
  need(raw.size(), r.B * r.K, "raw");
  std::vector<int32_t> keys;
  for (size_t b = 0; b < r.B; ++b) {
    const int64_t len = std::clamp<int64_t>(lens[b], 0, int64_t(r.width));
    int32_t* out = raw.data() + b * r.K;
    std::fill(out, out + r.K, -1);
    if (len <= int64_t(r.K)) {
      for (int64_t i = 0; i < len; ++i) out[i] = int32_t(i);
      continue;
    }
    const float* row = scores.data() + b * r.stride;
    keys.clear();
    for (int64_t i = 0; i < len; ++i)
      if (sel != Select::kDsv4 || eligible(row[i])) keys.push_back(int32_t(i));
    // Descending order key, ties to the smaller index.
    auto before = [&](int32_t x, int32_t y) {
      const uint32_t kx = order_key(row[x]), ky = order_key(row[y]);
      return kx != ky ? kx > ky : x < y;
    };
    const size_t n = std::min(keys.size(), r.K);
    std::partial_sort(keys.begin(), keys.begin() + ptrdiff_t(n), keys.end(), before);
    std::copy(keys.begin(), keys.begin() + ptrdiff_t(n), out);
    if (sorted) std::sort(out, out + n);
  }
  if (sel == Select::kSglangMasked) mask_topk_scores(scores, r, raw);
}

void page_transform(std::span<const int32_t> raw, size_t K, std::span<const int32_t> page_table,
                    size_t pt_stride, int page_bits, std::span<int32_t> out) {
  if (page_bits < 0 || page_bits > 30)
    bad("page_bits=" + std::to_string(page_bits) + " must be in [0, 30]");
  if (K == 0) bad("K=0");
  const size_t B = raw.size() / K;
  need(out.size(), raw.size(), "out");
  const uint32_t mask = (1u << page_bits) - 1u;
  for (size_t b = 0; b < B; ++b)
    for (size_t j = 0; j < K; ++j) {
      const int32_t i = raw[b * K + j];
      if (i < 0) {
        out[b * K + j] = -1;
        continue;
      }
      const size_t page = size_t(uint32_t(i) >> page_bits);
      if (page >= pt_stride)
        bad("raw index " + std::to_string(i) + " of row " + std::to_string(b) +
            " lies past the page table's " + std::to_string(pt_stride) + " pages");
      const uint32_t phys = uint32_t(page_table[b * pt_stride + page]);
      out[b * K + j] = int32_t((phys << page_bits) | (uint32_t(i) & mask));
    }
}

void inverse_page_transform(std::span<const int32_t> paged, size_t K,
                            std::span<const int32_t> page_table, size_t pt_stride,
                            size_t pages_per_row, int page_bits, std::span<int32_t> raw) {
  if (K == 0) bad("K=0");
  if (pages_per_row > pt_stride) bad("pages_per_row exceeds pt_stride");
  const size_t B = paged.size() / K;
  need(raw.size(), paged.size(), "raw");
  const uint32_t mask = (1u << page_bits) - 1u;
  for (size_t b = 0; b < B; ++b) {
    std::unordered_map<int32_t, int32_t> logical;
    for (size_t p = 0; p < pages_per_row; ++p) {
      const auto [it, fresh] = logical.emplace(page_table[b * pt_stride + p], int32_t(p));
      if (!fresh) bad("page table row " + std::to_string(b) + " repeats a page: not invertible");
    }
    for (size_t j = 0; j < K; ++j) {
      const int32_t v = paged[b * K + j];
      if (v < 0) {
        raw[b * K + j] = -1;
        continue;
      }
      const auto it = logical.find(int32_t(uint32_t(v) >> page_bits));
      if (it == logical.end())
        bad("paged index " + std::to_string(v) + " of row " + std::to_string(b) +
            " names no page of the table");
      raw[b * K + j] = int32_t((uint32_t(it->second) << page_bits) | (uint32_t(v) & mask));
    }
  }
}

}  // namespace dsv4::ref::indexer_topk

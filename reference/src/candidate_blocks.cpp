// candidate_blocks reference: block scores, the two top-k levels and SGLang's NaN drop.
#include "dsv4/ref/candidate_blocks.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "dsv4/ref/indexer_topk.hpp"

namespace dsv4::ref::candidate_blocks {
namespace {

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("candidate_blocks: " + what);
}

// The top `k` of items (their scores given), by order key then smaller item, excluding items whose
// key is not above -inf's; returns the chosen items with a score > -inf (NaN dropped), ascending.
std::vector<int32_t> top_then_drop_nan(const std::vector<float>& score,
                                       const std::vector<int32_t>& item, size_t k) {
  std::vector<size_t> order;
  for (size_t i = 0; i < score.size(); ++i)
    if (indexer_topk::eligible(score[i])) order.push_back(i);
  auto before = [&](size_t x, size_t y) {
    const uint32_t kx = indexer_topk::order_key(score[x]), ky = indexer_topk::order_key(score[y]);
    return kx != ky ? kx > ky : item[x] < item[y];
  };
  const size_t n = std::min(k, order.size());
  std::partial_sort(order.begin(), order.begin() + ptrdiff_t(n), order.end(), before);
  std::vector<int32_t> out;
  for (size_t i = 0; i < n; ++i)
    if (!std::isnan(score[order[i]])) out.push_back(item[order[i]]);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

float block_score(std::span<const float> row, size_t len, size_t bs, size_t j) {
  float m = -std::numeric_limits<float>::infinity();
  for (size_t i = j * bs; i < std::min(len, (j + 1) * bs); ++i) {
    if (std::isnan(row[i])) return std::numeric_limits<float>::quiet_NaN();
    m = std::max(m, row[i]);
  }
  return m;
}

void select(std::span<const float> scores, std::span<const int32_t> lens, const Rows& r,
            const Config& c, std::span<int32_t> blocks_out, std::span<int32_t> keys_out) {
  if (c.bs < 1) bad("bs=0 must be >= 1");
  if (c.nb < 1 || c.nb > 2048) bad("nb=" + std::to_string(c.nb) + " must be in [1, 2048]");
  if (c.K < 1 || c.K > 2048) bad("K=" + std::to_string(c.K) + " must be in [1, 2048]");
  if (r.stride < r.width)
    bad("stride=" + std::to_string(r.stride) + " must be >= width=" + std::to_string(r.width));
  if (r.B > 0 && scores.size() < (r.B - 1) * r.stride + r.width) bad("scores is too short");
  if (lens.size() < r.B) bad("lens has fewer than B entries");
  if (blocks_out.size() < r.B * c.nb) bad("blocks_out has fewer than B*nb entries");
  if (keys_out.size() < r.B * c.K) bad("keys_out has fewer than B*K entries");
  for (size_t b = 0; b < r.B; ++b) {
    const size_t len = size_t(std::clamp<int64_t>(lens[b], 0, int64_t(r.width)));
    const std::span<const float> row = scores.subspan(b * r.stride, r.width);
    const size_t n = (len + c.bs - 1) / c.bs;
    std::vector<float> bscore(n);
    std::vector<int32_t> bidx(n);
    for (size_t j = 0; j < n; ++j) {
      bscore[j] =
          j == n - 1 ? std::numeric_limits<float>::infinity() : block_score(row, len, c.bs, j);
      bidx[j] = int32_t(j);
    }
    const std::vector<int32_t> kept = top_then_drop_nan(bscore, bidx, c.nb);
    std::vector<float> kscore;
    std::vector<int32_t> kidx;
    for (int32_t j : kept)
      for (size_t i = size_t(j) * c.bs; i < std::min(len, size_t(j + 1) * c.bs); ++i) {
        kscore.push_back(row[i]);
        kidx.push_back(int32_t(i));
      }
    const std::vector<int32_t> keys = top_then_drop_nan(kscore, kidx, c.K);
    int32_t* bo = blocks_out.data() + b * c.nb;
    int32_t* ko = keys_out.data() + b * c.K;
    std::fill(bo, bo + c.nb, -1);
    std::fill(ko, ko + c.K, -1);
    std::copy(kept.begin(), kept.end(), bo);
    std::copy(keys.begin(), keys.end(), ko);
  }
}

}  // namespace dsv4::ref::candidate_blocks

// ring_layout reference: write-side locs, read-side window rows, prefill slot expansion.
#include "dsv4/ref/ring_layout.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace dsv4::ref::ring_layout {
namespace {

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("ring_layout: " + what);
}

void need(size_t have, size_t want, const char* field, const char* why) {
  if (have < want)
    bad(std::string(field) + " has " + std::to_string(have) + " entries, needs " +
        std::to_string(want) + " (" + why + ")");
}

// A real token's slot and position resolve inside the pool.
bool valid(const Ring& g, int64_t slot, int64_t pos) {
  return slot >= 0 && slot < g.n_slots && pos >= 0;
}

// pos <= final_pos - win, without overflow (pos >= 0 here, win >= 1).
bool before_window(int64_t pos, int64_t final_pos, int64_t win) {
  return final_pos >= win && pos <= final_pos - win;
}

int64_t ring_row(const Ring& g, int64_t slot, int64_t pos) { return slot * g.ring + pos % g.ring; }

}  // namespace

void check_ring(const Ring& g) {
  if (g.win < 1) bad("win=" + std::to_string(g.win) + " must be >= 1");
  if (g.ring < g.win)
    bad("ring=" + std::to_string(g.ring) + " must be >= win=" + std::to_string(g.win));
  if (g.n_slots < 0) bad("n_slots=" + std::to_string(g.n_slots) + " must be >= 0");
  if (g.n_slots > 0 && g.ring > std::numeric_limits<int32_t>::max() / g.n_slots)
    bad("ring=" + std::to_string(g.ring) + " x n_slots=" + std::to_string(g.n_slots) +
        " pool rows exceed INT32_MAX");
}

int64_t token_locs(std::span<const int64_t> slot, std::span<const int64_t> pos,
                   std::span<const int64_t> final_pos, const Ring& g, std::span<int64_t> loc) {
  check_ring(g);
  const size_t T = slot.size();
  need(pos.size(), T, "pos", "one per token");
  if (!final_pos.empty()) need(final_pos.size(), T, "final_pos", "one per token, or none");
  need(loc.size(), T, "loc", "one per token");
  int64_t errors = 0;
  for (size_t t = 0; t < T; ++t) {
    loc[t] = -1;
    if (slot[t] == -1) continue;
    if (!valid(g, slot[t], pos[t])) {
      ++errors;
      continue;
    }
    if (!final_pos.empty() && before_window(pos[t], final_pos[t], g.win)) continue;
    loc[t] = ring_row(g, slot[t], pos[t]);
  }
  return errors;
}

int64_t verify_locs(std::span<const int64_t> slot, std::span<const int64_t> pos,
                    std::span<const int32_t> commit_len, size_t V, const Ring& g,
                    std::span<int64_t> loc) {
  check_ring(g);
  const size_t B = slot.size();
  need(pos.size(), B * V, "pos", "B x V verify tokens");
  need(commit_len.size(), B, "commit_len", "one per request");
  need(loc.size(), B * V, "loc", "B x V verify tokens");
  int64_t errors = 0;
  for (size_t b = 0; b < B; ++b)
    for (size_t col = 0; col < V; ++col) {
      const size_t t = b * V + col;
      loc[t] = -1;
      if (slot[b] == -1 || int64_t(col) >= int64_t(commit_len[b])) continue;
      if (!valid(g, slot[b], pos[t])) {
        ++errors;
        continue;
      }
      loc[t] = ring_row(g, slot[b], pos[t]);
    }
  return errors;
}

int64_t window_rows(std::span<const int32_t> batch_id, std::span<const int64_t> pos,
                    std::span<const int64_t> slot, const Ring& g, std::span<int32_t> indptr,
                    std::span<int32_t> rows) {
  check_ring(g);
  const size_t D = batch_id.size(), B = slot.size();
  need(pos.size(), D, "pos", "one per decode token");
  need(indptr.size(), D + 1, "indptr", "D + 1 offsets");
  need(rows.size(), D * size_t(g.win), "rows", "D x win, the most the tokens can need");
  if (D * size_t(g.win) > size_t(std::numeric_limits<int32_t>::max()))
    bad("D=" + std::to_string(D) + " x win=" + std::to_string(g.win) + " rows exceed INT32_MAX");
  int64_t errors = 0;
  int32_t at = 0;
  indptr[0] = 0;
  for (size_t d = 0; d < D; ++d) {
    const int32_t b = batch_id[d];
    int64_t n = 0;
    if (b != -1) {
      if (b < 0 || size_t(b) >= B || !valid(g, slot[size_t(b)], pos[d])) {
        ++errors;
      } else {
        const int64_t p = pos[d];
        n = std::min(p, g.win - 1) + 1;  // min(p + 1, win) without overflow
        for (int64_t i = 0; i < n; ++i)
          rows[size_t(at + i)] = int32_t(ring_row(g, slot[size_t(b)], p - n + 1 + i));
      }
    }
    at += int32_t(n);
    indptr[d + 1] = at;
  }
  return errors;
}

int64_t prefill_slots(std::span<const int64_t> req_slot, std::span<const int32_t> indptr,
                      std::span<const int64_t> pos, std::span<int64_t> token_slot,
                      std::span<int64_t> final_pos) {
  const size_t B = req_slot.size(), T = pos.size();
  need(indptr.size(), B + 1, "indptr", "B + 1 offsets");
  need(token_slot.size(), T, "token_slot", "one per token");
  need(final_pos.size(), T, "final_pos", "one per token");
  int64_t errors = 0;
  for (size_t t = 0; t < T; ++t) {
    token_slot[t] = -1;
    final_pos[t] = -1;
    // The request holding token t: the last b with indptr[b] <= t (indptr is non-decreasing).
    const auto it = std::upper_bound(indptr.begin(), indptr.begin() + B + 1, int64_t(t),
                                     [](int64_t v, int32_t e) { return v < int64_t(e); });
    const int64_t b = (it - indptr.begin()) - 1;
    if (b < 0 || size_t(b) >= B) continue;  // before the first request or past the last
    const int64_t end = indptr[size_t(b) + 1];
    if (end > int64_t(T)) {
      ++errors;
      continue;
    }
    token_slot[t] = req_slot[size_t(b)];
    final_pos[t] = pos[size_t(end - 1)];
  }
  return errors;
}

}  // namespace dsv4::ref::ring_layout

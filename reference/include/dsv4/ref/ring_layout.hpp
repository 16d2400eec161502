// ring_layout reference: the specification of the sliding-window ring's integer layout (which pool
// row each token's KV is written to, and which rows a decode token reads), bitwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace dsv4::ref::ring_layout {

// Semantics. Each request owns a state slot; its sliding-window KV lives in `ring` consecutive pool
// rows starting at slot*ring, position p in row slot*ring + p % ring. The window is `win` tokens;
// `ring = win + draft_tokens - 1` rows (ring_rows()) so that a verify step's draft tokens can be
// written while the oldest query of the step still finds its whole window (the newest write,
// p + draft - 1, is then exactly ring - 1 positions past the oldest row read, p - win + 1).
//
// Write side (int64 locs for kv_store):
//   token_locs:  loc[t] = slot[t]*ring + pos[t] % ring; -1 where slot[t] == -1 (padding) or, when
//                final positions are given, pos[t] <= final_pos[t] - win (only the last `win`
//                tokens of a prefill chunk land in the ring, so no two tokens of one launch share a
//                row). A negative final_pos[t] masks nothing.
//   verify_locs: [B, V] layout, loc[b*V + col] as above with slot[b]; -1 where slot[b] == -1 or the
//                token is uncommitted: col >= commit_len[b] (commit_len outside [0, V] clamps).
// Read side (int32 rows for the attention kernel):
//   window_rows: for decode token d with batch id b = batch_id[d] >= 0: n = min(pos[d] + 1, win)
//                rows slot[b]*ring + (pos[d] - n + 1 + i) % ring, i = 0..n-1 (oldest first),
//                packed: rows[indptr[d] .. indptr[d+1]), indptr[0] = 0. batch_id -1 (graph padding)
//                gives an empty range; rows past indptr[D] are left as they were.
// Prefill expansion (what the DSpark prefill injection computes):
//   prefill_slots: token t of request b (indptr[b] <= t < indptr[b+1], indptr non-decreasing) gets
//                token_slot[t] = req_slot[b] and final_pos[t] = pos[indptr[b+1] - 1], the position
//                of the request's last token in the chunk; tokens of no request (graph padding past
//                indptr[B]) get -1 and -1.
// Errors (counted, one per token; the token gets -1 / an empty range, never a row outside the
// pool):
//   a slot outside [0, n_slots) other than the padding value -1 (for uncommitted tokens nothing is
//   checked), a negative position, a batch id other than -1 outside [0, B), and in prefill_slots a
//   request whose last token lies past T.
// Relation to SGLang's DSV4 path: the ring size (sliding window + draft tokens - 1) and the row
// formula (request slot * ring + position % ring, with a commit mask on the verify step's writes)
// are SGLang's. SGLang sends masked writes to a sink row; here they are -1, the convention of the
// rest of this project, so kv_store skips them. The edge rules the design leaves open (the padding
// value -1, negative final_pos, commit_len outside [0, V], counting bad entries instead of
// clamping) are chosen so that no padded or malformed entry can name a row outside its own slot's
// ring.

// The ring's geometry. Pool rows = ring * n_slots, which must fit int32 (the read side's indices).
struct Ring {
  int64_t ring = 0;     // rows per slot, >= win
  int64_t win = 0;      // sliding window, >= 1
  int64_t n_slots = 0;  // state slots
  int64_t rows() const { return ring * n_slots; }
};

// DSpark's ring for a window and a draft length: win + draft_tokens - 1.
constexpr int64_t ring_rows(int64_t win, int64_t draft_tokens) { return win + draft_tokens - 1; }

// Throws std::invalid_argument naming the field: win < 1, ring < win, n_slots < 0, or
// ring * n_slots > INT32_MAX.
void check_ring(const Ring& g);

// The functions below return the number of errors. Sizes are checked (std::invalid_argument).
int64_t token_locs(std::span<const int64_t> slot, std::span<const int64_t> pos,
                   std::span<const int64_t> final_pos,  // empty: no final positions
                   const Ring& g, std::span<int64_t> loc);

int64_t verify_locs(std::span<const int64_t> slot, std::span<const int64_t> pos,
                    std::span<const int32_t> commit_len, size_t V, const Ring& g,
                    std::span<int64_t> loc);

// rows must hold batch_id.size() * win entries (the most the tokens can need).
int64_t window_rows(std::span<const int32_t> batch_id, std::span<const int64_t> pos,
                    std::span<const int64_t> slot, const Ring& g, std::span<int32_t> indptr,
                    std::span<int32_t> rows);

int64_t prefill_slots(std::span<const int64_t> req_slot, std::span<const int32_t> indptr,
                      std::span<const int64_t> pos, std::span<int64_t> token_slot,
                      std::span<int64_t> final_pos);

}  // namespace dsv4::ref::ring_layout

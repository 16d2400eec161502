// ring_layout launchers: sliding-window ring locs for the KV write path (prefill, verify) and the
// window rows a decode token reads. Semantics: dsv4/ref/ring_layout.hpp (the specification).
#pragma once

#include <cstdint>

#include "dsv4/gpu/runtime.hpp"
#include "dsv4/kernels/error_counter.hpp"

namespace dsv4::kernels::ring_layout {

// The ring's geometry: slot s owns pool rows [s*ring, (s+1)*ring). win >= 1, ring >= win,
// ring * n_slots <= INT32_MAX (the read side's row indices are int32).
struct Ring {
  int64_t ring = 0;
  int64_t win = 0;
  int64_t n_slots = 0;
};

// DSpark's ring for a window and a draft length: win + draft_tokens - 1.
constexpr int64_t ring_rows(int64_t win, int64_t draft_tokens) { return win + draft_tokens - 1; }

// Every launcher: device pointers, enqueued on s without synchronisation (capturable), invalid
// entries counted in *errors (see dsv4/kernels/error_counter.hpp), bad arguments throw
// std::invalid_argument naming the field.

// loc[t] = slot[t]*ring + pos[t]%ring for T tokens; final_pos may be null (no window cut).
void token_locs(const int64_t* slot, const int64_t* pos, const int64_t* final_pos, int64_t T,
                const Ring& g, int64_t* loc, int64_t* errors, gpu::Stream s);

// The [B, V] verify layout: slot[B], pos[B*V], commit_len[B] -> loc[B*V].
void verify_locs(const int64_t* slot, const int64_t* pos, const int32_t* commit_len, int64_t B,
                 int64_t V, const Ring& g, int64_t* loc, int64_t* errors, gpu::Stream s);

// How window_rows fills, every variant giving the same bytes. All first count each tile's rows
// (a block per tile of 256 tokens, the count kept in the tile's first indptr entry, so no
// workspace is needed). kWindowLookback (the default): one more launch (allowed to start while
// the counts run, where the device can), in which each tile's block (1024 threads, 512 on AMD,
// while every tile's block fits on the device at once, else 256) sums the counts of the tiles
// before it itself and writes its indptr entries and its rows as one contiguous range of streaming
// (evict-first) 16-byte stores;
// kWindowLookbackPlain: the same with plain stores (on an H200 at 65536 / 262144 tokens, with
// blocks of 256, 20.90 / 48.77 us against the streaming 19.81 / 47.20); kWindowThreePass: one
// block turns the counts into the tiles' offsets, then each tile writes its entries and its rows
// a warp per token (three launches: 20.42 / 57.09); kWindowLookbackNarrow: the default's fill in
// blocks of 256 threads, launched after the counts end (the default before, 19.69 / 47.98).
inline constexpr int kWindowLookback = 0;
inline constexpr int kWindowLookbackPlain = 1;
inline constexpr int kWindowThreePass = 2;
inline constexpr int kWindowLookbackNarrow = 3;
inline constexpr int kWindowVariants = 4;
struct WindowOptions {
  int variant = kWindowLookback;
};

// Read side for D decode tokens: batch_id[D] (-1 = padding), pos[D], slot[B] -> indptr[D+1] and
// rows (capacity D*win; entries past indptr[D] are not written; rows 4-byte aligned, any offset).
void window_rows(const int32_t* batch_id, const int64_t* pos, int64_t D, const int64_t* slot,
                 int64_t B, const Ring& g, int32_t* indptr, int32_t* rows, int64_t* errors,
                 gpu::Stream s, const WindowOptions& opt = {});

// Prefill expansion: req_slot[B], indptr[B+1] (token offsets of each request in the chunk),
// pos[T] -> token_slot[T], final_pos[T].
void prefill_slots(const int64_t* req_slot, const int32_t* indptr, int64_t B, const int64_t* pos,
                   int64_t T, int64_t* token_slot, int64_t* final_pos, int64_t* errors,
                   gpu::Stream s);

}  // namespace dsv4::kernels::ring_layout

// split_combine launcher: merges split-KV attention partials (normalised o, base-2 lse) into a
// bf16 output and a natural-log lse, with an optional per-head sink and inverse RoPE.
// Semantics: dsv4/ref/split_combine.hpp (the reference is the specification).
#pragma once

#include <cstdint>

#include "dsv4/gpu/runtime.hpp"
#include "dsv4/kernels/error_counter.hpp"
#include "dsv4/ref/formats/bf16.hpp"

namespace dsv4::kernels::split_combine {

// Inverse RoPE of the last rope_dim values of every row at its batch row's position.
struct Rope {
  const float* cos_sin = nullptr;  // [n_pos, rope_dim] (cos, sin) pairs; null: no RoPE
  int64_t n_pos = 0;
  int rope_dim = 64;                   // even, <= D
  const int64_t* positions = nullptr;  // [B]
};

// Device pointers, all contiguous. o: 16-byte aligned; out: 8-byte aligned.
struct Args {
  int64_t B = 0, S = 0, H = 0, D = 0;  // D a multiple of 4
  const float* o = nullptr;            // [B, S, H, D]
  const float* lse = nullptr;          // [B, S, H], base 2, -inf = empty split
  const int32_t* n_splits = nullptr;   // [B], clamped to [0, S]; null: S for every row
  const float* sink = nullptr;         // [H] natural-log units, or null
  Rope rope;
  bf16* out = nullptr;        // [B, H, D]
  float* out_lse = nullptr;   // [B, H], natural log, sink excluded; +inf: empty row
  int64_t* errors = nullptr;  // positions outside the table (one per batch row); may be
                              // null when there is no RoPE
  // 0: the block stages each split's weights in shared memory when S <= 256 (the default), its
  // 128 lanes striding over the splits (one each up to S = 128, two each from S = 129); 1: every
  // lane computes every weight itself. The same bits either way.
  int variant = 0;
};

// Enqueues the merge on s (capturable, no synchronisation). B*H = 0 launches nothing. Bad
// arguments throw std::invalid_argument naming the field.
void combine(const Args& a, gpu::Stream s);

}  // namespace dsv4::kernels::split_combine

// kv_store launchers: scatter bf16 KV rows into the pool, and the fused RMSNorm + RoPE + bf16
// store. Semantics: dsv4/ref/kv_store.hpp (the reference is the specification).
#pragma once

#include <cstdint>

#include "dsv4/gpu/runtime.hpp"
#include "dsv4/kernels/error_counter.hpp"
#include "dsv4/ref/formats/bf16.hpp"

namespace dsv4::kernels::kv_store {

// Rows of `width` bf16 values (a positive multiple of 8), consecutive rows `stride` values apart
// (0 means width; otherwise a multiple of 8 >= width).
struct RowLayout {
  int64_t width = 512;
  int64_t src_stride = 0;   // between rows of kv
  int64_t pool_stride = 0;  // between rows of the pool
};

// Parameters of the fused variant. Device pointers, 16-byte aligned.
struct NormRope {
  const float* weight = nullptr;       // [width], RMSNorm weight
  const float* cos_sin = nullptr;      // [n_pos, rope_dim]: (cos, sin) per RoPE pair
  int64_t n_pos = 0;                   // rows of cos_sin
  const int64_t* positions = nullptr;  // [T], each row's position
  float eps = 1e-6f;
  int rope_dim = 64;  // the last rope_dim values get RoPE; a positive multiple of 8 <= width
  // Lanes per row for the sum of squares, which fixes its fp32 order (see the reference):
  // 16 or 32 on every device, 64 on wave64 (AMD CDNA) devices.
  int lanes = 32;
};

// The lane counts this build's kernels exist for (64 only where the backend's wave is 64 wide).
bool lanes_supported(int lanes);

// Throws std::invalid_argument naming both numbers when `lanes` lanes per row do not fit in one
// wave of `wave_width` lanes (64 lanes on a wave32 AMD device, gfx1030 or gfx1250, would shuffle
// across waves and sum wrongly). norm_rope_store checks the device's wave width this way.
void check_lanes_fit_wave(int lanes, int wave_width);

// pool[loc[t]] = kv[t] for T rows. loc[t] < 0 is skipped; loc[t] >= pool_rows writes nothing and
// adds 1 to *errors. T = 0 launches nothing. kv, pool: 16-byte aligned device pointers. Bad
// arguments throw std::invalid_argument naming the field. Enqueued on s; no synchronisation, so
// it can be captured into a graph.
void scatter_rows(const bf16* kv, const int64_t* loc, int64_t T, bf16* pool, int64_t pool_rows,
                  const RowLayout& layout, int64_t* errors, gpu::Stream s);

// pool[loc[t]] = bf16(rope(rmsnorm(kv[t]) * weight)) for T rows; the same loc rules, and a row
// whose position is outside [0, n_pos) is rejected (counted, not written).
void norm_rope_store(const bf16* kv, const int64_t* loc, int64_t T, bf16* pool, int64_t pool_rows,
                     const RowLayout& layout, const NormRope& p, int64_t* errors, gpu::Stream s);

}  // namespace dsv4::kernels::kv_store

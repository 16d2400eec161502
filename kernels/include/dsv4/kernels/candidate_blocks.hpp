// candidate_blocks launcher: the two-level DSV4 indexer (top blocks by maximum score, then the top
// keys inside them, sorted). Semantics: dsv4/ref/candidate_blocks.hpp (the specification).
#pragma once

#include <cstdint>

#include "dsv4/gpu/runtime.hpp"

namespace dsv4::kernels::candidate_blocks {

// Device pointers; enqueued on the stream without synchronisation (capturable).
struct Args {
  const float* scores = nullptr;  // [B, stride]; keys i < min(lens[b], width) are read
  int64_t stride = 0;             // >= width
  int64_t width = 0;
  const int32_t* lens = nullptr;  // [B]
  int64_t B = 0;
  int64_t bs = 64;                // keys per block, >= 1
  int64_t nb = 16;                // blocks per row, 1..2048
  int64_t K = 512;                // keys per row, 1..2048
  int32_t* blocks_out = nullptr;  // [B, nb], optional: the kept blocks ascending, -1 last
  int32_t* keys_out = nullptr;    // [B, K]: the kept keys ascending, -1 last
};

// The logical wave widths the sorts exist for in this build (as indexer_topk::wave_supported).
bool wave_supported(int W);

void select(const Args& a, gpu::Stream s);
void select(const Args& a, int W, gpu::Stream s);

}  // namespace dsv4::kernels::candidate_blocks

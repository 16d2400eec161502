// indexer_topk launcher: per-row top-K of fp32 indexer scores with SGLang's page transform and an
// optional in-kernel sorted output. Semantics: dsv4/ref/indexer_topk.hpp (the specification).
#pragma once

#include <cstdint>

#include "dsv4/gpu/runtime.hpp"

namespace dsv4::kernels::indexer_topk {

// Device pointers; enqueued on the stream without synchronisation (capturable).
struct Args {
  const float* scores = nullptr;  // [B, stride], row b's keys i < min(lens[b], width) are read
  int64_t stride = 0;             // >= width
  int64_t width = 0;              // columns per row; lengths clamp to [0, width]
  const int32_t* lens = nullptr;  // [B]
  int64_t B = 0;
  int64_t K = 512;  // 1..2048
  // Page transform (optional): out = (page_table[b*pt_stride + (raw >> page_bits)] << page_bits)
  // | (raw & mask). Without a page table, out holds the raw indices.
  const int32_t* page_table = nullptr;
  int64_t pt_stride = 0;
  int page_bits = 0;           // page size 2^page_bits, 0..30
  int32_t* out = nullptr;      // [B, K]
  int32_t* raw_out = nullptr;  // [B, K], optional: the raw indices aligned with out
  bool sorted = false;         // ascending raw index, -1 last (a bitonic network in the kernel)
};

// The logical wave widths this build's sort exists for: 16 and 32 everywhere, 64 where the
// backend's wave is 64 wide (the host-only build type-checks all three).
bool wave_supported(int W);

// Top-K with the device's own wave width (32 on NVIDIA; the device's warpSize on AMD).
void topk(const Args& a, gpu::Stream s);
// The same with an explicit logical wave width W for the sort (tests run 16 and 32 on NVIDIA).
void topk(const Args& a, int W, gpu::Stream s);

}  // namespace dsv4::kernels::indexer_topk

// sparse_decode launchers: DSV4 sparse decode attention of bf16 queries over SGLang's paged KV
// layouts (v41, v41_fp4, v4), unsplit or as split-KV partials for split_combine.
// Semantics: dsv4/ref/sparse_decode.hpp (the reference is the specification).
#pragma once

#include <cstdint>

#include "dsv4/gpu/runtime.hpp"
#include "dsv4/kernels/error_counter.hpp"
#include "dsv4/ref/formats/bf16.hpp"
#include "dsv4/ref/formats/page_layout.hpp"

namespace dsv4::kernels::sparse_decode {

// One cache: a pool of num_pages pages of page_layout(layout).page_bytes(page_size) bytes
// (16-byte aligned), and per query an index list (row stride K) and a length.
struct Cache {
  KvLayout layout = KvLayout::kV41;
  int64_t page_size = 64;
  int64_t num_pages = 0;
  const uint8_t* pool = nullptr;
  const int32_t* indices = nullptr;  // [B, K]
  int64_t K = 0;
  const int32_t* lengths = nullptr;  // [B]
};

struct Args {
  int64_t B = 0, H = 0;     // H a multiple of 16
  const bf16* q = nullptr;  // [B, H, 512], 16-byte aligned
  Cache main;
  Cache extra;  // extra.pool == nullptr: no extra cache
  float sm_scale = 0;
  const float* sink = nullptr;  // [H] natural-log units, or null
  int64_t* errors = nullptr;    // error columns are added here (never reset)
};

// out [B, H, 512] bf16 and lse [B, H] (natural log, sink excluded; +inf for a query without
// keys). Enqueued on s (capturable). B = 0 launches nothing. Bad arguments throw
// std::invalid_argument naming the field.
void decode(const Args& a, bf16* out, float* lse, gpu::Stream s);

// decode() with a workspace: the keys of all queries scheduled over the device. Each query
// costs its key tiles plus one; the row of all queries' costs is cut into decode_splits(a)
// equal parts (one per compute unit for each block of heads), a small kernel on the device
// writes the cuts (no length is read on the host, so the call captures into a graph), and each
// part's block runs the queries it touches: a query inside one part is written there, the pieces
// of a query cut by parts are partials merged afterwards by split_combine's row merge (the sink
// applied there). Past kMaxPlanQueries queries (8192) it splits columns evenly instead: enough
// blocks to fill the device once, at least kMinKeysPerSplit keys a split, at most kMaxAutoSplits,
// merged by split_combine; 1 (no workspace) when the unsplit grid fills the device.
// decode_workspace_bytes(a) is what either needs. The same contract as decode() above, held to
// the same tolerance of the reference (the sums run in another order, so not its bits). A
// workspace smaller than decode_workspace_bytes(a) throws std::invalid_argument naming both sizes.
constexpr int64_t kMaxPlanQueries = 8192;
constexpr int64_t kMinKeysPerSplit = 32;  // one key tile
constexpr int64_t kMaxAutoSplits = 64;
int64_t decode_splits(const Args& a);
size_t decode_workspace_bytes(const Args& a);
void decode(const Args& a, bf16* out, float* lse, void* workspace, size_t workspace_bytes,
            gpu::Stream s);

// Split-KV partials: o [B, S, H, 512] fp32 (each normalised by its own sum) and lse [B, S, H]
// base 2 (-inf: a split without keys, its o then 0), S >= 1; merge with split_combine::combine
// (n_splits = S, the sink there).
void decode_partials(const Args& a, int64_t S, float* o, float* lse, gpu::Stream s);

}  // namespace dsv4::kernels::sparse_decode

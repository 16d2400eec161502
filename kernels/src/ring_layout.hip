// ring_layout kernels: per-token ring locs (flat and verify layouts), prefill slot expansion, and
// the read side's packed window rows (a three-pass tiled offset scan that fills the rows).
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

#include "dsv4/gpu/gpu.hpp"
#include "dsv4/kernels/ring_layout.hpp"

namespace dsv4::kernels::ring_layout {
namespace {

constexpr int kBlock = 256;
constexpr int kScanThreads = 256;
// Tokens per thread per tile of the offset scan (8 spills scalar registers on gfx942).
constexpr int kScanItems = 4;

__device__ __forceinline__ void count_error(int64_t* errors) {
  atomicAdd(reinterpret_cast<unsigned long long*>(errors), 1ull);
}

__device__ __forceinline__ bool valid(const Ring& g, int64_t slot, int64_t pos) {
  return slot >= 0 && slot < g.n_slots && pos >= 0;
}

// pos <= final_pos - win, without overflow (pos >= 0, win >= 1).
__device__ __forceinline__ bool before_window(int64_t pos, int64_t final_pos, int64_t win) {
  return final_pos >= win && pos <= final_pos - win;
}

__global__ void __launch_bounds__(kBlock)
    token_locs_kernel(const int64_t* slot, const int64_t* pos, const int64_t* final_pos, int64_t T,
                      Ring g, int64_t* loc, int64_t* errors) {
  const int64_t t = int64_t(blockIdx.x) * kBlock + threadIdx.x;
  if (t >= T) return;
  const int64_t s = slot[t];
  int64_t out = -1;
  if (s != -1) {
    const int64_t p = pos[t];
    if (!valid(g, s, p))
      count_error(errors);
    else if (!final_pos || !before_window(p, final_pos[t], g.win))
      out = s * g.ring + p % g.ring;
  }
  loc[t] = out;
}

__global__ void __launch_bounds__(kBlock)
    verify_locs_kernel(const int64_t* slot, const int64_t* pos, const int32_t* commit_len,
                       uint32_t BV, uint32_t V, Ring g, int64_t* loc, int64_t* errors) {
  const uint32_t t = blockIdx.x * kBlock + threadIdx.x;
  if (t >= BV) return;
  const uint32_t b = t / V, col = t - b * V;
  const int64_t s = slot[b];
  int64_t out = -1;
  if (s != -1 && int64_t(col) < int64_t(commit_len[b])) {
    const int64_t p = pos[t];
    if (!valid(g, s, p))
      count_error(errors);
    else
      out = s * g.ring + p % g.ring;
  }
  loc[t] = out;
}

struct WindowArgs {
  const int32_t* batch_id;
  const int64_t* pos;
  int64_t D;
  const int64_t* slot;
  int64_t B;
  Ring g;
  int32_t* indptr;
  int32_t* rows;
  int64_t* errors;
};

// Rows token d reads: 0 for padding and for an invalid token; `count` counts an invalid token in
// *errors (the fill pass does, the totals pass does not, so each is counted once).
__device__ __forceinline__ int32_t window_count(const WindowArgs& a, int64_t d, bool count) {
  const int32_t b = a.batch_id[d];
  if (b == -1) return 0;
  if (b < 0 || b >= a.B || !valid(a.g, a.slot[b], a.pos[d])) {
    if (count) count_error(a.errors);
    return 0;
  }
  const int64_t p = a.pos[d];
  return int32_t((p < a.g.win - 1 ? p : a.g.win - 1) + 1);  // min(p + 1, win) without overflow
}

// Inclusive Hillis-Steele scan of one value per thread over the block (kBlock threads); every
// thread has read `sums` when it returns.
__device__ __forceinline__ int32_t block_inclusive_scan(int32_t v, int32_t* sums) {
  const int tid = int(threadIdx.x);
  sums[tid] = v;
  __syncthreads();
  for (int off = 1; off < kBlock; off <<= 1) {
    const int32_t add = tid >= off ? sums[tid - off] : 0;
    __syncthreads();
    sums[tid] += add;
    __syncthreads();
  }
  const int32_t r = sums[tid];
  __syncthreads();
  return r;
}

// The offsets are a three-pass scan over tiles of kBlock tokens, with indptr itself carrying the
// tiles' sums between the passes (no workspace): pass 1 writes each tile's row count at the
// tile's first indptr entry, pass 2 (one block) turns those counts into the tiles' global
// offsets in place and writes indptr[D], pass 3 scans each tile again from its offset, writes
// the tile's indptr entries and fills its rows (a warp per token, lanes over the token's rows).
__global__ void __launch_bounds__(kBlock) window_tile_counts_kernel(WindowArgs a) {
  __shared__ int32_t sums[kBlock];
  const int64_t first = int64_t(blockIdx.x) * kBlock;
  const int64_t d = first + threadIdx.x;
  const int32_t total = block_inclusive_scan(d < a.D ? window_count(a, d, false) : 0, sums);
  if (threadIdx.x == kBlock - 1) a.indptr[first] = total;
}

__global__ void __launch_bounds__(kScanThreads) window_tile_offsets_kernel(WindowArgs a) {
  __shared__ int32_t sums[kScanThreads];
  const int tid = int(threadIdx.x);
  const int64_t tiles = (a.D + kBlock - 1) / kBlock;
  int32_t carry = 0;
  for (int64_t base = 0; base < tiles; base += int64_t(kScanThreads) * kScanItems) {
    const int64_t t0 = base + int64_t(tid) * kScanItems;
    int32_t n[kScanItems];
    int32_t local = 0;
    DSV4_UNROLL
    for (int i = 0; i < kScanItems; ++i) {
      n[i] = t0 + i < tiles ? a.indptr[(t0 + i) * kBlock] : 0;
      local += n[i];
    }
    sums[tid] = local;
    __syncthreads();
    for (int off = 1; off < kScanThreads; off <<= 1) {
      const int32_t v = tid >= off ? sums[tid - off] : 0;
      __syncthreads();
      sums[tid] += v;
      __syncthreads();
    }
    int32_t at = carry + sums[tid] - local;
    DSV4_UNROLL
    for (int i = 0; i < kScanItems; ++i) {
      if (t0 + i < tiles) a.indptr[(t0 + i) * kBlock] = at;
      at += n[i];
    }
    carry += sums[kScanThreads - 1];
    __syncthreads();  // every thread has read sums before the next tile overwrites it
  }
  if (tid == 0) a.indptr[a.D] = carry;
}

__global__ void __launch_bounds__(kBlock) window_tile_fill_kernel(WindowArgs a) {
  __shared__ int32_t sums[kBlock];
  __shared__ int32_t begin_of[kBlock];
  __shared__ int32_t base_of[kBlock];   // slot * ring: the token's first pool row
  __shared__ int32_t start_of[kBlock];  // (pos - n + 1) % ring: its oldest row in the ring
  const int64_t first = int64_t(blockIdx.x) * kBlock;
  const int64_t d = first + threadIdx.x;
  const int32_t offset = a.indptr[first];  // pass 2's offset of this tile
  const int32_t n = d < a.D ? window_count(a, d, true) : 0;
  if (n > 0) {  // the token's loads once, here; the fill below reads shared memory only
    const int64_t s = a.slot[a.batch_id[d]];
    base_of[threadIdx.x] = int32_t(s * a.g.ring);
    start_of[threadIdx.x] = int32_t((a.pos[d] - n + 1) % a.g.ring);
  }
  const int32_t begin = offset + block_inclusive_scan(n, sums) - n;
  begin_of[threadIdx.x] = begin;
  if (d < a.D) a.indptr[d] = begin;
  __syncthreads();
  constexpr int kWarps = kBlock / 32;
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  const int64_t tile_end = first + kBlock < a.D ? first + kBlock : a.D;
  const int32_t ring = int32_t(a.g.ring);  // ring * n_slots <= INT32_MAX (check_ring)
  for (int64_t t = first + warp; t < tile_end; t += kWarps) {
    const int k = int(t - first);
    const int32_t b0 = begin_of[k];
    const int32_t b1 = t + 1 < tile_end ? begin_of[k + 1] : offset + sums[kBlock - 1];
    const int32_t cnt = b1 - b0;
    if (cnt <= 0) continue;
    const int32_t base = base_of[k], start = start_of[k];
    // cnt <= win <= ring: the rows wrap around the ring at most once.
    for (int32_t i = lane; i < cnt; i += 32) {
      const int32_t r = start + i;
      a.rows[b0 + i] = base + (r >= ring ? r - ring : r);
    }
  }
}

__global__ void __launch_bounds__(kBlock)
    prefill_slots_kernel(const int64_t* req_slot, const int32_t* indptr, int32_t B,
                         const int64_t* pos, int64_t T, int64_t* token_slot, int64_t* final_pos,
                         int64_t* errors) {
  const int64_t t = int64_t(blockIdx.x) * kBlock + threadIdx.x;
  if (t >= T) return;
  // upper_bound of t in indptr[0..B]: the first e with indptr[e] > t; the request is e - 1.
  int32_t lo = 0, hi = B + 1;
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (int64_t(indptr[mid]) <= t)
      lo = mid + 1;
    else
      hi = mid;
  }
  const int32_t b = lo - 1;
  int64_t s = -1, f = -1;
  if (b >= 0 && b < B) {
    const int64_t end = indptr[b + 1];
    if (end > T) {
      count_error(errors);
    } else {
      s = req_slot[b];
      f = pos[end - 1];
    }
  }
  token_slot[t] = s;
  final_pos[t] = f;
}

// ---- host side ----------------------------------------------------------------------------

[[noreturn]] void bad(const char* fn, const std::string& what) {
  throw std::invalid_argument(std::string("ring_layout::") + fn + ": " + what);
}

void check_ring(const char* fn, const Ring& g) {
  if (g.win < 1) bad(fn, "win=" + std::to_string(g.win) + " must be >= 1");
  if (g.ring < g.win)
    bad(fn, "ring=" + std::to_string(g.ring) + " must be >= win=" + std::to_string(g.win));
  if (g.n_slots < 0) bad(fn, "n_slots=" + std::to_string(g.n_slots) + " must be >= 0");
  if (g.n_slots > 0 && g.ring > INT32_MAX / g.n_slots)
    bad(fn, "ring=" + std::to_string(g.ring) + " x n_slots=" + std::to_string(g.n_slots) +
                " pool rows exceed INT32_MAX");
}

void check_count(const char* fn, const char* name, int64_t n) {
  if (n < 0 || n > INT32_MAX)
    bad(fn, std::string(name) + "=" + std::to_string(n) + " must be in [0, 2^31)");
}

void check_ptrs(const char* fn, std::initializer_list<std::pair<const char*, const void*>> ps) {
  for (const auto& [name, p] : ps)
    if (!p) bad(fn, std::string(name) + " is null");
}

hipStream_t as_stream(gpu::Stream s) { return static_cast<hipStream_t>(s); }

}  // namespace

void token_locs(const int64_t* slot, const int64_t* pos, const int64_t* final_pos, int64_t T,
                const Ring& g, int64_t* loc, int64_t* errors, gpu::Stream s) {
  const char* fn = "token_locs";
  check_ring(fn, g);
  check_count(fn, "T", T);
  if (T == 0) return;
  check_ptrs(fn, {{"slot", slot}, {"pos", pos}, {"loc", loc}, {"errors", errors}});
  gpu::launch(token_locs_kernel, dim3(gpu::ceil_div(size_t(T), kBlock)), dim3(kBlock), 0,
              as_stream(s), slot, pos, final_pos, T, g, loc, errors);
}

void verify_locs(const int64_t* slot, const int64_t* pos, const int32_t* commit_len, int64_t B,
                 int64_t V, const Ring& g, int64_t* loc, int64_t* errors, gpu::Stream s) {
  const char* fn = "verify_locs";
  check_ring(fn, g);
  check_count(fn, "B", B);
  check_count(fn, "V", V);
  if (V > 0 && B > INT32_MAX / V)
    bad(fn, "B=" + std::to_string(B) + " x V=" + std::to_string(V) + " exceeds INT32_MAX");
  if (B * V == 0) return;
  check_ptrs(
      fn,
      {{"slot", slot}, {"pos", pos}, {"commit_len", commit_len}, {"loc", loc}, {"errors", errors}});
  const uint32_t BV = uint32_t(B * V);
  gpu::launch(verify_locs_kernel, dim3(gpu::ceil_div(BV, kBlock)), dim3(kBlock), 0, as_stream(s),
              slot, pos, commit_len, BV, uint32_t(V), g, loc, errors);
}

void window_rows(const int32_t* batch_id, const int64_t* pos, int64_t D, const int64_t* slot,
                 int64_t B, const Ring& g, int32_t* indptr, int32_t* rows, int64_t* errors,
                 gpu::Stream s) {
  const char* fn = "window_rows";
  check_ring(fn, g);
  check_count(fn, "D", D);
  check_count(fn, "B", B);
  if (D > INT32_MAX / g.win)
    bad(fn,
        "D=" + std::to_string(D) + " x win=" + std::to_string(g.win) + " rows exceed INT32_MAX");
  // indptr[0] = 0 is written even for D = 0, so a reader always finds a valid offset array.
  check_ptrs(fn, {{"indptr", indptr}});
  if (D > 0)
    check_ptrs(fn, {{"batch_id", batch_id}, {"pos", pos}, {"rows", rows}, {"errors", errors}});
  if (D > 0 && B > 0) check_ptrs(fn, {{"slot", slot}});
  WindowArgs a{batch_id, pos, D, slot, B, g, indptr, rows, errors};
  const size_t tiles = gpu::ceil_div(size_t(D), kBlock);
  if (tiles > 0)
    gpu::launch(window_tile_counts_kernel, dim3(tiles), dim3(kBlock), 0, as_stream(s), a);
  gpu::launch(window_tile_offsets_kernel, dim3(1), dim3(kScanThreads), 0, as_stream(s), a);
  if (tiles > 0)
    gpu::launch(window_tile_fill_kernel, dim3(tiles), dim3(kBlock), 0, as_stream(s), a);
}

void prefill_slots(const int64_t* req_slot, const int32_t* indptr, int64_t B, const int64_t* pos,
                   int64_t T, int64_t* token_slot, int64_t* final_pos, int64_t* errors,
                   gpu::Stream s) {
  const char* fn = "prefill_slots";
  check_count(fn, "B", B);
  if (B == INT32_MAX) bad(fn, "B=" + std::to_string(B) + " leaves no room for indptr[B]");
  check_count(fn, "T", T);
  if (T == 0) return;
  check_ptrs(fn, {{"indptr", indptr},
                  {"pos", pos},
                  {"token_slot", token_slot},
                  {"final_pos", final_pos},
                  {"errors", errors}});
  if (B > 0) check_ptrs(fn, {{"req_slot", req_slot}});
  gpu::launch(prefill_slots_kernel, dim3(gpu::ceil_div(size_t(T), kBlock)), dim3(kBlock), 0,
              as_stream(s), req_slot, indptr, int32_t(B), pos, T, token_slot, final_pos, errors);
}

}  // namespace dsv4::kernels::ring_layout

// ring_layout kernels: per-token ring locs (flat and verify layouts), prefill slot expansion, and
// the read side's packed window rows (tile counts, then a look-back fill or the three-pass scan).
//
// window_rows writes ~win int32 rows per token (125 at DSpark's geometry) and reads ~20 bytes, so
// it is a store-bound kernel whose fixed costs show at 65536 tokens. The default fill therefore:
// (1) has two launches, not three: no single-block pass over the tiles between them; each fill
// block finds its tile's offset from the tile counts itself (tile_offset: a look-back that never
// waits on another block, see below); (2) writes each tile's rows, one contiguous output range,
// as 16-byte aligned vector stores spread over the whole block (every lane stores whole int4s,
// whatever the tokens' row counts), where the three-pass fill had a warp per token storing 4-byte
// words from an unaligned start, with short tokens leaving lanes idle. The three-pass fill stays
// as kWindowThreePass, so one run can time both.
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

#include "device_units.hpp"
#include "dsv4/gpu/gpu.hpp"
#include "dsv4/kernels/ring_layout.hpp"

namespace dsv4::kernels::ring_layout {
namespace {

constexpr int kBlock = 256;  // threads of most kernels, and tokens of a window_rows tile
// Threads of a wide look-back fill block (one per tile): 1024 on NVIDIA; 512 on AMD, where a
// block of 1024 leaves 64 VGPRs a lane and the fill spills (gfx942).
#if DSV4_GPU_HIP
constexpr int kFillThreads = 512;
#else
constexpr int kFillThreads = 1024;
#endif
// Threads a compute unit holds at once (NVIDIA sm_90 and AMD CDNA3 alike).
constexpr int64_t kThreadsPerUnit = 2048;
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

// Inclusive Hillis-Steele scan of one value per thread over the block's first kBlock threads
// (sums[kBlock]; a wider block's other threads take part in the barriers and get 0); every thread
// has read `sums` when it returns.
__device__ __forceinline__ int32_t block_inclusive_scan(int32_t v, int32_t* sums) {
  const int tid = int(threadIdx.x);
  const bool in = tid < kBlock;
  if (in) sums[tid] = v;
  __syncthreads();
  for (int off = 1; off < kBlock; off <<= 1) {
    const int32_t add = in && tid >= off ? sums[tid - off] : 0;
    __syncthreads();
    if (in) sums[tid] += add;
    __syncthreads();
  }
  const int32_t r = in ? sums[tid] : 0;
  __syncthreads();
  return r;
}

// Every thread gets the sum (the max) of v over the block. `slot`: one shared int32, free again
// when they return. 32-lane groups first (HIP's 64-lane waves split into two), then one shared
// atomic per group.
__device__ __forceinline__ int32_t block_sum(int32_t v, int32_t* slot, int tid) {
  if (tid == 0) *slot = 0;
  __syncthreads();
  DSV4_UNROLL
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor(v, m, 32);
  if (tid % 32 == 0) atomicAdd(slot, v);
  __syncthreads();
  const int32_t r = *slot;
  __syncthreads();
  return r;
}

__device__ __forceinline__ int32_t block_max(int32_t v, int32_t* slot, int tid) {
  if (tid == 0) *slot = INT32_MIN;
  __syncthreads();
  DSV4_UNROLL
  for (int m = 16; m > 0; m >>= 1) {
    const int32_t o = __shfl_xor(v, m, 32);
    v = o > v ? o : v;
  }
  if (tid % 32 == 0) atomicMax(slot, v);
  __syncthreads();
  const int32_t r = *slot;
  __syncthreads();
  return r;
}

// Every launch counts each tile's rows first: a block per tile of kBlock tokens writes the count
// at the tile's first indptr entry, E_j = indptr[j * kBlock]. The three-pass fill stores the
// count itself there; the look-back fill stores -1 - count, so a negative E_j is a count and a
// non-negative one is the tile's final offset (written by the tile's own fill block).
__global__ void __launch_bounds__(kBlock) window_tile_counts_kernel(WindowArgs a, bool encoded) {
  gpu::release_dependents();  // the look-back fill may start: it waits before reading the counts
  __shared__ int32_t sum;
  const int tid = int(threadIdx.x);
  const int64_t first = int64_t(blockIdx.x) * kBlock;
  const int64_t d = first + tid;
  const int32_t total = block_sum(d < a.D ? window_count(a, d, false) : 0, &sum, tid);
  if (tid == 0) a.indptr[first] = encoded ? -1 - total : total;
}

// ---- the look-back fill (variants 0 and 1): two launches ---------------------------------
//
// After the counts, one launch does the rest: block k scans its tile, finds the tile's offset
// itself and fills the tile's rows. The offset is the sum of the counts of tiles 0..k-1, read
// back from E_j in chunks of kLookItems * kBlock tiles, nearest first. A block never waits for
// another: while block k reads, block j < k may already have replaced E_j's count by its final
// offset o_j. Either reading is exact: a count is added as it is; a final offset ends the walk,
// since o_k = o_j + count(j) + the counts after j, and count(j) is recounted from tile j's
// tokens (one tile's loads, at most once per block). Blocks start in about blockIdx order, so a
// block that starts after others finished meets a final offset within about one wave of tiles.
constexpr int kLookItems = 4;

// The rows of tile j (no errors counted: its own block counts them), from the block's first
// kBlock threads.
__device__ __forceinline__ int32_t tile_rows(const WindowArgs& a, int64_t j, int32_t* slot,
                                             int tid) {
  const int64_t d = j * kBlock + tid;
  return block_sum(tid < kBlock && d < a.D ? window_count(a, d, false) : 0, slot, tid);
}

// Rows of the tiles before tile k (k >= 1), by a block of kThr threads. red: two shared int32.
template <int kThr>
__device__ int32_t tile_offset(const WindowArgs& a, int64_t k, int32_t* red, int tid) {
  const volatile int32_t* ip = a.indptr;  // other blocks write these entries meanwhile
  constexpr int64_t kChunk = int64_t(kLookItems) * kThr;
  int32_t acc = 0;
  for (int64_t hi = k; hi > 0; hi -= kChunk) {
    const int64_t lo = hi > kChunk ? hi - kChunk : 0;
    int32_t v[kLookItems];
    int32_t last_final = -1;  // the nearest tile in [lo, hi) whose entry holds its offset
    DSV4_UNROLL
    for (int i = 0; i < kLookItems; ++i) {
      const int32_t j = int32_t(lo) + i * kThr + tid;  // tiles < 2^23
      v[i] = j < hi ? ip[int64_t(j) * kBlock] : -1;
      if (v[i] >= 0) last_final = j;
    }
    const int32_t jf = block_max(last_final, &red[0], tid);
    int32_t part = 0;
    DSV4_UNROLL
    for (int i = 0; i < kLookItems; ++i) {
      const int32_t j = int32_t(lo) + i * kThr + tid;
      if (j < hi && j > jf) part += -1 - v[i];
      if (j == jf) red[1] = v[i];  // o_jf, read after block_sum's barriers
    }
    acc += block_sum(part, &red[0], tid);
    if (jf >= 0) return acc + red[1] + tile_rows(a, jf, &red[0], tid);
  }
  return acc;
}

// Pool row of element e of the tile's output (begin_of[t] <= e < begin_of[t + 1], token t).
__device__ __forceinline__ int32_t window_row(const int32_t* begin_of, const int32_t* base_of,
                                              const int32_t* start_of, int t, int32_t e,
                                              int32_t ring) {
  const int32_t r = start_of[t] + (e - begin_of[t]);  // cnt <= win <= ring: wraps at most once
  return base_of[t] + (r >= ring ? r - ring : r);
}

// The token of element e: the last t with begin_of[t] <= e (tokens of no rows share their
// successor's begin and are never found).
__device__ __forceinline__ int token_of(const int32_t* begin_of, int32_t e) {
  int t = 0;
  DSV4_UNROLL
  for (int step = kBlock / 2; step > 0; step >>= 1)
    if (begin_of[t + step] <= e) t += step;
  return t;
}

// Block k (kThr >= kBlock threads): its tokens' counts (errors counted here, once; the first
// kBlock threads hold a token each), its offset (tile_offset), its indptr entries (indptr[D] too
// in the last tile), then its rows. The rows of a tile are one contiguous range [offset, offset +
// total); the block walks it in 16-byte aligned int4 stores (thread i takes chunks i, i + kThr,
// ...; each finds its token by a binary search over begin_of and steps to the next token inside
// the chunk), with at most 3 scalar rows at either end. Streaming (the default): store16_streaming
// (evict-first); else plain stores. A tile's ~32K rows are most of the work and there are only
// D / kBlock tiles, so while they all fit at once a block has kFillThreads: on an H200 at 65536
// tokens (256 tiles) blocks of 256 left the SMs at 23% occupancy (17.1 us, latency-bound on the
// rows' searches). Launched as the counts' dependent (gpu::launch_dependent): the tokens' loads
// and scan overlap the counts launch, and the block waits for it before touching indptr.
template <bool kStreaming, int kThr>
__global__ void __launch_bounds__(kThr) window_lookback_fill_kernel(WindowArgs a) {
  static_assert(kThr >= kBlock && kThr % 32 == 0);
  __shared__ int32_t sums[kBlock];
  __shared__ int32_t begin_of[kBlock + 1];  // [kBlock]: the tile's end
  __shared__ int32_t base_of[kBlock];       // slot * ring: the token's first pool row
  __shared__ int32_t start_of[kBlock];      // (pos - n + 1) % ring: its oldest row in the ring
  __shared__ int32_t red[2];
  const int tid = int(threadIdx.x);
  const int64_t k = blockIdx.x, first = k * kBlock, d = first + tid;
  const bool token = tid < kBlock && d < a.D;
  const int32_t n = token ? window_count(a, d, true) : 0;
  if (n > 0) {
    const int64_t s = a.slot[a.batch_id[d]];
    base_of[tid] = int32_t(s * a.g.ring);
    start_of[tid] = int32_t((a.pos[d] - n + 1) % a.g.ring);
  }
  const int32_t incl = block_inclusive_scan(n, sums);
  // Everything above reads inputs only; from here on indptr, which the counts launch writes
  // (launched as its dependent, this block may have started while it ran).
  gpu::wait_prior_grid();
  const int32_t offset = k > 0 ? tile_offset<kThr>(a, k, red, tid) : 0;
  const int32_t begin = offset + incl - n;
  if (tid < kBlock) begin_of[tid] = begin;
  if (tid == kBlock - 1) {
    begin_of[kBlock] = offset + incl;
    if (k == (a.D - 1) / kBlock) a.indptr[a.D] = offset + incl;  // the last tile
  }
  if (token) a.indptr[d] = begin;  // d == first: E_k's final value
  __syncthreads();

  const int32_t ring = int32_t(a.g.ring);  // ring * n_slots <= INT32_MAX (check_ring)
  const int64_t t0 = offset, t1 = begin_of[kBlock];
  // Elements e with rows + e 16-byte aligned: e + mis a multiple of 4.
  const int64_t mis = int64_t(reinterpret_cast<uintptr_t>(a.rows) / sizeof(int32_t)) & 3;
  int64_t a0 = t0 + ((4 - ((t0 + mis) & 3)) & 3), a1 = t1 - ((t1 + mis) & 3);
  if (a1 <= a0) a0 = a1 = t1;  // no whole aligned chunk: every row scalar
  auto scalar = [&](int64_t lo, int64_t hi) {
    for (int64_t e = lo + tid; e < hi; e += kThr) {
      const int t = token_of(begin_of, int32_t(e));
      a.rows[e] = window_row(begin_of, base_of, start_of, t, int32_t(e), ring);
    }
  };
  scalar(t0, a0);
  scalar(a1, t1);
  for (int64_t c = a0 + 4 * int64_t(tid); c < a1; c += 4 * int64_t(kThr)) {
    const int32_t e = int32_t(c);
    int t = token_of(begin_of, e);
    int32_t w[4];
    DSV4_UNROLL
    for (int i = 0; i < 4; ++i) {
      while (begin_of[t + 1] <= e + i) ++t;  // begin_of[kBlock] = t1 > e + i stops it
      w[i] = window_row(begin_of, base_of, start_of, t, e + i, ring);
    }
    int32_t* p = a.rows + c;
    if (kStreaming)
      gpu::store16_streaming(p, uint32_t(w[0]), uint32_t(w[1]), uint32_t(w[2]), uint32_t(w[3]));
    else
      gpu::store16(p, uint32_t(w[0]), uint32_t(w[1]), uint32_t(w[2]), uint32_t(w[3]));
  }
}

// ---- the three-pass fill (variant 2) -------------------------------------------------------
//
// The counts (stored plainly at E_j), then one block turns them into the tiles' offsets in place
// and writes indptr[D], then each tile scans again from its offset, writes its indptr entries and
// fills its rows: a warp per token, lanes over the token's rows, scalar stores.
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
                 gpu::Stream s, const WindowOptions& opt) {
  const char* fn = "window_rows";
  if (opt.variant < 0 || opt.variant >= kWindowVariants)
    bad(fn, "variant=" + std::to_string(opt.variant) + " must be in [0, " +
                std::to_string(kWindowVariants) + ")");
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
  const hipStream_t st = as_stream(s);
  if (tiles == 0) {  // indptr[0] = 0 only: the offsets pass over no tile
    gpu::launch(window_tile_offsets_kernel, dim3(1), dim3(kScanThreads), 0, st, a);
    return;
  }
  const bool three_pass = opt.variant == kWindowThreePass;
  gpu::launch(window_tile_counts_kernel, dim3(tiles), dim3(kBlock), 0, st, a, !three_pass);
  if (three_pass) {
    gpu::launch(window_tile_offsets_kernel, dim3(1), dim3(kScanThreads), 0, st, a);
    gpu::launch(window_tile_fill_kernel, dim3(tiles), dim3(kBlock), 0, st, a);
  } else if (opt.variant == kWindowLookbackNarrow) {
    gpu::launch(window_lookback_fill_kernel<true, kBlock>, dim3(tiles), dim3(kBlock), 0, st, a);
  } else {
    // Wide blocks while every tile's block fits on the device at once; past that the narrow
    // ones, which keep more tiles in flight.
    const bool wide = int64_t(tiles) * kFillThreads <= kThreadsPerUnit * compute_units();
    const bool plain = opt.variant == kWindowLookbackPlain;
    auto fill = wide ? (plain ? window_lookback_fill_kernel<false, kFillThreads>
                              : window_lookback_fill_kernel<true, kFillThreads>)
                     : (plain ? window_lookback_fill_kernel<false, kBlock>
                              : window_lookback_fill_kernel<true, kBlock>);
    gpu::launch_dependent(fill, dim3(tiles), dim3(wide ? kFillThreads : kBlock), 0, st, a);
  }
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

// ring_layout kernels: per-token ring locs (flat and verify layouts), prefill slot expansion, and
// the read side's packed window rows (a one-block offset scan, then a row fill).
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

// Rows token d reads: 0 for padding, and 0 for an invalid token, which is counted once.
__device__ __forceinline__ int32_t window_count(const WindowArgs& a, int64_t d) {
  const int32_t b = a.batch_id[d];
  if (b == -1) return 0;
  if (b < 0 || b >= a.B || !valid(a.g, a.slot[b], a.pos[d])) {
    count_error(a.errors);
    return 0;
  }
  const int64_t p = a.pos[d];
  return int32_t((p < a.g.win - 1 ? p : a.g.win - 1) + 1);  // min(p + 1, win) without overflow
}

// One block: exclusive scan of the per-token counts into indptr, tile by tile.
__global__ void __launch_bounds__(kScanThreads) window_offsets_kernel(WindowArgs a) {
  __shared__ int32_t sums[kScanThreads];
  const int tid = int(threadIdx.x);
  int32_t carry = 0;
  for (int64_t base = 0; base < a.D; base += int64_t(kScanThreads) * kScanItems) {
    const int64_t first = base + int64_t(tid) * kScanItems;
    int32_t n[kScanItems];
    int32_t local = 0;
    DSV4_UNROLL
    for (int i = 0; i < kScanItems; ++i) {
      n[i] = first + i < a.D ? window_count(a, first + i) : 0;
      local += n[i];
    }
    sums[tid] = local;
    __syncthreads();
    for (int off = 1; off < kScanThreads; off <<= 1) {  // inclusive Hillis-Steele scan
      const int32_t v = tid >= off ? sums[tid - off] : 0;
      __syncthreads();
      sums[tid] += v;
      __syncthreads();
    }
    int32_t at = carry + sums[tid] - local;
    DSV4_UNROLL
    for (int i = 0; i < kScanItems; ++i) {
      if (first + i < a.D) a.indptr[first + i] = at;
      at += n[i];
    }
    carry += sums[kScanThreads - 1];
    __syncthreads();  // every thread has read sums before the next tile overwrites it
  }
  if (tid == 0) a.indptr[a.D] = carry;
}

// Block (32, 8): threadIdx.y picks a token, threadIdx.x strides over its rows.
__global__ void __launch_bounds__(kBlock) window_fill_kernel(WindowArgs a) {
  const int64_t d = int64_t(blockIdx.x) * blockDim.y + threadIdx.y;
  if (d >= a.D) return;
  const int32_t begin = a.indptr[d], n = a.indptr[d + 1] - begin;
  if (n <= 0) return;
  const int64_t s = a.slot[a.batch_id[d]], first = a.pos[d] - n + 1;
  for (int32_t i = int32_t(threadIdx.x); i < n; i += int32_t(blockDim.x))
    a.rows[begin + i] = int32_t(s * a.g.ring + (first + i) % a.g.ring);
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
  gpu::launch(window_offsets_kernel, dim3(1), dim3(kScanThreads), 0, as_stream(s), a);
  constexpr unsigned kTokensPerBlock = kBlock / 32;
  gpu::launch(window_fill_kernel, dim3(gpu::ceil_div(size_t(D), kTokensPerBlock)),
              dim3(32, kTokensPerBlock), 0, as_stream(s), a);
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

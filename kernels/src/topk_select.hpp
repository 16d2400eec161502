// Block-wide radix select (top-K by SGLang's order key, ties to the smaller index) and a bitonic
// sort for a logical wave width W, shared by the indexer_topk and candidate_blocks kernels.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "dsv4/gpu/gpu.hpp"

namespace dsv4::kernels::topk_select {

constexpr int kThreads = 512;                 // one block per row
constexpr int kMaxK = 2048;                   // selections per row
constexpr uint32_t kNegInfKey = 0x007fffffu;  // order_key(-inf)
constexpr int32_t kNone = -1;
constexpr int32_t kSortPad = 0x7fffffff;  // -1 while sorting ascending, so it lands last

#if DSV4_GPU_CUDA
constexpr int kMaxWave = 32;  // width-limited shuffles live inside one 32-lane warp
#else
constexpr int kMaxWave = 64;  // AMD CDNA waves are 64 lanes (the host-only build checks all)
#endif

// SGLang's radix key: a total order on the fp32 bit patterns (-NaN < -inf < ... < +inf < +NaN).
__device__ __forceinline__ uint32_t order_key(float s) {
  const uint32_t b = __float_as_uint(s);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// The composite key that makes every item distinct: order key high, then the complement of the
// index, so that among equal scores the smaller index ranks higher.
__device__ __forceinline__ uint64_t composite(uint32_t key, int32_t i) {
  return (uint64_t(key) << 32) | uint64_t(0xffffffffu - uint32_t(i));
}

struct Smem {
  uint32_t hist[256];
  uint32_t bin;
  uint32_t count;
};

// Radix select, 8 bits per pass from the top of the 64-bit composite key, over items 0..n-1 whose
// `key(i, u)` returns true (eligible) and sets u. Returns U such that the eligible items with
// u >= U are the min(K, eligible) largest. Every thread of the block must call it.
template <class Key>
__device__ uint64_t radix_select(int32_t n, uint32_t K, Key key, Smem& sm) {
  const int tid = int(threadIdx.x);
  uint64_t prefix = 0;
  uint32_t remaining = K;
  for (int pass = 0; pass < 8; ++pass) {
    const int shift = 56 - 8 * pass;
    if (tid < 256) sm.hist[tid] = 0;
    __syncthreads();
    for (int32_t i = tid; i < n; i += kThreads) {
      uint64_t u;
      if (!key(i, u)) continue;
      if (pass > 0 && (u >> (shift + 8)) != (prefix >> (shift + 8))) continue;
      atomicAdd(&sm.hist[uint32_t(u >> shift) & 255u], 1u);
    }
    __syncthreads();
    // Inclusive suffix sums: hist[t] = number of matching items whose digit is >= t.
    for (int off = 1; off < 256; off <<= 1) {
      const uint32_t v = (tid < 256 && tid + off < 256) ? sm.hist[tid + off] : 0u;
      __syncthreads();
      if (tid < 256) sm.hist[tid] += v;
      __syncthreads();
    }
    if (pass == 0 && sm.hist[0] <= K) return 0;  // every eligible item is selected
    if (tid < 256) {
      const uint32_t above = tid < 255 ? sm.hist[tid + 1] : 0u;
      if (sm.hist[tid] >= remaining && above < remaining) sm.bin = uint32_t(tid);
    }
    __syncthreads();
    const uint32_t b = sm.bin;
    const uint32_t above = b < 255 ? sm.hist[b + 1] : 0u;
    const uint32_t in_bin = sm.hist[b] - above;
    __syncthreads();  // every thread has read hist before the next pass clears it
    remaining -= above;
    prefix |= uint64_t(b) << shift;
    if (in_bin == remaining) break;  // every item with this prefix is selected
  }
  return prefix;
}

// Writes the selected items' indices to sel[0..count) in an unspecified order; returns count.
template <class Key>
__device__ int32_t collect(int32_t n, uint64_t U, Key key, int32_t* sel, Smem& sm) {
  const int tid = int(threadIdx.x);
  if (tid == 0) sm.count = 0;
  __syncthreads();
  for (int32_t i = tid; i < n; i += kThreads) {
    uint64_t u;
    if (key(i, u) && u >= U) sel[atomicAdd(&sm.count, 1u)] = i;
  }
  __syncthreads();
  return int32_t(sm.count);
}

// Sorts s[0 .. kThreads*R) ascending in place. Compare-exchange steps whose partner lies less
// than W lanes away use width-W lane shuffles; wider steps go through shared memory. Every thread
// of the block must call it; s must be written and visible (after __syncthreads).
template <int W, int R>
__device__ void bitonic_sort(int32_t* s) {
  static_assert(W == 16 || W == 32 || W == 64, "logical wave width W is 16, 32 or 64");
  static_assert(W <= kMaxWave, "W wider than this backend's wave");
  constexpr int N = kThreads * R;
  const int tid = int(threadIdx.x);
  int32_t v[R];
  DSV4_UNROLL
  for (int r = 0; r < R; ++r) v[r] = s[r * kThreads + tid];
  for (int k = 2; k <= N; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      int32_t o[R];
      if (j < W) {
        DSV4_UNROLL
        for (int r = 0; r < R; ++r) o[r] = __shfl_xor(v[r], j, W);
      } else {
        __syncthreads();
        DSV4_UNROLL
        for (int r = 0; r < R; ++r) s[r * kThreads + tid] = v[r];
        __syncthreads();
        DSV4_UNROLL
        for (int r = 0; r < R; ++r) o[r] = s[(r * kThreads + tid) ^ j];
      }
      DSV4_UNROLL
      for (int r = 0; r < R; ++r) {
        const int e = r * kThreads + tid;
        const bool keep_min = ((e & j) == 0) == ((e & k) == 0);
        v[r] = keep_min ? (o[r] < v[r] ? o[r] : v[r]) : (o[r] > v[r] ? o[r] : v[r]);
      }
    }
  }
  __syncthreads();
  DSV4_UNROLL
  for (int r = 0; r < R; ++r) s[r * kThreads + tid] = v[r];
  __syncthreads();
}

// Selections per thread for the sort of K entries: 1, 2 or 4 (K <= kMaxK).
constexpr int rows_per_thread(int64_t K) { return K <= kThreads ? 1 : K <= 2 * kThreads ? 2 : 4; }

// ---- host side: the wave widths this build has, and the launch dispatch -------------------

inline bool wave_supported(int W) { return W == 16 || W == 32 || (W == 64 && kMaxWave >= 64); }

// The device's own wave width (32 on NVIDIA; the device's warpSize on AMD).
inline int device_wave() {
#if DSV4_GPU_CUDA
  return 32;
#else
  static const int w = gpu::available() ? gpu::device_info().wave_width : 64;
  return w;
#endif
}

// Throws std::invalid_argument naming W when this build has no sort for it.
inline void check_wave(const char* family, int W) {
  if (!wave_supported(W))
    throw std::invalid_argument(std::string(family) + ": W=" + std::to_string(W) +
                                " is not one of 16, 32" +
                                (kMaxWave >= 64 ? ", 64" : " (64 needs a wave64 backend)"));
}

// Calls f(std::integral_constant<int, W>{}, std::integral_constant<int, R>{}) for a checked
// wave width W and the rows per thread R that sorting `entries` entries takes.
template <class F>
void dispatch(int W, int64_t entries, F f) {
  auto rows = [&](auto w) {
    switch (rows_per_thread(entries)) {
      case 1:
        return f(w, std::integral_constant<int, 1>{});
      case 2:
        return f(w, std::integral_constant<int, 2>{});
      default:
        return f(w, std::integral_constant<int, 4>{});
    }
  };
  if (W == 16)
    rows(std::integral_constant<int, 16>{});
  else if (W == 64)
    rows(std::integral_constant<int, kMaxWave>{});
  else
    rows(std::integral_constant<int, 32>{});
}

}  // namespace dsv4::kernels::topk_select

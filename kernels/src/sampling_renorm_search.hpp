// sampling_renorm's row search, the pieces every variant shares: the block shape, entries' weights,
// block histograms of a digit, the digit's selection, a chunk's kept sum in the reference's order
// and the final write. Private to kernels/src/sampling_renorm.hip.
#pragma once

#include <cstdint>

#include "dsv4/gpu/gpu.hpp"

namespace dsv4::kernels::sampling_renorm {
namespace {

constexpr int kThreads = 512;
constexpr int kGroups = kThreads / 32;  // private histograms, one per 32 threads
constexpr int kBins = 256;              // 8-bit digits, four passes over the 32 value bits
constexpr int kChunk = 4096;            // entries per kept-sum chunk (the reference's kKernelChunk)
constexpr int kPerThread = kChunk / kThreads;
constexpr int kPasses = 4;
using u64 = unsigned long long;

// A row's search after some digits: entries whose weight bits are >= pivot stay.
struct State {
  u64 target;         // count (top-k) or fixed-point mass (top-p) to reach
  u64 above;          // weight of the entries above the current prefix
  uint32_t pivot;     // the digits found so far, the rest zero
  int32_t scale;      // top-p: each w counts as floor(w * 2^scale)
  uint32_t keep_all;  // pivot 0
  uint32_t pad;
};

// The value an entry counts as: x when 0 < x < inf, else 0 (as bits: monotone in the value).
__device__ __forceinline__ uint32_t weight_bits(float x) {
  const uint32_t b = __float_as_uint(x);
  return (b - 1u) < 0x7f7fffffu ? b : 0u;  // 1 .. 0x7f7fffff: positive, finite
}

// Binary exponent of a positive finite float given as bits (ilogb).
__device__ __forceinline__ int exponent_of(uint32_t bits) {
  const int e = int(bits >> 23);
  if (e > 0) return e - 127;
  int lead = 22;  // subnormal: the leading mantissa bit
  while (lead > 0 && !((bits >> lead) & 1u)) --lead;
  return lead - 149;
}

// floor(w * 2^s) for weight bits w <= the row maximum (below 2^44), in integers.
__device__ __forceinline__ u64 fixed_of(uint32_t bits, int s) {
  const uint32_t e = bits >> 23;
  const u64 m = e ? u64((bits & 0x7fffffu) | 0x800000u) : u64(bits);
  const int sh = int(e ? e : 1u) - 150 + s;
  if (sh >= 0) return m << sh;
  return sh <= -24 ? 0ull : m >> -sh;
}

template <bool kTopP>
struct Smem {
  uint32_t lo[kGroups][kBins];              // per-group counts, or low halves of masses
  uint32_t hi[kTopP ? kGroups : 1][kBins];  // top-p: high halves and carries
  u64 tot[2][kBins];                        // the row's (or block's) histogram, suffix sums
  float part[kThreads];
  uint32_t bin;
  uint32_t umax;
  float total;
};

// Calls f(i, weight bits of x[i]) for this thread's entries of chunks c0, c0 + step, ... (any
// order: only order-free work, histograms, maxima and the final write, goes through here).
template <class F>
__device__ __forceinline__ void each_weight(const float* x, int32_t V, int32_t c0, int32_t step,
                                            F f) {
  const int32_t nchunks = (V + kChunk - 1) / kChunk;
  for (int32_t c = c0; c < nchunks; c += step) {
    const int32_t base = c * kChunk + int32_t(threadIdx.x);
    uint32_t w[kPerThread];
    DSV4_UNROLL
    for (int u = 0; u < kPerThread; ++u) {
      const int32_t j = base + u * kThreads;
      w[u] = j < V ? weight_bits(x[j]) : 0u;
    }
    DSV4_UNROLL
    for (int u = 0; u < kPerThread; ++u) {
      const int32_t j = base + u * kThreads;
      if (j < V) f(j, w[u]);
    }
  }
}

// The largest weight bits of the block's chunks (every thread gets it).
template <bool kTopP>
__device__ uint32_t block_max(const float* x, int32_t V, int32_t c0, int32_t step,
                              Smem<kTopP>& sm) {
  uint32_t m = 0;
  each_weight(x, V, c0, step, [&](int32_t, uint32_t w) { m = w > m ? w : m; });
  if (threadIdx.x == 0) sm.umax = 0;
  __syncthreads();
  atomicMax(&sm.umax, m);
  __syncthreads();
  const uint32_t r = sm.umax;
  __syncthreads();
  return r;
}

__device__ State state_top_k(int32_t k, int32_t V) {
  State st{};
  st.keep_all = k <= 0 || int64_t(k) >= int64_t(V);
  st.target = u64(k > 0 ? k : 0);
  return st;
}

// The top-p search's start from p and the row's largest weight bits.
__device__ State state_top_p(float p, uint32_t mx) {
  State st{};
  st.keep_all = !(p < 1.0f) || mx == 0;  // p >= 1 (or NaN), or no mass at all
  if (!st.keep_all) {
    st.scale = 43 - exponent_of(mx);
    const double want = ceil(ldexp(double(p), st.scale));
    if (want > ldexp(1.0, 62))
      st.keep_all = 1;  // beyond the row's whole mass
    else
      st.target = want < 1.0 ? 1ull : u64(want);  // p <= 0 still keeps the maximum
  }
  return st;
}

// Histograms the block's chunks for digit `pass` of entries under the state's prefix into
// sm.tot[0] (every thread returns after it is complete).
template <bool kTopP>
__device__ void block_histogram(const float* x, int32_t V, int32_t c0, int32_t step, int pass,
                                const State& st, Smem<kTopP>& sm) {
  const int t = int(threadIdx.x);
  const int shift = 24 - 8 * pass;
  for (int i = t; i < kGroups * kBins; i += kThreads) {
    (&sm.lo[0][0])[i] = 0;
    if (kTopP) (&sm.hi[0][0])[i] = 0;
  }
  __syncthreads();
  uint32_t* lo = sm.lo[t / 32];
  uint32_t* hi = sm.hi[kTopP ? t / 32 : 0];
  const uint32_t want = pass > 0 ? st.pivot >> (shift + 8) : 0u;
  each_weight(x, V, c0, step, [&](int32_t, uint32_t w) {
    if (pass > 0 && (w >> (shift + 8)) != want) return;
    const uint32_t b = (w >> shift) & 255u;
    if (!kTopP) {
      atomicAdd(&lo[b], 1u);
      return;
    }
    const u64 v = fixed_of(w, st.scale);
    if (!v) return;
    const uint32_t l = uint32_t(v);
    const uint32_t old = atomicAdd(&lo[b], l);
    const uint32_t h = uint32_t(v >> 32) + (old + l < old ? 1u : 0u);  // this add's carry
    if (h) atomicAdd(&hi[b], h);
  });
  __syncthreads();
  if (t < kBins) {
    u64 sum = 0;
    for (int g = 0; g < kGroups; ++g)
      sum += kTopP ? (u64(sm.hi[g][t]) << 32) + sm.lo[g][t] : u64(sm.lo[g][t]);
    sm.tot[0][t] = sum;
  }
  __syncthreads();
}

// Digit `pass` of the pivot from the row's histogram in sm.tot[0] (clobbered): the largest digit
// whose weight, with everything above, still reaches the target.
template <bool kTopP>
__device__ void select_digit(int pass, State& st, Smem<kTopP>& sm) {
  const int t = int(threadIdx.x);
  u64* h = sm.tot[0];
  for (int off = 1; off < kBins; off <<= 1) {  // suffix sums: h[d] = weight of digits >= d
    const u64 v = (t < kBins && t + off < kBins) ? h[t + off] : 0ull;
    __syncthreads();
    if (t < kBins) h[t] += v;
    __syncthreads();
  }
  if (pass == 0 && h[0] < st.target) {  // the whole row is below the target
    st.keep_all = 1;
    __syncthreads();
    return;
  }
  if (t < kBins) {
    const u64 nxt = t + 1 < kBins ? h[t + 1] : 0ull;
    if (st.above + h[t] >= st.target && st.above + nxt < st.target) sm.bin = uint32_t(t);
  }
  __syncthreads();
  const uint32_t d = sm.bin;
  st.above += d + 1 < uint32_t(kBins) ? h[d + 1] : 0ull;
  st.pivot |= d << (24 - 8 * pass);
  __syncthreads();
}

// Kept sum of chunk c in the reference's order: partial t adds entries c*kChunk + t + 512 u in
// order, then a tree over the 512 partials.
template <bool kTopP>
__device__ float chunk_sum(const float* x, int32_t V, int32_t c, uint32_t pivot, Smem<kTopP>& sm) {
  const int t = int(threadIdx.x);
  const int32_t base = c * kChunk + t;
  uint32_t w[kPerThread];
  DSV4_UNROLL
  for (int u = 0; u < kPerThread; ++u) {
    const int32_t j = base + u * kThreads;
    w[u] = j < V ? weight_bits(x[j]) : 0u;
  }
  float acc = 0.f;
  DSV4_UNROLL
  for (int u = 0; u < kPerThread; ++u)
    if (w[u] >= pivot && base + u * kThreads < V) acc += __uint_as_float(w[u]);
  sm.part[t] = acc;
  __syncthreads();
  for (int off = kThreads / 2; off > 0; off >>= 1) {
    if (t < off) sm.part[t] = sm.part[t] + sm.part[t + off];
    __syncthreads();
  }
  const float s = sm.part[0];
  __syncthreads();
  return s;
}

__device__ __forceinline__ void write_row(const float* x, float* y, int32_t V, int32_t c0,
                                          int32_t step, uint32_t pivot, float S) {
  each_weight(x, V, c0, step, [&](int32_t i, uint32_t w) {
    y[i] = (S > 0.f && w >= pivot) ? __uint_as_float(w) / S : 0.f;
  });
}

}  // namespace
}  // namespace dsv4::kernels::sampling_renorm

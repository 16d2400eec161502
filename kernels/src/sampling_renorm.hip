// sampling_renorm kernel: one block per row; the pivot by a four-pass radix search over the fp32
// bits (counts for top-k, exact fixed-point masses for top-p, in per-group histograms), a
// fixed-order fp32 kept sum, then one write pass.
#include "dsv4/kernels/sampling_renorm.hpp"

#include <stdexcept>
#include <string>

#include "dsv4/gpu/gpu.hpp"

namespace dsv4::kernels::sampling_renorm {
namespace {

constexpr int kThreads = 512;
constexpr int kGroups = kThreads / 32;  // private histograms, one per 32 threads
constexpr int kBins = 256;              // 8-bit digits, four passes over the 32 value bits
constexpr int kUnroll = 4;              // loads in flight per thread
constexpr int64_t kMaxV = int64_t(1) << 18;
using u64 = unsigned long long;

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

__device__ __forceinline__ u64 fixed_of(uint32_t bits, int s) {
  return u64(floor(ldexp(double(__uint_as_float(bits)), s)));
}

// Calls f(i, weight bits of x[i]) for this thread's entries, kUnroll loads in flight (any order:
// only order-free work, histograms and the final write, goes through here).
template <class F>
__device__ __forceinline__ void each_weight(const float* x, int32_t V, F f) {
  for (int32_t i = int32_t(threadIdx.x); i < V; i += kUnroll * kThreads) {
    uint32_t w[kUnroll];
    DSV4_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      const int32_t j = i + u * kThreads;
      w[u] = j < V ? weight_bits(x[j]) : 0u;
    }
    DSV4_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      const int32_t j = i + u * kThreads;
      if (j < V) f(j, w[u]);
    }
  }
}

struct Smem {
  u64 group_hist[kGroups][kBins];  // per-group histograms (less contention on hot bins)
  u64 hist[kBins];                 // their sum, then its suffix sums
  float part[kThreads];
  uint32_t bin;
};

template <bool kTopP>
__global__ void __launch_bounds__(kThreads)
    renorm_kernel(const float* probs, int32_t V, const int32_t* ks, const float* ps, float* out) {
  __shared__ Smem sm;
  const int t = int(threadIdx.x);
  const float* x = probs + int64_t(blockIdx.x) * V;
  float* y = out + int64_t(blockIdx.x) * V;

  bool keep_all;
  u64 target = 0;
  int scale = 0;
  if (!kTopP) {
    const int32_t k = ks[blockIdx.x];
    keep_all = k <= 0 || int64_t(k) >= V;
    target = u64(k > 0 ? k : 0);
  } else {
    const float p = ps[blockIdx.x];
    keep_all = !(p < 1.0f);
    if (!keep_all) {
      uint32_t m = 0;
      each_weight(x, V, [&](int32_t, uint32_t w) { m = w > m ? w : m; });
      sm.part[t] = __uint_as_float(m);  // w >= 0: float order is bit order
      __syncthreads();
      for (int off = kThreads / 2; off > 0; off >>= 1) {
        if (t < off) sm.part[t] = sm.part[t + off] > sm.part[t] ? sm.part[t + off] : sm.part[t];
        __syncthreads();
      }
      const uint32_t mx = __float_as_uint(sm.part[0]);
      __syncthreads();
      if (mx == 0) {
        keep_all = true;  // no mass at all
      } else {
        scale = 43 - exponent_of(mx);
        const double want = ceil(ldexp(double(p), scale));
        if (want > ldexp(1.0, 62))
          keep_all = true;  // beyond the row's whole mass
        else
          target = want < 1.0 ? 1ull : u64(want);  // p <= 0 still keeps the maximum
      }
    }
  }

  // The pivot: the largest value v with (count or fixed-point mass of entries >= v) >= target,
  // one 8-bit digit of its bits per pass, from the top.
  uint32_t pivot = 0;  // kept: weight bits >= pivot
  if (!keep_all) {
    u64 above = 0;  // weight of the entries above the current prefix
    u64* mine = sm.group_hist[t / 32];
    for (int pass = 0; pass < 4; ++pass) {
      const int shift = 24 - 8 * pass;
      for (int i = t; i < kGroups * kBins; i += kThreads) (&sm.group_hist[0][0])[i] = 0;
      __syncthreads();
      each_weight(x, V, [&](int32_t, uint32_t w) {
        if (pass > 0 && (w >> (shift + 8)) != (pivot >> (shift + 8))) return;
        const u64 wt = kTopP ? fixed_of(w, scale) : 1ull;
        if (wt) atomicAdd(&mine[(w >> shift) & 255u], wt);
      });
      __syncthreads();
      if (t < kBins) {
        u64 sum = 0;
        for (int g = 0; g < kGroups; ++g) sum += sm.group_hist[g][t];
        sm.hist[t] = sum;
      }
      __syncthreads();
      for (int off = 1; off < kBins; off <<= 1) {  // suffix sums: hist[d] = weight of digits >= d
        const u64 v = (t < kBins && t + off < kBins) ? sm.hist[t + off] : 0ull;
        __syncthreads();
        if (t < kBins) sm.hist[t] += v;
        __syncthreads();
      }
      if (pass == 0 && sm.hist[0] < target) {  // the whole row is below the target mass
        keep_all = true;
        break;
      }
      if (t < kBins) {
        const u64 nxt = t + 1 < kBins ? sm.hist[t + 1] : 0ull;
        if (above + sm.hist[t] >= target && above + nxt < target) sm.bin = uint32_t(t);
      }
      __syncthreads();
      const uint32_t d = sm.bin;
      above += d + 1 < uint32_t(kBins) ? sm.hist[d + 1] : 0ull;
      pivot |= d << shift;
      __syncthreads();
    }
    if (keep_all) pivot = 0;
  }

  // Kept sum in a fixed order: each thread's entries in index order, then a tree over threads.
  float acc = 0.f;
  for (int32_t i = t; i < V; i += kThreads) {
    const uint32_t w = weight_bits(x[i]);
    if (w >= pivot) acc += __uint_as_float(w);
  }
  sm.part[t] = acc;
  __syncthreads();
  for (int off = kThreads / 2; off > 0; off >>= 1) {
    if (t < off) sm.part[t] = sm.part[t] + sm.part[t + off];
    __syncthreads();
  }
  const float S = sm.part[0];
  each_weight(x, V, [&](int32_t i, uint32_t w) {
    y[i] = (S > 0.f && w >= pivot) ? __uint_as_float(w) / S : 0.f;
  });
}

[[noreturn]] void bad(const char* fn, const std::string& what) {
  throw std::invalid_argument(std::string("sampling_renorm::") + fn + ": " + what);
}

bool check(const char* fn, const float* probs, int64_t B, int64_t V, const void* param,
           const float* out) {
  if (B < 0 || B > 0x7fffffff) bad(fn, "B=" + std::to_string(B) + " must be in [0, 2^31)");
  if (V < 1 || V > kMaxV) bad(fn, "V=" + std::to_string(V) + " must be in [1, 2^18]");
  if (B == 0) return false;
  if (!probs || !out || !param)
    bad(fn, "null pointer: probs, out and the per-row k/p are required");
  return true;
}

}  // namespace

void top_k(const float* probs, int64_t B, int64_t V, const int32_t* k, float* out, gpu::Stream s) {
  if (!check("top_k", probs, B, V, k, out)) return;
  gpu::launch(renorm_kernel<false>, dim3{unsigned(B)}, dim3{unsigned(kThreads)}, 0,
              static_cast<hipStream_t>(s), probs, int32_t(V), k, static_cast<const float*>(nullptr),
              out);
}

void top_p(const float* probs, int64_t B, int64_t V, const float* p, float* out, gpu::Stream s) {
  if (!check("top_p", probs, B, V, p, out)) return;
  gpu::launch(renorm_kernel<true>, dim3{unsigned(B)}, dim3{unsigned(kThreads)}, 0,
              static_cast<hipStream_t>(s), probs, int32_t(V), static_cast<const int32_t*>(nullptr),
              p, out);
}

}  // namespace dsv4::kernels::sampling_renorm

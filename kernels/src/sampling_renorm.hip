// sampling_renorm kernels: the pivot by a four-pass radix search over the fp32 bits (32-bit counts
// for top-k, exact fixed-point masses split in 32-bit halves for top-p), a kept sum in fixed-size
// chunks added in chunk order, then one write pass. A row spreads over several blocks when B is
// small: one launch per pass, each block histogramming its chunks into its own workspace slot and
// the next launch's blocks adding the slots in block order; with one block per row, one kernel.
#include "dsv4/kernels/sampling_renorm.hpp"

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <string>

#include "dsv4/gpu/gpu.hpp"

namespace dsv4::kernels::sampling_renorm {
namespace {

constexpr int kThreads = 512;
constexpr int kGroups = kThreads / 32;  // private histograms, one per 32 threads
constexpr int kBins = 256;              // 8-bit digits, four passes over the 32 value bits
constexpr int kChunk = 4096;            // entries per kept-sum chunk (the reference's kKernelChunk)
constexpr int kPerThread = kChunk / kThreads;
constexpr int kPasses = 4;
constexpr int64_t kMaxV = int64_t(1) << 18;
constexpr int64_t kBlocksPerSm = 2;       // grid aimed at when B is small
constexpr int64_t kMaxGridBlocks = 512;   // the workspace covers up to this many blocks
constexpr int64_t kMaxBlocksPerRow = 32;  // bounds the slots each block adds up
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

// Where the multi-block passes keep their results, per row (bpr blocks, nchunks chunks).
struct Work {
  State* state;    // [B][kPasses + 1]: the state before pass n (n = kPasses: the final pivot)
  uint32_t* maxv;  // [B][bpr]: each block's largest weight bits (top-p)
  float* csum;     // [B][nchunks]: kept sum of each chunk
  u64* hist;       // [2][B][bpr][kBins]: each block's histogram, by pass parity
  int32_t bpr;
  int32_t nchunks;
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

// One block per row: every pass in one kernel.
template <bool kTopP>
__global__ void __launch_bounds__(kThreads)
    row_kernel(const float* probs, int32_t V, const int32_t* ks, const float* ps, float* out) {
  __shared__ Smem<kTopP> sm;
  const float* x = probs + int64_t(blockIdx.x) * V;
  float* y = out + int64_t(blockIdx.x) * V;
  State st;
  if (!kTopP) {
    st = state_top_k(ks[blockIdx.x], V);
  } else {
    const float p = ps[blockIdx.x];
    st = state_top_p(p, p < 1.0f ? block_max(x, V, 0, 1, sm) : 0u);
  }
  for (int pass = 0; pass < kPasses && !st.keep_all; ++pass) {
    block_histogram(x, V, 0, 1, pass, st, sm);
    select_digit(pass, st, sm);
  }
  const uint32_t pivot = st.keep_all ? 0u : st.pivot;
  const int32_t nchunks = (V + kChunk - 1) / kChunk;
  float S = 0.f;
  for (int32_t c = 0; c < nchunks; ++c) S = S + chunk_sum(x, V, c, pivot, sm);
  write_row(x, y, V, 0, 1, pivot, S);
}

// Multi-block passes: block j of row r is blockIdx.x = r * bpr + j and takes chunks j, j + bpr, ...

// The row's histogram of the previous pass into sm.tot[0]: the blocks' slots added in block order.
template <bool kTopP>
__device__ void gather_histogram(const u64* slots, int32_t bpr, Smem<kTopP>& sm) {
  const int t = int(threadIdx.x), bin = t % kBins, half = t / kBins;
  u64 sum = 0;
  for (int32_t j = half; j < bpr; j += kThreads / kBins) sum += slots[int64_t(j) * kBins + bin];
  sm.tot[half][bin] = sum;
  __syncthreads();
  if (t < kBins) sm.tot[0][t] += sm.tot[1][t];
  __syncthreads();
}

// The state before pass `pass` (1 .. kPasses): the stored state before pass - 1 and the digit the
// slots of pass - 1 give. Block 0 of the row stores it.
template <bool kTopP>
__device__ State advance(const Work& w, int64_t row, int32_t j, int pass, Smem<kTopP>& sm) {
  State st = w.state[row * (kPasses + 1) + pass - 1];
  if (!st.keep_all) {
    const u64* slots = w.hist + (int64_t((pass - 1) & 1) * gridDim.x + row * w.bpr) * kBins;
    gather_histogram(slots, w.bpr, sm);
    select_digit(pass - 1, st, sm);
  }
  if (j == 0 && threadIdx.x == 0) w.state[row * (kPasses + 1) + pass] = st;
  return st;
}

// top-p: each block's largest weight bits.
__global__ void __launch_bounds__(kThreads)
    max_kernel(const float* probs, int32_t V, const float* ps, Work w) {
  __shared__ Smem<true> sm;
  const int64_t row = blockIdx.x / w.bpr;
  const int32_t j = int32_t(blockIdx.x % w.bpr);
  const uint32_t m = ps[row] < 1.0f ? block_max(probs + row * V, V, j, w.bpr, sm) : 0u;
  if (threadIdx.x == 0) w.maxv[row * w.bpr + j] = m;
}

// Pass `pass` of the radix search: the state before it, then this block's histogram of the digit.
template <bool kTopP>
__global__ void __launch_bounds__(kThreads)
    radix_kernel(const float* probs, int32_t V, const int32_t* ks, const float* ps, Work w,
                 int pass) {
  __shared__ Smem<kTopP> sm;
  const int64_t row = blockIdx.x / w.bpr;
  const int32_t j = int32_t(blockIdx.x % w.bpr);
  State st;
  if (pass > 0) {
    st = advance(w, row, j, pass, sm);
  } else {
    if (!kTopP) {
      st = state_top_k(ks[row], V);
    } else {
      uint32_t mx = 0;
      for (int32_t b = 0; b < w.bpr; ++b) {
        const uint32_t m = w.maxv[row * w.bpr + b];
        mx = m > mx ? m : mx;
      }
      st = state_top_p(ps[row], mx);
    }
    if (j == 0 && threadIdx.x == 0) w.state[row * (kPasses + 1)] = st;
  }
  if (st.keep_all) return;
  block_histogram(probs + row * V, V, j, w.bpr, pass, st, sm);
  u64* slot = w.hist + (int64_t(pass & 1) * gridDim.x + blockIdx.x) * kBins;
  if (threadIdx.x < kBins) slot[threadIdx.x] = sm.tot[0][threadIdx.x];
}

// The final pivot, then the kept sum of each of this block's chunks.
template <bool kTopP>
__global__ void __launch_bounds__(kThreads) sum_kernel(const float* probs, int32_t V, Work w) {
  __shared__ Smem<kTopP> sm;
  const int64_t row = blockIdx.x / w.bpr;
  const int32_t j = int32_t(blockIdx.x % w.bpr);
  const State st = advance(w, row, j, kPasses, sm);
  const uint32_t pivot = st.keep_all ? 0u : st.pivot;
  for (int32_t c = j; c < w.nchunks; c += w.bpr) {
    const float s = chunk_sum(probs + row * V, V, c, pivot, sm);
    if (threadIdx.x == 0) w.csum[row * w.nchunks + c] = s;
  }
}

// The row's kept sum (chunk sums added in chunk order), then this block's chunks written.
__global__ void __launch_bounds__(kThreads)
    write_kernel(const float* probs, int32_t V, Work w, float* out) {
  __shared__ float sums[kMaxV / kChunk];
  __shared__ float total;
  const int64_t row = blockIdx.x / w.bpr;
  const int32_t j = int32_t(blockIdx.x % w.bpr);
  const State st = w.state[row * (kPasses + 1) + kPasses];
  for (int32_t c = int32_t(threadIdx.x); c < w.nchunks; c += kThreads)
    sums[c] = w.csum[row * w.nchunks + c];
  __syncthreads();
  if (threadIdx.x == 0) {
    float S = 0.f;
    for (int32_t c = 0; c < w.nchunks; ++c) S = S + sums[c];
    total = S;
  }
  __syncthreads();
  write_row(probs + row * V, out + row * V, V, j, w.bpr, st.keep_all ? 0u : st.pivot, total);
}

[[noreturn]] void bad(const char* fn, const std::string& what) {
  throw std::invalid_argument(std::string("sampling_renorm::") + fn + ": " + what);
}

void check_shape(const char* fn, int64_t B, int64_t V) {
  if (B < 0 || B > 0x7fffffff) bad(fn, "B=" + std::to_string(B) + " must be in [0, 2^31)");
  if (V < 1 || V > kMaxV) bad(fn, "V=" + std::to_string(V) + " must be in [1, 2^18]");
}

int64_t chunks_of(int64_t V) { return (V + kChunk - 1) / kChunk; }

// Blocks per row: enough for about kBlocksPerSm blocks per compute unit, at most one per chunk
// and kMaxBlocksPerRow.
int64_t blocks_per_row(int64_t B, int64_t V, int64_t units) {
  const int64_t cap = std::min<int64_t>(std::min<int64_t>(chunks_of(V), kMaxBlocksPerRow),
                                        (kMaxGridBlocks + B - 1) / B);
  return std::max<int64_t>(1, std::min<int64_t>(cap, (kBlocksPerSm * units + B - 1) / B));
}

size_t align8(size_t n) { return (n + 7) / 8 * 8; }

// The workspace of the multi-block passes carved for bpr blocks per row (0 bytes for one).
size_t carve(int64_t B, int64_t V, int64_t bpr, void* base, Work* w) {
  if (bpr <= 1) return 0;
  const size_t b = size_t(B), nb = size_t(bpr), nc = size_t(chunks_of(V));
  const size_t o_state = 0;
  const size_t o_max = o_state + b * (kPasses + 1) * sizeof(State);
  const size_t o_csum = align8(o_max + b * nb * sizeof(uint32_t));
  const size_t o_hist = align8(o_csum + b * nc * sizeof(float));
  const size_t total = o_hist + 2 * b * nb * kBins * sizeof(u64);
  if (w) {
    char* p = static_cast<char*>(base);
    *w = Work{reinterpret_cast<State*>(p + o_state),
              reinterpret_cast<uint32_t*>(p + o_max),
              reinterpret_cast<float*>(p + o_csum),
              reinterpret_cast<u64*>(p + o_hist),
              int32_t(bpr),
              int32_t(nc)};
  }
  return total;
}

// The current device's compute units, asked once per device.
int64_t compute_units() {
  static std::atomic<int> cache[64] = {};
  int dev = 0;
  if (hipGetDevice(&dev) != hipSuccess || dev < 0) dev = 0;
  if (dev < 64)
    if (const int n = cache[dev].load(std::memory_order_relaxed); n > 0) return n;
  hipDeviceProp_t prop{};
  const int n = hipGetDeviceProperties(&prop, dev) == hipSuccess ? prop.multiProcessorCount : 1;
  if (dev < 64) cache[dev].store(n > 0 ? n : 1, std::memory_order_relaxed);
  return n > 0 ? n : 1;
}

bool check(const char* fn, const float* probs, int64_t B, int64_t V, const void* param,
           const float* out, const void* ws, size_t ws_bytes) {
  check_shape(fn, B, V);
  if (B == 0) return false;
  if (!probs || !out || !param)
    bad(fn, "null pointer: probs, out and the per-row k/p are required");
  const size_t need = workspace_bytes(B, V);
  if (need && (!ws || ws_bytes < need))
    bad(fn, "workspace_bytes=" + std::to_string(ws ? ws_bytes : 0) +
                " is below workspace_bytes(B=" + std::to_string(B) + ", V=" + std::to_string(V) +
                ")=" + std::to_string(need));
  if (need && reinterpret_cast<uintptr_t>(ws) % 8)
    bad(fn,
        "workspace=" + std::to_string(reinterpret_cast<uintptr_t>(ws)) + " must be 8-byte aligned");
  return true;
}

template <bool kTopP>
void renorm(const float* probs, int64_t B, int64_t V, const int32_t* k, const float* p, float* out,
            void* ws, hipStream_t s) {
  const int64_t bpr = blocks_per_row(B, V, compute_units());
  const dim3 block{unsigned(kThreads)};
  if (bpr == 1) {
    gpu::launch(row_kernel<kTopP>, dim3{unsigned(B)}, block, 0, s, probs, int32_t(V), k, p, out);
    return;
  }
  Work w{};
  carve(B, V, bpr, ws, &w);
  const dim3 grid{unsigned(B * bpr)};
  if (kTopP) gpu::launch(max_kernel, grid, block, 0, s, probs, int32_t(V), p, w);
  for (int pass = 0; pass < kPasses; ++pass)
    gpu::launch(radix_kernel<kTopP>, grid, block, 0, s, probs, int32_t(V), k, p, w, pass);
  gpu::launch(sum_kernel<kTopP>, grid, block, 0, s, probs, int32_t(V), w);
  gpu::launch(write_kernel, grid, block, 0, s, probs, int32_t(V), w, out);
}

}  // namespace

size_t workspace_bytes(int64_t B, int64_t V) {
  check_shape("workspace_bytes", B, V);
  if (B == 0) return 0;
  return carve(B, V, blocks_per_row(B, V, kMaxGridBlocks), nullptr, nullptr);
}

void top_k(const float* probs, int64_t B, int64_t V, const int32_t* k, float* out, void* workspace,
           size_t workspace_size, gpu::Stream s) {
  if (!check("top_k", probs, B, V, k, out, workspace, workspace_size)) return;
  renorm<false>(probs, B, V, k, nullptr, out, workspace, static_cast<hipStream_t>(s));
}

void top_p(const float* probs, int64_t B, int64_t V, const float* p, float* out, void* workspace,
           size_t workspace_size, gpu::Stream s) {
  if (!check("top_p", probs, B, V, p, out, workspace, workspace_size)) return;
  renorm<true>(probs, B, V, nullptr, p, out, workspace, static_cast<hipStream_t>(s));
}

}  // namespace dsv4::kernels::sampling_renorm

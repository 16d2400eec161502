// sampling_renorm kernels: the pivot by a four-pass radix search over the fp32 bits (32-bit counts
// for top-k, exact fixed-point masses split in 32-bit halves for top-p), a kept sum in fixed-size
// chunks added in chunk order, then one write pass. A row spreads over several blocks when B is
// small, each block histogramming its chunks into its own workspace slot and the next step's
// blocks adding the slots in block order: one launch per step (multi-launch), or one cooperative
// launch whose blocks the runtime keeps resident together and which meet at the runtime's grid
// barrier between steps (fused); with one block per row, one kernel.
#include "dsv4/kernels/sampling_renorm.hpp"

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <string>

#include "device_units.hpp"
#include "dsv4/gpu/gpu.hpp"
#include "sampling_renorm_search.hpp"

namespace dsv4::kernels::sampling_renorm {
namespace {

constexpr int64_t kMaxV = int64_t(1) << 18;
constexpr int64_t kBlocksPerSm = 2;       // grid aimed at when B is small
constexpr int64_t kMaxGridBlocks = 512;   // the workspace covers up to this many blocks
constexpr int64_t kMaxBlocksPerRow = 32;  // bounds the slots each block adds up

// Where the multi-block passes keep their results, per row (bpr blocks, nchunks chunks).
struct Work {
  State* state;    // [B][kPasses + 1]: the state before pass n (n = kPasses: the final pivot)
  uint32_t* maxv;  // [B][bpr]: each block's largest weight bits (top-p)
  float* csum;     // [B][nchunks]: kept sum of each chunk
  u64* hist;       // [2][B][bpr][kBins]: each block's histogram, by pass parity
  int32_t bpr;
  int32_t nchunks;
};

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
// Row offsets fit 32 bits there (B * bpr <= kMaxGridBlocks, so B * V < 2^27).
// Each step below is one launch of the multi-launch variant, or one stretch of the fused kernel
// between grid barriers; both run the same code, so they give the same bytes.

// A value another block wrote in this launch (the fused kernel), read past this block's L1. The
// grid barrier's acquire already orders these reads; the volatile load also keeps a stale line of
// the same slot (the histogram slots alternate by pass parity) out of the answer.
template <class T>
__device__ __forceinline__ T fresh(const T* p) {
  return *static_cast<const volatile T*>(p);
}

// The row's histogram of the previous pass into sm.tot[0]: the blocks' slots added in block order.
template <bool kTopP>
__device__ void gather_histogram(const u64* slots, int32_t bpr, Smem<kTopP>& sm) {
  const int t = int(threadIdx.x), bin = t % kBins, half = t / kBins;
  u64 sum = 0;
  for (int32_t j = half; j < bpr; j += kThreads / kBins)
    sum += fresh(slots + int64_t(j) * kBins + bin);
  sm.tot[half][bin] = sum;
  __syncthreads();
  if (t < kBins) sm.tot[0][t] += sm.tot[1][t];
  __syncthreads();
}

// top-p: this block's largest weight bits into its slot of w.maxv.
template <bool kTopP>
__device__ void max_step(const float* probs, int32_t V, const float* ps, const Work& w, int32_t row,
                         int32_t j, Smem<kTopP>& sm) {
  const uint32_t m = ps[row] < 1.0f ? block_max(probs + row * V, V, j, w.bpr, sm) : 0u;
  if (threadIdx.x == 0) w.maxv[row * w.bpr + j] = m;
}

// The state before pass 0 (top-p: from the blocks' maxima).
template <bool kTopP>
__device__ State first_state(int32_t V, const int32_t* ks, const float* ps, const Work& w,
                             int32_t row) {
  if (!kTopP) return state_top_k(ks[row], V);
  uint32_t mx = 0;
  for (int32_t b = 0; b < w.bpr; ++b) {
    const uint32_t m = fresh(w.maxv + row * w.bpr + b);
    mx = m > mx ? m : mx;
  }
  return state_top_p(ps[row], mx);
}

// The state before pass `pass` (1 .. kPasses) from the one before pass - 1 and the digit the
// slots of pass - 1 give.
template <bool kTopP>
__device__ void next_digit(const Work& w, int32_t row, int pass, State& st, Smem<kTopP>& sm) {
  if (st.keep_all) return;
  gather_histogram(w.hist + (int64_t((pass - 1) & 1) * gridDim.x + row * w.bpr) * kBins, w.bpr, sm);
  select_digit(pass - 1, st, sm);
}

// Pass `pass` of the radix search: this block's histogram of the digit into its slot.
template <bool kTopP>
__device__ void histogram_step(const float* probs, int32_t V, const Work& w, int32_t row, int32_t j,
                               int pass, const State& st, Smem<kTopP>& sm) {
  if (st.keep_all) return;
  block_histogram(probs + row * V, V, j, w.bpr, pass, st, sm);
  u64* slot = w.hist + (int64_t(pass & 1) * gridDim.x + blockIdx.x) * kBins;
  if (threadIdx.x < kBins) slot[threadIdx.x] = sm.tot[0][threadIdx.x];
}

// The kept sum of each of this block's chunks under the final state.
template <bool kTopP>
__device__ void sum_step(const float* probs, int32_t V, const Work& w, int32_t row, int32_t j,
                         const State& st, Smem<kTopP>& sm) {
  const uint32_t pivot = st.keep_all ? 0u : st.pivot;
  for (int32_t c = j; c < w.nchunks; c += w.bpr) {
    const float s = chunk_sum(probs + row * V, V, c, pivot, sm);
    if (threadIdx.x == 0) w.csum[row * w.nchunks + c] = s;
  }
}

// The row's kept sum (chunk sums added in chunk order, through `sums` and `total` in shared
// memory), then this block's chunks written.
__device__ void write_step(const float* probs, int32_t V, const Work& w, int32_t row, int32_t j,
                           const State& st, float* out, float* sums, float& total) {
  for (int32_t c = int32_t(threadIdx.x); c < w.nchunks; c += kThreads)
    sums[c] = fresh(w.csum + row * w.nchunks + c);
  __syncthreads();
  if (threadIdx.x == 0) {
    float S = 0.f;
    for (int32_t c = 0; c < w.nchunks; ++c) S = S + sums[c];
    total = S;
  }
  __syncthreads();
  write_row(probs + row * V, out + row * V, V, j, w.bpr, st.keep_all ? 0u : st.pivot, total);
}

// ---- multi-launch: one kernel per step, the state kept in the workspace between launches ----

// The state before pass `pass` (1 .. kPasses) from the stored one; block 0 of the row stores it.
template <bool kTopP>
__device__ State advance(const Work& w, int32_t row, int32_t j, int pass, Smem<kTopP>& sm) {
  State st = w.state[row * (kPasses + 1) + pass - 1];
  next_digit(w, row, pass, st, sm);
  if (j == 0 && threadIdx.x == 0) w.state[row * (kPasses + 1) + pass] = st;
  return st;
}

__global__ void __launch_bounds__(kThreads)
    max_kernel(const float* probs, int32_t V, const float* ps, Work w) {
  __shared__ Smem<true> sm;
  max_step(probs, V, ps, w, blockIdx.x / uint32_t(w.bpr), int32_t(blockIdx.x % w.bpr), sm);
}

template <bool kTopP>
__global__ void __launch_bounds__(kThreads)
    radix_kernel(const float* probs, int32_t V, const int32_t* ks, const float* ps, Work w,
                 int pass) {
  __shared__ Smem<kTopP> sm;
  const int32_t row = int32_t(blockIdx.x / uint32_t(w.bpr));
  const int32_t j = int32_t(blockIdx.x % w.bpr);
  State st;
  if (pass > 0) {
    st = advance(w, row, j, pass, sm);
  } else {
    st = first_state<kTopP>(V, ks, ps, w, row);
    if (j == 0 && threadIdx.x == 0) w.state[row * (kPasses + 1)] = st;
  }
  histogram_step(probs, V, w, row, j, pass, st, sm);
}

template <bool kTopP>
__global__ void __launch_bounds__(kThreads) sum_kernel(const float* probs, int32_t V, Work w) {
  __shared__ Smem<kTopP> sm;
  const int32_t row = int32_t(blockIdx.x / uint32_t(w.bpr));
  const int32_t j = int32_t(blockIdx.x % w.bpr);
  sum_step(probs, V, w, row, j, advance(w, row, j, kPasses, sm), sm);
}

__global__ void __launch_bounds__(kThreads)
    write_kernel(const float* probs, int32_t V, Work w, float* out) {
  __shared__ float sums[kMaxV / kChunk];
  __shared__ float total;
  const int32_t row = int32_t(blockIdx.x / uint32_t(w.bpr));
  write_step(probs, V, w, row, int32_t(blockIdx.x % w.bpr), w.state[row * (kPasses + 1) + kPasses],
             out, sums, total);
}

// ---- fused: one cooperative launch, the steps separated by the runtime's grid barrier ----

// Every step of the multi-block passes in one launch.
template <bool kTopP>
__global__ void __launch_bounds__(kThreads)
    fused_kernel(const float* probs, int32_t V, const int32_t* ks, const float* ps, Work w,
                 float* out) {
  __shared__ Smem<kTopP> sm;
  const int32_t row = int32_t(blockIdx.x / uint32_t(w.bpr));
  const int32_t j = int32_t(blockIdx.x % w.bpr);
  if (kTopP) {
    max_step(probs, V, ps, w, row, j, sm);
    gpu::grid_sync();
  }
  State st = first_state<kTopP>(V, ks, ps, w, row);
  for (int pass = 0; pass < kPasses; ++pass) {
    if (pass > 0) next_digit(w, row, pass, st, sm);
    histogram_step(probs, V, w, row, j, pass, st, sm);
    gpu::grid_sync();
  }
  next_digit(w, row, kPasses, st, sm);
  sum_step(probs, V, w, row, j, st, sm);
  gpu::grid_sync();
  write_step(probs, V, w, row, j, st, out, sm.part, sm.total);
}

[[noreturn]] void bad(const char* fn, const std::string& what) {
  throw std::invalid_argument(std::string("sampling_renorm::") + fn + ": " + what);
}

void check_shape(const char* fn, int64_t B, int64_t V) {
  if (B < 0 || B > 0x7fffffff) bad(fn, "B=" + std::to_string(B) + " must be in [0, 2^31)");
  if (V < 1 || V > kMaxV) bad(fn, "V=" + std::to_string(V) + " must be in [1, 2^18]");
}

void check_variant(const char* fn, Variant v) {
  if (v != Variant::kAuto && v != Variant::kFused && v != Variant::kMultiLaunch)
    bad(fn,
        "variant=" + std::to_string(int(v)) + " is not a Variant (kAuto, kFused, kMultiLaunch)");
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

// The workspace of the multi-block passes carved for bpr blocks per row (0 bytes for one): the
// per-row arrays. Nothing in it outlives a launch: each launch writes what it reads.
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

// How many blocks of the fused kernel the current device holds at once in a cooperative launch
// (1 when unknown or when the device cannot launch cooperative kernels: the multi-launch path).
template <bool kTopP>
int64_t resident_fused_blocks() {
  static std::atomic<int> cache[64] = {};
  return per_device(cache, [](int dev) {
    int cooperative = 0;
    if (dsv4_cooperative_launch(&cooperative, dev) != hipSuccess || !cooperative) {
      (void)hipGetLastError();
      return 1;
    }
    int per_unit = 0;
    if (hipOccupancyMaxActiveBlocksPerMultiprocessor(&per_unit, fused_kernel<kTopP>, kThreads, 0) !=
        hipSuccess) {
      (void)hipGetLastError();  // not left for the next launch's check
      return 1;
    }
    return int(std::min<int64_t>(int64_t(per_unit) * compute_units(), 1 << 30));
  });
}

// kAuto's choice where a row spreads over several blocks: true, the fused kernel where a
// cooperative launch holds its blocks; false, the multi-launch path always.
constexpr bool kAutoFuses = true;

struct Plan {
  Path path;
  int64_t bpr;  // blocks per row
};

// The path of a launch and its blocks per row: the fused kernel takes at most the multi-launch
// path's blocks per row, and only as many as a cooperative launch holds at once (at least two per
// row).
template <bool kTopP>
Plan plan(int64_t B, int64_t V, Variant v) {
  const int64_t bpr = blocks_per_row(B, V, compute_units());
  if (bpr == 1) return {Path::kOneBlockPerRow, 1};
  if (v == Variant::kMultiLaunch || (v == Variant::kAuto && !kAutoFuses))
    return {Path::kMultiLaunch, bpr};
  const int64_t fused = std::min(bpr, resident_fused_blocks<kTopP>() / B);
  return fused >= 2 ? Plan{Path::kFused, fused} : Plan{Path::kMultiLaunch, bpr};
}

bool check(const char* fn, const float* probs, int64_t B, int64_t V, const void* param,
           const float* out, const void* ws, size_t ws_bytes, Variant v) {
  check_shape(fn, B, V);
  check_variant(fn, v);
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

// Whether the fused kernel's cooperative launch may be enqueued on s: always on CUDA (captured
// into a graph as a cooperative kernel node); on HIP not while s is being captured, where the
// multi-launch path runs instead (the same bytes).
bool fused_capturable(hipStream_t s) {
#if DSV4_GPU_HIP
  bool capturing = false;
  if (dsv4_stream_capturing(s, &capturing) != hipSuccess) (void)hipGetLastError();
  return !capturing;
#else
  (void)s;
  return true;
#endif
}

template <bool kTopP>
void renorm(const float* probs, int64_t B, int64_t V, const int32_t* k, const float* p, float* out,
            void* ws, hipStream_t s, Variant v) {
  const Plan pl = plan<kTopP>(B, V, v);
  const dim3 block{unsigned(kThreads)};
  if (pl.path == Path::kOneBlockPerRow) {
    gpu::launch(row_kernel<kTopP>, dim3{unsigned(B)}, block, 0, s, probs, int32_t(V), k, p, out);
    return;
  }
  Work w{};
  carve(B, V, pl.bpr, ws, &w);  // within workspace_bytes: it counts the most blocks per row
  const dim3 grid{unsigned(B * pl.bpr)};
  if (pl.path == Path::kFused && fused_capturable(s)) {
    gpu::launch_cooperative(fused_kernel<kTopP>, grid, block, 0, s, probs, int32_t(V), k, p, w,
                            out);
    return;
  }
  if (kTopP) gpu::launch(max_kernel, grid, block, 0, s, probs, int32_t(V), p, w);
  for (int pass = 0; pass < kPasses; ++pass)
    gpu::launch(radix_kernel<kTopP>, grid, block, 0, s, probs, int32_t(V), k, p, w, pass);
  gpu::launch(sum_kernel<kTopP>, grid, block, 0, s, probs, int32_t(V), w);
  gpu::launch(write_kernel, grid, block, 0, s, probs, int32_t(V), w, out);
}

}  // namespace

const char* path_name(Path p) {
  switch (p) {
    case Path::kOneBlockPerRow:
      return "one block per row";
    case Path::kMultiLaunch:
      return "multi-launch";
    case Path::kFused:
      return "fused";
  }
  return "?";
}

size_t workspace_bytes(int64_t B, int64_t V) {
  check_shape("workspace_bytes", B, V);
  if (B == 0) return 0;
  return carve(B, V, blocks_per_row(B, V, kMaxGridBlocks), nullptr, nullptr);
}

Path path_of(int64_t B, int64_t V, bool top_p, Variant v) {
  check_shape("path_of", B, V);
  check_variant("path_of", v);
  if (B == 0) return Path::kOneBlockPerRow;
  return top_p ? plan<true>(B, V, v).path : plan<false>(B, V, v).path;
}

void top_k(const float* probs, int64_t B, int64_t V, const int32_t* k, float* out, void* workspace,
           size_t workspace_size, gpu::Stream s, Variant v) {
  if (!check("top_k", probs, B, V, k, out, workspace, workspace_size, v)) return;
  renorm<false>(probs, B, V, k, nullptr, out, workspace, static_cast<hipStream_t>(s), v);
}

void top_p(const float* probs, int64_t B, int64_t V, const float* p, float* out, void* workspace,
           size_t workspace_size, gpu::Stream s, Variant v) {
  if (!check("top_p", probs, B, V, p, out, workspace, workspace_size, v)) return;
  renorm<true>(probs, B, V, nullptr, p, out, workspace, static_cast<hipStream_t>(s), v);
}

}  // namespace dsv4::kernels::sampling_renorm

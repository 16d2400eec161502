// sparse_decode kernel on matrix cores (dsv4/gpu/mma.hpp): one block per (query, group of 16 G
// heads, split), G = 4 (64 heads) on NVIDIA when H allows it, else 1. Per tile of kTile key columns
// the block gathers and dequantises the rows into shared memory (bf16, SGLang's reader rules
// through the shared codecs; a tile's indices are loaded a tile ahead, its bytes before the
// previous tile's scores, decoded into the other buffer during its softmax), so every tile serves
// all the block's heads. Warp w owns kM tiles of 16 heads (kM = 2 for G = 4: each B fragment
// serves two products) and output values [Dw (w % Dp), +Dw), Dw = 512 / Dp: it multiplies its
// heads' q by the tile's keys over its Dw values (bf16 x bf16 -> fp32 tiles), the Dp partial
// scores of a head are added in shared memory in a fixed order, the online softmax (base 2, fp32)
// runs on them (a head's running maximum moves only by more than kStale), P is rounded to bf16 for
// the output product P V with V the same rows (MLA), and the sums that normalise stay fp32. Output
// through a shared-memory staging tile. One instance per layout set (v41 alone, v41_fp4 alone,
// any), so a common launch runs one reader's code. On NVIDIA the key rows and the partial scores
// sit in shared memory permuted so that no access conflicts on banks (key_col, score_col).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "device_units.hpp"
#include "dsv4/gpu/gpu.hpp"
#include "dsv4/gpu/mma.hpp"
#include "dsv4/kernels/sparse_decode.hpp"
#include "dsv4/kernels/split_combine.hpp"
#include "dsv4/ref/formats/kv_tiles.hpp"
#include "dsv4/ref/fp32_math.hpp"
#include "sparse_decode_gather.hpp"

namespace dsv4::kernels::sparse_decode {
namespace {

namespace mma = gpu::mma;

// fp32 per shared row of partial scores: on NVIDIA kTile, columns XOR-permuted per row (score_col),
// elsewhere one word of padding.
#if DSV4_GPU_CUDA
constexpr int kLdS = kTile;
#else
constexpr int kLdS = kTile + 1;
#endif
constexpr int kLdP = kTile + 8;  // bf16 per shared row of P
// How far (log2) a tile's maximum may exceed a head's running maximum before the maximum moves
// (and O and l are rescaled): 8, so p <= 256, far inside bf16 and fp32.
constexpr float kStale = 8.0f;
static_assert(kItems >= 1 && kTile % 16 == 0);
static_assert(kLdS == kTile + 1 || kTile == 32, "score_col permutes 32 columns");
// A warp multiplies kM tiles of 16 heads (a B fragment serves kM products): 2 when the block has
// 64 heads, else 1.
constexpr int m_tiles(int G) { return G >= 2 ? 2 : 1; }
// Rows of partial scores: Dp * 16 G, Dp = warps / (G / kM), for 8 warps (of 32 lanes) at most.
constexpr int score_rows(int G) { return 8 / (G / m_tiles(G)) * 16 * G; }
// Whether the next tile's bytes are loaded before this tile's scores (in flight during them) or
// just before they are decoded: the scalar tiles of targets without matrix cores leave no
// registers for them.
#if DSV4_MMA_SCALAR
constexpr bool kEarlyLoads = false;
#else
constexpr bool kEarlyLoads = true;
#endif

// Shared memory of a block of G head groups, in bytes from the start:
//   keys [2][kTile][kLd] bf16 | q [16G][kLd] bf16 | partial scores [score_rows][kLdS] fp32 |
//   P [16G][kLdP] bf16 | alpha, m, l [16G] fp32 | valid [2][kTile] int.
// The output staging tile [16G][kD + 4] fp32 reuses the keys and q.
struct Smem {
  int G;
  DSV4_HD constexpr int keys() const { return 0; }
  DSV4_HD constexpr int q() const { return 2 * kTile * kLd * 2; }
  DSV4_HD constexpr int scores() const { return q() + 16 * G * kLd * 2; }
  DSV4_HD constexpr int p() const { return scores() + score_rows(G) * kLdS * 4; }
  DSV4_HD constexpr int stats() const { return p() + 16 * G * kLdP * 2; }
  DSV4_HD constexpr int valid() const { return stats() + 3 * 16 * G * 4; }
  DSV4_HD constexpr int bytes() const { return valid() + 2 * kTile * 4; }
};
constexpr int kLdO = kD + 4;  // fp32 per row of the output staging tile
static_assert(16 * kMaxGroups * kLdO * 4 <= Smem{kMaxGroups}.scores());
static_assert(16 * kLdO * 4 <= Smem{1}.scores());
static_assert(Smem{4}.scores() % 16 == 0 && Smem{4}.p() % 16 == 0 && Smem{1}.p() % 16 == 0);

struct KArgs {
  Args a;
  int64_t S, C;  // splits, columns per split
  bf16* out;
  float* lse;  // unsplit: natural log [B, H]; split: base 2 [B, S, H]
  float* o;    // split partials, or null for the unsplit output
};

// Where row h of the partial scores stores key column j. On NVIDIA (rows of 32 words, kTile 32)
// bits 0-1 of h go to bits 3-4 of j and bit 2 to bits 0 and 2: the accumulator stores (8 rows x
// 4 column pairs per instruction) and the softmax loads (8 heads x 4 consecutive keys) each hit 32
// distinct banks.
__device__ __forceinline__ int score_col(int h, int j) {
#if DSV4_GPU_CUDA
  return j ^ (8 * (h & 3) + 5 * ((h >> 2) & 1));
#else
  (void)h;
  return j;
#endif
}

__device__ __forceinline__ mma::FragB key_b_t(const bf16* rows, int col, int lane) {
#if DSV4_MMA_NV
  return mma::load_b_t_at(rows, kLd, col, lane, key_col);
#else
  return mma::load_b_t(rows + col, kLd, lane);
#endif
}
__device__ __forceinline__ mma::FragB key_b(const bf16* rows, int col, int lane) {
#if DSV4_MMA_NV
  return mma::load_b_at(rows, kLd, col, lane, key_col);
#else
  return mma::load_b(rows + col, kLd, lane);
#endif
}

// x, but on AMD opaque to the optimiser: values derived from it in the tile loop and the epilogue
// are recomputed there rather than held in registers through the loop.
__device__ __forceinline__ int fresh(int x) {
#if DSV4_GPU_HIP
  asm volatile("" : "+v"(x));
#endif
  return x;
}

// x, the same in every lane, said so to the AMD compiler (which may otherwise keep a branch on it
// as a divergent one).
__device__ __forceinline__ int uniform(int x) {
#if DSV4_GPU_HIP
  return __builtin_amdgcn_readfirstlane(x);
#else
  return x;
#endif
}

// A block-wide barrier with workgroup memory ordering (on AMD the fences and s_barrier as
// builtins: the same as __syncthreads, without a library call in device-only builds).
__device__ __forceinline__ void sync_block() {
#if DSV4_GPU_HIP
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
#else
  __syncthreads();
#endif
}

template <int G, Lay A>
__global__ void __launch_bounds__(kThreads) decode_kernel(KArgs k) {
  constexpr int kWarps = kThreads / mma::kLanes;
  constexpr int kM = m_tiles(G);    // 16-head tiles per warp
  constexpr int kWG = G / kM;       // warp head groups
  constexpr int Dp = kWarps / kWG;  // warps per head group
  constexpr int Dw = kD / Dp;       // output values per warp
  constexpr int kHeads = 16 * G;
  constexpr int kNt = Dw / 16;  // output tiles per head tile
  static_assert(kWarps % kWG == 0 && Dw % 16 == 0 && Dp * kHeads <= score_rows(G));
  // Softmax: kTph threads per head, kKpt keys each.
  constexpr int kTph = kTile < kThreads / kHeads ? kTile : kThreads / kHeads;
  constexpr int kKpt = kTile / kTph;
  static_assert(kTph <= 32 && kTile % kTph == 0 && kHeads * kTph == kThreads);
  constexpr Smem L{G};

#if DSV4_GPU_NONE
  static U4 smem_host[L.bytes() / 16];
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem_host);
#else
  extern __shared__ U4 smem_dyn[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem_dyn);
#endif
  bf16* sk = reinterpret_cast<bf16*>(smem + L.keys());
  bf16* sq = reinterpret_cast<bf16*>(smem + L.q());
  float* ss = reinterpret_cast<float*>(smem + L.scores());
  bf16* sp = reinterpret_cast<bf16*>(smem + L.p());
  float* salpha = reinterpret_cast<float*>(smem + L.stats());
  float* sm = salpha + kHeads;
  float* sl = sm + kHeads;
  int* svalid = reinterpret_cast<int*>(smem + L.valid());

  const Args& a = k.a;
  const int tid = threadIdx.x;
  // Roles of thread t: lane of warp (g, d), which owns heads [16 kM g, +16 kM) and values
  // [Dw d, +Dw); softmax thread sub of head sh (kTph per head).
  struct Roles {
    int lane, g, d, sh, sub;
  };
  auto roles = [](int t) {
    const int warp = t / mma::kLanes;
    return Roles{t % mma::kLanes, warp / Dp, warp % Dp, t / kTph, t % kTph};
  };
  const int64_t b = blockIdx.x;
  const int64_t h0 = int64_t(blockIdx.y) * kHeads;
  const int64_t split = blockIdx.z;

  // q of the block's heads.
  for (int i = tid; i < kHeads * (kD / 8); i += kThreads) {
    const int r = i / (kD / 8), c = i % (kD / 8);
    reinterpret_cast<U4*>(sq + r * kLd)[c] =
        reinterpret_cast<const U4*>(a.q + (b * a.H + h0 + r) * kD)[c];
  }

  const int64_t total = a.main.K + (a.extra.pool ? a.extra.K : 0);
  const int64_t c0 = split * k.C, c1 = c0 + k.C < total ? c0 + k.C : total;
  const Tiles T(a, b, c0, c1);
  const int tiles = uniform(int(T.n));  // of this block
  unsigned errors = 0;  // error columns this thread met (counted by the first head block)

  // Tile t + 1's indices are loaded a tile ahead of its bytes, which are loaded a step ahead of
  // their decoding.
  int32_t idx[kItems], slot[kItems];
  Raw raw[kItems];
  auto gather_next = [&](int t) {  // tile t + 1's bytes, tile t + 2's indices
    load_tile<A>(a, T, t + 1, fresh(tid), idx, slot, raw, errors);
    if (t + 2 < tiles) load_indices(a, T, t + 2, b, tid, idx);
  };
  if (tiles > 0) {
    load_indices(a, T, 0, b, tid, idx);
    gather_next(-1);
    store_tile<A>(a, T, 0, tid, slot, raw, sk, svalid);
  }
#ifndef DSV4_PLANT_MISSING_SYNC  // the sanitizer's proof: only racecheck sees this barrier missing
  sync_block();
#endif

  // Softmax state of head roles(tid).sh.
  const float scale2 = a.sm_scale * f32m::kLog2e;
  float m = -f32m::inf(), l = 0.0f;

  mma::Acc o[kM][kNt];
  DSV4_UNROLL
  for (int mi = 0; mi < kM; ++mi) {
    DSV4_UNROLL
    for (int n = 0; n < kNt; ++n) mma::zero(o[mi][n]);
  }

  for (int t = 0; t < tiles; ++t) {
    const int buf = int(t & 1);
    const Roles r = roles(fresh(tid));
    const int lane = r.lane, g = r.g, d = r.d, sh = r.sh, sub = r.sub;
    const bf16* keys = sk + buf * kTile * kLd;
    if (kEarlyLoads && t + 1 < tiles) gather_next(t);

    // Partial scores of the warp's heads over its values.
    {
      mma::Acc s[kM][kTile / 16];
      DSV4_UNROLL
      for (int mi = 0; mi < kM; ++mi) {
        DSV4_UNROLL
        for (int n = 0; n < kTile / 16; ++n) mma::zero(s[mi][n]);
      }
      DSV4_UNROLL
      for (int kk = 0; kk < Dw / 16; ++kk) {
        const int col = Dw * d + 16 * kk;
        mma::FragA qa[kM];
        DSV4_UNROLL
        for (int mi = 0; mi < kM; ++mi)
          qa[mi] = mma::load_a(sq + 16 * (kM * g + mi) * kLd + col, kLd, lane);
        DSV4_UNROLL
        for (int n = 0; n < kTile / 16; ++n) {
          const mma::FragB kb = key_b_t(keys + 16 * n * kLd, col, lane);
          DSV4_UNROLL
          for (int mi = 0; mi < kM; ++mi) mma::mma(s[mi][n], qa[mi], kb, lane);
        }
      }
      DSV4_UNROLL
      for (int mi = 0; mi < kM; ++mi) {
        float* dst = ss + (d * kHeads + 16 * (kM * g + mi)) * kLdS;
        DSV4_UNROLL
        for (int n = 0; n < kTile / 16; ++n) {
          DSV4_UNROLL
          for (int i = 0; i < mma::kCElems; ++i)
            dst[mma::acc_row(lane, i) * kLdS +
                score_col(mma::acc_row(lane, i), 16 * n + mma::acc_col(lane, i))] = s[mi][n].v[i];
        }
      }
    }
    sync_block();

    // Online softmax (base 2) of head sh over the tile: scores summed over the Dp parts in order.
    {
      const int* valid = svalid + buf * kTile;
      float x[kKpt];
      float tmax = -f32m::inf();
      DSV4_UNROLL
      for (int e = 0; e < kKpt; ++e) {
        const int j = sub + kTph * e;
        const int sj = score_col(sh, j);  // the same for every part (kHeads is a multiple of 16)
        float dot = ss[sh * kLdS + sj];
        DSV4_UNROLL
        for (int p = 1; p < Dp; ++p) dot = dot + ss[(p * kHeads + sh) * kLdS + sj];
        x[e] = valid[j] ? dot * scale2 : -f32m::inf();
        tmax = fmaxf(tmax, x[e]);
      }
      DSV4_UNROLL
      for (int off = 1; off < kTph; off <<= 1) tmax = fmaxf(tmax, __shfl_xor(tmax, off, kTph));
      // The running maximum moves only when the tile's exceeds it by more than kStale (log2), so
      // most tiles keep alpha = 1 (and l, O exactly as they are); p stays below 2^kStale.
      const float m_new = tmax > m + kStale ? tmax : m;
      // Exponents against m_new, or against 0 while the head has no key (then every x is -inf,
      // p = 0, and alpha = 0 scales an O and an l that are still 0).
      const float base = m_new == -f32m::inf() ? 0.0f : m_new;
      const float alpha = exp2f(m - base);
      float psum = 0.0f;
      DSV4_UNROLL
      for (int e = 0; e < kKpt; ++e) {
        const float p = exp2f(x[e] - base);
        psum = psum + p;
        sp[sh * kLdP + sub + kTph * e] = f32_to_bf16(p);
      }
      DSV4_UNROLL
      for (int off = 1; off < kTph; off <<= 1) psum = psum + __shfl_xor(psum, off, kTph);
      l = l * alpha + psum;
      m = m_new;
      if (sub == 0) salpha[sh] = alpha;
    }
    // The next tile into the other buffer (its last reader, the previous P V, is done).
    if (!kEarlyLoads && t + 1 < tiles) gather_next(t);
    if (t + 1 < tiles)
      store_tile<A>(a, T, t + 1, tid, slot, raw, sk + (buf ^ 1) * kTile * kLd,
                    svalid + (buf ^ 1) * kTile);
    sync_block();

    // O = O * alpha + P V over this warp's values. (Skipping the rescale when every alpha is 1,
    // by a vote or a block flag, costs the 64-head kernel its last registers: nvcc spills.)
    DSV4_UNROLL
    for (int mi = 0; mi < kM; ++mi) {
      DSV4_UNROLL
      for (int i = 0; i < mma::kCElems; ++i) {
        const float alpha = salpha[16 * (kM * g + mi) + mma::acc_row(lane, i)];
        DSV4_UNROLL
        for (int n = 0; n < kNt; ++n) o[mi][n].v[i] *= alpha;
      }
    }
    DSV4_UNROLL
    for (int kk = 0; kk < kTile / 16; ++kk) {
      mma::FragA pa[kM];
      DSV4_UNROLL
      for (int mi = 0; mi < kM; ++mi)
        pa[mi] = mma::load_a(sp + 16 * (kM * g + mi) * kLdP + 16 * kk, kLdP, lane);
      DSV4_UNROLL
      for (int n = 0; n < kNt; ++n) {
        const mma::FragB vb = key_b(keys + 16 * kk * kLd, Dw * d + 16 * n, lane);
        DSV4_UNROLL
        for (int mi = 0; mi < kM; ++mi) mma::mma(o[mi][n], pa[mi], vb, lane);
      }
    }
  }

  if (errors && blockIdx.y == 0)
    atomicAdd(reinterpret_cast<unsigned long long*>(a.errors), (unsigned long long)errors);

  // Stage O (and each head's m, l) in shared memory, then write rows of whole vectors.
  const int tid_e = fresh(tid);
  const Roles re = roles(tid_e);
  if (re.sub == 0) sm[re.sh] = m, sl[re.sh] = l;
  sync_block();  // every warp is past its last read of the keys and q
  float* so = reinterpret_cast<float*>(smem);
  DSV4_UNROLL
  for (int mi = 0; mi < kM; ++mi) {
    DSV4_UNROLL
    for (int n = 0; n < kNt; ++n) {
      DSV4_UNROLL
      for (int i = 0; i < mma::kCElems; ++i)
        so[(16 * (kM * re.g + mi) + mma::acc_row(re.lane, i)) * kLdO + Dw * re.d + 16 * n +
           mma::acc_col(re.lane, i)] = o[mi][n].v[i];
    }
  }
  sync_block();

  // Thread tid writes 8 consecutive values per step: rows of kD / 8 threads.
  for (int i = tid_e; i < kHeads * (kD / 8); i += kThreads) {
    const int r = i / (kD / 8), c8 = 8 * (i % (kD / 8));
    const int64_t h = h0 + r;
    const float mr = sm[r], lr = sl[r];
    const bool empty = lr == 0.0f;
    const float* src = so + r * kLdO + c8;
    if (k.o) {  // split partial
      const int64_t row = (b * k.S + split) * a.H + h;
      if (c8 == 0) k.lse[row] = empty ? -f32m::inf() : log2f(lr) + mr;
      uint32_t v[8];
      DSV4_UNROLL
      for (int e = 0; e < 8; ++e) v[e] = f32_bits(empty ? 0.0f : src[e] / lr);
      U4* dst = reinterpret_cast<U4*>(k.o + row * kD + c8);
      dst[0] = U4{v[0], v[1], v[2], v[3]};
      dst[1] = U4{v[4], v[5], v[6], v[7]};
      continue;
    }
    const int64_t row = b * a.H + h;
    if (c8 == 0) k.lse[row] = empty ? f32m::inf() : (log2f(lr) + mr) / f32m::kLog2e;
    const float sink = a.sink ? a.sink[h] : -f32m::inf();
    const bool zero = empty || sink == f32m::inf();
    float f = 1.0f, den = lr;
    if (!zero) {
      const float sk2 = sink * f32m::kLog2e;
      const float ms = fmaxf(mr, sk2);
      f = exp2f(mr - ms);
      den = lr * f + exp2f(sk2 - ms);
    }
    uint32_t w[4];
    DSV4_UNROLL
    for (int e = 0; e < 4; ++e) {
      const float v0 = zero ? 0.0f : src[2 * e] * f / den;
      const float v1 = zero ? 0.0f : src[2 * e + 1] * f / den;
      w[e] = uint32_t(f32m::to_bf16_canonical(v0).bits) |
             (uint32_t(f32m::to_bf16_canonical(v1).bits) << 16);
    }
    reinterpret_cast<U4*>(k.out + row * kD + c8)[0] = U4{w[0], w[1], w[2], w[3]};
  }
}

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("sparse_decode: " + what);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

void check_cache(const char* name, const Cache& c) {
  const std::string n(name);
  if (!kv_layout_valid(int(c.layout)))
    bad(n + ".layout=" + std::to_string(int(c.layout)) + " is not v41, v41_fp4, v4 or v4_fnuz");
  if (c.page_size <= 0) bad(n + ".page_size=" + std::to_string(c.page_size) + " must be > 0");
  if (c.num_pages < 0) bad(n + ".num_pages=" + std::to_string(c.num_pages) + " must be >= 0");
  if (c.num_pages * c.page_size > INT32_MAX)
    bad(n + ": num_pages * page_size=" + std::to_string(c.num_pages * c.page_size) +
        " slots do not fit the int32 indices");
  if (c.K < 0) bad(n + ".K=" + std::to_string(c.K) + " must be >= 0");
  if (!c.pool || !c.indices || !c.lengths)
    bad(n + (!c.pool ? ".pool" : !c.indices ? ".indices" : ".lengths") + " is null");
  if (!aligned16(c.pool)) bad(n + ".pool is not 16-byte aligned");
}

// One launch of the kernel for G head groups per block reading layouts A. On NVIDIA dynamic shared
// memory past 48 KB is allowed first, once per device (a kernel's attributes belong to a device's
// context).
template <int G, Lay A>
void run(const KArgs& k, hipStream_t st) {
  constexpr int bytes = Smem{G}.bytes();
#if DSV4_GPU_CUDA
  static std::atomic<uint64_t> allowed{0};  // bit d: done on device d (d < 64)
  int dev = 0;
  DSV4_GPU_CHECK(cudaGetDevice(&dev));
  const uint64_t bit = dev >= 0 && dev < 64 ? uint64_t(1) << dev : 0;
  if (bit == 0 || (allowed.load() & bit) == 0) {
    DSV4_GPU_CHECK(cudaFuncSetAttribute(decode_kernel<G, A>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    allowed.fetch_or(bit);
  }
#endif
  gpu::launch(decode_kernel<G, A>, dim3(unsigned(k.a.B), unsigned(k.a.H / (16 * G)), unsigned(k.S)),
              dim3(kThreads), size_t(bytes), st, k);
}

// The instance for the caches' layouts: v41 alone or v41_fp4 alone (main, and extra when present,
// in that layout), else the one that reads every layout.
template <int G>
void run_layouts(const KArgs& k, hipStream_t st) {
  const Args& a = k.a;
  auto only = [&](KvLayout l) {
    return a.main.layout == l && (!a.extra.pool || a.extra.layout == l);
  };
  if (only(KvLayout::kV41))
    run<G, Lay::kV41>(k, st);
  else if (only(KvLayout::kV41Fp4))
    run<G, Lay::kV41Fp4>(k, st);
  else
    run<G, Lay::kAny>(k, st);
}

void launch(const Args& a, int64_t S, bf16* out, float* lse, float* o, gpu::Stream s) {
  if (a.B < 0) bad("B=" + std::to_string(a.B) + " must be >= 0");
  if (a.H <= 0 || a.H % 16 != 0)
    bad("H=" + std::to_string(a.H) + " must be a positive multiple of 16");
  if (a.B == 0) return;
  if (a.B > INT32_MAX) bad("B=" + std::to_string(a.B) + " must be < 2^31");
  if (!a.q || !a.errors || !lse || (!out && !o))
    bad(std::string(!a.q ? "q" : !a.errors ? "errors" : !lse ? "lse" : "out") + " is null");
  if (!aligned16(a.q)) bad("q is not 16-byte aligned");
  check_cache("main", a.main);
  if (a.extra.pool) {
    check_cache("extra", a.extra);
    auto v41 = [](KvLayout l) { return l == KvLayout::kV41 || l == KvLayout::kV41Fp4; };
    const bool pair =
        a.extra.layout == a.main.layout || (v41(a.main.layout) && v41(a.extra.layout));
    if (!pair)
      bad(std::string("(main, extra) layouts (") + kv_layout_name(a.main.layout) + ", " +
          kv_layout_name(a.extra.layout) + ") are not a pair SGLang accepts");
  }
  const int64_t total = a.main.K + (a.extra.pool ? a.extra.K : 0);
  KArgs k{a, S, S > 0 ? (total + S - 1) / S : 0, out, lse, o};
  if (k.C == 0) k.C = 1;
  const hipStream_t st = static_cast<hipStream_t>(s);
  if (kMaxGroups >= 4 && a.H % 64 == 0)
    run_layouts<kMaxGroups >= 4 ? 4 : 1>(k, st);
  else
    run_layouts<1>(k, st);
}

}  // namespace

void decode(const Args& a, bf16* out, float* lse, gpu::Stream s) {
  if (!out) bad("out is null");
  if (!aligned16(out)) bad("out is not 16-byte aligned");
  launch(a, 1, out, lse, nullptr, s);
}

namespace {

// Heads a block of the kernel covers (launch() picks the instance the same way).
int64_t heads_per_block(int64_t H) { return kMaxGroups >= 4 && H % 64 == 0 ? 64 : 16; }

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

// Partials of S splits in a workspace: o [B, S, H, 512] fp32, then lse [B, S, H] fp32.
size_t partial_bytes(const Args& a, int64_t S, size_t* lse_offset) {
  const size_t rows = size_t(a.B) * size_t(S) * size_t(a.H);
  const size_t o = align16(rows * size_t(kD) * 4);
  if (lse_offset) *lse_offset = o;
  return o + align16(rows * 4);
}

}  // namespace

int64_t decode_splits(const Args& a) {
  if (a.B <= 0 || a.H <= 0 || a.H % 16 != 0) return 1;
  const int64_t blocks = a.B * (a.H / heads_per_block(a.H));
  const int64_t keys = a.main.K + (a.extra.pool ? a.extra.K : 0);
  const int64_t by_keys = std::max<int64_t>(1, keys / kMinKeysPerSplit);
  const int64_t fill = compute_units() / std::max<int64_t>(blocks, 1);
  return std::clamp<int64_t>(fill, 1, std::min(kMaxAutoSplits, by_keys));
}

size_t decode_workspace_bytes(const Args& a) {
  const int64_t S = decode_splits(a);
  return S > 1 ? partial_bytes(a, S, nullptr) : 0;
}

void decode(const Args& a, bf16* out, float* lse, void* workspace, size_t workspace_bytes,
            gpu::Stream s) {
  const int64_t S = decode_splits(a);
  if (S <= 1) return decode(a, out, lse, s);
  if (!out) bad("out is null");
  if (!aligned16(out)) bad("out is not 16-byte aligned");
  size_t lse_at = 0;
  const size_t need = partial_bytes(a, S, &lse_at);
  if (!workspace || workspace_bytes < need)
    bad("workspace of " + std::to_string(workspace ? workspace_bytes : 0) +
        " bytes is smaller than the " + std::to_string(need) + " bytes of " + std::to_string(S) +
        " splits' partials (decode_workspace_bytes)");
  if (!aligned16(workspace)) bad("workspace is not 16-byte aligned");
  float* o = static_cast<float*>(workspace);
  float* lse2 = reinterpret_cast<float*>(static_cast<uint8_t*>(workspace) + lse_at);
  launch(a, S, nullptr, lse2, o, s);
  split_combine::Args c;
  c.B = a.B, c.S = S, c.H = a.H, c.D = kD;
  c.o = o, c.lse = lse2, c.sink = a.sink;
  c.out = out, c.out_lse = lse, c.errors = a.errors;
  split_combine::combine(c, s);
}

void decode_partials(const Args& a, int64_t S, float* o, float* lse, gpu::Stream s) {
  if (S < 1 || S > 65535) bad("S=" + std::to_string(S) + " must be in [1, 65535]");
  if (!o) bad("o is null");
  if (!aligned16(o)) bad("o is not 16-byte aligned");
  launch(a, S, nullptr, lse, o, s);
}

}  // namespace dsv4::kernels::sparse_decode

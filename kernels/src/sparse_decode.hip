// sparse_decode kernel on matrix cores (dsv4/gpu/mma.hpp): one block per (query, group of 16 G
// heads, column split), or per (part of the key-balanced schedule, head group) running the
// segments of queries its part holds (below, PlanLayout); G = 4 (64 heads) on NVIDIA when H
// allows it, else 1. Per tile of kTile key columns the block gathers and dequantises the rows
// into shared memory (bf16, SGLang's reader rules through the shared codecs; a tile's indices
// are loaded a tile ahead, its bytes before the previous tile's scores, decoded into the other
// buffer during its softmax), so every tile serves all the block's heads. Warp w owns kM tiles
// of 16 heads (kM = 2 for G = 4: each B fragment serves two products) and output values [Dw (w %
// Dp), +Dw), Dw = 512 / Dp: it multiplies its heads' q by the tile's keys over its Dw values (bf16
// x bf16 -> fp32 tiles), the Dp partial scores of a head are added in shared memory in a fixed
// order, the online softmax (base 2, fp32) runs on them (a head's running maximum moves only by
// more than kStale, so most tiles skip the rescale of O), P is rounded to bf16 for the output
// product P V with V the same rows (MLA), and the sums that normalise stay fp32 (per softmax
// thread, added once at the end). Output through a shared-memory staging tile. One instance
// per layout set (v41 alone, v41_fp4 alone, any), so a common launch runs one reader's code. On
// NVIDIA the key rows and the partial scores sit in shared memory permuted so that no access
// conflicts on banks (key_col, score_col). On NVIDIA (sm_90a) the one-layout 64-head instances run
// both products on wgmma instead (wg_instance, below).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "device_units.hpp"
#include "dsv4/gpu/gpu.hpp"
#include "dsv4/gpu/mma.hpp"
#include "dsv4/gpu/wgmma.hpp"
#include "dsv4/kernels/sparse_decode.hpp"
#include "dsv4/kernels/split_combine.hpp"
#include "dsv4/ref/formats/kv_tiles.hpp"
#include "dsv4/ref/fp32_math.hpp"
#include "sparse_decode_gather.hpp"
#include "split_combine_row.hpp"

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
//   P [16G][kLdP] bf16 | alpha, m, l [16G] fp32 | valid [2][kTile] int | the segment: its tiles
//   (Tiles), partial row (int64), part's end unit and query (int32), kept here rather than in
//   registers through the tile loop.
// The output staging tile [16G][kD + 4] fp32 reuses the keys and q.
// The Hopper instances (wg, below: wgmma) instead hold kWgBufs key buffers of the 128-byte swizzle
// (key_sw128) and q in the same swizzle ([8 column blocks][64 rows][128 bytes]), no partial scores
// and no P (both stay in registers): keys [kWgBufs][32 KB] | q [64 KB] | valid [kWgBufs][kTile] |
// alpha, m, l | the segment; the staging tile reuses the keys and q.
constexpr int kLdO = kD + 4;  // fp32 per row of the output staging tile
constexpr int kWgBufs = 3;
constexpr int kWgKeyBytes = kTile * kD * 2;
struct Smem {
  int G;
  bool wg = false;
  DSV4_HD constexpr int keys() const { return 0; }
  DSV4_HD constexpr int q() const { return wg ? kWgBufs * kWgKeyBytes : 2 * kTile * kLd * 2; }
  DSV4_HD constexpr int scores() const { return q() + 16 * G * (wg ? kD : kLd) * 2; }
  DSV4_HD constexpr int p() const { return scores() + (wg ? 0 : score_rows(G) * kLdS * 4); }
  DSV4_HD constexpr int stats() const {
    return wg ? valid() + kWgBufs * kTile * 4 : p() + 16 * G * kLdP * 2;
  }
  DSV4_HD constexpr int valid() const {
    return wg ? (scores() > 16 * G * kLdO * 4 ? scores() : 16 * G * kLdO * 4)
              : stats() + 3 * 16 * G * 4;
  }
  DSV4_HD constexpr int seg() const {
    return wg ? stats() + 3 * 16 * G * 4 : valid() + 2 * kTile * 4;
  }
  DSV4_HD constexpr int bytes() const { return seg() + 80; }
};
static_assert(16 * kMaxGroups * kLdO * 4 <= Smem{kMaxGroups}.scores());
static_assert(16 * kLdO * 4 <= Smem{1}.scores());
static_assert(16 * kMaxGroups * kLdO * 4 <= Smem{kMaxGroups, true}.valid());
static_assert(Smem{kMaxGroups, true}.q() % 1024 == 0 && kWgKeyBytes % 1024 == 0);
static_assert(Smem{kMaxGroups, true}.bytes() <= 227 * 1024);

// Pairs of adjacent words in shared memory, one 8-byte access.
struct alignas(8) I2 {
  int x, y;
};
struct alignas(8) F2 {
  float x, y;
};

// Whether the instance of G head groups reading layouts A runs its products on Hopper's
// warpgroup instructions (NVIDIA builds are sm_90a): the one-layout 64-head ones, two warpgroups
// each of which computes the 64 heads' scores over the tile (both need all of P) and the output
// over its half of the values.
#if DSV4_GPU_CUDA
constexpr bool kWgTarget = true;
#else
constexpr bool kWgTarget = false;
#endif
DSV4_HD constexpr bool wg_instance(int G, Lay A) {
  return kWgTarget && G == 4 && A != Lay::kAny && kTile == 32 && kThreads == 256;
}
// part_plan's scratch: every query's units in the key buffers, the threads' sums in the scores (in
// q for the Hopper instances, which have no score rows).
static_assert(kMaxPlanQueries * 4 <= Smem{1}.q() && kThreads * 4 <= Smem{1}.p() - Smem{1}.scores());
static_assert(kMaxPlanQueries * 4 <= Smem{4, true}.q() &&
              Smem{4, true}.q() + kThreads * 4 <= Smem{4, true}.valid());
static_assert(Smem{4}.scores() % 16 == 0 && Smem{4}.p() % 16 == 0 && Smem{1}.p() % 16 == 0);

// The key-balanced schedule (decode() with a workspace): a query b of n_b key tiles costs
// n_b + kQueryUnits units, its units [U_b, U_{b+1}) in a row of all queries' units; part p of P
// takes units [p C, (p + 1) C), C = ceil(U_B / P), so every part has about the same work. A part
// runs one segment per query its units touch: the query's tiles among them (units U_b ..
// U_b + kQueryUnits - 1 are the query's own, tile t is unit U_b + kQueryUnits + t). A query wholly
// inside one part is written as output there; the segments of a query spanning parts p0..p1 are
// partials in rows b + p0 .. b + p1 (b + p grows with every segment), merged afterwards. Each
// part's block works out its own start from the lengths on the device (no length is read on the
// host, so the call captures into a graph) and writes it for the merge.
// On AMD decode() splits columns instead (the schedule is compiled out of the kernel): its loop
// over segments made the gfx942 build spill scalar registers, and no AMD part has measured it.
#if DSV4_GPU_HIP
constexpr bool kScheduled = false;
#else
constexpr bool kScheduled = true;
#endif
constexpr int kQueryUnits = 5;  // a query's fixed cost (q in, output out, merge) in tiles' units
struct PlanLayout {
  int64_t P, B;
  // int32 words: [0] C, [1] U_B, then first[P] (part p's first query, B when none), then U[B + 1].
  DSV4_HD int64_t first() const { return 4; }
  DSV4_HD int64_t units() const { return 4 + P; }
  DSV4_HD int64_t words() const { return 4 + P + B + 1; }
};

struct KArgs {
  Args a;
  int64_t S = 1, C = 1;     // column splits and columns per split (with a plan: 1, every column)
  bf16* out = nullptr;      // [B, H, 512], or null (column splits)
  float* lse = nullptr;     // with out: [B, H], natural log
  float* o = nullptr;       // split partials [rows, H, 512], or null (unsplit)
  float* o_lse = nullptr;   // with o: [rows, H], base 2
  int32_t* plan = nullptr;  // the key-balanced schedule's words for the merge (PlanLayout), or null
  int64_t P = 0;            // with a plan: its parts (the grid's x)
};

// Where row h of the partial scores stores key column j. On NVIDIA (rows of 32 words, kTile 32)
// the groups of 8 columns are XOR-permuted by bits 0-1 of h: the accumulators' 8-byte stores (4
// rows x 4 column pairs per half-warp) and the 64-head softmax's 16-byte loads (2 heads x 4
// groups of 8 per quarter-warp, the odd head's halves in the other order) hit distinct banks.
__device__ __forceinline__ int score_col(int h, int j) {
#if DSV4_GPU_CUDA
  return j ^ (8 * (h & 3));
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

#if DSV4_MMA_NV
// A lane's ldmatrix row addresses (shared space, bytes) in key buffer `keys` for a warp of 128
// values from 128 d (Dw = 128): the B fragment of keys [16 m, +16) x values 128 d + 16 j +
// [0, 16) is at at[j & 1][(j >> 2) & 1] + 2 (16 m kLd + 32 (j >> 1)), key_col resolved (its XOR
// of bits 3-4 by bits 6-7 depends only on d, bits 0 and 2 of j and the lane), so each load is
// a base register and a constant. K^T (qk): lane rows lane % 8 + 8 (lane / 16), value half bit 3
// of the lane; V (pv): rows lane % 8 + 8 (bit 3), half lane / 16.
struct KeyRows {
  uint32_t at[2][2];
};
__device__ __forceinline__ KeyRows key_rows(const bf16* keys, int d, int lane, bool pv) {
  const int x = lane >> 4, y = (lane >> 3) & 1;
  const int row = (lane & 7) + 8 * (pv ? y : x), half = pv ? x : y;
  const uint32_t base = mma::smem_addr(keys) + 2u * uint32_t(row * kLd + 128 * d);
  KeyRows k;
  DSV4_UNROLL
  for (int a = 0; a < 2; ++a) {
    DSV4_UNROLL
    for (int q = 0; q < 2; ++q)
      k.at[a][q] = base + 2u * uint32_t(16 * (a ^ (d & 1)) + 8 * (half ^ q));
  }
  return k;
}
#endif

// bf16 of a and b (a in the low half), rounded to nearest even: f32_to_bf16's bits but for a NaN,
// in one device conversion where the device has it.
__device__ __forceinline__ uint32_t bf16x2_rn(float a, float b) {
#if DSV4_GPU_FP8_CVT
  return gpu::fp8::bf16x2_from_f32(a, b);
#else
  return uint32_t(f32_to_bf16(a).bits) | uint32_t(f32_to_bf16(b).bits) << 16;
#endif
}
// The same with a NaN as 0x7fc0: f32m::to_bf16_canonical's bits.
__device__ __forceinline__ uint32_t bf16x2_canonical(float a, float b) {
  uint32_t r = bf16x2_rn(a, b);
  if (a != a) r = (r & 0xffff0000u) | 0x7fc0u;
  if (b != b) r = (r & 0x0000ffffu) | 0x7fc00000u;
  return r;
}

// 2^x as exp2f computes it where the result is an fp32 normal, below 2^-126 zero: on NVIDIA the
// one instruction exp2f also runs (without its scaling of x for subnormal results). A p below
// 2^-126 only arises in a tile whose keys all lie 126 below the head's running maximum; dropping
// it moves no sum that holds a key near the maximum.
[[maybe_unused]] __device__ __forceinline__ float exp2_ftz(float x) {
#if DSV4_GPU_CUDA
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  return exp2f(x);
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

// x, opaque to the optimiser on every target: what a segment derives from it is computed in the
// segment, not hoisted out of the loop over segments (and held in registers through it).
__device__ __forceinline__ int opaque(int x) {
#if DSV4_GPU_HIP
  asm volatile("" : "+v"(x));
#elif DSV4_GPU_CUDA
  asm volatile("" : "+r"(x));
#endif
  return x;
}

// The block's and the thread's indices (blockIdx, threadIdx), read once per kernel on AMD: the
// device-only build calls the device library for each read, and the many calls of the loop over
// segments took a stack there.
#if DSV4_GPU_HIP
#define DSV4_SD_INDICES                                                                       \
  [[maybe_unused]] const unsigned sd_bx = blockIdx.x, sd_by = blockIdx.y, sd_bz = blockIdx.z, \
                                  sd_tx = threadIdx.x
#define block_x() sd_bx
#define block_y() sd_by
#define block_z() sd_bz
#define thread_x() sd_tx
#else
#define DSV4_SD_INDICES static_assert(true)
#define block_x() blockIdx.x
#define block_y() blockIdx.y
#define block_z() blockIdx.z
#define thread_x() threadIdx.x
#endif

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

// Part p's start, by the whole block: every query's units (su, B of them) and their sums over
// the threads' runs of queries (tsum, an inclusive scan) in shared memory; then C, the part's
// units [u_begin, u_end), its first query and that query's first unit into sseg[0..3]. Block
// (p, 0) writes first[p] for the merge, block (0, 0) C, U_B and every U_b.
__device__ __forceinline__ void part_plan(const KArgs& k, int32_t p, int32_t* su, int32_t* tsum,
                                          int32_t* sseg) {
  DSV4_SD_INDICES;
  const Args& a = k.a;
  const int tid = thread_x();
  const int32_t B = int32_t(a.B), P = int32_t(gridDim.x);
  const int64_t total = a.main.K + (a.extra.pool ? a.extra.K : 0);
  const int32_t per = (B + kThreads - 1) / kThreads;
  const int32_t lo = tid * per < B ? tid * per : B, hi = lo + per < B ? lo + per : B;
  int32_t sum = 0;
  for (int32_t b = lo; b < hi; ++b) {
    const int32_t u = int32_t(Tiles(a, b, 0, total).n) + kQueryUnits;
    su[b] = u;
    sum += u;
  }
  tsum[tid] = sum;
  sync_block();
  for (int off = 1; off < kThreads; off <<= 1) {
    const int32_t x = tid >= off ? tsum[tid - off] : 0;
    sync_block();
    tsum[tid] += x;
    sync_block();
  }
  const int32_t units = tsum[kThreads - 1], C = (units + P - 1) / P;
  const int32_t u_begin = p * C, u_end = u_begin + C < units ? u_begin + C : units;
  const int32_t before = tid > 0 ? tsum[tid - 1] : 0;  // units ahead of this thread's queries
  if (tid == 0) {
    sseg[0] = u_begin, sseg[1] = u_end;
    if (u_begin >= units) sseg[2] = B, sseg[3] = units;
  }
  if (u_begin < units && before <= u_begin && u_begin < before + sum) {  // one thread
    int32_t u = before, b = lo;
    while (u + su[b] <= u_begin) u += su[b++];
    sseg[2] = b, sseg[3] = u;
  }
  const PlanLayout L{P, B};
  if (block_y() == 0 && p == 0) {
    int32_t u = before;
    for (int32_t b = lo; b < hi; ++b) k.plan[L.units() + b] = u, u += su[b];
    if (tid == 0) k.plan[0] = C, k.plan[1] = units, k.plan[L.units() + B] = units;
  }
  sync_block();
  if (block_y() == 0 && tid == 0) k.plan[L.first() + p] = sseg[2];
}

template <int G, Lay A>
__global__ void __launch_bounds__(kThreads) decode_kernel(KArgs k) {
  DSV4_SD_INDICES;
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
  // Whether a softmax thread's keys are 8 consecutive ones (below) and the scores are stored in
  // pairs, on NVIDIA's 32-key tiles; not in the any-layout instance, whose larger gather leaves
  // no register for it.
  // Whether the key fragments load from the lane's precomputed rows (key_rows); not in the
  // any-layout instance (registers, as below).
  [[maybe_unused]] constexpr bool kKeyRows = Dw == 128 && kNt == 8 && A != Lay::kAny;
  constexpr bool kVecKeys = kKpt == 8 && kTile == 32 && kLdS == 32 && A != Lay::kAny;
  static_assert(kTph <= 32 && kTile % kTph == 0 && kHeads * kTph == kThreads);
  constexpr bool kWg = wg_instance(G, A);
  // The Hopper instances take one key's column block a thread (piece_of): one slot, no conflict.
  constexpr bool kByPart = kWg;
  constexpr Smem L{G, kWg};
  constexpr bool kLazyRescale = G >= 4 && A != Lay::kAny;

#if DSV4_GPU_NONE
  static U4 smem_host[L.bytes() / 16];
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem_host);
#else
  extern __shared__ __align__(1024) U4 smem_dyn[];  // the swizzle's pattern starts 1024-aligned
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
  const int64_t h0 = int64_t(block_y()) * kHeads;
  const int64_t total = a.main.K + (a.extra.pool ? a.extra.K : 0);

  // The block's segments: with a plan those of part block_x() (from its first query), else one,
  // query block_x() over columns split block_z().
  Tiles* stiles = reinterpret_cast<Tiles*>(smem + L.seg());
  int64_t* sprow = reinterpret_cast<int64_t*>(smem + L.seg() + 48);
  // u_begin, u_end, the next segment's query b and U_b
  int32_t* sseg = reinterpret_cast<int32_t*>(smem + L.seg() + 56);
  // the last tile in which some head's maximum moved (alpha != 1), of the current segment
  int* smoved = reinterpret_cast<int*>(smem + L.seg() + 72);
  static_assert(sizeof(Tiles) == 48 && alignof(Tiles) <= 16 && 76 <= L.bytes() - L.seg());
  const bool scheduled = kScheduled && k.plan != nullptr;
  // The schedule's merge (a dependent launch) may start: it waits for this grid's end.
  if (scheduled) gpu::release_dependents();
  bool more = true;
  if (scheduled) {
    part_plan(k, int32_t(block_x()), reinterpret_cast<int32_t*>(smem + L.keys()),
              reinterpret_cast<int32_t*>(smem + (kWg ? L.q() : L.scores())), sseg);
    more = sseg[2] < a.B;
  }
  for (; more;) {
#if DSV4_GPU_HIP
    const int tid = thread_x();  // one segment a block on AMD (kScheduled)
#else
    const int tid = opaque(thread_x());
#endif
    // The segment's query: with a plan the next one (sseg[2]), nothing held in registers across
    // segments.
    const int32_t b = scheduled ? sseg[2] : int32_t(block_x());
    unsigned errors = 0;  // error columns this thread met (counted by the first head block)
    const int64_t c0 = scheduled ? 0 : int64_t(block_z()) * k.C;
    Tiles T0(a, b, c0, scheduled || c0 + k.C > total ? total : c0 + k.C);
    int64_t prow = k.out ? -1 : b * k.S + block_z();  // the partial's row, or -1: the output
    int32_t u1 = 0;
    if (scheduled) {
      const int32_t u_begin = sseg[0], u_end = sseg[1], u0 = sseg[3];
      u1 = u0 + int32_t(T0.n) + kQueryUnits;
      const int32_t first = u0 + kQueryUnits;
      const int32_t lo = u_begin - first, hi = (u_end < u1 ? u_end : u1) - first;
      T0.window(lo > 0 ? lo : 0, hi > 0 ? hi : 0);
      if (u0 < u_begin || u1 > u_end) prow = b + block_x();
    }
    sync_block();  // every lane has read the segment's state
    if (tid == 0) *stiles = T0, *sprow = prow, sseg[2] = b + 1, sseg[3] = u1, *smoved = -1;
    sync_block();
#if DSV4_GPU_HIP
    const Tiles T = T0;  // in registers: gfx942 otherwise takes 80 bytes of scratch
#else
    const Tiles& T = *stiles;  // read from shared memory where used (a register short at G = 4)
#endif
    // Roles of thread t: lane of warp (g, d), which owns heads [16 kM g, +16 kM) and values
    // [Dw d, +Dw); softmax thread sub of head sh (kTph per head).
    struct Roles {
      int lane, g, d, sh, sub;
    };
    auto roles = [](int t) {
      const int warp = t / mma::kLanes;
      return Roles{t % mma::kLanes, warp / Dp, warp % Dp, t / kTph, t % kTph};
    };
    // q of the block's heads.
    for (int i = tid; i < kHeads * (kD / 8); i += kThreads) {
      const int r = i / (kD / 8), c = i % (kD / 8);
      const U4 v = reinterpret_cast<const U4*>(a.q + (b * a.H + h0 + r) * kD)[c];
      if constexpr (kWg)  // [column block c / 8][row r], unit c % 8 swizzled
        *reinterpret_cast<U4*>(reinterpret_cast<uint8_t*>(sq) + (c >> 3) * (kHeads * 128) +
                               gpu::wgmma::sw128(uint32_t(r), uint32_t(c & 7))) = v;
      else
        reinterpret_cast<U4*>(sq + r * kLd)[c] = v;
    }

    const int tiles = uniform(int(T.n));  // of this segment

    // Tile t + 1's indices are loaded a tile ahead of its bytes, which are loaded a step ahead of
    // their decoding.
    int32_t idx[kItems], slot[kItems];
    Raw raw[kItems];
    auto gather_next = [&](int t) {  // tile t + 1's bytes, tile t + 2's indices
      load_tile<A, kByPart>(a, T, t + 1, fresh(tid), idx, slot, raw, errors);
      // The query again from shared memory (sseg[2] holds the next one), not held in a register.
      if (t + 2 < tiles)
        load_indices<kByPart>(a, T, t + 2, scheduled ? sseg[2] - 1 : int32_t(block_x()), tid, idx);
    };
    const int tid_e = fresh(tid);
    float* const so = reinterpret_cast<float*>(smem);  // the output staging tile
    if constexpr (kWg) {
      // Warpgroup wgi owns output values [256 wgi, +256); warp wq of it heads [16 wq, +16), its
      // lane rows 16 wq + gr and + 8 (wgmma's accumulator rows), key columns 8 j + 2 qd, + 1.
      namespace wg = gpu::wgmma;
      const int wgi = tid / wg::kThreads, wq = (tid / mma::kLanes) % 4;
      const int gr = (tid % mma::kLanes) / 4, qd = tid % 4;
      const uint32_t s0 = wg::smem_u32(smem);
      const uint64_t dq = wg::desc_sw128(s0 + L.q(), 16, 1024);
      auto keys_of = [&](int buf) {  // key buffer buf (of kWgBufs)
        return reinterpret_cast<bf16*>(smem + L.keys() + buf * kWgKeyBytes);
      };
      // Tile 0 decoded, tile 1's bytes in flight; then tile t + 1 is decoded during tile t's
      // scores (into the buffer tile t - 2 held: its products were waited for before the
      // barrier that ended tile t - 1) and tile t + 2's bytes loaded.
      if (tiles > 0) {
        load_indices<kByPart>(a, T, 0, b, tid, idx);
        gather_next(-1);
        store_tile<A, true, kByPart>(a, T, 0, tid, slot, raw, sk, svalid);
        if (tiles > 1) gather_next(0);
      }
      wg::fence_proxy_async();  // q and tile 0, for the products after the barrier
#ifndef DSV4_PLANT_MISSING_SYNC
      sync_block();
#endif
      const float scale2 = a.sm_scale * f32m::kLog2e;
      float m2[2] = {-f32m::inf(), -f32m::inf()}, l2[2] = {0.0f, 0.0f};  // rows gr, gr + 8
      float o[128];
      DSV4_UNROLL
      for (int i = 0; i < 128; ++i) o[i] = 0.0f;
      // P as bf16 pairs, the A operand of the output product: kept across the loop's back edge
      // (fenced after the next wait), so the product of tile t still reads them while tile t + 1
      // issues its scores and decodes the next keys.
      uint32_t pk[2][4] = {};
      for (int t = 0, buf = 0; t < tiles; ++t) {
        const int nb = buf == kWgBufs - 1 ? 0 : buf + 1;
        const uint32_t kaddr = s0 + L.keys() + uint32_t(buf * kWgKeyBytes);
        const uint64_t dk = wg::desc_sw128(kaddr, 16, 1024);
        // Scores of the 64 heads over the tile's 32 keys and all 512 values.
        float sc[16];
        DSV4_UNROLL
        for (int i = 0; i < 16; ++i) sc[i] = 0.0f;
        // Every write of an operand register before the fence (else ptxas waits for the products
        // in flight, the previous tile's output product among them, before issuing these).
        wg::fence_operands(sc);
        wg::fence();
        DSV4_UNROLL
        for (int kc = 0; kc < kD / 16; ++kc)
          wg::mma_m64n32k16_ss(sc, wg::desc_add(dq, (kc >> 2) * (kHeads * 128) + (kc & 3) * 32),
                               wg::desc_add(dk, (kc >> 2) * (kTile * 128) + (kc & 3) * 32));
        wg::commit();
        if (t + 1 < tiles) {
          store_tile<A, true, kByPart>(a, T, t + 1, tid, slot, raw, keys_of(nb),
                                       svalid + nb * kTile);
          if (t + 2 < tiles) gather_next(t + 1);
        }
        wg::wait<0>();  // the scores, and the previous tile's output product
        wg::fence_operands(sc);
        wg::fence_operands(o);
        wg::fence_operands(pk);
        // Online softmax (base 2) of rows gr, gr + 8 over the thread's 8 keys of each, the row's
        // maximum over the quad.
        const int* valid = svalid + buf * kTile;
        float x[2][8];
        float tmax[2] = {-f32m::inf(), -f32m::inf()};
        DSV4_UNROLL
        for (int j = 0; j < 4; ++j) {
          const I2 v = *reinterpret_cast<const I2*>(valid + 8 * j + 2 * qd);
          DSV4_UNROLL
          for (int r = 0; r < 2; ++r) {
            x[r][2 * j] = v.x ? sc[4 * j + 2 * r] * scale2 : -f32m::inf();
            x[r][2 * j + 1] = v.y ? sc[4 * j + 2 * r + 1] * scale2 : -f32m::inf();
            tmax[r] = fmaxf(tmax[r], fmaxf(x[r][2 * j], x[r][2 * j + 1]));
          }
        }
        float alpha[2];
        DSV4_UNROLL
        for (int r = 0; r < 2; ++r) {
          tmax[r] = fmaxf(tmax[r], __shfl_xor(tmax[r], 1, 4));
          tmax[r] = fmaxf(tmax[r], __shfl_xor(tmax[r], 2, 4));
          const float m_new = tmax[r] > m2[r] + kStale ? tmax[r] : m2[r];
          const float base = m_new == -f32m::inf() ? 0.0f : m_new;
          alpha[r] = exp2f(m2[r] - base);
          float psum = 0.0f;
          DSV4_UNROLL
          for (int j = 0; j < 4; ++j) {
            const float p0 = exp2_ftz(x[r][2 * j] - base), p1 = exp2_ftz(x[r][2 * j + 1] - base);
            psum = psum + p0;
            psum = psum + p1;
            pk[r][j] = bf16x2_rn(p0, p1);
          }
          l2[r] = l2[r] * alpha[r] + psum;
          m2[r] = m_new;
        }
        DSV4_UNROLL
        for (int r = 0; r < 2; ++r) {
          if (alpha[r] != 1.0f) {
            DSV4_UNROLL
            for (int j = 0; j < 32; ++j)
              o[4 * j + 2 * r] *= alpha[r], o[4 * j + 2 * r + 1] *= alpha[r];
          }
        }
        wg::converge();
        // O += P V over the warpgroup's 256 values: V the same rows, MN-major (column blocks of
        // 64 values 4 KB apart, groups of 8 keys 1 KB apart).
        const uint64_t dv =
            wg::desc_sw128(kaddr + uint32_t(wgi * 4 * kTile * 128), kTile * 128, 1024);
        wg::fence_operands(o);  // the rescale and P before the fence, as for the scores
        wg::fence_operands(pk);
        wg::fence();
        DSV4_UNROLL
        for (int kk = 0; kk < kTile / 16; ++kk) {
          const uint32_t pa[4] = {pk[0][2 * kk], pk[1][2 * kk], pk[0][2 * kk + 1],
                                  pk[1][2 * kk + 1]};
          wg::mma_m64n256k16_rs_t(o, pa, wg::desc_add(dv, kk * 16 * 128));
        }
        wg::commit();
        wg::fence_proxy_async();  // tile t + 1's keys, for its products after the barrier
        sync_block();
        buf = nb;
      }
      wg::wait<0>();
      wg::fence_operands(o);
      DSV4_UNROLL
      for (int r = 0; r < 2; ++r) {
        l2[r] = l2[r] + __shfl_xor(l2[r], 1, 4);
        l2[r] = l2[r] + __shfl_xor(l2[r], 2, 4);
        if (wgi == 0 && qd == 0) sm[16 * wq + gr + 8 * r] = m2[r], sl[16 * wq + gr + 8 * r] = l2[r];
      }
      sync_block();  // every warp is past its last read of the keys and q
      DSV4_UNROLL
      for (int j = 0; j < 32; ++j) {
        DSV4_UNROLL
        for (int r = 0; r < 2; ++r)
          *reinterpret_cast<F2*>(so + (16 * wq + gr + 8 * r) * kLdO + 256 * wgi + 8 * j + 2 * qd) =
              F2{o[4 * j + 2 * r], o[4 * j + 2 * r + 1]};
      }
      sync_block();
    } else {
      if (tiles > 0) {
        load_indices(a, T, 0, b, tid, idx);
        gather_next(-1);
        store_tile<A>(a, T, 0, tid, slot, raw, sk, svalid);
      }
#ifndef DSV4_PLANT_MISSING_SYNC  // the sanitizer's proof: only racecheck sees this barrier missing
      sync_block();
#endif

      // Softmax state of head roles(tid).sh: its running maximum, and the sum of this thread's
      // keys' p (the head's kTph threads' sums are added once, after the last tile).
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
#if DSV4_MMA_NV
          const KeyRows kq = key_rows(keys, d, lane, false);
#endif
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
#if DSV4_MMA_NV
              const mma::FragB kb =
                  kKeyRows ? mma::load_b_t_shared(kq.at[kk & 1][(kk >> 2) & 1] +
                                                  2u * uint32_t(16 * n * kLd + 32 * (kk >> 1)))
                           : key_b_t(keys + 16 * n * kLd, col, lane);
#else
              const mma::FragB kb = key_b_t(keys + 16 * n * kLd, col, lane);
#endif
              DSV4_UNROLL
              for (int mi = 0; mi < kM; ++mi) mma::mma(s[mi][n], qa[mi], kb, lane);
            }
          }
          DSV4_UNROLL
          for (int mi = 0; mi < kM; ++mi) {
            float* dst = ss + (d * kHeads + 16 * (kM * g + mi)) * kLdS;
            DSV4_UNROLL
            for (int n = 0; n < kTile / 16; ++n) {
#if DSV4_MMA_NV  // elements 2i, 2i + 1: adjacent columns of a row, adjacent in its permutation too
              if constexpr (kVecKeys) {
                DSV4_UNROLL
                for (int i = 0; i < mma::kCElems; i += 2) {
                  const int row = mma::acc_row(lane, i);
                  *reinterpret_cast<float2*>(dst + row * kLdS +
                                             score_col(row, 16 * n + mma::acc_col(lane, i))) =
                      make_float2(s[mi][n].v[i], s[mi][n].v[i + 1]);
                }
              } else
#endif
              {
                DSV4_UNROLL
                for (int i = 0; i < mma::kCElems; ++i)
                  dst[mma::acc_row(lane, i) * kLdS +
                      score_col(mma::acc_row(lane, i), 16 * n + mma::acc_col(lane, i))] =
                      s[mi][n].v[i];
              }
            }
          }
        }
        sync_block();

        // Online softmax (base 2) of head sh over the tile: scores summed over the Dp parts in
        // order. With 8 keys a thread on NVIDIA (64 heads), thread sub takes the 8 consecutive keys
        // its group of stored columns holds (score_col), in two 16-byte loads a part.
        {
          const int* valid = svalid + buf * kTile;
          // The thread's keys: kb + kKpt * e (kVecKeys: kb + e).
          const int kb = kVecKeys ? kKpt * (sub ^ (sh & 3)) : sub;
          float x[kKpt];
          float tmax = -f32m::inf();
          if constexpr (kVecKeys) {
            const int h0 = 4 * (sh & 1);  // the half of the group loaded first
            float v[2][4];                // the halves as loaded, summed over the parts
            DSV4_UNROLL
            for (int p = 0; p < Dp; ++p) {
              const float* row = ss + (p * kHeads + sh) * kLdS + 8 * sub;
              DSV4_UNROLL
              for (int hf = 0; hf < 2; ++hf) {
                const U4 w = *reinterpret_cast<const U4*>(row + (h0 ^ (4 * hf)));
                const float f[4] = {__uint_as_float(w.x), __uint_as_float(w.y),
                                    __uint_as_float(w.z), __uint_as_float(w.w)};
                DSV4_UNROLL
                for (int c = 0; c < 4; ++c) v[hf][c] = p == 0 ? f[c] : v[hf][c] + f[c];
              }
            }
            const U4 f0 = *reinterpret_cast<const U4*>(valid + kb);
            const U4 f1 = *reinterpret_cast<const U4*>(valid + kb + 4);
            float dot[8];  // keys kb .. kb + 7: the first half loaded holds kb + h0 ..
            DSV4_UNROLL
            for (int c = 0; c < 4; ++c)
              dot[c] = h0 ? v[1][c] : v[0][c], dot[4 + c] = h0 ? v[0][c] : v[1][c];
            const uint32_t ok[8] = {f0.x, f0.y, f0.z, f0.w, f1.x, f1.y, f1.z, f1.w};
            DSV4_UNROLL
            for (int e = 0; e < kKpt; ++e) {
              x[e] = ok[e] ? dot[e] * scale2 : -f32m::inf();
              tmax = fmaxf(tmax, x[e]);
            }
          } else {
            DSV4_UNROLL
            for (int e = 0; e < kKpt; ++e) {
              const int j = kb + kTph * e;
              const int sj =
                  score_col(sh, j);  // the same for every part (kHeads: a multiple of 16)
              float dot = ss[sh * kLdS + sj];
              DSV4_UNROLL
              for (int p = 1; p < Dp; ++p) dot = dot + ss[(p * kHeads + sh) * kLdS + sj];
              x[e] = valid[j] ? dot * scale2 : -f32m::inf();
              tmax = fmaxf(tmax, x[e]);
            }
          }
          DSV4_UNROLL
          for (int off = 1; off < kTph; off <<= 1) tmax = fmaxf(tmax, __shfl_xor(tmax, off, kTph));
          // The running maximum moves only when the tile's exceeds it by more than kStale (log2),
          // so most tiles keep alpha = 1 (and l, O exactly as they are); p stays below 2^kStale.
          const float m_new = tmax > m + kStale ? tmax : m;
          // Exponents against m_new, or against 0 while the head has no key (then every x is -inf,
          // p = 0, and alpha = 0 scales an O and an l that are still 0).
          const float base = m_new == -f32m::inf() ? 0.0f : m_new;
          const float alpha = exp2f(m - base);
          float psum = 0.0f;
          if constexpr (kVecKeys) {
            uint32_t pw[kKpt / 2];
            DSV4_UNROLL
            for (int e = 0; e < kKpt; e += 2) {
              const float p0 = exp2_ftz(x[e] - base), p1 = exp2_ftz(x[e + 1] - base);
              psum = psum + p0;
              psum = psum + p1;
              pw[e / 2] = bf16x2_rn(p0, p1);  // a NaN p's bits do not matter: O is NaN then
            }
            *reinterpret_cast<U4*>(sp + sh * kLdP + kb) = U4{pw[0], pw[1], pw[2], pw[3]};
          } else {
            DSV4_UNROLL
            for (int e = 0; e < kKpt; ++e) {
              const float p = exp2f(x[e] - base);
              psum = psum + p;
              sp[sh * kLdP + kb + kTph * e] = f32_to_bf16(p);
            }
          }
          l = l * alpha + psum;
          m = m_new;
          if (sub == 0) salpha[sh] = alpha;
          if (kLazyRescale && sub == 0 && alpha != 1.0f) atomicExch(smoved, t);
        }
        // The next tile into the other buffer (its last reader, the previous P V, is done).
        if (!kEarlyLoads && t + 1 < tiles) gather_next(t);
        if (t + 1 < tiles)
          store_tile<A>(a, T, t + 1, tid, slot, raw, sk + (buf ^ 1) * kTile * kLd,
                        svalid + (buf ^ 1) * kTile);
        sync_block();

        // O = O * alpha + P V over this warp's values; in the one-layout 64-head instances the
        // rescale is skipped when no head of the block moved its maximum in this tile (most tiles,
        // by kStale). The others would spill with the branch (G = 1 holds 128 registers).
        if (!kLazyRescale || *smoved == t) {
          DSV4_UNROLL
          for (int mi = 0; mi < kM; ++mi) {
            DSV4_UNROLL
            for (int i = 0; i < mma::kCElems; ++i) {
              const float alpha = salpha[16 * (kM * g + mi) + mma::acc_row(lane, i)];
              DSV4_UNROLL
              for (int n = 0; n < kNt; ++n) o[mi][n].v[i] *= alpha;
            }
          }
        }
#if DSV4_MMA_NV
        const KeyRows kv = key_rows(keys, d, lane, true);
#endif
        DSV4_UNROLL
        for (int kk = 0; kk < kTile / 16; ++kk) {
          mma::FragA pa[kM];
          DSV4_UNROLL
          for (int mi = 0; mi < kM; ++mi)
            pa[mi] = mma::load_a(sp + 16 * (kM * g + mi) * kLdP + 16 * kk, kLdP, lane);
          DSV4_UNROLL
          for (int n = 0; n < kNt; ++n) {
#if DSV4_MMA_NV
            const mma::FragB vb =
                kKeyRows ? mma::load_b_shared(kv.at[n & 1][(n >> 2) & 1] +
                                              2u * uint32_t(16 * kk * kLd + 32 * (n >> 1)))
                         : key_b(keys + 16 * kk * kLd, Dw * d + 16 * n, lane);
#else
            const mma::FragB vb = key_b(keys + 16 * kk * kLd, Dw * d + 16 * n, lane);
#endif
            DSV4_UNROLL
            for (int mi = 0; mi < kM; ++mi) mma::mma(o[mi][n], pa[mi], vb, lane);
          }
        }
      }

      // Stage O (and each head's m, l) in shared memory, then write rows of whole vectors.
      const Roles re = roles(tid_e);
      DSV4_UNROLL
      for (int off = 1; off < kTph; off <<= 1) l = l + __shfl_xor(l, off, kTph);
      if (re.sub == 0) sm[re.sh] = m, sl[re.sh] = l;
      sync_block();  // every warp is past its last read of the keys and q
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
    }

    // Thread tid writes 8 consecutive values per step: rows of kD / 8 threads.
    for (int i = tid_e; i < kHeads * (kD / 8); i += kThreads) {
      const int r = i / (kD / 8), c8 = 8 * (i % (kD / 8));
      const int64_t h = h0 + r;
      const float mr = sm[r], lr = sl[r];
      const bool empty = lr == 0.0f;
      const float* src = so + r * kLdO + c8;
      const int64_t prow = *sprow;
      if (prow >= 0) {  // split partial
        const int64_t row = prow * a.H + h;
        if (c8 == 0) k.o_lse[row] = empty ? -f32m::inf() : log2f(lr) + mr;
        const float inv = empty ? 0.0f : 1.0f / lr;  // one division a row's 8 values
        uint32_t v[8];
        DSV4_UNROLL
        for (int e = 0; e < 8; ++e) v[e] = f32_bits(src[e] * inv);
        U4* dst = reinterpret_cast<U4*>(k.o + row * kD + c8);
        dst[0] = U4{v[0], v[1], v[2], v[3]};
        dst[1] = U4{v[4], v[5], v[6], v[7]};
        continue;
      }
      // The query from shared memory for the one-layout instances (a register short at 64
      // heads), the register for the any-layout one (whose allocation spills the other way).
      int64_t row = int64_t(b) * a.H + h;
      if constexpr (A != Lay::kAny)
        row = int64_t(scheduled ? sseg[2] - 1 : int32_t(block_x())) * a.H + h;
      if (c8 == 0) k.lse[row] = empty ? f32m::inf() : (log2f(lr) + mr) / f32m::kLog2e;
      const float sink = a.sink ? a.sink[h] : -f32m::inf();
      const bool zero = empty || sink == f32m::inf();
      float scale = 0.0f;  // f / den, one division a row's 8 values
      if (!zero) {
        const float sk2 = sink * f32m::kLog2e;
        const float ms = fmaxf(mr, sk2);
        const float f = exp2f(mr - ms);
        scale = f / (lr * f + exp2f(sk2 - ms));
      }
      uint32_t w[4];
      DSV4_UNROLL
      for (int e = 0; e < 4; ++e) {
        const float v0 = zero ? 0.0f : src[2 * e] * scale;
        const float v1 = zero ? 0.0f : src[2 * e + 1] * scale;
        w[e] = bf16x2_canonical(v0, v1);
      }
      reinterpret_cast<U4*>(k.out + row * kD + c8)[0] = U4{w[0], w[1], w[2], w[3]};
    }
    if (errors && block_y() == 0)
      atomicAdd(reinterpret_cast<unsigned long long*>(a.errors), (unsigned long long)errors);
    more = scheduled && sseg[2] < a.B && sseg[3] < sseg[1];  // the next query starts in the part
    if (more) sync_block();  // every lane is past its last read of the staged output and stats
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
  constexpr int bytes = Smem{G, wg_instance(G, A)}.bytes();
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
  const unsigned x = unsigned(k.plan ? k.P : k.a.B), z = unsigned(k.plan ? 1 : k.S);
  gpu::launch(decode_kernel<G, A>, dim3(x, unsigned(k.a.H / (16 * G)), z), dim3(kThreads),
              size_t(bytes), st, k);
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

// The arguments' checks (past B and H, none for B = 0: nothing is launched).
void check_args(const Args& a, const float* lse) {
  if (a.B < 0) bad("B=" + std::to_string(a.B) + " must be >= 0");
  if (a.H <= 0 || a.H % 16 != 0)
    bad("H=" + std::to_string(a.H) + " must be a positive multiple of 16");
  if (a.B == 0) return;
  if (a.B > INT32_MAX) bad("B=" + std::to_string(a.B) + " must be < 2^31");
  if (!a.q || !a.errors || !lse)
    bad(std::string(!a.q ? "q" : !a.errors ? "errors" : "lse") + " is null");
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
}

int64_t total_columns(const Args& a) { return a.main.K + (a.extra.pool ? a.extra.K : 0); }

// The kernel over k's grid for the block width the heads allow.
void launch(const KArgs& k, gpu::Stream s) {
  const hipStream_t st = static_cast<hipStream_t>(s);
  if (kMaxGroups >= 4 && k.a.H % 64 == 0)
    run_layouts<kMaxGroups >= 4 ? 4 : 1>(k, st);
  else
    run_layouts<1>(k, st);
}

// Unsplit (S = 0: out, lse) or over S column splits (o, o_lse).
void launch_columns(const Args& a, int64_t S, bf16* out, float* lse, float* o, gpu::Stream s) {
  check_args(a, lse);
  if (a.B == 0) return;
  const int64_t total = total_columns(a);
  KArgs k{a};
  k.C = std::max<int64_t>(total, 1);
  if (out) {
    k.out = out, k.lse = lse;
  } else {
    k.o = o, k.o_lse = lse;
    k.S = S;
    k.C = std::max<int64_t>((total + S - 1) / S, 1);
  }
  launch(k, s);
}

// The merge of the schedule's partials: block (j, h) for the boundary of parts j - 1 and j, which
// merges head h of the query it cuts (the first boundary to cut it) over its partial rows b + p0
// .. b + p1. A query inside one part was written by its part.
template <bool kStaged>
__global__ void __launch_bounds__(split_combine::kThreads)
    merge_kernel(split_combine::Args m, const int32_t* plan, int32_t P) {
  const int32_t j = int32_t(blockIdx.x) + 1, h = int32_t(blockIdx.y);
  gpu::wait_prior_grid();  // the decode kernel's plan and partials (a dependent launch)
  const PlanLayout L{P, m.B};
  const int32_t C = plan[0], u = j * C, b = plan[L.first() + j];
  if (b >= m.B) return;
  const int32_t u0 = plan[L.units() + b], u1 = plan[L.units() + b + 1];
  if (u0 == u || u0 < u - C) return;  // not cut here, or cut first by an earlier boundary
  split_combine::merge_row<kStaged>(m, b, h, b + u0 / C, (u1 - 1) / C - u0 / C + 1);
}

// Heads a block of the kernel covers (launch() picks the instance the same way).
int64_t heads_per_block(int64_t H) { return kMaxGroups >= 4 && H % 64 == 0 ? 64 : 16; }

// Parts of the schedule: one block per compute unit, the head blocks of a part side by side.
int64_t plan_parts(const Args& a) {
  const int64_t head_blocks = a.H / heads_per_block(a.H);
  return std::max<int64_t>(1, compute_units() / std::max<int64_t>(head_blocks, 1));
}

// Whether decode() with a workspace takes the schedule: U_b of every query in plan_kernel's
// shared memory and every unit count in int32.
bool planned(const Args& a) {
  if (!kScheduled || a.B <= 0 || a.B > kMaxPlanQueries || a.H <= 0 || a.H % 16 != 0) return false;
  const int64_t tiles =
      (a.main.K + kTile - 1) / kTile + (a.extra.pool ? (a.extra.K + kTile - 1) / kTile : 0);
  return a.B * (tiles + kQueryUnits) + plan_parts(a) < (int64_t(1) << 30);
}

}  // namespace

void decode(const Args& a, bf16* out, float* lse, gpu::Stream s) {
  if (!out) bad("out is null");
  if (!aligned16(out)) bad("out is not 16-byte aligned");
  launch_columns(a, 1, out, lse, nullptr, s);
}

namespace {

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

// A workspace's parts: the plan (none for column splits), then partials o [rows, H, 512] fp32
// and lse [rows, H] fp32; rows = B + P with a plan of P parts, B S for S column splits.
struct Workspace {
  size_t plan = 0, o = 0, lse = 0, bytes = 0;  // offsets and size
  Workspace(const Args& a, int64_t rows, int64_t plan_words) {
    o = align16(size_t(plan_words) * 4);
    lse = o + align16(size_t(rows) * size_t(a.H) * size_t(kD) * 4);
    bytes = lse + align16(size_t(rows) * size_t(a.H) * 4);
  }
};

// The column splits decode() takes without a plan (B past kMaxPlanQueries): enough blocks to
// fill the device once.
int64_t column_splits(const Args& a) {
  const int64_t blocks = a.B * (a.H / heads_per_block(a.H));
  const int64_t keys = total_columns(a);
  const int64_t by_keys = std::max<int64_t>(1, keys / kMinKeysPerSplit);
  const int64_t fill = compute_units() / std::max<int64_t>(blocks, 1);
  return std::clamp<int64_t>(fill, 1, std::min(kMaxAutoSplits, by_keys));
}

Workspace workspace_of(const Args& a) {
  if (planned(a)) {
    const int64_t P = plan_parts(a);
    return Workspace(a, a.B + P, PlanLayout{P, a.B}.words());
  }
  const int64_t S = column_splits(a);
  return S > 1 ? Workspace(a, a.B * S, 0) : Workspace(a, 0, 0);
}

}  // namespace

int64_t decode_splits(const Args& a) {
  if (a.B <= 0 || a.H <= 0 || a.H % 16 != 0) return 1;
  return planned(a) ? plan_parts(a) : column_splits(a);
}

size_t decode_workspace_bytes(const Args& a) {
  if (a.B <= 0 || a.H <= 0 || a.H % 16 != 0) return 0;
  const Workspace w = workspace_of(a);
  return w.bytes > w.o ? w.bytes : 0;
}

void decode(const Args& a, bf16* out, float* lse, void* workspace, size_t workspace_bytes,
            gpu::Stream s) {
  check_args(a, lse);
  if (!out) bad("out is null");
  if (!aligned16(out)) bad("out is not 16-byte aligned");
  if (a.B == 0) return;
  const bool plan = planned(a);
  const int64_t S = plan ? 1 : column_splits(a);
  if (!plan && S <= 1) return decode(a, out, lse, s);
  const Workspace w = workspace_of(a);
  if (!workspace || workspace_bytes < w.bytes)
    bad("workspace of " + std::to_string(workspace ? workspace_bytes : 0) +
        " bytes is smaller than the " + std::to_string(w.bytes) + " bytes decode() needs " +
        (plan ? "for its schedule of " + std::to_string(plan_parts(a)) + " parts"
              : "for " + std::to_string(S) + " splits' partials") +
        " (decode_workspace_bytes)");
  if (!aligned16(workspace)) bad("workspace is not 16-byte aligned");
  uint8_t* ws = static_cast<uint8_t*>(workspace);
  float* o = reinterpret_cast<float*>(ws + w.o);
  float* o_lse = reinterpret_cast<float*>(ws + w.lse);
  split_combine::Args c;
  c.B = a.B, c.H = a.H, c.D = kD;
  c.o = o, c.lse = o_lse, c.sink = a.sink;
  c.out = out, c.out_lse = lse, c.errors = a.errors;
  if (!plan) {
    launch_columns(a, S, nullptr, o_lse, o, s);
    c.S = S;
    split_combine::combine(c, s);
    return;
  }
  const int64_t P = plan_parts(a);
  int32_t* pl = reinterpret_cast<int32_t*>(ws + w.plan);
  const hipStream_t st = static_cast<hipStream_t>(s);
  KArgs k{a};
  k.C = std::max<int64_t>(total_columns(a), 1);
  k.out = out, k.lse = lse, k.o = o, k.o_lse = o_lse;
  k.plan = pl, k.P = P;
  launch(k, s);
  if (P < 2) return;  // one part: every query was written
  c.S = a.B + P;
  const dim3 grid(unsigned(P - 1), unsigned(a.H));
  // The merge as the kernel's dependent: its blocks take the compute units the kernel's blocks
  // leave and wait there for the kernel's end (the kernel releases them at its start: its grid
  // is one wave, every block already resident).
  if (P + 1 <= split_combine::kStagedSplits)
    gpu::launch_dependent(merge_kernel<true>, grid, dim3(split_combine::kThreads), 0, st, c, pl,
                          int32_t(P));
  else
    gpu::launch_dependent(merge_kernel<false>, grid, dim3(split_combine::kThreads), 0, st, c, pl,
                          int32_t(P));
}

void decode_partials(const Args& a, int64_t S, float* o, float* lse, gpu::Stream s) {
  if (S < 1 || S > 65535) bad("S=" + std::to_string(S) + " must be in [1, 65535]");
  if (!o) bad("o is null");
  if (!aligned16(o)) bad("o is not 16-byte aligned");
  launch_columns(a, S, nullptr, lse, o, s);
}

}  // namespace dsv4::kernels::sparse_decode

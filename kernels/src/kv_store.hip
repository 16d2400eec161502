// kv_store kernels: a 16-byte-per-thread row scatter, and the fused RMSNorm + RoPE + bf16 cast +
// scatter with L lanes per row (sum of squares in the order dsv4/ref/kv_store.hpp specifies).
#include <cstdint>
#include <stdexcept>
#include <string>

#include "dsv4/gpu/gpu.hpp"
#include "dsv4/kernels/kv_store.hpp"

#if DSV4_GPU_HIP
// The CMake flags already turn contraction off; this keeps the source bitwise-faithful to the
// reference when compiled by hand as well.
#pragma clang fp contract(off)
#endif

namespace dsv4::kernels::kv_store {
namespace {

// Eight bf16 values (or four fp32) moved as one 16-byte access.
#if DSV4_GPU_NONE
struct alignas(16) Pack8 {
  uint32_t x, y, z, w;
};
#else
using Pack8 = uint4;
#endif

#if DSV4_GPU_CUDA
constexpr int kMaxLanes = 32;  // cross-lane groups live inside one 32-lane warp
#else
constexpr int kMaxLanes = 64;  // AMD CDNA waves are 64 lanes (the host-only build checks all)
#endif
constexpr int kBlock = 256;
constexpr int kMaxChunksPerLane = 8;

__device__ __forceinline__ void count_error(int64_t* errors) {
  atomicAdd(reinterpret_cast<unsigned long long*>(errors), 1ull);
}

// Eight fp32 from a pack of bf16: element 2k is the low half of word k.
__device__ __forceinline__ void unpack_bf16(const Pack8& p, float (&x)[8]) {
  const uint32_t w[4] = {p.x, p.y, p.z, p.w};
  DSV4_UNROLL
  for (int k = 0; k < 4; ++k) {
    x[2 * k] = f32_from_bits(w[k] << 16);
    x[2 * k + 1] = f32_from_bits(w[k] & 0xffff0000u);
  }
}

__device__ __forceinline__ Pack8 pack_bf16(const float (&y)[8]) {
  uint32_t w[4];
  DSV4_UNROLL
  for (int k = 0; k < 4; ++k)
    w[k] = uint32_t(f32_to_bf16(y[2 * k]).bits) | (uint32_t(f32_to_bf16(y[2 * k + 1]).bits) << 16);
  Pack8 p;
  p.x = w[0];
  p.y = w[1];
  p.z = w[2];
  p.w = w[3];
  return p;
}

// Eight consecutive fp32 (32 bytes, 16-byte aligned) as two 16-byte loads.
__device__ __forceinline__ void load_f32x8(const float* src, float (&v)[8]) {
  const Pack8* p = reinterpret_cast<const Pack8*>(src);
  const Pack8 a = p[0], b = p[1];
  const uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  DSV4_UNROLL
  for (int k = 0; k < 8; ++k) v[k] = f32_from_bits(w[k]);
}

struct ScatterArgs {
  const Pack8* kv;
  int64_t kv_stride;  // in packs
  const int64_t* loc;
  int64_t T;
  Pack8* pool;
  int64_t pool_stride;  // in packs
  int64_t pool_rows;
  int packs;  // packs per row
  int64_t* errors;
};

// Block (bx, by): threadIdx.y picks one of by rows, threadIdx.x strides over the row's packs.
__global__ void __launch_bounds__(kBlock) scatter_kernel(ScatterArgs a) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.y + threadIdx.y;
  if (t >= a.T) return;
  const int64_t dst = a.loc[t];
  if (dst < 0) return;
  if (dst >= a.pool_rows) {
    if (threadIdx.x == 0) count_error(a.errors);
    return;
  }
  const Pack8* src = a.kv + t * a.kv_stride;
  Pack8* out = a.pool + dst * a.pool_stride;
  for (int c = threadIdx.x; c < a.packs; c += blockDim.x) out[c] = src[c];
}

struct NormRopeArgs {
  ScatterArgs s;
  const float* weight;
  const float* cos_sin;
  int64_t n_pos;
  const int64_t* positions;
  float eps;
  float width;     // values per row, for the mean
  int rope_begin;  // first pack of the RoPE part
  int rope_dim;
};

// L lanes per row (kBlock / L rows per block); lane l holds packs l, l+L, ... (at most CPL).
// Every lane reaches the shuffles, whatever its row does, so width-limited shuffles never see an
// exited or diverged lane.
template <int L, int CPL>
__global__ void __launch_bounds__(kBlock) norm_rope_kernel(NormRopeArgs a) {
  const int lane = int(threadIdx.x) % L;
  const int64_t t = int64_t(blockIdx.x) * (kBlock / L) + int(threadIdx.x) / L;
  bool active = false;
  int64_t dst = -1, pos = 0;
  if (t < a.s.T) {
    dst = a.s.loc[t];
    if (dst >= 0) {
      pos = a.positions[t];
      active = dst < a.s.pool_rows && pos >= 0 && pos < a.n_pos;
      if (!active && lane == 0) count_error(a.s.errors);
    }
  }

  const Pack8* src = a.s.kv + (active ? t : 0) * a.s.kv_stride;
  Pack8 v[CPL] = {};
  float acc = 0.0f;
  DSV4_UNROLL
  for (int k = 0; k < CPL; ++k) {
    const int c = lane + k * L;
    if (active && c < a.s.packs) {
      v[k] = src[c];
      float x[8];
      unpack_bf16(v[k], x);
      DSV4_UNROLL
      for (int e = 0; e < 8; ++e) acc = fmaf(x[e], x[e], acc);
    }
  }
  DSV4_UNROLL
  for (int off = L / 2; off > 0; off >>= 1) acc = acc + __shfl_xor(acc, off, L);
  if (!active) return;

  const float inv = 1.0f / sqrtf(acc / a.width + a.eps);
  Pack8* out = a.s.pool + dst * a.s.pool_stride;
  DSV4_UNROLL
  for (int k = 0; k < CPL; ++k) {
    const int c = lane + k * L;
    if (c >= a.s.packs) break;
    float x[8], w[8], y[8];
    unpack_bf16(v[k], x);
    load_f32x8(a.weight + 8 * c, w);
    DSV4_UNROLL
    for (int e = 0; e < 8; ++e) y[e] = (x[e] * inv) * w[e];
    if (c >= a.rope_begin) {
      float cs[8];  // (cos, sin) for this pack's four pairs
      load_f32x8(a.cos_sin + pos * a.rope_dim + 8 * (c - a.rope_begin), cs);
      DSV4_UNROLL
      for (int q = 0; q < 4; ++q) {
        const float r = y[2 * q], m = y[2 * q + 1];
        const float co = cs[2 * q], si = cs[2 * q + 1];
        y[2 * q] = r * co - m * si;
        y[2 * q + 1] = r * si + m * co;
      }
    }
    out[c] = pack_bf16(y);
  }
}

// ---- host side ----------------------------------------------------------------------------

[[noreturn]] void bad(const char* fn, const std::string& what) {
  throw std::invalid_argument(std::string("kv_store::") + fn + ": " + what);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Checks the arguments both variants share; returns false when there is nothing to launch.
bool check_common(const char* fn, const bf16* kv, const int64_t* loc, int64_t T, const bf16* pool,
                  int64_t pool_rows, const RowLayout& l, const int64_t* errors) {
  if (T < 0 || T > INT32_MAX) bad(fn, "T=" + std::to_string(T) + " must be in [0, 2^31)");
  if (pool_rows < 0) bad(fn, "pool_rows=" + std::to_string(pool_rows) + " must be >= 0");
  if (l.width <= 0 || l.width % 8 != 0)
    bad(fn, "width=" + std::to_string(l.width) + " must be a positive multiple of 8");
  const int64_t ss = l.src_stride ? l.src_stride : l.width;
  const int64_t ps = l.pool_stride ? l.pool_stride : l.width;
  if (ss < l.width || ss % 8 != 0)
    bad(fn, "src_stride=" + std::to_string(l.src_stride) +
                " must be 0 or a multiple of 8 >= width=" + std::to_string(l.width));
  if (ps < l.width || ps % 8 != 0)
    bad(fn, "pool_stride=" + std::to_string(l.pool_stride) +
                " must be 0 or a multiple of 8 >= width=" + std::to_string(l.width));
  if (l.width / 8 > INT32_MAX) bad(fn, "width=" + std::to_string(l.width) + " is too large");
  if (T == 0) return false;
  if (!kv || !loc || !pool || !errors)
    bad(fn, std::string(!kv ? "kv" : !loc ? "loc" : !pool ? "pool" : "errors") + " is null");
  if (!aligned16(kv)) bad(fn, "kv is not 16-byte aligned");
  if (!aligned16(pool)) bad(fn, "pool is not 16-byte aligned");
  return true;
}

ScatterArgs scatter_args(const bf16* kv, const int64_t* loc, int64_t T, bf16* pool,
                         int64_t pool_rows, const RowLayout& l, int64_t* errors) {
  ScatterArgs a;
  a.kv = reinterpret_cast<const Pack8*>(kv);
  a.kv_stride = (l.src_stride ? l.src_stride : l.width) / 8;
  a.loc = loc;
  a.T = T;
  a.pool = reinterpret_cast<Pack8*>(pool);
  a.pool_stride = (l.pool_stride ? l.pool_stride : l.width) / 8;
  a.pool_rows = pool_rows;
  a.packs = int(l.width / 8);
  a.errors = errors;
  return a;
}

template <int L>
void launch_norm_rope(const NormRopeArgs& a, hipStream_t s) {
  constexpr int rows_per_block = kBlock / L;
  const dim3 grid(gpu::ceil_div(size_t(a.s.T), rows_per_block)), block(kBlock);
  const int per_lane = (a.s.packs + L - 1) / L;
  if (per_lane <= 1)
    gpu::launch(norm_rope_kernel<L, 1>, grid, block, 0, s, a);
  else if (per_lane <= 2)
    gpu::launch(norm_rope_kernel<L, 2>, grid, block, 0, s, a);
  else if (per_lane <= 4)
    gpu::launch(norm_rope_kernel<L, 4>, grid, block, 0, s, a);
  else
    gpu::launch(norm_rope_kernel<L, kMaxChunksPerLane>, grid, block, 0, s, a);
}

}  // namespace

bool lanes_supported(int lanes) {
  return lanes == 16 || lanes == 32 || (lanes == 64 && kMaxLanes >= 64);
}

void check_lanes_fit_wave(int lanes, int wave_width) {
  if (lanes > wave_width)
    bad("norm_rope_store", "lanes=" + std::to_string(lanes) + " exceeds the device's wave width " +
                               std::to_string(wave_width));
}

void scatter_rows(const bf16* kv, const int64_t* loc, int64_t T, bf16* pool, int64_t pool_rows,
                  const RowLayout& layout, int64_t* errors, gpu::Stream s) {
  if (!check_common("scatter_rows", kv, loc, T, pool, pool_rows, layout, errors)) return;
  const ScatterArgs a = scatter_args(kv, loc, T, pool, pool_rows, layout, errors);
  // Wide rows: one row per block of up to kBlock threads; narrow rows: several rows per block.
  const unsigned bx = unsigned(a.packs < kBlock ? a.packs : kBlock);
  const unsigned by = kBlock / bx;
  gpu::launch(scatter_kernel, dim3(gpu::ceil_div(size_t(T), by)), dim3(bx, by), 0,
              static_cast<hipStream_t>(s), a);
}

void norm_rope_store(const bf16* kv, const int64_t* loc, int64_t T, bf16* pool, int64_t pool_rows,
                     const RowLayout& layout, const NormRope& p, int64_t* errors, gpu::Stream s) {
  const char* fn = "norm_rope_store";
  const bool any = check_common(fn, kv, loc, T, pool, pool_rows, layout, errors);
  if (!lanes_supported(p.lanes))
    bad(fn, "lanes=" + std::to_string(p.lanes) + " is not one of 16, 32" +
                (kMaxLanes >= 64 ? ", 64" : " (64 needs a wave64 backend)"));
  if (p.rope_dim <= 0 || p.rope_dim % 8 != 0 || p.rope_dim > layout.width)
    bad(fn, "rope_dim=" + std::to_string(p.rope_dim) +
                " must be a positive multiple of 8 <= " + "width=" + std::to_string(layout.width));
  if (layout.width > int64_t(8) * kMaxChunksPerLane * p.lanes)
    bad(fn, "width=" + std::to_string(layout.width) + " exceeds " +
                std::to_string(8 * kMaxChunksPerLane * p.lanes) +
                " for lanes=" + std::to_string(p.lanes));
  if (p.n_pos < 0) bad(fn, "n_pos=" + std::to_string(p.n_pos) + " must be >= 0");
  if (!any) return;
  if (!p.weight || !p.positions || (p.n_pos > 0 && !p.cos_sin))
    bad(fn, std::string(!p.weight      ? "weight"
                        : !p.positions ? "positions"
                                       : "cos_sin") +
                " is null");
  if (!aligned16(p.weight)) bad(fn, "weight is not 16-byte aligned");
  if (!aligned16(p.cos_sin)) bad(fn, "cos_sin is not 16-byte aligned");
  // The wave width of the device in use, asked once (the device is fixed per process).
  static const int wave_width = gpu::device_info().wave_width;
  check_lanes_fit_wave(p.lanes, wave_width);

  NormRopeArgs a;
  a.s = scatter_args(kv, loc, T, pool, pool_rows, layout, errors);
  a.weight = p.weight;
  a.cos_sin = p.cos_sin;
  a.n_pos = p.n_pos;
  a.positions = p.positions;
  a.eps = p.eps;
  a.width = float(layout.width);
  a.rope_begin = int((layout.width - p.rope_dim) / 8);
  a.rope_dim = p.rope_dim;
  const hipStream_t st = static_cast<hipStream_t>(s);
  switch (p.lanes) {
    case 16:
      launch_norm_rope<16>(a, st);
      break;
    case 32:
      launch_norm_rope<32>(a, st);
      break;
    default:
#if !DSV4_GPU_CUDA
      launch_norm_rope<64>(a, st);
#endif
      break;
  }
}

}  // namespace dsv4::kernels::kv_store

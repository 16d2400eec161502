// Matrix-core tiles for kernel sources: C[16x16] += A[16x16] * B[16x16], bf16 operands read from
// shared memory, fp32 accumulators, on NVIDIA mma.sync (sm_80+), AMD MFMA (gfx90a/gfx94x/gfx950)
// or a scalar fallback, with one description of which (row, col) each lane's accumulator holds.
#pragma once

#include <cstdint>

#include "dsv4/gpu/gpu.hpp"
#include "dsv4/ref/formats/bf16.hpp"

// Which implementation this compilation pass uses (the host pass of nvcc / hipcc and the
// host-only build take the scalar one: there the kernels are parsed, never run).
#if DSV4_GPU_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define DSV4_MMA_NV 1
#elif DSV4_GPU_HIP && (defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || \
                       defined(__gfx942__) || defined(__gfx950__))
#define DSV4_MMA_MFMA 1
#else
#define DSV4_MMA_SCALAR 1
#endif

namespace dsv4::gpu::mma {

// Lanes of a wave in this pass: 32 on NVIDIA, the target's wave size on AMD (the HIP host pass
// and the host-only build say 64; no kernel runs there).
#if DSV4_GPU_CUDA
inline constexpr int kLanes = 32;
#elif DSV4_GPU_HIP && defined(__AMDGCN_WAVEFRONT_SIZE)
inline constexpr int kLanes = __AMDGCN_WAVEFRONT_SIZE;
#else
inline constexpr int kLanes = 64;
#endif

// Accumulator elements per lane of a 16x16 fp32 tile.
inline constexpr int kCElems = 256 / kLanes;

struct Acc {
  float v[kCElems];
};

__device__ __forceinline__ void zero(Acc& c) {
  DSV4_UNROLL
  for (int i = 0; i < kCElems; ++i) c.v[i] = 0.0f;
}

// The (row, col) of the tile that element i of lane `lane` holds.
//   NVIDIA: two m16n8 accumulators side by side; g = lane / 4, t = lane % 4, element i of half
//     i / 4 is row g + 8 * (i % 4 / 2), col 8 * (i / 4) + 2 t + i % 2.
//   MFMA 16x16x16: row 4 * (lane / 16) + i, col lane % 16.
//   scalar: e = lane + kLanes * i, row e / 16, col e % 16.
__device__ __forceinline__ int acc_row(int lane, int i) {
#if DSV4_MMA_NV
  return (lane >> 2) + 8 * ((i & 3) >> 1);
#elif DSV4_MMA_MFMA
  return 4 * (lane >> 4) + i;
#else
  return (lane + kLanes * i) >> 4;
#endif
}
__device__ __forceinline__ int acc_col(int lane, int i) {
#if DSV4_MMA_NV
  return 8 * (i >> 2) + 2 * (lane & 3) + (i & 1);
#elif DSV4_MMA_MFMA
  (void)i;
  return lane & 15;
#else
  return (lane + kLanes * i) & 15;
#endif
}

// Operand fragments. A: 16 rows x 16 k from a row-major [row][k] array. B: 16 k x 16 cols, from
// a [col][k] array (load_b_t: the K^T of a score product) or a [k][col] array (load_b: the V of
// an output product). `ld` is the row stride in elements; rows 16-byte aligned.
#if DSV4_MMA_NV
struct FragA {
  uint32_t r[4];
};
struct FragB {
  uint32_t r[4];  // r[0..1]: cols 0-7, r[2..3]: cols 8-15
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// ldmatrix at a shared-space byte address (smem_addr), or at a pointer into shared memory.
__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t* r, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, const void* p) {
  ldmatrix_x4(r, smem_addr(p));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t* r, const void* p) {
  ldmatrix_x4_trans(r, smem_addr(p));
}

// Matrix j of an x4 load takes its 8 row addresses from lanes 8j..8j+7.
__device__ __forceinline__ FragA load_a(const bf16* s, int ld, int lane) {
  FragA a;  // matrices: (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (8-15, 8-15)
  ldmatrix_x4(a.r, s + ((lane & 7) + 8 * ((lane >> 3) & 1)) * ld + 8 * (lane >> 4));
  return a;
}
// The B fragment of the 16 x 16 tile at (rows, col) of rows whose 16-byte chunks may be stored
// permuted: phys(c) is where a row stores its values [c, c + 8) (c a multiple of 8).
template <class Phys>
__device__ __forceinline__ FragB load_b_t_at(const bf16* rows, int ld, int col, int lane,
                                             Phys phys) {
  FragB b;  // rows[col][k]; matrices: (cols 0-7, k 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15)
  ldmatrix_x4(b.r, rows + ((lane & 7) + 8 * (lane >> 4)) * ld + phys(col + 8 * ((lane >> 3) & 1)));
  return b;
}
template <class Phys>
__device__ __forceinline__ FragB load_b_at(const bf16* rows, int ld, int col, int lane, Phys phys) {
  FragB b;  // rows[k][col], transposed; matrices: (k 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), ...
  ldmatrix_x4_trans(b.r,
                    rows + ((lane & 7) + 8 * ((lane >> 3) & 1)) * ld + phys(col + 8 * (lane >> 4)));
  return b;
}
// B fragments from a lane's own row address in shared space (smem_addr; the address load_b_t_at /
// load_b_at computes), for callers that keep their addresses (a constant offset folds into the
// instruction).
__device__ __forceinline__ FragB load_b_t_shared(uint32_t addr) {
  FragB b;
  ldmatrix_x4(b.r, addr);
  return b;
}
__device__ __forceinline__ FragB load_b_shared(uint32_t addr) {
  FragB b;
  ldmatrix_x4_trans(b.r, addr);
  return b;
}
__device__ __forceinline__ int same_col(int c) { return c; }
__device__ __forceinline__ FragB load_b_t(const bf16* s, int ld, int lane) {
  return load_b_t_at(s, ld, 0, lane, same_col);
}
__device__ __forceinline__ FragB load_b(const bf16* s, int ld, int lane) {
  return load_b_at(s, ld, 0, lane, same_col);
}

__device__ __forceinline__ void mma16x8(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma(Acc& c, const FragA& a, const FragB& b) {
  mma16x8(c.v, a.r, b.r[0], b.r[1]);
  mma16x8(c.v + 4, a.r, b.r[2], b.r[3]);
}

#elif DSV4_MMA_MFMA
using Bf16x4 = short __attribute__((ext_vector_type(4)));
using F32x4 = float __attribute__((ext_vector_type(4)));
struct FragA {
  Bf16x4 r;  // row lane % 16, k 4 (lane / 16) + 0..3
};
struct FragB {
  Bf16x4 r;  // col lane % 16, k 4 (lane / 16) + 0..3
};

__device__ __forceinline__ Bf16x4 load4(const bf16* p) {
  return *reinterpret_cast<const Bf16x4*>(p);
}
__device__ __forceinline__ FragA load_a(const bf16* s, int ld, int lane) {
  return FragA{load4(s + (lane & 15) * ld + 4 * (lane >> 4))};
}
__device__ __forceinline__ FragB load_b_t(const bf16* s, int ld, int lane) {
  return FragB{load4(s + (lane & 15) * ld + 4 * (lane >> 4))};
}
__device__ __forceinline__ FragB load_b(const bf16* s, int ld, int lane) {
  const bf16* p = s + 4 * (lane >> 4) * ld + (lane & 15);
  FragB b;
  b.r[0] = short(p[0].bits), b.r[1] = short(p[ld].bits);
  b.r[2] = short(p[2 * ld].bits), b.r[3] = short(p[3 * ld].bits);
  return b;
}
__device__ __forceinline__ void mma(Acc& c, const FragA& a, const FragB& b) {
  F32x4 acc = {c.v[0], c.v[1], c.v[2], c.v[3]};
  acc = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a.r, b.r, acc, 0, 0, 0);
  DSV4_UNROLL
  for (int i = 0; i < 4; ++i) c.v[i] = acc[i];
}

#else
// Scalar: a fragment is where its tile lies; mma reads both tiles when it runs (so the shared
// memory under a fragment must not change between the load and the mma).
struct FragA {
  const bf16* p;
  int ld;
};
struct FragB {
  const bf16* p;
  int k_step, col_step;  // element (k, col) at p[k * k_step + col * col_step]
};
__device__ __forceinline__ FragA load_a(const bf16* s, int ld, int) { return FragA{s, ld}; }
__device__ __forceinline__ FragB load_b_t(const bf16* s, int ld, int) { return FragB{s, 1, ld}; }
__device__ __forceinline__ FragB load_b(const bf16* s, int ld, int) { return FragB{s, ld, 1}; }
#if DSV4_GPU_NONE
#define DSV4_MMA_ROLLED
#else
#define DSV4_MMA_ROLLED _Pragma("unroll 1")
#endif
__device__ __forceinline__ void mma(Acc& c, const FragA& a, const FragB& b, int lane) {
  DSV4_UNROLL
  for (int i = 0; i < kCElems; ++i) {
    const bf16* x = a.p + acc_row(lane, i) * a.ld;
    const bf16* y = b.p + acc_col(lane, i) * b.col_step;
    float s = 0.0f;
    DSV4_MMA_ROLLED
    for (int k = 0; k < 16; ++k) s = s + bf16_to_f32(x[k]) * bf16_to_f32(y[k * b.k_step]);
    c.v[i] = c.v[i] + s;
  }
}
#endif

#if !DSV4_MMA_SCALAR
__device__ __forceinline__ void mma(Acc& c, const FragA& a, const FragB& b, int) { mma(c, a, b); }
#endif

}  // namespace dsv4::gpu::mma

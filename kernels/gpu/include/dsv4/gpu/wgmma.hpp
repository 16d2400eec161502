// Hopper's warpgroup matrix instructions (wgmma, sm_90a) for kernel sources: fp32 accumulators
// in registers, bf16 operands read from shared memory through 128-byte-swizzled descriptors (or A
// from registers), issued asynchronously and waited for by commit group. Compiled to nothing in
// the passes that have no such instruction (they never run these functions).
#pragma once

#include <cstdint>
#include <type_traits>

#include "dsv4/gpu/gpu.hpp"

// A device pass for another target (nvcc's preprocessing pass, or a build for other than 90a:
// CMAKE_CUDA_ARCHITECTURES must be 90a) compiles the products to a trap, so such a build fails
// its tests instead of returning wrong numbers.
#if DSV4_GPU_CUDA && defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DSV4_WGMMA 1
#else
#define DSV4_WGMMA 0
#endif
#if DSV4_GPU_CUDA && defined(__CUDA_ARCH__) && !DSV4_WGMMA
#define DSV4_WGMMA_MISSING() __trap()
#else
#define DSV4_WGMMA_MISSING() static_cast<void>(0)
#endif

namespace dsv4::gpu::wgmma {

// Threads of a warpgroup: the four warps that issue one instruction together.
inline constexpr int kThreads = 128;

// The descriptor of a bf16 operand in shared memory at byte address `addr` (1024-aligned at the
// swizzle pattern's start) in the 128-byte swizzle: rows of 128 bytes whose 16-byte units u sit
// at u ^ (row % 8). K-major (the contiguous dimension is k): sbo = bytes between groups of 8 rows
// along M or N, lbo unused. MN-major: lbo = bytes between 64-element groups along M or N, sbo =
// bytes between groups of 8 rows along k.
__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return uint64_t((addr & 0x3ffffu) >> 4) | uint64_t((lbo >> 4) & 0x3fffu) << 16 |
         uint64_t((sbo >> 4) & 0x3fffu) << 32 | uint64_t(1) << 62;
}
// A descriptor moved by `bytes` (a multiple of 16) along its operand.
__device__ __forceinline__ uint64_t desc_add(uint64_t d, uint32_t bytes) {
  return d + (bytes >> 4);
}

// Byte offset of 16-byte unit `unit` (0..7) of row `row` in the 128-byte swizzle.
__host__ __device__ constexpr uint32_t sw128(uint32_t row, uint32_t unit) {
  return row * 128u + ((unit ^ (row & 7u)) << 4);
}

// The shared-space address of p (0 in the passes that never run it).
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
#if DSV4_WGMMA
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
#else
  (void)p;
  return 0;
#endif
}

// The warp's lanes back together (before an aligned instruction after a divergent branch).
__device__ __forceinline__ void converge() {
#if DSV4_WGMMA
  __syncwarp();
#endif
}

// Orders this warpgroup's register and shared-memory accesses before the wgmma that follow.
__device__ __forceinline__ void fence() {
#if DSV4_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
// Closes the group of wgmma issued since the last commit.
__device__ __forceinline__ void commit() {
#if DSV4_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most N committed groups are still running (groups finish in order).
template <int N>
__device__ __forceinline__ void wait() {
#if DSV4_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Makes this thread's ordinary shared-memory stores visible to the asynchronous proxy (wgmma's
// operand reads) after the next barrier.
__device__ __forceinline__ void fence_proxy_async() {
#if DSV4_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Keeps the compiler from moving accesses of operand registers across a wait or a fence: the
// accumulators (fp32) and the A fragments of a register-A wgmma (rs, bf16 pairs). Fenced after
// the wait that covers a product, its A registers stay live (unreused) until then; otherwise
// ptxas sees them dead at the wgmma's issue, may give them to the next values, and then waits for
// the product there itself (C7517).
template <class T, int N>
__device__ __forceinline__ void fence_operands(T (&d)[N]) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, uint32_t>, "fp32 or b32 registers");
#if DSV4_WGMMA
  DSV4_UNROLL
  for (int i = 0; i < N; ++i) {
    if constexpr (std::is_same_v<T, float>)
      asm volatile("" : "+f"(d[i])::"memory");
    else
      asm volatile("" : "+r"(d[i])::"memory");
  }
#else
  (void)d;
#endif
}
template <class T, int M, int N>
__device__ __forceinline__ void fence_operands(T (&d)[M][N]) {
  DSV4_UNROLL
  for (int i = 0; i < M; ++i) fence_operands(d[i]);
}

// D[64 x 32] += A[64 x 16] B[16 x 32], A and B K-major in shared memory (a score product: A the
// queries, B the keys' rows).
__device__ __forceinline__ void mma_m64n32k16_ss(float (&d)[16], uint64_t a, uint64_t b) {
#if DSV4_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15])
      : "l"(a), "l"(b), "n"(1));
#else
  (void)d, (void)a, (void)b;
  DSV4_WGMMA_MISSING();
#endif
}

// D[64 x 256] += A[64 x 16] B[16 x 256], A from registers (mma.sync's m16n8k16 A fragment of
// warp w's rows 16 w .. 16 w + 15), B MN-major in shared memory (an output product: A the
// probabilities, B the value rows).
__device__ __forceinline__ void mma_m64n256k16_rs_t(float (&d)[128], const uint32_t (&a)[4],
                                                    uint64_t b) {
#if DSV4_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
      "%27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, "
      "%45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, "
      "%63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, "
      "%81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, "
      "%99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, "
      "%114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, "
      "%129, %130, %131}, %132, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
        "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
        "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
        "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
        "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
        "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
        "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
        "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
        "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(1));
#else
  (void)d, (void)a, (void)b;
  DSV4_WGMMA_MISSING();
#endif
}

}  // namespace dsv4::gpu::wgmma

// The device's own fp8 (e4m3fn) and bf16 conversions where it has them (NVIDIA sm_89 and later):
// DSV4_GPU_FP8_CVT is 1 in a device pass that has them, and the functions exist only there.
//
// What they compute, for the kernels that trust them with SGLang's bytes (the exhaustive device
// tests of unit/kernels/test_compact_pages_codecs.cpp hold them to the integer codecs):
// - e4m3_to_f32x4: an e4m3fn code as fp32, exact (through f16, which holds every e4m3 value);
//   a NaN code gives some NaN (callers that promise a NaN pattern patch it). e4m3_to_f32: one code.
// - e4m3_from_f32x4: fp32 to e4m3fn, round to nearest even of the fp32 value, saturating at
//   +-448 (inf too), the sign kept on zero; a NaN gives a NaN code. e4m3_from_f32: one value.
// - bf16x2_from_f32: fp32 to bf16, round to nearest even (subnormals kept, overflow to inf).
// fp32 products feeding them are plain IEEE multiplies: the kernels are built without
// flush-to-zero (no fast-math), so a subnormal operand or result stays exact where it fits.
#pragma once

#include <cstdint>

#include "dsv4/gpu/gpu.hpp"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define DSV4_GPU_FP8_CVT 1
#else
#define DSV4_GPU_FP8_CVT 0
#endif

namespace dsv4::gpu::fp8 {

#if DSV4_GPU_FP8_CVT

// Codes 0..3 of a word (byte k is code k) as fp32, exact.
__device__ __forceinline__ void e4m3_to_f32x4(uint32_t codes, float* out) {
  uint32_t lo, hi;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(lo) : "h"(uint16_t(codes & 0xffffu)));
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(hi) : "h"(uint16_t(codes >> 16)));
  asm("cvt.f32.f16 %0, %1;" : "=f"(out[0]) : "h"(uint16_t(lo & 0xffffu)));
  asm("cvt.f32.f16 %0, %1;" : "=f"(out[1]) : "h"(uint16_t(lo >> 16)));
  asm("cvt.f32.f16 %0, %1;" : "=f"(out[2]) : "h"(uint16_t(hi & 0xffffu)));
  asm("cvt.f32.f16 %0, %1;" : "=f"(out[3]) : "h"(uint16_t(hi >> 16)));
}

// Four fp32 values as e4m3fn codes, value k in byte k.
__device__ __forceinline__ uint32_t e4m3_from_f32x4(float x0, float x1, float x2, float x3) {
  uint16_t lo, hi;  // cvt puts its first operand in the upper byte
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(x1), "f"(x0));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(x3), "f"(x2));
  return uint32_t(lo) | (uint32_t(hi) << 16);
}

// One fp32 value as an e4m3fn code (e4m3_from_f32x4's rounding).
__device__ __forceinline__ uint8_t e4m3_from_f32(float x) {
  uint16_t r;  // x in the low byte
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(x));
  return uint8_t(r & 0xffu);
}

// One e4m3fn code as fp32, exact (e4m3_to_f32x4's conversion).
__device__ __forceinline__ float e4m3_to_f32(uint8_t code) {
  uint32_t h;
  float f;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h) : "h"(uint16_t(code)));
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(uint16_t(h & 0xffffu)));
  return f;
}

// Two fp32 values as a bf16 pair: x0 in the low half.
__device__ __forceinline__ uint32_t bf16x2_from_f32(float x0, float x1) {
  uint32_t r;  // cvt puts its first operand in the upper half
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(x1), "f"(x0));
  return r;
}

#endif  // DSV4_GPU_FP8_CVT

}  // namespace dsv4::gpu::fp8

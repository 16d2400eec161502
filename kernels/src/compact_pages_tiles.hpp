// compact_pages' tile work for the quantise kernel: a tile's maximum over its lanes and words,
// and the NVFP4 encoders (packed bf16 counts on sm_90, integer subtractions elsewhere). Private
// to kernels/src/compact_pages.hip.
#pragma once

#include <cstdint>

#include "dsv4/gpu/fp8.hpp"
#include "dsv4/gpu/gpu.hpp"
#include "dsv4/ref/formats/kv_tiles.hpp"

// NVIDIA (sm_90: packed bf16 comparisons and additions): the NVFP4 quantise counts its threshold
// comparisons and takes its maxima with packed bf16 instructions, two values each, instead of
// integer subtractions, maxima and bit selects, all on the ALU pipe (half the FMA pipe's rate on
// Hopper). On an H200 at 65536 rows: 36.3 us against 41.7 us. Elsewhere: the integer encoder.
#if DSV4_GPU_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DSV4_CP_PACKED_BF16 1
#else
#define DSV4_CP_PACKED_BF16 0
#endif

namespace dsv4::kernels::compact_pages {
namespace {

// The largest of v over the L lanes of a tile (width-L butterfly; every lane takes part).
template <int L>
__device__ __forceinline__ uint32_t tile_max(uint32_t v) {
  if constexpr (L > 1) {
    DSV4_FMT_UNROLL
    for (int off = L / 2; off > 0; off >>= 1) {
      const uint32_t o = __shfl_xor(v, off, L);
      v = o > v ? o : v;
    }
  }
  return v;
}

// Magnitude bits (bf16) of the largest value of words w[0..n): NaN included (above 0x7f80) when
// kWithNaN, else NaN skipped (fmaxf drops a NaN operand; bf16 values are exact in fp32).
template <bool kWithNaN, int n>
__device__ __forceinline__ uint32_t words_max(const uint32_t* w) {
  if constexpr (kWithNaN) {
    // Both halves of |w| | 0x80008000 compare as their high 16 bits.
    uint32_t lo = 0, hi = 0;
    DSV4_FMT_UNROLL
    for (int j = 0; j < n; ++j) {
      const uint32_t a = (w[j] & 0x7fff7fffu) | 0x80008000u;
      hi = a > hi ? a : hi;
      lo = (a << 16) > lo ? (a << 16) : lo;
    }
    hi = (hi >> 16) & 0x7fffu;
    lo = (lo >> 16) & 0x7fffu;
    return hi > lo ? hi : lo;
  } else {
    float mx = 0.0f;
    DSV4_FMT_UNROLL
    for (int j = 0; j < n; ++j) {
      const float lo = f32_from_bits(w[j] << 16), hi = f32_from_bits(w[j] & 0xffff0000u);
      mx = fmaxf(mx, fmaxf(fabsf(lo), fabsf(hi)));
    }
    return f32_bits(mx) >> 16;
  }
}

// The NVFP4 tile in packed bf16 instructions (two values each), the same codes as
// nvfp4::encode_pair_nibbles:
//  - Maxima: max.NaN.xorsign.abs.bf16x2 takes max(|a|, |b|) per half (exact; a NaN in either makes
//    the result NaN and it stays NaN); the sign bits it leaves are masked off at the end. Any NaN
//    gives bits above 0x7f80, as words_max<true> does.
//  - Thresholds: t_i = m_i * S in one mul.rn.bf16x2 per midpoint m_i (m_i has at most 3
//    significant bits and S at most 4, so the bf16 product is exact); T_i = t_i for even i, one
//    bf16 step below for odd i (a tie moves up to the even code), so the code is the number of
//    T_i below |x|, as in nvfp4::PairThresholds (u_i = T_i + 1). kv::fp4_scale never gives a zero
//    scale; a NaN scale makes a NaN tile, whose codes are masked to 0.
//  - Codes as counts: set.gt.bf16x2 gives 1.0 per half where |x| > T_i (an ordered comparison: a
//    NaN |x|, only in a NaN tile, gives 0; |x| = inf passes all, saturating at 6); added to
//    128 + 8 [x < 0] (exact: the integers 128..255 are consecutive bf16 values), the low 4 bits of
//    each half are the nibble: sign, then the count.
struct PackedFp4Tile {
  uint32_t t[7];  // T_i in both halves
  uint32_t keep;  // all ones, or 0 in a NaN tile (its codes are 0)
};

#if DSV4_CP_PACKED_BF16
__device__ __forceinline__ PackedFp4Tile packed_fp4_tile(uint8_t sc) {
  // The midpoints 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5 as bf16 pairs.
  constexpr uint32_t kMid[7] = {0x3e803e80u, 0x3f403f40u, 0x3fa03fa0u, 0x3fe03fe0u,
                                0x40204020u, 0x40604060u, 0x40a040a0u};
  const uint32_t s2 = (f32_bits(gpu::fp8::e4m3_to_f32(sc & 0x7fu)) >> 16) * 0x00010001u;
  PackedFp4Tile p;
  DSV4_FMT_UNROLL
  for (int i = 0; i < 7; ++i) {
    asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(p.t[i]) : "r"(kMid[i]), "r"(s2));
    if (i & 1) p.t[i] -= 0x00010001u;
  }
  p.keep = e4m3_is_nan(sc) ? 0u : ~0u;
  return p;
}

// The two codes of word w (values 2i, 2i+1) as nibbles at bits 0..3 and 16..19, every other bit 0.
__device__ __forceinline__ uint32_t counted_fp4_nibbles(uint32_t w, const PackedFp4Tile& p) {
  const uint32_t a = w & 0x7fff7fffu;
  uint32_t acc = 0x43004300u | ((w >> 12) & 0x00080008u);
  DSV4_FMT_UNROLL
  for (int i = 0; i < 7; ++i) {
    uint32_t st;
    asm("set.gt.bf16x2.bf16x2 %0, %1, %2;" : "=r"(st) : "r"(a), "r"(p.t[i]));
    asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(acc) : "r"(acc), "r"(st));
  }
  return acc & 0x000f000fu;
}

// Four words of counted_fp4_nibbles as the 4 bytes of the page (pair k in byte k).
__device__ __forceinline__ uint32_t pack_counted(uint32_t n0, uint32_t n1, uint32_t n2,
                                                 uint32_t n3) {
  const uint32_t b0 = n0 | (n0 >> 12), b1 = n1 | (n1 >> 12), b2 = n2 | (n2 >> 12),
                 b3 = n3 | (n3 >> 12);
  return minifloat::byte_perm(minifloat::byte_perm(b0, b1, 0x0040u),
                              minifloat::byte_perm(b2, b3, 0x0040u), 0x5410u);
}

template <int n>
__device__ __forceinline__ uint32_t packed_words_max(const uint32_t* w) {
  uint32_t acc = w[0];
  DSV4_FMT_UNROLL
  for (int j = 1; j < n; ++j)
    asm("max.NaN.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(acc) : "r"(acc), "r"(w[j]));
  const uint32_t lo = acc & 0x7fffu, hi = (acc >> 16) & 0x7fffu;
  return hi > lo ? hi : lo;
}

// The tile's scale byte, kv::fp4_scale, as kv::fp4_scale_product rounded by the device's e4m3
// conversion (on an H200 the integer scale rule, whose general path a drawn warp nearly always
// takes in some lane, was 40% of the writer's instructions).
__device__ __forceinline__ uint8_t device_fp4_scale(const minifloat::Bf16Amax& m) {
  if (m.nan) return kE4m3NaN;
  const uint8_t c = gpu::fp8::e4m3_from_f32(kv::fp4_scale_product(m));
  return c == 0 ? uint8_t(1) : c;
}
#endif

// The NVFP4 tile's scale byte (kv::fp4_scale) for encoder kEnc.
template <int kEnc>
__device__ __forceinline__ uint8_t fp4_tile_scale(const minifloat::Bf16Amax& m) {
#if DSV4_CP_PACKED_BF16
  if constexpr (kEnc == 0) return device_fp4_scale(m);
#endif
  return kv::fp4_scale(m);
}

// kEnc (the NVFP4 encoder): 0 packed bf16 counts where the target has them (else 1), 1 integer
// subtractions (nvfp4::encode_pair_nibbles).
// Magnitude bits of the largest value of NVFP4 words w[0..n) (any NaN above 0x7f80).
template <int kEnc, int n>
__device__ __forceinline__ uint32_t fp4_words_max(const uint32_t* w) {
#if DSV4_CP_PACKED_BF16
  if constexpr (kEnc == 0) return packed_words_max<n>(w);
#endif
  return words_max<true, n>(w);
}

// Words w[0..4 kGroups) of one NVFP4 tile with scale byte sc as kGroups words of nibbles (value
// 2i in the low nibble of byte i).
template <int kEnc, int kGroups>
__device__ __forceinline__ void fp4_encode(const uint32_t* w, uint8_t sc, uint32_t* q) {
#if DSV4_CP_PACKED_BF16
  if constexpr (kEnc == 0) {
    const PackedFp4Tile pt = packed_fp4_tile(sc);
    DSV4_FMT_UNROLL
    for (int j = 0; j < kGroups; ++j)
      q[j] = pt.keep & pack_counted(counted_fp4_nibbles(w[4 * j], pt),
                                    counted_fp4_nibbles(w[4 * j + 1], pt),
                                    counted_fp4_nibbles(w[4 * j + 2], pt),
                                    counted_fp4_nibbles(w[4 * j + 3], pt));
    return;
  }
#endif
  const nvfp4::PairThresholds pt = nvfp4::pair_thresholds(sc);
  DSV4_FMT_UNROLL
  for (int j = 0; j < kGroups; ++j)
    q[j] = nvfp4::pack_nibbles(
        nvfp4::encode_pair_nibbles(w[4 * j], pt), nvfp4::encode_pair_nibbles(w[4 * j + 1], pt),
        nvfp4::encode_pair_nibbles(w[4 * j + 2], pt), nvfp4::encode_pair_nibbles(w[4 * j + 3], pt));
}

}  // namespace
}  // namespace dsv4::kernels::compact_pages

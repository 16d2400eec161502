// compact_pages kernels: bf16 rows -> MXFP8-528 / NVFP4-288 page rows at slot locations
// (quantise), and page rows -> bf16 / fp32 rows (dequantise), through the shared block codecs of
// dsv4/ref/formats/ (mxfp8.hpp, nvfp4.hpp), so kernel and reference round the same way.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "dsv4/gpu/gpu.hpp"
#include "dsv4/kernels/compact_pages.hpp"
#include "dsv4/ref/formats/mxfp8.hpp"
#include "dsv4/ref/formats/nvfp4.hpp"

#if DSV4_GPU_HIP
// The CMake flags already turn contraction off; this keeps the source faithful when compiled by
// hand as well (the codecs are integer arithmetic and exact products, so it never matters).
#pragma clang fp contract(off)
#endif

namespace dsv4::kernels::compact_pages {
namespace {

// 16 and 8 bytes moved as one access.
#if DSV4_GPU_NONE
struct alignas(16) Pack16 {
  uint32_t x, y, z, w;
};
struct alignas(8) Pack8 {
  uint32_t x, y;
};
#else
using Pack16 = uint4;
using Pack8 = uint2;
#endif

constexpr int kThreads = 256;
// Values per lane when dequantising into Out.
template <class Out>
constexpr int dequant_values() {
  return sizeof(Out) == 4 ? 8 : 16;
}

__device__ __forceinline__ void count_error(int64_t* errors) {
  atomicAdd(reinterpret_cast<unsigned long long*>(errors), 1ull);
}

// Stores kBytes (4, 8, 16 or 32) from words w[] at dst, aligned to min(kBytes, 16).
template <int kBytes>
__device__ __forceinline__ void store_bytes(uint8_t* dst, const uint32_t* w) {
  if constexpr (kBytes == 4) {
    *reinterpret_cast<uint32_t*>(dst) = w[0];
  } else if constexpr (kBytes == 8) {
    Pack8 p;
    p.x = w[0], p.y = w[1];
    *reinterpret_cast<Pack8*>(dst) = p;
  } else {
    static_assert(kBytes % 16 == 0, "store_bytes: 4, 8 or a multiple of 16 bytes");
    DSV4_FMT_UNROLL
    for (int k = 0; k < kBytes / 16; ++k) {
      Pack16 p;
      p.x = w[4 * k], p.y = w[4 * k + 1], p.z = w[4 * k + 2], p.w = w[4 * k + 3];
      reinterpret_cast<Pack16*>(dst)[k] = p;
    }
  }
}

struct QuantizeArgs {
  const Pack16* src;
  int64_t src_stride;  // in packs of 8 values
  const int64_t* slots;
  int64_t n_rows;
  uint8_t* pool;
  int64_t pool_rows;
  int64_t* errors;
};

// The largest magnitude of the L lanes of a block (width-L butterfly; every lane takes part).
template <int L>
__device__ __forceinline__ uint32_t block_max(uint32_t v) {
  if constexpr (L > 1) {
    DSV4_FMT_UNROLL
    for (int off = L / 2; off > 0; off >>= 1) {
      const uint32_t o = __shfl_xor(v, off, L);
      v = o > v ? o : v;
    }
  }
  return v;
}

// L lanes per scale block, kV = block / L consecutive values per lane; a row is 512 / kV lanes.
// Every lane reaches the shuffles, whatever its row does, so the width-L groups are complete. A
// lane reads its part of row t whether or not the row's slot is valid (row t exists), so the read
// does not wait for the slot.
template <int kFormat, int L>
__global__ void __launch_bounds__(kThreads) quantize_kernel(QuantizeArgs a) {
  constexpr PageFormat F = PageFormat(kFormat);
  constexpr int kV = page_block_values(F) / L;
  constexpr int kW = kV / 2;  // words of two bf16 values
  constexpr int kLanesPerRow = kPageRowValues / kV;
  static_assert(kV % 8 == 0, "a lane moves whole 16-byte packs");

  const int64_t gid = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t t = gid / kLanesPerRow;
  const int lane = int(gid - t * kLanesPerRow);
  const bool in_rows = t < a.n_rows;
  const int64_t slot = in_rows ? a.slots[t] : -1;
  uint32_t w[kW];
  if (in_rows) {
    const Pack16* p = a.src + t * a.src_stride + int64_t(lane) * (kV / 8);
    DSV4_FMT_UNROLL
    for (int k = 0; k < kV / 8; ++k) {
      const Pack16 v = p[k];
      w[4 * k] = v.x, w[4 * k + 1] = v.y, w[4 * k + 2] = v.z, w[4 * k + 3] = v.w;
    }
  } else {
    DSV4_FMT_UNROLL
    for (int j = 0; j < kW; ++j) w[j] = 0;
  }
  const bool active = slot >= 0 && slot < a.pool_rows;
  if (slot >= a.pool_rows && lane == 0) count_error(a.errors);

  minifloat::Bf16Amax m;
  if constexpr (F == PageFormat::kMxfp8) {
    // The maximum without NaN (fmaxf drops a NaN operand; bf16 values are exact in fp32, so the
    // maximum's bits are a bf16 magnitude).
    float mx = 0.0f;
    DSV4_FMT_UNROLL
    for (int j = 0; j < kW; ++j) {
      const float lo = f32_from_bits(w[j] << 16), hi = f32_from_bits(w[j] & 0xffff0000u);
      mx = fmaxf(mx, fmaxf(fabsf(lo), fabsf(hi)));
    }
    m.bits = block_max<L>(f32_bits(mx) >> 16);
    m.nan = false;  // MXFP8 scales ignore NaN elements
  } else {
    // The maximum magnitude, NaN included: a block holding a NaN shows a maximum above 0x7f80,
    // and NVFP4 needs nothing else of such a block. Both halves of the masked word the encoder
    // uses (|w| with bits 15 and 31 set) compare as their high 16 bits.
    uint32_t lo = 0, hi = 0;
    DSV4_FMT_UNROLL
    for (int j = 0; j < kW; ++j) {
      const uint32_t a = (w[j] & 0x7fff7fffu) | 0x80008000u;
      hi = a > hi ? a : hi;
      lo = (a << 16) > lo ? (a << 16) : lo;
    }
    hi = (hi >> 16) & 0x7fffu;
    lo = (lo >> 16) & 0x7fffu;
    const uint32_t mx = block_max<L>(hi > lo ? hi : lo);
    m.bits = mx;
    m.nan = mx > 0x7f80u;
  }
  if (!active) return;

  uint8_t* row = a.pool + slot * page_row_bytes(F);
  const int block = lane / L;
  uint8_t sc;
  if constexpr (F == PageFormat::kMxfp8) {
    sc = mxfp8::block_scale(m);
    const uint32_t bias = mxfp8::encode_bias(sc);
    uint32_t q[kV / 4];  // one e4m3 byte per value
    DSV4_FMT_UNROLL
    for (int j = 0; j < kW; j += 2)
      q[j / 2] = uint32_t(mxfp8::encode(uint16_t(w[j]), sc, bias)) |
                 (uint32_t(mxfp8::encode(uint16_t(w[j] >> 16), sc, bias)) << 8) |
                 (uint32_t(mxfp8::encode(uint16_t(w[j + 1]), sc, bias)) << 16) |
                 (uint32_t(mxfp8::encode(uint16_t(w[j + 1] >> 16), sc, bias)) << 24);
    store_bytes<kV>(row + lane * kV, q);
  } else {
    sc = nvfp4::block_scale(m);
    const nvfp4::PairThresholds pt = nvfp4::pair_thresholds(sc);
    uint32_t q[kV / 8];  // one e2m1 nibble per value, value 2i in the low nibble of byte i
    DSV4_FMT_UNROLL
    for (int j = 0; j < kV / 8; ++j)
      q[j] = nvfp4::pack_nibbles(nvfp4::encode_pair_nibbles(w[4 * j], pt),
                                 nvfp4::encode_pair_nibbles(w[4 * j + 1], pt),
                                 nvfp4::encode_pair_nibbles(w[4 * j + 2], pt),
                                 nvfp4::encode_pair_nibbles(w[4 * j + 3], pt));
    store_bytes<kV / 2>(row + lane * (kV / 2), q);
  }
  if (lane % L == 0) row[page_scale_offset(F) + block] = sc;
}

struct DequantizeArgs {
  const uint8_t* pool;
  int64_t pool_rows;
  const int64_t* slots;
  int64_t n_rows;
  void* out;
  int64_t out_stride;  // in values
  int64_t* errors;
};

// Loads kBytes (4, 8 or 16) at p, aligned to kBytes, as words.
template <int kBytes>
__device__ __forceinline__ void load_words(const uint8_t* p, uint32_t* w) {
  if constexpr (kBytes == 4) {
    w[0] = *reinterpret_cast<const uint32_t*>(p);
  } else if constexpr (kBytes == 8) {
    const Pack8 v = *reinterpret_cast<const Pack8*>(p);
    w[0] = v.x, w[1] = v.y;
  } else {
    static_assert(kBytes == 16, "load_words: 4, 8 or 16 bytes");
    const Pack16 v = *reinterpret_cast<const Pack16*>(p);
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  }
}

// kV values per lane: 16 for bf16 output (32 bytes stored), 8 for fp32 (also 32 bytes: wider
// per-lane stores measured slower); no cross-lane work.
template <int kFormat, class Out>
__global__ void __launch_bounds__(kThreads) dequantize_kernel(DequantizeArgs a) {
  constexpr PageFormat F = PageFormat(kFormat);
  constexpr bool kF32 = sizeof(Out) == 4;
  constexpr int kV = dequant_values<Out>();
  constexpr int kLanes = kPageRowValues / kV;
  constexpr int kCodeBytes = F == PageFormat::kMxfp8 ? kV : kV / 2;
  const int64_t gid = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t t = gid / kLanes;
  const int lane = int(gid - t * kLanes);
  if (t >= a.n_rows) return;
  const int64_t slot = a.slots[t];
  if (slot < 0) return;
  if (slot >= a.pool_rows) {
    if (lane == 0) count_error(a.errors);
    return;
  }
  const uint8_t* row = a.pool + slot * page_row_bytes(F);
  const uint8_t sc = row[page_scale_offset(F) + lane * kV / page_block_values(F)];
  uint32_t codes[kCodeBytes / 4];
  load_words<kCodeBytes>(row + lane * kCodeBytes, codes);
  uint32_t w[kV * sizeof(Out) / 4];  // fp32 bits, or pairs of bf16
  if constexpr (F == PageFormat::kMxfp8) {
    DSV4_FMT_UNROLL
    for (int k = 0; k < kV / 4; ++k) {
      if constexpr (kF32)
        mxfp8::decode4_bits(codes[k], sc, w + 4 * k);
      else
        mxfp8::decode4_bf16(codes[k], sc, w + 2 * k);
    }
  } else {
    const nvfp4::Decoder d = nvfp4::decoder(sc);
    uint32_t bits[kV];
    if (d.nan) {
      DSV4_FMT_UNROLL
      for (int i = 0; i < kV; ++i) bits[i] = 0x7fc00000u;
    } else {
      DSV4_FMT_UNROLL
      for (int i = 0; i < kV; ++i)
        bits[i] = nvfp4::decode_bits_number(uint8_t((codes[i / 8] >> (4 * (i % 8))) & 0xfu), d);
    }
    DSV4_FMT_UNROLL
    for (int i = 0; i < (kF32 ? kV : kV / 2); ++i)
      w[i] = kF32 ? bits[i] : (bits[2 * i] >> 16) | (bits[2 * i + 1] & 0xffff0000u);
  }
  Out* out = static_cast<Out*>(a.out) + t * a.out_stride + lane * kV;
  store_bytes<int(sizeof(Out)) * kV>(reinterpret_cast<uint8_t*>(out), w);
}

// ---- host side ----------------------------------------------------------------------------

[[noreturn]] void bad(const char* fn, const std::string& what) {
  throw std::invalid_argument(std::string("compact_pages::") + fn + ": " + what);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

void check_format(const char* fn, PageFormat f) {
  if (f != PageFormat::kMxfp8 && f != PageFormat::kNvfp4)
    bad(fn, "format=" + std::to_string(int(f)) + " is not kMxfp8 (0) or kNvfp4 (1)");
}

// Checks what both directions share; returns the stride (0 replaced by 512).
int64_t check_rows(const char* fn, const char* stride_name, int64_t stride, int64_t n_rows,
                   int64_t pool_rows) {
  if (n_rows < 0 || n_rows > INT32_MAX)
    bad(fn, "n_rows=" + std::to_string(n_rows) + " must be in [0, 2^31)");
  if (pool_rows < 0) bad(fn, "pool_rows=" + std::to_string(pool_rows) + " must be >= 0");
  if (stride == 0) stride = kPageRowValues;
  if (stride < kPageRowValues || stride % 8 != 0)
    bad(fn, std::string(stride_name) + "=" + std::to_string(stride) +
                " must be 0 or a multiple of 8 >= 512");
  return stride;
}

void check_pointers(const char* fn, const char* data_name, const void* data, const void* pool,
                    const int64_t* slots, const int64_t* errors) {
  if (!data || !pool || !slots || !errors)
    bad(fn, std::string(!data    ? data_name
                        : !pool  ? "pool"
                        : !slots ? "slots"
                                 : "errors") +
                " is null");
  if (!aligned16(data)) bad(fn, std::string(data_name) + " is not 16-byte aligned");
  if (!aligned16(pool)) bad(fn, "pool is not 16-byte aligned");
}

dim3 grid_for(int64_t n_rows, int lanes_per_row) {
  return dim3(gpu::ceil_div(size_t(n_rows) * size_t(lanes_per_row), kThreads));
}

template <int kFormat, int L>
void launch_quantize(const QuantizeArgs& a, hipStream_t s) {
  constexpr int lanes_per_row = kPageRowValues * L / page_block_values(PageFormat(kFormat));
  gpu::launch(quantize_kernel<kFormat, L>, grid_for(a.n_rows, lanes_per_row), dim3(kThreads), 0, s,
              a);
}

template <class Out>
void dequantize_impl(PageFormat f, const uint8_t* pool, int64_t pool_rows, const int64_t* slots,
                     int64_t n_rows, Out* out, int64_t out_stride, int64_t* errors, gpu::Stream s) {
  const char* fn = "dequantize";
  check_format(fn, f);
  out_stride = check_rows(fn, "out_stride", out_stride, n_rows, pool_rows);
  if (n_rows == 0) return;
  check_pointers(fn, "out", out, pool, slots, errors);
  DequantizeArgs a;
  a.pool = pool;
  a.pool_rows = pool_rows;
  a.slots = slots;
  a.n_rows = n_rows;
  a.out = out;
  a.out_stride = out_stride;
  a.errors = errors;
  const hipStream_t st = static_cast<hipStream_t>(s);
  const dim3 grid = grid_for(n_rows, kPageRowValues / dequant_values<Out>());
  if (f == PageFormat::kMxfp8)
    gpu::launch(dequantize_kernel<int(PageFormat::kMxfp8), Out>, grid, dim3(kThreads), 0, st, a);
  else
    gpu::launch(dequantize_kernel<int(PageFormat::kNvfp4), Out>, grid, dim3(kThreads), 0, st, a);
}

}  // namespace

bool lanes_supported(PageFormat f, int lanes) {
  if (f == PageFormat::kMxfp8) return lanes == 1 || lanes == 2 || lanes == 4;
  if (f == PageFormat::kNvfp4) return lanes == 1 || lanes == 2;
  return false;
}

void quantize(PageFormat f, const bf16* src, int64_t src_stride, const int64_t* slots,
              int64_t n_rows, uint8_t* pool, int64_t pool_rows, int64_t* errors, gpu::Stream s,
              const Options& opt) {
  const char* fn = "quantize";
  check_format(fn, f);
  // Default: one lane per block (32 or 16 values), the fastest measured on an H200
  // (bench/compact_pages.cpp prints every choice).
  const int lanes = opt.lanes_per_block ? opt.lanes_per_block : 1;
  if (!lanes_supported(f, lanes))
    bad(fn, "lanes_per_block=" + std::to_string(opt.lanes_per_block) + " is not one of " +
                (f == PageFormat::kMxfp8 ? "0, 1, 2, 4" : "0, 1, 2") + " for " +
                page_format_name(f));
  src_stride = check_rows(fn, "src_stride", src_stride, n_rows, pool_rows);
  if (n_rows == 0) return;
  check_pointers(fn, "src", src, pool, slots, errors);
  QuantizeArgs a;
  a.src = reinterpret_cast<const Pack16*>(src);
  a.src_stride = src_stride / 8;
  a.slots = slots;
  a.n_rows = n_rows;
  a.pool = pool;
  a.pool_rows = pool_rows;
  a.errors = errors;
  const hipStream_t st = static_cast<hipStream_t>(s);
  constexpr int kMx = int(PageFormat::kMxfp8), kNv = int(PageFormat::kNvfp4);
  if (f == PageFormat::kMxfp8) {
    if (lanes == 1) launch_quantize<kMx, 1>(a, st);
    if (lanes == 2) launch_quantize<kMx, 2>(a, st);
    if (lanes == 4) launch_quantize<kMx, 4>(a, st);
  } else {
    if (lanes == 1) launch_quantize<kNv, 1>(a, st);
    if (lanes == 2) launch_quantize<kNv, 2>(a, st);
  }
}

void dequantize(PageFormat f, const uint8_t* pool, int64_t pool_rows, const int64_t* slots,
                int64_t n_rows, float* out, int64_t out_stride, int64_t* errors, gpu::Stream s) {
  dequantize_impl(f, pool, pool_rows, slots, n_rows, out, out_stride, errors, s);
}

void dequantize(PageFormat f, const uint8_t* pool, int64_t pool_rows, const int64_t* slots,
                int64_t n_rows, bf16* out, int64_t out_stride, int64_t* errors, gpu::Stream s) {
  dequantize_impl(f, pool, pool_rows, slots, n_rows, out, out_stride, errors, s);
}

}  // namespace dsv4::kernels::compact_pages

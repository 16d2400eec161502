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
constexpr int kDequantValues = 8;  // values per lane when dequantising
constexpr int kDequantLanes = kPageRowValues / kDequantValues;

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

  // The block maximum: first over all magnitudes (a NaN's is above 0x7f80, so it shows there);
  // only a block holding a NaN takes the second look, without them.
  uint32_t mx = 0;
  DSV4_FMT_UNROLL
  for (int j = 0; j < kW; ++j) {
    const uint32_t lo = w[j] & 0x7fffu, hi = (w[j] >> 16) & 0x7fffu;
    mx = lo > mx ? lo : mx;
    mx = hi > mx ? hi : mx;
  }
  mx = block_max<L>(mx);
  uint32_t finite_max = mx;
  if (mx > 0x7f80u) {
    minifloat::Bf16Amax m = minifloat::bf16_amax_init();
    DSV4_FMT_UNROLL
    for (int j = 0; j < kW; ++j) {
      minifloat::bf16_amax_add(m, uint16_t(w[j]));
      minifloat::bf16_amax_add(m, uint16_t(w[j] >> 16));
    }
    finite_max = m.bits;
  }
  minifloat::Bf16Amax m;
  m.bits = block_max<L>(finite_max);
  m.nan = mx > 0x7f80u;
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
    const nvfp4::Thresholds th = nvfp4::thresholds(sc);
    uint32_t q[kV / 8];  // one e2m1 nibble per value, value 2i in the low nibble of byte i
    DSV4_FMT_UNROLL
    for (int j = 0; j < kV / 8; ++j) {
      uint32_t word = 0;
      DSV4_FMT_UNROLL
      for (int k = 0; k < 4; ++k) {
        const uint32_t v = w[4 * j + k];
        word |= (uint32_t(nvfp4::encode(uint16_t(v), th)) |
                 (uint32_t(nvfp4::encode(uint16_t(v >> 16), th)) << 4))
                << (8 * k);
      }
      q[j] = word;
    }
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

// 8 values per lane, 64 lanes per row; no cross-lane work.
template <int kFormat, class Out>
__global__ void __launch_bounds__(kThreads) dequantize_kernel(DequantizeArgs a) {
  constexpr PageFormat F = PageFormat(kFormat);
  constexpr bool kF32 = sizeof(Out) == 4;
  const int64_t gid = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t t = gid / kDequantLanes;
  const int lane = int(gid - t * kDequantLanes);
  if (t >= a.n_rows) return;
  const int64_t slot = a.slots[t];
  if (slot < 0) return;
  if (slot >= a.pool_rows) {
    if (lane == 0) count_error(a.errors);
    return;
  }
  const uint8_t* row = a.pool + slot * page_row_bytes(F);
  const int block = lane * kDequantValues / page_block_values(F);
  const uint8_t sc = row[page_scale_offset(F) + block];
  uint32_t w[kF32 ? 8 : 4];  // fp32 bits, or pairs of bf16
  if constexpr (F == PageFormat::kMxfp8) {
    const Pack8 codes = *reinterpret_cast<const Pack8*>(row + lane * 8);
    if constexpr (kF32) {
      mxfp8::decode4_bits(codes.x, sc, w);
      mxfp8::decode4_bits(codes.y, sc, w + 4);
    } else {
      mxfp8::decode4_bf16(codes.x, sc, w);
      mxfp8::decode4_bf16(codes.y, sc, w + 2);
    }
  } else {
    const uint32_t codes = *reinterpret_cast<const uint32_t*>(row + lane * 4);
    const nvfp4::Decoder d = nvfp4::decoder(sc);
    uint32_t bits[8];
    DSV4_FMT_UNROLL
    for (int i = 0; i < 8; ++i) bits[i] = nvfp4::decode_bits(uint8_t((codes >> (4 * i)) & 0xfu), d);
    DSV4_FMT_UNROLL
    for (int i = 0; i < (kF32 ? 8 : 4); ++i)
      w[i] = kF32 ? bits[i] : (bits[2 * i] >> 16) | (bits[2 * i + 1] & 0xffff0000u);
  }
  Out* out = static_cast<Out*>(a.out) + t * a.out_stride + lane * kDequantValues;
  store_bytes<sizeof(Out) * kDequantValues>(reinterpret_cast<uint8_t*>(out), w);
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
  const dim3 grid = grid_for(n_rows, kDequantLanes);
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
  // Default: 16 values per lane (2 lanes per MXFP8 block, 1 per NVFP4 block), the fastest on the
  // devices measured (bench/compact_pages.cpp prints every choice).
  const int lanes = opt.lanes_per_block ? opt.lanes_per_block : page_block_values(f) / 16;
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

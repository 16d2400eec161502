// compact_pages kernels: bf16 rows -> SGLang's paged KV layouts at slot locations (quantise), and
// slots -> bf16 / fp32 rows (dequantise), through the shared tile codecs of
// dsv4/ref/formats/kv_tiles.hpp (the e4m3fn ones through the device's conversions where it has
// them, kv_codecs_device.hpp), so kernel and reference round the same way.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "dsv4/gpu/gpu.hpp"
#include "dsv4/kernels/compact_pages.hpp"
#include "dsv4/ref/formats/kv_tiles.hpp"

#if DSV4_GPU_HIP
// The CMake flags already turn contraction off; this keeps the source faithful when compiled by
// hand as well (the codecs are integer arithmetic and exact products, so it never matters).
#pragma clang fp contract(off)
#endif

#include "compact_pages_tiles.hpp"  // after the pragma: its code is compiled under it too
#include "kv_codecs_device.hpp"

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
constexpr int kF32Groups = 4;  // dequantise to fp32: groups of 4 values per lane (see below)

template <class Out>
constexpr int dequant_values() {
  return sizeof(Out) == 4 ? 8 : 16;
}

__device__ __forceinline__ void count_error(int64_t* errors) {
  atomicAdd(reinterpret_cast<unsigned long long*>(errors), 1ull);
}

// Stores kBytes (1, 2, 4, 8 or a multiple of 16) from words w[] at dst, aligned to min(kBytes, 16).
template <int kBytes>
__device__ __forceinline__ void store_bytes(uint8_t* dst, const uint32_t* w) {
  if constexpr (kBytes == 1) {
    *dst = uint8_t(w[0]);
  } else if constexpr (kBytes == 2) {
    *reinterpret_cast<uint16_t*>(dst) = uint16_t(w[0]);
  } else if constexpr (kBytes == 4) {
    *reinterpret_cast<uint32_t*>(dst) = w[0];
  } else if constexpr (kBytes == 8) {
    Pack8 p;
    p.x = w[0], p.y = w[1];
    *reinterpret_cast<Pack8*>(dst) = p;
  } else {
    static_assert(kBytes % 16 == 0, "store_bytes: 1, 2, 4, 8 or a multiple of 16 bytes");
    DSV4_FMT_UNROLL
    for (int k = 0; k < kBytes / 16; ++k) {
      Pack16 p;
      p.x = w[4 * k], p.y = w[4 * k + 1], p.z = w[4 * k + 2], p.w = w[4 * k + 3];
      reinterpret_cast<Pack16*>(dst)[k] = p;
    }
  }
}

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

// The pool's geometry, as the kernels use it.
struct Geometry {
  uint64_t page_size, total_slots;
  int64_t page_bytes, scale_offset;
  int page_shift;  // log2(page_size) for a power of two (SGLang's page sizes), else -1
};

// Byte offset of slot s's page and its row in it: a shift and a mask for a power-of-two page
// size (on an H200 the division was 8% of the v41_fp4 writer's instructions), else a 32-bit
// division while both fit.
__device__ __forceinline__ void page_and_row(uint64_t s, const Geometry& g, int64_t* page_base,
                                             int64_t* row) {
  uint64_t page, r;
  if (g.page_shift >= 0) {
    page = s >> g.page_shift;
    r = s & (g.page_size - 1);
  } else if ((s | g.page_size) >> 32) {
    page = s / g.page_size;
    r = s - page * g.page_size;
  } else {
    const uint32_t p32 = uint32_t(s) / uint32_t(g.page_size);
    page = p32;
    r = uint32_t(s) - p32 * uint32_t(g.page_size);
  }
  *page_base = int64_t(page) * g.page_bytes;
  *row = int64_t(r);
}

struct QuantizeArgs {
  const Pack16* src;
  int64_t src_stride;  // in packs of 8 values
  const int64_t* slots;
  int64_t n_rows;
  uint8_t* pool;
  Geometry g;
  int64_t* errors;
};

// The lane geometry of the writers: kV consecutive values of a row a lane. kLanesPerTile lanes
// share a tile (kV < tile), or one lane holds kTiles whole tiles.
template <int kLayout, int kV>
struct QuantizeLanes {
  static constexpr PageLayout P = page_layout(KvLayout(kLayout));
  static constexpr int kTile = P.tile_values;
  static constexpr int kL = kV < kTile ? kTile / kV : 1;      // lanes per tile
  static constexpr int kTiles = kV > kTile ? kV / kTile : 1;  // tiles per lane
  static constexpr int kTileValues = kV / kTiles;             // values of one tile in this lane
  static constexpr int kW = kV / 2;                           // words of two bf16 values
  static constexpr int kLanesPerRow = kTokenValues / kV;
  static_assert(kV % 8 == 0, "a lane moves whole 16-byte packs");
};

// The lane's values w of a row (zeros where the row is not written) encoded and stored at the
// row's slot. Every lane reaches the shuffles, whatever its row does, so the width-L groups are
// complete.
template <int kLayout, int kV, int kEnc>
__device__ __forceinline__ void quantize_row(const QuantizeArgs& a, int64_t slot, bool active,
                                             int lane, const uint32_t* w) {
  using Q = QuantizeLanes<kLayout, kV>;
  constexpr PageLayout P = Q::P;
  constexpr int kTile = Q::kTile, kL = Q::kL, kTiles = Q::kTiles, kTileValues = Q::kTileValues;
  if (slot >= 0 && !active && lane == 0) count_error(a.errors);

  // Tile maxima: v4 skips NaN (Triton's tl.max); v41 and v41_fp4 see it (above 0x7f80).
  constexpr bool kWithNaN = !(P.id == KvLayout::kV4 || P.id == KvLayout::kV4Fnuz);
  uint32_t mx[kTiles];
  DSV4_FMT_UNROLL
  for (int k = 0; k < kTiles; ++k) {
    if constexpr (P.fp4)
      mx[k] = tile_max<kL>(fp4_words_max<kEnc, kTileValues / 2>(w + k * kTileValues / 2));
    else
      mx[k] = tile_max<kL>(words_max<kWithNaN, kTileValues / 2>(w + k * kTileValues / 2));
  }
  if (!active) return;

  int64_t page_base, row;
  page_and_row(uint64_t(slot), a.g, &page_base, &row);
  uint8_t* data = a.pool + page_base + row * P.data_bytes;
  uint8_t* scales = a.pool + page_base + a.g.scale_offset + row * P.scale_bytes;
  const int v0 = lane * kV;
  const int tile0 = v0 / kTile;
  uint32_t sc_word = 0;  // the lane's scale bytes, tile k in byte k

  if constexpr (P.fp4) {
    uint32_t q[kV / 8];  // one e2m1 nibble per value, value 2i in the low nibble of byte i
    DSV4_FMT_UNROLL
    for (int k = 0; k < kTiles; ++k) {
      minifloat::Bf16Amax m{mx[k], mx[k] > kv::kInfBits};
      const uint8_t sc = fp4_tile_scale<kEnc>(m);
      sc_word |= uint32_t(sc) << (8 * k);
      fp4_encode<kEnc, kTileValues / 8>(w + k * kTileValues / 2, sc, q + k * kTileValues / 8);
    }
    store_bytes<kV / 2>(data + v0 / 2, q);
  } else if constexpr (P.id == KvLayout::kV41) {
    uint32_t q[kV / 4];  // one e4m3 byte per value
    DSV4_FMT_UNROLL
    for (int k = 0; k < kTiles; ++k) {
      minifloat::Bf16Amax m{mx[k], mx[k] > kv::kInfBits};
      const kv::V41Tile tl = kv::v41_tile(m);
      sc_word |= uint32_t(tl.sc) << (8 * k);
      kv_device::v41_encode_words<kTileValues / 4>(w + k * kTileValues / 2, tl,
                                                   q + k * kTileValues / 4);
    }
    store_bytes<kV>(data + v0, q);
  } else {
    if (v0 >= P.quant_values) {  // the raw bf16 tail: stored as read
      store_bytes<2 * kV>(data + P.quant_values + 2 * (v0 - P.quant_values), w);
      return;
    }
    uint32_t q[kV / 4];
    DSV4_FMT_UNROLL
    for (int k = 0; k < kTiles; ++k) {
      minifloat::Bf16Amax m{mx[k], false};
      const kv::V4Tile tl = kv::v4_tile(m, P.fp8);
      sc_word |= uint32_t(tl.sc) << (8 * k);
      kv_device::v4_encode_words<kTileValues / 4>(w + k * kTileValues / 2, tl,
                                                  q + k * kTileValues / 4);
    }
    store_bytes<kV>(data + v0, q);
  }
  if (lane % kL == 0) store_bytes<kTiles>(scales + tile0, &sc_word);
}

// Two rows a lane (kRows): rows 2 g and 2 g + 1 of lane group g, both rows' loads in flight
// before either is encoded. A lane reads its part of a row only when the row's slot is valid:
// reading every row (not waiting for the slot) moved 25% more DRAM bytes in the v41_fp4 writer
// on an H200 at the bench's slot mix, about 30% of them invalid. kEnc: the v41_fp4 encoder.
constexpr int kQuantizeRows = 2;
template <int kLayout, int kV, int kEnc>
__global__ void __launch_bounds__(kThreads) quantize_kernel(QuantizeArgs a) {
  using Q = QuantizeLanes<kLayout, kV>;
  constexpr int kW = Q::kW, kRows = kQuantizeRows;
  const int64_t gid = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t g = gid / Q::kLanesPerRow;
  const int lane = int(gid - g * Q::kLanesPerRow);
  int64_t slot[kRows];
  bool active[kRows];
  DSV4_FMT_UNROLL
  for (int r = 0; r < kRows; ++r) {
    const int64_t t = g * kRows + r;
    slot[r] = t < a.n_rows ? a.slots[t] : -1;
    active[r] = slot[r] >= 0 && uint64_t(slot[r]) < a.g.total_slots;
  }
  uint32_t w[kRows][kW];
  DSV4_FMT_UNROLL
  for (int r = 0; r < kRows; ++r) {
    if (active[r]) {
      const Pack16* p = a.src + (g * kRows + r) * a.src_stride + int64_t(lane) * (kV / 8);
      DSV4_FMT_UNROLL
      for (int k = 0; k < kV / 8; ++k) {
        const Pack16 v = p[k];
        w[r][4 * k] = v.x, w[r][4 * k + 1] = v.y, w[r][4 * k + 2] = v.z, w[r][4 * k + 3] = v.w;
      }
    } else {
      DSV4_FMT_UNROLL
      for (int j = 0; j < kW; ++j) w[r][j] = 0;
    }
  }
  DSV4_FMT_UNROLL
  for (int r = 0; r < kRows; ++r)
    quantize_row<kLayout, kV, kEnc>(a, slot[r], active[r], lane, w[r]);
}

struct DequantizeArgs {
  const uint8_t* pool;
  Geometry g;
  const int64_t* slots;
  int64_t n_rows;
  void* out;
  int64_t out_stride;  // in values
  int64_t* errors;
};

// kV consecutive values per lane: 16 for bf16 output (32 bytes stored), 8 for fp32 (also 32
// bytes; fp32 takes the grouped kernel below by default); one scale per lane (kV <= every tile);
// no cross-lane work. The bytes of v4's raw tail and of the codes go through one buffer, so every
// layout issues its loads the same way (on an H200 this took v4 to bf16 from 36.4 to 32.8 us).
// kGroup (v41 to bf16): the lane's words through kv::v41_decode_words_bf16 (one scale check for
// the group; subnormal codes on the short path) instead of mxfp8::decode4_bf16 per word (whose
// short path leaves subnormal codes to the integer decode).
template <int kLayout, class Out, bool kGroup>
__global__ void __launch_bounds__(kThreads) dequantize_kernel(DequantizeArgs a) {
  constexpr PageLayout P = page_layout(KvLayout(kLayout));
  constexpr bool kF32 = sizeof(Out) == 4;
  constexpr int kV = dequant_values<Out>();
  constexpr int kLanes = kTokenValues / kV;
  constexpr int kOutWords = kV * int(sizeof(Out)) / 4;  // fp32 bits, or pairs of bf16
  constexpr int kCodeBytes = P.fp4 ? kV / 2 : kV;
  constexpr bool kHasTail = !P.fp4 && P.quant_values < kTokenValues;  // v4's raw bf16 values
  const int64_t gid = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t t = gid / kLanes;
  const int lane = int(gid - t * kLanes);
  if (t >= a.n_rows) return;
  const int v0 = lane * kV;
  const bool tail = kHasTail && v0 >= P.quant_values;
  const int64_t slot = a.slots[t];
  if (slot < 0) return;
  if (uint64_t(slot) >= a.g.total_slots) {
    if (lane == 0) count_error(a.errors);
    return;
  }
  int64_t page_base, row;
  page_and_row(uint64_t(slot), a.g, &page_base, &row);
  const uint8_t* data = a.pool + page_base + row * P.data_bytes;
  uint32_t codes[kV / 2];  // the codes (kCodeBytes), or the raw bf16 values of v4's tail
  uint8_t sc = 0;
  if (tail) {
    const uint8_t* p = data + P.quant_values + 2 * (v0 - P.quant_values);
    DSV4_FMT_UNROLL
    for (int k = 0; k < kV / 8; ++k) load_words<16>(p + 16 * k, codes + 4 * k);
  } else {
    sc = a.pool[page_base + a.g.scale_offset + row * P.scale_bytes + v0 / P.tile_values];
    load_words<kCodeBytes>(data + (P.fp4 ? v0 / 2 : v0), codes);
  }

  Out* out = static_cast<Out*>(a.out) + t * a.out_stride + v0;
  uint32_t w[kOutWords];
  if (tail) {
    DSV4_FMT_UNROLL
    for (int j = 0; j < kOutWords; ++j)
      w[j] = kF32 ? (j % 2 ? codes[j / 2] & 0xffff0000u : codes[j / 2] << 16) : codes[j];
  } else if constexpr (P.id == KvLayout::kV41 && !kF32 && kGroup) {
    kv_device::v41_decode_words_bf16<kV / 4>(codes, sc, w);
  } else if constexpr (P.id == KvLayout::kV41) {
    DSV4_FMT_UNROLL
    for (int k = 0; k < kV / 4; ++k) {
      if constexpr (kF32)
        kv_device::v41_decode4_bits(codes[k], sc, w + 4 * k);
      else
        mxfp8::decode4_bf16(codes[k], sc, w + 2 * k);
    }
  } else if constexpr (!P.fp4) {
    DSV4_FMT_UNROLL
    for (int k = 0; k < kV / 4; ++k) {
      if constexpr (kF32)
        kv_device::v4_decode4_bits(codes[k], sc, P.fp8, w + 4 * k);
      else
        kv_device::v4_decode4_bf16(codes[k], sc, P.fp8, w + 2 * k);
    }
  } else if constexpr (!kF32) {
    kv_device::fp4_decode_words_bf16<kV / 8>(codes, sc, w);
  } else {
    const nvfp4::Decoder d = nvfp4::decoder(sc);
    DSV4_FMT_UNROLL
    for (int i = 0; i < kV; ++i)
      w[i] = d.nan ? kv::kNaN32
                   : nvfp4::decode_bits_number(uint8_t((codes[i / 8] >> (4 * (i % 8))) & 0xfu), d);
  }
  store_bytes<int(sizeof(Out)) * kV>(reinterpret_cast<uint8_t*>(out), w);
}

// fp32 output in groups of 4 values: lane l of a 32-lane chunk of a row (128 kG values) takes the
// groups at 4l + 128g (g < kG), so each 16-byte store of a warp covers 512 contiguous bytes (whole
// lines) and each code load of a warp is contiguous too. Every load of the lane is issued before
// the first decode; the stores are streaming (the output is not read again here). On an H200 at
// 65536 rows, kG = 4 took 46.8 / 43.5 / 48.5 us (v41 / v41_fp4 / v4) where 8 consecutive values
// per lane took 48.4 / 47.9 / 54.1 and kG = 2 48.1 / 48.5 / 50.4.
template <int kLayout, int kG>
__global__ void __launch_bounds__(kThreads) dequantize_f32_grouped_kernel(DequantizeArgs a) {
  constexpr PageLayout P = page_layout(KvLayout(kLayout));
  constexpr int kChunk = 128 * kG;
  constexpr int kLanes = kTokenValues / kChunk * 32;
  constexpr bool kTail = !P.fp4 && P.quant_values < kTokenValues;  // v4's raw bf16 tail
  const int64_t gid = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t t = gid / kLanes;
  const int lane = int(gid - t * kLanes);
  if (t >= a.n_rows) return;
  const int64_t slot = a.slots[t];
  if (slot < 0) return;
  if (uint64_t(slot) >= a.g.total_slots) {
    if (lane == 0) count_error(a.errors);
    return;
  }
  int64_t page_base, row;
  page_and_row(uint64_t(slot), a.g, &page_base, &row);
  const uint8_t* data = a.pool + page_base + row * P.data_bytes;
  const uint8_t* scales = a.pool + page_base + a.g.scale_offset + row * P.scale_bytes;
  float* out = static_cast<float*>(a.out) + t * a.out_stride;
  const int v0 = (lane / 32) * kChunk + 4 * (lane % 32);

  uint32_t c[kG], c2[kG];  // codes (fp8: 4 bytes, fp4: 2 bytes), or 4 raw bf16 values in c, c2
  uint8_t sc[kG];
  DSV4_FMT_UNROLL
  for (int g = 0; g < kG; ++g) {
    const int v = v0 + 128 * g;
    c2[g] = 0;
    if (kTail && v >= P.quant_values) {
      const Pack8 r =
          *reinterpret_cast<const Pack8*>(data + P.quant_values + 2 * (v - P.quant_values));
      c[g] = r.x, c2[g] = r.y, sc[g] = 0;
    } else if constexpr (P.fp4) {
      c[g] = *reinterpret_cast<const uint16_t*>(data + v / 2);
      sc[g] = scales[v / P.tile_values];
    } else {
      c[g] = *reinterpret_cast<const uint32_t*>(data + v);
      sc[g] = scales[v / P.tile_values];
    }
  }
  DSV4_FMT_UNROLL
  for (int g = 0; g < kG; ++g) {
    const int v = v0 + 128 * g;
    uint32_t w[4];
    if (kTail && v >= P.quant_values) {
      w[0] = c[g] << 16, w[1] = c[g] & 0xffff0000u, w[2] = c2[g] << 16;
      w[3] = c2[g] & 0xffff0000u;
    } else if constexpr (P.id == KvLayout::kV41) {
      kv_device::v41_decode4_bits(c[g], sc[g], w);
    } else if constexpr (P.fp4) {
      const nvfp4::Decoder d = nvfp4::decoder(sc[g]);
      DSV4_FMT_UNROLL
      for (int i = 0; i < 4; ++i)
        w[i] = d.nan ? kv::kNaN32 : nvfp4::decode_bits_number(uint8_t((c[g] >> (4 * i)) & 0xfu), d);
    } else {
      kv_device::v4_decode4_bits(c[g], sc[g], P.fp8, w);
    }
    gpu::store16_streaming(out + v, w[0], w[1], w[2], w[3]);
  }
}

// ---- host side ----------------------------------------------------------------------------

[[noreturn]] void bad(const char* fn, const std::string& what) {
  throw std::invalid_argument(std::string("compact_pages::") + fn + ": " + what);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

void check_layout(const char* fn, KvLayout l) {
  if (!kv_layout_valid(int(l)))
    bad(fn, "layout=" + std::to_string(int(l)) +
                " is not one of v41 (0), v41_fp4 (1), v4 (2), v4_fnuz (3)");
}

// Checks what both directions share; returns the geometry.
Geometry check_pool(const char* fn, KvLayout l, int64_t page_size, int64_t num_pages,
                    int64_t n_rows) {
  if (n_rows < 0 || n_rows > INT32_MAX)
    bad(fn, "n_rows=" + std::to_string(n_rows) + " must be in [0, 2^31)");
  if (page_size < 1 || page_size > (int64_t(1) << 32))
    bad(fn, "page_size=" + std::to_string(page_size) + " must be in [1, 2^32]");
  const PageLayout L = page_layout(l);
  const int64_t pb = L.page_bytes(page_size);
  if (num_pages < 0 || (num_pages > 0 && pb > INT64_MAX / num_pages))
    bad(fn, "num_pages=" + std::to_string(num_pages) + " must be >= 0 and keep the pool below " +
                "2^63 bytes");
  int shift = -1;
  if ((page_size & (page_size - 1)) == 0)
    for (shift = 0; (int64_t(1) << shift) < page_size;) ++shift;
  return Geometry{uint64_t(page_size), uint64_t(num_pages) * uint64_t(page_size), pb,
                  L.scale_offset(page_size), shift};
}

int64_t check_stride(const char* fn, const char* name, int64_t stride) {
  if (stride == 0) stride = kTokenValues;
  if (stride < kTokenValues || stride % 8 != 0)
    bad(fn,
        std::string(name) + "=" + std::to_string(stride) + " must be 0 or a multiple of 8 >= 512");
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

dim3 grid_for(int64_t n_rows, int lanes_per_row, int rows_per_lane = 1) {
  const size_t groups = (size_t(n_rows) + size_t(rows_per_lane) - 1) / size_t(rows_per_lane);
  return dim3(gpu::ceil_div(groups * size_t(lanes_per_row), kThreads));
}

template <int kLayout, int kV>
void launch_quantize(int variant, const QuantizeArgs& a, hipStream_t s) {
  const dim3 grid = grid_for(a.n_rows, kTokenValues / kV, kQuantizeRows);
  if constexpr (kLayout == int(KvLayout::kV41Fp4))
    if (variant == 1)
      return gpu::launch(quantize_kernel<kLayout, kV, 1>, grid, dim3(kThreads), 0, s, a);
  gpu::launch(quantize_kernel<kLayout, kV, 0>, grid, dim3(kThreads), 0, s, a);
}

template <int kLayout>
void launch_quantize_v(int v, int variant, const QuantizeArgs& a, hipStream_t s) {
  if (v == 8) launch_quantize<kLayout, 8>(variant, a, s);
  if (v == 16) launch_quantize<kLayout, 16>(variant, a, s);
  if (v == 32) launch_quantize<kLayout, 32>(variant, a, s);
  if (v == 64) launch_quantize<kLayout, 64>(variant, a, s);
}

// One layout's dequantise launch in the chosen variant (see DequantOptions).
template <int kLayout, class Out>
void launch_dequantize(int variant, const DequantizeArgs& a, hipStream_t st) {
  const dim3 block(kThreads);
  if constexpr (sizeof(Out) == 4) {
    if (variant == 0) {
      const dim3 grid = grid_for(a.n_rows, kTokenValues / (4 * kF32Groups));
      return gpu::launch(dequantize_f32_grouped_kernel<kLayout, kF32Groups>, grid, block, 0, st, a);
    }
  }
  const dim3 grid = grid_for(a.n_rows, kTokenValues / dequant_values<Out>());
  if constexpr (sizeof(Out) == 2 && kLayout == int(KvLayout::kV41))
    if (variant == 0)
      return gpu::launch(dequantize_kernel<kLayout, Out, true>, grid, block, 0, st, a);
  gpu::launch(dequantize_kernel<kLayout, Out, false>, grid, block, 0, st, a);
}

template <class Out>
void dequantize_impl(KvLayout l, int64_t page_size, const uint8_t* pool, int64_t num_pages,
                     const int64_t* slots, int64_t n_rows, Out* out, int64_t out_stride,
                     int64_t* errors, gpu::Stream s, const DequantOptions& opt) {
  const char* fn = "dequantize";
  check_layout(fn, l);
  if (opt.variant < 0 || opt.variant >= kDequantVariants)
    bad(fn, "variant=" + std::to_string(opt.variant) + " is not in [0, " +
                std::to_string(kDequantVariants) + ")");
  const Geometry g = check_pool(fn, l, page_size, num_pages, n_rows);
  out_stride = check_stride(fn, "out_stride", out_stride);
  if (n_rows == 0) return;
  check_pointers(fn, "out", out, pool, slots, errors);
  const DequantizeArgs a{pool, g, slots, n_rows, out, out_stride, errors};
  const hipStream_t st = static_cast<hipStream_t>(s);
  switch (l) {
    case KvLayout::kV41:
      launch_dequantize<int(KvLayout::kV41), Out>(opt.variant, a, st);
      break;
    case KvLayout::kV41Fp4:
      launch_dequantize<int(KvLayout::kV41Fp4), Out>(opt.variant, a, st);
      break;
    case KvLayout::kV4:
      launch_dequantize<int(KvLayout::kV4), Out>(opt.variant, a, st);
      break;
    case KvLayout::kV4Fnuz:
      launch_dequantize<int(KvLayout::kV4Fnuz), Out>(opt.variant, a, st);
      break;
  }
}

}  // namespace

bool values_per_lane_supported(KvLayout l, int v) {
  if (!kv_layout_valid(int(l))) return false;
  if (v == 0) return true;
  const int tile = page_layout(l).tile_values;
  return (v == 8 || v == 16 || v == 32 || v == 64) && v <= 4 * tile;
}

// The fastest measured on an H200 (bench/compact_pages.cpp prints each choice): 32 values per
// lane, 16 (one tile) for v41_fp4.
int default_values_per_lane(KvLayout l) { return l == KvLayout::kV41Fp4 ? 16 : 32; }

void quantize(KvLayout l, int64_t page_size, const bf16* src, int64_t src_stride,
              const int64_t* slots, int64_t n_rows, uint8_t* pool, int64_t num_pages,
              int64_t* errors, gpu::Stream s, const Options& opt) {
  const char* fn = "quantize";
  check_layout(fn, l);
  if (!values_per_lane_supported(l, opt.values_per_lane))
    bad(fn, "values_per_lane=" + std::to_string(opt.values_per_lane) +
                " is not 0, 8, 16, 32 or 64 (at most 4 tiles) for " + kv_layout_name(l));
  if (opt.variant < 0 || opt.variant >= kQuantVariants)
    bad(fn, "variant=" + std::to_string(opt.variant) + " is not in [0, " +
                std::to_string(kQuantVariants) + ")");
  const int variant = opt.variant;
  const int v = opt.values_per_lane ? opt.values_per_lane : default_values_per_lane(l);
  const Geometry g = check_pool(fn, l, page_size, num_pages, n_rows);
  src_stride = check_stride(fn, "src_stride", src_stride);
  if (n_rows == 0) return;
  check_pointers(fn, "src", src, pool, slots, errors);
  const QuantizeArgs a{
      reinterpret_cast<const Pack16*>(src), src_stride / 8, slots, n_rows, pool, g, errors};
  const hipStream_t st = static_cast<hipStream_t>(s);
  switch (l) {
    case KvLayout::kV41:
      launch_quantize_v<int(KvLayout::kV41)>(v, variant, a, st);
      break;
    case KvLayout::kV41Fp4:
      launch_quantize_v<int(KvLayout::kV41Fp4)>(v, variant, a, st);
      break;
    case KvLayout::kV4:
      launch_quantize_v<int(KvLayout::kV4)>(v, variant, a, st);
      break;
    case KvLayout::kV4Fnuz:
      launch_quantize_v<int(KvLayout::kV4Fnuz)>(v, variant, a, st);
      break;
  }
}

void dequantize(KvLayout l, int64_t page_size, const uint8_t* pool, int64_t num_pages,
                const int64_t* slots, int64_t n_rows, float* out, int64_t out_stride,
                int64_t* errors, gpu::Stream s, const DequantOptions& opt) {
  dequantize_impl(l, page_size, pool, num_pages, slots, n_rows, out, out_stride, errors, s, opt);
}

void dequantize(KvLayout l, int64_t page_size, const uint8_t* pool, int64_t num_pages,
                const int64_t* slots, int64_t n_rows, bf16* out, int64_t out_stride,
                int64_t* errors, gpu::Stream s, const DequantOptions& opt) {
  dequantize_impl(l, page_size, pool, num_pages, slots, n_rows, out, out_stride, errors, s, opt);
}

}  // namespace dsv4::kernels::compact_pages

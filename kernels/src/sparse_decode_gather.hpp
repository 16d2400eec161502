// sparse_decode's gather: the tile geometry, a tile's indices, its bytes read from SGLang's pages
// (every layout, through the shared readers of formats/kv_tiles.hpp, on NVIDIA the device paths of
// kv_codecs_device.hpp: bf16 multiplies for v41 and v41_fp4, the fp8 conversions for v4) and its
// keys decoded to bf16 in shared memory. Private to kernels/src/sparse_decode.hip.
#pragma once

#include <cstdint>

#include "dsv4/gpu/gpu.hpp"
#include "dsv4/gpu/mma.hpp"  // DSV4_MMA_NV: the key layout (key_col)
#include "dsv4/kernels/sparse_decode.hpp"
#include "dsv4/ref/formats/kv_tiles.hpp"
#include "kv_codecs_device.hpp"

namespace dsv4::kernels::sparse_decode {
namespace {

constexpr int kThreads = 256;
constexpr int kD = kTokenValues;
constexpr int kLd = kD + 8;  // bf16 per shared row of q and keys: 16 bytes of padding per row
#if DSV4_GPU_CUDA
constexpr int kTile = 32;  // key columns per tile
constexpr int kMaxGroups = 4;
#else  // AMD: 64 KB of LDS per block
constexpr int kTile = 16;
constexpr int kMaxGroups = 1;
#endif
constexpr int kItems = kTile * 16 / kThreads;  // 32-value pieces of a tile per thread

#if DSV4_GPU_NONE
struct alignas(16) U4 {
  uint32_t x, y, z, w;
};
#else
using U4 = uint4;
#endif

// The bytes of 32 consecutive values [32 part, +32) of one token, as loaded: v41 32 codes and
// their scale; v41_fp4 16 bytes of nibbles and two scales; v4 32 codes and their scale, or (parts
// 14, 15) the first 32 of its 64 bytes of raw bf16 (the rest is read when decoded).
struct Raw {
  U4 v[2];
  uint32_t sc;
};

// The tiles are only ever matrix operands (kv_device's readers' kOperand).
constexpr bool kOperand = true;

// Which layouts a kernel instance reads: every one (chosen per cache at run time) or one only, so
// that the common instances hold one reader's code (a smaller loop, in the instruction cache).
enum class Lay : int { kAny, kV41, kV41Fp4 };

// The layout of cache c in an instance for `A`.
template <Lay A>
__device__ __forceinline__ KvLayout layout_of(const Cache& c) {
  return A == Lay::kV41 ? KvLayout::kV41 : A == Lay::kV41Fp4 ? KvLayout::kV41Fp4 : c.layout;
}

// log2 of a power of two.
__device__ __forceinline__ int log2_pow2(uint32_t x) {
#if DSV4_GPU_CUDA
  return __ffs(int(x)) - 1;
#else
  return __builtin_ctz(x);
#endif
}

// The page of a slot and its row in it: a shift for a power-of-two page size (SGLang's), else a
// 32-bit division (check_cache keeps slots below 2^31).
__device__ __forceinline__ PageRow locate(const Cache& c, int64_t slot) {
  const uint32_t ps = uint32_t(c.page_size), s = uint32_t(slot);
  const uint32_t p = (ps & (ps - 1)) == 0 ? s >> log2_pow2(ps) : s / ps;
  return PageRow{int64_t(p), int64_t(s - p * ps)};
}

// Byte offset of a slot's data row in the pool.
__device__ __forceinline__ int64_t data_row(const PageLayout& L, const Cache& c, int64_t slot) {
  const PageRow r = locate(c, slot);
  return r.page * L.page_bytes(c.page_size) + r.row * L.data_bytes;
}

// v4's raw bf16 values [first, +16) of a slot (first >= 448).
__device__ __forceinline__ const U4* v4_raw(const Cache& c, int64_t slot, int first) {
  const PageLayout L = page_layout(c.layout);
  return reinterpret_cast<const U4*>(c.pool + data_row(L, c, slot) + L.quant_values +
                                     2 * (first - L.quant_values));
}

template <Lay A>
__device__ __forceinline__ void load_raw(const Cache& c, int64_t slot, int part, Raw& r) {
  const PageLayout L = page_layout(layout_of<A>(c));
  const PageRow pr = locate(c, slot);
  const int64_t page = pr.page * L.page_bytes(c.page_size);
  const uint8_t* data = c.pool + page + pr.row * L.data_bytes;
  const uint8_t* scale = c.pool + page + L.scale_offset(c.page_size) + pr.row * L.scale_bytes;
  if (L.fp4) {
    r.v[0] = *reinterpret_cast<const U4*>(data + 16 * part);
    r.sc = scale[2 * part] | uint32_t(scale[2 * part + 1]) << 8;
    return;
  }
  const int first = 32 * part;
  if (first >= L.quant_values) {  // v4: the raw bf16 RoPE part
    const U4* raw = v4_raw(c, slot, first);
    r.v[0] = raw[0], r.v[1] = raw[1];
    return;
  }
  r.v[0] = reinterpret_cast<const U4*>(data + first)[0];
  r.v[1] = reinterpret_cast<const U4*>(data + first)[1];
  r.sc = scale[first / L.tile_values];
}

__device__ __forceinline__ uint32_t word(const U4* v, int i) {
  const U4& u = v[i / 4];
  return i % 4 == 0 ? u.x : i % 4 == 1 ? u.y : i % 4 == 2 ? u.z : u.w;
}

// The 32 values of a Raw of slot `slot` of cache c as 16 words of bf16 pairs (value 2i in the low
// half of w[i]), for the products (kv_device's readers as operands: a NaN's payload is any).
template <Lay A>
__device__ __forceinline__ void decode_raw(const Cache& c, int64_t slot, int part, const Raw& r,
                                           uint32_t* w) {
  const KvLayout layout = layout_of<A>(c);
  const PageLayout L = page_layout(layout);
  if (L.fp4) {
    DSV4_UNROLL
    for (int h = 0; h < 2; ++h) {
      const uint32_t nibbles[2] = {word(r.v, 2 * h), word(r.v, 2 * h + 1)};
      kv_device::fp4_decode_words_bf16<2, kOperand>(nibbles, uint8_t(r.sc >> (8 * h)), w + 8 * h);
    }
    return;
  }
  if (32 * part >= L.quant_values) {
    const U4* rest = v4_raw(c, slot, 32 * part + 16);
    U4 tail[2] = {rest[0], rest[1]};
    DSV4_UNROLL
    for (int i = 0; i < 8; ++i) w[i] = word(r.v, i), w[8 + i] = word(tail, i);
    return;
  }
  const uint8_t sc = uint8_t(r.sc);
  if (layout == KvLayout::kV41) {  // one scale for the 32 values: one check, then the short path
    uint32_t codes[8];
    DSV4_UNROLL
    for (int i = 0; i < 8; ++i) codes[i] = word(r.v, i);
    kv_device::v41_decode_words_bf16<8, kOperand>(codes, sc, w);
    return;
  }
  DSV4_UNROLL
  for (int i = 0; i < 8; ++i) kv_device::v4_decode4_bf16(word(r.v, i), sc, L.fp8, w + 2 * i);
}

// The block's tiles: those of main's columns in [c0, c1), then those of extra's, each range cut
// at its query's valid length; window(lo, hi) keeps tiles [lo, hi) of them (as tiles 0, 1, ...).
struct Tiles {
  int64_t lo0, hi0, lo1, hi1, n0, n;
  __device__ __forceinline__ Tiles(const Args& a, int64_t b, int64_t c0, int64_t c1) {
    range(a.main, b, 0, c0, c1, lo0, hi0);
    lo1 = hi1 = 0;
    if (a.extra.pool) range(a.extra, b, a.main.K, c0, c1, lo1, hi1);
    n0 = (hi0 - lo0 + kTile - 1) / kTile;
    n = n0 + (hi1 - lo1 + kTile - 1) / kTile;
  }
  // Tiles [lo, hi) (0 <= lo <= hi <= n) renumbered from 0: each range starts lo tiles later.
  __device__ __forceinline__ void window(int64_t lo, int64_t hi) {
    const int64_t lo_main = lo < n0 ? lo : n0;
    lo0 += lo_main * kTile;
    lo1 += (lo - lo_main) * kTile;
    n0 -= lo_main;
    n = hi - lo;
    if (lo0 > hi0) lo0 = hi0;
    if (lo1 > hi1) lo1 = hi1;
  }
  // Columns [lo, hi) of cache c (which starts at column `start`) in [c0, c1), below its length.
  __device__ __forceinline__ static void range(const Cache& c, int64_t b, int64_t start, int64_t c0,
                                               int64_t c1, int64_t& lo, int64_t& hi) {
    int64_t len = c.lengths[b];
    len = len < 0 ? 0 : (len > c.K ? c.K : len);
    lo = c0 > start ? c0 : start;
    hi = c1 < start + len ? c1 : start + len;
    if (hi < lo) hi = lo;
  }
  __device__ __forceinline__ int seg(int64_t t) const { return t < n0 ? 0 : 1; }
  __device__ __forceinline__ int64_t first(int64_t t) const {
    return t < n0 ? lo0 + t * kTile : lo1 + (t - n0) * kTile;
  }
  __device__ __forceinline__ int64_t end(int64_t t) const { return t < n0 ? hi0 : hi1; }
};

// Which piece (key row j of the tile, 32-value part) piece i of thread tid is (i < kItems).
// Row-major: item tid + kThreads i, 16 consecutive threads reading one key's 16 parts. kByPart
// (the Hopper instances): a thread's two pieces are one key's 64-value column block, parts 2 cb
// and 2 cb + 1, and the 8 lanes of a quarter-warp take one column block of 8 consecutive keys, so
// a thread finds one slot and one page per tile (not two), and the lanes' 16-byte stores into
// the 128-byte swizzle (key_sw128) hit 8 distinct bank groups; a warp reads 256 contiguous bytes
// of each of 8 keys.
struct Piece {
  int j, part;
};
template <bool kByPart>
__device__ __forceinline__ Piece piece_of(int tid, int i) {
  static_assert(!kByPart || (kItems == 2 && kThreads == 256),
                "a thread's pieces: one column block");
  if constexpr (kByPart) {
    return Piece{(tid & 7) + 8 * ((tid >> 6) & 3), 2 * ((tid >> 3) & 7) + i};
  } else {
    const int item = tid + kThreads * i;
    return Piece{item / 16, item % 16};
  }
}

// Gather step 0: the index of each of this thread's pieces of tile t (the cache's entry; -1 for a
// column past the range).
template <bool kByPart = false>
__device__ __forceinline__ void load_indices(const Args& a, const Tiles& T, int64_t t, int64_t b,
                                             int tid, int32_t* idx) {
  const int s = T.seg(t);
  const Cache& c = s == 0 ? a.main : a.extra;
  const int64_t start = s == 0 ? 0 : a.main.K;
  const int64_t t0 = T.first(t), end = T.end(t);
  DSV4_UNROLL
  for (int i = 0; i < kItems; ++i) {
    if (kByPart && i > 0) {  // the same key as piece 0
      idx[i] = idx[0];
      continue;
    }
    const int64_t col = t0 + piece_of<kByPart>(tid, i).j;
    idx[i] = col < end ? c.indices[b * c.K + (col - start)] : -1;
  }
}

// Gather step 1: the slot of each piece of tile t from its index (-1: no key; an error column
// adds one to `errors`, in the thread holding its first piece) and its bytes.
template <Lay A, bool kByPart = false>
__device__ __forceinline__ void load_tile(const Args& a, const Tiles& T, int64_t t, int tid,
                                          const int32_t* idx, int32_t* slot, Raw* raw,
                                          unsigned& errors) {
  const Cache& c = T.seg(t) == 0 ? a.main : a.extra;
  const int64_t capacity = c.num_pages * c.page_size;
  DSV4_UNROLL
  for (int i = 0; i < kItems; ++i) {
    const int part = piece_of<kByPart>(tid, i).part;
    if (kByPart && i > 0) {  // the key's other part: the same slot, page and row
      slot[i] = slot[0];
    } else {
      slot[i] = idx[i] >= 0 && idx[i] < capacity ? idx[i] : -1;
      if (slot[i] < 0 && idx[i] != -1 && part == 0) ++errors;
    }
    if constexpr (kByPart) raw[i] = Raw{};  // no key: zero codes, which decode to +0
    if (slot[i] >= 0) load_raw<A>(c, slot[i], part, raw[i]);
  }
}

// Where a key row stores its values [c, c + 8): on NVIDIA the 16-byte chunks of each 32-value
// piece are XOR-permuted by bits 1-2 of the piece (bits 6-7 of c into bits 3-4), so the 8 lanes
// of a quarter-warp that store 16 bytes each at a 64-byte stride (one piece each) hit distinct
// banks; an ldmatrix reads one chunk position of 8 rows, conflict-free as before.
__device__ __forceinline__ int key_col(int c) {
#if DSV4_MMA_NV
  return c ^ (((c >> 6) & 3) << 3);
#else
  return c;
#endif
}

// Byte offset of a key row's values [c, c + 8) in a key buffer of the 128-byte swizzle (the
// Hopper instances' operand layout, dsv4/gpu/wgmma.hpp): 64-value column blocks of kTile rows
// of 128 bytes, their 16-byte units XOR-permuted by the row's bits 0-2.
__device__ __forceinline__ uint32_t key_sw128(int j, int c) {
  return uint32_t(c >> 6) * (kTile * 128u) + uint32_t(j) * 128u +
         (uint32_t(((c >> 3) & 7) ^ (j & 7)) << 4);
}

// Gather step 2: the pieces decoded into a key buffer (zeros where there is no key, chunks at
// key_col, or with kSw128 at key_sw128) and the tile's valid flags. kByPart decodes every piece,
// a missing key's from the zero Raw that load_tile left (no select per word).
template <Lay A, bool kSw128 = false, bool kByPart = false>
__device__ __forceinline__ void store_tile(const Args& a, const Tiles& T, int64_t t, int tid,
                                           const int32_t* slot, const Raw* raw, bf16* keys,
                                           int* valid) {
  static_assert(!kByPart || A != Lay::kAny, "a zero Raw decodes to +0 in v41 and v41_fp4 only");
  const Cache& c = T.seg(t) == 0 ? a.main : a.extra;
  DSV4_UNROLL
  for (int i = 0; i < kItems; ++i) {
    const Piece pc = piece_of<kByPart>(tid, i);
    const int j = pc.j, part = pc.part;
    uint32_t w[16];
    if (kByPart || slot[i] >= 0) {  // kByPart: a missing key's Raw is zero (load_tile)
      decode_raw<A>(c, slot[i], part, raw[i], w);
    } else {
      DSV4_UNROLL
      for (int e = 0; e < 16; ++e) w[e] = 0u;
    }
    if constexpr (kSw128) {
      uint8_t* base = reinterpret_cast<uint8_t*>(keys);
      DSV4_UNROLL
      for (int e = 0; e < 4; ++e)
        *reinterpret_cast<U4*>(base + key_sw128(j, 32 * part + 8 * e)) =
            U4{w[4 * e], w[4 * e + 1], w[4 * e + 2], w[4 * e + 3]};
    } else {
      bf16* row = keys + j * kLd;
      DSV4_UNROLL
      for (int e = 0; e < 4; ++e)
        *reinterpret_cast<U4*>(row + key_col(32 * part + 8 * e)) =
            U4{w[4 * e], w[4 * e + 1], w[4 * e + 2], w[4 * e + 3]};
    }
    if (part == 0) valid[j] = slot[i] >= 0;
  }
}

}  // namespace
}  // namespace dsv4::kernels::sparse_decode

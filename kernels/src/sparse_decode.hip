// sparse_decode kernel: one block per (query, group of 16 heads, split). Tiles of 16 key columns:
// the block gathers and dequantises the tile's rows into shared memory (bf16, SGLang's reader
// rules through the shared codecs), each thread scores one (head, key) pair in fp32, the 16
// threads of a head keep the online softmax (base 2) by width-16 shuffles, and each thread
// accumulates 32 of its head's 512 output values.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "dsv4/gpu/gpu.hpp"
#include "dsv4/kernels/sparse_decode.hpp"
#include "dsv4/ref/formats/kv_tiles.hpp"
#include "dsv4/ref/fp32_math.hpp"

namespace dsv4::kernels::sparse_decode {
namespace {

constexpr int kThreads = 256;
constexpr int kTile = 16;   // key columns per tile
constexpr int kGroup = 16;  // heads per block
constexpr int kD = kTokenValues;
constexpr int kRow = kD + 8;  // bf16 per shared row: 16 bytes of padding spread the banks

#if DSV4_GPU_NONE
struct alignas(16) U4 {
  uint32_t x, y, z, w;
};
struct alignas(8) uint2 {
  uint32_t x, y;
};
#else
using U4 = uint4;
#endif

struct KArgs {
  Args a;
  int64_t S, C;  // splits, columns per split
  bf16* out;
  float* lse;  // unsplit: natural log [B, H]; split: base 2 [B, S, H]
  float* o;    // split partials, or null for the unsplit output
};

__device__ __forceinline__ void unpack(const U4& v, uint32_t* w) {
  w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
}

// Two decoded values (fp32 bits from the shared tile readers of formats/kv_tiles.hpp) rounded once
// to bf16, as SGLang reads them, packed with the first in the low half.
__device__ __forceinline__ uint32_t bf16_pair(uint32_t lo_bits, uint32_t hi_bits) {
  return uint32_t(f32_to_bf16(f32_from_bits(lo_bits)).bits) |
         (uint32_t(f32_to_bf16(f32_from_bits(hi_bits)).bits) << 16);
}

// Values [32 part + 16 half, +16) of a token as 8 words of bf16 pairs (half a part at a time keeps
// the decode's registers low on every target).
__device__ __forceinline__ void load_half(const Cache& c, int64_t slot, int part, int half,
                                          uint32_t* w) {
  const PageLayout L = page_layout(c.layout);
  const uint8_t* data = c.pool + L.data_row_offset(slot, c.page_size);
  const uint8_t* scale = c.pool + L.scale_row_offset(slot, c.page_size);
  const int first = 32 * part + 16 * half;  // first value
  if (L.fp4) {
    const uint2 v = *reinterpret_cast<const uint2*>(data + first / 2);
    const uint8_t sc = scale[first / 16];
    DSV4_UNROLL
    for (int i = 0; i < 8; ++i) {
      const uint32_t byte = ((i < 4 ? v.x : v.y) >> (8 * (i % 4))) & 0xffu;
      w[i] = bf16_pair(kv::fp4_decode_bits(uint8_t(byte & 0xfu), sc),
                       kv::fp4_decode_bits(uint8_t(byte >> 4), sc));
    }
    return;
  }
  if (first >= L.quant_values) {  // v4: the raw bf16 RoPE part
    const U4* raw =
        reinterpret_cast<const U4*>(data + L.quant_values + 2 * (first - L.quant_values));
    unpack(raw[0], w);
    unpack(raw[1], w + 4);
    return;
  }
  uint32_t codes[4];
  unpack(*reinterpret_cast<const U4*>(data + first), codes);
  const uint8_t sc = scale[first / L.tile_values];
  const bool v41 = c.layout == KvLayout::kV41;
  DSV4_UNROLL
  for (int i = 0; i < 8; ++i) {
    const uint8_t c0 = uint8_t(codes[i / 2] >> (16 * (i % 2)));
    const uint8_t c1 = uint8_t(codes[i / 2] >> (16 * (i % 2) + 8));
    w[i] = v41 ? bf16_pair(kv::v41_decode_bits(c0, sc), kv::v41_decode_bits(c1, sc))
               : bf16_pair(kv::v4_decode_bits(c0, sc, L.fp8), kv::v4_decode_bits(c1, sc, L.fp8));
  }
}

__device__ __forceinline__ float lo_f(uint32_t w) { return f32_from_bits(w << 16); }
__device__ __forceinline__ float hi_f(uint32_t w) { return f32_from_bits(w & 0xffff0000u); }

__global__ void __launch_bounds__(kThreads) decode_kernel(KArgs k) {
  const Args& a = k.a;
  __shared__ U4 sq[kGroup][kRow / 8];
  __shared__ U4 sk[kTile][kRow / 8];
  __shared__ float sp[kGroup][kTile + 1];
  __shared__ int svalid[kTile];

  const int tid = threadIdx.x;
  const int64_t b = blockIdx.x;
  const int hg = blockIdx.y;
  const int64_t split = blockIdx.z;
  const int hl = tid / 16, lane16 = tid % 16;  // head of this thread; key (phase A) or dims
  const int64_t h = int64_t(hg) * kGroup + hl;

  // q of the group: thread t moves 32 values of head t / 16.
  {
    const U4* src = reinterpret_cast<const U4*>(a.q + (b * a.H + h) * kD) + lane16 * 4;
    DSV4_UNROLL
    for (int i = 0; i < 4; ++i) sq[hl][lane16 * 4 + i] = src[i];
  }
  const float scale2 = a.sm_scale * f32m::kLog2e;
  float m = -f32m::inf(), l = 0.0f;
  float acc[32];
  DSV4_UNROLL
  for (int i = 0; i < 32; ++i) acc[i] = 0.0f;

  const int64_t total = a.main.K + (a.extra.pool ? a.extra.K : 0);
  const int64_t c0 = split * k.C, c1 = c0 + k.C < total ? c0 + k.C : total;
  for (int seg = 0; seg < 2; ++seg) {
    const Cache& c = seg == 0 ? a.main : a.extra;
    if (seg == 1 && !a.extra.pool) break;
    const int64_t start = seg == 0 ? 0 : a.main.K;
    int64_t len = c.lengths[b];
    len = len < 0 ? 0 : (len > c.K ? c.K : len);
    const int64_t lo = c0 > start ? c0 : start;
    const int64_t hi = c1 < start + len ? c1 : start + len;
    const int64_t capacity = c.num_pages * c.page_size;
    for (int64_t t0 = lo; t0 < hi; t0 += kTile) {
      // Gather: thread t dequantises values [32 part, +32) of key j = t / 16.
      {
        const int j = tid / 16, part = tid % 16;
        const int64_t col = t0 + j;
        int64_t slot = -1;
        if (col < hi) {
          const int32_t idx = c.indices[b * c.K + (col - start)];
          if (idx >= 0 && idx < capacity)
            slot = idx;
          else if (idx != -1 && hg == 0 && part == 0)
            atomicAdd(reinterpret_cast<unsigned long long*>(a.errors), 1ull);
        }
#pragma unroll 1
        for (int half = 0; half < 2; ++half) {
          uint32_t w[8];
          if (slot >= 0) {
            load_half(c, slot, part, half, w);
          } else {
            DSV4_UNROLL
            for (int i = 0; i < 8; ++i) w[i] = 0u;
          }
          sk[j][part * 4 + 2 * half] = U4{w[0], w[1], w[2], w[3]};
          sk[j][part * 4 + 2 * half + 1] = U4{w[4], w[5], w[6], w[7]};
        }
        if (part == 0) svalid[j] = slot >= 0;
      }
      __syncthreads();
      // Scores: thread (hl, j = lane16).
      float x;
      {
        const int j = lane16;
        float dot = 0.0f;
        for (int i = 0; i < kD / 8; ++i) {
          const U4 qv = sq[hl][i], kv = sk[j][i];
          dot = fmaf(lo_f(qv.x), lo_f(kv.x), dot);
          dot = fmaf(hi_f(qv.x), hi_f(kv.x), dot);
          dot = fmaf(lo_f(qv.y), lo_f(kv.y), dot);
          dot = fmaf(hi_f(qv.y), hi_f(kv.y), dot);
          dot = fmaf(lo_f(qv.z), lo_f(kv.z), dot);
          dot = fmaf(hi_f(qv.z), hi_f(kv.z), dot);
          dot = fmaf(lo_f(qv.w), lo_f(kv.w), dot);
          dot = fmaf(hi_f(qv.w), hi_f(kv.w), dot);
        }
        x = svalid[j] ? dot * scale2 : -f32m::inf();
      }
      // Online softmax of head hl over its 16 lanes.
      float tmax = x;
      DSV4_UNROLL
      for (int off = 8; off > 0; off >>= 1) tmax = fmaxf(tmax, __shfl_xor(tmax, off, 16));
      const float m_new = fmaxf(m, tmax);
      float p = 0.0f, alpha = 1.0f;
      if (m_new != -f32m::inf()) {
        p = exp2f(x - m_new);
        alpha = exp2f(m - m_new);
      }
      float psum = p;
      DSV4_UNROLL
      for (int off = 8; off > 0; off >>= 1) psum = psum + __shfl_xor(psum, off, 16);
      l = l * alpha + psum;
      m = m_new;
      sp[hl][lane16] = p;
      __syncthreads();
      // Accumulate: thread (hl, lane16) owns values 128 i + 8 lane16 + e, i < 4, e < 8.
      DSV4_UNROLL
      for (int i = 0; i < 32; ++i) acc[i] = acc[i] * alpha;
      for (int j = 0; j < kTile; ++j) {
        const float pj = sp[hl][j];
        if (pj == 0.0f) continue;
        DSV4_UNROLL
        for (int i = 0; i < 4; ++i) {
          const U4 v = sk[j][16 * i + lane16];
          float* ac = acc + 8 * i;
          ac[0] = fmaf(pj, lo_f(v.x), ac[0]);
          ac[1] = fmaf(pj, hi_f(v.x), ac[1]);
          ac[2] = fmaf(pj, lo_f(v.y), ac[2]);
          ac[3] = fmaf(pj, hi_f(v.y), ac[3]);
          ac[4] = fmaf(pj, lo_f(v.z), ac[4]);
          ac[5] = fmaf(pj, hi_f(v.z), ac[5]);
          ac[6] = fmaf(pj, lo_f(v.w), ac[6]);
          ac[7] = fmaf(pj, hi_f(v.w), ac[7]);
        }
      }
      __syncthreads();
    }
  }

  if (k.o) {  // split partial
    const int64_t row = (b * k.S + split) * a.H + h;
    const bool empty = l == 0.0f;
    if (lane16 == 0) k.lse[row] = empty ? -f32m::inf() : log2f(l) + m;
    U4* o = reinterpret_cast<U4*>(k.o + row * kD);
    DSV4_UNROLL
    for (int i = 0; i < 4; ++i) {
      uint32_t v[8];
      DSV4_UNROLL
      for (int e = 0; e < 8; ++e) v[e] = f32_bits(empty ? 0.0f : acc[8 * i + e] / l);
      o[(128 * i + 8 * lane16) / 4] = U4{v[0], v[1], v[2], v[3]};
      o[(128 * i + 8 * lane16) / 4 + 1] = U4{v[4], v[5], v[6], v[7]};
    }
    return;
  }
  const int64_t row = b * a.H + h;
  const bool empty = l == 0.0f;
  if (lane16 == 0) k.lse[row] = empty ? f32m::inf() : (log2f(l) + m) / f32m::kLog2e;
  const float sink = a.sink ? a.sink[h] : -f32m::inf();
  const bool zero = empty || sink == f32m::inf();
  float f = 1.0f, den = l;
  if (!zero) {
    const float sk2 = sink * f32m::kLog2e;
    const float ms = fmaxf(m, sk2);
    f = exp2f(m - ms);
    den = l * f + exp2f(sk2 - ms);
  }
  U4* out = reinterpret_cast<U4*>(k.out + row * kD);
  DSV4_UNROLL
  for (int i = 0; i < 4; ++i) {
    uint32_t w[4];
    DSV4_UNROLL
    for (int e = 0; e < 4; ++e) {
      const float v0 = zero ? 0.0f : acc[8 * i + 2 * e] * f / den;
      const float v1 = zero ? 0.0f : acc[8 * i + 2 * e + 1] * f / den;
      w[e] = uint32_t(f32m::to_bf16_canonical(v0).bits) |
             (uint32_t(f32m::to_bf16_canonical(v1).bits) << 16);
    }
    out[(128 * i + 8 * lane16) / 8] = U4{w[0], w[1], w[2], w[3]};
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

void launch(const Args& a, int64_t S, bf16* out, float* lse, float* o, gpu::Stream s) {
  if (a.B < 0) bad("B=" + std::to_string(a.B) + " must be >= 0");
  if (a.H <= 0 || a.H % kGroup != 0)
    bad("H=" + std::to_string(a.H) + " must be a positive multiple of 16");
  if (a.B == 0) return;
  if (a.B > INT32_MAX) bad("B=" + std::to_string(a.B) + " must be < 2^31");
  if (!a.q || !a.errors || !lse || (!out && !o))
    bad(std::string(!a.q ? "q" : !a.errors ? "errors" : !lse ? "lse" : "out") + " is null");
  if (!aligned16(a.q)) bad("q is not 16-byte aligned");
  check_cache("main", a.main);
  if (a.extra.pool) {
    check_cache("extra", a.extra);
    const bool pair = a.extra.layout == a.main.layout ||
                      (a.main.layout == KvLayout::kV41 && a.extra.layout == KvLayout::kV41Fp4);
    if (!pair)
      bad(std::string("(main, extra) layouts (") + kv_layout_name(a.main.layout) + ", " +
          kv_layout_name(a.extra.layout) + ") are not a pair SGLang accepts");
  }
  const int64_t total = a.main.K + (a.extra.pool ? a.extra.K : 0);
  KArgs k{a, S, S > 0 ? (total + S - 1) / S : 0, out, lse, o};
  if (k.C == 0) k.C = 1;
  gpu::launch(decode_kernel, dim3(unsigned(a.B), unsigned(a.H / kGroup), unsigned(S)),
              dim3(kThreads), 0, static_cast<hipStream_t>(s), k);
}

}  // namespace

void decode(const Args& a, bf16* out, float* lse, gpu::Stream s) {
  if (!out) bad("out is null");
  if (!aligned16(out)) bad("out is not 16-byte aligned");
  launch(a, 1, out, lse, nullptr, s);
}

void decode_partials(const Args& a, int64_t S, float* o, float* lse, gpu::Stream s) {
  if (S < 1 || S > 65535) bad("S=" + std::to_string(S) + " must be in [1, 65535]");
  if (!o) bad("o is null");
  if (!aligned16(o)) bad("o is not 16-byte aligned");
  launch(a, S, nullptr, lse, o, s);
}

}  // namespace dsv4::kernels::sparse_decode

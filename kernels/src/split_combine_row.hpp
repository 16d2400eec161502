// split_combine's merge of one output row (b, h) from its splits' partials, in the reference's
// fp32 order: the body of split_combine's kernel and of sparse_decode's merge of its key-balanced
// schedule. Private to kernels/src (split_combine.hip, sparse_decode.hip).
#pragma once

#include <cstdint>

#include "dsv4/gpu/gpu.hpp"
#include "dsv4/kernels/split_combine.hpp"
#include "dsv4/ref/fp32_math.hpp"

namespace dsv4::kernels::split_combine {
namespace {

constexpr int kThreads = 128;
constexpr int kStagedSplits = 256;  // splits whose weights are staged in shared memory

#if DSV4_GPU_NONE
struct alignas(16) F4 {
  float x, y, z, w;
};
struct alignas(8) U2 {
  uint32_t x, y;
};
#else
using F4 = float4;
using U2 = uint2;
#endif

__device__ __forceinline__ uint32_t pack(bf16 lo, bf16 hi) {
  return uint32_t(lo.bits) | (uint32_t(hi.bits) << 16);
}

// Row (b, h) of a.out and a.out_lse merged from n splits whose partials are rows first, first + 1,
// ... of a.o [*, H, D] and a.lse [*, H] (split s of row (b, h) at row first + s), by the block's
// kThreads lanes (every lane calls it; a.S, a.n_splits are not read).
template <bool kStaged>
__device__ __forceinline__ void merge_row(const Args& a, int64_t b, int64_t h, int64_t first,
                                          int64_t n) {
  const int64_t row = b * a.H + h;
  const float* lse = a.lse + first * a.H + h;  // split s at lse[s * H]
  const int64_t d4 = a.D / 4;
  U2* out = reinterpret_cast<U2*>(a.out + row * a.D);

  // Staged: the split's lse, exp2(lse - m) and the merge weight exp2(lse - ms), lane l staging
  // splits l, l + kThreads, ... (two or more a lane past kThreads splits).
  __shared__ float st_lse[kStaged ? kStagedSplits : 1], st_e[kStaged ? kStagedSplits : 1],
      st_w[kStaged ? kStagedSplits : 1];
  float m = -f32m::inf();
  if constexpr (kStaged) {
    for (int64_t s = threadIdx.x; s < n; s += kThreads) st_lse[s] = lse[s * a.H];
    __syncthreads();
    for (int64_t s = 0; s < n; ++s) m = fmaxf(m, st_lse[s]);
  } else {
    for (int64_t s = 0; s < n; ++s) m = fmaxf(m, lse[s * a.H]);
  }
  bool rope = a.rope.cos_sin != nullptr;
  int64_t pos = 0;
  if (rope) {
    pos = a.rope.positions[b];
    if (pos < 0 || pos >= a.rope.n_pos) {
      rope = false;
      if (h == 0 && threadIdx.x == 0)
        atomicAdd(reinterpret_cast<unsigned long long*>(a.errors), 1ull);
    }
  }
  if (m == -f32m::inf()) {  // the same for every lane of the block
    if (threadIdx.x == 0) a.out_lse[row] = f32m::inf();
    for (int64_t c = threadIdx.x; c < d4; c += kThreads) out[c] = U2{0u, 0u};
    return;
  }
  float sum = 0.0f;
  if constexpr (kStaged) {
    for (int64_t s = threadIdx.x; s < n; s += kThreads) st_e[s] = f32m::exp2(st_lse[s] - m);
    __syncthreads();
    for (int64_t s = 0; s < n; ++s) sum = sum + st_e[s];
  } else {
    for (int64_t s = 0; s < n; ++s) sum = sum + f32m::exp2(lse[s * a.H] - m);
  }
  if (threadIdx.x == 0) a.out_lse[row] = (f32m::log2(sum) + m) / f32m::kLog2e;
  const float sink = a.sink ? a.sink[h] : -f32m::inf();
  if (sink == f32m::inf()) {
    for (int64_t c = threadIdx.x; c < d4; c += kThreads) out[c] = U2{0u, 0u};
    return;
  }
  const float sk = sink * f32m::kLog2e;
  const float ms = fmaxf(m, sk);
  float den = 0.0f;
  if constexpr (kStaged) {
    // ms == m (no sink above the splits): the weights are the exp2 already staged.
    const float* w = st_e;
    if (ms != m) {
      for (int64_t s = threadIdx.x; s < n; s += kThreads) st_w[s] = f32m::exp2(st_lse[s] - ms);
      __syncthreads();
      w = st_w;
    }
    for (int64_t s = 0; s < n; ++s) den = den + w[s];
  } else {
    for (int64_t s = 0; s < n; ++s) den = den + f32m::exp2(lse[s * a.H] - ms);
  }
  den = den + f32m::exp2(sk - ms);
  // The weight of split s, as the reference forms it.
  const float* staged_w = kStaged ? (ms != m ? st_w : st_e) : nullptr;
  auto alpha = [&](int64_t s) {
    if constexpr (kStaged)
      return staged_w[s];
    else
      return f32m::exp2(lse[s * a.H] - ms);
  };

  const F4* o = reinterpret_cast<const F4*>(a.o + (first * a.H + h) * a.D);
  const int64_t split_stride = a.H * d4;  // in F4
  const int64_t tail = a.D - a.rope.rope_dim;
  const float* cs = rope ? a.rope.cos_sin + pos * a.rope.rope_dim : nullptr;
  for (int64_t c = threadIdx.x; c < d4; c += kThreads) {
    float x = 0.0f, y = 0.0f, z = 0.0f, w = 0.0f;
    int64_t s = 0;
    // Four splits' loads in flight before their sums (the order of the sums is unchanged).
    for (; s + 4 <= n; s += 4) {
      F4 v[4];
      float al[4];
      DSV4_UNROLL
      for (int k = 0; k < 4; ++k) v[k] = o[(s + k) * split_stride + c];
      DSV4_UNROLL
      for (int k = 0; k < 4; ++k) al[k] = alpha(s + k);
      DSV4_UNROLL
      for (int k = 0; k < 4; ++k) {
        if (al[k] == 0.0f) continue;  // an empty split: its o is not used
        x = x + al[k] * v[k].x;
        y = y + al[k] * v[k].y;
        z = z + al[k] * v[k].z;
        w = w + al[k] * v[k].w;
      }
    }
    for (; s < n; ++s) {
      const F4 v = o[s * split_stride + c];
      const float al = alpha(s);
      if (al == 0.0f) continue;
      x = x + al * v.x;
      y = y + al * v.y;
      z = z + al * v.z;
      w = w + al * v.w;
    }
    bf16 r[4] = {f32m::to_bf16_canonical(x / den), f32m::to_bf16_canonical(y / den),
                 f32m::to_bf16_canonical(z / den), f32m::to_bf16_canonical(w / den)};
    const int64_t d = c * 4;
    if (rope && d + 4 > tail) {
      DSV4_UNROLL
      for (int k = 0; k < 4; k += 2) {
        if (d + k < tail) continue;  // tail is even: a pair is wholly in or out
        const float x0 = bf16_to_f32(r[k]), x1 = bf16_to_f32(r[k + 1]);
        const float cc = cs[d - tail + k], sn = cs[d - tail + k + 1];
        r[k] = f32m::to_bf16_canonical(fmaf(x0, cc, x1 * sn));
        r[k + 1] = f32m::to_bf16_canonical(fmaf(x1, cc, -(x0 * sn)));
      }
    }
    out[c] = U2{pack(r[0], r[1]), pack(r[2], r[3])};
  }
}

}  // namespace
}  // namespace dsv4::kernels::split_combine

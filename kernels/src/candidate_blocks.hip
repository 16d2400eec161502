// candidate_blocks kernel: one block per row; level one selects blocks by their maximum score
// (computed once into shared memory, or per radix pass for rows of very many blocks), level two
// selects keys among the kept blocks' candidates; both drop NaN selections and sort with the shared
// bitonic network.
#include "dsv4/kernels/candidate_blocks.hpp"

#include <stdexcept>
#include <string>

#include "dsv4/gpu/gpu.hpp"
#include "topk_select.hpp"

namespace dsv4::kernels::candidate_blocks {
namespace {

namespace ts = topk_select;
using ts::kThreads;

struct Params {
  const float* scores;
  int64_t stride;
  int32_t width;
  const int32_t* lens;
  int32_t bs, nb, K;
  int32_t* blocks_out;
  int32_t* keys_out;
};

__device__ __forceinline__ float block_max(const float* row, int32_t len, int32_t bs, int32_t j) {
  const int32_t end = (j + 1) * bs < len ? (j + 1) * bs : len;
  float m = -__int_as_float(0x7f800000);  // -inf
  for (int32_t i = j * bs; i < end; ++i) {
    const float v = row[i];
    if (v != v) return __int_as_float(0x7fc00000);  // NaN propagates, as +NaN
    m = v > m ? v : m;
  }
  return m;
}

// Block maxima cached in shared memory for rows of at most this many blocks (16 KiB).
constexpr int32_t kMaxCachedBlocks = 4096;

// Every block's block_max into bmax[0, n): a 32-lane group per block, lanes striding over its
// keys. Each lane keeps its first maximum (a strict > in index order) with its index, and the
// groups combine by value, then by the smaller index, so the result is the serial loop's bit for
// bit: among maxima that compare equal (-0 and +0) the first in key order wins; any NaN gives +NaN.
__device__ void cache_block_maxima(const float* row, int32_t len, int32_t bs, int32_t n,
                                   float* bmax) {
  const int lane = int(threadIdx.x) % 32, group = int(threadIdx.x) / 32;
  constexpr int kGroups = kThreads / 32;
  for (int32_t j = group; j < n; j += kGroups) {
    const int32_t end = (j + 1) * bs < len ? (j + 1) * bs : len;
    float m = -__int_as_float(0x7f800000);
    int32_t at = 0x7fffffff;
    int nan = 0;
    for (int32_t i = j * bs + lane; i < end; i += 32) {
      const float v = row[i];
      nan |= v != v;
      if (v > m) {
        m = v;
        at = i;
      }
    }
    DSV4_UNROLL
    for (int off = 16; off > 0; off >>= 1) {
      const float om = __shfl_xor(m, off, 32);
      const int32_t oat = __shfl_xor(at, off, 32);
      nan |= __shfl_xor(nan, off, 32);
      if (om > m || (om == m && oat < at)) {
        m = om;
        at = oat;
      }
    }
    if (lane == 0) bmax[j] = nan ? __int_as_float(0x7fc00000) : m;
  }
  __syncthreads();
}

// Replaces the selections whose score is NaN by the sort pad, pads the rest, sorts ascending.
template <int W, int R, class Score>
__device__ void drop_nan_and_sort(int32_t* sel, int32_t count, Score score) {
  for (int32_t j = int32_t(threadIdx.x); j < kThreads * R; j += kThreads) {
    if (j >= count) {
      sel[j] = ts::kSortPad;
    } else {
      const float v = score(sel[j]);
      if (v != v) sel[j] = ts::kSortPad;
    }
  }
  __syncthreads();
  ts::bitonic_sort<W, R>(sel);
}

template <int W, int R>
__global__ void __launch_bounds__(kThreads) select_kernel(Params p) {
  __shared__ ts::Smem sm;
  __shared__ int32_t blocks[kThreads * R];
  __shared__ int32_t keys[kThreads * R];
  __shared__ float bmax[kMaxCachedBlocks];
  const int64_t b = blockIdx.x;
  const int tid = int(threadIdx.x);
  const int32_t l = p.lens[b];
  const int32_t len = l < 0 ? 0 : (l > p.width ? p.width : l);
  const float* row = p.scores + b * p.stride;
  const int32_t n = (len + p.bs - 1) / p.bs;
  const int32_t newest = n - 1;

  // Level one: blocks by maximum score, the newest forced to +inf. The maxima are computed once
  // (cooperatively, into shared memory) where they fit, else per radix pass.
  const bool cached = n <= kMaxCachedBlocks;
  if (cached) cache_block_maxima(row, len, p.bs, n, bmax);
  auto bscore = [&](int32_t j) {
    return j == newest ? __int_as_float(0x7f800000)
                       : (cached ? bmax[j] : block_max(row, len, p.bs, j));
  };
  auto bkey = [&](int32_t j, uint64_t& u) {
    const uint32_t k = ts::order_key(bscore(j));
    u = ts::composite(k, j);
    return k > ts::kNegInfKey;
  };
  const uint64_t U1 = ts::radix_select(n, uint32_t(p.nb), bkey, sm);
  const int32_t c1 = ts::collect(n, U1, bkey, blocks, sm);
  drop_nan_and_sort<W, R>(blocks, c1, bscore);
  if (p.blocks_out)
    for (int32_t j = tid; j < p.nb; j += kThreads)
      p.blocks_out[b * p.nb + j] = blocks[j] == ts::kSortPad ? ts::kNone : blocks[j];

  // Level two: candidate c is key blocks[c / bs] * bs + c % bs of the kept blocks (ascending).
  int32_t kept = 0;  // kept blocks: the first entries below the pad
  while (kept < p.nb && blocks[kept] != ts::kSortPad) ++kept;
  const int32_t m = kept * p.bs;
  auto pos = [&](int32_t c) {
    const int32_t i = blocks[c / p.bs] * p.bs + c % p.bs;
    return i < len ? i : -1;
  };
  auto kkey = [&](int32_t c, uint64_t& u) {
    const int32_t i = pos(c);
    if (i < 0) return false;
    const uint32_t k = ts::order_key(row[i]);
    u = ts::composite(k, c);
    return k > ts::kNegInfKey;
  };
  const uint64_t U2 = ts::radix_select(m, uint32_t(p.K), kkey, sm);
  const int32_t c2 = ts::collect(m, U2, kkey, keys, sm);
  // keys holds candidate numbers; the ascending order of candidates is that of key indices.
  drop_nan_and_sort<W, R>(keys, c2, [&](int32_t c) { return row[pos(c)]; });
  for (int32_t j = tid; j < p.K; j += kThreads)
    p.keys_out[b * p.K + j] = keys[j] == ts::kSortPad ? ts::kNone : pos(keys[j]);
}

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("candidate_blocks: " + what);
}

}  // namespace

bool wave_supported(int W) { return ts::wave_supported(W); }

void select(const Args& a, gpu::Stream s) { select(a, ts::device_wave(), s); }

void select(const Args& a, int W, gpu::Stream s) {
  ts::check_wave("candidate_blocks", W);
  if (a.bs < 1 || a.bs > 0x7fffffff) bad("bs=" + std::to_string(a.bs) + " must be >= 1");
  if (a.nb < 1 || a.nb > ts::kMaxK) bad("nb=" + std::to_string(a.nb) + " must be in [1, 2048]");
  if (a.K < 1 || a.K > ts::kMaxK) bad("K=" + std::to_string(a.K) + " must be in [1, 2048]");
  if (a.nb * a.bs > 0x7fffffff)
    bad("nb*bs=" + std::to_string(a.nb * a.bs) + " candidates exceed 2^31-1");
  if (a.B < 0 || a.B > 0x7fffffff) bad("B=" + std::to_string(a.B) + " must be in [0, 2^31)");
  if (a.width < 0 || a.width > 0x7fffffff - a.bs)
    bad("width=" + std::to_string(a.width) + " must be in [0, 2^31 - bs)");
  if (a.stride < a.width)
    bad("stride=" + std::to_string(a.stride) + " must be >= width=" + std::to_string(a.width));
  if (a.B == 0) return;
  if (!a.keys_out || !a.lens || (!a.scores && a.width > 0))
    bad("null pointer: scores, lens and keys_out are required");
  const Params p{a.scores,      a.stride,     int32_t(a.width), a.lens,    int32_t(a.bs),
                 int32_t(a.nb), int32_t(a.K), a.blocks_out,     a.keys_out};
  ts::dispatch(W, a.nb > a.K ? a.nb : a.K, [&](auto w, auto r) {
    gpu::launch(select_kernel<decltype(w)::value, decltype(r)::value>, dim3{unsigned(a.B)},
                dim3{unsigned(kThreads)}, 0, static_cast<hipStream_t>(s), p);
  });
}

}  // namespace dsv4::kernels::candidate_blocks

// indexer_topk kernel: one block per row; radix select on SGLang's order key (ties to the smaller
// index), unordered collection, optional bitonic sort, then the page transform.
#include "dsv4/kernels/indexer_topk.hpp"

#include <stdexcept>
#include <string>

#include "dsv4/gpu/gpu.hpp"
#include "topk_select.hpp"

namespace dsv4::kernels::indexer_topk {
namespace {

namespace ts = topk_select;
using ts::kThreads;

struct Params {
  const float* scores;
  int64_t stride;
  int32_t width;
  const int32_t* lens;
  int32_t K;
  const int32_t* page_table;
  int64_t pt_stride;
  uint32_t page_bits;
  int32_t* out;
  int32_t* raw_out;
  bool sorted;
};

__device__ __forceinline__ void emit(const Params& p, int64_t b, int32_t j, int32_t raw) {
  const int64_t at = b * p.K + j;
  if (p.raw_out) p.raw_out[at] = raw;
  if (!p.page_table) {
    p.out[at] = raw;
    return;
  }
  int32_t v = ts::kNone;
  if (raw >= 0) {
    const uint32_t phys = uint32_t(p.page_table[b * p.pt_stride + (uint32_t(raw) >> p.page_bits)]);
    v = int32_t((phys << p.page_bits) | (uint32_t(raw) & ((1u << p.page_bits) - 1u)));
  }
  p.out[at] = v;
}

template <int W, int R>
__global__ void __launch_bounds__(kThreads) topk_kernel(Params p) {
  __shared__ ts::Smem sm;
  __shared__ int32_t sel[kThreads * R];
  const int64_t b = blockIdx.x;
  const int tid = int(threadIdx.x);
  const int32_t l = p.lens[b];
  const int32_t len = l < 0 ? 0 : (l > p.width ? p.width : l);
  if (len <= p.K) {  // SGLang's trivial path: 0..len-1, then -1; no score is read
    for (int32_t j = tid; j < p.K; j += kThreads) emit(p, b, j, j < len ? j : ts::kNone);
    return;
  }
  const float* row = p.scores + b * p.stride;
  auto key = [row](int32_t i, uint64_t& u) {
    const uint32_t k = ts::order_key(row[i]);
    u = ts::composite(k, i);
    return k > ts::kNegInfKey;
  };
  const uint64_t U = ts::radix_select(len, uint32_t(p.K), key, sm);
  const int32_t count = ts::collect(len, U, key, sel, sm);
  const int32_t pad = p.sorted ? ts::kSortPad : ts::kNone;
  for (int32_t j = count + tid; j < kThreads * R; j += kThreads) sel[j] = pad;
  __syncthreads();
  if (p.sorted) ts::bitonic_sort<W, R>(sel);
  for (int32_t j = tid; j < p.K; j += kThreads) {
    const int32_t raw = sel[j];
    emit(p, b, j, raw == ts::kSortPad ? ts::kNone : raw);
  }
}

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("indexer_topk: " + what);
}

}  // namespace

bool wave_supported(int W) { return ts::wave_supported(W); }

void topk(const Args& a, gpu::Stream s) { topk(a, ts::device_wave(), s); }

void topk(const Args& a, int W, gpu::Stream s) {
  ts::check_wave("indexer_topk", W);
  if (a.K < 1 || a.K > ts::kMaxK) bad("K=" + std::to_string(a.K) + " must be in [1, 2048]");
  if (a.B < 0 || a.B > 0x7fffffff) bad("B=" + std::to_string(a.B) + " must be in [0, 2^31)");
  if (a.width < 0 || a.width > 0x7fffffff)
    bad("width=" + std::to_string(a.width) + " must be in [0, 2^31)");
  if (a.stride < a.width)
    bad("stride=" + std::to_string(a.stride) + " must be >= width=" + std::to_string(a.width));
  if (a.page_bits < 0 || a.page_bits > 30)
    bad("page_bits=" + std::to_string(a.page_bits) + " must be in [0, 30]");
  if (a.B == 0) return;
  if (!a.out || !a.lens || (!a.scores && a.width > 0))
    bad("null pointer: scores, lens and out are required");
  if (a.page_table && a.pt_stride <= 0)
    bad("pt_stride=" + std::to_string(a.pt_stride) + " must be > 0 with a page table");
  // Every raw index is below width, so the page table must cover width keys: the kernel reads
  // page_table[b*pt_stride + (raw >> page_bits)] without a per-index bound.
  if (a.page_table && a.width > 0 && ((a.width - 1) >> a.page_bits) >= a.pt_stride)
    bad("pt_stride=" + std::to_string(a.pt_stride) + " pages of 2^" + std::to_string(a.page_bits) +
        " keys do not cover width=" + std::to_string(a.width));
  const Params p{a.scores,     a.stride,     int32_t(a.width), a.lens,
                 int32_t(a.K), a.page_table, a.pt_stride,      uint32_t(a.page_bits),
                 a.out,        a.raw_out,    a.sorted};
  ts::dispatch(W, a.K, [&](auto w, auto r) {
    gpu::launch(topk_kernel<decltype(w)::value, decltype(r)::value>, dim3{unsigned(a.B)},
                dim3{unsigned(kThreads)}, 0, static_cast<hipStream_t>(s), p);
  });
}

}  // namespace dsv4::kernels::indexer_topk

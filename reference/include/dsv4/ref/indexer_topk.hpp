// indexer_topk reference: the specification of the DSV4 indexer's per-row top-K of fp32 scores,
// with SGLang's page transform, raw indices and the optional sorted output, bitwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace dsv4::ref::indexer_topk {

// Semantics (SGLang: jit_kernel/csrc/deepseek_v4/topk_v1.cuh and topk_v2.cuh, topk.py).
// Row b has scores[b*stride + i] for i < width; its length len[b] is clamped to [0, width] (SGLang
// requires 0 <= len <= width; a negative length here selects nothing instead of crashing).
//   len <= K: raw = 0, 1, ..., len-1, then -1 (SGLang's trivial path: no score is read, so even a
//             -inf or NaN score is listed).
//   len >  K: the K keys with the largest order key (below) among the eligible keys i < len, where
//             a key is eligible when its order key is above that of -inf; fewer eligible keys than
//             K leave -1 in the remaining entries. Keys at or past len are never read.
// Order key: SGLang's radix key of the fp32 bits, u = bits ^ (sign ? 0xffffffff : 0x80000000), a
// total order on the bit patterns: -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN. So a NaN with
// the sign bit clear ranks above +inf (selected first), a NaN with the sign bit set ranks below
// -inf and, like -inf, is never selected; +0 ranks above -0.
// Ties (equal order keys, i.e. equal bits) at the cut-off: the smaller key index wins. SGLang
// leaves the choice to its atomics; this project fixes it so that the selected set, and with it
// the sorted output, is deterministic and bitwise comparable.
// Unsorted output: the selected keys in an unspecified order, -1 entries last. Sorted output:
// ascending raw index, -1 last.
// Page transform (optional): out = (pt[b*pt_stride + (raw >> bits)] << bits) | (raw & (2^bits-1))
// in 32-bit two's complement, -1 stays -1; the raw indices are returned alongside, aligned (the -1s
// on the same entries).

// Selection conventions (a case layout's in.select).
//   kDsv4 (0): the rule above, the project's kernel: with len > K only eligible keys are selected
//     (never -inf, never a NaN with the sign bit set), fewer than K leave -1 last.
//   kSglang (1): SGLang's kernels (topk_v1.cuh / topk_v2.cuh radix select): with len > K exactly K
//     keys by the order key among all keys i < len, so -inf keys are eligible and -NaN keys (the
//     lowest key) come last; ties to the smaller index here (SGLang's atomics pick any).
//   kSglangMasked (2): kSglang followed by SGLang's mask_topk_scores: every selected entry whose
//     score is not > -inf (-inf, and NaN of either sign, as torch compares) becomes -1 in place,
//     so -1 entries may stand anywhere in the row.
// The trivial path (len <= K) is the same in all three, except that kSglangMasked masks it too.
enum class Select { kDsv4 = 0, kSglang = 1, kSglangMasked = 2 };
bool select_valid(int v);
const char* select_name(Select s);  // "dsv4", "sglang", "sglang_masked"

// SGLang's radix key.
uint32_t order_key(float score);
// order_key(score) > order_key(-inf): not -inf, not a NaN with the sign bit set.
bool eligible(float score);

struct Rows {
  size_t B = 0;       // rows
  size_t width = 0;   // valid columns per row (lengths clamp to it)
  size_t stride = 0;  // score row stride, >= width
  size_t K = 0;       // outputs per row, 1..2048
};

// raw[b*K + j]: the selected key indices of every row, sorted ascending when `sorted`, else in
// descending order key (the reference's own order; kernels may use any order when unsorted).
// Throws std::invalid_argument naming the field on bad sizes.
void topk(std::span<const float> scores, std::span<const int32_t> lens, const Rows& r, bool sorted,
          std::span<int32_t> raw, Select sel = Select::kDsv4);

// SGLang's mask_topk_scores on raw indices [B, K]: an entry whose score is not > -inf becomes -1
// (in place; entries outside [0, width) too).
void mask_topk_scores(std::span<const float> scores, const Rows& r, std::span<int32_t> raw);

// The page transform of raw indices [B*K] with a page table [B, pt_stride] and page size
// 2^page_bits (page_bits in [0, 30]).
void page_transform(std::span<const int32_t> raw, size_t K, std::span<const int32_t> page_table,
                    size_t pt_stride, int page_bits, std::span<int32_t> out);

// The inverse transform used by the tests: a page table inverse (physical page -> logical page)
// recovers raw indices from paged ones; -1 stays -1.
void inverse_page_transform(std::span<const int32_t> paged, size_t K,
                            std::span<const int32_t> page_table, size_t pt_stride,
                            size_t pages_per_row, int page_bits, std::span<int32_t> raw);

}  // namespace dsv4::ref::indexer_topk

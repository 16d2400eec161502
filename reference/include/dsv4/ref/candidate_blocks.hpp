// candidate_blocks reference: the specification of the DSV4 two-level indexer (top blocks by their
// maximum score, then the top keys inside the chosen blocks, sorted), bitwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace dsv4::ref::candidate_blocks {

// Semantics (SGLang: kernels/ops/attention/dsv4/candidate_blocks.py, the Triton block-score,
// sort and finalize kernels, and layers/attention/dsv4/low_ratio_indexer/block_math.py).
// Row b: len = clamp(lens[b], 0, width); its keys i < len fall in n = ceil(len / bs) blocks.
// Level one. Block j scores the maximum of its keys below len, with NaN propagating (a block
//   holding a NaN scores NaN, taken as +NaN here); the newest block (len-1)/bs scores +inf, so it
//   is always chosen. The top min(nb, n) blocks by SGLang's radix order key
//   (dsv4/ref/indexer_topk.hpp: +NaN above +inf; -inf never chosen), ties to the smaller block
//   index, are chosen; then every chosen block whose score is not > -inf (a NaN block) is dropped,
//   as SGLang's sort kernel drops it: a NaN block takes a place and yields nothing. blocks_out: the
//   kept blocks ascending, -1 last.
// Level two. The candidates are the keys i < len of the kept blocks. The top K of them by order
//   key (ties to the smaller key index; -inf and -NaN never chosen) are chosen, then the NaN ones
//   are dropped (SGLang's finalize keeps only scores > -inf after its top-k). keys_out: the kept
//   key indices ascending, -1 last. Fewer candidates than K: every candidate scoring > -inf.
// Edges: len = 0 gives all -1; len < bs is one (newest) block; nb >= n keeps every block with a
// score > -inf.

struct Rows {
  size_t B = 0;
  size_t width = 0;   // lengths clamp to it
  size_t stride = 0;  // score row stride, >= width
};

struct Config {
  size_t bs = 64;  // keys per block, >= 1
  size_t nb = 16;  // blocks chosen per row, 1..2048
  size_t K = 512;  // keys chosen per row, 1..2048
};

// Level one's score of block j of a row (keys < len only; no newest-block rule).
float block_score(std::span<const float> row, size_t len, size_t bs, size_t j);

// blocks_out [B, nb] and keys_out [B, K]. Throws std::invalid_argument naming the field.
void select(std::span<const float> scores, std::span<const int32_t> lens, const Rows& r,
            const Config& c, std::span<int32_t> blocks_out, std::span<int32_t> keys_out);

}  // namespace dsv4::ref::candidate_blocks

// sparse_decode reference: the specification of DSV4 sparse decode attention over SGLang's paged
// KV layouts (v41, v41_fp4, v4, v4_fnuz), with a main and an optional extra cache, sinks and split
// partials.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "dsv4/ref/formats/bf16.hpp"
#include "dsv4/ref/formats/page_layout.hpp"

namespace dsv4::ref::sparse_decode {

// Semantics (DESIGN.md section 5, "sparse_decode"; SGLang's compact_attention_hip.py and the
// sm90/sm100 decode kernels for what the design leaves open). Query b has q[b, h, 0..511] (bf16)
// for heads h < H (H a multiple of 16: heads go in groups of 16). Its keys come from a main cache
// and an optional extra cache, each a pool of pages in one layout (page_layout.hpp; slot s is row s
// % P of page s / P) with an int32 index list [B, K] and a valid length per query:
//   column j of cache c is read only when j < min(max(length[b], 0), K); there, index -1 is "no
//   key"; any other index outside [0, num_pages * P) is an error: counted (once per column) and no
//   key, never read; an in-range index is a key (a repeated index is a key each time).
// A key's row is its 512 values dequantised as SGLang's readers do (compact_pages::
// dequantize_token: code * scale in fp32, rounded once to bf16; v4 values 448..511 are the raw
// bf16 RoPE part; the tile rules in formats/kv_tiles.hpp); it serves as K and as V (MLA).
// With scores x_j = sm_scale * (q . k_j) (natural-log units) over every key of main and extra:
//   out[h] = sum_j e^x_j k_j / (sum_j e^x_j + e^sink[h]),  lse[h] = log(sum_j e^x_j) (natural,
//   the sink excluded); sink +inf gives out 0, sink -inf (or no sink) adds nothing; a query with
//   no key gives out 0 and lse +inf whatever the sink. out is bf16, lse fp32.
// (main, extra) pairs: the same layout twice, or any pairing of v41 and v41_fp4 (a v41 or v41_fp4
// main cache with a v41 or v41_fp4 extra cache), as SGLang's compact_attention_hip.py reads them
// (each cache's layout from its own bytes per token) and its HIP test draws them.
// v4_fnuz (the gfx942 flavour of v4) is read as well.
// Optional inverse RoPE (compact_attention_hip.py's inv_rope = (freqs, positions)): the last
// rope_dim values of every head of query b are rotated back at position positions[b] with the
// (cos, sin) pairs of table row positions[b], as split_combine's (ref/split_combine.hpp); here in
// fp64 on the unrounded output (SGLang rotates its bf16 output and rounds again: the tolerance
// adds that). A position outside [0, n_pos) is an error: counted once per query, tail unrotated.
//
// Split-KV mode. The columns of main then extra form one list of K + Ke columns; split s of S
// covers columns [s*C, (s+1)*C), C = ceil((K + Ke) / S). Each split writes a partial in the form
// split_combine reads: o[b, s, h, :] = sum e^x_j k_j / sum e^x_j over its keys (fp32) and
// lse[b, s, h] = log2(sum e^x_j) (base 2), or lse -inf (o unspecified) when the split has no key.
// split_combine with n_splits = S and the sink then gives the unsplit result within tolerance.
//
// SGLang facts used. compact_attention_hip.py: valid = (col < min(length, K)) & (slot >= 0) &
// (slot < num_pages * P), no error count (the design adds it); KV bytes read at page * page_stride
// + row * data_bytes and + P * data_bytes + row * scale_bytes; ue8m0 0 -> 2^-127, 255 -> NaN;
// values (code * scale).to(bf16); the same row used as K and V; sink added as exp2(sink * log2e -
// max) to the denominator with max = max(score max, sink * log2e). Splits there store unnormalised
// (max, sum, acc); the FlashMLA form (normalised o, base-2 lse) is what the issue fixes here.

struct Cache {
  KvLayout layout = KvLayout::kV41;
  int64_t page_size = 64;
  int64_t num_pages = 0;
  std::span<const uint8_t> pool;     // [num_pages, page_bytes(page_size)]
  std::span<const int32_t> indices;  // [B, K]
  size_t K = 0;
  std::span<const int32_t> lengths;  // [B]
  int64_t capacity() const { return num_pages * page_size; }
};

struct Inputs {
  size_t B = 0, H = 0;
  std::span<const bf16> q;  // [B, H, 512]
  Cache main;
  const Cache* extra = nullptr;  // null: no extra cache
  float sm_scale = 0;
  std::span<const float> sink;  // [H] or empty
  // Inverse RoPE: rope_dim 0 means none.
  std::span<const float> cos_sin;      // [n_pos, rope_dim]
  std::span<const int64_t> positions;  // [B]
  size_t rope_dim = 0;
};

// Throws std::invalid_argument naming the field when sizes or the layout pair do not fit.
void check(const Inputs& in);

// Whether (main, extra) is a pair SGLang's decode accepts.
bool layout_pair_ok(KvLayout main, KvLayout extra);

// One token's 512 values, dequantised as SGLang reads them (bf16 values, returned as fp32).
void dequantize_token(const Cache& c, int64_t slot, float* out);

// The keys of query b in columns [col_begin, col_end) of the main-then-extra column list: the
// dequantised rows (512 fp32 each) in column order, and the number of error columns.
struct Keys {
  std::vector<float> rows;
  size_t n = 0;
  int64_t errors = 0;
};
Keys keys_of(const Inputs& in, size_t b, size_t col_begin, size_t col_end);

struct Outputs {
  std::vector<double> out;  // [B, H, 512]
  std::vector<double> lse;  // [B, H], natural log, sink excluded; +inf: no key
  int64_t errors = 0;       // error columns over every query
};
// The unsplit result in fp64 (exp/log of <cmath> on fp64 scores of the bf16 q and keys).
Outputs decode_f64(const Inputs& in);

struct Partials {
  size_t S = 0;
  std::vector<double> o;    // [B, S, H, 512]; 0 for an empty split
  std::vector<double> lse;  // [B, S, H], base 2; -inf: empty split
  int64_t errors = 0;
};
// The split partials in fp64 (see Split-KV mode).
Partials partials_f64(const Inputs& in, size_t S);

// Tolerance of a kernel (bf16 x bf16 -> fp32 matrix-core products for the scores and for P V,
// fp32 online softmax per tile, P rounded to bf16 for P V while the sums that normalise add the
// fp32 P) against decode_f64, derived from the case's data (FlashMLA's tests use fixed figures:
// out abs 1e-3 or rel 2/128, cosine distance 5e-6, lse 1e-6; fixed figures do not follow K or |q|):
//   score: each x_j is a 512-term dot product of exact bf16 products summed in fp32 (by a matrix
//     unit that may truncate: 2^-23 per addition, not 2^-24; plus the adds of the partial sums and
//     the scaling) times sm_scale: |error| <= score = 2 * 514 * 2^-24 * sm_scale * max ||q|| *
//     max ||k|| over the case (Cauchy-Schwarz keeps the bound linear in the data);
//   sums: l and acc gain up to three roundings per 16 keys (an accumulating matrix add that may
//     truncate, the rescale) plus a tree of 16 inside a tile and the exp2: relative error <= sums
//     = (3 * tiles + 16) * 2^-24, tiles = ceil((K + Ke)/16);
//   lse: |got - want| <= score + sums (an error e of every score moves log sum e^x by <= e);
//   out: the probabilities err relatively by <= 2 * score + sums, the accumulation by sums, P in
//     bf16 by 2^-9 of each weight (so by 2^-9 * max|k| in sum), so |got - want| <= (2 * score + 2
//     * sums) * max|k| + 2^-9 * max|k| + 2^-8 * |want| (the bf16 cast: 2^-9);
//   inverse RoPE: the rotation of a bf16-rounded output rounded again errs by <= 2^-7.3 of the
//     largest value (split_combine's derivation): out_atol gains 2^-7 * max|k|;
//   cosine distance <= 5e-6 (FlashMLA's figure; the bf16 P and the bf16 cast each perturb an
//     output by a rounding of up to 2^-9 relative, about 2^-18 / 6 = 6.4e-7 of cosine distance
//     each when the roundings are independent).
struct Tolerance {
  double out_atol = 0, out_rtol = 1.0 / 256, lse_atol = 0, cos = 5e-6;
};
Tolerance tolerance(const Inputs& in);

}  // namespace dsv4::ref::sparse_decode

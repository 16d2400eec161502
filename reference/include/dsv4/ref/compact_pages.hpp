// compact_pages reference: the specification of SGLang's paged KV layouts (v41, v41_fp4, v4,
// v4_fnuz) and of the quantise (bf16 rows + slots -> pages) and dequantise (slots -> rows)
// operations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "dsv4/ref/formats/bf16.hpp"
#include "dsv4/ref/formats/page_layout.hpp"
#include "dsv4/ref/slots.hpp"

namespace dsv4::ref::compact_pages {

// Per-row outcome counts of a scatter or gather (slots.hpp).
using Outcome = SlotOutcome;

// A pool is [num_pages, page_bytes(P)] bytes; slot s is row s % P of page s / P (PageLayout).
// The tile rules (scale choice, floors, clamps, NaN and infinity, the element codes and the
// reader) are written once, next to their code, in dsv4/ref/formats/kv_tiles.hpp. In short:
//   v41:     ue8m0 scale 2^max(-13, ceil(log2(amax/448))); NaN or inf amax -> scale 0xff (a NaN
//            tile's data all 0x7f; an inf tile's finite values +-0, its infinities 0x7f).
//   v41_fp4: e4m3fn scale clamp(amax/6, 2^-9, 448) rounded to nearest even (never zero); a NaN
//            gives scale 0x7f and zero codes; +-inf (no NaN) counts as the fp32 maximum: scale
//            448 (0x7e), the infinities +-6.
//   v4:      ue8m0 scale 2^ceil(log2(max(amax, 1e-8)/M)), M = 448 (e4m3fn, kV4) or 240
//            (e4m3fnuz, kV4Fnuz); NaN values give -M; an inf tile has scale byte 0x7e, its finite
//            values +-0 and its infinities -M; values 448..511 are stored as raw bf16.
// quantize writes exactly the bytes SGLang's writers write: a token's data row and its written
// scale bytes (v4: 7 of the 8). The v4 pad byte and a page's padding are left as they were; the
// pages form (quantize_pages) starts from zeroed pages, as SGLang's torch references do.
// dequantize gives fp32 (the exact product; NaN is 0x7fc00000) or that value rounded once to bf16;
// v4 values 448..511 are the stored bf16 (fp32: widened exactly).
//
// Error bound (derived at error_bound below, checked in unit/reference): for a value x of a
// tile where error_bound_applies holds, with scale byte sc,
//   v41, v4: |dequant(x) - x| <= |x|/16 + 2^(e-10), e = sc - 127     (v4 values 448..511: 0)
//   v4_fnuz: |dequant(x) - x| <= |x|/16 + 2^(e-11)
//   v41_fp4: |dequant(x) - x| <= max(|x|, S)/4 (+ 3*2^-9 when S < 2^-6), S the scale value.

// One token: x[512] -> its data row and its scale row (scale_row[0 .. scales) written).
void quantize_token(KvLayout l, const bf16* x, uint8_t* data_row, uint8_t* scale_row);
void dequantize_token(KvLayout l, const uint8_t* data_row, const uint8_t* scale_row, float* out);
void dequantize_token(KvLayout l, const uint8_t* data_row, const uint8_t* scale_row, bf16* out);

// The same token computed independently in fp64 (std::log2 / std::ceil for the exponents,
// nearest-value searches for every rounding, fp64 products): must equal the exact reference bit
// for bit (dequantised values after rounding the fp64 value to fp32).
void quantize_token_fp64(KvLayout l, const bf16* x, uint8_t* data_row, uint8_t* scale_row);
void dequantize_token_fp64(KvLayout l, const uint8_t* data_row, const uint8_t* scale_row,
                           double* out);

// Derivation. Fp8 layouts: y = x / 2^e satisfies |y| <= M (e rounds the exponent up; the floors
// only raise it), so no finite value saturates. In a binade [2^k, 2^(k+1)) above the smallest
// normal, 3 fraction bits give an error of at most half a unit, 2^(k-4) <= |y|/16; below it the
// unit is 2^-9 (e4m3fn) or 2^-10 (e4m3fnuz), the error at most half of it. Multiplying by 2^e
// gives the bound; the products stay fp32 normals or exact subnormals (e >= -35, a bf16 amax
// keeps e <= 121). Fp4: S = RNE(a), a = amax/6 clamped to [2^-9, 448]. For a >= 2^-6, |S - a| <=
// S/16, so |y| = |x|/S <= 6.375 and the e2m1 error is at most max(|y|, 1)/4 (a saturated |y| in
// (6, 6.375] errs by |y| - 6 <= |y|/4). For a < 2^-6 the scale is k*2^-9 with |S - a| <= 2^-10
// (the clamp only raises a below 2^-9, where nothing saturates), so a saturated value errs by at
// most 6*2^-10 = 3*2^-9. The scale saturates (S = 448 < a) once amax > 2784.
double error_bound(KvLayout l, double x, uint8_t sc);
// Whether the bound applies to a tile of the layout's tile_values values (v4: quantised tiles
// only): no NaN and no infinity; v41_fp4 also amax <= 2784; fp8 layouts amax < 1.9375 * 2^127
// (from there on the largest values round to 2^128, past fp32, and dequantise to inf).
bool error_bound_applies(KvLayout l, const bf16* tile);

// Scatter: row t of src (512 bf16 values, rows src_stride apart; 0 means 512) goes to slot
// slots[t] of a pool of num_pages pages of page_size tokens. slots[t] < 0 is skipped; slots[t] >=
// num_pages * page_size is rejected (nothing written, counted). In-range slots are distinct in
// real use; if two rows name one slot the reference keeps the later. Throws
// std::invalid_argument naming the field for a page_size below 1, short src or pool, a stride
// below 512.
Outcome quantize(KvLayout l, int64_t page_size, std::span<const bf16> src, size_t src_stride,
                 std::span<const int64_t> slots, std::span<uint8_t> pool, size_t num_pages);

// Gather: out row t (512 values, rows out_stride apart; 0 means 512) receives slot slots[t];
// slots[t] < 0 leaves it untouched, slots[t] past the pool leaves it untouched and is counted.
Outcome dequantize(KvLayout l, int64_t page_size, std::span<const uint8_t> pool, size_t num_pages,
                   std::span<const int64_t> slots, std::span<float> out, size_t out_stride);
Outcome dequantize(KvLayout l, int64_t page_size, std::span<const uint8_t> pool, size_t num_pages,
                   std::span<const int64_t> slots, std::span<bf16> out, size_t out_stride);

// The whole-page form of SGLang's torch references: k [num_pages, page_size, 512] ->
// zero-initialised pages [num_pages, page_bytes] with every slot written; and back
// (-> [num_pages * page_size, 512]).
std::vector<uint8_t> quantize_pages(KvLayout l, int64_t page_size, std::span<const bf16> k);
std::vector<bf16> dequantize_pages(KvLayout l, int64_t page_size, std::span<const uint8_t> pages);

}  // namespace dsv4::ref::compact_pages

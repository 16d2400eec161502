// compact_pages reference: the specification of the MXFP8-528 and NVFP4-288 page rows and of the
// quantise (scatter into a page pool) and dequantise (gather from it) operations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "dsv4/ref/formats/bf16.hpp"
#include "dsv4/ref/formats/page_format.hpp"
#include "dsv4/ref/formats/page_layout.hpp"
#include "dsv4/ref/slots.hpp"

namespace dsv4::ref::compact_pages {

// Semantics. A page row stores one token's 512 values (DESIGN.md section 3, item 4):
//   MXFP8-528: bytes 0..511 are e4m3 codes (value i in byte i), bytes 512..527 are the ue8m0 scales
//              of the 16 blocks of 32 values (block b covers values 32b..32b+31).
//   NVFP4-288: bytes 0..255 hold e2m1 pairs (value 2i in the low nibble of byte i, value 2i+1 in
//              the high nibble), bytes 256..287 are the e4m3 scales of the 32 blocks of 16 values.
// The block rules (scale choice, rounding, saturation, zero scale, NaN and infinity) are written
// once, next to their code, in dsv4/ref/formats/mxfp8.hpp and nvfp4.hpp. In short: MXFP8 scale
// 2^ceil(log2(amax/448)) clamped to [2^-127, 2^127], NaN elements stay NaN; NVFP4 scale
// e4m3(amax/6), elements saturate at +-6, a zero scale gives zeros, a NaN anywhere in a block makes
// its scale NaN (the whole block dequantises to NaN). Every rounding is to nearest, ties to even,
// of the exact quotient.
//
// quantize: row t of src (512 bf16 values, rows src_stride values apart) goes to pool row slots[t]
// of a pool of pool_rows rows of page_row_bytes(f) bytes. slots[t] < 0 is skipped (nothing
// written; the kernel may still read the row); slots[t] >= pool_rows is rejected: nothing written,
// counted (the kernel adds it to its device error counter). Every other pool byte is left as it
// was. In-range slots are distinct in real use; if two rows name the same slot the reference keeps
// the later one and the kernel one of them (unspecified which).
// dequantize: out row t (512 values, rows out_stride values apart) receives the values of pool row
// slots[t], as fp32 or bf16; slots[t] < 0 leaves out row t untouched, slots[t] >= pool_rows
// leaves it untouched and is counted. Dequantisation is exact in fp32 (MXFP8 products beyond the
// fp32 range give inf and below it round into the fp32 subnormals); bf16 output is that value
// rounded once to bf16. Every byte pattern of a row decodes to a defined value (negative scales
// included), so rows holding poison are decoded too.
//
// Error bound (derived in the header comment of error_bound below, checked exhaustively in
// unit/reference): for an element x of a block with scale code sc,
//   MXFP8: |dequant(x) - x| <= |x|/16 + 2^(e-10), e = sc - 127,   for blocks without infinities
//          whose amax < 1.9375 * 2^127 (from there on the largest values round to 2^128, past
//          fp32, and dequantise to inf);
//   NVFP4: |dequant(x) - x| <= max(|x|, S)/4 (+ 3*2^-9 when S < 2^-6), S the scale value,
//          for blocks without NaN or infinity whose amax <= 2784 (scale not saturated).

inline constexpr size_t kRowValues = size_t(kPageRowValues);

// Per-row outcome counts of a scatter or gather (slots.hpp).
using Outcome = SlotOutcome;

// One row: x[512] -> row[page_row_bytes(f)].
void quantize_row(PageFormat f, const bf16* x, uint8_t* row);
void dequantize_row(PageFormat f, const uint8_t* row, float* out);
void dequantize_row(PageFormat f, const uint8_t* row, bf16* out);

// The same row computed independently in fp64 (std::log2 / std::ceil for the MXFP8 exponent,
// nearest-value searches for every rounding, fp64 products for dequantisation): must equal the
// exact reference bit for bit (dequantised values after rounding the fp64 value to fp32).
void quantize_row_fp64(PageFormat f, const bf16* x, uint8_t* row);
void dequantize_row_fp64(PageFormat f, const uint8_t* row, double* out);

// The scale code of block b of a row.
uint8_t block_scale(PageFormat f, const uint8_t* row, int b);

// Derivation of the bounds.
// MXFP8: y = x / 2^e satisfies |y| <= 448 (e rounds the exponent up), so no element saturates.
//   For |y| >= 2^-6, in a binade [2^k, 2^(k+1)), e4m3 has 3 fraction bits: the rounding error is at
//   most half a unit, 2^(k-4) <= |y|/16. Below 2^-6 the unit is 2^-9 and the error at most 2^-10.
//   So |q - y| <= |y|/16 + 2^-10; multiplying by 2^e gives the bound, as long as q * 2^e is an
//   fp32 value: products below 2^-126 are exact subnormals (q * 2^e >= 2^-136 has at most 4
//   significant bits), but |x| >= 1.9375 * 2^127 rounds up to 2^128 and overflows to inf.
// NVFP4: a = amax/6 rounds to S with |S - a| <= S/16 when S >= 2^-6 (3 fraction bits), so every
//   |y| = |x|/S <= 6 * 17/16 = 6.375. e2m1 steps are 0.5 below 2, 1 in [2, 4), 2 in [4, 6]: the
//   rounding error is at most 0.25 below 1 and at most |y|/4 above; a saturated |y| in (6, 6.375]
//   errs by |y| - 6 <= |y|/4. Hence |q - y| <= max(|y|, 1)/4, i.e. |deq - x| <= max(|x|, S)/4.
//   With a subnormal scale S = k*2^-9 (k = 1..7), a <= (k + 1/2)*2^-9, so a saturated element errs
//   by at most 6(k + 1/2)*2^-9 - 6k*2^-9 = 3*2^-9; a zero scale (a <= 2^-10) errs by |x| <=
//   6*2^-10. The scale itself saturates (S = 448 < a) only once a > 464, i.e. amax > 2784.
double error_bound(PageFormat f, double x, uint8_t sc);
// Whether the bound holds for a block (the 32 or 16 values of one scale): MXFP8 without
// infinities and amax < 1.9375 * 2^127 (NaN elements are excluded from the check; they dequantise
// to NaN); NVFP4 without NaN or infinity and amax <= 2784.
bool error_bound_applies(PageFormat f, const bf16* block);

// Scatter rows into the pool (see Semantics). src_stride 0 means 512. Throws std::invalid_argument
// naming the field when src is smaller than slots.size() rows, a stride is below 512, or pool is
// smaller than pool_rows rows.
Outcome quantize(PageFormat f, std::span<const bf16> src, size_t src_stride,
                 std::span<const int64_t> slots, std::span<uint8_t> pool, size_t pool_rows);

// Gather rows from the pool (see Semantics). out_stride 0 means 512.
Outcome dequantize(PageFormat f, std::span<const uint8_t> pool, size_t pool_rows,
                   std::span<const int64_t> slots, std::span<float> out, size_t out_stride);
Outcome dequantize(PageFormat f, std::span<const uint8_t> pool, size_t pool_rows,
                   std::span<const int64_t> slots, std::span<bf16> out, size_t out_stride);

// ---- SGLang's paged layouts (dsv4/ref/formats/page_layout.hpp) ---------------------------------
// A pool is [num_pages, page_bytes(P)] bytes; slot s is row s % P of page s / P (PageLayout).
// The tile rules (scale choice, floors, clamps, NaN and infinity, the element codes and the
// reader) are written once, next to their code, in dsv4/ref/formats/kv_tiles.hpp. In short:
//   v41:     ue8m0 scale 2^max(-13, ceil(log2(amax/448))); NaN or inf amax -> scale 0xff (a NaN
//            tile's data all 0x7f; an inf tile's finite values +-0, its infinities 0x7f).
//   v41_fp4: e4m3fn scale clamp(amax/6, 2^-9, 448) rounded to nearest even (never zero); NaN
//            counts as inf and an inf amax gives scale 0x7f with zero codes.
//   v4:      ue8m0 scale 2^ceil(log2(max(amax, 1e-8)/M)), M = 448 (e4m3fn, kV4) or 240
//            (e4m3fnuz, kV4Fnuz); NaN values give -M; an inf tile has scale byte 0x7e, its finite
//            values +-0 and its infinities -M; values 448..511 are stored as raw bf16.
// quantize writes exactly the bytes SGLang's writers write: a token's data row and its written
// scale bytes (v4: 7 of the 8). The v4 pad byte and a page's padding are left as they were; the
// pages form (quantize_pages) starts from zeroed pages, as SGLang's torch references do.
// dequantize gives fp32 (the exact product; NaN is 0x7fc00000) or that value rounded once to bf16;
// v4 values 448..511 are the stored bf16 (fp32: widened exactly).
//
// Error bound (derived at error_bound_for below, checked in unit/reference): for a value x of a
// tile where error_bound_applies_to holds, with scale byte sc,
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
double error_bound_for(KvLayout l, double x, uint8_t sc);
// Whether the bound applies to a tile of the layout's tile_values values (v4: quantised tiles
// only): no NaN and no infinity; v41_fp4 also amax <= 2784; fp8 layouts amax < 1.9375 * 2^127
// (from there on the largest values round to 2^128, past fp32, and dequantise to inf).
bool error_bound_applies_to(KvLayout l, const bf16* tile);

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

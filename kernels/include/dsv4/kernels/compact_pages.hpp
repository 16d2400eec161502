// compact_pages launchers: quantise bf16 rows into MXFP8-528 / NVFP4-288 page rows at slot
// locations, and dequantise page rows back to bf16 or fp32. Semantics: dsv4/ref/compact_pages.hpp
// (the reference is the specification; the block rules live in dsv4/ref/formats/).
#pragma once

#include <cstdint>

#include "dsv4/gpu/runtime.hpp"
#include "dsv4/kernels/error_counter.hpp"
#include "dsv4/ref/formats/bf16.hpp"
#include "dsv4/ref/formats/page_format.hpp"

namespace dsv4::kernels::compact_pages {

using dsv4::PageFormat;

// Lanes that share one scale block. Each lane handles block_values / lanes consecutive values (a
// multiple of 8) and the lanes of a block combine their maxima with width-limited shuffles inside
// one wave (groups of 2 or 4 lanes: any wave width holds them). 0 picks the default, one lane per
// block (the fastest measured). Every choice gives the same bytes.
struct Options {
  int lanes_per_block = 0;  // MXFP8: 1, 2 or 4; NVFP4: 1 or 2; 0: the default
};

// The lane counts a format accepts (not counting 0).
bool lanes_supported(PageFormat f, int lanes_per_block);

// pool[slots[t]] = page row of src row t, for n_rows rows of 512 bf16 values, consecutive rows
// src_stride values apart (0 means 512; otherwise a multiple of 8 >= 512). The pool holds
// pool_rows rows of page_row_bytes(f) bytes. slots[t] < 0 is skipped (nothing written; the row
// itself may be read, so all n_rows rows must be readable memory);
// slots[t] >= pool_rows writes nothing and adds 1 to *errors (device int64, see error_counter.hpp).
// In-range slots must be distinct (which row lands is unspecified otherwise). n_rows = 0 launches
// nothing. src and pool: 16-byte aligned device pointers. Bad arguments throw
// std::invalid_argument naming the field. Enqueued on s without synchronisation (capturable).
void quantize(PageFormat f, const bf16* src, int64_t src_stride, const int64_t* slots,
              int64_t n_rows, uint8_t* pool, int64_t pool_rows, int64_t* errors, gpu::Stream s,
              const Options& opt = {});

// out row t (512 values, rows out_stride values apart: 0 means 512, otherwise a multiple of 8
// >= 512) = the values of pool row slots[t]. slots[t] < 0 leaves out row t untouched;
// slots[t] >= pool_rows leaves it untouched and adds 1 to *errors. pool and out: 16-byte aligned.
void dequantize(PageFormat f, const uint8_t* pool, int64_t pool_rows, const int64_t* slots,
                int64_t n_rows, float* out, int64_t out_stride, int64_t* errors, gpu::Stream s);
void dequantize(PageFormat f, const uint8_t* pool, int64_t pool_rows, const int64_t* slots,
                int64_t n_rows, bf16* out, int64_t out_stride, int64_t* errors, gpu::Stream s);

}  // namespace dsv4::kernels::compact_pages

// compact_pages launchers: quantise bf16 rows into SGLang's paged KV layouts (v41, v41_fp4, v4,
// v4_fnuz) at slot locations, and dequantise slots back to bf16 or fp32 rows. Semantics:
// dsv4/ref/compact_pages.hpp (the reference is the specification; the tile rules live in
// dsv4/ref/formats/kv_tiles.hpp, the geometry in dsv4/ref/formats/page_layout.hpp).
#pragma once

#include <cstdint>

#include "dsv4/gpu/runtime.hpp"
#include "dsv4/kernels/error_counter.hpp"
#include "dsv4/ref/formats/bf16.hpp"
#include "dsv4/ref/formats/page_layout.hpp"

namespace dsv4::kernels::compact_pages {

using dsv4::KvLayout;

// Values each lane of the quantise kernel handles: 8, 16, 32 or 64 consecutive values. Below the
// layout's tile size (32, 16, 64 values) the lanes of a tile combine their maxima with
// width-limited shuffles inside one wave (2, 4 or 8 lanes per tile); at or above it a lane takes
// whole tiles (at most 4). 0 picks the layout's default (default_values_per_lane). Every choice
// gives the same bytes.
// variant, the v41_fp4 encoder (the other layouts have one, which both variants take): 0 the
// default, packed bf16 comparisons counted on NVIDIA (integer subtractions elsewhere); 1 integer
// subtractions everywhere (AMD's encoder, run on NVIDIA too). Both give the same bytes.
inline constexpr int kQuantVariants = 2;
struct Options {
  int values_per_lane = 0;
  int variant = 0;
};

// Whether the quantise kernel accepts values_per_lane v for layout l (0 always).
bool values_per_lane_supported(KvLayout l, int v);
int default_values_per_lane(KvLayout l);

// A pool of num_pages pages of page_bytes(page_size) bytes (page_layout(l)); slot s is row
// s % page_size of page s / page_size. Row t of src (512 bf16 values, rows src_stride values
// apart: 0 means 512, otherwise a multiple of 8 >= 512) is written at slot slots[t]: its data row
// and the scale bytes the layout writes (v4: 7 of its 8; the pad byte and the page padding are
// never written). slots[t] < 0 is skipped (the row itself may be read, so all n_rows rows must be
// readable memory); slots[t] >= num_pages * page_size writes nothing and adds 1 to *errors (device
// int64, see error_counter.hpp). In-range slots must be distinct (which row lands is unspecified
// otherwise). n_rows = 0 launches nothing. src and pool: 16-byte aligned device pointers. Bad
// arguments throw std::invalid_argument naming the field. Enqueued on s without synchronisation
// (capturable).
void quantize(KvLayout l, int64_t page_size, const bf16* src, int64_t src_stride,
              const int64_t* slots, int64_t n_rows, uint8_t* pool, int64_t num_pages,
              int64_t* errors, gpu::Stream s, const Options& opt = {});

// The dequantise kernel, both giving the same bytes: 0 the default (fp32 output: 4 groups of 4
// values per lane whose warp stores cover whole lines, streaming stores; v41 to bf16: a lane's 16
// codes decoded as one group, subnormal codes on the short path), 1 (fp32 output) 8 consecutive
// values per lane, (v41 to bf16) each word of 4 codes decoded alone. The other layouts' bf16
// output has one kernel; either variant takes it.
inline constexpr int kDequantVariants = 2;
struct DequantOptions {
  int variant = 0;
};

// out row t (512 values, rows out_stride values apart: 0 means 512, otherwise a multiple of 8
// >= 512) = the values of slot slots[t]. slots[t] < 0 leaves out row t untouched; a slot past the
// pool leaves it untouched and adds 1 to *errors. pool and out: 16-byte aligned.
void dequantize(KvLayout l, int64_t page_size, const uint8_t* pool, int64_t num_pages,
                const int64_t* slots, int64_t n_rows, float* out, int64_t out_stride,
                int64_t* errors, gpu::Stream s, const DequantOptions& opt = {});
void dequantize(KvLayout l, int64_t page_size, const uint8_t* pool, int64_t num_pages,
                const int64_t* slots, int64_t n_rows, bf16* out, int64_t out_stride,
                int64_t* errors, gpu::Stream s, const DequantOptions& opt = {});

}  // namespace dsv4::kernels::compact_pages

// SGLang's paged KV layouts of the DeepSeek-V4 sparse decode (v41, v41_fp4, v4 in its two fp8
// flavours) as one value: token bytes, tiles, page geometry and slot addressing. Host and device.
#pragma once

#include <cstdint>

#include "dsv4/ref/formats/hd.hpp"

namespace dsv4 {

// The layouts of SGLang's KVLayout (python/sglang/kernels/ops/attention/dsv4/kv_layout.py). A page
// of P tokens holds P data rows, then P scale rows (at scale_offset(P) = P * data_bytes), then
// padding up to a multiple of `align` bytes. Slot s is row s % P of page s / P.
//   kV41:     512 e4m3fn (value i in byte i) | 16 ue8m0, one per 32 values;           align 512
//   kV41Fp4:  256 bytes of e2m1 pairs (value 2i in the low nibble of byte i) | 32 e4m3fn, one
//             per 16 values;                                                         align 256
//   kV4:      448 fp8 (values 0..447) + 64 raw bf16 (values 448..511, 128 bytes) = 576 | 7 ue8m0,
//             one per 64 values, + 1 pad byte;                                       align 576
//             fp8 is OCP e4m3fn (max 448): SGLang's V4 writer on gfx950 and NVIDIA;
//   kV4Fnuz:  kV4 with e4m3fnuz (bias 8, max 240, 0x80 NaN): SGLang's V4 writer on gfx942.
enum class KvLayout : int { kV41 = 0, kV41Fp4 = 1, kV4 = 2, kV4Fnuz = 3 };
inline constexpr int kKvLayoutCount = 4;
inline constexpr int kTokenValues = 512;  // values per token (row of the KV cache)

enum class Fp8Flavour : int { kE4m3fn = 0, kE4m3fnuz = 1 };

// A page row address: slot = page * P + row.
struct PageRow {
  int64_t page;
  int64_t row;
};

struct PageLayout {
  KvLayout id;
  int data_bytes;    // one token's data row
  int scale_bytes;   // one token's scale row, pad included
  int scales;        // scale bytes a writer writes per token (tiles); v4: 7 of 8
  int tile_values;   // values sharing one scale
  int quant_values;  // leading values that are quantised; v4: 448 (the rest is raw bf16)
  int align;         // page_bytes is a multiple of it
  bool fp4;          // e2m1 data with e4m3fn scales (else fp8 data with ue8m0 scales)
  Fp8Flavour fp8;    // flavour of the fp8 data (kV4Fnuz: e4m3fnuz)

  DSV4_HD constexpr int token_bytes() const { return data_bytes + scale_bytes; }
  DSV4_HD constexpr int64_t page_bytes(int64_t page_size) const {
    return (page_size * token_bytes() + align - 1) / align * align;
  }
  DSV4_HD constexpr int64_t scale_offset(int64_t page_size) const { return page_size * data_bytes; }
  // Bytes after the scale rows up to page_bytes (zero in pages SGLang allocates).
  DSV4_HD constexpr int64_t padding_bytes(int64_t page_size) const {
    return page_bytes(page_size) - page_size * token_bytes();
  }
  // slot >= 0.
  DSV4_HD constexpr PageRow locate(int64_t slot, int64_t page_size) const {
    return PageRow{slot / page_size, slot % page_size};
  }
  // Byte offsets, in a pool of [num_pages, page_bytes], of a slot's data row and scale row.
  DSV4_HD constexpr int64_t data_row_offset(int64_t slot, int64_t page_size) const {
    return slot / page_size * page_bytes(page_size) + slot % page_size * data_bytes;
  }
  DSV4_HD constexpr int64_t scale_row_offset(int64_t slot, int64_t page_size) const {
    return slot / page_size * page_bytes(page_size) + scale_offset(page_size) +
           slot % page_size * scale_bytes;
  }
};

DSV4_HD constexpr PageLayout page_layout(KvLayout id) {
  switch (id) {
    case KvLayout::kV41:
      return PageLayout{id, 512, 16, 16, 32, 512, 512, false, Fp8Flavour::kE4m3fn};
    case KvLayout::kV41Fp4:
      return PageLayout{id, 256, 32, 32, 16, 512, 256, true, Fp8Flavour::kE4m3fn};
    case KvLayout::kV4:
      return PageLayout{id, 576, 8, 7, 64, 448, 576, false, Fp8Flavour::kE4m3fn};
    case KvLayout::kV4Fnuz:
    default:
      return PageLayout{KvLayout::kV4Fnuz, 576, 8, 7, 64, 448, 576, false, Fp8Flavour::kE4m3fnuz};
  }
}

DSV4_HD constexpr bool kv_layout_valid(int id) { return id >= 0 && id < kKvLayoutCount; }

// The names SGLang's KVLayout uses ("v41", "v41_fp4", "v4"), and "v4_fnuz" for the gfx942 flavour.
inline const char* kv_layout_name(KvLayout id) {
  switch (id) {
    case KvLayout::kV41:
      return "v41";
    case KvLayout::kV41Fp4:
      return "v41_fp4";
    case KvLayout::kV4:
      return "v4";
    case KvLayout::kV4Fnuz:
      return "v4_fnuz";
  }
  return "?";
}

// The layout named `name`; false when no layout has that name.
inline bool parse_kv_layout(const char* name, KvLayout* out) {
  for (int i = 0; i < kKvLayoutCount; ++i) {
    const char* a = kv_layout_name(KvLayout(i));
    const char* b = name;
    while (*a && *a == *b) ++a, ++b;
    if (*a == 0 && *b == 0) {
      *out = KvLayout(i);
      return true;
    }
  }
  return false;
}

static_assert(page_layout(KvLayout::kV41).page_bytes(64) == 66 * 512);
static_assert(page_layout(KvLayout::kV41).page_bytes(1) == 1024);
static_assert(page_layout(KvLayout::kV41Fp4).page_bytes(1) == 512);
static_assert(page_layout(KvLayout::kV4).page_bytes(64) == 65 * 576);
static_assert(page_layout(KvLayout::kV4).scale_offset(64) == 64 * 576);

}  // namespace dsv4

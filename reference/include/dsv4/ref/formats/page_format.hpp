// The two compact page-row formats (MXFP8-528, NVFP4-288) and their geometry. Host and device,
// C++17.
#pragma once

#include "dsv4/ref/formats/hd.hpp"

namespace dsv4 {

// A page row holds one token's 512 values.
//   kMxfp8: 512 e4m3 bytes, then 16 ue8m0 scales (one per 32 values)           = 528 bytes
//   kNvfp4: 256 bytes of e2m1 pairs (value 2i in the low nibble), then 32 e4m3
//           scales (one per 16 values)                                         = 288 bytes
enum class PageFormat : int { kMxfp8 = 0, kNvfp4 = 1 };

inline constexpr int kPageRowValues = 512;

DSV4_HD constexpr int page_row_bytes(PageFormat f) { return f == PageFormat::kMxfp8 ? 528 : 288; }
DSV4_HD constexpr int page_block_values(PageFormat f) { return f == PageFormat::kMxfp8 ? 32 : 16; }
DSV4_HD constexpr int page_row_blocks(PageFormat f) {
  return kPageRowValues / page_block_values(f);
}
// Byte offset of the first scale in a row (the element bytes come first).
DSV4_HD constexpr int page_scale_offset(PageFormat f) {
  return f == PageFormat::kMxfp8 ? 512 : 256;
}
inline const char* page_format_name(PageFormat f) {
  return f == PageFormat::kMxfp8 ? "mxfp8_528" : "nvfp4_288";
}

}  // namespace dsv4

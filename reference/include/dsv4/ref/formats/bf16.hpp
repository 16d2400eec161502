// bfloat16 storage type and exact fp32 <-> bf16 conversion (round to nearest even), host and
// device.
#pragma once

#include <cstdint>
#include <cstring>

#include "dsv4/ref/formats/hd.hpp"

namespace dsv4 {

// A bf16 value held as its 16 raw bits (the upper half of an fp32).
struct bf16 {
  uint16_t bits;
};
static_assert(sizeof(bf16) == 2);

DSV4_HD uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

DSV4_HD float f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

DSV4_HD float bf16_to_f32(bf16 h) { return f32_from_bits(uint32_t(h.bits) << 16); }

// Round to nearest, ties to even; NaN stays NaN (quiet bit forced), infinities pass through.
DSV4_HD bf16 f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0)
    return bf16{uint16_t((u >> 16) | 0x0040u)};
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return bf16{uint16_t(u >> 16)};
}

DSV4_HD bool operator==(bf16 a, bf16 b) { return a.bits == b.bits; }
DSV4_HD bool operator!=(bf16 a, bf16 b) { return a.bits != b.bits; }

}  // namespace dsv4

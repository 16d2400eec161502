// compact_pages reference: tokens through the shared tile codecs, the fp64 formulation, the error
// bound, and the scatter / gather over a pool of pages.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "dsv4/ref/compact_pages.hpp"
#include "dsv4/ref/formats/fp64.hpp"
#include "dsv4/ref/formats/kv_tiles.hpp"

namespace dsv4::ref::compact_pages {
namespace {

[[noreturn]] void bad(const char* fn, const std::string& what) {
  throw std::invalid_argument(std::string("compact_pages::") + fn + ": " + what);
}

PageLayout layout_of(const char* fn, KvLayout l) {
  if (!kv_layout_valid(int(l)))
    bad(fn, "layout=" + std::to_string(int(l)) + " is not one of v41 (0), v41_fp4 (1), v4 (2), " +
                "v4_fnuz (3)");
  return page_layout(l);
}

void check_page_size(const char* fn, int64_t page_size) {
  if (page_size < 1) bad(fn, "page_size=" + std::to_string(page_size) + " is below 1");
}

size_t check_rows(const char* fn, const char* field, size_t size, size_t rows, size_t stride) {
  if (stride == 0) stride = kTokenValues;
  if (stride < size_t(kTokenValues))
    bad(fn, std::string(field) + "_stride=" + std::to_string(stride) + " is below 512");
  const size_t need = rows == 0 ? 0 : (rows - 1) * stride + kTokenValues;
  if (size < need)
    bad(fn, std::string(field) + " holds " + std::to_string(size) + " values, " +
                std::to_string(rows) + " rows of stride " + std::to_string(stride) + " need " +
                std::to_string(need));
  return stride;
}

void check_pool(const char* fn, const PageLayout& L, int64_t page_size, size_t size,
                size_t num_pages) {
  const size_t need = num_pages * size_t(L.page_bytes(page_size));
  if (size < need)
    bad(fn, "pool holds " + std::to_string(size) +
                " bytes, num_pages=" + std::to_string(num_pages) + " pages of " +
                std::to_string(L.page_bytes(page_size)) + " need " + std::to_string(need));
}

minifloat::Bf16Amax amax_of(const bf16* x, int n) {
  minifloat::Bf16Amax m = minifloat::bf16_amax_init();
  for (int i = 0; i < n; ++i) minifloat::bf16_amax_add(m, x[i].bits);
  return m;
}

uint32_t token_value_bits(const PageLayout& L, const uint8_t* data, const uint8_t* scales, int i) {
  switch (L.id) {
    case KvLayout::kV41:
      return kv::v41_decode_bits(data[i], scales[i / 32]);
    case KvLayout::kV41Fp4: {
      const uint8_t b = data[i / 2];
      return kv::fp4_decode_bits(i % 2 ? e2m1_hi(b) : e2m1_lo(b), scales[i / 16]);
    }
    default:
      if (i >= L.quant_values) {
        const int j = L.quant_values + 2 * (i - L.quant_values);
        return (uint32_t(data[j]) | uint32_t(data[j + 1]) << 8) << 16;
      }
      return kv::v4_decode_bits(data[i], scales[i / 64], L.fp8);
  }
}

// Stats of a tile in fp64: largest non-NaN magnitude, NaN and infinity present.
struct TileStats {
  double amax = 0;
  bool nan = false, inf = false;
};

TileStats stats(const bf16* x, int n) {
  TileStats s;
  for (int i = 0; i < n; ++i) {
    const double v = fp64::bf16_value(x[i].bits);
    if (std::isnan(v)) {
      s.nan = true;
      continue;
    }
    if (std::isinf(v)) s.inf = true;
    s.amax = std::max(s.amax, std::fabs(v));
  }
  return s;
}

template <class Out>
Outcome gather(const char* fn, KvLayout l, int64_t page_size, std::span<const uint8_t> pool,
               size_t num_pages, std::span<const int64_t> slots, std::span<Out> out,
               size_t out_stride) {
  const PageLayout L = layout_of(fn, l);
  check_page_size(fn, page_size);
  check_pool(fn, L, page_size, pool.size(), num_pages);
  out_stride = check_rows(fn, "out", out.size(), slots.size(), out_stride);
  return for_each_slot(slots, num_pages * size_t(page_size), [&](size_t t, size_t s) {
    const uint8_t* p = pool.data();
    dequantize_token(l, p + L.data_row_offset(int64_t(s), page_size),
                     p + L.scale_row_offset(int64_t(s), page_size), out.data() + t * out_stride);
    return true;
  });
}

}  // namespace

void quantize_token(KvLayout l, const bf16* x, uint8_t* data, uint8_t* scales) {
  const PageLayout L = layout_of("quantize_token", l);
  const int tv = L.tile_values;
  for (int b = 0; b < L.scales; ++b) {
    const bf16* tile = x + b * tv;
    const minifloat::Bf16Amax m = amax_of(tile, tv);
    if (l == KvLayout::kV41) {
      const kv::V41Tile t = kv::v41_tile(m);
      scales[b] = t.sc;
      for (int i = 0; i < tv; ++i) data[b * tv + i] = kv::v41_encode(tile[i].bits, t);
    } else if (l == KvLayout::kV41Fp4) {
      const uint8_t sc = kv::fp4_scale(m);
      scales[b] = sc;
      const nvfp4::PairThresholds pt = nvfp4::pair_thresholds(sc);
      for (int i = 0; i < tv; i += 2)
        data[(b * tv + i) / 2] =
            nvfp4::encode_pair(uint32_t(tile[i].bits) | (uint32_t(tile[i + 1].bits) << 16), pt);
    } else {
      const kv::V4Tile t = kv::v4_tile(m, L.fp8);
      scales[b] = t.sc;
      for (int i = 0; i < tv; ++i) data[b * tv + i] = kv::v4_encode(tile[i].bits, t);
    }
  }
  if (l == KvLayout::kV4 || l == KvLayout::kV4Fnuz) {
    for (int i = L.quant_values; i < kTokenValues; ++i) {
      const int j = L.quant_values + 2 * (i - L.quant_values);
      data[j] = uint8_t(x[i].bits & 0xff);
      data[j + 1] = uint8_t(x[i].bits >> 8);
    }
  }
}

void dequantize_token(KvLayout l, const uint8_t* data, const uint8_t* scales, float* out) {
  const PageLayout L = layout_of("dequantize_token", l);
  for (int i = 0; i < kTokenValues; ++i)
    out[i] = f32_from_bits(token_value_bits(L, data, scales, i));
}

void dequantize_token(KvLayout l, const uint8_t* data, const uint8_t* scales, bf16* out) {
  const PageLayout L = layout_of("dequantize_token", l);
  for (int i = 0; i < kTokenValues; ++i) {
    const uint32_t v = token_value_bits(L, data, scales, i);
    // v4's raw bf16 values are copied as stored (their low half is zero).
    out[i] = (l == KvLayout::kV4 || l == KvLayout::kV4Fnuz) && i >= L.quant_values
                 ? bf16{uint16_t(v >> 16)}
                 : f32_to_bf16(f32_from_bits(v));
  }
}

void quantize_token_fp64(KvLayout l, const bf16* x, uint8_t* data, uint8_t* scales) {
  const PageLayout L = layout_of("quantize_token_fp64", l);
  const int tv = L.tile_values;
  for (int b = 0; b < L.scales; ++b) {
    const bf16* tile = x + b * tv;
    const TileStats s = stats(tile, tv);
    for (int i = 0; i < tv; ++i) {
      const double v = fp64::bf16_value(tile[i].bits);
      const int k = b * tv + i;
      if (l == KvLayout::kV41) {
        if (s.nan || s.inf) {
          scales[b] = 0xff;
          data[k] = s.nan || std::isinf(v) ? 0x7f : (std::signbit(v) ? 0x80 : 0x00);
          continue;
        }
        // max(amax / 448, 1e-4) with the fp32 value of 1e-4.
        const double q = std::max(s.amax / 448.0, double(1e-4f));
        const int e = int(std::ceil(std::log2(q)));
        scales[b] = uint8_t(e + 127);
        data[k] = fp64::e4m3_nearest(v, std::ldexp(1.0, e));
      } else if (l == KvLayout::kV41Fp4) {
        // torch.nan_to_num(|x|, nan=inf): NaN -> inf (NaN scale), +inf -> the fp32 maximum.
        uint8_t sc = 0x7f;
        if (!s.nan) {
          const double amax = s.inf ? double(std::numeric_limits<float>::max()) : s.amax;
          sc = std::max<uint8_t>(1, fp64::e4m3_nearest(std::min(amax / 6.0, 448.0)));
        }
        scales[b] = sc;
        const uint8_t code = sc == 0x7f ? 0 : fp64::e2m1_nearest(v, fp64::e4m3_value(sc));
        uint8_t& byte = data[k / 2];
        byte = k % 2 ? uint8_t((byte & 0x0f) | (code << 4)) : uint8_t((byte & 0xf0) | code);
      } else {
        const bool fnuz = L.fp8 == Fp8Flavour::kE4m3fnuz;
        const double M = fnuz ? 240.0 : 448.0;
        const uint8_t neg_max = fnuz ? 0xff : 0xfe;
        if (s.inf) {
          scales[b] = 0x7e;
          data[k] = std::isnan(v) || std::isinf(v) ? neg_max
                    : fnuz || !std::signbit(v)     ? 0x00
                                                   : 0x80;
          continue;
        }
        const int e = int(std::ceil(std::log2(std::max(s.amax, double(1e-8f)) / M)));
        scales[b] = uint8_t(e + 127);
        if (std::isnan(v))
          data[k] = neg_max;
        else
          data[k] = fnuz ? fp64::e4m3fnuz_nearest(v, std::ldexp(1.0, e))
                         : fp64::e4m3_nearest(v, std::ldexp(1.0, e));
      }
    }
  }
  if (l == KvLayout::kV4 || l == KvLayout::kV4Fnuz)
    std::memcpy(data + L.quant_values, x + L.quant_values,
                2 * size_t(kTokenValues - L.quant_values));
}

void dequantize_token_fp64(KvLayout l, const uint8_t* data, const uint8_t* scales, double* out) {
  const PageLayout L = layout_of("dequantize_token_fp64", l);
  const double nan = std::nan("");
  for (int i = 0; i < kTokenValues; ++i) {
    if (l == KvLayout::kV41) {
      out[i] = fp64::e4m3_value(data[i]) * fp64::ue8m0_value(scales[i / 32]);
    } else if (l == KvLayout::kV41Fp4) {
      const uint8_t b = data[i / 2];
      out[i] = fp64::e2m1_value(i % 2 ? b >> 4 : b & 0xf) * fp64::e4m3_value(scales[i / 16]);
    } else if (i >= L.quant_values) {
      const int j = L.quant_values + 2 * (i - L.quant_values);
      out[i] = fp64::bf16_value(uint16_t(data[j] | data[j + 1] << 8));
    } else {
      const double c = L.fp8 == Fp8Flavour::kE4m3fnuz ? fp64::e4m3fnuz_value(data[i])
                                                      : fp64::e4m3_value(data[i]);
      const uint8_t sc = scales[i / 64];
      out[i] = sc == 0xff ? (c == 0 ? nan : c * HUGE_VAL) : c * std::ldexp(1.0, int(sc) - 127);
    }
  }
}

double error_bound(KvLayout l, double x, uint8_t sc) {
  layout_of("error_bound", l);
  const double ax = std::fabs(x);
  if (l == KvLayout::kV41Fp4) {
    const double s = std::fabs(fp64::e4m3_value(sc));
    return std::max(ax, s) / 4 + (s < std::ldexp(1.0, -6) ? 3 * std::ldexp(1.0, -9) : 0.0);
  }
  return ax / 16 + std::ldexp(1.0, int(sc) - 127 - (l == KvLayout::kV4Fnuz ? 11 : 10));
}

bool error_bound_applies(KvLayout l, const bf16* tile) {
  const PageLayout L = layout_of("error_bound_applies", l);
  const TileStats s = stats(tile, L.tile_values);
  if (s.nan || s.inf) return false;
  // fp8: from 1.9375 * 2^127 on, the largest values round to 2^128 and dequantise to inf.
  return l == KvLayout::kV41Fp4 ? s.amax <= 2784.0 : s.amax < 0x1.fp127;
}

Outcome quantize(KvLayout l, int64_t page_size, std::span<const bf16> src, size_t src_stride,
                 std::span<const int64_t> slots, std::span<uint8_t> pool, size_t num_pages) {
  const char* fn = "quantize";
  const PageLayout L = layout_of(fn, l);
  check_page_size(fn, page_size);
  src_stride = check_rows(fn, "src", src.size(), slots.size(), src_stride);
  check_pool(fn, L, page_size, pool.size(), num_pages);
  return for_each_slot(slots, num_pages * size_t(page_size), [&](size_t t, size_t s) {
    quantize_token(l, src.data() + t * src_stride,
                   pool.data() + L.data_row_offset(int64_t(s), page_size),
                   pool.data() + L.scale_row_offset(int64_t(s), page_size));
    return true;
  });
}

Outcome dequantize(KvLayout l, int64_t page_size, std::span<const uint8_t> pool, size_t num_pages,
                   std::span<const int64_t> slots, std::span<float> out, size_t out_stride) {
  return gather("dequantize", l, page_size, pool, num_pages, slots, out, out_stride);
}

Outcome dequantize(KvLayout l, int64_t page_size, std::span<const uint8_t> pool, size_t num_pages,
                   std::span<const int64_t> slots, std::span<bf16> out, size_t out_stride) {
  return gather("dequantize", l, page_size, pool, num_pages, slots, out, out_stride);
}

std::vector<uint8_t> quantize_pages(KvLayout l, int64_t page_size, std::span<const bf16> k) {
  const char* fn = "quantize_pages";
  const PageLayout L = layout_of(fn, l);
  check_page_size(fn, page_size);
  const size_t per_page = size_t(page_size) * kTokenValues;
  if (k.size() % per_page != 0)
    bad(fn, "k holds " + std::to_string(k.size()) + " values, not a whole number of pages of " +
                std::to_string(page_size) + " x 512");
  const size_t num_pages = k.size() / per_page;
  std::vector<uint8_t> pages(num_pages * size_t(L.page_bytes(page_size)), 0);
  std::vector<int64_t> slots(num_pages * size_t(page_size));
  for (size_t s = 0; s < slots.size(); ++s) slots[s] = int64_t(s);
  quantize(l, page_size, k, 0, slots, pages, num_pages);
  return pages;
}

std::vector<bf16> dequantize_pages(KvLayout l, int64_t page_size, std::span<const uint8_t> pages) {
  const char* fn = "dequantize_pages";
  const PageLayout L = layout_of(fn, l);
  check_page_size(fn, page_size);
  const size_t pb = size_t(L.page_bytes(page_size));
  if (pages.size() % pb != 0)
    bad(fn, "pages hold " + std::to_string(pages.size()) +
                " bytes, not a whole number of pages of " + std::to_string(pb));
  const size_t num_pages = pages.size() / pb;
  std::vector<bf16> out(num_pages * size_t(page_size) * kTokenValues);
  std::vector<int64_t> slots(num_pages * size_t(page_size));
  for (size_t s = 0; s < slots.size(); ++s) slots[s] = int64_t(s);
  dequantize(l, page_size, pages, num_pages, slots, out, 0);
  return out;
}

}  // namespace dsv4::ref::compact_pages

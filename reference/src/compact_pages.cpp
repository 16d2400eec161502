// compact_pages reference: page rows through the shared block codecs, the fp64 formulation, the
// error bound, and the scatter / gather over a pool.
#include "dsv4/ref/compact_pages.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "dsv4/ref/formats/e2m1.hpp"
#include "dsv4/ref/formats/fp64.hpp"
#include "dsv4/ref/formats/mxfp8.hpp"
#include "dsv4/ref/formats/nvfp4.hpp"

namespace dsv4::ref::compact_pages {
namespace {

[[noreturn]] void bad(const char* fn, const std::string& what) {
  throw std::invalid_argument(std::string("compact_pages::") + fn + ": " + what);
}

void check_format(const char* fn, PageFormat f) {
  if (f != PageFormat::kMxfp8 && f != PageFormat::kNvfp4)
    bad(fn, "format=" + std::to_string(int(f)) + " is not kMxfp8 (0) or kNvfp4 (1)");
}

// Rows of width 512, `stride` apart, `rows` of them, must fit `size` values.
size_t check_rows(const char* fn, const char* field, size_t size, size_t rows, size_t stride) {
  if (stride == 0) stride = kRowValues;
  if (stride < kRowValues)
    bad(fn, std::string(field) + "_stride=" + std::to_string(stride) + " is below 512");
  const size_t need = rows == 0 ? 0 : (rows - 1) * stride + kRowValues;
  if (size < need)
    bad(fn, std::string(field) + " holds " + std::to_string(size) + " values, " +
                std::to_string(rows) + " rows of stride " + std::to_string(stride) + " need " +
                std::to_string(need));
  return stride;
}

void check_pool(const char* fn, PageFormat f, size_t size, size_t pool_rows) {
  const size_t need = pool_rows * size_t(page_row_bytes(f));
  if (size < need)
    bad(fn, "pool holds " + std::to_string(size) +
                " bytes, pool_rows=" + std::to_string(pool_rows) + " rows of " +
                std::to_string(page_row_bytes(f)) + " need " + std::to_string(need));
}

// Magnitude of the largest non-NaN value (fp64), and whether a NaN or an infinity is present.
struct BlockStats {
  double amax = 0;
  bool nan = false, inf = false;
};

BlockStats stats(const bf16* x, int n) {
  BlockStats s;
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

template <class Out, class Convert>
Outcome gather(const char* fn, PageFormat f, std::span<const uint8_t> pool, size_t pool_rows,
               std::span<const int64_t> slots, std::span<Out> out, size_t out_stride,
               Convert row_to_out) {
  check_format(fn, f);
  check_pool(fn, f, pool.size(), pool_rows);
  out_stride = check_rows(fn, "out", out.size(), slots.size(), out_stride);
  const size_t rb = size_t(page_row_bytes(f));
  return for_each_slot(slots, pool_rows, [&](size_t t, size_t s) {
    row_to_out(pool.data() + s * rb, out.data() + t * out_stride);
    return true;
  });
}

}  // namespace

void quantize_row(PageFormat f, const bf16* x, uint8_t* row) {
  check_format("quantize_row", f);
  uint16_t h[mxfp8::kBlock];
  if (f == PageFormat::kMxfp8) {
    for (int b = 0; b < 16; ++b) {
      for (int i = 0; i < mxfp8::kBlock; ++i) h[i] = x[b * mxfp8::kBlock + i].bits;
      row[512 + b] = mxfp8::quantize_block(h, row + b * mxfp8::kBlock);
    }
  } else {
    for (int b = 0; b < 32; ++b) {
      for (int i = 0; i < nvfp4::kBlock; ++i) h[i] = x[b * nvfp4::kBlock + i].bits;
      row[256 + b] = nvfp4::quantize_block(h, row + b * nvfp4::kBlock / 2);
    }
  }
}

void dequantize_row(PageFormat f, const uint8_t* row, float* out) {
  check_format("dequantize_row", f);
  for (int i = 0; i < int(kRowValues); ++i) {
    if (f == PageFormat::kMxfp8) {
      out[i] = mxfp8::decode(row[i], row[512 + i / mxfp8::kBlock]);
    } else {
      const uint8_t byte = row[i / 2];
      out[i] = nvfp4::decode(i % 2 ? e2m1_hi(byte) : e2m1_lo(byte), row[256 + i / nvfp4::kBlock]);
    }
  }
}

void dequantize_row(PageFormat f, const uint8_t* row, bf16* out) {
  float v[kRowValues];
  dequantize_row(f, row, v);
  for (size_t i = 0; i < kRowValues; ++i) out[i] = f32_to_bf16(v[i]);
}

void quantize_row_fp64(PageFormat f, const bf16* x, uint8_t* row) {
  check_format("quantize_row_fp64", f);
  const int bv = page_block_values(f);
  for (int b = 0; b < page_row_blocks(f); ++b) {
    const bf16* blk = x + b * bv;
    const BlockStats s = stats(blk, bv);
    if (f == PageFormat::kMxfp8) {
      const int e = fp64::mxfp8_scale_exponent(s.amax);
      row[512 + b] = uint8_t(e + 127);
      for (int i = 0; i < bv; ++i)
        row[b * bv + i] = fp64::e4m3_nearest(fp64::bf16_value(blk[i].bits), std::ldexp(1.0, e));
    } else if (s.nan) {
      row[256 + b] = 0x7f;
      for (int i = 0; i < bv / 2; ++i) row[b * bv / 2 + i] = 0;
    } else {
      const uint8_t sc = fp64::nvfp4_scale_code(s.amax);
      const double scale = fp64::e4m3_value(sc);
      row[256 + b] = sc;
      for (int i = 0; i < bv; i += 2) {
        uint8_t q[2];
        for (int k = 0; k < 2; ++k) {
          const double v = fp64::bf16_value(blk[i + k].bits);
          // A zero scale gives zeros that keep the sign of x.
          q[k] = scale == 0 ? (std::signbit(v) ? 0x8 : 0x0) : fp64::e2m1_nearest(v, scale);
        }
        row[b * bv / 2 + i / 2] = uint8_t(q[0] | (q[1] << 4));
      }
    }
  }
}

void dequantize_row_fp64(PageFormat f, const uint8_t* row, double* out) {
  check_format("dequantize_row_fp64", f);
  for (int i = 0; i < int(kRowValues); ++i) {
    if (f == PageFormat::kMxfp8) {
      out[i] = fp64::e4m3_value(row[i]) * fp64::ue8m0_value(row[512 + i / 32]);
    } else {
      const uint8_t byte = row[i / 2];
      out[i] =
          fp64::e2m1_value(i % 2 ? byte >> 4 : byte & 0xf) * fp64::e4m3_value(row[256 + i / 16]);
    }
  }
}

uint8_t block_scale(PageFormat f, const uint8_t* row, int b) {
  check_format("block_scale", f);
  if (b < 0 || b >= page_row_blocks(f))
    bad("block_scale",
        "b=" + std::to_string(b) + " is outside [0, " + std::to_string(page_row_blocks(f)) + ")");
  return row[page_scale_offset(f) + b];
}

double error_bound(PageFormat f, double x, uint8_t sc) {
  check_format("error_bound", f);
  const double ax = std::fabs(x);
  if (f == PageFormat::kMxfp8) return ax / 16 + std::ldexp(1.0, int(sc) - 127 - 10);
  const double s = std::fabs(fp64::e4m3_value(sc));
  return std::max(ax, s) / 4 + (s < std::ldexp(1.0, -6) ? 3 * std::ldexp(1.0, -9) : 0.0);
}

bool error_bound_applies(PageFormat f, const bf16* block) {
  check_format("error_bound_applies", f);
  const BlockStats s = stats(block, page_block_values(f));
  if (f == PageFormat::kMxfp8) return !s.inf && s.amax < 0x1.fp127;
  return !s.nan && !s.inf && s.amax <= 2784.0;
}

Outcome quantize(PageFormat f, std::span<const bf16> src, size_t src_stride,
                 std::span<const int64_t> slots, std::span<uint8_t> pool, size_t pool_rows) {
  const char* fn = "quantize";
  check_format(fn, f);
  src_stride = check_rows(fn, "src", src.size(), slots.size(), src_stride);
  check_pool(fn, f, pool.size(), pool_rows);
  const size_t rb = size_t(page_row_bytes(f));
  return for_each_slot(slots, pool_rows, [&](size_t t, size_t s) {
    quantize_row(f, src.data() + t * src_stride, pool.data() + s * rb);
    return true;
  });
}

Outcome dequantize(PageFormat f, std::span<const uint8_t> pool, size_t pool_rows,
                   std::span<const int64_t> slots, std::span<float> out, size_t out_stride) {
  return gather("dequantize", f, pool, pool_rows, slots, out, out_stride,
                [f](const uint8_t* row, float* o) { dequantize_row(f, row, o); });
}

Outcome dequantize(PageFormat f, std::span<const uint8_t> pool, size_t pool_rows,
                   std::span<const int64_t> slots, std::span<bf16> out, size_t out_stride) {
  return gather("dequantize", f, pool, pool_rows, slots, out, out_stride,
                [f](const uint8_t* row, bf16* o) { dequantize_row(f, row, o); });
}

}  // namespace dsv4::ref::compact_pages

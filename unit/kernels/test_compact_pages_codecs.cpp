// compact_pages kernels on every code point, on the device: every (bf16 value, scale) pair a block
// can hold quantised under every lane count, every (code, scale) pair dequantised to fp32 and bf16,
// blocks that each follow one special rule (zeros, one huge value, subnormals only, NaN, infinity)
// with their documented bytes, and the device round trip within the derived error bound.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "dsv4/fixtures/compare.hpp"
#include "dsv4/fixtures/device_buffer.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/fixtures/gpu_test.hpp"
#include "dsv4/kernels/compact_pages.hpp"
#include "dsv4/ref/compact_pages.hpp"
#include "dsv4/ref/formats/e4m3.hpp"

namespace dsv4 {
namespace {

namespace kc = kernels::compact_pages;
namespace rc = ref::compact_pages;
using fx::DeviceBuffer;
using fx::Shape;

constexpr PageFormat kMx = PageFormat::kMxfp8;
constexpr PageFormat kNv = PageFormat::kNvfp4;

size_t row_bytes(PageFormat f) { return size_t(page_row_bytes(f)); }

// Quantises rows [T, 512] into a NaN-poisoned pool at slots 0..T-1 on the device, expects the pool
// to equal the reference's bit for bit, no rejection and intact canaries; returns the pool.
std::vector<uint8_t> quantize_on_device(PageFormat f, const std::vector<bf16>& rows, int lanes,
                                        gpu::Stream s) {
  const size_t T = rows.size() / 512, rb = row_bytes(f);
  std::vector<int64_t> iota(T);
  std::iota(iota.begin(), iota.end(), 0);
  DeviceBuffer<bf16> src(rows, "src");
  DeviceBuffer<int64_t> slots(iota, "slots");
  DeviceBuffer<int64_t> errors(1, "errors");
  DeviceBuffer<uint8_t> pool(T * rb, "pool", fx::Poison::nan());
  kernels::reset_errors(errors.data(), s);
  kc::quantize(f, src.data(), 0, slots.data(), int64_t(T), pool.data(), int64_t(T), errors.data(),
               s, {.lanes_per_block = lanes});
  pool.download(s);
  std::vector<uint8_t> want(T * rb, pool.poison_value());
  rc::quantize(f, rows, 0, iota, want, T);
  EXPECT_TRUE(fx::bitwise_equal(pool.host(), want, Shape{T, rb}, {.name = "pool"}));
  EXPECT_EQ(kernels::read_errors(errors.data(), s), 0);
  EXPECT_TRUE(src.guards_intact());
  EXPECT_TRUE(slots.guards_intact());
  EXPECT_TRUE(pool.guards_intact());
  return pool.host();
}

// Dequantises every row of a pool (slots 0..R-1) into a NaN-poisoned output on the device, expects
// it to equal the reference's bit for bit; returns it.
template <class Out>
std::vector<Out> dequantize_on_device(PageFormat f, const std::vector<uint8_t>& rows,
                                      gpu::Stream s) {
  const size_t R = rows.size() / row_bytes(f);
  std::vector<int64_t> iota(R);
  std::iota(iota.begin(), iota.end(), 0);
  DeviceBuffer<uint8_t> pool(rows, "pool");
  DeviceBuffer<int64_t> slots(iota, "slots");
  DeviceBuffer<int64_t> errors(1, "errors");
  DeviceBuffer<Out> out(R * 512, "out");
  kernels::reset_errors(errors.data(), s);
  kc::dequantize(f, pool.data(), int64_t(R), slots.data(), int64_t(R), out.data(), 0, errors.data(),
                 s);
  out.download(s);
  std::vector<Out> want(R * 512, out.poison_value());
  rc::dequantize(f, rows, R, iota, want, 0);
  EXPECT_TRUE(fx::bitwise_equal(out.host(), want, Shape{R, 512}, {.name = "out"}));
  EXPECT_EQ(kernels::read_errors(errors.data(), s), 0);
  EXPECT_TRUE(pool.guards_intact());
  EXPECT_TRUE(out.guards_intact());
  return out.host();
}

// Every finite bf16 value (both signs) that a block with a given scale can hold, for every scale a
// bf16 block can have: per scale, blocks that open with the largest magnitude giving that scale,
// then every magnitude up to it. MXFP8: the scale codes 0..247 (448 * 2^e is a bf16 up to e = 119,
// bf16 max gives e = 120) and 254 (an infinity, with every finite value); NVFP4: the e4m3 codes
// 0..126 (amax = 6 * S; the zero scale from amax = 6 * 2^-10, its largest).
std::vector<bf16> admissible_rows(PageFormat f) {
  std::vector<uint32_t> amaxes;
  if (f == kMx) {
    for (int sc = 0; sc <= 246; ++sc)
      amaxes.push_back(f32_bits(std::ldexp(448.0f, sc - 127)) >> 16);
    amaxes.push_back(0x7f7f);
    amaxes.push_back(0x7f80);
  } else {
    amaxes.push_back(f32_bits(0.005859375f) >> 16);
    for (int c = 1; c <= 0x7e; ++c)
      amaxes.push_back(f32_bits(6.0f * e4m3_to_f32(uint8_t(c))) >> 16);
  }
  const size_t bv = size_t(page_block_values(f));
  std::vector<bf16> v;
  for (uint32_t amax : amaxes) {
    size_t in_block = 0;
    for (uint32_t mag = 0; mag <= std::min(amax, 0x7f7fu); ++mag)
      for (uint32_t sign : {0u, 0x8000u}) {
        if (in_block == 0) v.push_back(bf16{uint16_t(amax)}), in_block = 1;
        v.push_back(bf16{uint16_t(mag | sign)});
        if (++in_block == bv) in_block = 0;
      }
    while (in_block != 0 && in_block < bv) v.push_back(bf16{0}), ++in_block;
  }
  v.resize((v.size() + 511) / 512 * 512, bf16{0});
  return v;
}

class CompactPagesCodecs : public fx::GpuTest {};

TEST_F(CompactPagesCodecs, EveryAdmissibleValueAndScaleQuantizesLikeTheReference) {
  for (PageFormat f : {kMx, kNv}) {
    const std::vector<bf16> rows = admissible_rows(f);
    for (int lanes : {1, 2, 4}) {
      if (!kc::lanes_supported(f, lanes)) continue;
      SCOPED_TRACE(std::string(page_format_name(f)) + " lanes=" + std::to_string(lanes) + ", " +
                   std::to_string(rows.size() / 512) + " rows");
      const std::vector<uint8_t> pool = quantize_on_device(f, rows, lanes, stream());
      std::set<int> scales;  // the enumeration reached every scale it meant to
      for (size_t r = 0; r < rows.size() / 512; ++r)
        for (int b = 0; b < page_row_blocks(f); ++b)
          scales.insert(rc::block_scale(f, pool.data() + r * row_bytes(f), b));
      EXPECT_EQ(scales.size(), f == kMx ? 249u : 127u);
    }
  }
}

TEST_F(CompactPagesCodecs, EveryCodeAndScaleDequantizesLikeTheReference) {
  for (PageFormat f : {kMx, kNv}) {
    SCOPED_TRACE(page_format_name(f));
    const size_t bv = size_t(page_block_values(f)), blocks_per_scale = f == kMx ? 8 : 1;
    const size_t blocks = 256 * blocks_per_scale, rows = blocks / size_t(page_row_blocks(f));
    std::vector<uint8_t> pool(rows * row_bytes(f));
    for (size_t g = 0; g < blocks; ++g) {  // block g: scale g / blocks_per_scale
      uint8_t* row = pool.data() + (g / size_t(page_row_blocks(f))) * row_bytes(f);
      const size_t b = g % size_t(page_row_blocks(f));
      row[size_t(page_scale_offset(f)) + b] = uint8_t(g / blocks_per_scale);
      for (size_t i = 0; i < bv; ++i) {
        if (f == kMx)
          row[b * bv + i] = uint8_t((g % blocks_per_scale) * bv + i);  // codes 0..255 per scale
        else if (i % 2 == 0)
          row[(b * bv + i) / 2] = uint8_t(i | ((i + 1) << 4));  // nibbles 0..15
      }
    }
    dequantize_on_device<float>(f, pool, stream());
    dequantize_on_device<bf16>(f, pool, stream());
  }
}

// Rows whose every block follows one rule, quantised on the device: bitwise against the
// reference, and the documented bytes checked directly.
TEST_F(CompactPagesCodecs, SpecialBlocksGiveTheDocumentedBytes) {
  const uint64_t seed = fx::test_seed();
  fx::Rng rng(seed);
  enum Rule { kZeros, kHuge, kSubnormal, kNaN, kInf, kRules };
  std::vector<bf16> rows(kRules * 512);
  for (size_t i = 0; i < 512; ++i) {
    rows[kZeros * 512 + i] = bf16{uint16_t(i % 3 ? 0 : 0x8000)};
    rows[kHuge * 512 + i] = f32_to_bf16(i % 32 == 5 ? 3e30f : float(rng.normal()));
    rows[kSubnormal * 512 + i] = bf16{uint16_t(1 + i % 127)};
    rows[kNaN * 512 + i] = i % 16 == 3 ? bf16{0x7fc0} : f32_to_bf16(float(rng.normal()));
    rows[kInf * 512 + i] = i % 32 == 7 ? bf16{0xff80} : f32_to_bf16(float(rng.normal()));
  }
  for (PageFormat f : {kMx, kNv}) {
    DSV4_CASE(seed, page_format_name(f) << " rows: zeros, huge, subnormal, NaN, inf");
    const std::vector<uint8_t> p = quantize_on_device(f, rows, 0, stream());
    const size_t rb = row_bytes(f), so = size_t(page_scale_offset(f));
    auto row = [&](int r) { return p.begin() + long(r) * long(rb); };
    for (int b = 0; b < page_row_blocks(f); ++b) {
      // Zeros: MXFP8 the smallest scale 2^-127, NVFP4 a zero scale. Subnormals only: the same.
      EXPECT_EQ(int(row(kZeros)[so + b]), 0x00) << "zero block " << b;
      EXPECT_EQ(int(row(kSubnormal)[so + b]), 0x00) << "subnormal-only block " << b;
      if (f == kMx) {
        // 3e30 = 2^101.24: e = ceil(101.24 - log2(448) = 92.44) = 93.
        EXPECT_EQ(int(row(kHuge)[so + b]), 127 + 93) << "block with 3e30, " << b;
        EXPECT_EQ(int(row(kInf)[so + b]), 254) << "block with -inf: scale 2^127, " << b;
      } else {
        EXPECT_EQ(int(row(kNaN)[so + b]), 0x7f) << "a NaN makes the block's scale NaN, " << b;
        if (b % 2 == 0) {  // the 16-value blocks that hold the huge value and the infinity
          EXPECT_EQ(int(row(kHuge)[so + b]), 0x7e) << "3e30/6 saturates the scale at 448, " << b;
          EXPECT_EQ(int(row(kInf)[so + b]), 0x7e) << "inf/6 saturates the scale at 448, " << b;
        }
      }
    }
    for (size_t i = 0; i < so; ++i) {
      const int z = row(kZeros)[i], s = row(kSubnormal)[i];
      EXPECT_TRUE(f == kMx ? (z == 0x00 || z == 0x80) : (z & 0x77) == 0)
          << "zeros stay zeros, byte " << i;
      if (f == kNv) {
        EXPECT_EQ(int(row(kNaN)[i]), 0) << "NaN blocks hold zero codes, byte " << i;
        EXPECT_EQ(s, 0) << "zero scale: zero codes, byte " << i;
        if (i % 16 == 3) {
          EXPECT_EQ(int(row(kInf)[i]) >> 4, 0xf) << "-inf (value 7) saturates to -6";
        }
      } else {
        EXPECT_NE(s, 0) << "subnormals k*2^-133 at 2^-127 are e4m3 normals, byte " << i;
        if (i % 32 == 7) {
          EXPECT_EQ(int(row(kInf)[i]), 0xfe) << "-inf saturates to -448";
        }
        if (i % 16 == 3) {
          EXPECT_EQ(int(row(kNaN)[i]), 0x7f) << "NaN stays NaN";
        }
      }
    }
    // And back: NaN blocks give NaN, the rest their values.
    const std::vector<float> v = dequantize_on_device<float>(f, p, stream());
    EXPECT_TRUE(std::isnan(v[kNaN * 512 + 3]));
    if (f == kNv) {
      EXPECT_TRUE(std::isnan(v[kNaN * 512 + 4])) << "the whole NVFP4 block is NaN";
    }
    EXPECT_EQ(v[kZeros * 512 + 1], 0.0f);
  }
}

// Quantise on the device, dequantise on the device, against the input in fp64: every element
// within the bound dsv4/ref/compact_pages.hpp derives, NaN inputs back as NaN. Values at block
// scales 2^-40 .. 2^6 (NVFP4's bound needs amax <= 2784), with zeros, subnormals, NaN and
// infinities mixed in.
TEST_F(CompactPagesCodecs, RoundTripStaysWithinTheDerivedBound) {
  const uint64_t seed = fx::test_seed();
  const size_t T = 4096;
  for (PageFormat f : {kMx, kNv}) {
    DSV4_CASE(seed, page_format_name(f) << " T=" << T);
    fx::Rng rng(seed);
    std::vector<bf16> x(T * 512);
    for (size_t blk = 0; blk < T * 16; ++blk) {
      const float scale = std::ldexp(1.0f, int(rng.range(-40, 6)));
      for (size_t i = 0; i < 32; ++i) x[blk * 32 + i] = f32_to_bf16(float(rng.normal()) * scale);
      const double u = rng.uniform();
      const size_t at = blk * 32 + size_t(rng.range(0, 31));
      if (u < 0.03)
        x[at] = bf16{0x7fc0};
      else if (u < 0.06)
        x[at] = bf16{0xff80};
      else if (u < 0.09)
        x[at] = bf16{uint16_t(rng.range(0, 127))};
      else if (u < 0.12)
        x[at] = bf16{0x8000};
    }
    const std::vector<uint8_t> pool = quantize_on_device(f, x, 0, stream());
    const std::vector<float> out = dequantize_on_device<float>(f, pool, stream());
    const int bv = page_block_values(f);
    size_t checked = 0, bad = 0;
    for (size_t t = 0; t < T; ++t) {
      const uint8_t* row = pool.data() + t * row_bytes(f);
      for (int b = 0; b < page_row_blocks(f); ++b) {
        if (!rc::error_bound_applies(f, x.data() + t * 512 + size_t(b * bv))) continue;
        for (int i = b * bv; i < (b + 1) * bv; ++i) {
          const double xi = double(bf16_to_f32(x[t * 512 + size_t(i)]));
          const double got = double(out[t * 512 + size_t(i)]);
          const bool ok = std::isnan(xi) ? std::isnan(got)
                                         : std::fabs(got - xi) <=
                                               rc::error_bound(f, xi, rc::block_scale(f, row, b));
          if (!ok && bad++ < 8)
            ADD_FAILURE() << "row " << t << " value " << i << ": x=" << xi << " dequantised "
                          << got;
          ++checked;
        }
      }
    }
    EXPECT_EQ(bad, 0u);
    EXPECT_GT(checked, T * 400);
  }
}

}  // namespace
}  // namespace dsv4

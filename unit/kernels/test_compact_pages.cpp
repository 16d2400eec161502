// compact_pages kernels against the reference: quantise into whole poisoned page pools and
// dequantise into whole poisoned outputs, bit for bit, for both formats, every lane count, strides,
// hostile slot sets with the error counter, offsets past 2 GiB, graph replay, determinism, and the
// launchers' argument checks (those also run without a GPU). Every code point and special block on
// the device: test_compact_pages_codecs.cpp.
#include "dsv4/kernels/compact_pages.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "dsv4/fixtures/case_file.hpp"
#include "dsv4/fixtures/compare.hpp"
#include "dsv4/fixtures/device_buffer.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/fixtures/gpu_test.hpp"
#include "dsv4/fixtures/replay.hpp"
#include "dsv4/ref/compact_pages.hpp"

namespace dsv4 {
namespace {

namespace kc = kernels::compact_pages;
namespace rc = ref::compact_pages;
using fx::DeviceBuffer;
using fx::Shape;
using ::testing::HasSubstr;

constexpr PageFormat kMx = PageFormat::kMxfp8;
constexpr PageFormat kNv = PageFormat::kNvfp4;

size_t row_bytes(PageFormat f) { return size_t(page_row_bytes(f)); }

// bf16 rows [T, stride]. Each 32-value block holds normal values at its own power-of-two scale
// (anywhere in bf16's range), and about one block in five follows a special rule: all zeros
// (signed), one huge value among small ones, bf16 subnormals only, a NaN, an infinity. The gaps of
// a strided layout hold NaN: a kernel that reads them changes nothing only if it ignores them.
std::vector<bf16> page_rows(fx::Rng& rng, size_t T, size_t stride) {
  std::vector<bf16> v(T * stride, bf16{0x7fc0});
  for (size_t t = 0; t < T; ++t)
    for (size_t b = 0; b < 16; ++b) {
      bf16* x = v.data() + t * stride + 32 * b;
      const float scale = std::ldexp(1.0f, int(rng.range(-130, 120)));
      for (int i = 0; i < 32; ++i) x[i] = f32_to_bf16(float(rng.normal()) * scale);
      const double u = rng.uniform();
      const int at = int(rng.range(0, 31));
      if (u < 0.04) {
        for (int i = 0; i < 32; ++i) x[i] = bf16{uint16_t(rng.uniform() < 0.5 ? 0 : 0x8000)};
      } else if (u < 0.08) {
        x[at] = f32_to_bf16(float(rng.normal()) * scale * 1e4f);
      } else if (u < 0.12) {
        for (int i = 0; i < 32; ++i)
          x[i] = bf16{uint16_t(rng.range(0, 127) | (i % 2 ? 0x8000 : 0))};
      } else if (u < 0.16) {
        x[at] = bf16{uint16_t(rng.uniform() < 0.5 ? 0x7fc1 : 0xffc0)};
      } else if (u < 0.20) {
        x[at] = bf16{uint16_t(rng.uniform() < 0.5 ? 0x7f80 : 0xff80)};
      }
    }
  return v;
}

std::vector<uint8_t> bytes_of(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return std::vector<uint8_t>(b, b + n);
}

// ---- quantise ---------------------------------------------------------------------------------

// One quantise case on the device: src rows, slots, a NaN-poisoned (0xff) pool, the error counter;
// the reference pool starts from the same poison.
struct QuantCase {
  PageFormat f;
  int64_t T, R, stride;
  int lanes;
  DeviceBuffer<bf16> src;
  DeviceBuffer<int64_t> slots, errors;
  DeviceBuffer<uint8_t> pool;
  std::vector<uint8_t> want;
  rc::Outcome outcome;
  std::string name;
  uint64_t seed = 0;

  QuantCase(PageFormat fmt, int64_t t, int64_t r, int64_t s, int l = 0)
      : f(fmt),
        T(t),
        R(r),
        stride(s),
        lanes(l),
        src(size_t(t * s), "src"),
        slots(size_t(t), "slots"),
        errors(1, "errors"),
        pool(size_t(r) * row_bytes(fmt), "pool", fx::Poison::nan()) {}

  void draw(fx::Rng& rng, const fx::IndexMix& mix = {}) {
    src.upload(page_rows(rng, size_t(T), size_t(stride)));
    slots.upload(fx::hostile_indices(rng, size_t(T), R, mix).idx);
  }
  void enqueue(gpu::Stream s) {
    kc::quantize(f, src.data(), stride, slots.data(), T, pool.data(), R, errors.data(), s,
                 {.lanes_per_block = lanes});
  }
  void launch(gpu::Stream s) {
    pool.poison(s);
    kernels::reset_errors(errors.data(), s);
    enqueue(s);
  }
  void reference() {
    want.assign(pool.size(), pool.poison_value());
    outcome = rc::quantize(f, src.host(), size_t(stride), slots.host(), want, size_t(R));
  }
  // The case file a failing check leaves behind (dsv4-replay --family compact_pages).
  fx::Case as_case(int64_t got_errors) const {
    const std::vector<uint64_t> pool_shape = {uint64_t(R), row_bytes(f)};
    const char* fmt = page_format_name(f);
    return fx::Case{
        "compact_pages",
        name,
        seed,
        {{"pool", fx::st::Tensor::formatted(
                      fmt, pool_shape, std::vector<uint8_t>(pool.size(), pool.poison_value()))},
         {"slots", fx::st::Tensor::of(slots.host())},
         {"src", fx::st::Tensor::of<bf16>({uint64_t(T), uint64_t(stride)}, src.host())},
         {"lanes_per_block", fx::st::Tensor::scalar<int32_t>(lanes)}},
        {{"pool", fx::st::Tensor::formatted(fmt, pool_shape, want)},
         {"errors", fx::st::Tensor::scalar<int64_t>(outcome.rejected)}},
        {{"pool", fx::st::Tensor::formatted(fmt, pool_shape, pool.host())},
         {"errors", fx::st::Tensor::scalar<int64_t>(got_errors)}},
        {}};
  }
  // Whole pool bit for bit, the counter, and every buffer's canaries.
  void check(gpu::Stream s) {
    pool.download(s);
    const int64_t got_errors = kernels::read_errors(errors.data(), s);
    EXPECT_TRUE(fx::save_case_on_failure(
        fx::bitwise_equal(pool.host(), want, Shape{size_t(R), row_bytes(f)}, {.name = "pool"}),
        [&] { return as_case(got_errors); }));
    EXPECT_EQ(got_errors, outcome.rejected) << "error counter";
    for (auto* b : {&slots, &errors}) EXPECT_TRUE(b->guards_intact());
    EXPECT_TRUE(src.guards_intact());
    EXPECT_TRUE(pool.guards_intact());
  }
  fx::LaunchCase replay_case(fx::Rng& rng) {
    fx::LaunchCase c;
    c.write_inputs = [this, &rng](int, gpu::Stream) { draw(rng); };
    c.reset_outputs = [this](gpu::Stream s) {
      pool.poison(s);
      kernels::reset_errors(errors.data(), s);
    };
    c.launch = [this](gpu::Stream s) { enqueue(s); };
    c.read_outputs = [this](gpu::Stream s) {
      auto b = pool.download(s);
      const int64_t e = kernels::read_errors(errors.data(), s);
      const auto eb = bytes_of(&e, sizeof e);
      b.insert(b.end(), eb.begin(), eb.end());
      return b;
    };
    return c;
  }
};

struct QuantParam {
  PageFormat f;
  int lanes;
  int64_t T, stride;
};
std::string quant_name(const ::testing::TestParamInfo<QuantParam>& i) {
  return std::string(i.param.f == kMx ? "Mxfp8" : "Nvfp4") + "_L" + std::to_string(i.param.lanes) +
         "_T" + std::to_string(i.param.T) + "_S" + std::to_string(i.param.stride);
}
std::vector<QuantParam> quant_params() {
  std::vector<QuantParam> v;
  for (PageFormat f : {kMx, kNv})
    for (int lanes : {1, 2, 4})
      if (kc::lanes_supported(f, lanes))
        for (int64_t T : {0, 1, 7, 64, 4096, 65536})
          for (int64_t stride : {512, 576}) v.push_back({f, lanes, T, stride});
  return v;
}

class CompactPagesQuantize : public fx::GpuTestWithParam<QuantParam> {};

TEST_P(CompactPagesQuantize, WholePoolMatchesReference) {
  const auto [f, lanes, T, stride] = GetParam();
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, page_format_name(f)
                      << " lanes=" << lanes << " T=" << T << " src_stride=" << stride);
  fx::Rng rng(seed);
  QuantCase c(f, T, T + T / 2 + 3, stride, lanes);
  c.name = quant_name({GetParam(), 0});
  c.seed = seed;
  c.draw(rng);
  c.launch(stream());
  c.reference();
  c.check(stream());
}

INSTANTIATE_TEST_SUITE_P(Shapes, CompactPagesQuantize, ::testing::ValuesIn(quant_params()),
                         quant_name);

// ---- dequantise ------------------------------------------------------------------------------

// One dequantise case: a pool of page rows (half quantised from real rows, half random bytes, so
// every byte pattern is decoded, NaN scales and negative scales included), slots (a gather may
// read a row twice), a NaN-poisoned output.
template <class Out>
struct DequantCase {
  PageFormat f;
  int64_t T, R, stride;
  DeviceBuffer<uint8_t> pool;
  DeviceBuffer<int64_t> slots, errors;
  DeviceBuffer<Out> out;
  std::vector<Out> want;
  rc::Outcome outcome;
  std::string name;
  uint64_t seed = 0;

  DequantCase(PageFormat fmt, int64_t t, int64_t r, int64_t s)
      : f(fmt),
        T(t),
        R(r),
        stride(s),
        pool(size_t(r) * row_bytes(fmt), "pool"),
        slots(size_t(t), "slots"),
        errors(1, "errors"),
        out(size_t(t * s), "out") {}

  void draw(fx::Rng& rng) {
    auto& p = pool.host();
    const size_t rb = row_bytes(f);
    const std::vector<bf16> rows = page_rows(rng, size_t(R + 1) / 2, 512);
    for (size_t r = 0; r < size_t(R); ++r) {
      if (r % 2 == 0)
        rc::quantize_row(f, rows.data() + (r / 2) * 512, p.data() + r * rb);
      else
        for (size_t i = 0; i < rb; ++i) p[r * rb + i] = uint8_t(rng.next());
    }
    pool.upload();
    slots.upload(fx::hostile_indices(rng, size_t(T), R, {.unique_valid = false}).idx);
  }
  void enqueue(gpu::Stream s) {
    kc::dequantize(f, pool.data(), R, slots.data(), T, out.data(), stride, errors.data(), s);
  }
  void launch(gpu::Stream s) {
    out.poison(s);
    kernels::reset_errors(errors.data(), s);
    enqueue(s);
  }
  void reference() {
    want.assign(out.size(), out.poison_value());
    outcome = rc::dequantize(f, pool.host(), size_t(R), slots.host(), want, size_t(stride));
  }
  fx::Case as_case(int64_t got_errors) const {
    const std::vector<uint64_t> shape = {uint64_t(T), uint64_t(stride)};
    return fx::Case{
        "compact_pages",
        name,
        seed,
        {{"pool",
          fx::st::Tensor::formatted(page_format_name(f), {uint64_t(R), row_bytes(f)}, pool.host())},
         {"slots", fx::st::Tensor::of(slots.host())},
         {"out", fx::st::Tensor::of<Out>(shape, std::vector<Out>(out.size(), out.poison_value()))}},
        {{"out", fx::st::Tensor::of<Out>(shape, want)},
         {"errors", fx::st::Tensor::scalar<int64_t>(outcome.rejected)}},
        {{"out", fx::st::Tensor::of<Out>(shape, out.host())},
         {"errors", fx::st::Tensor::scalar<int64_t>(got_errors)}},
        {}};
  }
  void check(gpu::Stream s) {
    out.download(s);
    const int64_t got_errors = kernels::read_errors(errors.data(), s);
    EXPECT_TRUE(fx::save_case_on_failure(
        fx::bitwise_equal(out.host(), want, Shape{size_t(T), size_t(stride)}, {.name = "out"}),
        [&] { return as_case(got_errors); }));
    EXPECT_EQ(got_errors, outcome.rejected) << "error counter";
    EXPECT_TRUE(pool.guards_intact());
    EXPECT_TRUE(slots.guards_intact());
    EXPECT_TRUE(errors.guards_intact());
    EXPECT_TRUE(out.guards_intact());
  }
  fx::LaunchCase replay_case(fx::Rng& rng) {
    fx::LaunchCase c;
    c.write_inputs = [this, &rng](int, gpu::Stream) { draw(rng); };
    c.reset_outputs = [this](gpu::Stream s) {
      out.poison(s);
      kernels::reset_errors(errors.data(), s);
    };
    c.launch = [this](gpu::Stream s) { enqueue(s); };
    c.read_outputs = [this](gpu::Stream s) {
      out.download(s);
      auto b = bytes_of(out.host().data(), out.bytes());
      const int64_t e = kernels::read_errors(errors.data(), s);
      const auto eb = bytes_of(&e, sizeof e);
      b.insert(b.end(), eb.begin(), eb.end());
      return b;
    };
    return c;
  }
};

struct DequantParam {
  PageFormat f;
  bool bf16_out;
  int64_t T, stride;
};
std::string dequant_name(const ::testing::TestParamInfo<DequantParam>& i) {
  return std::string(i.param.f == kMx ? "Mxfp8" : "Nvfp4") + (i.param.bf16_out ? "_Bf16" : "_F32") +
         "_T" + std::to_string(i.param.T) + "_S" + std::to_string(i.param.stride);
}
std::vector<DequantParam> dequant_params() {
  std::vector<DequantParam> v;
  for (PageFormat f : {kMx, kNv})
    for (bool b : {false, true})
      for (int64_t T : {0, 1, 7, 64, 4096, 65536})
        for (int64_t stride : {512, 520}) v.push_back({f, b, T, stride});
  return v;
}

class CompactPagesDequantize : public fx::GpuTestWithParam<DequantParam> {};

template <class Out>
void run_dequant_case(const DequantParam& p, const std::string& name, gpu::Stream s) {
  const uint64_t seed = fx::test_seed();
  DSV4_CASE(seed, page_format_name(p.f) << (p.bf16_out ? " bf16" : " fp32") << " out, T=" << p.T
                                        << " out_stride=" << p.stride);
  fx::Rng rng(seed);
  DequantCase<Out> c(p.f, p.T, 3 * p.T / 4 + 5, p.stride);
  c.name = name;
  c.seed = seed;
  c.draw(rng);
  c.launch(s);
  c.reference();
  c.check(s);
}

TEST_P(CompactPagesDequantize, WholeOutputMatchesReference) {
  const std::string name = dequant_name({GetParam(), 0});
  if (GetParam().bf16_out)
    run_dequant_case<bf16>(GetParam(), name, stream());
  else
    run_dequant_case<float>(GetParam(), name, stream());
}

INSTANTIATE_TEST_SUITE_P(Shapes, CompactPagesDequantize, ::testing::ValuesIn(dequant_params()),
                         dequant_name);

// ---- hostile slots, large offsets ------------------------------------------------------------

class CompactPages : public fx::GpuTest {};

// Mostly hostile slot sets: nothing written outside the pool or into an untargeted row, the
// counter equals the rejected rows; a second launch adds to the counter, never resets it.
TEST_F(CompactPages, HostileSlotsAndAnAccumulatingCounter) {
  const uint64_t seed = fx::test_seed();
  const fx::IndexMix mix{.valid = 0.3, .minus_one = 0.2, .negative = 0.2, .out_of_range = 0.3};
  for (PageFormat f : {kMx, kNv})
    for (int round = 0; round < 3; ++round) {
      DSV4_CASE(seed + round, page_format_name(f) << " T=4096 R=1000 round=" << round);
      fx::Rng rng(seed + round);
      QuantCase q(f, 4096, 1000, 512);
      q.draw(rng, mix);
      q.launch(stream());
      q.reference();
      ASSERT_GT(q.outcome.rejected, 0);
      q.check(stream());
      q.enqueue(stream());
      EXPECT_EQ(kernels::read_errors(q.errors.data(), stream()), 2 * q.outcome.rejected);

      DequantCase<bf16> d(f, 4096, 1000, 512);
      d.draw(rng);
      d.slots.upload(q.slots.host());
      d.launch(stream());
      d.reference();
      d.check(stream());
    }
}

// Pool byte offsets past 2 GiB (slot * row bytes > 2^31): rows written near the end of a
// 2.2 GB pool and read back; the pool is compared slab by slab.
TEST_F(CompactPages, OffsetsPastTwoGiB) {
  const uint64_t seed = fx::test_seed();
  for (PageFormat f : {kMx, kNv}) {
    const size_t rb = row_bytes(f);
    const int64_t R = int64_t((size_t(1) << 31) / rb) + 8192;
    if (gpu::device_info().total_memory < 3 * size_t(R) * rb)
      GTEST_SKIP() << "needs about " << 3 * size_t(R) * rb / (1 << 30) << " GiB of device memory";
    DSV4_CASE(seed, page_format_name(f) << " T=4096 R=" << R);
    fx::Rng rng(seed);
    QuantCase q(f, 4096, R, 512);
    q.draw(rng);
    auto& slots = q.slots.host();  // half the rows in the last 8192 rows, the rest hostile
    const auto tail = fx::distinct_indices(rng, 2048, 8192);
    for (size_t t = 0; t < 2048; ++t) {
      slots[2 * t] = R - 8192 + tail[t];
      if (slots[2 * t + 1] >= R - 8192 && slots[2 * t + 1] < R) slots[2 * t + 1] = -1;
    }
    q.slots.upload();
    q.launch(stream());
    q.reference();
    q.pool.download(stream());
    const size_t slab = size_t(1) << 16;  // rows
    for (size_t r0 = 0; r0 < size_t(R); r0 += slab) {
      const size_t n = std::min(slab, size_t(R) - r0) * rb;
      if (std::memcmp(q.pool.host().data() + r0 * rb, q.want.data() + r0 * rb, n) == 0) continue;
      ADD_FAILURE() << fx::bitwise_equal(
                           std::span<const uint8_t>(q.pool.host().data() + r0 * rb, n),
                           std::span<const uint8_t>(q.want.data() + r0 * rb, n), Shape{n / rb, rb},
                           {.name = "pool rows from " + std::to_string(r0)})
                           .message();
      break;
    }
    EXPECT_EQ(kernels::read_errors(q.errors.data(), stream()), q.outcome.rejected);
    EXPECT_TRUE(q.pool.guards_intact());

    DeviceBuffer<float> out(4096 * 512, "out");  // and back out of the far rows
    kernels::reset_errors(q.errors.data(), stream());
    kc::dequantize(f, q.pool.data(), R, q.slots.data(), 4096, out.data(), 0, q.errors.data(),
                   stream());
    std::vector<float> want(out.size(), out.poison_value());
    const rc::Outcome o = rc::dequantize(f, q.want, size_t(R), slots, want, 0);
    EXPECT_TRUE(fx::bitwise_equal(out.download(stream()), want, Shape{4096, 512}, {.name = "out"}));
    EXPECT_EQ(kernels::read_errors(q.errors.data(), stream()), o.rejected);
    EXPECT_TRUE(out.guards_intact());
  }
}

// ---- graph replay and determinism ------------------------------------------------------------

TEST_F(CompactPages, GraphReplayMatchesEagerAndIsDeterministic) {
  const uint64_t seed = fx::test_seed();
  for (PageFormat f : {kMx, kNv}) {
    fx::Rng rng(seed);
    {
      DSV4_CASE(seed, page_format_name(f) << " quantise T=4096 R=6000 src_stride=576");
      QuantCase q(f, 4096, 6000, 576);
      const fx::LaunchCase lq = q.replay_case(rng);
      EXPECT_TRUE(fx::graph_replay_matches_eager(lq, stream()));
      EXPECT_TRUE(fx::deterministic(lq, stream(), 20));
      EXPECT_TRUE(q.pool.guards_intact());
    }
    {
      DSV4_CASE(seed, page_format_name(f) << " dequantise T=4096 R=3000 out_stride=520");
      DequantCase<bf16> d(f, 4096, 3000, 520);
      const fx::LaunchCase ld = d.replay_case(rng);
      EXPECT_TRUE(fx::graph_replay_matches_eager(ld, stream()));
      EXPECT_TRUE(fx::deterministic(ld, stream(), 20));
      EXPECT_TRUE(d.out.guards_intact());
    }
  }
}

// ---- launcher argument checks (no device needed) ---------------------------------------------

// Fake device pointers: never dereferenced, the checks throw before any launch.
template <class T>
T* fake(uintptr_t at = 4096) {
  return reinterpret_cast<T*>(at);
}

std::string launch_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no invalid_argument";
}

TEST(CompactPagesLauncher, EmptyBatchLaunchesNothing) {
  // In the cpu preset any launch throws "no GPU backend"; n_rows = 0 must not get that far.
  for (PageFormat f : {kMx, kNv}) {
    EXPECT_NO_THROW(kc::quantize(f, nullptr, 0, nullptr, 0, nullptr, 0, nullptr, nullptr));
    EXPECT_NO_THROW(kc::dequantize(f, nullptr, 0, nullptr, 0, fake<float>(), 0, nullptr, nullptr));
    EXPECT_NO_THROW(kc::dequantize(f, nullptr, 0, nullptr, 0, fake<bf16>(), 0, nullptr, nullptr));
  }
}

TEST(CompactPagesLauncher, BadArgumentsNameTheField) {
  const auto* src = fake<const bf16>();
  const auto* slots = fake<const int64_t>();
  auto* pool = fake<uint8_t>();
  auto* err = fake<int64_t>();
  auto q = [&](PageFormat f, int64_t n, int64_t stride, kc::Options o = {},
               const bf16* s = fake<const bf16>(), uint8_t* p = fake<uint8_t>(),
               int64_t* e = fake<int64_t>(), int64_t R = 10) {
    return launch_error([&] { kc::quantize(f, s, stride, slots, n, p, R, e, nullptr, o); });
  };
  EXPECT_THAT(q(PageFormat(3), 4, 0), HasSubstr("format=3"));
  EXPECT_THAT(q(kMx, 4, 0, {.lanes_per_block = 3}), HasSubstr("lanes_per_block=3"));
  EXPECT_THAT(q(kNv, 4, 0, {.lanes_per_block = 4}), HasSubstr("lanes_per_block=4"));
  EXPECT_THAT(q(kMx, -1, 0), HasSubstr("n_rows=-1"));
  EXPECT_THAT(q(kMx, int64_t(1) << 31, 0), HasSubstr("n_rows=2147483648"));
  EXPECT_THAT(q(kMx, 4, 100), HasSubstr("src_stride=100"));
  EXPECT_THAT(q(kMx, 4, 516), HasSubstr("src_stride=516"));
  EXPECT_THAT(q(kMx, 0, 100), HasSubstr("src_stride=100")) << "checked even when n_rows = 0";
  EXPECT_THAT(q(kMx, 4, 0, {}, src, pool, err, -1), HasSubstr("pool_rows=-1"));
  EXPECT_THAT(q(kMx, 4, 0, {}, nullptr), HasSubstr("src is null"));
  EXPECT_THAT(q(kMx, 4, 0, {}, src, nullptr), HasSubstr("pool is null"));
  EXPECT_THAT(q(kMx, 4, 0, {}, src, pool, nullptr), HasSubstr("errors is null"));
  EXPECT_THAT(q(kMx, 4, 0, {}, fake<const bf16>(4098)), HasSubstr("src is not 16-byte"));
  EXPECT_THAT(q(kNv, 4, 0, {}, src, fake<uint8_t>(4104)), HasSubstr("pool is not 16-byte"));

  auto d = [&](PageFormat f, int64_t stride, float* out = fake<float>(),
               const int64_t* sl = fake<const int64_t>()) {
    return launch_error([&] { kc::dequantize(f, pool, 10, sl, 4, out, stride, err, nullptr); });
  };
  EXPECT_THAT(d(PageFormat(-1), 0), HasSubstr("format=-1"));
  EXPECT_THAT(d(kMx, 511), HasSubstr("out_stride=511"));
  EXPECT_THAT(d(kNv, 0, nullptr), HasSubstr("out is null"));
  EXPECT_THAT(d(kNv, 0, fake<float>(4100)), HasSubstr("out is not 16-byte"));
  EXPECT_THAT(d(kMx, 0, fake<float>(), nullptr), HasSubstr("slots is null"));
  EXPECT_TRUE(kc::lanes_supported(kMx, 4));
  EXPECT_FALSE(kc::lanes_supported(kNv, 4));
}

}  // namespace
}  // namespace dsv4

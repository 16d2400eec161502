// Replay adapter for compact_pages: quantise bf16 rows into MXFP8-528 / NVFP4-288 page rows, and
// dequantise page rows back to fp32 or bf16.
#include <string>
#include <vector>

#include "dsv4/fixtures/compare.hpp"
#include "dsv4/fixtures/device_buffer.hpp"
#include "dsv4/kernels/compact_pages.hpp"
#include "dsv4/kernels/error_counter.hpp"
#include "dsv4/ref/compact_pages.hpp"
#include "dsv4/replay/replay.hpp"

namespace dsv4::replay {
namespace {

namespace ref = ::dsv4::ref::compact_pages;
namespace kern = ::dsv4::kernels::compact_pages;

// The case, read and checked. Both directions: in.pool U8 [R, 528 or 288] (the page rows; the row
// size picks the format, and a "<tensor>.format" entry, when present, must agree), in.slots I64
// [T]. Quantise when in.src BF16 [T, S] is given (S >= 512); optional in.lanes_per_block I32 for
// the kernel. Dequantise otherwise: in.out F32 or BF16 [T, S] is the output buffer before the
// gather (its dtype picks the output type; rows of skipped slots keep it).
struct PageCase {
  PageFormat format = PageFormat::kMxfp8;
  std::vector<uint8_t> pool;
  std::vector<uint64_t> pool_shape;
  size_t rows = 0, T = 0;
  std::vector<int64_t> slots;
  bool quantize = false;
  std::vector<bf16> src;
  size_t stride = 0;  // src_stride or out_stride
  const st::Tensor* out = nullptr;
  int32_t lanes_per_block = 0;
};

PageCase read(const fx::Case& c) {
  PageCase k;
  const st::Tensor& pool = c.input("pool");
  k.pool = pool.values<uint8_t>("in.pool");
  if (pool.shape.size() != 2 || (pool.shape[1] != 528 && pool.shape[1] != 288))
    pool.throw_shape("in.pool", "[rows, 528] (mxfp8_528) or [rows, 288] (nvfp4_288)");
  k.format = pool.shape[1] == 528 ? PageFormat::kMxfp8 : PageFormat::kNvfp4;
  if (!pool.format.empty() && pool.format != page_format_name(k.format))
    throw st::FormatError("case", "in.pool", "format",
                          "declares '" + pool.format + "' but rows of " +
                              std::to_string(pool.shape[1]) + " bytes are " +
                              page_format_name(k.format));
  k.pool_shape = pool.shape;
  k.rows = pool.shape[0];
  k.slots = c.input("slots").values<int64_t>("in.slots");
  k.T = k.slots.size();
  k.quantize = c.has_input("src");
  const st::Tensor& rows = c.input(k.quantize ? "src" : "out");
  const std::string name = k.quantize ? "in.src" : "in.out";
  if (rows.shape.size() != 2 || rows.shape[0] != k.T || rows.shape[1] < ref::kRowValues)
    rows.throw_shape(name, "[" + std::to_string(k.T) + ", S] with S >= 512 (one row per slot)");
  k.stride = rows.shape[1];
  if (k.quantize) {
    k.src = rows.values<bf16>(name);
    if (c.has_input("lanes_per_block"))
      k.lanes_per_block = c.input("lanes_per_block").item<int32_t>("in.lanes_per_block");
  } else {
    if (rows.dtype != st::DType::F32 && rows.dtype != st::DType::BF16)
      throw st::FormatError("case", name, "dtype",
                            std::string("is ") + st::dtype_name(rows.dtype) +
                                ", expected F32 or BF16 (the output type)");
    k.out = &rows;
  }
  return k;
}

st::Tensor pool_tensor(const PageCase& k, std::vector<uint8_t> bytes) {
  return st::Tensor::formatted(page_format_name(k.format), k.pool_shape, std::move(bytes));
}

Outputs reference(const fx::Case& c) {
  const PageCase k = read(c);
  if (k.quantize) {
    std::vector<uint8_t> pool = k.pool;
    const ref::Outcome o = ref::quantize(k.format, k.src, k.stride, k.slots, pool, k.rows);
    return {{"pool", pool_tensor(k, std::move(pool))},
            {"errors", st::Tensor::scalar<int64_t>(o.rejected)}};
  }
  ref::Outcome o;
  st::Tensor out = *k.out;
  if (out.dtype == st::DType::F32) {
    std::vector<float> v = out.values<float>("in.out");
    o = ref::dequantize(k.format, k.pool, k.rows, k.slots, v, k.stride);
    out = st::Tensor::of<float>(out.shape, v);
  } else {
    std::vector<bf16> v = out.values<bf16>("in.out");
    o = ref::dequantize(k.format, k.pool, k.rows, k.slots, v, k.stride);
    out = st::Tensor::of<bf16>(out.shape, v);
  }
  return {{"out", out}, {"errors", st::Tensor::scalar<int64_t>(o.rejected)}};
}

template <class T>
st::Tensor dequantize_on_device(const PageCase& k, const fx::DeviceBuffer<uint8_t>& pool,
                                const fx::DeviceBuffer<int64_t>& slots,
                                fx::DeviceBuffer<int64_t>& errors, DeviceRun& run, gpu::Stream s) {
  fx::DeviceBuffer<T> out(k.out->values<T>("in.out"), "out");
  kern::dequantize(k.format, pool.data(), int64_t(k.rows), slots.data(), int64_t(k.T), out.data(),
                   int64_t(k.stride), errors.data(), s);
  st::Tensor t = st::Tensor::of<T>(k.out->shape, out.download(s));
  gpu::synchronize(s);
  if (auto g = out.guards_intact(); !g) run.failures.push_back(g.message());
  return t;
}

DeviceRun device(const fx::Case& c) {
  const PageCase k = read(c);
  if (k.quantize && k.lanes_per_block != 0 && !kern::lanes_supported(k.format, k.lanes_per_block))
    throw st::FormatError("case", "in.lanes_per_block", "value",
                          std::to_string(k.lanes_per_block) +
                              " lanes per block is not supported "
                              "for " +
                              page_format_name(k.format));
  gpu::StreamHandle s;
  fx::DeviceBuffer<uint8_t> pool(k.pool, "pool");
  fx::DeviceBuffer<int64_t> slots(k.slots, "in.slots");
  fx::DeviceBuffer<int64_t> errors(std::vector<int64_t>{0}, "errors");
  DeviceRun run;
  if (k.quantize) {
    fx::DeviceBuffer<bf16> src(k.src, "in.src");
    kern::Options opt;
    opt.lanes_per_block = k.lanes_per_block;
    kern::quantize(k.format, src.data(), int64_t(k.stride), slots.data(), int64_t(k.T), pool.data(),
                   int64_t(k.rows), errors.data(), s, opt);
    run.outputs["pool"] = pool_tensor(k, pool.download(s));
    gpu::synchronize(s);
    if (auto g = src.guards_intact(); !g) run.failures.push_back(g.message());
  } else {
    run.outputs["out"] = k.out->dtype == st::DType::F32
                             ? dequantize_on_device<float>(k, pool, slots, errors, run, s)
                             : dequantize_on_device<bf16>(k, pool, slots, errors, run, s);
  }
  run.outputs["errors"] = st::Tensor::scalar<int64_t>(kernels::read_errors(errors.data(), s));
  gpu::check_last_error("compact_pages replay");
  if (auto g = pool.guards_intact(); !g) run.failures.push_back(g.message());
  if (auto g = slots.guards_intact(); !g) run.failures.push_back(g.message());
  return run;
}

// Every output is bitwise: quantisation is exact rounding of exact quotients, dequantisation is
// exact in fp32 (bf16 output rounds that value once).
::testing::AssertionResult compare(const std::string& output, const st::Tensor& got,
                                   const st::Tensor& want, const fx::Case&) {
  if (got.shape != want.shape || got.dtype != want.dtype)
    return ::testing::AssertionFailure()
           << output << ": " << st::dtype_name(got.dtype) << got.shape_str() << " under test, "
           << st::dtype_name(want.dtype) << want.shape_str() << " expected";
  fx::Options opt;
  opt.name = output;
  std::vector<size_t> dims(got.shape.begin(), got.shape.end());
  const fx::Shape shape(dims);
  const std::string g = "got." + output, w = "want." + output;
  switch (got.dtype) {
    case st::DType::U8:
      return fx::bitwise_equal(got.values<uint8_t>(g), want.values<uint8_t>(w), shape, opt);
    case st::DType::F32:
      return fx::bitwise_equal(got.values<float>(g), want.values<float>(w), shape, opt);
    case st::DType::BF16:
      return fx::bitwise_equal(got.values<bf16>(g), want.values<bf16>(w), shape, opt);
    case st::DType::I64:
      return fx::bitwise_equal(got.values<int64_t>(g), want.values<int64_t>(w), fx::Shape{}, opt);
    default:
      throw st::FormatError(
          "case", g, "dtype",
          std::string("compact_pages has no ") + st::dtype_name(got.dtype) + " output");
  }
}

Family make() {
  Family f;
  f.name = "compact_pages";
  f.summary =
      "in.pool U8[R, 528 | 288] (mxfp8_528 | nvfp4_288 page rows, the pool before), in.slots "
      "I64[T]; quantise when in.src BF16[T, S>=512] is given (optional in.lanes_per_block I32) -> "
      "pool U8[R, bytes], errors I64; else dequantise into in.out F32|BF16[T, S>=512] (the "
      "buffer before) -> out, errors I64. Bitwise";
  f.reference = reference;
  f.device = device;
  f.compare = compare;
  return f;
}

}  // namespace
}  // namespace dsv4::replay

DSV4_REPLAY_FAMILY(::dsv4::replay::make())

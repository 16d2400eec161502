// Replay adapter for smoke: out = x * scale + bias in fp32 (the kernel with planted faults).
#include <string>
#include <vector>

#include "dsv4/fixtures/compare.hpp"
#include "dsv4/fixtures/device_buffer.hpp"
#include "dsv4/kernels/smoke.hpp"
#include "dsv4/replay/replay.hpp"

namespace dsv4::replay {
namespace {

namespace smoke = kernels::smoke;

// The specification of smoke (it has no reference library file): one fp32 multiply, one fp32
// add, no contraction (the kernels and this file are built with contraction off).
std::vector<float> affine(const std::vector<float>& x, float scale, float bias) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float p = x[i] * scale;
    out[i] = p + bias;
  }
  return out;
}

struct Inputs {
  const st::Tensor* x;
  std::vector<float> xs;
  float scale, bias;
};

Inputs inputs(const fx::Case& c) {
  Inputs in{&c.input("x"), {}, 0, 0};
  in.xs = in.x->values<float>("in.x");
  in.scale = c.input("scale").item<float>("in.scale");
  in.bias = c.input("bias").item<float>("in.bias");
  return in;
}

st::Tensor out_like(const st::Tensor& x, const std::vector<float>& v) {
  return st::Tensor::of<float>(x.shape, v);
}

Outputs reference(const fx::Case& c) {
  const Inputs in = inputs(c);
  return {{"out", out_like(*in.x, affine(in.xs, in.scale, in.bias))}};
}

// The launcher's planted-fault parameters are inputs too (in.fault I32, in.at I64, both
// optional), so a case saved from a fault test reproduces on the device; the reference ignores
// them.
DeviceRun device(const fx::Case& c) {
  const Inputs in = inputs(c);
  const int32_t fault = c.has_input("fault") ? c.input("fault").item<int32_t>("in.fault") : 0;
  const int64_t at = c.has_input("at") ? c.input("at").item<int64_t>("in.at") : 0;
  if (fault < 0 || fault > int32_t(smoke::Fault::kSkip))
    throw st::FormatError("case", "in.fault", "value",
                          std::to_string(fault) + " is not a smoke::Fault (0.." +
                              std::to_string(int(smoke::Fault::kSkip)) + ")");
  if (at < 0) throw st::FormatError("case", "in.at", "value", std::to_string(at) + " < 0");
  const size_t n = in.xs.size();
  gpu::StreamHandle stream;
  fx::DeviceBuffer<float> x(in.xs, "in.x");
  fx::DeviceBuffer<float> out(n, "out");
  out.poison(stream);
  smoke::affine(x.data(), out.data(), n, in.scale, in.bias, smoke::Fault(fault), size_t(at),
                stream);
  gpu::synchronize(stream);
  gpu::check_last_error("smoke::affine");
  DeviceRun run;
  run.outputs["out"] = out_like(*in.x, out.download(stream));
  gpu::synchronize(stream);
  if (auto g = out.guards_intact(); !g) run.failures.push_back(g.message());
  if (auto g = x.guards_intact(); !g) run.failures.push_back(g.message());
  return run;
}

::testing::AssertionResult compare(const std::string& output, const st::Tensor& got,
                                   const st::Tensor& want, const fx::Case&) {
  if (got.shape != want.shape)
    return ::testing::AssertionFailure() << output << ": shape " << got.shape_str()
                                         << " under test, " << want.shape_str() << " expected";
  const auto g = got.values<float>("got." + output);
  const auto w = want.values<float>("want." + output);
  fx::Options opt;
  opt.name = output;
  std::vector<size_t> dims(got.shape.begin(), got.shape.end());
  return fx::bitwise_equal(g, w, fx::Shape(dims), opt);
}

Family make() {
  Family f;
  f.name = "smoke";
  f.summary =
      "in.x F32[any shape], in.scale F32 (one element), in.bias F32 (one element), optional "
      "in.fault I32 and in.at I64 (planted-fault launcher parameters, device only) -> out F32 "
      "like in.x = x*scale + bias; bitwise comparison";
  f.reference = reference;
  f.device = device;
  f.compare = compare;
  return f;
}

}  // namespace
}  // namespace dsv4::replay

DSV4_REPLAY_FAMILY(::dsv4::replay::make())

// smoke kernel case and replay adapter: out = x * scale + bias in fp32 (the kernel with faults).
#include "dsv4/cases/smoke.hpp"

#include <sstream>

#include "dsv4/cases/declared_inputs.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/replay/replay.hpp"
#include "dsv4/replay/shaped_family.hpp"

namespace dsv4::cases {
namespace {

namespace st = fx::st;
using kernels::smoke::Fault;

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

const st::Tensor& input(const fx::Tensors& in, const std::string& name) {
  return fx::input_of(in, name, "smoke");
}

}  // namespace

fx::Vars SmokeShape::vars() const {
  fx::Vars v;
  v.add("n", int64_t(n));
  if (fault != Fault::kNone) v.add("fault", int64_t(fault)).add("at", int64_t(at));
  return v;
}

SmokeShape SmokeShape::from_vars(fx::VarsReader& r) {
  SmokeShape s;
  s.n = size_t(r.num("n", int64_t(s.n)));
  s.fault = Fault(r.num("fault", int64_t(s.fault)));
  s.at = size_t(r.num("at", int64_t(s.at)));
  return s;
}

std::vector<fx::Sweep<SmokeShape>> smoke_gpu_sweep() {
  return {{{}, fx::Launch::kEager}, {{}, fx::Launch::kGraph}, {{.n = 0}}};
}

std::vector<fx::Sweep<SmokeShape>> smoke_faults_sweep() {
  std::vector<fx::Sweep<SmokeShape>> v;
  for (int f = 1; f <= int(Fault::kSpin); ++f)
    if (Fault(f) != Fault::kSpin) v.push_back({{.fault = Fault(f), .at = 5}});
  return v;
}

std::vector<fx::NamedSweep<SmokeShape>> SmokeCase::sweeps() {
  return {{"gpu", smoke_gpu_sweep}, {"faults", smoke_faults_sweep}};
}

SmokeCase::SmokeCase(const fx::Tensors& in, const SmokeShape& stated) : ShapedCase(stated) {
  shape_.n = input(in, "x").values<float>("in.x").size();
  shape_.scale = input(in, "scale").item<float>("in.scale");
  shape_.bias = input(in, "bias").item<float>("in.bias");
  const int32_t fault = in.count("fault") ? input(in, "fault").item<int32_t>("in.fault") : 0;
  const int64_t at = in.count("at") ? input(in, "at").item<int64_t>("in.at") : 0;
  if (fault < 0 || fault > int32_t(Fault::kSpin))
    throw st::FormatError("case", "in.fault", "value",
                          std::to_string(fault) + " is not a smoke::Fault (0.." +
                              std::to_string(int(Fault::kSpin)) + ")");
  if (at < 0) throw st::FormatError("case", "in.at", "value", std::to_string(at) + " < 0");
  shape_.fault = Fault(fault);
  shape_.at = size_t(at);
}

fx::Tensors SmokeCase::draw(fx::Rng& rng) const {
  fx::Tensors in;
  in["x"] = st::Tensor::of<float>(fx::uniform_f32(rng, shape_.n, -4, 4));
  const float scale = shape_.draw_scalars ? float(rng.range(1, 8)) : shape_.scale;
  const float bias = shape_.draw_scalars ? float(rng.range(-8, 8)) : shape_.bias;
  in["scale"] = st::Tensor::scalar<float>(scale);
  in["bias"] = st::Tensor::scalar<float>(bias);
  in["fault"] = st::Tensor::scalar<int32_t>(int32_t(shape_.fault));
  in["at"] = st::Tensor::scalar<int64_t>(int64_t(shape_.at));
  return in;
}

std::vector<fx::OutputSpec> SmokeCase::outputs(const fx::Tensors& in) const {
  return {{.name = "out", .dtype = st::DType::F32, .shape = input(in, "x").shape}};
}

fx::Tensors SmokeCase::reference(const fx::Tensors& in) const {
  const st::Tensor& x = input(in, "x");
  return {{"out",
           st::Tensor::of<float>(
               x.shape, affine(x.values<float>("in.x"), input(in, "scale").item<float>("in.scale"),
                               input(in, "bias").item<float>("in.bias")))}};
}

// The scalars are read on the host when the launch is enqueued: a captured graph keeps them.
void SmokeCase::launch(const fx::DeviceTensors& d, gpu::Stream s) const {
  kernels::smoke::affine(d.ptr<float>("x"), d.ptr<float>("out"), shape_.n, d.scalar<float>("scale"),
                         d.scalar<float>("bias"), shape_.fault, shape_.at, s);
}

InputDecls SmokeCase::declared_inputs() {
  return {{"x", st::DType::F32, {"..."}},
          {"scale", st::DType::F32, {"..."}, false, "one element"},
          {"bias", st::DType::F32, {"..."}, false, "one element"},
          {"fault", st::DType::I32, {}, true, "a planted fault, device only"},
          {"at", st::DType::I64, {}, true, "where the fault strikes"}};
}

}  // namespace dsv4::cases

DSV4_DECLARED_FAMILY("smoke", ::dsv4::cases::SmokeCase,
                     "out F32 like in.x = x*scale + bias; bitwise comparison")

// sampling_renorm kernel case and replay adapter: top-k / top-p renormalisation of fp32 rows.
#include "dsv4/cases/sampling_renorm.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "dsv4/fixtures/generators.hpp"
#include "dsv4/kernels/sampling_renorm.hpp"
#include "dsv4/ref/sampling_renorm.hpp"
#include "dsv4/replay/replay.hpp"

namespace dsv4::cases {
namespace {

namespace ref = ::dsv4::ref::sampling_renorm;
namespace kern = ::dsv4::kernels::sampling_renorm;

const st::Tensor& input(const fx::Tensors& in, const std::string& name) {
  return fx::input_of(in, name, "sampling_renorm");
}

const char* kind_name(RowKind k) {
  switch (k) {
    case RowKind::kSoftmax:
      return "softmax";
    case RowKind::kTies:
      return "ties";
    case RowKind::kEqual:
      return "equal";
    case RowKind::kOneHot:
      return "one-hot";
    case RowKind::kHostile:
      return "hostile";
    case RowKind::kZero:
      return "zero";
    default:
      return "mixed";
  }
}

void normalise(std::vector<float>& r) {
  double sum = 0;
  for (float v : r) sum += v;
  if (sum > 0)
    for (auto& v : r) v = float(v / sum);
}

std::vector<float> draw_row(fx::Rng& rng, size_t V, RowKind kind) {
  std::vector<float> r(V, 0.f);
  switch (kind) {
    case RowKind::kEqual:
      std::fill(r.begin(), r.end(), 1.f / float(V));
      return r;
    case RowKind::kOneHot:
      r[size_t(rng.range(0, int64_t(V) - 1))] = 1.f;
      return r;
    case RowKind::kZero:
      return r;
    default:
      break;
  }
  const double spread = rng.uniform(0.5, 4);
  for (auto& v : r) v = float(std::exp(rng.normal(0, spread)));
  if (kind == RowKind::kTies)
    for (auto& v : r) v = std::round(v * 4) / 4;  // few distinct values
  normalise(r);
  if (kind == RowKind::kHostile) {
    const float inf = std::numeric_limits<float>::infinity();
    for (auto& v : r) {
      const double u = rng.uniform();
      if (u < 0.02)
        v = std::numeric_limits<float>::quiet_NaN();
      else if (u < 0.04)
        v = -v;
      else if (u < 0.05)
        v = inf;
      else if (u < 0.06)
        v = -0.f;
      else if (u < 0.07)
        v = std::ldexp(1.f, -140);  // subnormal
    }
  }
  return r;
}

}  // namespace

std::string SamplingRenormShape::str() const {
  std::ostringstream os;
  os << "B=" << B << " V=" << V << (top_p ? " top-p " : " top-k ") << kind_name(rows);
  if (variant == kern::Variant::kFused) os << " fused";
  if (variant == kern::Variant::kMultiLaunch) os << " multi-launch";
  if (in_place) os << " in-place";
  return os.str();
}

SamplingRenormCase::SamplingRenormCase(const fx::Tensors& in) {
  const st::Tensor& probs = input(in, "probs");
  if (probs.shape.size() != 2) probs.throw_shape("in.probs", "2-d [B, V]");
  shape_.B = int64_t(probs.shape[0]);
  shape_.V = int64_t(probs.shape[1]);
  shape_.top_p = in.count("p") != 0;
  shape_.in_place = in.count("out") != 0;
  const st::Tensor& param = input(in, shape_.top_p ? "p" : "k");
  if (param.numel() != uint64_t(shape_.B))
    param.throw_shape(shape_.top_p ? "in.p" : "in.k", "[" + std::to_string(shape_.B) + "]");
}

fx::Tensors SamplingRenormCase::draw(fx::Rng& rng) const {
  const size_t B = size_t(shape_.B), V = size_t(shape_.V);
  std::vector<float> probs;
  for (size_t b = 0; b < B; ++b) {
    const RowKind kind = shape_.rows == RowKind::kMixed
                             ? RowKind(rng.range(0, int64_t(RowKind::kZero)))
                             : shape_.rows;
    const auto r = draw_row(rng, V, kind);
    probs.insert(probs.end(), r.begin(), r.end());
  }
  fx::Tensors in;
  in["probs"] = st::Tensor::of<float>({B, V}, probs);
  if (shape_.in_place) in["out"] = in["probs"];
  if (shape_.top_p) {
    std::vector<float> p(B);
    for (auto& x : p) {
      const double u = rng.uniform();
      x = u < 0.1 ? 0.f : u < 0.2 ? 1.f : u < 0.25 ? 1.5f : float(rng.uniform(0, 1));
    }
    in["p"] = st::Tensor::of<float>(p);
  } else {
    std::vector<int32_t> k(B);
    const int64_t v = int64_t(V);
    for (auto& x : k) {
      const double u = rng.uniform();
      x = int32_t(u < 0.1   ? rng.range(-2, 1)
                  : u < 0.2 ? rng.range(v - 1, v + 1)
                  : u < 0.6 ? rng.range(1, std::min<int64_t>(v, 64))
                            : rng.range(1, v));
    }
    in["k"] = st::Tensor::of<int32_t>(k);
  }
  return in;
}

std::vector<fx::OutputSpec> SamplingRenormCase::outputs(const fx::Tensors& in) const {
  return {{.name = "out",
           .dtype = st::DType::F32,
           .shape = input(in, "probs").shape,
           .init = shape_.in_place ? fx::Init::kFromInput : fx::Init::kPoison}};
}

fx::Tensors SamplingRenormCase::reference(const fx::Tensors& in) const {
  const st::Tensor& probs = input(in, "probs");
  const auto x = probs.values<float>("in.probs");
  std::vector<float> out(x.size());
  if (shape_.top_p)
    ref::top_p(x, probs.shape[1], input(in, "p").values<float>("in.p"), out, ref::Arith::kKernel);
  else
    ref::top_k(x, probs.shape[1], input(in, "k").values<int32_t>("in.k"), out, ref::Arith::kKernel);
  return {{"out", st::Tensor::of<float>(probs.shape, out)}};
}

std::vector<fx::ScratchSpec> SamplingRenormCase::scratch(const fx::Tensors&) const {
  const size_t bytes = kern::workspace_bytes(shape_.B, shape_.V);
  if (!bytes) return {};
  return {{.name = "workspace", .bytes = bytes}};
}

void SamplingRenormCase::launch(const fx::DeviceTensors& d, gpu::Stream s) const {
  const bool has_ws = d.has("workspace");
  uint8_t* ws = has_ws ? d.ptr<uint8_t>("workspace") : nullptr;
  const size_t bytes = has_ws ? kern::workspace_bytes(shape_.B, shape_.V) : 0;
  float* out = d.ptr<float>("out");
  const float* probs = shape_.in_place ? out : d.ptr<float>("probs");
  if (shape_.top_p)
    kern::top_p(probs, shape_.B, shape_.V, d.ptr<float>("p"), out, ws, bytes, s, shape_.variant);
  else
    kern::top_k(probs, shape_.B, shape_.V, d.ptr<int32_t>("k"), out, ws, bytes, s, shape_.variant);
}

}  // namespace dsv4::cases

DSV4_KERNEL_FAMILY("sampling_renorm",
                   "in.probs F32[B, V] and in.k I32[B] (top-k) or in.p F32[B] (top-p) -> out "
                   "F32[B, V], bitwise against the reference in the kernel's arithmetic",
                   ::dsv4::cases::SamplingRenormCase)

// split_combine kernel case and replay adapter: the merge of split-KV partials (bitwise against
// the fp32-order reference).
#include "dsv4/cases/split_combine.hpp"

#include <sstream>

#include "dsv4/kernels/split_combine.hpp"
#include "dsv4/ref/split_combine.hpp"
#include "dsv4/replay/replay.hpp"

namespace dsv4::cases {
namespace {

namespace ref = ::dsv4::ref::split_combine;
namespace kern = ::dsv4::kernels::split_combine;

const st::Tensor& input(const fx::Tensors& in, const std::string& name) {
  return fx::input_of(in, name, "split_combine");
}

}  // namespace

std::string SplitCombineShape::str() const {
  std::ostringstream os;
  os << "B=" << B << " S=" << S << " H=" << H << " D=" << D;
  if (mix.sink) os << " sink";
  if (mix.rope) os << " rope";
  if (variant == 1) os << " weights-per-lane";
  return os.str();
}

fx::SplitPartials split_partials_of(const fx::Tensors& in) {
  fx::SplitPartials p;
  const st::Tensor& o = input(in, "o");
  if (o.shape.size() != 4) o.throw_shape("in.o", "[B, S, H, D]");
  p.shape = {o.shape[0], o.shape[1], o.shape[2], o.shape[3]};
  p.o = o.values<float>("in.o");
  p.lse = input(in, "lse").values<float>("in.lse");
  p.n_splits = input(in, "n_splits").values<int32_t>("in.n_splits");
  if (in.count("sink")) p.sink = input(in, "sink").values<float>("in.sink");
  if (in.count("cos_sin") || in.count("positions")) {
    const st::Tensor& cs = input(in, "cos_sin");
    if (cs.shape.size() != 2) cs.throw_shape("in.cos_sin", "[n_pos, rope_dim]");
    p.cos_sin = cs.values<float>("in.cos_sin");
    p.rope_dim = cs.shape[1];
    p.n_pos = cs.shape[0];
    p.positions = input(in, "positions").values<int64_t>("in.positions");
  }
  ref::check(p.inputs());  // sizes against the shape, naming the field
  return p;
}

fx::Tensors tensors_of(const fx::SplitPartials& p) {
  const auto [B, S, H, D] = p.shape;
  fx::Tensors in;
  in["o"] = st::Tensor::of<float>({B, S, H, D}, p.o);
  in["lse"] = st::Tensor::of<float>({B, S, H}, p.lse);
  in["n_splits"] = st::Tensor::of<int32_t>(p.n_splits);
  if (!p.sink.empty()) in["sink"] = st::Tensor::of<float>(p.sink);
  if (p.rope_dim) {
    in["cos_sin"] = st::Tensor::of<float>({p.n_pos, p.rope_dim}, p.cos_sin);
    in["positions"] = st::Tensor::of<int64_t>(p.positions);
  }
  return in;
}

SplitCombineCase::SplitCombineCase(SplitCombineShape shape) : ShapedCase(shape) {}

SplitCombineCase::SplitCombineCase(const fx::Tensors& in) {
  const fx::SplitPartials p = split_partials_of(in);
  shape_.B = int64_t(p.shape.B), shape_.S = int64_t(p.shape.S);
  shape_.H = int64_t(p.shape.H), shape_.D = int64_t(p.shape.D);
  shape_.mix.sink = !p.sink.empty();
  shape_.mix.rope = p.rope_dim != 0;
}

fx::Tensors SplitCombineCase::draw(fx::Rng& rng) const {
  const SplitCombineShape& s = shape_;
  return tensors_of(
      fx::split_partials(rng, {size_t(s.B), size_t(s.S), size_t(s.H), size_t(s.D)}, s.mix));
}

std::vector<fx::OutputSpec> SplitCombineCase::outputs(const fx::Tensors& in) const {
  const st::Tensor& o = input(in, "o");
  const uint64_t B = o.shape.at(0), H = o.shape.at(2), D = o.shape.at(3);
  return {{.name = "out", .dtype = st::DType::BF16, .shape = {B, H, D}},
          {.name = "out_lse", .dtype = st::DType::F32, .shape = {B, H}},
          {.name = "errors", .dtype = st::DType::I64, .shape = {}, .init = fx::Init::kZero}};
}

fx::Tensors SplitCombineCase::reference(const fx::Tensors& in) const {
  const fx::SplitPartials p = split_partials_of(in);
  const ref::Outputs r = ref::combine_f32(p.inputs());
  const auto [B, S, H, D] = p.shape;
  return {{"out", st::Tensor::of<bf16>({B, H, D}, r.out)},
          {"out_lse", st::Tensor::of<float>({B, H}, r.lse)},
          {"errors", st::Tensor::scalar<int64_t>(r.errors)}};
}

void SplitCombineCase::launch(const fx::DeviceTensors& d, gpu::Stream s) const {
  const st::Tensor& o = d.host("o");
  kern::Args a;
  a.B = int64_t(o.shape[0]), a.S = int64_t(o.shape[1]);
  a.H = int64_t(o.shape[2]), a.D = int64_t(o.shape[3]);
  a.o = d.ptr<float>("o");
  a.lse = d.ptr<float>("lse");
  a.n_splits = d.ptr<int32_t>("n_splits");
  a.sink = d.has("sink") ? d.ptr<float>("sink") : nullptr;
  if (d.has("cos_sin")) {
    const st::Tensor& cs = d.host("cos_sin");
    a.rope = {d.ptr<float>("cos_sin"), int64_t(cs.shape[0]), int(cs.shape[1]),
              d.ptr<int64_t>("positions")};
  }
  a.out = d.ptr<bf16>("out");
  a.out_lse = d.ptr<float>("out_lse");
  a.errors = d.ptr<int64_t>("errors");
  a.variant = shape().variant;
  kern::combine(a, s);
}

}  // namespace dsv4::cases

DSV4_KERNEL_FAMILY(
    "split_combine",
    "in.o F32[B, S, H, D] (normalised partials), in.lse F32[B, S, H] (base 2, -inf empty), "
    "in.n_splits I32[B]; optional in.sink F32[H]; optional in.cos_sin F32[n_pos, rope_dim] with "
    "in.positions I64[B] (inverse RoPE) -> out BF16[B, H, D], out_lse F32[B, H] (natural log, sink "
    "excluded), errors I64 (positions outside the table). Bitwise (fp32-order reference)",
    ::dsv4::cases::SplitCombineCase)

// split_combine kernel case and replay adapter: the merge of split-KV partials (bitwise against
// the fp32-order reference).
#include "dsv4/cases/split_combine.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "dsv4/cases/declared_inputs.hpp"
#include "dsv4/kernels/split_combine.hpp"
#include "dsv4/ref/split_combine.hpp"
#include "dsv4/replay/replay.hpp"
#include "dsv4/replay/shaped_family.hpp"

namespace dsv4::cases {
namespace {

namespace ref = ::dsv4::ref::split_combine;
namespace kern = ::dsv4::kernels::split_combine;

const st::Tensor& input(const fx::Tensors& in, const std::string& name) {
  return fx::input_of(in, name, "split_combine");
}

}  // namespace

fx::Vars SplitCombineShape::vars() const {
  fx::Vars v;
  v.add("B", B).add("S", S).add("H", H).add("D", D).flag("sink", mix.sink).flag("rope", mix.rope);
  if (unnormalised) v.flag(m2 ? "sglang-m2" : "sglang-natural");
  v.flag("rotate-empty", rotate_empty).flag("order-sensitive", order_sensitive);
  return v.flag("weights-per-lane", variant == 1);
}

// What both partial forms share: the split counts, the sinks and the inverse-RoPE table.
static void read_split_rest(const fx::Tensors& in, fx::SplitPartials& p) {
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
}

fx::SplitPartials split_partials_of(const fx::Tensors& in) {
  fx::SplitPartials p;
  const st::Tensor& o = input(in, "o");
  if (o.shape.size() != 4) o.throw_shape("in.o", "[B, S, H, D]");
  p.shape = {o.shape[0], o.shape[1], o.shape[2], o.shape[3]};
  p.o = o.values<float>("in.o");
  p.lse = input(in, "lse").values<float>("in.lse");
  read_split_rest(in, p);
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

ref::Inputs SplitView::inputs() const {
  ref::Inputs r = p.inputs();
  if (unnormalised) {
    un_ = {.acc = acc, .m = m, .l = l, .m2 = m2};
    r.un = &un_;
  }
  r.rotate_empty = rotate_empty;
  return r;
}

SplitView split_view_of(const fx::Tensors& in) {
  SplitView v;
  v.unnormalised = in.count("acc") != 0;
  if (!v.unnormalised) {
    v.p = split_partials_of(in);
  } else {
    const st::Tensor& acc = input(in, "acc");
    if (acc.shape.size() != 4) acc.throw_shape("in.acc", "[B, S, H, D]");
    fx::SplitPartials& p = v.p;
    p.shape = {acc.shape[0], acc.shape[1], acc.shape[2], acc.shape[3]};
    v.acc = acc.values<float>("in.acc");
    v.m = input(in, "m").values<float>("in.m");
    v.l = input(in, "l").values<float>("in.l");
    if (in.count("m_base2")) v.m2 = input(in, "m_base2").item<int32_t>("in.m_base2") != 0;
    read_split_rest(in, p);
  }
  v.rotate_empty = in.count("rotate_empty")
                       ? input(in, "rotate_empty").item<int32_t>("in.rotate_empty") != 0
                       : v.unnormalised;
  ref::check(v.inputs());  // sizes against the shape, naming the field
  return v;
}

SplitCombineCase::SplitCombineCase(SplitCombineShape shape) : ShapedCase(shape) {}

SplitCombineShape SplitCombineShape::from_vars(fx::VarsReader& r) {
  const SplitCombineShape d;
  const int64_t B = r.num("B", d.B), S = r.num("S", d.S), H = r.num("H", d.H), D = r.num("D", d.D);
  const bool sink = r.flag("sink"), rope = r.flag("rope");
  const int layout = r.one_of({"sglang-m2", "sglang-natural"}, -1);
  const bool rotate_empty = r.flag("rotate-empty"), order = r.flag("order-sensitive");
  const int variant = r.flag("weights-per-lane") ? 1 : 0;
  SplitCombineShape s = split_combine_shape(B, S, H, D, sink, rope, variant, order);
  s.unnormalised = layout >= 0;
  s.m2 = layout != 1;
  s.rotate_empty = rotate_empty;
  return s;
}

std::vector<fx::NamedSweep<SplitCombineShape>> SplitCombineCase::sweeps() {
  return {{"gpu", split_combine_gpu_sweep},
          {"soak", split_combine_soak_sweep},
          {"sglang", split_combine_sglang_sweep}};
}

SplitCombineCase::SplitCombineCase(const fx::Tensors& in, const SplitCombineShape& stated)
    : ShapedCase(stated) {
  const SplitView v = split_view_of(in);
  const fx::SplitPartials& p = v.p;
  shape_.B = int64_t(p.shape.B), shape_.S = int64_t(p.shape.S);
  shape_.H = int64_t(p.shape.H), shape_.D = int64_t(p.shape.D);
  shape_.mix.sink = !p.sink.empty();
  shape_.mix.rope = p.rope_dim != 0;
  shape_.unnormalised = v.unnormalised;
  shape_.m2 = v.m2;
  shape_.rotate_empty = v.rotate_empty;
}

fx::Tensors SplitCombineCase::draw(fx::Rng& rng) const {
  const SplitCombineShape& s = shape_;
  fx::SplitPartials p =
      fx::split_partials(rng, {size_t(s.B), size_t(s.S), size_t(s.H), size_t(s.D)}, s.mix);
  const auto [B, S, H, D] = p.shape;
  if (s.order_sensitive)
    // lse c, then c - 24 for the row's other splits: 1 + 2^-24 + 2^-24 + ... is 1 summed from the
    // first split and 1 + (n-1) 2^-24 summed from the last.
    for (size_t b = 0; b < B; ++b) {
      const size_t n = size_t(std::clamp<int64_t>(p.n_splits[b], 0, int64_t(S)));
      for (size_t h = 0; h < H; ++h) {
        const float c = float(rng.range(-4, 4));
        for (size_t k = 0; k < n; ++k) p.lse[(b * S + k) * H + h] = k ? c - 24.f : c;
      }
    }
  fx::Tensors in = tensors_of(p);
  if (s.rotate_empty != s.unnormalised)
    in["rotate_empty"] = st::Tensor::scalar<int32_t>(s.rotate_empty ? 1 : 0);
  if (!s.unnormalised) return in;
  // SGLang's layout: l_s drawn in [1, 64), m = lse - log2(l) (base 2, or natural), acc = o l; an
  // empty split has l = 0 and m = -inf; partials past the row's count stay NaN.
  std::vector<float> acc(p.o.size()), m(p.lse.size()), l(p.lse.size());
  for (size_t i = 0; i < p.lse.size(); ++i) {
    const float lse = p.lse[i];
    if (std::isnan(lse)) {
      m[i] = l[i] = lse;
      for (size_t d = 0; d < D; ++d) acc[i * D + d] = lse;
      continue;
    }
    if (lse == -INFINITY) {
      m[i] = -INFINITY, l[i] = 0.f;
      for (size_t d = 0; d < D; ++d) acc[i * D + d] = p.o[i * D + d];  // never read
      continue;
    }
    l[i] = float(rng.uniform(1, 64));
    const double m2 = double(lse) - std::log2(double(l[i]));
    m[i] = float(s.m2 ? m2 : m2 * std::log(2.0));
    for (size_t d = 0; d < D; ++d) acc[i * D + d] = p.o[i * D + d] * l[i];
  }
  in.erase("o");
  in.erase("lse");
  in["acc"] = st::Tensor::of<float>({B, S, H, D}, acc);
  in["m"] = st::Tensor::of<float>({B, S, H}, m);
  in["l"] = st::Tensor::of<float>({B, S, H}, l);
  if (!s.m2) in["m_base2"] = st::Tensor::scalar<int32_t>(0);
  return in;
}

std::vector<fx::OutputSpec> SplitCombineCase::outputs(const fx::Tensors& in) const {
  const st::Tensor& o = input(in, in.count("acc") ? "acc" : "o");
  const uint64_t B = o.shape.at(0), H = o.shape.at(2), D = o.shape.at(3);
  return {{.name = "out", .dtype = st::DType::BF16, .shape = {B, H, D}},
          {.name = "out_lse", .dtype = st::DType::F32, .shape = {B, H}},
          {.name = "errors", .dtype = st::DType::I64, .shape = {}, .init = fx::Init::kZero}};
}

fx::Tensors SplitCombineCase::reference(const fx::Tensors& in) const {
  const SplitView v = split_view_of(in);
  const ref::Outputs r = ref::combine_f32(v.inputs());
  const auto [B, S, H, D] = v.p.shape;
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

std::string SplitCombineCase::cannot_run() const {
  if (shape_.unnormalised)
    return "the project's kernel merges the normalised layout (in.o, in.lse), not SGLang's "
           "(in.acc, in.m, in.l)";
  if (shape_.rotate_empty) return "the project's kernel leaves an empty row unrotated (+0)";
  return "";
}

::testing::AssertionResult SplitCombineCase::compare_foreign(const fx::OutputSpec& spec,
                                                             const st::Tensor& got,
                                                             const st::Tensor& want,
                                                             const fx::Tensors& in) const {
  if (spec.name == "errors" || got.shape != want.shape)
    return fx::KernelCase::compare(spec, got, want, in);
  const SplitView v = split_view_of(in);
  const ref::Inputs ri = v.inputs();
  const ref::OutputsF64 r = ref::combine_f64(ri);
  const auto [B, S, H, D] = v.p.shape;
  const std::vector<double> g = got.to_f64("got." + spec.name);
  const fx::Tolerance tol = fx::split_combine_tolerance(spec.name, r, int64_t(S));
  if (spec.name == "out") {
    std::vector<bool> zero_row(B * H);
    for (size_t row = 0; row < B * H; ++row)
      zero_row[row] =
          r.lse[row] == INFINITY || (!v.p.sink.empty() && v.p.sink[row % H] == INFINITY);
    if (auto nan = no_nan_in_zero_rows(g, zero_row, D, spec.name); !nan) return nan;
    return fx::close_erased(g, r.out, fx::Shape{B, H, D}, tol, {.name = spec.name});
  }
  return fx::close_erased(g, r.lse, fx::Shape{B, H}, tol, {.name = spec.name});
}

InputDecls SplitCombineCase::declared_inputs() {
  return {{"o", st::DType::F32, {"B", "S", "H", "D"}, true, "normalised partials"},
          {"lse", st::DType::F32, {"B", "S", "H"}, true, "base 2, -inf empty"},
          {"acc", st::DType::F32, {"B", "S", "H", "D"}, true, "SGLang's, in place of o"},
          {"m", st::DType::F32, {"B", "S", "H"}, true, "SGLang's"},
          {"l", st::DType::F32, {"B", "S", "H"}, true, "SGLang's"},
          {"m_base2", st::DType::I32, {}, true, "1 base 2, 0 natural"},
          {"n_splits", st::DType::I32, {"B"}},
          {"sink", st::DType::F32, {"H"}, true},
          {"cos_sin", st::DType::F32, {"n_pos", "rope_dim"}, true, "inverse RoPE"},
          {"positions", st::DType::I64, {"B"}, true, "with cos_sin"},
          {"rotate_empty", st::DType::I32, {}, true}};
}

}  // namespace dsv4::cases

DSV4_DECLARED_FAMILY(
    "split_combine", ::dsv4::cases::SplitCombineCase,
    "out BF16[B, H, D], out_lse F32[B, H] (natural log, sink excluded; an extension), "
    "errors I64 (positions outside the table). Bitwise (fp32-order reference); a "
    "foreign source within the stated fp64 tolerances")

// kv_store kernel case and replay adapter: the bf16 row scatter and the fused RMSNorm + RoPE store.
#include "dsv4/cases/kv_store.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "dsv4/cases/declared_inputs.hpp"
#include "dsv4/kernels/kv_store.hpp"
#include "dsv4/ref/kv_store.hpp"
#include "dsv4/replay/replay.hpp"
#include "dsv4/replay/shaped_family.hpp"

namespace dsv4::cases {
namespace {

namespace ref = ::dsv4::ref::kv_store;
namespace kern = ::dsv4::kernels::kv_store;

constexpr float kEps = 1e-6f;

int64_t stride_or_width(int64_t stride, int64_t width) { return stride ? stride : width; }

const st::Tensor& input(const fx::Tensors& in, const std::string& name) {
  return fx::input_of(in, name, "kv_store");
}

const st::Tensor& matrix(const fx::Tensors& in, const std::string& name) {
  const st::Tensor& t = input(in, name);
  if (t.shape.size() != 2) t.throw_shape("in." + name, "2-d [rows, row stride]");
  return t;
}

// Rows of normal values, each row at its own scale 2^-4 .. 2^4 (RMSNorm input).
std::vector<bf16> scaled_rows(fx::Rng& rng, size_t T, size_t stride) {
  std::vector<float> v(T * stride);
  for (size_t t = 0; t < T; ++t) {
    const auto r = fx::normal_f32(rng, stride, 0, std::ldexp(1.0f, int(rng.range(-4, 4))));
    std::copy(r.begin(), r.end(), v.begin() + t * stride);
  }
  return fx::to_bf16(v);
}

// The host views a reference call needs, read from a case's inputs.
struct Views {
  std::vector<bf16> kv;
  std::vector<int64_t> loc, positions;
  std::vector<float> weight, cos_sin;
  ref::RowLayout layout;
  size_t T = 0, rows = 0;
  float eps = kEps;
  size_t rope_dim = ref::kRopeDim;
  ref::NormRope norm_rope() const {
    ref::NormRope p;
    p.weight = weight;
    p.cos_sin = cos_sin;
    p.positions = positions;
    p.eps = eps;
    p.rope_dim = rope_dim;
    return p;
  }
};

Views views(const fx::Tensors& in, bool fused) {
  Views v;
  const st::Tensor& kv = matrix(in, "kv");
  const st::Tensor& pool = matrix(in, "pool");
  v.kv = kv.values<bf16>("in.kv");
  v.loc = input(in, "loc").values<int64_t>("in.loc");
  v.T = kv.shape[0];
  v.rows = pool.shape[0];
  v.layout.src_stride = kv.shape[1];
  v.layout.pool_stride = pool.shape[1];
  v.layout.width =
      in.count("width") ? size_t(input(in, "width").item<int64_t>("in.width")) : kv.shape[1];
  if (fused) {
    v.weight = input(in, "weight").values<float>("in.weight");
    const st::Tensor& cs = matrix(in, "cos_sin");
    v.cos_sin = cs.values<float>("in.cos_sin");
    v.rope_dim = size_t(cs.shape[1]);
    v.positions = input(in, "positions").values<int64_t>("in.positions");
    if (in.count("eps")) v.eps = input(in, "eps").item<float>("in.eps");
  }
  return v;
}

// A fused case from another implementation's fp32 order (no in.lanes) cannot match bit for bit:
// its written rows are held to the reference's derived bound against the fp64 value
// (ref::norm_rope_bounds), and every other pool value must be untouched, bit for bit.
::testing::AssertionResult pool_within_bound(const st::Tensor& got, const st::Tensor& want,
                                             const fx::Tensors& in) {
  const Views k = views(in, true);
  const auto g = got.values<bf16>("got.pool");
  const auto w = want.values<bf16>("want.pool");
  if (g.size() != w.size())
    return ::testing::AssertionFailure() << "pool: " << g.size() << " values, want " << w.size();
  const size_t n_pos = k.rope_dim ? k.cos_sin.size() / k.rope_dim : 0;
  const ref::Fp64Bounds b = ref::norm_rope_bounds(k.kv, k.T, k.layout, k.norm_rope());
  std::vector<double> gw, ww, bound;  // written rows: got vs fp64, within the derived bound
  std::vector<bf16> gu, wu;           // the rest: got vs the pool's expected bits
  std::vector<uint8_t> written(w.size(), 0);
  const size_t P = k.layout.pool(), W = k.layout.width;
  for (size_t t = 0; t < k.T; ++t) {
    const int64_t l = k.loc[t], p = k.positions[t];
    if (l < 0 || size_t(l) >= k.rows || p < 0 || size_t(p) >= n_pos) continue;
    for (size_t j = 0; j < W; ++j) {
      written[size_t(l) * P + j] = 1;
      gw.push_back(bf16_to_f32(g[size_t(l) * P + j]));
      ww.push_back(b.value[t * W + j]);
      bound.push_back(b.stored[t * W + j]);
    }
  }
  for (size_t i = 0; i < w.size(); ++i)
    if (!written[i]) {
      gu.push_back(g[i]);
      wu.push_back(w[i]);
    }
  fx::Tolerance tol;
  tol.bound = bound;
  tol.allow_all_zero = true;
  fx::Options opt;
  opt.name = "pool (written rows vs fp64)";
  const auto close = fx::close_erased(gw, ww, fx::Shape{gw.size()}, tol, opt);
  opt.name = "pool (values no row writes)";
  const auto same = fx::bitwise_equal(gu, wu, fx::Shape{gu.size()}, opt);
  if (close && same) return ::testing::AssertionSuccess();
  auto r = ::testing::AssertionFailure();
  if (!close) r << close.message();
  if (!same) r << (close ? "" : "\n") << same.message();
  return r;
}

// The pool with every NaN written as 0x7fc0, so that NaNs compare equal whatever their payload.
st::Tensor nan_as_one(const st::Tensor& t) {
  st::Tensor c = t;
  for (bf16& v : fx::values_of<bf16>(c, "pool"))
    if ((v.bits & 0x7f80) == 0x7f80 && (v.bits & 0x7f) != 0) v.bits = 0x7fc0;
  return c;
}

// Redraws every stored row until its bf16 values under `lanes` differ from those of another lane
// count in at least one place (bf16 rounding hides most fp32 reorderings; these rows do not).
void make_order_sensitive(fx::Tensors& in, fx::Rng& rng, size_t lanes) {
  const Views v = views(in, true);
  const ref::NormRope p = v.norm_rope();
  const size_t W = v.layout.width, S = v.layout.src();
  auto kv = fx::values_of<bf16>(in.at("kv"), "in.kv");
  std::vector<float> a(W), b(W);
  for (size_t t = 0; t < v.T; ++t) {
    if (v.loc[t] < 0 || size_t(v.loc[t]) >= v.rows || v.positions[t] < 0 ||
        size_t(v.positions[t]) >= p.n_pos())
      continue;
    for (int attempt = 0; attempt < 20000; ++attempt) {
      ref::norm_rope_row_f32(&kv[t * S], W, p, v.positions[t], lanes, a.data());
      bool differs = false;
      for (size_t other : {1, 2, 4, 8, 16, 32, 64}) {
        if (other == lanes || differs) continue;
        ref::norm_rope_row_f32(&kv[t * S], W, p, v.positions[t], other, b.data());
        for (size_t j = 0; j < W && !differs; ++j)
          differs = f32_to_bf16(a[j]).bits != f32_to_bf16(b[j]).bits;
      }
      if (differs) break;
      const auto row = scaled_rows(rng, 1, W);
      std::copy(row.begin(), row.end(), kv.begin() + t * S);
    }
  }
}

}  // namespace

void plant_special_rows(fx::Tensors& in) {
  st::Tensor& kv = in.at("kv");
  const size_t T = kv.shape.at(0), S = kv.shape.at(1);
  const size_t W = size_t(in.at("width").item<int64_t>("in.width"));
  const size_t R = in.at("pool").shape.at(0);
  if (T < 8 || R < 8) throw std::invalid_argument("plant_special_rows needs T >= 8 and R >= 8");
  auto x = fx::values_of<bf16>(kv, "in.kv");
  auto loc = fx::values_of<int64_t>(in.at("loc"), "in.loc");
  fx::Rng rng(0x5bec1a1);
  auto row = [&](size_t t) { return x.subspan(t * S, W); };
  auto normal = [&](size_t t) {
    for (bf16& v : row(t)) v = f32_to_bf16(float(rng.normal()));
  };
  for (bf16& v : row(0)) v.bits = 0;  // all zeros
  for (bf16& v : row(1)) v.bits = 0;
  row(1)[3].bits = 0x7fc0;  // zeros and one NaN
  normal(2);
  row(2)[5].bits = 0x7f80;  // +inf outside the RoPE part
  normal(3);
  row(3)[W - 1].bits = 0xff80;  // -inf in the RoPE part
  for (bf16& v : row(4)) v.bits = uint16_t((rng.next() & 0x8000) | (1 + rng.next() % 0x7f));
  normal(5);
  for (size_t j = 0; j < W; j += 3) row(5)[j].bits = uint16_t(1 + rng.next() % 0x7f);
  for (bf16& v : row(6)) v = f32_to_bf16(float(rng.uniform(1e20, 1e30)));  // squares overflow
  normal(7);
  row(7)[W - 2].bits = 0xffc1;  // a NaN in the RoPE part
  for (size_t t = 0; t < T; ++t)
    if (t < 8)
      loc[t] = int64_t(t);
    else if (loc[t] >= 0 && loc[t] < 8)
      loc[t] = -1;
}

std::vector<bf16> raw_bf16_bits(fx::Rng& rng, size_t n) {
  std::vector<bf16> v(n);
  for (auto& x : v) x.bits = uint16_t(rng.next());
  return v;
}

fx::Vars KvStoreShape::vars() const {
  fx::Vars v;
  v.add("T", T).add("R", R).add("W", width);
  if (src_stride) v.add("src_stride", src_stride);
  if (pool_stride) v.add("pool_stride", pool_stride);
  if (lanes) v.add("lanes", lanes);
  return v.flag("order-sensitive", order_sensitive).flag("any-order", any_order);
}

KvStoreCase::KvStoreCase(KvStoreShape shape)
    : ShapedCase(shape), fused_(shape.lanes != 0), lanes_given_(!shape.any_order) {
  if (shape_.n_pos == 0) shape_.n_pos = std::clamp<int64_t>(4 * shape_.T, 64, 4096);
}

KvStoreShape KvStoreShape::from_vars(fx::VarsReader& r) {
  KvStoreShape s;
  s.T = r.num("T", s.T);
  s.R = r.num("R", s.R);
  s.width = r.num("W", s.width);
  s.src_stride = r.num("src_stride", s.src_stride);
  s.pool_stride = r.num("pool_stride", s.pool_stride);
  s.lanes = int(r.num("lanes", s.lanes));
  s.order_sensitive = r.flag("order-sensitive");
  s.any_order = r.flag("any-order");
  if (s.any_order && s.lanes == 0)
    throw std::invalid_argument(
        "any-order needs lanes=N (a fused norm + RoPE case; the plain scatter has no fp32 order)");
  return s;
}

std::vector<fx::NamedSweep<KvStoreShape>> KvStoreCase::sweeps() {
  return {{"gpu", kv_store_gpu_sweep},
          {"strided-graph", kv_store_strided_graph_sweep},
          {"soak", kv_store_soak_sweep},
          {"sglang", kv_store_sglang_sweep}};
}

KvStoreCase::KvStoreCase(const fx::Tensors& in, const KvStoreShape& stated) : ShapedCase(stated) {
  fused_ = in.count("weight") || in.count("cos_sin") || in.count("positions");
  const Views v = views(in, fused_);
  if (v.loc.size() != v.T) input(in, "loc").throw_shape("in.loc", "[" + std::to_string(v.T) + "]");
  if (fused_ && v.positions.size() != v.T)
    input(in, "positions").throw_shape("in.positions", "[" + std::to_string(v.T) + "]");
  ref::check_layout(v.kv.size(), v.T, input(in, "pool").numel(), v.rows, v.layout);
  shape_.T = int64_t(v.T);
  shape_.R = int64_t(v.rows);
  shape_.width = int64_t(v.layout.width);
  // A stride equal to the width is the shape's 0 ("rows of the width").
  shape_.src_stride = v.layout.src_stride == v.layout.width ? 0 : int64_t(v.layout.src_stride);
  shape_.pool_stride = v.layout.pool_stride == v.layout.width ? 0 : int64_t(v.layout.pool_stride);
  lanes_given_ = in.count("lanes") != 0;
  shape_.any_order = fused_ && !lanes_given_;
  if (fused_) {
    // Without in.lanes the want.pool of the lane count the file states (32 when it states none).
    shape_.lanes = lanes_given_ ? input(in, "lanes").item<int32_t>("in.lanes")
                                : (stated.lanes ? stated.lanes : 32);
    shape_.n_pos = int64_t(v.rope_dim ? v.cos_sin.size() / v.rope_dim : 0);
  }
}

fx::Tensors KvStoreCase::draw(fx::Rng& rng) const {
  const KvStoreShape& s = shape_;
  const int64_t S = stride_or_width(s.src_stride, s.width);
  const int64_t P = stride_or_width(s.pool_stride, s.width);
  const uint64_t T = uint64_t(s.T);
  fx::Tensors in;
  in["kv"] = st::Tensor::of<bf16>({T, uint64_t(S)}, fused_ ? scaled_rows(rng, T, size_t(S))
                                                           : raw_bf16_bits(rng, T * size_t(S)));
  in["loc"] = st::Tensor::of<int64_t>(fx::hostile_indices(rng, T, s.R, s.mix).idx);
  in["pool"] = fx::filled(st::DType::BF16, {uint64_t(s.R), uint64_t(P)},
                          fx::default_poison(st::DType::BF16));
  in["width"] = st::Tensor::scalar<int64_t>(s.width);
  if (fused_) {
    const size_t rope_dim = size_t(std::min<int64_t>(64, s.width));
    std::vector<int64_t> p(T);
    for (auto& q : p) q = rng.range(0, s.n_pos - 1);
    in["positions"] = st::Tensor::of<int64_t>(p);
    in["weight"] = st::Tensor::of<float>(fx::uniform_f32(rng, size_t(s.width), 0.5f, 1.5f));
    in["cos_sin"] = st::Tensor::of<float>({uint64_t(s.n_pos), rope_dim},
                                          ref::rope_table(size_t(s.n_pos), rope_dim));
    in["eps"] = st::Tensor::scalar<float>(kEps);
    if (!s.any_order) in["lanes"] = st::Tensor::scalar<int32_t>(s.lanes);
    if (s.order_sensitive) make_order_sensitive(in, rng, size_t(s.lanes));
  }
  return in;
}

std::vector<fx::OutputSpec> KvStoreCase::outputs(const fx::Tensors& in) const {
  const st::Tensor& pool = input(in, "pool");
  return {
      {.name = "pool", .dtype = st::DType::BF16, .shape = pool.shape, .init = fx::Init::kFromInput},
      {.name = "errors", .dtype = st::DType::I64, .shape = {}, .init = fx::Init::kZero}};
}

fx::Tensors KvStoreCase::reference(const fx::Tensors& in) const {
  const Views v = views(in, fused_);
  std::vector<bf16> pool = input(in, "pool").values<bf16>("in.pool");
  const ref::Outcome o = fused_ ? ref::norm_rope_store(v.kv, v.loc, pool, v.rows, v.layout,
                                                       v.norm_rope(), size_t(shape_.lanes))
                                : ref::scatter_rows(v.kv, v.loc, pool, v.rows, v.layout);
  return {{"pool", st::Tensor::of<bf16>(input(in, "pool").shape, pool)},
          {"errors", st::Tensor::scalar<int64_t>(o.rejected)}};
}

void KvStoreCase::launch(const fx::DeviceTensors& d, gpu::Stream s) const {
  const kern::RowLayout layout{
      .width = shape_.width, .src_stride = shape_.src_stride, .pool_stride = shape_.pool_stride};
  if (!fused_) {
    kern::scatter_rows(d.ptr<bf16>("kv"), d.ptr<int64_t>("loc"), shape_.T, d.ptr<bf16>("pool"),
                       shape_.R, layout, d.ptr<int64_t>("errors"), s);
    return;
  }
  const st::Tensor& cs = d.host("cos_sin");
  const kern::NormRope p{.weight = d.ptr<float>("weight"),
                         .cos_sin = d.ptr<float>("cos_sin"),
                         .n_pos = int64_t(cs.shape[0]),
                         .positions = d.ptr<int64_t>("positions"),
                         .eps = d.has("eps") ? d.scalar<float>("eps") : kEps,
                         .rope_dim = int(cs.shape[1]),
                         .lanes = shape_.lanes};
  kern::norm_rope_store(d.ptr<bf16>("kv"), d.ptr<int64_t>("loc"), shape_.T, d.ptr<bf16>("pool"),
                        shape_.R, layout, p, d.ptr<int64_t>("errors"), s);
}

std::string KvStoreCase::cannot_run() const {
  if (!fused_) return "";
  if (!kern::lanes_supported(shape_.lanes))
    return "lanes=" + std::to_string(shape_.lanes) + " is not built for backend " + gpu::backend();
  const int wave = gpu::device_info().wave_width;
  if (shape_.lanes > wave)
    return "lanes=" + std::to_string(shape_.lanes) + " exceeds the device's wave width " +
           std::to_string(wave);
  return "";
}

::testing::AssertionResult KvStoreCase::compare(const fx::OutputSpec& spec, const st::Tensor& got,
                                                const st::Tensor& want,
                                                const fx::Tensors& in) const {
  if (spec.name == "pool" && fused_ && got.shape == want.shape) {
    if (!lanes_given_) return pool_within_bound(got, want, in);
    return fx::bitwise_tensors(nan_as_one(got), nan_as_one(want), "pool");
  }
  return fx::KernelCase::compare(spec, got, want, in);
}

InputDecls KvStoreCase::declared_inputs() {
  return {{"kv", st::DType::BF16, {"T", "S"}},
          {"loc", st::DType::I64, {"T"}},
          {"pool", st::DType::BF16, {"R", "P"}, false, "the pool before"},
          {"width", st::DType::I64, {}, true, "default S"},
          {"weight", st::DType::F32, {"width"}, true, "fused RMSNorm + RoPE"},
          {"cos_sin", st::DType::F32, {"n_pos", "rope_dim"}, true, "fused"},
          {"positions", st::DType::I64, {"T"}, true, "fused"},
          {"eps", st::DType::F32, {}, true},
          {"lanes", st::DType::I32, {}, true}};
}

}  // namespace dsv4::cases

DSV4_DECLARED_FAMILY(
    "kv_store", ::dsv4::cases::KvStoreCase,
    "pool BF16[R, P], errors I64 (rejected rows). Bitwise, except a fused case without "
    "in.lanes (another implementation's fp32 order): written rows within the "
    "reference's bf16 bound of the fp64 value, the rest of the pool bitwise")

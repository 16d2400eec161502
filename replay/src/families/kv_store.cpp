// Replay adapter for kv_store: the bf16 row scatter and the fused RMSNorm + RoPE + bf16 store.
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "dsv4/fixtures/compare.hpp"
#include "dsv4/fixtures/device_buffer.hpp"
#include "dsv4/kernels/error_counter.hpp"
#include "dsv4/kernels/kv_store.hpp"
#include "dsv4/ref/kv_store.hpp"
#include "dsv4/replay/replay.hpp"

namespace dsv4::replay {
namespace {

namespace ref = ::dsv4::ref::kv_store;
namespace kern = ::dsv4::kernels::kv_store;

// The case, read and checked. Scatter: in.kv BF16 [T, S], in.loc I64 [T], in.pool BF16 [R, P]
// (the pool before the store), optional in.width I64 (default S). The fused variant adds
// in.weight F32 [width], in.cos_sin F32 [n_pos, rope_dim], in.positions I64 [T], optional in.eps
// F32 (default 1e-6) and in.lanes I32 (the kernel's lane count, which fixes its fp32 order).
struct KvCase {
  std::vector<bf16> kv, pool;
  std::vector<int64_t> loc;
  size_t T = 0, rows = 0;
  ref::RowLayout layout;
  std::vector<uint64_t> pool_shape;
  bool fused = false;
  std::vector<float> weight, cos_sin;
  std::vector<int64_t> positions;
  float eps = 1e-6f;
  size_t rope_dim = ref::kRopeDim;
  bool lanes_given = false;  // a case from this project's kernel: its fp32 order is known
  int32_t lanes = 32;

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

const st::Tensor& matrix(const fx::Case& c, const std::string& name) {
  const st::Tensor& t = c.input(name);
  if (t.shape.size() != 2) t.throw_shape("in." + name, "2-d [rows, row stride]");
  return t;
}

KvCase read(const fx::Case& c) {
  KvCase k;
  const st::Tensor& kv = matrix(c, "kv");
  const st::Tensor& pool = matrix(c, "pool");
  k.kv = kv.values<bf16>("in.kv");
  k.pool = pool.values<bf16>("in.pool");
  k.loc = c.input("loc").values<int64_t>("in.loc");
  k.T = kv.shape[0];
  k.rows = pool.shape[0];
  k.pool_shape = pool.shape;
  if (k.loc.size() != k.T) c.input("loc").throw_shape("in.loc", "[" + std::to_string(k.T) + "]");
  k.layout.src_stride = kv.shape[1];
  k.layout.pool_stride = pool.shape[1];
  k.layout.width = c.has_input("width") ? size_t(c.input("width").item<int64_t>("in.width"))
                                        : size_t(kv.shape[1]);
  const bool any = c.has_input("weight") || c.has_input("cos_sin") || c.has_input("positions");
  if (any) {
    k.fused = true;
    k.weight = c.input("weight").values<float>("in.weight");
    const st::Tensor& cs = matrix(c, "cos_sin");
    k.cos_sin = cs.values<float>("in.cos_sin");
    k.rope_dim = size_t(cs.shape[1]);
    k.positions = c.input("positions").values<int64_t>("in.positions");
    if (k.positions.size() != k.T)
      c.input("positions").throw_shape("in.positions", "[" + std::to_string(k.T) + "]");
    if (c.has_input("eps")) k.eps = c.input("eps").item<float>("in.eps");
    k.lanes_given = c.has_input("lanes");
    if (k.lanes_given) k.lanes = c.input("lanes").item<int32_t>("in.lanes");
  }
  ref::check_layout(k.kv.size(), k.T, k.pool.size(), k.rows, k.layout);
  return k;
}

Outputs outputs(const KvCase& k, std::vector<bf16> pool, int64_t errors) {
  return {{"pool", st::Tensor::of<bf16>(k.pool_shape, pool)},
          {"errors", st::Tensor::scalar<int64_t>(errors)}};
}

Outputs reference(const fx::Case& c) {
  const KvCase k = read(c);
  std::vector<bf16> pool = k.pool;
  const ref::Outcome o = k.fused ? ref::norm_rope_store(k.kv, k.loc, pool, k.rows, k.layout,
                                                        k.norm_rope(), size_t(k.lanes))
                                 : ref::scatter_rows(k.kv, k.loc, pool, k.rows, k.layout);
  return outputs(k, std::move(pool), o.rejected);
}

DeviceRun device(const fx::Case& c) {
  const KvCase k = read(c);
  if (k.fused && !kern::lanes_supported(k.lanes))
    throw CannotRun("kv_store: this device's kernels have no " + std::to_string(k.lanes) +
                    "-lane variant (in.lanes)");
  gpu::StreamHandle s;
  fx::DeviceBuffer<bf16> kv(k.kv, "in.kv");
  fx::DeviceBuffer<bf16> pool(k.pool, "pool");
  fx::DeviceBuffer<int64_t> loc(k.loc, "in.loc");
  fx::DeviceBuffer<int64_t> errors(std::vector<int64_t>{0}, "errors");
  kern::RowLayout layout;
  layout.width = int64_t(k.layout.width);
  layout.src_stride = int64_t(k.layout.src_stride);
  layout.pool_stride = int64_t(k.layout.pool_stride);
  DeviceRun run;
  if (!k.fused) {
    kern::scatter_rows(kv.data(), loc.data(), int64_t(k.T), pool.data(), int64_t(k.rows), layout,
                       errors.data(), s);
  } else {
    fx::DeviceBuffer<float> weight(k.weight, "in.weight");
    fx::DeviceBuffer<float> cos_sin(k.cos_sin, "in.cos_sin");
    fx::DeviceBuffer<int64_t> positions(k.positions, "in.positions");
    kern::NormRope p;
    p.weight = weight.data();
    p.cos_sin = cos_sin.data();
    p.n_pos = int64_t(k.rope_dim ? k.cos_sin.size() / k.rope_dim : 0);
    p.positions = positions.data();
    p.eps = k.eps;
    p.rope_dim = int(k.rope_dim);
    p.lanes = k.lanes;
    kern::norm_rope_store(kv.data(), loc.data(), int64_t(k.T), pool.data(), int64_t(k.rows), layout,
                          p, errors.data(), s);
    gpu::synchronize(s);
    for (const auto* b : {&weight, &cos_sin})
      if (auto g = b->guards_intact(); !g) run.failures.push_back(g.message());
    if (auto g = positions.guards_intact(); !g) run.failures.push_back(g.message());
  }
  const int64_t n_errors = kernels::read_errors(errors.data(), s);
  gpu::check_last_error("kv_store replay");
  run.outputs = outputs(k, pool.download(s), n_errors);
  gpu::synchronize(s);
  if (auto g = pool.guards_intact(); !g) run.failures.push_back(g.message());
  if (auto g = kv.guards_intact(); !g) run.failures.push_back(g.message());
  if (auto g = loc.guards_intact(); !g) run.failures.push_back(g.message());
  return run;
}

// An implementation with another fp32 order (SGLang's kernel, saved from PyTorch) cannot match
// bit for bit: its written rows are held to the reference's stated bound against the fp64 value,
// and every other pool value must be untouched, bit for bit.
::testing::AssertionResult pool_within_bound(const st::Tensor& got, const st::Tensor& want,
                                             const fx::Case& c) {
  const KvCase k = read(c);
  const auto g = got.values<bf16>("got.pool");
  const auto w = want.values<bf16>("want.pool");
  if (g.size() != w.size())
    return ::testing::AssertionFailure() << "pool: " << g.size() << " values, want " << w.size();
  const std::vector<double> f64 = ref::norm_rope_rows_f64(k.kv, k.T, k.layout, k.norm_rope());
  const size_t n_pos = k.rope_dim ? k.cos_sin.size() / k.rope_dim : 0;
  std::vector<double> gw, ww;  // written rows: got vs fp64
  std::vector<bf16> gu, wu;    // the rest: got vs the pool's expected bits
  std::vector<uint8_t> written(w.size(), 0);
  for (size_t t = 0; t < k.T; ++t) {
    const int64_t l = k.loc[t], p = k.positions[t];
    if (l < 0 || size_t(l) >= k.rows || p < 0 || size_t(p) >= n_pos) continue;
    for (size_t j = 0; j < k.layout.width; ++j) written[size_t(l) * k.layout.pool() + j] = 1;
    for (size_t j = 0; j < k.layout.width; ++j) {
      gw.push_back(bf16_to_f32(g[size_t(l) * k.layout.pool() + j]));
      ww.push_back(f64[t * k.layout.width + j]);
    }
  }
  for (size_t i = 0; i < w.size(); ++i)
    if (!written[i]) {
      gu.push_back(g[i]);
      wu.push_back(w[i]);
    }
  fx::Tolerance tol;
  tol.atol = ref::kStoredAtol;
  tol.rtol = ref::kStoredRtol;
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

::testing::AssertionResult compare(const std::string& output, const st::Tensor& got,
                                   const st::Tensor& want, const fx::Case& c) {
  if (got.shape != want.shape)
    return ::testing::AssertionFailure() << output << ": shape " << got.shape_str()
                                         << " under test, " << want.shape_str() << " expected";
  fx::Options opt;
  opt.name = output;
  if (output == "errors")
    return fx::bitwise_equal(got.values<int64_t>("got.errors"), want.values<int64_t>("want.errors"),
                             fx::Shape{}, opt);
  if (output != "pool")
    return ::testing::AssertionFailure() << "kv_store has no output '" << output << "'";
  const bool fused = c.has_input("weight");
  if (fused && !c.has_input("lanes")) return pool_within_bound(got, want, c);
  std::vector<size_t> dims(got.shape.begin(), got.shape.end());
  return fx::bitwise_equal(got.values<bf16>("got.pool"), want.values<bf16>("want.pool"),
                           fx::Shape(dims), opt);
}

Family make() {
  Family f;
  f.name = "kv_store";
  f.summary =
      "in.kv BF16[T, S], in.loc I64[T], in.pool BF16[R, P] (the pool before), optional in.width "
      "I64 (default S); fused RMSNorm+RoPE variant when in.weight F32[width], in.cos_sin "
      "F32[n_pos, rope_dim], in.positions I64[T] are given (optional in.eps F32, in.lanes I32) -> "
      "pool BF16[R, P], errors I64 (rejected rows). Bitwise, except a fused case without in.lanes "
      "(another implementation's fp32 order): written rows within the reference's bf16 bound of "
      "the fp64 value, the rest of the pool bitwise";
  f.reference = reference;
  f.device = device;
  f.compare = compare;
  return f;
}

}  // namespace
}  // namespace dsv4::replay

DSV4_REPLAY_FAMILY(::dsv4::replay::make())

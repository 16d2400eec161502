// sparse_decode kernel case and replay adapter: sparse decode attention over SGLang's pages,
// unsplit or as split partials merged by split_combine, within the derived fp64 tolerance.
#include "dsv4/cases/sparse_decode.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "dsv4/cases/declared_inputs.hpp"
#include "dsv4/kernels/sparse_decode.hpp"
#include "dsv4/kernels/split_combine.hpp"
#include "dsv4/ref/fp32_math.hpp"
#include "dsv4/ref/sparse_decode.hpp"
#include "dsv4/replay/replay.hpp"
#include "dsv4/replay/shaped_family.hpp"

namespace dsv4::cases {
namespace {

namespace ref = ::dsv4::ref::sparse_decode;
namespace kern = ::dsv4::kernels::sparse_decode;

const st::Tensor& input(const fx::Tensors& in, const std::string& name) {
  return fx::input_of(in, name, "sparse_decode");
}

fx::CacheData cache_of(const fx::Tensors& in, const std::string& p, size_t B) {
  fx::CacheData c;
  const int32_t id = input(in, p + "layout").item<int32_t>("in." + p + "layout");
  if (!kv_layout_valid(id))
    throw st::FormatError("case", "in." + p + "layout", "value",
                          std::to_string(id) + " is not a KvLayout (0 v41, 1 v41_fp4, 2 v4)");
  c.layout = KvLayout(id);
  c.page_size = input(in, p + "page_size").item<int64_t>("in." + p + "page_size");
  const st::Tensor& pool = input(in, p + "pool");
  if (pool.shape.size() != 2) pool.throw_shape("in." + p + "pool", "[num_pages, page_bytes]");
  c.num_pages = int64_t(pool.shape[0]);
  c.pool = pool.values<uint8_t>("in." + p + "pool");
  const st::Tensor& idx = input(in, p + "indices");
  if (idx.shape.size() != 2 || idx.shape[0] != B)
    idx.throw_shape("in." + p + "indices", "[" + std::to_string(B) + ", K]");
  c.K = idx.shape[1];
  c.indices = idx.values<int32_t>("in." + p + "indices");
  c.lengths = input(in, p + "lengths").values<int32_t>("in." + p + "lengths");
  return c;
}

void add_cache(fx::Tensors& in, const fx::CacheData& c, const std::string& p, size_t B) {
  const uint64_t page_bytes = uint64_t(page_layout(c.layout).page_bytes(c.page_size));
  in[p + "pool"] = st::Tensor::of<uint8_t>({uint64_t(c.num_pages), page_bytes}, c.pool);
  in[p + "layout"] = st::Tensor::scalar<int32_t>(int32_t(c.layout));
  in[p + "page_size"] = st::Tensor::scalar<int64_t>(c.page_size);
  in[p + "indices"] = st::Tensor::of<int32_t>({B, c.K}, c.indices);
  in[p + "lengths"] = st::Tensor::of<int32_t>(c.lengths);
}

kern::Cache device_cache(const fx::DeviceTensors& d, const std::string& p) {
  kern::Cache c;
  c.layout = KvLayout(d.scalar<int32_t>(p + "layout"));
  c.page_size = d.scalar<int64_t>(p + "page_size");
  c.num_pages = int64_t(d.host(p + "pool").shape[0]);
  c.pool = d.ptr<uint8_t>(p + "pool");
  c.indices = d.ptr<int32_t>(p + "indices");
  c.K = int64_t(d.host(p + "indices").shape[1]);
  c.lengths = d.ptr<int32_t>(p + "lengths");
  return c;
}

int64_t splits_of(const fx::Tensors& in) {
  return in.count("splits") ? input(in, "splits").item<int64_t>("in.splits") : 0;
}
// The partials a case stores (its in.splits when it names them; none for decode()'s own choice).
int64_t stored_splits(const fx::Tensors& in) { return std::max<int64_t>(splits_of(in), 0); }
// in.splits = -1: decode() with a workspace picks its splits
// (kernels::sparse_decode::decode_splits).
bool auto_splits(const fx::Tensors& in) { return splits_of(in) == -1; }

}  // namespace

// The launcher's Args of a case's sizes alone (the workspace and the split choice need no data).
kernels::sparse_decode::Args sparse_decode_sized_args(const fx::Tensors& in) {
  kern::Args a;
  const st::Tensor& q = input(in, "q");
  a.B = int64_t(q.shape.at(0));
  a.H = int64_t(q.shape.at(1));
  a.main.K = int64_t(input(in, "indices").shape.at(1));
  if (in.count("extra_pool")) {
    a.extra.pool = input(in, "extra_pool").data.data();
    a.extra.K = int64_t(input(in, "extra_indices").shape.at(1));
  }
  return a;
}

fx::Vars SparseDecodeShape::vars() const {
  fx::Vars v;
  v.add("B", int64_t(s.B)).add("H", int64_t(s.H)).add("K", int64_t(s.K));
  v.flag(kv_layout_name(s.layout)).add("P", s.page_size);
  if (s.Ke)
    v.add("extra", kv_layout_name(s.extra_layout))
        .add("Ke", int64_t(s.Ke))
        .add("Pe", s.extra_page_size);
  if (splits) v.add("S", splits);
  return v.flag("auto-splits", auto_splits).flag("rope", rope).flag("finite-sinks", finite_sinks);
}

fx::SparseCase sparse_case_of(const fx::Tensors& in) {
  fx::SparseCase c;
  const st::Tensor& q = input(in, "q");
  if (q.shape.size() != 3 || q.shape[2] != uint64_t(kTokenValues))
    q.throw_shape("in.q", "[B, H, 512]");
  c.B = q.shape[0];
  c.H = q.shape[1];
  c.q = q.values<bf16>("in.q");
  c.main = cache_of(in, "", c.B);
  if (in.count("extra_pool")) c.extra = cache_of(in, "extra_", c.B);
  c.sm_scale = input(in, "sm_scale").item<float>("in.sm_scale");
  if (in.count("sink")) c.sink = input(in, "sink").values<float>("in.sink");
  ref::check(c.inputs());  // sizes and the layout pair, naming the field
  return c;
}

ref::Inputs SparseView::inputs() const {
  ref::Inputs r = c.inputs();
  r.cos_sin = cos_sin;
  r.positions = positions;
  r.rope_dim = rope_dim;
  return r;
}

SparseView sparse_view_of(const fx::Tensors& in) {
  SparseView v;
  v.c = sparse_case_of(in);
  if (in.count("cos_sin") || in.count("positions")) {
    const st::Tensor& cs = input(in, "cos_sin");
    if (cs.shape.size() != 2 || cs.shape[1] == 0) cs.throw_shape("in.cos_sin", "[n_pos, rope_dim]");
    v.cos_sin = cs.values<float>("in.cos_sin");
    v.rope_dim = cs.shape[1];
    v.positions = input(in, "positions").values<int64_t>("in.positions");
  }
  ref::check(v.inputs());
  return v;
}

fx::Tensors tensors_of(const fx::SparseCase& c) {
  fx::Tensors in;
  in["q"] = st::Tensor::of<bf16>({c.B, c.H, uint64_t(kTokenValues)}, c.q);
  add_cache(in, c.main, "", c.B);
  if (c.extra) add_cache(in, *c.extra, "extra_", c.B);
  in["sm_scale"] = st::Tensor::scalar<float>(c.sm_scale);
  if (!c.sink.empty()) in["sink"] = st::Tensor::of<float>(c.sink);
  return in;
}

SparseDecodeShape spread_shape(size_t B, size_t H, size_t K, KvLayout layout, int64_t P,
                               int64_t splits, size_t Ke, KvLayout extra, int64_t Pe) {
  auto pages = [](size_t cols, int64_t p) {
    return int64_t((2 * cols + size_t(p) - 1) / size_t(p)) + 1;
  };
  SparseDecodeShape s;
  s.s = {.B = B,
         .H = H,
         .K = K,
         .layout = layout,
         .page_size = P,
         .num_pages = pages(K, P),
         .Ke = Ke,
         .extra_layout = extra,
         .extra_page_size = Pe,
         .extra_pages = pages(Ke, Pe)};
  s.splits = splits;
  return s;
}

SparseDecodeCase::SparseDecodeCase(SparseDecodeShape shape) : ShapedCase(shape) {}

std::vector<std::string> kv_layout_names() {
  std::vector<std::string> v;
  for (int i = 0; i < kKvLayoutCount; ++i) v.push_back(kv_layout_name(KvLayout(i)));
  return v;
}

SparseDecodeShape SparseDecodeShape::from_vars(fx::VarsReader& r) {
  const SparseDecodeShape d;
  const std::vector<std::string> names = kv_layout_names();
  const size_t B = size_t(r.num("B", int64_t(d.s.B))), H = size_t(r.num("H", int64_t(d.s.H))),
               K = size_t(r.num("K", int64_t(d.s.K)));
  const auto layout = KvLayout(r.one_of(names, int(d.s.layout)));
  const int64_t P = r.num("P", d.s.page_size);
  const std::string extra = r.word("extra", names, "");
  const size_t Ke = size_t(r.num("Ke", 0));
  const int64_t Pe = r.num("Pe", d.s.extra_page_size);
  const int64_t splits = r.num("S", 0);
  KvLayout e = KvLayout::kV41;
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == extra) e = KvLayout(i);
  SparseDecodeShape s = spread_shape(B, H, K, layout, P, splits, Ke, e, Pe);
  s.auto_splits = r.flag("auto-splits");
  if (s.auto_splits && splits)
    throw std::invalid_argument("auto-splits and S=" + std::to_string(splits) +
                                " exclude each other (decode() picks its own splits)");
  s.rope = r.flag("rope");
  s.finite_sinks = r.flag("finite-sinks");
  return s;
}

std::vector<fx::NamedSweep<SparseDecodeShape>> SparseDecodeCase::sweeps() {
  return {{"gpu", sparse_decode_gpu_sweep},
          {"soak", sparse_decode_soak_sweep},
          {"sglang", sparse_decode_sglang_sweep}};
}

SparseDecodeCase::SparseDecodeCase(const fx::Tensors& in, const SparseDecodeShape& stated)
    : ShapedCase(stated) {
  const fx::SparseCase c = sparse_case_of(in);
  fx::SparseShape& s = shape_.s;
  s.B = c.B, s.H = c.H, s.K = c.main.K, s.layout = c.main.layout;
  s.page_size = c.main.page_size, s.num_pages = c.main.num_pages;
  if (c.extra) {
    s.Ke = c.extra->K, s.extra_layout = c.extra->layout;
    s.extra_page_size = c.extra->page_size, s.extra_pages = c.extra->num_pages;
  }
  s.sink = !c.sink.empty();
  shape_.splits = stored_splits(in);
  shape_.auto_splits = auto_splits(in);
  shape_.rope = sparse_view_of(in).rope_dim != 0;
  // What the file states, where its sinks bear it out (else the stated shape is contradicted).
  shape_.finite_sinks =
      stated.finite_sinks && !c.sink.empty() &&
      std::all_of(c.sink.begin(), c.sink.end(), [](float x) { return std::isfinite(x); });
}

fx::Tensors SparseDecodeCase::draw(fx::Rng& rng) const {
  fx::Tensors in = tensors_of(fx::sparse_case(rng, shape_.s, shape_.mix));
  if (shape_.finite_sinks && in.count("sink"))  // each +-inf sink redrawn finite, in [-12, 12]
    for (float& x : fx::values_of<float>(in.at("sink"), "in.sink"))
      if (!std::isfinite(x)) x = float(rng.uniform(-12, 12));
  if (shape_.splits) in["splits"] = st::Tensor::scalar<int64_t>(shape_.splits);
  if (shape_.auto_splits) in["splits"] = st::Tensor::scalar<int64_t>(-1);
  if (shape_.rope) {  // (cos, sin) of p * 10000^(-2i/64), as SGLang's freqs_cis viewed real
    const size_t n_pos = 4096, rd = 64, B = shape_.s.B;
    std::vector<float> cs(n_pos * rd);
    for (size_t p = 0; p < n_pos; ++p)
      for (size_t i = 0; i < rd / 2; ++i) {
        const double th = double(p) * std::pow(10000.0, -2.0 * double(i) / double(rd));
        cs[p * rd + 2 * i] = float(std::cos(th));
        cs[p * rd + 2 * i + 1] = float(std::sin(th));
      }
    std::vector<int64_t> pos(B);
    for (auto& x : pos)
      x = rng.uniform() < shape_.bad_position ? (rng.uniform() < 0.5 ? -1 : int64_t(n_pos))
                                              : rng.range(0, int64_t(n_pos) - 1);
    in["cos_sin"] = st::Tensor::of<float>({n_pos, rd}, cs);
    in["positions"] = st::Tensor::of<int64_t>(pos);
  }
  return in;
}

std::vector<fx::OutputSpec> SparseDecodeCase::outputs(const fx::Tensors& in) const {
  const st::Tensor& q = input(in, "q");
  const uint64_t B = q.shape.at(0), H = q.shape.at(1), D = uint64_t(kTokenValues);
  std::vector<fx::OutputSpec> o = {
      {.name = "out", .dtype = st::DType::BF16, .shape = {B, H, D}},
      {.name = "out_lse", .dtype = st::DType::F32, .shape = {B, H}},
      {.name = "errors", .dtype = st::DType::I64, .shape = {}, .init = fx::Init::kZero}};
  if (const uint64_t S = uint64_t(stored_splits(in))) {
    o.push_back({.name = "part_o", .dtype = st::DType::F32, .shape = {B, S, H, D}});
    o.push_back({.name = "part_lse", .dtype = st::DType::F32, .shape = {B, S, H}});
  }
  return o;
}

fx::Tensors SparseDecodeCase::reference(const fx::Tensors& in) const {
  const SparseView v = sparse_view_of(in);
  const fx::SparseCase& c = v.c;
  const ref::Outputs r = ref::decode_f64(v.inputs());
  const uint64_t B = c.B, H = c.H, D = uint64_t(kTokenValues);
  fx::Tensors want = {{"out", st::Tensor::of<double>({B, H, D}, r.out)},
                      {"out_lse", st::Tensor::of<double>({B, H}, r.lse)},
                      {"errors", st::Tensor::scalar<int64_t>(r.errors)}};
  if (const int64_t S = stored_splits(in)) {
    const ref::Partials p = ref::partials_f64(c.inputs(), size_t(S));
    want["part_o"] = st::Tensor::of<double>({B, uint64_t(S), H, D}, p.o);
    want["part_lse"] = st::Tensor::of<double>({B, uint64_t(S), H}, p.lse);
  }
  return want;
}

void SparseDecodeCase::launch(const fx::DeviceTensors& d, gpu::Stream s) const {
  const st::Tensor& q = d.host("q");
  kern::Args a;
  a.B = int64_t(q.shape[0]);
  a.H = int64_t(q.shape[1]);
  a.q = d.ptr<bf16>("q");
  a.main = device_cache(d, "");
  if (d.has("extra_pool")) a.extra = device_cache(d, "extra_");
  a.sm_scale = d.scalar<float>("sm_scale");
  a.sink = d.has("sink") ? d.ptr<float>("sink") : nullptr;
  a.errors = d.ptr<int64_t>("errors");
  const int64_t S = d.has("splits") ? d.scalar<int64_t>("splits") : 0;
  if (S == -1) {  // decode()'s own split choice, in its workspace
    const bool ws = d.has("workspace");
    kern::decode(a, d.ptr<bf16>("out"), d.ptr<float>("out_lse"),
                 ws ? d.ptr<uint8_t>("workspace") : nullptr,
                 ws ? kern::decode_workspace_bytes(a) : 0, s);
    return;
  }
  if (S == 0) {
    kern::decode(a, d.ptr<bf16>("out"), d.ptr<float>("out_lse"), s);
    return;
  }
  kern::decode_partials(a, S, d.ptr<float>("part_o"), d.ptr<float>("part_lse"), s);
  // Every query has S partials; the merge applies the sink.
  kernels::split_combine::Args m;
  m.B = a.B, m.S = S, m.H = a.H, m.D = kTokenValues;
  m.o = d.ptr<float>("part_o");
  m.lse = d.ptr<float>("part_lse");
  m.n_splits = nullptr;
  m.sink = a.sink;
  m.out = d.ptr<bf16>("out");
  m.out_lse = d.ptr<float>("out_lse");
  m.errors = a.errors;
  if (d.has("cos_sin")) {  // the inverse RoPE of compact_attention_hip, applied by the merge
    const st::Tensor& cs = d.host("cos_sin");
    m.rope = {d.ptr<float>("cos_sin"), int64_t(cs.shape[0]), int(cs.shape[1]),
              d.ptr<int64_t>("positions")};
  }
  kernels::split_combine::combine(m, s);
}

::testing::AssertionResult SparseDecodeCase::compare(const fx::OutputSpec& spec,
                                                     const st::Tensor& got, const st::Tensor& want,
                                                     const fx::Tensors& in) const {
  if (spec.name == "errors") return fx::KernelCase::compare(spec, got, want, in);
  const ref::Tolerance t = ref::tolerance(sparse_view_of(in).inputs());
  fx::Tolerance tol;
  tol.allow_all_zero = true;
  if (spec.name == "out" || spec.name == "part_o") {
    tol.atol = t.out_atol;
    tol.rtol = spec.name == "out" ? t.out_rtol : t.out_rtol / 2;  // no bf16 cast in the partials
    tol.max_cos_dist = t.cos;
  } else {  // out_lse natural; part_lse base 2
    tol.atol = spec.name == "out_lse" ? t.lse_atol : t.lse_atol * double(f32m::kLog2e);
  }
  return fx::within(tol)(got, want, spec.name, in);
}

std::vector<fx::ScratchSpec> SparseDecodeCase::scratch(const fx::Tensors& in) const {
  if (!auto_splits(in)) return {};
  const size_t bytes = kern::decode_workspace_bytes(sparse_decode_sized_args(in));
  if (bytes == 0) return {};  // one split on this device: the unsplit kernel, no workspace
  return {{.name = "workspace", .bytes = bytes}};
}

std::string SparseDecodeCase::cannot_run() const {
  if (shape_.rope && !shape_.splits)
    return "the project's decode() has no inverse RoPE (the split path, in.splits, applies "
           "it in split_combine)";
  return "";
}

::testing::AssertionResult SparseDecodeCase::compare_foreign(const fx::OutputSpec& spec,
                                                             const st::Tensor& got,
                                                             const st::Tensor& want,
                                                             const fx::Tensors& in) const {
  if (spec.name == "out" && got.shape == want.shape) {
    const SparseView v = sparse_view_of(in);
    const ref::Outputs r = ref::decode_f64(v.inputs());
    const size_t B = v.c.B, H = v.c.H;
    std::vector<bool> zero_row(B * H);
    for (size_t row = 0; row < B * H; ++row)
      zero_row[row] =
          r.lse[row] == INFINITY || (!v.c.sink.empty() && v.c.sink[row % H] == INFINITY);
    if (auto nan =
            no_nan_in_zero_rows(got.to_f64("got.out"), zero_row, size_t(kTokenValues), spec.name);
        !nan)
      return nan;
  }
  return compare(spec, got, want, in);
}

InputDecls SparseDecodeCase::declared_inputs() {
  return {{"q", st::DType::BF16, {"B", "H", "512"}},
          {"pool", st::DType::U8, {"pages", "page_bytes"}},
          {"layout", st::DType::I32, {}, false, "0 v41, 1 v41_fp4, 2 v4, 3 v4_fnuz"},
          {"page_size", st::DType::I64, {}},
          {"indices", st::DType::I32, {"B", "K"}},
          {"lengths", st::DType::I32, {"B"}},
          {"extra_pool", st::DType::U8, {"extra_pages", "extra_page_bytes"}, true},
          {"extra_layout", st::DType::I32, {}, true},
          {"extra_page_size", st::DType::I64, {}, true},
          {"extra_indices", st::DType::I32, {"B", "Ke"}, true},
          {"extra_lengths", st::DType::I32, {"B"}, true},
          {"sm_scale", st::DType::F32, {}},
          {"sink", st::DType::F32, {"H"}, true},
          {"splits", st::DType::I64, {}, true, "the split-KV path through split_combine"},
          {"cos_sin", st::DType::F32, {"n_pos", "rope_dim"}, true, "inverse RoPE"},
          {"positions", st::DType::I64, {"B"}, true, "with cos_sin"}};
}

}  // namespace dsv4::cases

DSV4_DECLARED_FAMILY(
    "sparse_decode", ::dsv4::cases::SparseDecodeCase,
    "out BF16[B, H, 512], out_lse F32[B, H], errors I64 (+ part_o F32[B, S, H, 512], "
    "part_lse F32[B, S, H] with splits). Within the tolerance derived from the "
    "data (fp64 reference); a foreign source's NaN in a row with no key fails "
    "naming SGLang's HIP reducer")

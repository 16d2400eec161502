// sampling_renorm kernel case and replay adapter: top-k / top-p renormalisation of fp32 rows.
#include "dsv4/cases/sampling_renorm.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <sstream>

#include "dsv4/cases/declared_inputs.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/kernels/sampling_renorm.hpp"
#include "dsv4/ref/sampling_renorm.hpp"
#include "dsv4/replay/replay.hpp"
#include "dsv4/replay/shaped_family.hpp"

namespace dsv4::cases {
namespace {

namespace ref = ::dsv4::ref::sampling_renorm;
namespace kern = ::dsv4::kernels::sampling_renorm;

const st::Tensor& input(const fx::Tensors& in, const std::string& name) {
  return fx::input_of(in, name, "sampling_renorm");
}

// RowKind's words, in its order.
const std::vector<std::string> kKindNames = {"softmax", "ties", "equal",    "one-hot",
                                             "hostile", "zero", "boundary", "mixed"};

const char* kind_name(RowKind k) { return kKindNames.at(size_t(k)).c_str(); }

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
    case RowKind::kBoundary: {
      // 2^-1, 2^-2, 2^-3 at random places over 2^-27 everywhere else: the top-j masses
      // 1 - 2^-j are exact, and the kept sum of the tiny ones depends on its order.
      std::fill(r.begin(), r.end(), std::ldexp(1.f, -27));
      for (int j = 1; j <= 3 && size_t(j) <= V; ++j) {
        size_t at;
        do at = size_t(rng.range(0, int64_t(V) - 1));
        while (r[at] != std::ldexp(1.f, -27));
        r[at] = std::ldexp(1.f, -j);
      }
      return r;
    }
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

fx::Vars SamplingRenormShape::vars() const {
  fx::Vars v;
  v.add("B", B).add("V", V).flag(top_p ? "top-p" : "top-k").flag(kind_name(rows));
  v.flag("fused", variant == kern::Variant::kFused);
  v.flag("multi-launch", variant == kern::Variant::kMultiLaunch);
  v.flag("in-place", in_place).flag("k-clamp", k_clamp != 0).flag("renorm-py", top_p_rule != 0);
  return v;
}

SamplingRenormShape SamplingRenormShape::from_vars(fx::VarsReader& r) {
  SamplingRenormShape s;
  s.B = r.num("B", s.B);
  s.V = r.num("V", s.V);
  s.top_p = r.one_of({"top-k", "top-p"}, 0) == 1;
  s.rows = RowKind(r.one_of(kKindNames, int(s.rows)));
  const int v = r.one_of({"fused", "multi-launch"}, -1);
  s.variant = v == 0   ? kern::Variant::kFused
              : v == 1 ? kern::Variant::kMultiLaunch
                       : kern::Variant::kAuto;
  s.in_place = r.flag("in-place");
  s.k_clamp = r.flag("k-clamp") ? 1 : 0;
  s.top_p_rule = r.flag("renorm-py") ? 1 : 0;
  return s;
}

std::vector<fx::NamedSweep<SamplingRenormShape>> SamplingRenormCase::sweeps() {
  return {{"gpu", sampling_renorm_gpu_sweep},
          {"hostile", sampling_renorm_hostile_sweep},
          {"boundary", sampling_renorm_boundary_sweep},
          {"soak", sampling_renorm_soak_sweep}};
}

SamplingRenormCase::SamplingRenormCase(const fx::Tensors& in, const SamplingRenormShape& stated)
    : ShapedCase(stated) {
  // Presence, dtypes and sizes: declared_inputs(), checked before a case file reaches here.
  const st::Tensor& probs = input(in, "probs");
  shape_.B = int64_t(probs.shape.at(0));
  shape_.V = int64_t(probs.shape.at(1));
  shape_.top_p = in.count("p") != 0;
  shape_.in_place = in.count("out") != 0;
  input(in, shape_.top_p ? "p" : "k");  // one of them: "in.k missing" otherwise
  auto rule = [&](const char* name) {
    if (!in.count(name)) return 0;
    const int32_t v = input(in, name).item<int32_t>(std::string("in.") + name);
    if (v != 0 && v != 1)
      throw st::FormatError("case", std::string("in.") + name, "value",
                            std::to_string(v) + " must be 0 or 1");
    return int(v);
  };
  shape_.k_clamp = rule("k_clamp");
  shape_.top_p_rule = rule("top_p_rule");
}

fx::Tensors SamplingRenormCase::draw(fx::Rng& rng) const {
  const size_t B = size_t(shape_.B), V = size_t(shape_.V);
  std::vector<float> probs;
  std::vector<RowKind> kinds;
  for (size_t b = 0; b < B; ++b) {
    const RowKind kind = shape_.rows == RowKind::kMixed
                             ? RowKind(rng.range(0, int64_t(RowKind::kBoundary)))
                             : shape_.rows;
    const auto r = draw_row(rng, V, kind);
    probs.insert(probs.end(), r.begin(), r.end());
    kinds.push_back(kind);
  }
  fx::Tensors in;
  in["probs"] = st::Tensor::of<float>({B, V}, probs);
  if (shape_.in_place) in["out"] = in["probs"];
  if (shape_.k_clamp) in["k_clamp"] = st::Tensor::scalar<int32_t>(shape_.k_clamp);
  if (shape_.top_p_rule) in["top_p_rule"] = st::Tensor::scalar<int32_t>(shape_.top_p_rule);
  if (shape_.top_p) {
    std::vector<float> p(B);
    for (size_t b = 0; b < B; ++b) {
      const double u = rng.uniform();
      p[b] = u < 0.1 ? 0.f : u < 0.2 ? 1.f : u < 0.25 ? 1.5f : float(rng.uniform(0, 1));
      // A boundary row's p is the exact mass of its top 1, 2 or 3 values.
      if (kinds[b] == RowKind::kBoundary)
        p[b] = 1.f - std::ldexp(1.f, -int(rng.range(1, std::min<int64_t>(3, int64_t(V)))));
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
    ref::top_p(x, probs.shape[1], input(in, "p").values<float>("in.p"), out, ref::Arith::kKernel,
               ref::TopPRule(shape_.top_p_rule));
  else
    ref::top_k(x, probs.shape[1], input(in, "k").values<int32_t>("in.k"), out, ref::Arith::kKernel,
               ref::KRule(shape_.k_clamp));
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

std::string SamplingRenormCase::cannot_run() const {
  if (shape_.k_clamp) return "the project's kernel keeps all for k <= 0 (in.k_clamp=0)";
  if (shape_.top_p_rule)
    return "the project's kernel follows FlashInfer's top-p rule (in.top_p_rule=0)";
  return "";
}

::testing::AssertionResult SamplingRenormCase::compare_foreign(const fx::OutputSpec& spec,
                                                               const st::Tensor& got,
                                                               const st::Tensor& want,
                                                               const fx::Tensors& in) const {
  if (got.shape != want.shape || got.dtype != st::DType::F32)
    return fx::bitwise_tensors(got, want, spec.name);
  const st::Tensor& probs = input(in, "probs");
  const size_t B = probs.shape[0], V = probs.shape[1];
  const auto x = probs.values<float>("in.probs");
  const auto g = got.values<float>();
  const double u = std::ldexp(1.0, -24);
  auto r = ::testing::AssertionFailure();
  size_t bad = 0;
  fx::Comparison rep{.name = spec.name, .comparator = "kept_set", .checked = B};
  for (size_t b = 0; b < B; ++b) {
    const std::span<const float> row(x.data() + b * V, V);
    const float* o = g.data() + b * V;
    std::vector<double> w(V);
    double total = 0;
    for (size_t i = 0; i < V; ++i) total += (w[i] = ref::weight(row[i]));
    // The kept set the output shows: its smallest kept weight is its pivot.
    double v = INFINITY;
    bool any = false;
    for (size_t i = 0; i < V; ++i)
      if (o[i] != 0.f) {
        any = true;
        v = std::min(v, w[i]);
      }
    std::ostringstream why;
    auto mass_from = [&](double t, bool strict) {
      double m = 0;
      for (double wi : w) m += (strict ? wi > t : wi >= t) ? wi : 0;
      return m;
    };
    if (!any) {
      if (total > 0) why << "every entry is 0, yet the row has mass " << total;
    } else if (v <= 0) {
      why << "an entry of weight 0 (NaN, negative, -0 or +inf) is kept";
    } else if (!shape_.top_p) {
      const float pivot = ref::top_k_pivot(row, input(in, "k").values<int32_t>("in.k")[b],
                                           ref::KRule(shape_.k_clamp));
      double lowest = INFINITY;  // the smallest weight the rule keeps
      for (double wi : w)
        if (wi > 0 && wi >= double(pivot)) lowest = std::min(lowest, wi);
      if (v != lowest) why << "keeps down to " << v << ", the rule down to " << lowest;
    } else {
      // Either rule at exact equality, within the fp32 summation error of the masses.
      const float p = input(in, "p").values<float>("in.p")[b];
      const double eps = double(V + 2) * u * total;
      const double kept = mass_from(v, false), above = mass_from(v, true);
      if (!(p < 1)) {
        if (kept != total) why << "p = " << p << " keeps every entry; kept down to " << v;
      } else if (!(kept >= double(p) - eps) && kept != total) {
        why << "kept mass " << kept << " (down to " << v << ") does not reach p = " << p;
      } else if (above > std::max(double(p), 0.0) + eps) {
        why << "keeps down to " << v << " although the mass above it, " << above
            << ", already exceeds p = " << p;
      }
    }
    if (why.str().empty()) {
      // The values: w / S of the kept set, S its fp64 sum; any summation order of n terms and
      // the division (or a reciprocal) err by at most (n + 4) 2^-24 relative.
      double S = 0;
      size_t n = 0;
      for (size_t i = 0; i < V; ++i)
        if (w[i] >= v && w[i] > 0) S += w[i], ++n;
      const double rtol = double(n + 4) * u;
      for (size_t i = 0; i < V; ++i) {
        const bool keep = w[i] >= v && w[i] > 0;
        const double want_i = keep ? w[i] / S : 0.0;
        if (keep ? !(std::abs(double(o[i]) - want_i) <= rtol * want_i) : o[i] != 0.f) {
          why << "entry " << i << " = " << o[i] << ", want " << want_i;
          if (keep)
            why << " within rtol " << rtol << " ((n_kept + 4) 2^-24)";
          else
            why << " (not kept)";
          break;
        }
      }
    }
    if (why.str().empty()) continue;
    if (bad < 8)
      rep.first.push_back({{b}, fx::Value::of_text(why.str()), fx::Value::of_text("the rule")});
    if (bad++ < 4) r << spec.name << " row " << b << ": " << why.str() << "\n";
  }
  rep.ok = bad == 0;
  rep.mismatched = bad;
  fx::report_comparison(rep);
  if (!bad) return ::testing::AssertionSuccess();
  return r << spec.name << ": " << bad << " of " << B << " rows are no renormalisation the "
           << (shape_.top_p ? "top-p" : "top-k")
           << " rule allows (either top-p rule at exact equality; values within the derived "
              "tolerance)";
}

InputDecls SamplingRenormCase::declared_inputs() {
  return {{"probs", st::DType::F32, {"B", "V"}},
          {"k", st::DType::I32, {"B"}, true, "top-k"},
          {"p", st::DType::F32, {"B"}, true, "top-p"},
          {"out", st::DType::F32, {"B", "V"}, true, "in place: a copy of probs"},
          {"k_clamp", st::DType::I32, {}, true, "1: SGLang's clamp of k to [1, V]"},
          {"top_p_rule", st::DType::I32, {}, true, "0 FlashInfer's, 1 renorm.py's"}};
}

}  // namespace dsv4::cases

DSV4_DECLARED_FAMILY(
    "sampling_renorm", ::dsv4::cases::SamplingRenormCase,
    "out F32[B, V], bitwise against the reference in the kernel's arithmetic; a foreign "
    "source: the kept set either top-p rule allows, values within (n_kept + 4) "
    "2^-24")

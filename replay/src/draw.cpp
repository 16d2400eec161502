// dsv4-replay --draw: a family's cases written as case files (inputs, want, start states).
#include <algorithm>
#include <exception>
#include <filesystem>
#include <ostream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "dsv4/fixtures/seed.hpp"
#include "dsv4/replay/replay.hpp"

namespace dsv4::replay {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* init_name(fx::Init i) {
  switch (i) {
    case fx::Init::kZero:
      return "zero";
    case fx::Init::kFromInput:
      return "input";
    default:
      return "poison";
  }
}

// An output's state before a launch, as the harness's CaseDevice::reset_outputs() makes it.
st::Tensor start_of(const fx::OutputSpec& o, const fx::Tensors& in, const std::string& family) {
  st::Tensor t;
  if (o.init == fx::Init::kFromInput)
    t = fx::input_of(in, o.name, family);
  else
    t = fx::filled(
        o.dtype, o.shape,
        o.init == fx::Init::kZero ? uint8_t(0) : o.poison.value_or(fx::default_poison(o.dtype)));
  if (!o.format.empty()) t.format = o.format;
  return t;
}

struct Usage : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

std::vector<fx::Vars> points_of(const Family& f, const DrawRequest& r) {
  const Family::Drawing& d = *f.drawing;
  if (!r.sweep.empty()) {
    std::string names;
    for (const auto& s : d.sweeps) {
      if (s.name == r.sweep) return s.points();
      names += (names.empty() ? "" : ", ") + s.name;
    }
    throw Usage("--sweep " + r.sweep + ": " + f.name + " has no such sweep (sweeps: " + names +
                ")");
  }
  try {
    return {fx::Vars::parse(r.spec)};
  } catch (const fx::VarsError& e) {
    throw Usage("--shape " + r.spec + ": " + e.what() + " (keys: " + d.keys + ")");
  }
}

// `set` laid over `p`: its key=value items replace p's values of those keys, its flags are added.
fx::Vars overlay(const fx::Vars& p, const fx::Vars& set) {
  fx::Vars v;
  for (const auto& [k, val] : p.items()) {
    bool replaced = false;
    for (const auto& [sk, sval] : set.items())
      if (sk == k && !sval.empty()) {
        v.add(k, sval);
        replaced = true;
      }
    if (!replaced) {
      if (val.empty())
        v.flag(k);
      else
        v.add(k, val);
    }
  }
  for (const auto& [sk, sval] : set.items()) {
    bool present = false;
    for (const auto& [k, val] : p.items()) present = present || k == sk;
    if (present) continue;
    if (sval.empty())
      v.flag(sk);
    else
      v.add(sk, sval);
  }
  return v;
}

}  // namespace

std::string drawn_path(const std::string& dir, const std::string& family, const fx::Vars& v,
                       uint64_t seed) {
  return (fs::path(dir) /
          (family + "--" + v.id() + "--seed" + std::to_string(seed) + ".safetensors"))
      .string();
}

fx::Case drawn_case(const fx::KernelCase& k, const fx::Vars& v, uint64_t seed) {
  fx::Rng rng(seed);  // what fx::check_case(k, seed, ...) launches
  fx::Tensors in = k.draw(rng);
  fx::Tensors want = k.reference(in);
  return drawn_case(k, v, seed, std::move(in), std::move(want));
}

fx::Case drawn_case(const fx::KernelCase& k, const fx::Vars& v, uint64_t seed, fx::Tensors inputs,
                    fx::Tensors want) {
  fx::Case c{k.family(), v.str(), seed, std::move(inputs), {}, {}, {}};
  c.want = std::move(want);
  json outs = json::array();
  for (const fx::OutputSpec& o : k.outputs(c.inputs)) {
    c.start[o.name] = start_of(o, c.inputs, k.family());
    if (auto w = c.want.find(o.name); w != c.want.end() && !o.format.empty())
      w->second.format = o.format;
    const bool poison = o.init == fx::Init::kPoison;
    outs.push_back({{"name", o.name},
                    {"dtype", st::dtype_name(o.dtype)},
                    {"shape", o.shape},
                    {"start", init_name(o.init)},
                    {"poison", poison ? json(o.poison.value_or(fx::default_poison(o.dtype)))
                                      : json(nullptr)}});
  }
  json vars = json::object();
  for (const auto& [key, value] : v.items()) vars[key] = value;
  c.metadata["dsv4.shape"] = v.spec();
  c.metadata["dsv4.source"] = "dsv4";
  c.metadata["dsv4.repro"] = fx::shell_quoted(fx::replay_executable()) + " --draw " + k.family() +
                             " --shape " + fx::shell_quoted(v.spec()) + " --seed " +
                             std::to_string(seed);
  c.metadata["dsv4.outputs"] = outs.dump();
  c.metadata["dsv4.vars"] = vars.dump();
  return c;
}

int draw(const DrawRequest& r, std::ostream& out, std::ostream& err) {
  const Family* f = find_family(r.family);
  if (!f) {
    std::string known;
    for (const auto& n : family_names()) known += (known.empty() ? "" : ", ") + n;
    err << "dsv4-replay: --draw " << r.family << ": unknown family (known: " << known << ")\n";
    return 2;
  }
  if (!f->drawing) {
    err << "dsv4-replay: --draw " << r.family << ": the family draws no cases\n";
    return 2;
  }
  if (!r.spec.empty() && !r.sweep.empty()) {
    err << "dsv4-replay: --shape and --sweep exclude each other\n";
    return 2;
  }
  std::vector<fx::Vars> points;
  try {
    points = points_of(*f, r);
  } catch (const Usage& e) {
    err << "dsv4-replay: " << e.what() << "\n";
    return 2;
  }
  if (!r.set.empty()) {
    fx::Vars set;
    try {
      set = fx::Vars::parse(r.set);
    } catch (const fx::VarsError& e) {
      err << "dsv4-replay: --set " << r.set << ": " << e.what() << " (keys: " << f->drawing->keys
          << ")\n";
      return 2;
    }
    std::vector<fx::Vars> laid;
    std::vector<std::string> seen;
    size_t left_out = 0;
    for (const fx::Vars& p : points) {
      const fx::Vars v = overlay(p, set);
      try {
        const std::string spec = f->drawing->from_vars(v)->shape_spec();
        if (std::find(seen.begin(), seen.end(), spec) != seen.end()) continue;
        seen.push_back(spec);
        laid.push_back(v);
      } catch (const std::exception& e) {
        ++left_out;
        err << "dsv4-replay: --set " << r.set << " does not fit the point '" << p.str()
            << "', left out: " << e.what() << "\n";
      }
    }
    if (laid.empty()) {
      err << "dsv4-replay: --set " << r.set << " fits none of the " << points.size() << " points\n";
      return 2;
    }
    if (left_out)
      err << "dsv4-replay: --set " << r.set << ": " << left_out << " of " << points.size()
          << " points left out\n";
    points = std::move(laid);
  }
  if (r.max_points > 0 && points.size() > r.max_points) {
    std::vector<fx::Vars> some;
    const size_t n = points.size(), k = r.max_points;
    for (size_t i = 0; i < k; ++i) some.push_back(points[k == 1 ? 0 : i * (n - 1) / (k - 1)]);
    err << "dsv4-replay: --max-points " << k << ": " << k << " of the " << n << " points\n";
    points = std::move(some);
  }
  const uint64_t seed = r.seed ? *r.seed : fx::case_seeds().front();
  std::error_code ec;
  fs::create_directories(r.dir.empty() ? "." : r.dir, ec);
  if (ec) {
    err << "dsv4-replay: --out " << r.dir << ": cannot create the directory: " << ec.message()
        << "\n";
    return 3;
  }
  for (const fx::Vars& given : points) {
    fx::Case c;
    fx::Vars v;  // the point's whole vars: the missing keys at their defaults
    try {
      const auto k = f->drawing->from_vars(given);
      v = fx::Vars::parse(k->shape_spec());
      if (const std::string again = f->drawing->from_vars(v)->shape_spec(); again != v.spec())
        throw std::invalid_argument("its vars '" + v.spec() + "' read back as '" + again + "'");
      c = drawn_case(*k, v, seed);
    } catch (const fx::VarsError& e) {
      err << "dsv4-replay: --shape " << given.spec() << ": " << e.what() << "\n";
      return 2;
    } catch (const std::exception& e) {
      err << "dsv4-replay: " << f->name << " cannot draw the point '" << given.str()
          << "': " << e.what() << "\n";
      return 2;
    }
    const std::string path = drawn_path(r.dir.empty() ? "." : r.dir, f->name, v, seed);
    try {
      c.write(path);
    } catch (const std::exception& e) {
      err << "dsv4-replay: cannot write " << path << ": " << e.what() << "\n";
      return 3;
    }
    out << path << std::endl;  // flushed as written: a reader may start on it
  }
  return 0;
}

}  // namespace dsv4::replay

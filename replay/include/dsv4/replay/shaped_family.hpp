// A family built from a shaped adapter: reading a case file (its shape stated in "dsv4.shape")
// and drawing cases (--draw) from the shape's parser and named sweeps.
#pragma once

// CaseClass is a cases::ShapedCase<Shape> with
//   CaseClass(Shape)                          the case of a shape (GPU tests, --draw)
//   CaseClass(const fx::Tensors&, const Shape& stated)
//                                             from a case file's inputs, starting from `stated`
//   static Shape Shape::from_vars(fx::VarsReader&)   the inverse of Shape::vars()
//   static std::vector<fx::NamedSweep<Shape>> sweeps()   the GPU test's named sweeps
//   static std::vector<cases::BenchRow> bench_rows()     optional: dsv4-bench's rows
// and, for shaped_family, static cases::InputDecls declared_inputs(), and optionally
//   static fx::Tensors file_inputs(const fx::Case&)  the inputs a case file stands for (its
//                                             __metadata__ read as inputs, implicit ones added)

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dsv4/cases/declared_inputs.hpp"
#include "dsv4/fixtures/case_sweep.hpp"
#include "dsv4/replay/replay.hpp"

namespace dsv4::replay {

// The shape a case file states in __metadata__ "dsv4.shape", parsed ("" or absent: none); throws
// st::FormatError naming the key and the value.
std::optional<fx::Vars> stated_vars(const fx::Case& c);
// Throws st::FormatError when the case built from the file (`built`: its shape_spec()) does not
// have the vars the file states: the inputs contradict "dsv4.shape".
void check_stated(const fx::Vars& stated, const std::string& built);
// Wraps a VarsError of a stated shape as the case file's error (exit 2).
[[noreturn]] void throw_stated(const std::string& why);

template <class Shape>
Shape stated_shape(const std::optional<fx::Vars>& v, const std::string& family) {
  if (!v) return Shape{};
  try {
    return fx::shape_from_vars<Shape>(*v, family);
  } catch (const fx::VarsError& e) {
    throw_stated(e.what());
  }
}

// The case of a case file: the stated shape, then what the inputs say; the two must agree.
template <class CaseClass>
std::unique_ptr<CaseClass> case_of_file(const fx::Case& c, const fx::Tensors& in,
                                        const std::string& family) {
  using Shape = typename CaseClass::Shape;
  const std::optional<fx::Vars> v = stated_vars(c);
  auto k = std::make_unique<CaseClass>(in, stated_shape<Shape>(v, family));
  if (v) check_stated(*v, k->shape_spec());
  return k;
}

template <class CaseClass>
Family::Drawing drawing_of(const std::string& family) {
  using Shape = typename CaseClass::Shape;
  Family::Drawing d;
  d.keys = fx::shape_keys<Shape>(family);
  d.from_vars = [family](const fx::Vars& v) -> std::unique_ptr<fx::KernelCase> {
    return std::make_unique<CaseClass>(fx::shape_from_vars<Shape>(v, family));
  };
  for (const fx::NamedSweep<Shape>& s : CaseClass::sweeps())
    d.sweeps.push_back({s.name, [points = s.points] {
                          std::vector<fx::Vars> out;
                          std::set<std::string> seen;
                          for (const auto& p : points())
                            if (seen.insert(p.shape.vars().spec()).second)
                              out.push_back(p.shape.vars());
                          return out;
                        }});
  if constexpr (requires { CaseClass::bench_rows(); })
    d.bench = [] { return CaseClass::bench_rows(); };
  return d;
}

// The inputs a case file stands for: CaseClass::file_inputs(c) where the adapter defines it,
// else the file's in.* as written.
template <class CaseClass>
fx::Tensors file_inputs(const fx::Case& c) {
  if constexpr (requires { CaseClass::file_inputs(c); })
    return CaseClass::file_inputs(c);
  else
    return c.inputs;
}

// The family of a shaped adapter whose inputs are declared (cases::InputDecls).
template <class CaseClass>
Family shaped_family(const std::string& name, const std::string& outputs) {
  Family f;
  f.name = name;
  f.summary = cases::describe(CaseClass::declared_inputs()) + " -> " + outputs;
  f.make = [name](const fx::Case& c) {
    fx::Tensors in = file_inputs<CaseClass>(c);
    cases::check_inputs(CaseClass::declared_inputs(), in, name);
    auto k = case_of_file<CaseClass>(c, in, name);
    return Family::Bound{std::move(k), std::move(in)};
  };
  f.drawing = drawing_of<CaseClass>(name);
  return f;
}

}  // namespace dsv4::replay

// DSV4_DECLARED_FAMILY("name", CaseClass, "outputs and verdict"): registers a shaped adapter whose
// static CaseClass::declared_inputs() lists its inputs; the summary is derived.
#define DSV4_DECLARED_FAMILY(name, CaseClass, outputs) \
  DSV4_REPLAY_FAMILY(::dsv4::replay::shaped_family<CaseClass>(name, outputs))

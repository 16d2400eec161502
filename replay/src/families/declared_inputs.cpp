// Declared inputs: the description of a case layout, and the checks a case file's inputs pass.
#include "dsv4/cases/declared_inputs.hpp"

#include <cctype>
#include <map>

namespace dsv4::cases {
namespace {

bool literal(const std::string& d) { return !d.empty() && std::isdigit((unsigned char)d[0]); }

// "BF16", or "BF16|F32" (sep "|") / "BF16 or F32" (sep " or ").
std::string dtypes_str(const InputDecl& d, const std::string& sep) {
  std::string s = st::dtype_name(d.dtype);
  for (st::DType t : d.also) s += sep + st::dtype_name(t);
  return s;
}

bool dtype_ok(const InputDecl& d, st::DType t) {
  if (t == d.dtype) return true;
  for (st::DType a : d.also)
    if (t == a) return true;
  return false;
}

std::string dims_str(const std::vector<std::string>& dims) {
  std::string s;
  for (const auto& d : dims) s += (s.empty() ? "" : ", ") + d;
  return "[" + s + "]";
}

}  // namespace

std::string describe(const InputDecls& decls) {
  std::string s;
  for (const InputDecl& d : decls) {
    s += s.empty() ? "" : ", ";
    if (d.optional) s += "optional ";
    s += "in." + d.name + " " + dtypes_str(d, "|");
    if (d.dims.size() == 1 && d.dims[0] == "...")
      s += "[any shape]";
    else if (!d.dims.empty())
      s += dims_str(d.dims);
    if (!d.note.empty()) s += " (" + d.note + ")";
  }
  return s;
}

void check_inputs(const InputDecls& decls, const fx::Tensors& in, const std::string& family) {
  std::map<std::string, uint64_t> bound;  // symbolic dim -> its size, from the first tensor
  std::map<std::string, std::string> bound_by;
  for (const InputDecl& d : decls) {
    const std::string tname = "in." + d.name;
    auto it = in.find(d.name);
    if (it == in.end()) {
      if (d.optional) continue;
      throw st::FormatError("case", tname, "missing",
                            "the " + family + " case layout needs it: " + describe({d}));
    }
    const st::Tensor& t = it->second;
    if (!dtype_ok(d, t.dtype))
      throw st::FormatError("case", tname, "dtype",
                            std::string(st::dtype_name(t.dtype)) + ", the " + family +
                                " case layout reads " + dtypes_str(d, " or "));
    if (d.dims.size() == 1 && d.dims[0] == "...") continue;  // any shape
    if (t.shape.size() != d.dims.size())
      throw st::FormatError("case", tname, "shape",
                            t.shape_str() + " has " + std::to_string(t.shape.size()) +
                                " dims, the layout has " + dims_str(d.dims));
    for (size_t i = 0; i < d.dims.size(); ++i) {
      const std::string& dim = d.dims[i];
      if (literal(dim)) {
        if (t.shape[i] != std::stoull(dim))
          throw st::FormatError("case", tname, "shape",
                                t.shape_str() + ", the layout has " + dims_str(d.dims));
        continue;
      }
      auto [b, fresh] = bound.emplace(dim, t.shape[i]);
      if (fresh) {
        bound_by[dim] = tname;
      } else if (b->second != t.shape[i]) {
        throw st::FormatError("case", tname, "shape",
                              t.shape_str() + ": " + dim + " = " + std::to_string(t.shape[i]) +
                                  ", but " + bound_by[dim] + " has " + dim + " = " +
                                  std::to_string(b->second) + " (layout " + dims_str(d.dims) + ")");
      }
    }
  }
  for (const auto& [name, t] : in) {
    bool known = false;
    for (const InputDecl& d : decls) known |= d.name == name;
    if (!known)
      throw st::FormatError(
          "case", "in." + name, "name",
          "the " + family + " case layout reads no such input (it reads: " + describe(decls) + ")");
  }
}

}  // namespace dsv4::cases

// A family's inputs declared once (name, dtype, symbolic shape): the case-file reader's checks and
// the replay's description of the case layout both derive from the declaration.
#pragma once

// An adapter lists its inputs in a static `declared_inputs()`; DSV4_DECLARED_FAMILY registers it
// with dsv4-replay, whose --list prints describe(declared_inputs()) and whose factory runs
// check_inputs() on a case file's in.* before the adapter's constructor sees them: a missing
// input, a wrong dtype or rank, sizes that disagree (a dim named twice must have one value), or an
// input the family does not read, each named (st::FormatError, exit 2). Checks a declaration
// cannot state (a value's range, a size that follows from another input's value) stay the
// adapter's.

#include <string>
#include <vector>

#include "dsv4/fixtures/kernel_case.hpp"

namespace dsv4::cases {

namespace st = fx::st;

struct InputDecl {
  std::string name;  // without "in."
  st::DType dtype;
  std::vector<std::string> dims;  // symbolic ("B", "K") or literal ("512"); {} a scalar;
                                  // {"..."} any shape
  bool optional = false;
  std::string note = {};             // e.g. "0 dsv4, 1 sglang"
  std::vector<st::DType> also = {};  // other dtypes it may have ("BF16|F32")
};
using InputDecls = std::vector<InputDecl>;

// "in.scores F32[B, stride], in.lens I32[B], optional in.width I64 (note)".
std::string describe(const InputDecls& decls);
// Throws st::FormatError naming the tensor and the rule it breaks.
void check_inputs(const InputDecls& decls, const fx::Tensors& in, const std::string& family);

}  // namespace dsv4::cases

// DSV4_DECLARED_FAMILY (dsv4/replay/shaped_family.hpp) registers an adapter with its declared
// inputs.

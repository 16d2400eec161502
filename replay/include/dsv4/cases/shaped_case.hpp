// The common base of the family case adapters: a kernel case built from a Shape, named by it.
#pragma once

#include <string>
#include <utility>

#include "dsv4/fixtures/case_sweep.hpp"
#include "dsv4/fixtures/kernel_case.hpp"

namespace dsv4::cases {

// Shape is a plain struct with `fx::Vars vars() const` (the case's identity) and its inverse
// `static Shape from_vars(fx::VarsReader&)`. A case built from a case file's inputs starts from
// the shape its "dsv4.shape" metadata states (the default shape without it) and fills in, in its
// own constructor, what the inputs say.
template <class S>
class ShapedCase : public fx::KernelCase {
 public:
  using Shape = S;
  const Shape& shape() const { return shape_; }
  std::string name() const override { return shape_.vars().str(); }
  std::string shape_spec() const override { return shape_.vars().spec(); }

 protected:
  ShapedCase() = default;
  explicit ShapedCase(Shape shape) : shape_(std::move(shape)) {}

  Shape shape_;
};

}  // namespace dsv4::cases

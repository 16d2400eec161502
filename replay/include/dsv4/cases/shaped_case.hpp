// The common base of the family case adapters: a kernel case built from a Shape, named by it.
#pragma once

#include <string>
#include <utility>

#include "dsv4/fixtures/kernel_case.hpp"

namespace dsv4::cases {

// Shape is a plain struct with `std::string str() const` (the case's readable identity). A case
// built from a case file's inputs default-constructs it and fills it in its own constructor.
template <class Shape>
class ShapedCase : public fx::KernelCase {
 public:
  const Shape& shape() const { return shape_; }
  std::string name() const override { return shape_.str(); }

 protected:
  ShapedCase() = default;
  explicit ShapedCase(Shape shape) : shape_(std::move(shape)) {}

  Shape shape_;
};

}  // namespace dsv4::cases

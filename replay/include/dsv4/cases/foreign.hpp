// The verdict a foreign implementation's output gets: what SGLang's own tests would accept.
#pragma once

// A family adapter that also derives from cases::Foreign judges a foreign source's outputs
// (dsv4-replay --tolerant, or a case whose __metadata__ "dsv4.source" is not "dsv4") with
// compare_foreign(): tie-tolerant selections (any tied index at the cut-off; sorted rows as a tied
// set, ascending, -1 last), and tolerances derived from the data for values, instead of the
// fp32-order bits the project's own kernels are held to. Adapters without it keep their comparator.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dsv4/fixtures/kernel_case.hpp"

namespace dsv4::cases {

namespace st = fx::st;

class Foreign {
 public:
  virtual ~Foreign() = default;
  virtual ::testing::AssertionResult compare_foreign(const fx::OutputSpec& spec,
                                                     const st::Tensor& got, const st::Tensor& want,
                                                     const fx::Tensors& in) const = 0;
};

// The attention families' rule for rows with no key (or a +inf sink): the output is 0. SGLang's
// HIP split reducer (aiter_sparse_split_reduce) divides 0 by 0 there and writes NaN, where its
// SM100 path and its tests write 0; this project keeps 0 (docs/DESIGN.md). `zero_row[r]` marks the
// rows of `got` ([rows, D] values as fp64) that must be zero; a NaN in one of them fails with a
// message naming this rule. Success when none holds a NaN.
::testing::AssertionResult no_nan_in_zero_rows(const std::vector<double>& got,
                                               const std::vector<bool>& zero_row, size_t D,
                                               const std::string& name);

}  // namespace dsv4::cases

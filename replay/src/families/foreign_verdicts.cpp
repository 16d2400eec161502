// Shared pieces of the foreign verdicts (cases::Foreign): the attention families' zero-row rule.
#include <cmath>
#include <sstream>

#include "dsv4/cases/foreign.hpp"

namespace dsv4::cases {

::testing::AssertionResult no_nan_in_zero_rows(const std::vector<double>& got,
                                               const std::vector<bool>& zero_row, size_t D,
                                               const std::string& name) {
  size_t bad = 0, first = 0;
  for (size_t r = 0; r < zero_row.size(); ++r) {
    if (!zero_row[r]) continue;
    for (size_t d = 0; d < D && r * D + d < got.size(); ++d)
      if (std::isnan(got[r * D + d])) {
        if (!bad++) first = r;
        break;
      }
  }
  fx::Comparison rep{.name = name,
                     .comparator = "zero_rows",
                     .ok = bad == 0,
                     .checked = zero_row.size(),
                     .mismatched = bad};
  if (bad) rep.first.push_back({{first}, fx::Value::of_text("nan"), fx::Value::of_double(0)});
  fx::report_comparison(rep);
  if (!bad) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << name << ": NaN in " << bad << " row(s) with no key or a +inf sink (first: row " << first
         << "); such a row is 0 here, as SGLang's SM100 path and its tests give it. SGLang's HIP "
         << "split reducer (aiter_sparse_split_reduce) divides 0 by 0 there and writes NaN, a "
         << "result this project does not accept (docs/DESIGN.md, split_combine)";
}

}  // namespace dsv4::cases

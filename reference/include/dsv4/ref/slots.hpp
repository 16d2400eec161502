// The slot rule every scatter and gather shares: slot < 0 is skipped, slot >= rows is rejected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace dsv4::ref {

// What an operation did with each of its rows: written + skipped + rejected == number of rows.
struct SlotOutcome {
  int64_t written = 0;
  int64_t skipped = 0;   // slot < 0
  int64_t rejected = 0;  // slot >= pool rows, or refused by the row operation itself
};

// Calls row(t, slot) for every in-range slot; row returns false to reject a row for a reason of
// its own (e.g. a position outside a table), true when it wrote the row.
template <class Row>
SlotOutcome for_each_slot(std::span<const int64_t> slots, size_t pool_rows, Row&& row) {
  SlotOutcome o;
  for (size_t t = 0; t < slots.size(); ++t) {
    const int64_t s = slots[t];
    if (s < 0)
      ++o.skipped;
    else if (uint64_t(s) >= pool_rows || !row(t, size_t(s)))
      ++o.rejected;
    else
      ++o.written;
  }
  return o;
}

}  // namespace dsv4::ref

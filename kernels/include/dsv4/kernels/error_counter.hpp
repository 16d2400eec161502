// Device error counters: the int64 that kernels add rejected inputs to (out-of-range slots and
// indices), with a capturable reset and a synchronising read for the host.
#pragma once

#include <cstdint>

#include "dsv4/gpu/runtime.hpp"

namespace dsv4::kernels {

// A launcher that rejects inputs takes `int64_t* errors` (device memory, one value, never null)
// and adds the number of rejected entries to it; it never resets it, so one counter can gather
// several launches (every layer of a step). Zero it with reset_errors, read it with read_errors.

// Enqueues errors := 0 on stream s (capturable into a graph).
inline void reset_errors(int64_t* errors, gpu::Stream s) {
  gpu::fill_bytes(errors, 0, sizeof(int64_t), s);
}

// Waits for the work queued on s, then returns the counter.
inline int64_t read_errors(const int64_t* errors, gpu::Stream s) {
  int64_t v = 0;
  gpu::copy_to_host(&v, errors, sizeof(int64_t), s);
  return v;
}

}  // namespace dsv4::kernels

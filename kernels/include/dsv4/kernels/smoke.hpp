// smoke: tiny device kernels with planted faults, used to prove the fixtures catch each fault.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dsv4/gpu/runtime.hpp"

namespace dsv4::kernels::smoke {

enum class Fault : int {
  kNone = 0,
  kNaN,          // out[at] = NaN
  kPastEnd,      // also writes out[n] (one element past the end, into the guard)
  kBeforeBegin,  // also writes out[-1]
  kSwap,         // out[at] and out[at+1] exchanged
  kOneUlp,       // out[at] one ULP above the right value
  kSkip,         // out[at] never written
  kSpin,         // thread 0 spins for about 2^38 clock cycles (minutes) first: a hung launch
};

// out[i] = in[i] * scale + bias, with an optional planted fault at element `at`.
void affine(const float* in, float* out, size_t n, float scale, float bias, Fault fault, size_t at,
            gpu::Stream s);

}  // namespace dsv4::kernels::smoke

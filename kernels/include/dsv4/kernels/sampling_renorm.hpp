// sampling_renorm launchers: top-k and top-p renormalisation of fp32 probability rows, per-row k or
// p. Semantics: dsv4/ref/sampling_renorm.hpp (the specification; top-p's boundary is its
// fixed-point rule, top_p_fixed).
#pragma once

#include <cstdint>

#include "dsv4/gpu/runtime.hpp"

namespace dsv4::kernels::sampling_renorm {

// probs and out: [B, V] device arrays (out may be probs: in place); k or p: [B]. V in [1, 2^18].
// Enqueued on s without synchronisation (capturable); bad arguments throw std::invalid_argument
// naming the field. B = 0 launches nothing.
void top_k(const float* probs, int64_t B, int64_t V, const int32_t* k, float* out, gpu::Stream s);
void top_p(const float* probs, int64_t B, int64_t V, const float* p, float* out, gpu::Stream s);

}  // namespace dsv4::kernels::sampling_renorm

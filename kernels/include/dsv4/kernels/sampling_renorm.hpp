// sampling_renorm launchers: top-k and top-p renormalisation of fp32 probability rows, per-row k or
// p. Semantics: dsv4/ref/sampling_renorm.hpp (the specification; top-p's boundary is its
// fixed-point rule, top_p_fixed).
#pragma once

#include <cstddef>
#include <cstdint>

#include "dsv4/gpu/runtime.hpp"

namespace dsv4::kernels::sampling_renorm {

// How a row spread over several blocks runs. kFused: one cooperative launch (the runtime starts
// every block at once or refuses; the grid is sized by the device's occupancy) whose blocks meet
// at the runtime's grid barrier between steps; kMultiLaunch: one launch per step; kAuto: kFused
// where the device launches cooperative kernels. Under HIP stream capture kFused runs as
// kMultiLaunch. Every variant gives the same bytes.
enum class Variant { kAuto, kFused, kMultiLaunch };
// What a launch runs: one block per row (short rows or many rows), or one of the variants above.
enum class Path { kOneBlockPerRow, kMultiLaunch, kFused };
const char* path_name(Path p);  // "one block per row", "multi-launch", "fused"

// Device scratch bytes a launch over [B, V] needs, for every variant (0 when every row fits one
// block: V <= 4096 or B >= 512): several blocks share a row when B is small and keep their partial
// histograms and chunk sums there. Its contents need no initialisation, and are not kept between
// launches (one workspace per stream). Throws std::invalid_argument on a bad B or V,
// as the launchers do.
size_t workspace_bytes(int64_t B, int64_t V);

// The path a top-k (top_p false) or top-p launch over [B, V] with `v` takes on the current device.
Path path_of(int64_t B, int64_t V, bool top_p, Variant v = Variant::kAuto);

// probs and out: [B, V] device arrays (out may be probs: in place); k or p: [B]. V in [1, 2^18].
// workspace: workspace_size >= workspace_bytes(B, V) bytes, 8-byte aligned (may be null when that
// is 0). Enqueued on s without synchronisation (capturable); bad arguments throw
// std::invalid_argument naming the field. B = 0 launches nothing.
void top_k(const float* probs, int64_t B, int64_t V, const int32_t* k, float* out, void* workspace,
           size_t workspace_size, gpu::Stream s, Variant v = Variant::kAuto);
void top_p(const float* probs, int64_t B, int64_t V, const float* p, float* out, void* workspace,
           size_t workspace_size, gpu::Stream s, Variant v = Variant::kAuto);

}  // namespace dsv4::kernels::sampling_renorm

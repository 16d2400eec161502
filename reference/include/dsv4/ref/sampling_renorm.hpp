// sampling_renorm reference: the specification of top-k and top-p renormalisation of fp32
// probability rows (keep, then divide by the kept sum), in fp64 and with the kernel's exact
// fixed-point top-p boundary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace dsv4::ref::sampling_renorm {

// Semantics. Row b of B rows holds V probabilities x. Each entry counts as w = x when 0 < x < inf,
// else 0 (NaN, negatives, -0 and +inf count as 0, are never kept with a non-zero value, and add
// nothing to a mass). A pivot is chosen per row; the kept entries are w >= pivot (ties kept), and
//   out = w / S for kept entries, 0 for the others, S = the sum of the kept w; S = 0 gives zeros.
// top-k (per-row k): pivot = the k-th largest w, counting repeats; k <= 0 or k >= V keeps all
//   (pivot 0). Equal values at the pivot are all kept, so more than k entries may survive.
// top-p (per-row p): pivot = the largest row value v whose mass M(v) = sum of w >= v reaches p
//   (M(v) >= p): the largest values are kept, ties together, until the kept mass reaches p.
//   p >= 1 keeps all, as does a row whose whole mass is below p; p <= 0 keeps the maximum (ties).
// The top-p boundary in fp64 (top_p) compares exact masses. The kernel (top_p_pivot_fixed, bitwise
// reproducible) decides it on fixed-point masses: with e the binary exponent of the row maximum,
// each w counts as floor(w * 2^(43-e)) (an integer below 2^44, so V <= 2^18 of them sum exactly in
// 64 bits) against ceil(p * 2^(43-e)); the truncation can only lower a mass, by less than
// V * 2^(e-43) <= V * max * 2^-43, so the two kept sets differ only where an exact mass at the
// boundary lies that close to p.
// SGLang (layers/sampler.py) renormalises with FlashInfer's top_k_renorm_prob and
// top_p_renorm_prob, which cut at a pivot value (ties kept together), as here; its torch fallback
// (sort descending, zero where cumsum - p_i > p or position >= k) splits ties by sort position.

// Named conventions (a case layout's in.k_clamp and in.top_p_rule).
// KRule::kKeepAll (0, the project's kernel): k <= 0 or k >= V keeps all. KRule::kClamp (1,
// SGLang's renorm.py / renorm_triton.py): k clamped to [1, V] first, so k <= 0 keeps the maximum
// (with its ties) and k > V keeps all.
enum class KRule { kKeepAll = 0, kClamp = 1 };
// The top-p rule at a kept mass exactly equal to p. TopPRule::kFlashInfer (0, the default:
// FlashInfer's top_p_renorm_prob, SGLang's CUDA path and its ROCm Triton kernel, whose stated
// intent renorm.py's docstring names): an entry is kept when the mass of the entries strictly
// above it is below p, i.e. the pivot is the largest value v with M(v) >= p (the kept mass first
// reaches p). TopPRule::kRenormPy (1, SGLang's torch renorm.py, its _top_p_pivots_sorted and its
// tests' pivot definition min{v : sum(x <= v) >= 1 - p}): kept when the mass strictly above it is
// at most p, i.e. the pivot is the largest v with M(v) > p; where a kept mass equals p exactly it
// keeps the next value too.
enum class TopPRule { kFlashInfer = 0, kRenormPy = 1 };

constexpr size_t kMaxV = size_t(1) << 18;

// The value an entry counts as.
float weight(float x);

// Pivots of one row.
float top_k_pivot(std::span<const float> row, int32_t k, KRule kr = KRule::kKeepAll);
// fp64 masses
float top_p_pivot(std::span<const float> row, float p, TopPRule rule = TopPRule::kFlashInfer);
// The kernel's fixed-point boundary (kRenormPy: M > p, i.e. M >= floor(p 2^s) + 1)
float top_p_pivot_fixed(std::span<const float> row, float p, TopPRule rule = TopPRule::kFlashInfer);

// How a batch function computes: kFp64 is the specification (exact fp64 masses and kept sum,
// out = w / S rounded once to fp32). kKernel is the kernel's own arithmetic, bit for bit: the
// fixed-point top-p boundary, and the kept sum in fp32 in the kernel's order: the row in chunks
// of 4096 entries; in chunk c, partial t (t < 512) adds the kept w of entries c*4096 + t,
// c*4096 + t + 512, ... (within the chunk and the row) in that order starting from 0, then for
// off = 256, 128, ..., 1 partial t += partial t + off, giving the chunk's sum s_c; S = s_0 + s_1
// + ... added left to right from 0; out = w / S in fp32. (The chunks are what the blocks that
// share a row split; the order does not depend on how many blocks do.)
enum class Arith { kFp64, kKernel };
constexpr size_t kKernelThreads = 512;
constexpr size_t kKernelChunk = 4096;

// Whole batches: probs and out are [B, V]; k or p has B entries. Throws std::invalid_argument
// naming the field on bad sizes.
void top_k(std::span<const float> probs, size_t V, std::span<const int32_t> k, std::span<float> out,
           Arith a = Arith::kFp64, KRule kr = KRule::kKeepAll);
void top_p(std::span<const float> probs, size_t V, std::span<const float> p, std::span<float> out,
           Arith a = Arith::kFp64, TopPRule rule = TopPRule::kFlashInfer);

}  // namespace dsv4::ref::sampling_renorm

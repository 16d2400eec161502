// sampling_renorm reference: top-k and top-p pivots (fp64 and fixed-point), renormalisation.
#include "dsv4/ref/sampling_renorm.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace dsv4::ref::sampling_renorm {
namespace {

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("sampling_renorm: " + what);
}

std::vector<float> weights_descending(std::span<const float> row) {
  std::vector<float> w(row.size());
  std::transform(row.begin(), row.end(), w.begin(), weight);
  std::sort(w.begin(), w.end(), std::greater<>());
  return w;
}

// The largest value v of w (sorted descending) whose mass reaches the target; 0 when none does.
template <class Mass>
float pivot_by_mass(const std::vector<float>& w, Mass add, double target, bool strict) {
  double mass = 0;
  for (size_t i = 0; i < w.size();) {
    size_t j = i;
    while (j < w.size() && w[j] == w[i]) mass += add(w[j++]);
    if (strict ? mass > target : mass >= target) return w[i];
    i = j;
  }
  return 0.f;
}

// The kept sum in the kernel's fp32 order (see Arith::kKernel).
float kernel_sum(const float* x, size_t V, float pivot) {
  std::vector<float> part(kKernelThreads);
  float S = 0.f;
  for (size_t c0 = 0; c0 < V; c0 += kKernelChunk) {
    const size_t end = std::min(V, c0 + kKernelChunk);
    std::fill(part.begin(), part.end(), 0.f);
    for (size_t t = 0; t < kKernelThreads; ++t)
      for (size_t i = c0 + t; i < end; i += kKernelThreads) {
        const float w = weight(x[i]);
        if (w >= pivot) part[t] = part[t] + w;
      }
    for (size_t off = kKernelThreads / 2; off > 0; off /= 2)
      for (size_t t = 0; t < off; ++t) part[t] = part[t] + part[t + off];
    S = S + part[0];
  }
  return S;
}

void renorm_rows(std::span<const float> probs, size_t V, size_t B, std::span<float> out, Arith a,
                 const std::function<float(size_t)>& pivot_of) {
  if (V == 0 || V > kMaxV) bad("V=" + std::to_string(V) + " must be in [1, 2^18]");
  if (probs.size() < B * V) bad("probs has " + std::to_string(probs.size()) + " entries");
  if (out.size() < B * V) bad("out has " + std::to_string(out.size()) + " entries");
  for (size_t b = 0; b < B; ++b) {
    const float pivot = pivot_of(b);
    const float* x = probs.data() + b * V;
    if (a == Arith::kKernel) {
      const float S = kernel_sum(x, V, pivot);
      for (size_t i = 0; i < V; ++i) {
        const float w = weight(x[i]);
        out[b * V + i] = (S > 0.f && w >= pivot) ? w / S : 0.f;
      }
      continue;
    }
    double S = 0;
    for (size_t i = 0; i < V; ++i)
      if (weight(x[i]) >= pivot) S += weight(x[i]);
    for (size_t i = 0; i < V; ++i) {
      const float w = weight(x[i]);
      out[b * V + i] = (S > 0 && w >= pivot) ? float(double(w) / S) : 0.f;
    }
  }
}

size_t rows_of(size_t n_params, const char* field) {
  if (n_params == 0) bad(std::string(field) + " is empty: one entry per row");
  return n_params;
}

}  // namespace

float weight(float x) { return (x > 0 && x < std::numeric_limits<float>::infinity()) ? x : 0.f; }

float top_k_pivot(std::span<const float> row, int32_t k, KRule kr) {
  if (kr == KRule::kClamp)
    k = std::clamp<int32_t>(k, 1, int32_t(std::min<size_t>(row.size(), INT32_MAX)));
  if (k <= 0 || size_t(k) >= row.size()) return 0.f;
  return weights_descending(row)[size_t(k) - 1];
}

float top_p_pivot(std::span<const float> row, float p, TopPRule rule) {
  if (!(p < 1)) return 0.f;
  return pivot_by_mass(
      weights_descending(row), [](float w) { return double(w); }, double(p),
      rule == TopPRule::kRenormPy);
}

float top_p_pivot_fixed(std::span<const float> row, float p, TopPRule rule) {
  if (!(p < 1)) return 0.f;
  const auto w = weights_descending(row);
  if (w.empty() || w[0] == 0) return 0.f;  // no mass: everything is "kept", all zeros
  const int s = 43 - std::ilogb(w[0]);
  // M >= p 2^s <=> M >= ceil(p 2^s); M > p 2^s <=> M >= floor(p 2^s) + 1 (M an integer).
  const double target = rule == TopPRule::kRenormPy ? std::floor(std::ldexp(double(p), s)) + 1
                                                    : std::ceil(std::ldexp(double(p), s));
  if (target > std::ldexp(1.0, 62)) return 0.f;  // more than the row can hold: keep all
  // Integer masses, exact (each < 2^44, at most 2^18 of them); doubles hold them exactly too.
  uint64_t mass = 0;
  const uint64_t want = target <= 0 ? 0 : uint64_t(target);
  for (size_t i = 0; i < w.size();) {
    size_t j = i;
    while (j < w.size() && w[j] == w[i])
      mass += uint64_t(std::floor(std::ldexp(double(w[j++]), s)));
    if (mass >= want) return w[i];
    i = j;
  }
  return 0.f;
}

void top_k(std::span<const float> probs, size_t V, std::span<const int32_t> k, std::span<float> out,
           Arith a, KRule kr) {
  const size_t B = rows_of(k.size(), "k");
  renorm_rows(probs, V, B, out, a,
              [&](size_t b) { return top_k_pivot(probs.subspan(b * V, V), k[b], kr); });
}

void top_p(std::span<const float> probs, size_t V, std::span<const float> p, std::span<float> out,
           Arith a, TopPRule rule) {
  const size_t B = rows_of(p.size(), "p");
  renorm_rows(probs, V, B, out, a, [&](size_t b) {
    const auto row = probs.subspan(b * V, V);
    return a == Arith::kKernel ? top_p_pivot_fixed(row, p[b], rule) : top_p_pivot(row, p[b], rule);
  });
}

}  // namespace dsv4::ref::sampling_renorm

// sparse_decode reference: key selection, SGLang's dequantisation of a token, and the attention
// with sink in fp64, unsplit and as split partials.
#include "dsv4/ref/sparse_decode.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "dsv4/ref/compact_pages.hpp"
#include "dsv4/ref/split_combine.hpp"

namespace dsv4::ref::sparse_decode {
namespace {

constexpr size_t kD = kTokenValues;
const double kInf = std::numeric_limits<double>::infinity();

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("sparse_decode: " + what);
}

void check_cache(const char* name, const Cache& c, size_t B) {
  const std::string n(name);
  if (!kv_layout_valid(int(c.layout)))
    bad(n + ".layout=" + std::to_string(int(c.layout)) + " is not v41, v41_fp4, v4 or v4_fnuz");
  if (c.page_size <= 0) bad(n + ".page_size=" + std::to_string(c.page_size) + " must be > 0");
  if (c.num_pages < 0) bad(n + ".num_pages=" + std::to_string(c.num_pages) + " must be >= 0");
  const size_t want = size_t(c.num_pages) * size_t(page_layout(c.layout).page_bytes(c.page_size));
  if (c.pool.size() != want)
    bad(n + ".pool has " + std::to_string(c.pool.size()) + " bytes, " +
        std::to_string(c.num_pages) + " pages of " +
        std::to_string(page_layout(c.layout).page_bytes(c.page_size)) + " need " +
        std::to_string(want));
  if (c.indices.size() != B * c.K)
    bad(n + ".indices has " + std::to_string(c.indices.size()) + " entries, [B, K] = [" +
        std::to_string(B) + ", " + std::to_string(c.K) + "]");
  if (c.lengths.size() != B)
    bad(n + ".lengths has " + std::to_string(c.lengths.size()) +
        " entries, B=" + std::to_string(B));
}

// Resolves column `col` of the main-then-extra list for query b: the cache and slot of a key,
// or no key (error set when the index is an error).
struct Column {
  const Cache* cache = nullptr;
  int64_t slot = -1;
  bool error = false;
};

Column column(const Inputs& in, size_t b, size_t col) {
  const bool main = col < in.main.K;
  const Cache& c = main ? in.main : *in.extra;
  const size_t j = main ? col : col - in.main.K;
  const int64_t len = std::clamp<int64_t>(c.lengths[b], 0, int64_t(c.K));
  Column r;
  if (int64_t(j) >= len) return r;
  const int64_t idx = c.indices[b * c.K + j];
  if (idx == -1) return r;
  if (idx < 0 || idx >= c.capacity()) {
    r.error = true;
    return r;
  }
  r.cache = &c;
  r.slot = idx;
  return r;
}

size_t columns(const Inputs& in) { return in.main.K + (in.extra ? in.extra->K : 0); }

// Attention of one query and head over `keys`, in fp64: sum e^x k and sum e^x relative to the
// largest score (mx), returned through the arguments.
void attend(const bf16* q, const Keys& keys, double sm_scale, double* acc, double* sum,
            double* mx) {
  std::vector<double> x(keys.n);
  *mx = -kInf;
  for (size_t j = 0; j < keys.n; ++j) {
    double dot = 0;
    for (size_t i = 0; i < kD; ++i) dot += double(bf16_to_f32(q[i])) * keys.rows[j * kD + i];
    x[j] = sm_scale * dot;
    if (!std::isnan(x[j])) *mx = std::max(*mx, x[j]);
  }
  *sum = 0;
  std::fill(acc, acc + kD, 0.0);
  if (keys.n == 0) return;
  for (size_t j = 0; j < keys.n; ++j) {
    const double p = std::exp(x[j] - *mx);
    *sum += p;
    for (size_t i = 0; i < kD; ++i) acc[i] += p * keys.rows[j * kD + i];
  }
}

}  // namespace

bool layout_pair_ok(KvLayout main, KvLayout extra) {
  auto v41 = [](KvLayout l) { return l == KvLayout::kV41 || l == KvLayout::kV41Fp4; };
  return main == extra || (v41(main) && v41(extra));
}

void check(const Inputs& in) {
  if (in.H == 0 || in.H % 16 != 0)
    bad("H=" + std::to_string(in.H) + " must be a positive multiple of 16");
  if (in.q.size() != in.B * in.H * kD)
    bad("q has " + std::to_string(in.q.size()) + " values, [B, H, 512] needs " +
        std::to_string(in.B * in.H * kD));
  check_cache("main", in.main, in.B);
  if (in.extra) {
    check_cache("extra", *in.extra, in.B);
    if (!layout_pair_ok(in.main.layout, in.extra->layout))
      bad(std::string("(main, extra) layouts (") + kv_layout_name(in.main.layout) + ", " +
          kv_layout_name(in.extra->layout) +
          ") are not a pair SGLang accepts (the same layout, or v41 and v41_fp4 in any order)");
  }
  if (!in.sink.empty() && in.sink.size() != in.H)
    bad("sink has " + std::to_string(in.sink.size()) + " values, H=" + std::to_string(in.H));
  if (in.rope_dim) {
    if (in.rope_dim % 2 != 0 || in.rope_dim > kD)
      bad("rope_dim=" + std::to_string(in.rope_dim) + " must be even and <= 512");
    if (in.cos_sin.size() % in.rope_dim != 0)
      bad("cos_sin has " + std::to_string(in.cos_sin.size()) +
          " values, not a multiple of rope_dim=" + std::to_string(in.rope_dim));
    if (in.positions.size() != in.B)
      bad("positions has " + std::to_string(in.positions.size()) +
          " entries, B=" + std::to_string(in.B));
  }
}

void dequantize_token(const Cache& c, int64_t slot, float* out) {
  const PageLayout L = page_layout(c.layout);
  bf16 v[kD];
  compact_pages::dequantize_token(c.layout, c.pool.data() + L.data_row_offset(slot, c.page_size),
                                  c.pool.data() + L.scale_row_offset(slot, c.page_size), v);
  for (size_t i = 0; i < kD; ++i) out[i] = bf16_to_f32(v[i]);
}

Keys keys_of(const Inputs& in, size_t b, size_t col_begin, size_t col_end) {
  Keys k;
  col_end = std::min(col_end, columns(in));
  for (size_t col = col_begin; col < col_end; ++col) {
    const Column c = column(in, b, col);
    k.errors += c.error;
    if (!c.cache) continue;
    k.rows.resize((k.n + 1) * kD);
    dequantize_token(*c.cache, c.slot, k.rows.data() + k.n * kD);
    ++k.n;
  }
  return k;
}

Outputs decode_f64(const Inputs& in) {
  check(in);
  const size_t n_pos = in.rope_dim ? in.cos_sin.size() / in.rope_dim : 0;
  Outputs r;
  r.out.assign(in.B * in.H * kD, 0.0);
  r.lse.assign(in.B * in.H, 0.0);
  std::vector<double> acc(kD);
  for (size_t b = 0; b < in.B; ++b) {
    const Keys keys = keys_of(in, b, 0, columns(in));
    r.errors += keys.errors;
    const bool rope = in.rope_dim != 0;
    const bool rope_ok = rope && in.positions[b] >= 0 && uint64_t(in.positions[b]) < n_pos;
    if (rope && !rope_ok) ++r.errors;
    for (size_t h = 0; h < in.H; ++h) {
      double sum, mx;
      attend(in.q.data() + (b * in.H + h) * kD, keys, in.sm_scale, acc.data(), &sum, &mx);
      double* out = r.out.data() + (b * in.H + h) * kD;
      if (keys.n == 0) {
        r.lse[b * in.H + h] = kInf;
        continue;
      }
      r.lse[b * in.H + h] = std::log(sum) + mx;
      const double sink = in.sink.empty() ? -kInf : double(in.sink[h]);
      if (sink == kInf) continue;
      const double den = sum + std::exp(sink - mx);
      for (size_t i = 0; i < kD; ++i) out[i] = acc[i] / den;
      if (rope_ok)
        split_combine::inverse_rope_f64(in.cos_sin.data() + size_t(in.positions[b]) * in.rope_dim,
                                        in.rope_dim, out, kD);
    }
  }
  return r;
}

Partials partials_f64(const Inputs& in, size_t S) {
  check(in);
  if (S == 0) bad("S=0 splits");
  Partials r;
  r.S = S;
  const size_t C = (columns(in) + S - 1) / S;
  r.o.assign(in.B * S * in.H * kD, 0.0);
  r.lse.assign(in.B * S * in.H, -kInf);
  std::vector<double> acc(kD);
  for (size_t b = 0; b < in.B; ++b)
    for (size_t s = 0; s < S; ++s) {
      const Keys keys = keys_of(in, b, s * C, (s + 1) * C);
      r.errors += keys.errors;
      if (keys.n == 0) continue;
      for (size_t h = 0; h < in.H; ++h) {
        double sum, mx;
        attend(in.q.data() + (b * in.H + h) * kD, keys, in.sm_scale, acc.data(), &sum, &mx);
        r.lse[(b * S + s) * in.H + h] = (std::log(sum) + mx) / std::log(2.0);
        double* o = r.o.data() + ((b * S + s) * in.H + h) * kD;
        for (size_t i = 0; i < kD; ++i) o[i] = acc[i] / sum;
      }
    }
  return r;
}

Tolerance tolerance(const Inputs& in) {
  check(in);
  // max_j sum_i |q_i k_ji| <= max ||q|| * max ||k|| (Cauchy-Schwarz): linear in the data.
  double q2 = 0, k2 = 0, max_k = 0;
  for (size_t r = 0; r < in.B * in.H; ++r) {
    double n = 0;
    for (size_t i = 0; i < kD; ++i) n += std::pow(double(bf16_to_f32(in.q[r * kD + i])), 2);
    q2 = std::max(q2, n);
  }
  for (size_t b = 0; b < in.B; ++b) {
    const Keys keys = keys_of(in, b, 0, columns(in));
    for (size_t j = 0; j < keys.n; ++j) {
      double n = 0;
      for (size_t i = 0; i < kD; ++i) {
        const double v = keys.rows[j * kD + i];
        n += v * v;
        max_k = std::max(max_k, std::abs(v));
      }
      k2 = std::max(k2, n);
    }
  }
  const double u = std::ldexp(1.0, -24);
  const double score = 2 * 514 * u * std::abs(double(in.sm_scale)) * std::sqrt(q2 * k2);
  const double tiles = double((columns(in) + 15) / 16);
  const double sums = (3 * tiles + 16) * u;
  Tolerance t;
  t.lse_atol = score + sums;
  t.out_atol = (2 * score + 2 * sums) * max_k + std::ldexp(max_k, -9);
  if (in.rope_dim) t.out_atol += std::ldexp(max_k, -7);
  return t;
}

}  // namespace dsv4::ref::sparse_decode

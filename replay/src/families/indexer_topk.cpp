// indexer_topk kernel case and replay adapter: per-row top-K, page transform, sorted output.
#include "dsv4/cases/indexer_topk.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>

#include "dsv4/fixtures/generators.hpp"
#include "dsv4/kernels/indexer_topk.hpp"
#include "dsv4/ref/indexer_topk.hpp"
#include "dsv4/replay/replay.hpp"

namespace dsv4::cases {
namespace {

namespace ref = ::dsv4::ref::indexer_topk;
namespace kern = ::dsv4::kernels::indexer_topk;

const st::Tensor& input(const fx::Tensors& in, const std::string& name) {
  return fx::input_of(in, name, "indexer_topk");
}

// +NaN (0x7fffffff): ranked above everything, so a read past a row's length would be selected.
float loud_nan() {
  float f;
  const uint32_t b = 0x7fffffffu;
  std::memcpy(&f, &b, 4);
  return f;
}

std::vector<float> row_scores(fx::Rng& rng, size_t n, ScoreKind kind) {
  if (kind == ScoreKind::kTies) return fx::integer_valued_f32(rng, n, -3, 3);
  std::vector<float> v = fx::normal_f32(rng, n);
  if (kind == ScoreKind::kHostile) {
    const float inf = std::numeric_limits<float>::infinity();
    for (auto& x : v) {
      const double u = rng.uniform();
      if (u < 0.05)
        x = -inf;
      else if (u < 0.06)
        x = inf;
      else if (u < 0.07)
        x = loud_nan();
      else if (u < 0.08)
        x = -loud_nan();
      else if (u < 0.10)
        x = rng.uniform() < 0.5 ? 0.f : -0.f;
    }
  }
  return v;
}

int64_t width_of(const fx::Tensors& in) {
  return in.count("width") ? input(in, "width").item<int64_t>("in.width")
                           : int64_t(input(in, "scores").shape.at(1));
}

}  // namespace

std::string IndexerTopkShape::str() const {
  std::ostringstream os;
  os << "B=" << B << " width=" << width;
  if (stride) os << " stride=" << stride;
  os << " K=" << K << (len < 0 ? std::string(" ragged") : " len=" + std::to_string(len));
  if (sorted) os << " sorted";
  if (wave) os << " W=" << wave;
  if (page_bits >= 0) os << " pages=2^" << page_bits << (permuted ? " permuted" : " identity");
  if (scores == ScoreKind::kTies) os << " ties";
  if (scores == ScoreKind::kHostile) os << " hostile";
  return os.str();
}

IndexerTopkCase::IndexerTopkCase(const fx::Tensors& in) {
  const st::Tensor& scores = input(in, "scores");
  if (scores.shape.size() != 2) scores.throw_shape("in.scores", "2-d [B, stride]");
  shape_.B = int64_t(scores.shape[0]);
  shape_.stride = int64_t(scores.shape[1]);
  shape_.width = width_of(in);
  shape_.K = input(in, "K").item<int64_t>("in.K");
  shape_.sorted = input(in, "sorted").item<int32_t>("in.sorted") != 0;
  if (input(in, "lens").numel() != uint64_t(shape_.B))
    input(in, "lens").throw_shape("in.lens", "[" + std::to_string(shape_.B) + "]");
  if (in.count("wave")) shape_.wave = input(in, "wave").item<int32_t>("in.wave");
  if (in.count("page_table")) {
    shape_.page_bits = input(in, "page_bits").item<int32_t>("in.page_bits");
    const st::Tensor& pt = input(in, "page_table");
    if (pt.shape.size() != 2 || pt.shape[0] != uint64_t(shape_.B))
      pt.throw_shape("in.page_table", "[" + std::to_string(shape_.B) + ", pages]");
  }
  if (shape_.K < 1 || shape_.K > 2048)
    throw std::invalid_argument("in.K=" + std::to_string(shape_.K) + " must be in [1, 2048]");
}

fx::Tensors IndexerTopkCase::draw(fx::Rng& rng) const {
  const IndexerTopkShape& s = shape_;
  const size_t B = size_t(s.B), W = size_t(s.width), S = size_t(s.stride ? s.stride : s.width);
  std::vector<int32_t> lens = s.len >= 0 ? std::vector<int32_t>(B, int32_t(s.len))
                                         : fx::ragged_lengths(rng, B, int32_t(s.K), int32_t(W));
  std::vector<float> scores(B * S, loud_nan());
  for (size_t b = 0; b < B; ++b) {
    const size_t n = std::min<size_t>(W, size_t(std::max(lens[b], 0)));
    const auto r = row_scores(rng, n, s.scores);
    std::copy(r.begin(), r.end(), scores.begin() + ptrdiff_t(b * S));
  }
  fx::Tensors in;
  in["scores"] = st::Tensor::of<float>({B, S}, scores);
  in["lens"] = st::Tensor::of<int32_t>(lens);
  in["width"] = st::Tensor::scalar<int64_t>(s.width);
  in["K"] = st::Tensor::scalar<int64_t>(s.K);
  in["sorted"] = st::Tensor::scalar<int32_t>(s.sorted ? 1 : 0);
  if (s.wave) in["wave"] = st::Tensor::scalar<int32_t>(s.wave);
  if (s.page_bits >= 0) {
    const size_t pages = std::max<size_t>(1, (W + (size_t(1) << s.page_bits) - 1) >> s.page_bits);
    std::vector<int32_t> pt(B * pages);
    for (size_t b = 0; b < B; ++b) {
      std::vector<int32_t> row = fx::permuted_page_table(rng, pages);
      if (!s.permuted) std::sort(row.begin(), row.end());
      // Each row's pages live in its own physical range, as a request's pages do in a pool.
      for (size_t p = 0; p < pages; ++p) pt[b * pages + p] = row[p] + int32_t(b * pages);
    }
    in["page_table"] = st::Tensor::of<int32_t>({B, pages}, pt);
    in["page_bits"] = st::Tensor::scalar<int32_t>(s.page_bits);
  }
  return in;
}

std::vector<fx::OutputSpec> IndexerTopkCase::outputs(const fx::Tensors& in) const {
  const uint64_t B = input(in, "scores").shape.at(0), K = uint64_t(shape_.K);
  std::vector<fx::OutputSpec> o = {{.name = "out", .dtype = st::DType::I32, .shape = {B, K}}};
  if (in.count("page_table"))
    o.push_back({.name = "raw", .dtype = st::DType::I32, .shape = {B, K}});
  return o;
}

fx::Tensors IndexerTopkCase::reference(const fx::Tensors& in) const {
  const st::Tensor& scores = input(in, "scores");
  const size_t B = scores.shape[0], K = size_t(shape_.K);
  const auto sc = scores.values<float>("in.scores");
  const auto lens = input(in, "lens").values<int32_t>("in.lens");
  std::vector<int32_t> raw(B * K);
  ref::topk(sc, lens, {.B = B, .width = size_t(width_of(in)), .stride = scores.shape[1], .K = K},
            shape_.sorted, raw);
  if (!in.count("page_table")) return {{"out", st::Tensor::of<int32_t>({B, K}, raw)}};
  const st::Tensor& pt = input(in, "page_table");
  std::vector<int32_t> paged(B * K);
  ref::page_transform(raw, K, pt.values<int32_t>("in.page_table"), pt.shape[1],
                      input(in, "page_bits").item<int32_t>("in.page_bits"), paged);
  return {{"out", st::Tensor::of<int32_t>({B, K}, paged)},
          {"raw", st::Tensor::of<int32_t>({B, K}, raw)}};
}

void IndexerTopkCase::launch(const fx::DeviceTensors& d, gpu::Stream s) const {
  const st::Tensor& scores = d.host("scores");
  const bool paged = d.has("page_table");
  const kern::Args a{.scores = d.ptr<float>("scores"),
                     .stride = int64_t(scores.shape[1]),
                     .width = shape_.width,
                     .lens = d.ptr<int32_t>("lens"),
                     .B = int64_t(scores.shape[0]),
                     .K = shape_.K,
                     .page_table = paged ? d.ptr<int32_t>("page_table") : nullptr,
                     .pt_stride = paged ? int64_t(d.host("page_table").shape[1]) : 0,
                     .page_bits = paged ? d.scalar<int32_t>("page_bits") : 0,
                     .out = d.ptr<int32_t>("out"),
                     .raw_out = paged ? d.ptr<int32_t>("raw") : nullptr,
                     .sorted = shape_.sorted};
  if (shape_.wave)
    kern::topk(a, shape_.wave, s);
  else
    kern::topk(a, s);
}

std::string wave_cannot_run(int W, bool built) {
  if (!W) return "";
  if (!built) return "W=" + std::to_string(W) + " is not built for backend " + gpu::backend();
  if (W > gpu::device_info().wave_width)
    return "W=" + std::to_string(W) + " exceeds the device's wave width";
  return "";
}

std::string IndexerTopkCase::cannot_run() const {
  return wave_cannot_run(shape_.wave, kern::wave_supported(shape_.wave));
}

::testing::AssertionResult same_rows_as_sets(const std::vector<int32_t>& got,
                                             const std::vector<int32_t>& want, size_t rows,
                                             size_t K, const std::string& name) {
  if (got.size() != rows * K || want.size() != rows * K)
    return ::testing::AssertionFailure()
           << name << ": sizes " << got.size() << " and " << want.size() << ", want " << rows * K;
  auto canon = [K](std::vector<int32_t> v, size_t r) {
    std::vector<int32_t> row(v.begin() + ptrdiff_t(r * K), v.begin() + ptrdiff_t((r + 1) * K));
    std::sort(row.begin(), row.end(),
              [](int32_t a, int32_t b) { return (a < 0) != (b < 0) ? b < 0 : a < b; });
    return row;
  };
  auto r = ::testing::AssertionFailure();
  size_t bad = 0;
  for (size_t row = 0; row < rows; ++row) {
    const auto g = canon(got, row), w = canon(want, row);
    bool tail_ok = true;
    for (size_t j = 1; j < K; ++j) tail_ok &= !(got[row * K + j - 1] < 0 && got[row * K + j] >= 0);
    if (g == w && tail_ok) continue;
    if (bad++ < 4) {
      r << name << " row " << row << ": ";
      if (!tail_ok) r << "a -1 before a selection; ";
      for (size_t j = 0; j < K; ++j)
        if (g[j] != w[j]) {
          r << "sorted entry " << j << " got " << g[j] << " want " << w[j] << "\n";
          break;
        }
    }
  }
  if (!bad) return ::testing::AssertionSuccess();
  return r << name << ": " << bad << " of " << rows << " rows differ as sets";
}

::testing::AssertionResult IndexerTopkCase::compare(const fx::OutputSpec& spec,
                                                    const st::Tensor& got, const st::Tensor& want,
                                                    const fx::Tensors& in) const {
  if (shape_.sorted || got.shape != want.shape || got.dtype != st::DType::I32)
    return fx::bitwise_tensors(got, want, spec.name);
  return same_rows_as_sets(got.values<int32_t>(), want.values<int32_t>(), size_t(got.shape[0]),
                           size_t(got.shape[1]), spec.name);
}

}  // namespace dsv4::cases

DSV4_KERNEL_FAMILY("indexer_topk",
                   "in.scores F32[B, stride], in.lens I32[B], in.K I64, in.sorted I32, optional "
                   "in.width I64 (default stride), in.page_table I32[B, pages] with in.page_bits "
                   "I32, in.wave I32 -> out I32[B, K] (paged with a page table), raw I32[B, K] "
                   "(with a page table). Sorted: bitwise; unsorted: per-row sets, -1 last",
                   ::dsv4::cases::IndexerTopkCase)

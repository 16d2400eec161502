// indexer_topk kernel case and replay adapter: per-row top-K, page transform, sorted output.
#include "dsv4/cases/indexer_topk.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>

#include "dsv4/cases/declared_inputs.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/fixtures/selection.hpp"
#include "dsv4/kernels/indexer_topk.hpp"
#include "dsv4/ref/indexer_topk.hpp"
#include "dsv4/replay/replay.hpp"
#include "dsv4/replay/shaped_family.hpp"

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

fx::Vars IndexerTopkShape::vars() const {
  fx::Vars v;
  v.add("B", B).add("width", width);
  if (stride) v.add("stride", stride);
  v.add("K", K);
  if (len < 0)
    v.flag("ragged");
  else
    v.add("len", len);
  v.flag("sorted", sorted);
  if (wave) v.add("W", wave);
  if (page_bits >= 0)
    v.add("pages", "2^" + std::to_string(page_bits)).flag(permuted ? "permuted" : "identity");
  v.flag("ties", scores == ScoreKind::kTies).flag("hostile", scores == ScoreKind::kHostile);
  if (select) v.add("select", ref::select_name(ref::Select(select)));
  return v.flag("no-raw", !raw_out);
}

IndexerTopkShape IndexerTopkShape::from_vars(fx::VarsReader& r) {
  IndexerTopkShape s;
  s.B = r.num("B", s.B);
  s.width = r.num("width", s.width);
  s.stride = r.num("stride", s.stride);
  s.K = r.num("K", s.K);
  s.len = r.flag("ragged") ? -1 : r.num("len", s.len);
  s.sorted = r.flag("sorted");
  s.wave = int(r.num("W", s.wave));
  std::vector<std::string> pages;
  for (int b = 0; b <= 16; ++b) pages.push_back("2^" + std::to_string(b));
  const std::string p = r.word("pages", pages, "");
  s.page_bits = p.empty() ? -1 : std::stoi(p.substr(2));
  s.permuted = r.one_of({"identity", "permuted"}, -1) == 1;
  const int kind = r.one_of({"ties", "hostile"}, -1);
  s.scores = kind == 0 ? ScoreKind::kTies : kind == 1 ? ScoreKind::kHostile : ScoreKind::kNormal;
  std::vector<std::string> selects;
  for (int i = 0; ref::select_valid(i); ++i) selects.push_back(ref::select_name(ref::Select(i)));
  const std::string sel = r.word("select", selects, "");
  for (size_t i = 0; i < selects.size(); ++i)
    if (selects[i] == sel) s.select = int(i);
  s.raw_out = !r.flag("no-raw");
  return s;
}

std::vector<fx::Sweep<IndexerTopkShape>> indexer_topk_gpu_sweep() {
  std::vector<fx::Sweep<IndexerTopkShape>> v;
  int i = 0;
  auto add = [&](int64_t B, int64_t K, int64_t len, int64_t width) {
    IndexerTopkShape s{.B = B, .width = width, .K = K, .len = len};
    s.sorted = i % 2 == 0;
    s.wave = s.sorted ? (i % 4 == 0 ? 16 : 32) : 0;
    s.page_bits = (i / 2) % 3 == 0 ? -1 : ((i / 2) % 3 == 1 ? 0 : 6);
    s.permuted = s.page_bits >= 0 && (i / 3) % 2 == 1;  // a page table's order
    s.scores = ScoreKind((i / 5) % 3);
    if (i % 7 == 3) s.stride = width + 5;
    v.push_back({s, i % 11 == 5 ? fx::Launch::kGraph : fx::Launch::kEager});
    ++i;
  };
  for (int64_t K : {512, 1024, 2048}) {
    for (int64_t B : {1, 30, 31})
      for (int64_t len : {K - 1, K, K + 1, int64_t(8192), int64_t(8193), int64_t(16384),
                          int64_t(16385), int64_t(65535), int64_t(65536), int64_t(65537)})
        add(B, K, len, len);
    for (int64_t B : {128, 129})
      for (int64_t len : {K, K + 1, int64_t(8193), int64_t(65537)}) add(B, K, len, len);
    for (int64_t B : {31, 129}) add(B, K, -1, 65537);  // ragged lengths in one launch
    add(30, K, 5000, 16385);                           // every row shorter than the width
  }
  return v;
}

std::vector<fx::Sweep<IndexerTopkShape>> indexer_topk_soak_sweep() {
  return {{{.B = 1, .width = 8192, .K = 2048, .len = 8192}},
          {{.B = 4, .width = 4096, .K = 512, .sorted = true, .wave = 16}},
          {{.B = 3,
            .width = 2048,
            .K = 512,
            .sorted = true,
            .wave = 32,
            .page_bits = 6,
            .permuted = true}},
          {{.B = 8, .width = 1024, .K = 512, .scores = ScoreKind::kTies}},
          {{.B = 2, .width = 1024, .stride = 1040, .K = 512, .scores = ScoreKind::kHostile}},
          {{.B = 16, .width = 300, .K = 512}}};
}

std::vector<fx::NamedSweep<IndexerTopkShape>> IndexerTopkCase::sweeps() {
  return {{"gpu", indexer_topk_gpu_sweep}, {"soak", indexer_topk_soak_sweep}};
}

IndexerTopkCase::IndexerTopkCase(const fx::Tensors& in, const IndexerTopkShape& stated)
    : ShapedCase(stated) {
  // Presence, dtypes and sizes: declared_inputs(), checked before a case file reaches here.
  const st::Tensor& scores = input(in, "scores");
  shape_.B = int64_t(scores.shape.at(0));
  shape_.stride = int64_t(scores.shape.at(1));
  shape_.width = width_of(in);
  if (shape_.stride == shape_.width) shape_.stride = 0;  // as a shape says "rows of the width"
  shape_.K = input(in, "K").item<int64_t>("in.K");
  shape_.sorted = input(in, "sorted").item<int32_t>("in.sorted") != 0;
  if (in.count("wave")) shape_.wave = input(in, "wave").item<int32_t>("in.wave");
  if (in.count("page_table"))
    shape_.page_bits = input(in, "page_bits").item<int32_t>("in.page_bits");
  if (shape_.K < 1 || shape_.K > 2048)
    throw std::invalid_argument("in.K=" + std::to_string(shape_.K) + " must be in [1, 2048]");
  if (in.count("select")) {
    shape_.select = input(in, "select").item<int32_t>("in.select");
    if (!ref::select_valid(shape_.select))
      throw st::FormatError("case", "in.select", "value",
                            std::to_string(shape_.select) +
                                " is not a selection (0 dsv4, 1 sglang, 2 sglang_masked)");
  }
  if (in.count("raw_out")) shape_.raw_out = input(in, "raw_out").item<int32_t>("in.raw_out") != 0;
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
  if (s.select) in["select"] = st::Tensor::scalar<int32_t>(s.select);
  if (!s.raw_out) in["raw_out"] = st::Tensor::scalar<int32_t>(0);
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
  if (in.count("page_table") && shape_.raw_out)
    o.push_back({.name = "raw", .dtype = st::DType::I32, .shape = {B, K}});
  return o;
}

fx::Tensors IndexerTopkCase::reference(const fx::Tensors& in) const {
  const st::Tensor& scores = input(in, "scores");
  const size_t B = scores.shape[0], K = size_t(shape_.K);
  const auto sc = scores.values<float>("in.scores");
  const auto lens = input(in, "lens").values<int32_t>("in.lens");
  const ref::Rows rows{.B = B, .width = size_t(width_of(in)), .stride = scores.shape[1], .K = K};
  const auto sel = ref::Select(shape_.select);
  const bool masked = sel == ref::Select::kSglangMasked;
  std::vector<int32_t> raw(B * K);
  // The mask step comes last (after the page transform and a sort by slot), as in SGLang.
  ref::topk(sc, lens, rows, shape_.sorted, raw, masked ? ref::Select::kSglang : sel);
  std::vector<int32_t> masked_raw = raw;
  if (masked) ref::mask_topk_scores(sc, rows, masked_raw);
  if (!in.count("page_table")) return {{"out", st::Tensor::of<int32_t>({B, K}, masked_raw)}};
  const st::Tensor& pt = input(in, "page_table");
  std::vector<int32_t> paged(B * K);
  ref::page_transform(raw, K, pt.values<int32_t>("in.page_table"), pt.shape[1],
                      input(in, "page_bits").item<int32_t>("in.page_bits"), paged);
  if (!shape_.raw_out && shape_.sorted)
    for (size_t b = 0; b < B; ++b) {  // by slot, -1 last, each raw index kept beside its slot
      std::vector<std::pair<int32_t, int32_t>> row;
      for (size_t j = 0; j < K; ++j) row.push_back({paged[b * K + j], raw[b * K + j]});
      std::stable_sort(row.begin(), row.end(), [](const auto& x, const auto& y) {
        return (x.first < 0) != (y.first < 0) ? y.first < 0 : x.first < y.first;
      });
      for (size_t j = 0; j < K; ++j) {
        paged[b * K + j] = row[j].first;
        raw[b * K + j] = row[j].second;
      }
    }
  if (masked) {
    masked_raw = raw;
    ref::mask_topk_scores(sc, rows, masked_raw);
    for (size_t i = 0; i < B * K; ++i)
      if (masked_raw[i] < 0) paged[i] = -1;
  }
  fx::Tensors out = {{"out", st::Tensor::of<int32_t>({B, K}, paged)}};
  if (shape_.raw_out) out["raw"] = st::Tensor::of<int32_t>({B, K}, masked_raw);
  return out;
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
  if (shape_.select != 0)
    return std::string("the project's kernel selects by the dsv4 rule only (in.select=0), not ") +
           ref::select_name(ref::Select(shape_.select));
  if (!shape_.raw_out) return "the project's kernel writes the raw output beside a paged one";
  return wave_cannot_run(shape_.wave, kern::wave_supported(shape_.wave));
}

std::string judge_topk_row(const float* row, int64_t len, size_t K, int sel, bool sorted,
                           const int32_t* got, const int32_t* order) {
  const bool masked = sel == int(ref::Select::kSglangMasked);
  const bool trivial = len <= int64_t(K);
  return fx::judge_selection(
      row, len, trivial ? size_t(std::max<int64_t>(len, 0)) : K,
      [&](int64_t i) { return trivial || sel != 0 || ref::eligible(row[i]); },
      [&](int64_t i) { return !masked || row[i] > -INFINITY; }, sorted, masked, got, K, order);
}

::testing::AssertionResult IndexerTopkCase::compare_foreign(const fx::OutputSpec& spec,
                                                            const st::Tensor& got,
                                                            const st::Tensor& want,
                                                            const fx::Tensors& in) const {
  if (got.shape != want.shape || got.dtype != st::DType::I32)
    return fx::bitwise_tensors(got, want, spec.name);
  const st::Tensor& scores = input(in, "scores");
  const auto sc = scores.values<float>("in.scores");
  const auto lens = input(in, "lens").values<int32_t>("in.lens");
  const size_t B = got.shape[0], K = got.shape[1], stride = scores.shape[1];
  const int64_t width = width_of(in);
  const std::vector<int32_t> g = got.values<int32_t>();
  std::vector<int32_t> raw = g;
  const bool paged = spec.name == "out" && in.count("page_table");
  if (paged) {
    const st::Tensor& pt = input(in, "page_table");
    try {
      ref::inverse_page_transform(g, K, pt.values<int32_t>("in.page_table"), pt.shape[1],
                                  pt.shape[1], input(in, "page_bits").item<int32_t>("in.page_bits"),
                                  raw);
    } catch (const std::invalid_argument& e) {
      return ::testing::AssertionFailure()
             << spec.name << ": the paged indices do not map back to raw ones: " << e.what();
    }
  }
  auto r = ::testing::AssertionFailure();
  size_t bad = 0;
  fx::Comparison rep{.name = spec.name, .comparator = "tied_selection", .checked = B};
  for (size_t b = 0; b < B; ++b) {
    const int64_t len = std::clamp<int64_t>(lens[b], 0, width);
    const float* row = sc.data() + b * stride;
    std::string why = judge_topk_row(row, len, K, shape_.select, shape_.sorted, &raw[b * K]);
    if (!why.empty() && paged && shape_.sorted)  // a paged row sorted by slot is SGLang's order
      if (judge_topk_row(row, len, K, shape_.select, true, &raw[b * K], &g[b * K]).empty())
        why.clear();
    if (why.empty()) continue;
    if (bad < 8)
      rep.first.push_back({{b}, fx::Value::of_text(why), fx::Value::of_text("a tied selection")});
    if (bad++ < 4) r << spec.name << " row " << b << ": " << why << "\n";
  }
  rep.ok = bad == 0;
  rep.mismatched = bad;
  fx::report_comparison(rep);
  if (!bad) return ::testing::AssertionSuccess();
  return r << spec.name << ": " << bad << " of " << B << " rows are no selection the "
           << ref::select_name(ref::Select(shape_.select))
           << " rule allows (tied indices at the cut-off accepted)";
}

::testing::AssertionResult IndexerTopkCase::compare(const fx::OutputSpec& spec,
                                                    const st::Tensor& got, const st::Tensor& want,
                                                    const fx::Tensors& in) const {
  if (shape_.sorted || got.shape != want.shape || got.dtype != st::DType::I32)
    return fx::bitwise_tensors(got, want, spec.name);
  return fx::same_rows_as_sets(got.values<int32_t>(), want.values<int32_t>(), size_t(got.shape[0]),
                               size_t(got.shape[1]), spec.name,
                               shape_.select == int(ref::Select::kSglangMasked));
}

InputDecls IndexerTopkCase::declared_inputs() {
  return {{"scores", st::DType::F32, {"B", "stride"}},
          {"lens", st::DType::I32, {"B"}},
          {"K", st::DType::I64, {}},
          {"sorted", st::DType::I32, {}},
          {"width", st::DType::I64, {}, true, "default stride"},
          {"page_table", st::DType::I32, {"B", "pages"}, true, "the page transform"},
          {"page_bits", st::DType::I32, {}, true, "with page_table"},
          {"wave", st::DType::I32, {}, true},
          {"select",
           st::DType::I32,
           {},
           true,
           "0 dsv4, 1 sglang exactly K, 2 sglang then mask_topk_scores"},
          {"raw_out", st::DType::I32, {}, true, "default 1"}};
}

}  // namespace dsv4::cases

DSV4_DECLARED_FAMILY(
    "indexer_topk", ::dsv4::cases::IndexerTopkCase,
    "out I32[B, K] (paged with a page table), raw I32[B, K] (with a page table and raw_out). "
    "Sorted: bitwise; unsorted: per-row sets, -1 last; a foreign source: tied "
    "indices at the cut-off accepted")

// candidate_blocks kernel case and replay adapter: top blocks by maximum score, then top keys.
#include "dsv4/cases/candidate_blocks.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <span>
#include <sstream>

#include "dsv4/cases/declared_inputs.hpp"
#include "dsv4/cases/indexer_topk.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/fixtures/selection.hpp"
#include "dsv4/kernels/candidate_blocks.hpp"
#include "dsv4/ref/candidate_blocks.hpp"
#include "dsv4/ref/indexer_topk.hpp"
#include "dsv4/replay/replay.hpp"
#include "dsv4/replay/shaped_family.hpp"

namespace dsv4::cases {
namespace {

// Level two's K as computed: the shape's, or 1 for level one alone (K = 0), whose keys no output
// publishes (the reference drops them, the device writes them to scratch).
size_t computed_K(const CandidateBlocksShape& s) { return size_t(s.K ? s.K : 1); }

namespace ref = ::dsv4::ref::candidate_blocks;
namespace kern = ::dsv4::kernels::candidate_blocks;

const st::Tensor& input(const fx::Tensors& in, const std::string& name) {
  return fx::input_of(in, name, "candidate_blocks");
}

int64_t width_of(const fx::Tensors& in) {
  return in.count("width") ? input(in, "width").item<int64_t>("in.width")
                           : int64_t(input(in, "scores").shape.at(1));
}

}  // namespace

fx::Vars CandidateBlocksShape::vars() const {
  fx::Vars v;
  v.add("B", B).add("width", width);
  if (len < 0)
    v.flag("ragged");
  else
    v.add("len", len);
  v.add("bs", bs).add("nb", nb).add("K", K);
  if (wave) v.add("W", wave);
  return v.flag("ties", ties).flag("hostile", hostile);
}

CandidateBlocksShape CandidateBlocksShape::from_vars(fx::VarsReader& r) {
  CandidateBlocksShape s;
  s.B = r.num("B", s.B);
  s.width = r.num("width", s.width);
  s.len = r.flag("ragged") ? -1 : r.num("len", s.len);
  s.bs = r.num("bs", s.bs);
  s.nb = r.num("nb", s.nb);
  s.K = r.num("K", s.K);
  s.wave = int(r.num("W", s.wave));
  s.ties = r.flag("ties");
  s.hostile = r.flag("hostile");
  return s;
}

std::vector<fx::Sweep<CandidateBlocksShape>> candidate_blocks_gpu_sweep() {
  std::vector<fx::Sweep<CandidateBlocksShape>> v;
  int i = 0;
  auto add = [&](CandidateBlocksShape s) {
    s.wave = i % 2 ? 32 : 16;
    s.ties = i % 3 == 1;
    s.hostile = i % 3 == 2;
    v.push_back({s});
    ++i;
  };
  for (int64_t bs : {1, 7, 64, 128, 512})
    for (int64_t len : {int64_t(1), bs - 1, bs + 1, int64_t(1000), int64_t(8193), int64_t(-1)})
      if (len >= 0 || bs > 1)
        add({.B = 5, .width = 8193, .len = len, .bs = bs, .nb = 16, .K = 512});
  add({.B = 3, .width = 4096, .len = 4096, .bs = 64, .nb = 64, .K = 2048});   // nb = every block
  add({.B = 3, .width = 4096, .len = 4000, .bs = 64, .nb = 100, .K = 2048});  // nb > blocks
  add({.B = 31, .width = 65537, .len = -1, .bs = 64, .nb = 32, .K = 1024});   // ragged, long
  add({.B = 2, .width = 300, .len = 300, .bs = 8, .nb = 2048, .K = 7});       // nb at its max
  add({.B = 129, .width = 16385, .len = 16385, .bs = 128, .nb = 8, .K = 512});
  add({.B = 4, .width = 2000, .len = 0, .bs = 64, .nb = 4, .K = 16});  // empty rows
  return v;
}

std::vector<fx::Sweep<CandidateBlocksShape>> candidate_blocks_soak_sweep() {
  std::vector<fx::Sweep<CandidateBlocksShape>> v;
  int i = 0;
  for (int64_t bs : {1, 64, 512})
    for (int wave : {16, 32}) {
      v.push_back({{.B = 3,
                    .width = 4096,
                    .len = i % 2 ? -1 : 4096,
                    .bs = bs,
                    .nb = 16,
                    .K = 512,
                    .wave = wave,
                    .ties = i % 3 == 1,
                    .hostile = i % 3 == 2}});
      ++i;
    }
  return v;
}

std::vector<fx::Sweep<CandidateBlocksShape>> candidate_blocks_sglang_sweep() {
  return {{{.B = 5, .width = 8193, .len = 1000, .bs = 64, .nb = 16, .K = 0, .ties = true}},
          {{.B = 3, .width = 4096, .len = 4096, .bs = 64, .nb = 64, .K = 0}},
          {{.B = 5, .width = 8193, .len = -1, .bs = 128, .nb = 16, .K = 0, .hostile = true}},
          {{.B = 2, .width = 300, .len = 300, .bs = 8, .nb = 2048, .K = 0}},
          {{.B = 4, .width = 2000, .len = 0, .bs = 64, .nb = 4, .K = 0}},
          {{.B = 5, .width = 8193, .len = 8193, .bs = 7, .nb = 16, .K = 0}}};
}

std::vector<fx::NamedSweep<CandidateBlocksShape>> CandidateBlocksCase::sweeps() {
  return {{"gpu", candidate_blocks_gpu_sweep},
          {"soak", candidate_blocks_soak_sweep},
          {"sglang", candidate_blocks_sglang_sweep}};
}

CandidateBlocksCase::CandidateBlocksCase(const fx::Tensors& in, const CandidateBlocksShape& stated)
    : ShapedCase(stated) {
  // Presence, dtypes and sizes: declared_inputs(), checked before a case file reaches here.
  shape_.B = int64_t(input(in, "scores").shape.at(0));
  shape_.width = width_of(in);
  shape_.bs = input(in, "bs").item<int64_t>("in.bs");
  shape_.nb = input(in, "nb").item<int64_t>("in.nb");
  shape_.K = in.count("K") ? input(in, "K").item<int64_t>("in.K") : 0;  // absent: level one
  if (in.count("wave")) shape_.wave = input(in, "wave").item<int32_t>("in.wave");
}

fx::Tensors CandidateBlocksCase::draw(fx::Rng& rng) const {
  const CandidateBlocksShape& s = shape_;
  const size_t B = size_t(s.B), W = size_t(s.width);
  std::vector<int32_t> lens = s.len >= 0 ? std::vector<int32_t>(B, int32_t(s.len))
                                         : fx::ragged_lengths(rng, B, int32_t(s.bs), int32_t(W));
  std::vector<float> scores =
      s.ties ? fx::integer_valued_f32(rng, B * W, -4, 4) : fx::normal_f32(rng, B * W);
  const float inf = std::numeric_limits<float>::infinity();
  if (s.hostile)
    for (auto& v : scores) {
      const double u = rng.uniform();
      if (u < 0.002)
        v = std::numeric_limits<float>::quiet_NaN();
      else if (u < 0.05)
        v = -inf;
      else if (u < 0.051)
        v = inf;
    }
  for (size_t b = 0; b < B; ++b)  // past the length: +NaN, selected first if it were read
    for (size_t i = size_t(std::max(lens[b], 0)); i < W; ++i)
      scores[b * W + i] = std::numeric_limits<float>::quiet_NaN();
  fx::Tensors in;
  in["scores"] = st::Tensor::of<float>({B, W}, scores);
  in["lens"] = st::Tensor::of<int32_t>(lens);
  in["bs"] = st::Tensor::scalar<int64_t>(s.bs);
  in["nb"] = st::Tensor::scalar<int64_t>(s.nb);
  if (s.K) in["K"] = st::Tensor::scalar<int64_t>(s.K);
  if (s.wave) in["wave"] = st::Tensor::scalar<int32_t>(s.wave);
  return in;
}

std::vector<fx::OutputSpec> CandidateBlocksCase::outputs(const fx::Tensors& in) const {
  const uint64_t B = input(in, "scores").shape.at(0);
  std::vector<fx::OutputSpec> o = {
      {.name = "blocks", .dtype = st::DType::I32, .shape = {B, uint64_t(shape_.nb)}}};
  if (shape_.K)
    o.push_back({.name = "keys", .dtype = st::DType::I32, .shape = {B, uint64_t(shape_.K)}});
  return o;
}

fx::Tensors CandidateBlocksCase::reference(const fx::Tensors& in) const {
  const st::Tensor& scores = input(in, "scores");
  // Level one alone: the blocks do not depend on K (computed_K).
  const size_t B = scores.shape[0], nb = size_t(shape_.nb), K = computed_K(shape_);
  std::vector<int32_t> blocks(B * nb), keys(B * K);
  ref::select(scores.values<float>("in.scores"), input(in, "lens").values<int32_t>("in.lens"),
              {.B = B, .width = size_t(width_of(in)), .stride = scores.shape[1]},
              {.bs = size_t(shape_.bs), .nb = nb, .K = K}, blocks, keys);
  fx::Tensors want = {{"blocks", st::Tensor::of<int32_t>({B, nb}, blocks)}};
  if (shape_.K) want["keys"] = st::Tensor::of<int32_t>({B, K}, keys);
  return want;
}

std::vector<fx::ScratchSpec> CandidateBlocksCase::scratch(const fx::Tensors& in) const {
  if (shape_.K) return {};
  return {{.name = "level_two_keys",
           .bytes = size_t(input(in, "scores").shape.at(0)) * computed_K(shape_) * 4}};
}

void CandidateBlocksCase::launch(const fx::DeviceTensors& d, gpu::Stream s) const {
  const st::Tensor& scores = d.host("scores");
  const kern::Args a{.scores = d.ptr<float>("scores"),
                     .stride = int64_t(scores.shape[1]),
                     .width = shape_.width,
                     .lens = d.ptr<int32_t>("lens"),
                     .B = int64_t(scores.shape[0]),
                     .bs = shape_.bs,
                     .nb = shape_.nb,
                     .K = int64_t(computed_K(shape_)),
                     .blocks_out = d.ptr<int32_t>("blocks"),
                     .keys_out = shape_.K ? d.ptr<int32_t>("keys")
                                          : reinterpret_cast<int32_t*>(d.ptr<uint8_t>(
                                                "level_two_keys"))};  // scratch is bytes
  if (shape_.wave)
    kern::select(a, shape_.wave, s);
  else
    kern::select(a, s);
}

std::string CandidateBlocksCase::cannot_run() const {
  return wave_cannot_run(shape_.wave, kern::wave_supported(shape_.wave));
}

std::vector<int32_t> normalise_blocks(std::vector<int32_t> blocks, size_t nb,
                                      const std::vector<int64_t>& n_blocks, int64_t total,
                                      std::vector<std::string>* bad_pad) {
  if (bad_pad) bad_pad->assign(n_blocks.size(), "");
  for (size_t b = 0; b < n_blocks.size(); ++b) {
    int32_t* row = blocks.data() + b * nb;
    for (size_t j = 0; j < nb; ++j) {
      const int32_t v = row[j];
      if (v == -1 || v == n_blocks[b] || v == total)
        row[j] = -1;
      else if ((v < 0 || v >= n_blocks[b]) && bad_pad && (*bad_pad)[b].empty())
        (*bad_pad)[b] = "entry " + std::to_string(j) + " = " + std::to_string(v) +
                        " is no block and no pad value (-1, or num_blocks " +
                        std::to_string(n_blocks[b]) +
                        (total != n_blocks[b] ? " or " + std::to_string(total) : "") + ")";
    }
    std::sort(row, row + nb,
              [](int32_t x, int32_t y) { return (x < 0) != (y < 0) ? y < 0 : x < y; });
  }
  return blocks;
}

::testing::AssertionResult CandidateBlocksCase::compare_foreign(const fx::OutputSpec& spec,
                                                                const st::Tensor& got,
                                                                const st::Tensor& want,
                                                                const fx::Tensors& in) const {
  if (got.shape != want.shape || got.dtype != st::DType::I32)
    return fx::bitwise_tensors(got, want, spec.name);
  namespace topk = ::dsv4::ref::indexer_topk;
  const st::Tensor& scores = input(in, "scores");
  const auto sc = scores.values<float>("in.scores");
  const auto lens = input(in, "lens").values<int32_t>("in.lens");
  const size_t B = got.shape[0], W = got.shape[1], stride = scores.shape[1];
  const size_t bs = size_t(shape_.bs), nb = size_t(shape_.nb);
  const int64_t width = width_of(in);
  std::vector<int64_t> n_blocks(B);
  for (size_t b = 0; b < B; ++b)
    n_blocks[b] = (std::clamp<int64_t>(lens[b], 0, width) + int64_t(bs) - 1) / int64_t(bs);
  std::vector<int32_t> g = got.values<int32_t>();
  std::vector<std::string> bad_pad(B);
  if (spec.name == "blocks")
    g = normalise_blocks(std::move(g), W, n_blocks, (width + int64_t(bs) - 1) / int64_t(bs),
                         &bad_pad);
  else
    for (size_t b = 0; b < B; ++b)
      std::sort(g.begin() + ptrdiff_t(b * W), g.begin() + ptrdiff_t((b + 1) * W),
                [](int32_t x, int32_t y) { return (x < 0) != (y < 0) ? y < 0 : x < y; });
  auto r = ::testing::AssertionFailure();
  size_t bad = 0;
  fx::Comparison rep{.name = spec.name, .comparator = "two_level_selection", .checked = B};
  for (size_t b = 0; b < B; ++b) {
    const size_t len = size_t(std::clamp<int64_t>(lens[b], 0, width));
    const std::span<const float> row(sc.data() + b * stride, size_t(width));
    const size_t n = size_t(n_blocks[b]);
    std::vector<float> bscore(n);
    for (size_t j = 0; j < n; ++j)
      bscore[j] = j + 1 == n ? INFINITY : ref::block_score(row, len, bs, j);
    auto block_candidate = [&](int64_t j) { return topk::eligible(bscore[size_t(j)]); };
    auto not_nan_block = [&](int64_t j) { return !std::isnan(bscore[size_t(j)]); };
    std::string why = bad_pad[b];
    if (!why.empty()) {
      // a value that is neither a block nor a pad value: no normalising hides it
    } else if (spec.name == "blocks") {
      why = fx::judge_selection(bscore.data(), int64_t(n), nb, block_candidate, not_nan_block, true,
                                false, &g[b * W], W, nullptr);
    } else {
      // The chosen blocks: those above the block cut-off, and of the tied ones at the cut-off
      // those the keys name first, then the lowest-numbered (a tie SGLang may break either way).
      std::vector<uint32_t> keys;
      for (size_t j = 0; j < n; ++j)
        if (block_candidate(int64_t(j))) keys.push_back(topk::order_key(bscore[j]));
      const size_t m = std::min(nb, keys.size());
      std::vector<char> chosen(n, 0);
      if (m > 0) {
        std::nth_element(keys.begin(), keys.begin() + ptrdiff_t(m - 1), keys.end(),
                         std::greater<>());
        const uint32_t cut = keys[m - 1];
        size_t left = m;
        std::vector<size_t> tied;
        for (size_t j = 0; j < n; ++j) {
          if (!block_candidate(int64_t(j))) continue;
          const uint32_t k = topk::order_key(bscore[j]);
          if (k > cut) chosen[j] = 1, --left;
          if (k == cut) tied.push_back(j);
        }
        for (size_t j = 0; j < W && left; ++j) {
          const int32_t v = g[b * W + j];
          if (v < 0 || size_t(v) >= len) continue;
          const size_t blk = size_t(v) / bs;
          if (std::find(tied.begin(), tied.end(), blk) != tied.end() && !chosen[blk])
            chosen[blk] = 1, --left;
        }
        for (size_t t : tied)
          if (left && !chosen[t]) chosen[t] = 1, --left;
        for (size_t j = 0; j < n; ++j)
          if (std::isnan(bscore[j])) chosen[j] = 0;  // a NaN block yields nothing
      }
      why = fx::judge_selection(
          row.data(), int64_t(len), size_t(shape_.K),
          [&](int64_t i) { return chosen[size_t(i) / bs] && topk::eligible(row[size_t(i)]); },
          [&](int64_t i) { return !std::isnan(row[size_t(i)]); }, true, false, &g[b * W], W,
          nullptr);
    }
    if (why.empty()) continue;
    if (bad < 8)
      rep.first.push_back({{b}, fx::Value::of_text(why), fx::Value::of_text("the rule")});
    if (bad++ < 4) r << spec.name << " row " << b << ": " << why << "\n";
  }
  rep.ok = bad == 0;
  rep.mismatched = bad;
  fx::report_comparison(rep);
  if (!bad) return ::testing::AssertionSuccess();
  return r << spec.name << ": " << bad << " of " << B
           << " rows are no selection SGLang's two-level rule allows (tied blocks and keys at a "
              "cut-off accepted; lists normalised)";
}

InputDecls CandidateBlocksCase::declared_inputs() {
  return {{"scores", st::DType::F32, {"B", "stride"}},
          {"lens", st::DType::I32, {"B"}},
          {"bs", st::DType::I64, {}},
          {"nb", st::DType::I64, {}},
          {"K", st::DType::I64, {}, true, "absent: level one alone, no keys"},
          {"width", st::DType::I64, {}, true, "default stride"},
          {"wave", st::DType::I32, {}, true}};
}

}  // namespace dsv4::cases

DSV4_DECLARED_FAMILY(
    "candidate_blocks", ::dsv4::cases::CandidateBlocksCase,
    "blocks I32[B, nb], keys I32[B, K] (ascending, -1 last; no keys without in.K: level one "
    "alone); bitwise. A foreign source: "
    "published lists normalised (padding -> -1, ascending), tied blocks and keys "
    "accepted")

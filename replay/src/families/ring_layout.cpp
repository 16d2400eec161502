// ring_layout kernel case and replay adapter: the sliding-window ring's write and read layouts.
#include "dsv4/cases/ring_layout.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>

#include "dsv4/cases/declared_inputs.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/kernels/ring_layout.hpp"
#include "dsv4/ref/ring_layout.hpp"
#include "dsv4/replay/replay.hpp"
#include "dsv4/replay/shaped_family.hpp"

namespace dsv4::cases {
namespace {

namespace rr = ::dsv4::ref::ring_layout;
namespace kr = ::dsv4::kernels::ring_layout;

const st::Tensor& input(const fx::Tensors& in, const std::string& name) {
  return fx::input_of(in, name, "ring_layout");
}

template <class T>
std::vector<T> values(const fx::Tensors& in, const std::string& name) {
  return input(in, name).values<T>("in." + name);
}

// A vector holding the poison the harness fills an output of T with.
template <class T>
std::vector<T> poisoned(size_t n) {
  std::vector<T> v(n);
  if (n) std::memset(v.data(), fx::default_poison(st::dtype_of<T>()), n * sizeof(T));
  return v;
}

// Slots: mostly valid, some padding (-1), some hostile (other negatives, n_slots, huge).
std::vector<int64_t> hostile_slots(fx::Rng& rng, size_t n, int64_t n_slots) {
  return fx::hostile_indices(rng, n, n_slots,
                             {.valid = 0.75,
                              .minus_one = 0.1,
                              .negative = 0.05,
                              .out_of_range = 0.1,
                              .unique_valid = false})
      .idx;
}

// Positions: mostly in [0, max_pos], a few negative.
std::vector<int64_t> hostile_positions(fx::Rng& rng, size_t n, int64_t max_pos) {
  std::vector<int64_t> v(n);
  for (auto& p : v) p = rng.uniform() < 0.05 ? -rng.range(1, 1000) : rng.range(0, max_pos);
  return v;
}

rr::Ring ref_ring(const fx::Tensors& in) {
  return {.ring = input(in, "ring").item<int64_t>("in.ring"),
          .win = input(in, "win").item<int64_t>("in.win"),
          .n_slots = input(in, "n_slots").item<int64_t>("in.n_slots")};
}

bool has(const fx::Tensors& in, const char* name) { return in.count(name) != 0; }

// Leaves the geometry and the inputs of `launcher` alone (the case runs the launchers whose inputs
// are given).
void keep_launcher(fx::Tensors& in, const std::string& launcher) {
  static const std::map<std::string, std::vector<std::string>> kInputs = {
      {"token_locs", {"slot", "pos", "final_pos"}},
      {"verify_locs", {"batch_slot", "verify_pos", "commit_len"}},
      {"window_rows", {"batch_id", "pos", "batch_slot"}},
      {"prefill_slots", {"req_slot", "prefill_indptr", "pos"}},
  };
  fx::Tensors kept;
  for (const char* g : {"ring", "win", "n_slots"}) kept[g] = in.at(g);
  for (const std::string& k : kInputs.at(launcher)) kept[k] = in.at(k);
  in = std::move(kept);
}

}  // namespace

fx::Vars RingLayoutShape::vars() const {
  fx::Vars v;
  v.add("n", n).add("V", V).add("win", win).add("ring", ring_size()).add("slots", n_slots);
  if (max_pos) v.add("max_pos", max_pos);
  if (first_offset) v.add("first", first_offset);
  if (max_request) v.add("max_request", max_request);
  if (!launcher.empty()) v.add("launcher", launcher);
  if (variant) v.add("variant", variant);
  return v;
}

RingLayoutShape RingLayoutShape::from_vars(fx::VarsReader& r) {
  RingLayoutShape s;
  s.n = r.num("n", s.n);
  s.V = r.num("V", s.V);
  s.win = r.num("win", s.win);
  const int64_t ring = r.num("ring", s.ring_size());
  s.ring = ring == s.win + s.V - 1 ? 0 : ring;  // 0: the ring a window and V need
  s.n_slots = r.num("slots", s.n_slots);
  s.max_pos = r.num("max_pos", s.max_pos);
  s.first_offset = r.num("first", s.first_offset);
  s.max_request = r.num("max_request", s.max_request);
  s.launcher =
      r.word("launcher", {"token_locs", "verify_locs", "window_rows", "prefill_slots"}, "");
  s.variant = int(r.num("variant", s.variant));
  return s;
}

std::vector<fx::Sweep<RingLayoutShape>> ring_layout_sizes_sweep() {
  std::vector<fx::Sweep<RingLayoutShape>> v;
  for (int64_t n : fx::with_random_sizes({0, 1, 7, 64, 4096, 65536}, 2, 2, 20000, 2))
    v.push_back({{.n = n}});
  for (int64_t n : {7, 4096}) v.push_back({{.n = n}, fx::Launch::kGraph});
  return v;
}

std::vector<fx::Sweep<RingLayoutShape>> ring_layout_geometry_sweep() {
  std::vector<fx::Sweep<RingLayoutShape>> v;
  for (int64_t win : {1, 8, 125, 512})
    for (int64_t V : {1, 4, 8})
      for (int64_t extra : {0, 5})
        v.push_back({{.n = 777,
                      .V = V,
                      .win = win,
                      .ring = extra ? win + V - 1 + extra : 0,
                      .n_slots = 37,
                      .max_pos = int64_t(1) << 20,
                      .first_offset = 3 + V,
                      .max_request = 3 * V + 1}});
  v.push_back({{.n = 513, .first_offset = 200, .max_request = 40}});
  v.push_back({{.n = 4096, .V = 8, .win = 64, .max_pos = int64_t(1) << 20}, fx::Launch::kGraph});
  return v;
}

std::vector<fx::Sweep<RingLayoutShape>> ring_layout_fill_sweep() {
  const int64_t big_pos = int64_t(1) << 20;
  const std::vector<RingLayoutShape> shapes = {
      {.n = 1},
      {.n = 255, .win = 8, .max_pos = 20},
      {.n = 257, .V = 1, .win = 3},
      {.n = 1000, .V = 2, .win = 5, .max_pos = 8},
      {.n = 4099, .V = 1, .win = 1},
      {.n = 65536, .V = 4, .win = 125, .n_slots = 4096, .max_pos = big_pos},
      // 1028 tiles: more than one look-back chunk (1024 tiles).
      {.n = 263000, .V = 1, .win = 8, .n_slots = 4096, .max_pos = big_pos},
      // 7813 short tiles: blocks start after others finished (a final offset ends the walk).
      {.n = 2000001, .V = 1, .win = 2, .n_slots = 4096, .max_pos = 4},
  };
  std::vector<fx::Sweep<RingLayoutShape>> v;
  for (int variant = 0; variant < kr::kWindowVariants; ++variant) {
    for (RingLayoutShape s : shapes) {
      s.launcher = "window_rows";
      s.variant = variant;
      v.push_back({s});
    }
    v.push_back({{.n = 4096, .launcher = "window_rows", .variant = variant}, fx::Launch::kGraph});
  }
  return v;
}

std::vector<fx::Sweep<RingLayoutShape>> ring_layout_gpu_sweep() {
  auto v = ring_layout_sizes_sweep();
  for (const auto& p : ring_layout_geometry_sweep()) v.push_back(p);
  for (const auto& p : ring_layout_fill_sweep()) v.push_back(p);
  return v;
}

std::vector<fx::Sweep<RingLayoutShape>> ring_layout_soak_sweep() {
  return {{{.n = 64}},
          {{.n = 4096}},
          {{.n = 513, .first_offset = 200, .max_request = 40}},
          {{.n = 4096, .V = 8, .win = 64, .max_pos = int64_t(1) << 20}}};
}

std::vector<fx::NamedSweep<RingLayoutShape>> RingLayoutCase::sweeps() {
  return {{"gpu", ring_layout_gpu_sweep},
          {"sizes", ring_layout_sizes_sweep},
          {"geometry", ring_layout_geometry_sweep},
          {"fill", ring_layout_fill_sweep},
          {"soak", ring_layout_soak_sweep}};
}

RingLayoutCase::RingLayoutCase(const fx::Tensors& in, const RingLayoutShape& stated)
    : ShapedCase(stated) {
  const rr::Ring g = ref_ring(in);
  rr::check_ring(g);
  shape_.win = g.win;
  shape_.ring = g.ring;
  shape_.n_slots = g.n_slots;
  for (const char* n : {"pos", "slot", "batch_id"})
    if (has(in, n)) shape_.n = int64_t(input(in, n).numel());
  if (has(in, "verify_pos")) {
    const st::Tensor& vp = input(in, "verify_pos");
    if (vp.shape.size() != 2) vp.throw_shape("in.verify_pos", "[B, V]");
    shape_.V = int64_t(vp.shape[1]);
  }
  if (shape_.ring == shape_.win + shape_.V - 1) shape_.ring = 0;  // as a shape says it
  if (has(in, "variant")) {
    const int32_t v = input(in, "variant").item<int32_t>("in.variant");
    if (v < 0 || v >= kr::kWindowVariants)
      throw st::FormatError("ring_layout", "in.variant", "value",
                            std::to_string(v) +
                                " is not 0 (look-back), 1 (look-back, plain "
                                "stores) or 2 (three-pass)");
    shape_.variant = v;
  }
}

fx::Tensors RingLayoutCase::draw(fx::Rng& rng) const {
  const RingLayoutShape& s = shape_;
  const int64_t ring = s.ring_size(), B = s.B(), V = s.V;
  const int64_t max_pos = s.max_pos ? s.max_pos : 4 * ring;
  const int64_t max_request = s.max_request ? s.max_request : 2 * V;
  const size_t n = size_t(s.n);
  fx::Tensors in;
  in["ring"] = st::Tensor::scalar<int64_t>(ring);
  in["win"] = st::Tensor::scalar<int64_t>(s.win);
  in["n_slots"] = st::Tensor::scalar<int64_t>(s.n_slots);
  const auto pos = hostile_positions(rng, n, max_pos);
  in["pos"] = st::Tensor::of<int64_t>(pos);
  in["slot"] = st::Tensor::of<int64_t>(hostile_slots(rng, n, s.n_slots));
  std::vector<int64_t> fin(n);  // final positions at or after the token's, or none (-1)
  for (size_t t = 0; t < n; ++t)
    fin[t] = rng.uniform() < 0.1 ? -1 : pos[t] + rng.range(0, 2 * ring);
  in["final_pos"] = st::Tensor::of<int64_t>(fin);
  in["batch_slot"] = st::Tensor::of<int64_t>(hostile_slots(rng, size_t(B), s.n_slots));
  in["verify_pos"] = st::Tensor::of<int64_t>({uint64_t(B), uint64_t(V)},
                                             hostile_positions(rng, size_t(B * V), max_pos));
  std::vector<int32_t> commit(static_cast<size_t>(B));  // none, all, some, and out of [0, V]
  for (auto& c : commit) c = int32_t(rng.range(-2, V + 2));
  in["commit_len"] = st::Tensor::of<int32_t>(commit);
  std::vector<int32_t> batch(n);  // batch ids: mostly valid, graph padding, hostile
  for (auto& b : batch) {
    const double u = rng.uniform();
    b = u < 0.8 ? int32_t(rng.range(0, B - 1)) : u < 0.9 ? -1 : u < 0.95 ? -7 : int32_t(B);
  }
  in["batch_id"] = st::Tensor::of<int32_t>(batch);
  // Ragged requests after `first_offset` tokens of no request, graph padding after the last;
  // half the time the last request claims tokens past T (an error).
  std::vector<int32_t> ip = {int32_t(std::min<int64_t>(s.first_offset, s.n))};
  for (int64_t b = 0; b < B; ++b)
    ip.push_back(int32_t(std::min<int64_t>(s.n, ip.back() + rng.range(0, max_request))));
  if (n > 0 && rng.uniform() < 0.5) ip.back() = int32_t(n) + 5;
  in["prefill_indptr"] = st::Tensor::of<int32_t>(ip);
  in["req_slot"] = st::Tensor::of<int64_t>(hostile_slots(rng, size_t(B), s.n_slots));
  if (!s.launcher.empty()) keep_launcher(in, s.launcher);
  if (s.variant && has(in, "batch_id")) in["variant"] = st::Tensor::scalar<int32_t>(s.variant);
  return in;
}

std::vector<fx::OutputSpec> RingLayoutCase::outputs(const fx::Tensors& in) const {
  std::vector<fx::OutputSpec> out;
  const uint64_t win = uint64_t(ref_ring(in).win);
  auto add = [&](const char* name, st::DType d, std::vector<uint64_t> shape) {
    out.push_back({.name = name, .dtype = d, .shape = std::move(shape)});
  };
  if (has(in, "slot")) add("loc", st::DType::I64, {input(in, "slot").numel()});
  if (has(in, "commit_len")) add("verify_loc", st::DType::I64, input(in, "verify_pos").shape);
  if (has(in, "batch_id")) {
    const uint64_t D = input(in, "batch_id").numel();
    add("indptr", st::DType::I32, {D + 1});
    add("rows", st::DType::I32, {D * win});
  }
  if (has(in, "req_slot")) {
    add("token_slot", st::DType::I64, {input(in, "pos").numel()});
    add("token_final_pos", st::DType::I64, {input(in, "pos").numel()});
  }
  out.push_back({.name = "errors", .dtype = st::DType::I64, .shape = {}, .init = fx::Init::kZero});
  return out;
}

fx::Tensors RingLayoutCase::reference(const fx::Tensors& in) const {
  const rr::Ring g = ref_ring(in);
  fx::Tensors out;
  int64_t errors = 0;
  if (has(in, "slot")) {
    const auto slot = values<int64_t>(in, "slot");
    auto loc = poisoned<int64_t>(slot.size());
    const auto fin =
        has(in, "final_pos") ? values<int64_t>(in, "final_pos") : std::vector<int64_t>{};
    errors += rr::token_locs(slot, values<int64_t>(in, "pos"), fin, g, loc);
    out["loc"] = st::Tensor::of<int64_t>(loc);
  }
  if (has(in, "commit_len")) {
    const st::Tensor& vp = input(in, "verify_pos");
    auto vloc = poisoned<int64_t>(vp.numel());
    errors +=
        rr::verify_locs(values<int64_t>(in, "batch_slot"), vp.values<int64_t>("in.verify_pos"),
                        values<int32_t>(in, "commit_len"), size_t(vp.shape.at(1)), g, vloc);
    out["verify_loc"] = st::Tensor::of<int64_t>(vp.shape, vloc);
  }
  if (has(in, "batch_id")) {
    const auto batch = values<int32_t>(in, "batch_id");
    auto indptr = poisoned<int32_t>(batch.size() + 1);
    auto rows = poisoned<int32_t>(batch.size() * size_t(g.win));
    errors += rr::window_rows(batch, values<int64_t>(in, "pos"), values<int64_t>(in, "batch_slot"),
                              g, indptr, rows);
    out["indptr"] = st::Tensor::of<int32_t>(indptr);
    out["rows"] = st::Tensor::of<int32_t>(rows);
  }
  if (has(in, "req_slot")) {
    const auto pos = values<int64_t>(in, "pos");
    auto slot = poisoned<int64_t>(pos.size()), fin = poisoned<int64_t>(pos.size());
    errors += rr::prefill_slots(values<int64_t>(in, "req_slot"),
                                values<int32_t>(in, "prefill_indptr"), pos, slot, fin);
    out["token_slot"] = st::Tensor::of<int64_t>(slot);
    out["token_final_pos"] = st::Tensor::of<int64_t>(fin);
  }
  out["errors"] = st::Tensor::scalar<int64_t>(errors);
  return out;
}

void RingLayoutCase::launch(const fx::DeviceTensors& d, gpu::Stream s) const {
  const kr::Ring g{.ring = d.scalar<int64_t>("ring"),
                   .win = d.scalar<int64_t>("win"),
                   .n_slots = d.scalar<int64_t>("n_slots")};
  int64_t* errors = d.ptr<int64_t>("errors");
  if (d.has("slot"))
    kr::token_locs(d.ptr<int64_t>("slot"), d.ptr<int64_t>("pos"),
                   d.has("final_pos") ? d.ptr<int64_t>("final_pos") : nullptr,
                   int64_t(d.host("slot").numel()), g, d.ptr<int64_t>("loc"), errors, s);
  if (d.has("commit_len")) {
    const st::Tensor& vp = d.host("verify_pos");
    kr::verify_locs(d.ptr<int64_t>("batch_slot"), d.ptr<int64_t>("verify_pos"),
                    d.ptr<int32_t>("commit_len"), int64_t(vp.shape.at(0)), int64_t(vp.shape.at(1)),
                    g, d.ptr<int64_t>("verify_loc"), errors, s);
  }
  if (d.has("batch_id"))
    kr::window_rows(d.ptr<int32_t>("batch_id"), d.ptr<int64_t>("pos"),
                    int64_t(d.host("batch_id").numel()), d.ptr<int64_t>("batch_slot"),
                    int64_t(d.host("batch_slot").numel()), g, d.ptr<int32_t>("indptr"),
                    d.ptr<int32_t>("rows"), errors, s, {.variant = shape_.variant});
  if (d.has("req_slot"))
    kr::prefill_slots(d.ptr<int64_t>("req_slot"), d.ptr<int32_t>("prefill_indptr"),
                      int64_t(d.host("req_slot").numel()), d.ptr<int64_t>("pos"),
                      int64_t(d.host("pos").numel()), d.ptr<int64_t>("token_slot"),
                      d.ptr<int64_t>("token_final_pos"), errors, s);
}

InputDecls RingLayoutCase::declared_inputs() {
  return {{"ring", st::DType::I64, {}},
          {"win", st::DType::I64, {}},
          {"n_slots", st::DType::I64, {}},
          {"slot", st::DType::I64, {"N"}, true, "token_locs"},
          {"pos", st::DType::I64, {"N"}, true, "token_locs, window_rows, prefill_slots"},
          {"final_pos", st::DType::I64, {"N"}, true, "token_locs"},
          {"batch_slot", st::DType::I64, {"B"}, true, "verify_locs, window_rows"},
          {"verify_pos", st::DType::I64, {"B", "V"}, true, "verify_locs"},
          {"commit_len", st::DType::I32, {"B"}, true, "verify_locs"},
          {"batch_id", st::DType::I32, {"N"}, true, "window_rows"},
          {"req_slot", st::DType::I64, {"R"}, true, "prefill_slots"},
          {"variant", st::DType::I32, {}, true, "window_rows' fill: 0, 1 or 2"},
          {"prefill_indptr", st::DType::I32, {"R+1"}, true, "prefill_slots"}};
}

}  // namespace dsv4::cases

DSV4_DECLARED_FAMILY(
    "ring_layout", ::dsv4::cases::RingLayoutCase,
    "loc I64[N] (token_locs), verify_loc I64[B, V] (verify_locs), indptr I32[N+1] and rows "
    "I32[N*win] (window_rows), token_slot and token_final_pos I64[N] "
    "(prefill_slots), errors I64; each launcher runs when its inputs are given. "
    "Bitwise")

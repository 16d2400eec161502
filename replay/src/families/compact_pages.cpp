// compact_pages kernel case and replay adapter: quantise into and dequantise out of SGLang's paged
// KV layouts, in the slot form (hostile slots, a poisoned pool, the error counter) and in the
// whole-page form of SGLang's torch references (a PyTorch-written case).
#include "dsv4/cases/compact_pages.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <vector>

#include "dsv4/kernels/compact_pages.hpp"
#include "dsv4/ref/compact_pages.hpp"
#include "dsv4/replay/replay.hpp"
#include "dsv4/replay/shaped_family.hpp"

namespace dsv4::cases {
namespace {

namespace ref = ::dsv4::ref::compact_pages;
namespace kern = ::dsv4::kernels::compact_pages;

const st::Tensor& input(const fx::Tensors& in, const std::string& name) {
  return fx::input_of(in, name, "compact_pages");
}

const char* op_name(CompactOp op) {
  return op == CompactOp::kQuantize         ? "quantize"
         : op == CompactOp::kDequantizeBf16 ? "dequantize_bf16"
                                            : "dequantize_f32";
}

int64_t stride_or_512(int64_t s) { return s ? s : kTokenValues; }

uint64_t page_bytes(const CompactPagesShape& s) {
  return uint64_t(page_layout(s.layout).page_bytes(s.page_size));
}

// A pool tensor (U8 [num_pages, page_bytes], the layout's name as its format).
st::Tensor pool_tensor(const CompactPagesShape& s, std::vector<uint8_t> bytes) {
  return st::Tensor::formatted(kv_layout_name(s.layout), {uint64_t(s.num_pages), page_bytes(s)},
                               std::move(bytes));
}

std::vector<int64_t> iota(size_t n) {
  std::vector<int64_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = int64_t(i);
  return v;
}

// A pool of real pages (quantised from hostile rows) with every other page random bytes, so every
// byte pattern is decoded (NaN and negative scales included); padding stays zero.
// Pages drawn for a pool: larger pools repeat them (page p holds page p % kDrawnPages), so a pool
// past 2 GiB costs the host the quantisation of 512 pages, not of four million tokens.
constexpr size_t kDrawnPages = 512;  // even: quantised and random pages keep their parity

std::vector<uint8_t> draw_pool(fx::Rng& rng, const CompactPagesShape& s) {
  const PageLayout L = page_layout(s.layout);
  const size_t pb = page_bytes(s), pages = size_t(s.num_pages);
  const size_t drawn = std::min(pages, kDrawnPages);
  const std::vector<bf16> rows =
      hostile_rows(rng, s.layout, drawn * size_t(s.page_size), kTokenValues);
  std::vector<uint8_t> pool = ref::quantize_pages(s.layout, s.page_size, rows);
  for (size_t p = 1; p < drawn; p += 2)
    for (size_t i = 0; i < size_t(s.page_size) * size_t(L.token_bytes()); ++i)
      pool[p * pb + i] = uint8_t(rng.next());
  pool.resize(pages * pb);
  for (size_t p = drawn; p < pages; ++p)
    std::memcpy(pool.data() + p * pb, pool.data() + (p % drawn) * pb, pb);
  return pool;
}

// The first differing element of two equal-size byte images, or npos.
size_t first_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, size_t elem) {
  for (size_t i = 0; i < a.size() && i < b.size(); i += elem)
    if (std::memcmp(a.data() + i, b.data() + i, std::min(elem, a.size() - i)) != 0) return i / elem;
  return std::string::npos;
}

std::string hex_byte(uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", b);
  return buf;
}

}  // namespace

fx::Vars CompactPagesShape::vars() const {
  fx::Vars v;
  v.flag(op_name(op)).flag(kv_layout_name(layout)).add("P", page_size).add("pages", num_pages);
  if (!whole_pages) v.add("T", T);
  v.flag("whole", whole_pages);
  if (stride) v.add("stride", stride);
  if (values_per_lane) v.add("V", values_per_lane);
  if (variant) v.add("variant", variant);
  return v;
}

std::vector<bf16> hostile_rows(fx::Rng& rng, KvLayout l, size_t T, size_t stride) {
  const PageLayout L = page_layout(l);
  const int tv = L.tile_values;
  // The fp8 maximum whose powers of two a tile's amax hits exactly.
  const float fmax = L.fp4 ? 6.0f : L.fp8 == Fp8Flavour::kE4m3fnuz ? 240.0f : 448.0f;
  std::vector<bf16> v(T * stride, bf16{0x7fc0});
  for (size_t t = 0; t < T; ++t) {
    bf16* row = v.data() + t * stride;
    for (int b = 0; b < kTokenValues / tv; ++b) {
      bf16* x = row + b * tv;
      const float scale = std::ldexp(1.0f, int(rng.range(-40, 40)));
      for (int i = 0; i < tv; ++i) x[i] = f32_to_bf16(float(rng.normal()) * scale);
      const int at = int(rng.range(0, tv - 1));
      switch (int(rng.range(0, 15))) {
        case 0:  // zeros of both signs
          for (int i = 0; i < tv; ++i) x[i] = bf16{uint16_t(rng.uniform() < 0.5 ? 0 : 0x8000)};
          break;
        case 1:  // below every floor: bf16 subnormals and tiny normals
          for (int i = 0; i < tv; ++i)
            x[i] = bf16{uint16_t(rng.range(0, 0x1ff) | (i % 2 ? 0x8000 : 0))};
          break;
        case 2:  // a NaN
          x[at] = bf16{uint16_t(rng.uniform() < 0.5 ? 0x7fc1 : 0xffc0)};
          break;
        case 3:  // an infinity
          x[at] = bf16{uint16_t(rng.uniform() < 0.5 ? 0x7f80 : 0xff80)};
          break;
        case 4:  // amax exactly fmax * 2^k, or one bf16 step above it
          for (int i = 0; i < tv; ++i) x[i] = f32_to_bf16(float(rng.uniform(-1, 1)) * fmax);
          x[at] = f32_to_bf16(std::ldexp(fmax, int(rng.range(-20, 20))));
          if (rng.uniform() < 0.5) x[at].bits = uint16_t(x[at].bits + 1);
          if (rng.uniform() < 0.5) x[at].bits |= 0x8000;
          break;
        case 5:  // near the fp32 maximum
          for (int i = 0; i < tv; ++i) x[i] = bf16{uint16_t(0x7f70 + rng.range(0, 15))};
          break;
        default:
          break;
      }
    }
  }
  return v;
}

std::string describe_pool_byte(KvLayout l, int64_t page_size, uint64_t offset) {
  const PageLayout L = page_layout(l);
  const uint64_t pb = uint64_t(L.page_bytes(page_size)), page = offset / pb, in = offset % pb;
  std::ostringstream os;
  os << "page " << page << ", ";
  const uint64_t data_end = uint64_t(page_size) * uint64_t(L.data_bytes);
  const uint64_t scale_end = data_end + uint64_t(page_size) * uint64_t(L.scale_bytes);
  if (in < data_end) {
    const uint64_t row = in / uint64_t(L.data_bytes), b = in % uint64_t(L.data_bytes);
    const uint64_t value = L.fp4 ? 2 * b
                           : b < uint64_t(L.quant_values)
                               ? b
                               : uint64_t(L.quant_values) + (b - L.quant_values) / 2;
    os << "row " << row << ", data byte " << b;
    if (value < uint64_t(L.quant_values))
      os << " (tile " << value / uint64_t(L.tile_values) << ")";
    else
      os << " (raw bf16 value " << value << ")";
  } else if (in < scale_end) {
    const uint64_t row = (in - data_end) / uint64_t(L.scale_bytes);
    const uint64_t b = (in - data_end) % uint64_t(L.scale_bytes);
    if (b < uint64_t(L.scales))
      os << "row " << row << ", scale byte " << b << " (tile " << b << ")";
    else
      os << "row " << row << ", pad byte " << b << " of the scale row";
  } else {
    os << "padding byte " << in - scale_end;
  }
  return os.str();
}

fx::Tensors CompactPagesCase::file_inputs(const fx::Case& c) {
  fx::Tensors in = c.inputs;
  auto meta = [&](const char* key) -> const std::string* {
    const auto it = c.metadata.find(key);
    return it == c.metadata.end() ? nullptr : &it->second;
  };
  if (!in.count("layout")) {
    if (const std::string* name = meta("dsv4.layout")) {
      KvLayout l{};
      if (!parse_kv_layout(name->c_str(), &l))
        throw st::FormatError("compact_pages", "__metadata__", "dsv4.layout",
                              "'" + *name + "' is not v41, v41_fp4, v4 or v4_fnuz");
      in["layout"] = st::Tensor::scalar<int32_t>(int32_t(l));
    }
  }
  if (!in.count("page_size")) {
    if (const std::string* p = meta("dsv4.page_size")) {
      char* end = nullptr;
      const long long v = std::strtoll(p->c_str(), &end, 10);
      if (p->empty() || *end != 0)
        throw st::FormatError("compact_pages", "__metadata__", "dsv4.page_size",
                              "'" + *p + "' is not an integer");
      in["page_size"] = st::Tensor::scalar<int64_t>(int64_t(v));
    }
  }
  // The page forms: slot s is row s; the kernel's counter gets a scratch input.
  if (in.count("k") || in.count("pages")) {
    const st::Tensor& t = in.count("k") ? in.at("k") : in.at("pages");
    if (in.count("slots")) {
      // as the file has them
    } else if (in.count("k")) {
      in["slots"] = st::Tensor::of<int64_t>(iota(size_t(t.numel() / 512)));
    } else if (in.count("page_size") && in.at("page_size").dtype == st::DType::I64 &&
               t.shape.size() == 2) {
      const int64_t p = in.at("page_size").item<int64_t>("in.page_size");
      in["slots"] =
          st::Tensor::of<int64_t>(iota(size_t(t.shape[0]) * size_t(std::max<int64_t>(p, 0))));
    }
    if (!in.count("counter")) in["counter"] = st::Tensor::scalar<int64_t>(0);
  }
  return in;
}

CompactPagesCase::CompactPagesCase(CompactPagesShape shape) : ShapedCase(shape) {
  if (shape_.whole_pages) shape_.T = shape_.num_pages * shape_.page_size;
}

CompactPagesShape CompactPagesShape::from_vars(fx::VarsReader& r) {
  CompactPagesShape s;
  s.op = CompactOp(r.one_of({op_name(CompactOp::kQuantize), op_name(CompactOp::kDequantizeBf16),
                             op_name(CompactOp::kDequantizeF32)},
                            int(s.op)));
  std::vector<std::string> layouts;
  for (int i = 0; i < kKvLayoutCount; ++i) layouts.push_back(kv_layout_name(KvLayout(i)));
  s.layout = KvLayout(r.one_of(layouts, int(s.layout)));
  s.page_size = r.num("P", s.page_size);
  s.num_pages = r.num("pages", s.num_pages);
  s.T = r.num("T", s.T);
  s.whole_pages = r.flag("whole");
  if (s.whole_pages) s.T = s.num_pages * s.page_size;
  s.stride = r.num("stride", s.stride);
  s.values_per_lane = int(r.num("V", s.values_per_lane));
  s.variant = int(r.num("variant", s.variant));
  return s;
}

std::vector<fx::NamedSweep<CompactPagesShape>> CompactPagesCase::sweeps() {
  return {{"gpu", compact_pages_gpu_sweep},
          {"options", compact_pages_options_sweep},
          {"soak", compact_pages_soak_sweep}};
}

CompactPagesCase::CompactPagesCase(const fx::Tensors& in, const CompactPagesShape& stated)
    : ShapedCase(stated) {
  // Presence, dtypes, ranks and agreeing sizes: declared_inputs(), checked before a case file
  // reaches here. What follows from values: the layout, the page size, the forms.
  CompactPagesShape& s = shape_;
  const int32_t l = input(in, "layout").item<int32_t>("in.layout");
  if (!kv_layout_valid(l))
    throw st::FormatError("compact_pages", "in.layout", "value",
                          std::to_string(l) + " is not 0 (v41), 1 (v41_fp4), 2 (v4), 3 (v4_fnuz)");
  s.layout = KvLayout(l);
  s.page_size = input(in, "page_size").item<int64_t>("in.page_size");
  if (s.page_size < 1)
    throw st::FormatError("compact_pages", "in.page_size", "value",
                          std::to_string(s.page_size) + " is below 1");
  const uint64_t pb = page_bytes(s);
  auto pages_of = [&](const char* name) {
    const st::Tensor& t = input(in, name);
    if (t.shape.size() != 2 || t.shape[1] != pb)
      t.throw_shape(std::string("in.") + name, "[num_pages, " + std::to_string(pb) + "]");
    return int64_t(t.shape[0]);
  };
  // The form: the first of k, pages, src, out present; none of the others' inputs may be.
  const char* form = in.count("k")       ? "k"
                     : in.count("pages") ? "pages"
                     : in.count("src")   ? "src"
                                         : "out";
  static const std::map<std::string, std::vector<std::string>> kForeign = {
      {"k", {"pages", "src", "pool", "out"}},
      {"pages", {"src", "pool", "out", "values_per_lane"}},
      {"src", {"out"}},
      {"out", {"values_per_lane"}}};
  for (const std::string& other : kForeign.at(form))
    if (in.count(form) && in.count(other))
      throw st::FormatError("compact_pages", "in." + other, "name",
                            std::string("a case with in.") + form + " reads no in." + other);
  if (in.count("variant")) s.variant = input(in, "variant").item<int32_t>("in.variant");
  if (in.count("values_per_lane"))
    s.values_per_lane = input(in, "values_per_lane").item<int32_t>("in.values_per_lane");
  if (form == std::string("k") || form == std::string("pages")) {  // the whole-page form
    s.whole_pages = true;
    if (in.count("k")) {
      const st::Tensor& k = input(in, "k");
      if (k.shape[1] != uint64_t(s.page_size))
        k.throw_shape("in.k", "[num_pages, " + std::to_string(s.page_size) + ", 512]");
      s.op = CompactOp::kQuantize;
      s.num_pages = int64_t(k.shape[0]);
    } else {
      s.op = CompactOp::kDequantizeBf16;
      s.num_pages = pages_of("pages");
    }
    s.T = s.num_pages * s.page_size;
    for (const char* name : {"slots", "counter"})
      if (!in.count(name))
        throw st::FormatError("compact_pages", std::string("in.") + name, "missing",
                              "the page forms' implicit input (file_inputs adds it)");
    const st::Tensor& slots = input(in, "slots");
    if (slots.shape[0] != uint64_t(s.T))
      slots.throw_shape("in.slots", "[" + std::to_string(s.T) + "] (num_pages * P)");
    return;
  }
  s.num_pages = pages_of("pool");
  s.T = int64_t(input(in, "slots").shape[0]);
  const st::Tensor& rows = input(in, form);  // [T, stride]: T agrees with in.slots
  s.stride = int64_t(rows.shape[1]) == kTokenValues ? 0 : int64_t(rows.shape[1]);
  s.op = form == std::string("src")     ? CompactOp::kQuantize
         : rows.dtype == st::DType::F32 ? CompactOp::kDequantizeF32
                                        : CompactOp::kDequantizeBf16;
}

fx::Tensors CompactPagesCase::draw(fx::Rng& rng) const {
  const CompactPagesShape& s = shape_;
  fx::Tensors in;
  in["layout"] = st::Tensor::scalar<int32_t>(int32_t(s.layout));
  in["page_size"] = st::Tensor::scalar<int64_t>(s.page_size);
  const uint64_t T = uint64_t(s.T), S = uint64_t(stride_or_512(s.stride));
  const int64_t slots_total = s.num_pages * s.page_size;
  if (s.whole_pages) {
    in["slots"] = st::Tensor::of<int64_t>(iota(size_t(T)));
    in["counter"] = st::Tensor::scalar<int64_t>(0);
    if (s.op == CompactOp::kQuantize)
      in["k"] = st::Tensor::of<bf16>({uint64_t(s.num_pages), uint64_t(s.page_size), 512},
                                     hostile_rows(rng, s.layout, size_t(T), 512));
    else
      in["pages"] = pool_tensor(s, draw_pool(rng, s));
    return in;
  }
  if (s.op == CompactOp::kQuantize) {
    in["src"] = st::Tensor::of<bf16>({T, S}, hostile_rows(rng, s.layout, size_t(T), size_t(S)));
    in["slots"] = st::Tensor::of<int64_t>(fx::hostile_indices(rng, T, slots_total, s.mix).idx);
    in["pool"] = pool_tensor(s, std::vector<uint8_t>(size_t(s.num_pages) * page_bytes(s),
                                                     fx::default_poison(st::DType::U8)));
    if (s.values_per_lane) in["values_per_lane"] = st::Tensor::scalar<int32_t>(s.values_per_lane);
    if (s.variant) in["variant"] = st::Tensor::scalar<int32_t>(s.variant);
  } else {
    fx::IndexMix mix = s.mix;
    mix.unique_valid = false;  // a gather may read a slot twice
    in["pool"] = pool_tensor(s, draw_pool(rng, s));
    in["slots"] = st::Tensor::of<int64_t>(fx::hostile_indices(rng, T, slots_total, mix).idx);
    if (s.variant) in["variant"] = st::Tensor::scalar<int32_t>(s.variant);
    const st::DType dt = s.op == CompactOp::kDequantizeF32 ? st::DType::F32 : st::DType::BF16;
    in["out"] = fx::filled(dt, {T, S}, fx::default_poison(dt));
  }
  return in;
}

std::vector<fx::OutputSpec> CompactPagesCase::outputs(const fx::Tensors& in) const {
  const CompactPagesShape& s = shape_;
  if (s.whole_pages) {
    if (s.op == CompactOp::kQuantize)
      return {{.name = "pages",
               .dtype = st::DType::U8,
               .shape = {uint64_t(s.num_pages), page_bytes(s)},
               .init = fx::Init::kZero,
               .format = kv_layout_name(s.layout)}};
    return {{.name = "k",
             .dtype = st::DType::BF16,
             .shape = {uint64_t(s.num_pages), uint64_t(s.page_size), 512},
             .init = fx::Init::kPoison}};
  }
  const fx::OutputSpec errors{
      .name = "errors", .dtype = st::DType::I64, .shape = {}, .init = fx::Init::kZero};
  if (s.op == CompactOp::kQuantize)
    return {{.name = "pool",
             .dtype = st::DType::U8,
             .shape = input(in, "pool").shape,
             .init = fx::Init::kFromInput,
             .format = kv_layout_name(s.layout)},
            errors};
  const st::Tensor& out = input(in, "out");
  return {{.name = "out", .dtype = out.dtype, .shape = out.shape, .init = fx::Init::kFromInput},
          errors};
}

fx::Tensors CompactPagesCase::reference(const fx::Tensors& in) const {
  const CompactPagesShape& s = shape_;
  if (s.whole_pages) {
    if (s.op == CompactOp::kQuantize) {
      const auto k = input(in, "k").values<bf16>("in.k");
      return {{"pages", pool_tensor(s, ref::quantize_pages(s.layout, s.page_size, k))}};
    }
    const auto pages = input(in, "pages").values<uint8_t>("in.pages");
    return {{"k", st::Tensor::of<bf16>({uint64_t(s.num_pages), uint64_t(s.page_size), 512},
                                       ref::dequantize_pages(s.layout, s.page_size, pages))}};
  }
  const auto slots = input(in, "slots").values<int64_t>("in.slots");
  std::vector<uint8_t> pool = input(in, "pool").values<uint8_t>("in.pool");
  const size_t np = size_t(s.num_pages), S = size_t(stride_or_512(s.stride));
  ref::Outcome o;
  fx::Tensors out;
  if (s.op == CompactOp::kQuantize) {
    const auto src = input(in, "src").values<bf16>("in.src");
    o = ref::quantize(s.layout, s.page_size, src, S, slots, pool, np);
    out["pool"] = pool_tensor(s, std::move(pool));
  } else if (s.op == CompactOp::kDequantizeF32) {
    std::vector<float> v = input(in, "out").values<float>("in.out");
    o = ref::dequantize(s.layout, s.page_size, pool, np, slots, v, S);
    out["out"] = st::Tensor::of<float>(input(in, "out").shape, v);
  } else {
    std::vector<bf16> v = input(in, "out").values<bf16>("in.out");
    o = ref::dequantize(s.layout, s.page_size, pool, np, slots, v, S);
    out["out"] = st::Tensor::of<bf16>(input(in, "out").shape, v);
  }
  out["errors"] = st::Tensor::scalar<int64_t>(o.rejected);
  return out;
}

void CompactPagesCase::launch(const fx::DeviceTensors& d, gpu::Stream s) const {
  const CompactPagesShape& c = shape_;
  const bool whole = c.whole_pages;
  const int64_t* slots = d.ptr<int64_t>("slots");
  int64_t* errors = d.ptr<int64_t>(whole ? "counter" : "errors");
  if (c.op == CompactOp::kQuantize) {
    kern::quantize(c.layout, c.page_size, d.ptr<bf16>(whole ? "k" : "src"), c.stride, slots, c.T,
                   d.ptr<uint8_t>(whole ? "pages" : "pool"), c.num_pages, errors, s,
                   {.values_per_lane = c.values_per_lane, .variant = c.variant});
  } else if (c.op == CompactOp::kDequantizeF32) {
    kern::dequantize(c.layout, c.page_size, d.ptr<uint8_t>("pool"), c.num_pages, slots, c.T,
                     d.ptr<float>("out"), c.stride, errors, s, {.variant = c.variant});
  } else {
    kern::dequantize(c.layout, c.page_size, d.ptr<uint8_t>(whole ? "pages" : "pool"), c.num_pages,
                     slots, c.T, d.ptr<bf16>(whole ? "k" : "out"), c.stride, errors, s,
                     {.variant = c.variant});
  }
}

::testing::AssertionResult CompactPagesCase::compare(const fx::OutputSpec& spec,
                                                     const st::Tensor& got, const st::Tensor& want,
                                                     const fx::Tensors& in) const {
  ::testing::AssertionResult r = fx::KernelCase::compare(spec, got, want, in);
  if (r || got.data.size() != want.data.size()) return r;
  const CompactPagesShape& s = shape_;
  if (spec.name == "pool" || spec.name == "pages") {
    const size_t i = first_difference(got.data, want.data, 1);
    if (i != std::string::npos)
      r << "\nfirst differing byte " << i << ": " << describe_pool_byte(s.layout, s.page_size, i)
        << ", got " << hex_byte(got.data[i]) << " want " << hex_byte(want.data[i]);
  } else if (spec.name == "out" || spec.name == "k") {
    const size_t elem = got.dtype == st::DType::F32 ? 4 : 2;
    const size_t i = first_difference(got.data, want.data, elem);
    const size_t row_len = size_t(got.shape.back());  // 512, or the out stride
    if (i != std::string::npos) {
      const size_t t = i / row_len, v = i % row_len;
      int64_t slot = int64_t(t);
      if (in.count("slots")) slot = input(in, "slots").values<int64_t>("in.slots")[t];
      r << "\nfirst differing value: row " << t << " (slot " << slot;
      if (slot >= 0) r << ": page " << slot / s.page_size << ", row " << slot % s.page_size;
      r << "), value " << v;
      if (v < size_t(page_layout(s.layout).quant_values))
        r << " (tile " << v / size_t(page_layout(s.layout).tile_values) << ")";
    }
  }
  return r;
}

InputDecls CompactPagesCase::declared_inputs() {
  using st::DType;
  return {{"layout",
           DType::I32,
           {},
           false,
           "0 v41, 1 v41_fp4, 2 v4, 3 v4_fnuz; or __metadata__ dsv4.layout"},
          {"page_size", DType::I64, {}, false, "or __metadata__ dsv4.page_size"},
          {"src", DType::BF16, {"T", "S"}, true, "quantise"},
          {"out", DType::BF16, {"T", "S"}, true, "dequantise: the output before", {DType::F32}},
          {"pool", DType::U8, {"num_pages", "page_bytes"}, true, "with src or out: the pool"},
          {"slots", DType::I64, {"T"}, true, "with src or out; the page forms: 0..T-1"},
          {"k", DType::BF16, {"num_pages", "P", "512"}, true, "quantise whole pages"},
          {"pages", DType::U8, {"num_pages", "page_bytes"}, true, "dequantise whole pages"},
          {"counter", DType::I64, {}, true, "the page forms: 0"},
          {"values_per_lane", DType::I32, {}, true, "quantise"},
          {"variant", DType::I32, {}, true}};
}

}  // namespace dsv4::cases

DSV4_DECLARED_FAMILY("compact_pages", ::dsv4::cases::CompactPagesCase,
                     "src, pool, slots: pool, errors I64; out, pool, slots: out, errors; k: pages "
                     "U8[num_pages, page_bytes]; pages: k BF16[num_pages, P, 512]. Bitwise; a page "
                     "mismatch names page, row, data "
                     "or scale byte and tile")

// sparse_decode reference on its own: SGLang's token dequantisation by hand, the key selection
// rule (-1, lengths, errors), hand-computed attention with and without sink, invariants (empty
// queries, column order, repeated keys, poisoned unused pages), split partials merged by
// split_combine against the unsplit result, and the argument checks.
#include "dsv4/ref/sparse_decode.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "dsv4/fixtures/attention_inputs.hpp"
#include "dsv4/fixtures/compare.hpp"
#include "dsv4/fixtures/seed.hpp"
#include "dsv4/ref/split_combine.hpp"

namespace dsv4 {
namespace {

namespace sd = ref::sparse_decode;
using fx::Shape;

const double kInf = std::numeric_limits<double>::infinity();

// A one-page pool of `layout` with page size P whose bytes the test writes by hand.
struct HandPool {
  KvLayout layout;
  int64_t P;
  std::vector<uint8_t> bytes;
  PageLayout L;
  HandPool(KvLayout l, int64_t p, int64_t pages = 1)
      : layout(l),
        P(p),
        bytes(size_t(pages * page_layout(l).page_bytes(p)), 0),
        L(page_layout(l)) {}
  uint8_t* data(int64_t slot) { return bytes.data() + L.data_row_offset(slot, P); }
  uint8_t* scale(int64_t slot) { return bytes.data() + L.scale_row_offset(slot, P); }
  sd::Cache cache() const {
    sd::Cache c;
    c.layout = layout;
    c.page_size = P;
    c.num_pages = int64_t(bytes.size()) / L.page_bytes(P);
    c.pool = bytes;
    return c;
  }
};

std::vector<float> token(const HandPool& p, int64_t slot) {
  std::vector<float> out(512);
  sd::dequantize_token(p.cache(), slot, out.data());
  return out;
}

TEST(SparseDecodeDequant, V41CodesTimesPowerOfTwoScales) {
  HandPool p(KvLayout::kV41, 4, 2);                   // slot 5: page 1, row 1
  for (int i = 0; i < 512; ++i) p.data(5)[i] = 0x38;  // e4m3 1.0
  p.data(5)[1] = 0xC0;                                // -2.0
  p.scale(5)[0] = 127;                                // 2^0
  p.scale(5)[1] = 130;                                // 2^3
  p.scale(5)[2] = 0;                                  // 2^-127: a subnormal product
  p.scale(5)[3] = 255;                                // NaN
  const std::vector<float> v = token(p, 5);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.0f);
  EXPECT_EQ(v[32], 8.0f);
  EXPECT_EQ(v[64], std::ldexp(1.0f, -127));
  EXPECT_TRUE(std::isnan(v[96]));
  EXPECT_EQ(v[511], std::ldexp(1.0f, -127)) << "scale byte 15 is 0: 2^-127";
}

TEST(SparseDecodeDequant, V41Fp4LowNibbleFirstWithE4m3Scales) {
  HandPool p(KvLayout::kV41Fp4, 1, 3);
  p.data(2)[0] = 0x21;   // value 0: code 1 (0.5), value 1: code 2 (1.0)
  p.data(2)[8] = 0xF7;   // value 16: code 7 (6.0), value 17: code 0xF (-6.0)
  p.scale(2)[0] = 0x38;  // 1.0
  p.scale(2)[1] = 0x40;  // 2.0
  p.scale(2)[2] = 0x7f;  // NaN
  const std::vector<float> v = token(p, 2);
  EXPECT_EQ(v[0], 0.5f);
  EXPECT_EQ(v[1], 1.0f);
  EXPECT_EQ(v[16], 12.0f);
  EXPECT_EQ(v[17], -12.0f);
  EXPECT_TRUE(std::isnan(v[32]));
}

TEST(SparseDecodeDequant, V4RopePartIsRawBf16) {
  HandPool p(KvLayout::kV4, 2);
  p.data(1)[0] = 0x38;
  p.scale(1)[0] = 128;  // values 0..63: x2
  const bf16 r = f32_to_bf16(-1.5f);
  p.data(1)[448] = uint8_t(r.bits);
  p.data(1)[449] = uint8_t(r.bits >> 8);
  const std::vector<float> v = token(p, 1);
  EXPECT_EQ(v[0], 2.0f);
  EXPECT_EQ(v[448], -1.5f);
  EXPECT_EQ(v[449], 0.0f);
}

// ---- key selection and hand-computed attention ------------------------------------------

TEST(SparseDecodeKeys, MinusOneLengthsAndErrors) {
  HandPool p(KvLayout::kV41, 4);  // capacity 4
  for (int64_t s = 0; s < 4; ++s) p.data(s)[0] = uint8_t(0x30 + s), p.scale(s)[0] = 127;
  const std::vector<int32_t> idx = {-1, 3, -2, 4, 1, 2};  // column 5 is past the length
  const std::vector<int32_t> len = {5};
  sd::Cache c = p.cache();
  c.indices = idx;
  c.K = 6;
  c.lengths = len;
  sd::Inputs in;
  in.B = 1;
  in.H = 16;
  std::vector<bf16> q(16 * 512, bf16{0});
  in.q = q;
  in.main = c;
  const sd::Keys k = sd::keys_of(in, 0, 0, 6);
  ASSERT_EQ(k.n, 2u);      // slots 3 and 1, in column order
  EXPECT_EQ(k.errors, 2);  // -2 and 4
  EXPECT_EQ(k.rows[0], token(p, 3)[0]);
  EXPECT_EQ(k.rows[512], token(p, 1)[0]);
  EXPECT_EQ(sd::decode_f64(in).errors, 2);
  EXPECT_EQ(sd::keys_of(in, 0, 2, 4).errors, 2);
  EXPECT_EQ(sd::keys_of(in, 0, 0, 2).n, 1u);
}

// q = (1, 0, ...) for every head; key 0 = (0, 1, 0...), key 1 = (2, 2, 0, ...); sm_scale ln3/2:
// scores 0 and ln 3, weights 1/4 and 3/4: out = (1.5, 1.75, 0...), lse = ln 4. A sink 0 adds
// e^0 = 1 to the denominator 4: out = (1.2, 1.4, 0...).
struct TwoKeys {
  HandPool p{KvLayout::kV41, 2};
  std::vector<int32_t> idx{0, 1}, len{2};
  std::vector<bf16> q = std::vector<bf16>(16 * 512, bf16{0});
  std::vector<float> sink;
  TwoKeys() {
    p.data(0)[1] = 0x38;
    p.data(1)[0] = 0x40;
    p.data(1)[1] = 0x40;
    p.scale(0)[0] = p.scale(1)[0] = 127;
    for (int h = 0; h < 16; ++h) q[size_t(h) * 512] = f32_to_bf16(1.0f);
  }
  sd::Inputs in() const {
    sd::Inputs i;
    i.B = 1;
    i.H = 16;
    i.q = q;
    i.main = p.cache();
    i.main.indices = idx;
    i.main.K = 2;
    i.main.lengths = len;
    i.sm_scale = float(std::log(3.0) / 2);
    i.sink = sink;
    return i;
  }
};

TEST(SparseDecodeHand, TwoKeysWeighOneToThree) {
  TwoKeys t;
  const sd::Outputs r = sd::decode_f64(t.in());
  const double x1 = 2 * double(t.in().sm_scale);  // the fp32 sm_scale, exactly
  const double w1 = std::exp(x1) / (1 + std::exp(x1));
  for (size_t h = 0; h < 16; ++h) {
    EXPECT_NEAR(r.out[h * 512 + 0], 2 * w1, 1e-12);
    EXPECT_NEAR(r.out[h * 512 + 1], (1 - w1) + 2 * w1, 1e-12);
    EXPECT_EQ(r.out[h * 512 + 2], 0.0);
    EXPECT_NEAR(r.lse[h], std::log(1 + std::exp(x1)), 1e-12);
  }
  EXPECT_NEAR(r.out[0], 1.5, 1e-6);
  EXPECT_NEAR(r.lse[0], std::log(4.0), 1e-6);
}

TEST(SparseDecodeHand, SinkJoinsTheDenominatorOnly) {
  TwoKeys t;
  t.sink.assign(16, 0.0f);
  t.sink[1] = std::numeric_limits<float>::infinity();
  t.sink[2] = -std::numeric_limits<float>::infinity();
  const sd::Outputs r = sd::decode_f64(t.in());
  EXPECT_NEAR(r.out[0], 1.2, 1e-6);
  EXPECT_NEAR(r.out[1], 1.4, 1e-6);
  EXPECT_NEAR(r.lse[0], std::log(4.0), 1e-6);  // the lse excludes the sink
  EXPECT_EQ(r.out[512], 0.0);                  // +inf sink
  EXPECT_NEAR(r.out[2 * 512], 1.5, 1e-6);      // -inf sink: as without
  EXPECT_NEAR(r.lse[1], std::log(4.0), 1e-6);
}

TEST(SparseDecodeHand, NoKeyGivesZerosAndPlusInfWhateverTheSink) {
  TwoKeys t;
  t.len = {0};
  t.sink = {0, 5, -5, std::numeric_limits<float>::infinity(),
            -std::numeric_limits<float>::infinity()};
  t.sink.resize(16, 1.0f);
  const sd::Outputs r = sd::decode_f64(t.in());
  for (double v : r.out) ASSERT_EQ(v, 0.0);
  for (double l : r.lse) ASSERT_EQ(l, kInf);
  t.len = {2};
  t.idx = {-1, 7};  // 7 is past the capacity of 2: an error, not a key
  const sd::Outputs e = sd::decode_f64(t.in());
  EXPECT_EQ(e.errors, 1);
  for (double l : e.lse) ASSERT_EQ(l, kInf);
}

// ---- invariants ---------------------------------------------------------------------------

TEST(SparseDecodeInvariants, ColumnOrderAndPoisonedUnusedSlotsDoNotMatter) {
  fx::Rng rng(fx::test_seed());
  DSV4_CASE(rng.seed(), "B=3 H=16 K=40 P=16 v41");
  const fx::SparseCase c = fx::sparse_case(
      rng, {.B = 3, .H = 16, .K = 40, .page_size = 16, .num_pages = 8, .sink = false});
  const sd::Outputs a = sd::decode_f64(c.inputs());
  // Reverse each query's valid columns (within its length): same keys, another order.
  fx::SparseCase r = c;
  for (size_t b = 0; b < 3; ++b) {
    const size_t len = size_t(std::clamp<int32_t>(c.main.lengths[b], 0, 40));
    std::reverse(r.main.indices.begin() + long(b * 40),
                 r.main.indices.begin() + long(b * 40 + len));
  }
  const sd::Outputs b = sd::decode_f64(r.inputs());
  EXPECT_TRUE(fx::close(b.out, a.out, Shape{3, 16, 512},
                        {.atol = 1e-12, .rtol = 1e-12, .allow_all_zero = true}));
  EXPECT_EQ(a.errors, b.errors);
  for (double v : a.out) ASSERT_FALSE(std::isnan(v)) << "a poisoned (unused) slot was read";
}

TEST(SparseDecodeInvariants, RepeatedKeyCountsTwice) {
  TwoKeys t;
  t.idx = {1, 1};  // two equal scores: the same as one key
  const sd::Outputs twice = sd::decode_f64(t.in());
  EXPECT_NEAR(twice.out[0], 2.0, 1e-12);
  EXPECT_NEAR(twice.lse[0], std::log(2.0) + 2 * double(t.in().sm_scale), 1e-12);
}

struct SplitCase {
  KvLayout main, extra;
  bool has_extra;
  size_t S;
};

class SparseDecodeSplits : public ::testing::TestWithParam<SplitCase> {};

// The partials, merged by split_combine's fp64 reference with the sink, give the unsplit result.
TEST_P(SparseDecodeSplits, PartialsMergeToTheUnsplitResult) {
  const SplitCase p = GetParam();
  fx::Rng rng(fx::test_seed());
  DSV4_CASE(rng.seed(), "B=8 H=16 K=48 Ke=20 S=" << p.S);
  const fx::SparseCase c = fx::sparse_case(rng, {.B = 8,
                                                 .H = 16,
                                                 .K = 48,
                                                 .layout = p.main,
                                                 .page_size = 16,
                                                 .num_pages = 6,
                                                 .Ke = p.has_extra ? 20u : 0u,
                                                 .extra_layout = p.extra,
                                                 .extra_page_size = 1,
                                                 .extra_pages = 64});
  const sd::Outputs whole = sd::decode_f64(c.inputs());
  const sd::Partials parts = sd::partials_f64(c.inputs(), p.S);
  EXPECT_EQ(parts.errors, whole.errors);
  const std::vector<float> o(parts.o.begin(), parts.o.end()),
      lse(parts.lse.begin(), parts.lse.end());
  const std::vector<int32_t> n(8, int32_t(p.S));
  ref::split_combine::Inputs in;
  in.shape = {8, p.S, 16, 512};
  in.o = o;
  in.lse = lse;
  in.n_splits = n;
  in.sink = c.sink;
  const ref::split_combine::OutputsF64 merged = ref::split_combine::combine_f64(in);
  // The partials went through fp32: relative 2^-24 per value, a few of them per result.
  EXPECT_TRUE(fx::close(merged.out, whole.out, Shape{8, 16, 512},
                        {.atol = 1e-6, .rtol = 1e-6, .allow_all_zero = true}, {.name = "out"}));
  EXPECT_TRUE(fx::close(merged.lse, whole.lse, Shape{8, 16}, {.atol = 1e-6, .rtol = 1e-6},
                        {.name = "lse"}));
}

INSTANTIATE_TEST_SUITE_P(Layouts, SparseDecodeSplits,
                         ::testing::Values(SplitCase{KvLayout::kV41, KvLayout::kV41, false, 1},
                                           SplitCase{KvLayout::kV41, KvLayout::kV41Fp4, true, 3},
                                           SplitCase{KvLayout::kV41Fp4, KvLayout::kV41Fp4, true, 7},
                                           SplitCase{KvLayout::kV4, KvLayout::kV4, true, 4},
                                           SplitCase{KvLayout::kV4Fnuz, KvLayout::kV4Fnuz, true,
                                                     2}),
                         [](const auto& info) {
                           const SplitCase& p = info.param;
                           return std::string(kv_layout_name(p.main)) +
                                  (p.has_extra ? std::string("_extra_") + kv_layout_name(p.extra)
                                               : "") +
                                  "_S" + std::to_string(p.S);
                         });

TEST(SparseDecodeTolerance, DerivedFromTheData) {
  fx::Rng rng(fx::test_seed());
  const fx::SparseCase c = fx::sparse_case(rng, {.B = 2, .H = 16, .K = 64});
  const sd::Tolerance t = sd::tolerance(c.inputs());
  EXPECT_GT(t.lse_atol, 0.0);
  EXPECT_LT(t.lse_atol, 4e-3);
  EXPECT_GT(t.out_atol, 0.0);
  EXPECT_LT(t.out_atol, 6e-2);
  // The score term follows sm_scale: twice the scale, (nearly) twice the lse bound.
  fx::SparseCase twice = c;
  twice.sm_scale *= 2;
  const sd::Tolerance t2 = sd::tolerance(twice.inputs());
  const double sums = (3.0 * 4 + 16) * std::ldexp(1.0, -24);  // 64 columns: 4 tiles of 16
  EXPECT_NEAR(t2.lse_atol - sums, 2 * (t.lse_atol - sums), 1e-12);
}

// ---- argument checks ------------------------------------------------------------------------

TEST(SparseDecodeChecks, BadInputsNameTheField) {
  TwoKeys t;
  auto expect_message = [](const sd::Inputs& in, const std::string& part) {
    try {
      sd::decode_f64(in);
      ADD_FAILURE() << "no error; expected one naming " << part;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  sd::Inputs in = t.in();
  in.H = 8;
  expect_message(in, "H=8");
  in = t.in();
  in.main.K = 3;
  expect_message(in, "main.indices");
  in = t.in();
  in.main.page_size = 3;
  expect_message(in, "main.pool");
  sd::Cache extra = t.in().main;
  const std::vector<uint8_t> v4_pool(
      size_t(extra.num_pages) * size_t(page_layout(KvLayout::kV4).page_bytes(extra.page_size)));
  extra.layout = KvLayout::kV4;
  extra.pool = v4_pool;
  in = t.in();
  in.extra = &extra;
  expect_message(in, "(main, extra) layouts (v41, v4)");
  // Any pairing of v41 and v41_fp4, as SGLang's HIP kernel and its test take them.
  EXPECT_TRUE(sd::layout_pair_ok(KvLayout::kV41, KvLayout::kV41Fp4));
  EXPECT_TRUE(sd::layout_pair_ok(KvLayout::kV41Fp4, KvLayout::kV41));
  EXPECT_TRUE(sd::layout_pair_ok(KvLayout::kV41Fp4, KvLayout::kV41Fp4));
  EXPECT_FALSE(sd::layout_pair_ok(KvLayout::kV4, KvLayout::kV41));
  EXPECT_FALSE(sd::layout_pair_ok(KvLayout::kV41, KvLayout::kV4));
}

// compact_attention_hip's inverse RoPE on TwoKeys: rope_dim 512 rotates the pair (1.5, 1.75)
// at 90 degrees (cos 0, sin 1) to (1.75, -1.5); a position outside the table is an error, once
// per query, and leaves the output unrotated.
TEST(SparseDecodeHand, InverseRopeRotatesTheTailBack) {
  TwoKeys t;
  std::vector<float> table(512);
  for (size_t i = 0; i < 512; i += 2) table[i] = 0, table[i + 1] = 1;
  for (int64_t pos : {int64_t(0), int64_t(1)}) {
    const std::vector<int64_t> positions = {pos};
    sd::Inputs in = t.in();
    in.cos_sin = table;
    in.positions = positions;
    in.rope_dim = 512;
    const sd::Outputs r = sd::decode_f64(in);
    EXPECT_NEAR(r.out[0], pos == 0 ? 1.75 : 1.5, 1e-7) << pos;  // sm_scale is ln3/2 in fp32
    EXPECT_NEAR(r.out[1], pos == 0 ? -1.5 : 1.75, 1e-7) << pos;
    EXPECT_EQ(r.errors, pos == 0 ? 0 : 1);
    // The tolerance grows by the second bf16 rounding of a rotated output.
    EXPECT_GT(sd::tolerance(in).out_atol, sd::tolerance(t.in()).out_atol);
  }
}

}  // namespace
}  // namespace dsv4

// split_combine reference on its own: the fp32 exp2/log2 against <cmath>, hand-computed merges,
// edge rules (empty rows, sinks +-inf, split counts, positions), invariants (rows independent,
// weights summing to one, sink monotonicity, split order in fp64), fp32-order against fp64 within
// the stated tolerance.
#include "dsv4/ref/split_combine.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "dsv4/fixtures/attention_inputs.hpp"
#include "dsv4/fixtures/compare.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/fixtures/seed.hpp"
#include "dsv4/ref/fp32_math.hpp"

namespace dsv4 {
namespace {

namespace sc = ref::split_combine;
using fx::Shape;

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// ULPs between an fp32 value and the exactly rounded fp64 value.
double ulps(float got, double want) {
  const float w = float(want);
  if (got == w) return 0;
  const double unit = std::ldexp(1.0, std::ilogb(w == 0 ? got : w) - 23);
  return std::abs(double(got) - want) / std::max(unit, std::ldexp(1.0, -149));
}

// ---- fp32 exp2 / log2 ---------------------------------------------------------------------

TEST(SplitCombineMath, Exp2WithinTwoUlpOverItsRange) {
  fx::Rng rng(fx::test_seed());
  DSV4_CASE(rng.seed(), "exp2 over [-150, 128)");
  double worst = 0;
  for (int i = 0; i < 400000; ++i) {
    const float x = float(rng.uniform(-150, 128));
    worst = std::max(worst, ulps(f32m::exp2(x), std::exp2(double(x))));
  }
  for (float x = -2; x <= 2; x += 1.0f / 1024)  // integers and halves: the split points
    worst = std::max(worst, ulps(f32m::exp2(x), std::exp2(double(x))));
  EXPECT_LE(worst, 2.0);
  RecordProperty("exp2_worst_ulp", std::to_string(worst));
  for (int k = -126; k < 128; ++k) EXPECT_EQ(f32m::exp2(float(k)), std::ldexp(1.0f, k)) << k;
}

TEST(SplitCombineMath, Log2WithinTwoUlpOverItsRange) {
  fx::Rng rng(fx::test_seed());
  DSV4_CASE(rng.seed(), "log2 over positive fp32 bit patterns");
  double worst = 0;
  for (int i = 0; i < 400000; ++i) {
    const float x = f32_from_bits(uint32_t(rng.range(1, 0x7f7fffff)));
    const double want = std::log2(double(x));
    // Near x = 1 the result is tiny: measure against the absolute unit 2^-24 there.
    const double err = std::abs(double(f32m::log2(x)) - want);
    worst = std::max(worst, std::min(ulps(f32m::log2(x), want), err / std::ldexp(1.0, -24)));
  }
  EXPECT_LE(worst, 2.0);
  RecordProperty("log2_worst_ulp", std::to_string(worst));
  for (int k = -149; k < 128; ++k) EXPECT_EQ(f32m::log2(std::ldexp(1.0f, k)), float(k)) << k;
}

TEST(SplitCombineMath, SpecialValues) {
  EXPECT_EQ(f32m::exp2(-kInf), 0.0f);
  EXPECT_EQ(f32m::exp2(kInf), kInf);
  EXPECT_EQ(f32m::exp2(128.0f), kInf);
  EXPECT_EQ(f32m::exp2(-151.0f), 0.0f);
  EXPECT_EQ(f32m::exp2(-149.0f), std::ldexp(1.0f, -149));
  EXPECT_EQ(f32_bits(f32m::exp2(kNaN)), f32m::kQuietNaN);
  EXPECT_EQ(f32m::log2(0.0f), -kInf);
  EXPECT_EQ(f32m::log2(-0.0f), -kInf);
  EXPECT_EQ(f32m::log2(kInf), kInf);
  EXPECT_EQ(f32_bits(f32m::log2(-1.0f)), f32m::kQuietNaN);
  EXPECT_EQ(f32_bits(f32m::log2(kNaN)), f32m::kQuietNaN);
  EXPECT_EQ(f32m::to_bf16_canonical(f32_from_bits(0xffffffffu)).bits, 0x7fc0);
}

// ---- hand-computed merges -----------------------------------------------------------------

// One batch row, one head, D = 4, n splits of constant vectors.
struct Hand {
  std::vector<float> o, lse, sink;
  std::vector<int32_t> n_splits;
  size_t S;
  sc::Inputs in() const {
    sc::Inputs i;
    i.shape = {1, S, 1, 4};
    i.o = o;
    i.lse = lse;
    i.n_splits = n_splits;
    i.sink = sink;
    return i;
  }
};

Hand hand(std::vector<float> values, std::vector<float> lse, std::vector<float> sink = {}) {
  Hand h;
  h.S = lse.size();
  for (float v : values) h.o.insert(h.o.end(), 4, v);
  h.lse = std::move(lse);
  h.sink = std::move(sink);
  h.n_splits = {int32_t(h.S)};
  return h;
}

std::vector<float> out_values(const sc::Outputs& r) { return fx::to_f32(r.out); }

TEST(SplitCombineHand, TwoSplitsWeighOneToTwo) {
  // lse 0 and 1: weights 1/3 and 2/3; (3 + 2 * 6) / 3 = 5 exactly (a = 0.5, 1; den = 1.5).
  const Hand h = hand({3, 6}, {0, 1});
  const sc::Outputs r = sc::combine_f32(h.in());
  EXPECT_EQ(out_values(r), std::vector<float>(4, 5.0f));
  EXPECT_NEAR(r.lse[0], std::log(3.0), 1e-6);  // log2(1 + 2) in natural units
  EXPECT_EQ(r.errors, 0);
}

TEST(SplitCombineHand, OneSplitPassesThroughRoundedToBf16) {
  Hand h = hand({1.0f + 1.0f / 512}, {5});  // the bf16 tie 1 + 2^-9 rounds to even: 1
  const sc::Outputs r = sc::combine_f32(h.in());
  EXPECT_EQ(out_values(r), std::vector<float>(4, 1.0f));
  EXPECT_FLOAT_EQ(r.lse[0], 5 * float(std::log(2.0)));
}

TEST(SplitCombineHand, FiniteSinkJoinsTheDenominator) {
  // One split, sum 1 (lse 0), value 4; sink 0 = e^0: out = 4 / (1 + 1) = 2; lse excludes it.
  const sc::Outputs r = sc::combine_f32(hand({4}, {0}, {0}).in());
  EXPECT_EQ(out_values(r), std::vector<float>(4, 2.0f));
  EXPECT_EQ(r.lse[0], 0.0f);
  // sink ln 3: out = 4 / (1 + 3) = 1.
  const sc::Outputs r3 = sc::combine_f32(hand({4}, {0}, {float(std::log(3.0))}).in());
  EXPECT_NEAR(bf16_to_f32(r3.out[0]), 1.0, 1.0 / 256);
}

TEST(SplitCombineHand, SinkFarAboveTheScoresStaysFinite) {
  // sink*log2e - m = 100: exp2(sink*log2e - m) would be 2^100; with the max against the sink
  // every term stays in range and out ~ 4 * 2^-100.
  const float sink = 100.0f / f32m::kLog2e;
  const sc::Outputs r = sc::combine_f32(hand({4}, {0}, {sink}).in());
  const sc::OutputsF64 w = sc::combine_f64(hand({4}, {0}, {sink}).in());
  EXPECT_GT(bf16_to_f32(r.out[0]), 0.0f);
  EXPECT_NEAR(bf16_to_f32(r.out[0]) / w.out[0], 1.0, 1.0 / 128);
}

TEST(SplitCombineHand, EmptyRowIsZerosAndPlusInfWhateverTheSink) {
  for (float sink : {0.0f, 5.0f, kInf, -kInf}) {
    SCOPED_TRACE(sink);
    Hand all_empty = hand({kNaN, kNaN}, {-kInf, -kInf}, {sink});
    Hand none = hand({kNaN, kNaN}, {kNaN, kNaN}, {sink});
    none.n_splits = {0};
    Hand negative = none;
    negative.n_splits = {-3};
    for (const Hand* h : {&all_empty, &none, &negative}) {
      const sc::Outputs r = sc::combine_f32(h->in());
      EXPECT_EQ(out_values(r), std::vector<float>(4, 0.0f));
      EXPECT_EQ(r.lse[0], kInf);
      const sc::OutputsF64 w = sc::combine_f64(h->in());
      EXPECT_EQ(w.out, std::vector<double>(4, 0.0));
      EXPECT_EQ(w.lse[0], double(kInf));
    }
  }
}

TEST(SplitCombineHand, PlusInfSinkGivesZerosMinusInfSinkNothing) {
  const Hand base = hand({3, 6}, {0, 1});
  const sc::Outputs plain = sc::combine_f32(base.in());
  const sc::Outputs pinf = sc::combine_f32(hand({3, 6}, {0, 1}, {kInf}).in());
  const sc::Outputs minf = sc::combine_f32(hand({3, 6}, {0, 1}, {-kInf}).in());
  EXPECT_EQ(out_values(pinf), std::vector<float>(4, 0.0f));
  EXPECT_EQ(pinf.lse, plain.lse);  // the lse excludes the sink
  EXPECT_TRUE(fx::bitwise_equal(minf.out, plain.out, Shape{4}));
  EXPECT_EQ(minf.lse, plain.lse);
}

TEST(SplitCombineHand, SplitsPastTheCountAreNotRead) {
  Hand h = hand({3, 6, kNaN}, {0, 1, kNaN});
  h.n_splits = {2};
  EXPECT_EQ(out_values(sc::combine_f32(h.in())), std::vector<float>(4, 5.0f));
  h.n_splits = {7};  // clamped to S = 3: the NaN split is read
  EXPECT_TRUE(std::isnan(out_values(sc::combine_f32(h.in()))[0]));
}

TEST(SplitCombineHand, EmptySplitsContributeNothingWhateverTheirO) {
  const Hand h = hand({3, kNaN, 6}, {0, -kInf, 1});
  EXPECT_EQ(out_values(sc::combine_f32(h.in())), std::vector<float>(4, 5.0f));
}

// The fp64 rotation the split_combine and sparse_decode references share: only the tail moves, each
// pair by its own (cos, sin), with no rounding (the products of 0.1 are not those of any fp32
// rotation).
TEST(InverseRopeF64, RotatesEachPairOfTheTailExactly) {
  std::vector<double> out = {5, 6, 1, 2, 0.1, 3};
  const std::vector<float> cs = {0.0f, 1.0f, 0.5f, -0.25f};  // pair 0: 90 degrees; pair 1: any
  sc::inverse_rope_f64(cs.data(), 4, out.data(), out.size());
  const double c = 0.5, s = -0.25;
  EXPECT_EQ(out, (std::vector<double>{5, 6, 2, -1, 0.1 * c + 3 * s, 3 * c - 0.1 * s}));
}

TEST(SplitCombineHand, InverseRopeRotatesTheTailBack) {
  // D = 4, rope_dim 2: the pair (values 2, 3) = (1, 0) at an angle of 90 degrees (cos 0, sin 1)
  // rotates by -90 degrees to (0, -1); the head (values 0, 1) is untouched.
  Hand h;
  h.S = 1;
  h.o = {7, 8, 1, 0};
  h.lse = {0};
  h.n_splits = {1};
  const std::vector<float> table = {1, 0, 0, 1};  // position 0: angle 0; position 1: 90 degrees
  for (int64_t pos : {int64_t(1), int64_t(0), int64_t(2), int64_t(-1)}) {
    SCOPED_TRACE(pos);
    const std::vector<int64_t> positions = {pos};
    sc::Rope rope{table, positions, 2};
    sc::Inputs in = h.in();
    in.rope = &rope;
    const sc::Outputs r = sc::combine_f32(in);
    const bool ok = pos == 0 || pos == 1;
    const std::vector<float> want =
        pos == 1 ? std::vector<float>{7, 8, 0, -1} : std::vector<float>{7, 8, 1, 0};
    EXPECT_EQ(out_values(r), want);
    EXPECT_EQ(r.errors, ok ? 0 : 1);
    EXPECT_EQ(sc::combine_f64(in).errors, ok ? 0 : 1);
  }
}

TEST(SplitCombineHand, BadSizesNameTheField) {
  Hand h = hand({1}, {0});
  sc::Inputs in = h.in();
  in.shape.D = 6;
  EXPECT_THROW(
      {
        try {
          sc::combine_f32(in);
        } catch (const std::invalid_argument& e) {
          EXPECT_NE(std::string(e.what()).find("D=6"), std::string::npos) << e.what();
          throw;
        }
      },
      std::invalid_argument);
  in = h.in();
  in.shape.H = 2;
  try {
    sc::combine_f32(in);
    ADD_FAILURE() << "no error for o of the wrong size";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("o has 4 values"), std::string::npos) << e.what();
  }
  const std::vector<float> sink = {0, 0};
  in = h.in();
  in.sink = sink;
  EXPECT_THROW(sc::combine_f32(in), std::invalid_argument);
}

// ---- invariants -----------------------------------------------------------------------------

TEST(SplitCombineInvariants, RowsAreIndependent) {
  fx::Rng rng(fx::test_seed());
  const sc::Shape shape{6, 5, 3, 64};
  DSV4_CASE(rng.seed(), "B=6 S=5 H=3 D=64");
  fx::SplitPartials p = fx::split_partials(rng, shape);
  const sc::Outputs before = sc::combine_f32(p.inputs());
  // Change every partial of batch row 2: the other rows keep their bits.
  for (size_t i = 2 * 5 * 3 * 64; i < 3 * 5 * 3 * 64; ++i) p.o[i] += 1.0f;
  for (size_t i = 2 * 5 * 3; i < 3 * 5 * 3; ++i) p.lse[i] -= 1.0f;
  const sc::Outputs after = sc::combine_f32(p.inputs());
  for (size_t b = 0; b < 6; ++b) {
    if (b == 2) continue;
    for (size_t i = b * 3 * 64; i < (b + 1) * 3 * 64; ++i)
      ASSERT_EQ(before.out[i], after.out[i]) << "row " << b << " value " << i;
    for (size_t i = b * 3; i < (b + 1) * 3; ++i) ASSERT_EQ(before.lse[i], after.lse[i]);
  }
}

TEST(SplitCombineInvariants, WeightsSumToOne) {
  // Every split holds the same vector v: the merge is v (fp64 exactly up to rounding; the fp32
  // order within its tolerance), whatever the lse values.
  fx::Rng rng(fx::test_seed());
  DSV4_CASE(rng.seed(), "S=9 D=128, equal partials");
  const size_t S = 9, D = 128;
  const std::vector<float> v = fx::to_f32(fx::uniform_bf16(rng, D, -4, 4));
  std::vector<float> o;
  for (size_t s = 0; s < S; ++s) o.insert(o.end(), v.begin(), v.end());
  const std::vector<float> lse = fx::uniform_f32(rng, S, -30, 30);
  const std::vector<int32_t> n = {int32_t(S)};
  sc::Inputs in;
  in.shape = {1, S, 1, D};
  in.o = o;
  in.lse = lse;
  in.n_splits = n;
  const sc::OutputsF64 w = sc::combine_f64(in);
  for (size_t d = 0; d < D; ++d) EXPECT_NEAR(w.out[d], v[d], 1e-12 * std::abs(v[d]));
  EXPECT_TRUE(fx::close(sc::combine_f32(in).out, v, Shape{D}, {.rtol = sc::kOutRtol}));
}

TEST(SplitCombineInvariants, LargerSinkNeverGrowsTheOutput) {
  fx::Rng rng(fx::test_seed());
  const sc::Shape shape{4, 6, 2, 32};
  DSV4_CASE(rng.seed(), "B=4 S=6 H=2 D=32, sink -20..20");
  fx::SplitPartials p = fx::split_partials(rng, shape, {.sink = true, .rope = false});
  std::vector<float> prev_abs;
  std::vector<double> prev64;
  for (float sink = -20; sink <= 20; sink += 0.5f) {
    std::fill(p.sink.begin(), p.sink.end(), sink);
    const sc::Outputs r = sc::combine_f32(p.inputs());
    const sc::OutputsF64 w = sc::combine_f64(p.inputs());
    std::vector<float> a = out_values(r);
    for (auto& x : a) x = std::abs(x);
    if (!prev_abs.empty())
      for (size_t i = 0; i < a.size(); ++i) {
        if (std::isnan(a[i])) continue;
        ASSERT_LE(a[i], prev_abs[i]) << "value " << i << " at sink " << sink;
        ASSERT_LE(std::abs(w.out[i]), std::abs(prev64[i])) << "fp64 value " << i;
      }
    prev_abs = a;
    prev64 = w.out;
  }
}

TEST(SplitCombineInvariants, Fp64DoesNotDependOnTheSplitOrder) {
  fx::Rng rng(fx::test_seed());
  const sc::Shape shape{3, 8, 2, 16};
  DSV4_CASE(rng.seed(), "B=3 S=8 H=2 D=16, splits reversed");
  fx::SplitPartials p = fx::split_partials(rng, shape, {.empty_split = 0.2, .rope = false});
  std::fill(p.n_splits.begin(), p.n_splits.end(), 8);
  for (auto& l : p.lse)
    if (std::isnan(l)) l = -kInf;
  for (auto& x : p.o)
    if (std::isnan(x)) x = 0;
  const sc::OutputsF64 a = sc::combine_f64(p.inputs());
  fx::SplitPartials q = p;
  for (size_t b = 0; b < 3; ++b)
    for (size_t s = 0; s < 8; ++s)
      for (size_t h = 0; h < 2; ++h) {
        q.lse[(b * 8 + s) * 2 + h] = p.lse[(b * 8 + 7 - s) * 2 + h];
        for (size_t d = 0; d < 16; ++d)
          q.o[((b * 8 + s) * 2 + h) * 16 + d] = p.o[((b * 8 + 7 - s) * 2 + h) * 16 + d];
      }
  const sc::OutputsF64 b = sc::combine_f64(q.inputs());
  EXPECT_TRUE(fx::close(b.out, a.out, Shape{3, 2, 16}, {.atol = 1e-13, .rtol = 1e-12}));
  EXPECT_TRUE(fx::close(b.lse, a.lse, Shape{3, 2}, {.atol = 1e-13, .rtol = 1e-12}));
}

// ---- fp32 order against fp64 ----------------------------------------------------------------

struct AgreeCase {
  sc::Shape shape;
  bool rope;
};

class SplitCombineAgreement : public ::testing::TestWithParam<AgreeCase> {};

TEST_P(SplitCombineAgreement, Fp32OrderWithinStatedTolerance) {
  const AgreeCase c = GetParam();
  fx::Rng rng(fx::test_seed());
  DSV4_CASE(rng.seed(), "B=" << c.shape.B << " S=" << c.shape.S << " H=" << c.shape.H
                             << " D=" << c.shape.D << " rope=" << c.rope);
  const fx::SplitPartials p =
      fx::split_partials(rng, c.shape, {.rope = c.rope, .bad_position = 0.1});
  const sc::Outputs got = sc::combine_f32(p.inputs());
  const sc::OutputsF64 want = sc::combine_f64(p.inputs());
  EXPECT_EQ(got.errors, want.errors);
  fx::Tolerance out_tol = fx::split_combine_tolerance("out", want, int64_t(c.shape.S));
  out_tol.allow_all_zero = false;  // these partials always leave a non-zero row
  EXPECT_TRUE(fx::close(got.out, want.out, Shape{c.shape.B, c.shape.H, c.shape.D}, out_tol,
                        {.name = "out"}));
  fx::Tolerance lse_tol = fx::split_combine_tolerance("out_lse", want, int64_t(c.shape.S));
  lse_tol.allow_all_zero = false;
  EXPECT_TRUE(fx::close(got.lse, want.lse, Shape{c.shape.B, c.shape.H}, lse_tol, {.name = "lse"}));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SplitCombineAgreement,
                         ::testing::Values(AgreeCase{{8, 1, 4, 64}, false},
                                           AgreeCase{{8, 4, 16, 512}, true},
                                           AgreeCase{{12, 16, 8, 512}, true},
                                           AgreeCase{{9, 64, 2, 128}, false},
                                           AgreeCase{{10, 3, 5, 68}, true}),
                         [](const auto& info) {
                           const sc::Shape& s = info.param.shape;
                           return "B" + std::to_string(s.B) + "_S" + std::to_string(s.S) + "_H" +
                                  std::to_string(s.H) + "_D" + std::to_string(s.D) +
                                  (info.param.rope ? "_rope" : "");
                         });

// The one stated tolerance: lse's absolute term grows with the splits past S = 64 (the sum's
// rounding of S terms), out's is the case's largest finite value's; an unknown output is refused.
TEST(SplitCombineTolerance, OneDefinitionWidenedPastSixtyFourSplits) {
  EXPECT_EQ(sc::lse_atol(1), sc::kLseAtol);
  EXPECT_EQ(sc::lse_atol(64), sc::kLseAtol);
  EXPECT_NEAR(sc::lse_atol(300), sc::kLseAtol + 304 * std::ldexp(1.0, -24) / std::log(2.0), 1e-12);
  sc::OutputsF64 want;
  want.out = {0.5, -3.0, std::numeric_limits<double>::infinity()};
  want.lse = {1.0};
  const fx::Tolerance out = fx::split_combine_tolerance("out", want, 300);
  EXPECT_EQ(out.atol, 3.0 * sc::kOutAtolOfMax);
  EXPECT_EQ(out.rtol, sc::kOutRtol);
  EXPECT_EQ(out.max_rel_l2, 4e-3);
  const fx::Tolerance lse = fx::split_combine_tolerance("out_lse", want, 300);
  EXPECT_EQ(lse.atol, sc::lse_atol(300));
  EXPECT_EQ(lse.rtol, sc::kLseRtol);
  try {
    (void)fx::split_combine_tolerance("part_o", want, 4);
    ADD_FAILURE() << "an unknown output was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'part_o'"), std::string::npos) << e.what();
  }
}

// ---- the order of the lse sum, SGLang's unnormalised partials, empty rows through the RoPE --

// lse 0, -24, -24: summed in split order 1 + 2^-24 rounds to 1 and so does the next 2^-24, so
// lse_out is exactly 0 (and den 1, out the first split's value); summed from the last split the
// two 2^-24 meet first and 1 + 2^-23 survives (lse_out = 2^-23 / log2 e, about 8e-8).
TEST(SplitCombineHand, LseSumsTheSplitsInSplitOrder) {
  const Hand h = hand({3, 5, 7}, {0, -24, -24});
  const sc::Outputs r = sc::combine_f32(h.in());
  EXPECT_EQ(r.lse[0], 0.0f);
  EXPECT_EQ(out_values(r), std::vector<float>(4, 3.0f));
  EXPECT_NE(sc::combine_f64(h.in()).lse[0], 0.0);
}

// SGLang's (acc, m, l): one split of lse 3 as m = 1, l = 4, acc = 4 * o; another of lse 0 as
// m = -2, l = 4. Base-2 m (the HIP reducer) gives the normalised merge's bits here (every step
// exact); natural m (SM100) the same values within the fp64 merge; an empty split (l = 0) and
// NaN partials past the count are never read.
TEST(SplitCombineHand, SglangsUnnormalisedPartialsMergeLikeTheNormalisedOnes) {
  const Hand h = hand({3, 6, 0}, {3, 0, -kInf});
  const sc::Outputs want = sc::combine_f32(h.in());
  std::vector<float> acc, m = {1, -2, -kInf}, l = {4, 4, 0};
  for (float v : {12.f, 24.f, kNaN}) acc.insert(acc.end(), 4, v);
  sc::Unnormalised un{acc, m, l, true};
  sc::Inputs in = h.in();
  in.o = {};
  in.lse = {};
  in.un = &un;
  const sc::Outputs got = sc::combine_f32(in);
  EXPECT_EQ(out_values(got), out_values(want));
  EXPECT_NEAR(got.lse[0], want.lse[0], 1e-6);
  std::vector<float> m_nat = {float(1 * std::log(2.0)), float(-2 * std::log(2.0)), -kInf};
  sc::Unnormalised nat{acc, m_nat, l, false};
  in.un = &nat;
  const sc::OutputsF64 f = sc::combine_f64(in);
  const sc::OutputsF64 g = sc::combine_f64(h.in());
  for (size_t d = 0; d < 4; ++d) EXPECT_NEAR(f.out[d], g.out[d], 1e-6);
  EXPECT_NEAR(f.lse[0], g.lse[0], 1e-6);
  for (float x : out_values(sc::combine_f32(in))) EXPECT_NEAR(x, g.out[0], 1.0 / 32);
  // An empty row in SGLang's layout is 0 and lse +inf, not NaN.
  std::vector<float> l0 = {0, 0, 0};
  sc::Unnormalised none{acc, m, l0, true};
  in.un = &none;
  const sc::Outputs e = sc::combine_f32(in);
  EXPECT_EQ(out_values(e), std::vector<float>(4, 0.f));
  EXPECT_EQ(e.lse[0], kInf);
}

// An empty row rotated by the inverse RoPE as SGLang rotates it: at cos -1, sin 0 the odd value
// of a pair is fmaf(0, -1, -(0 * 0)) = -0 (bf16 0x8000); unrotated (the project's kernel) +0.
TEST(SplitCombineHand, EmptyRowThroughTheInverseRopeIsMinusZero) {
  Hand h = hand({1}, {-kInf});
  const std::vector<float> table = {-1, 0};
  const std::vector<int64_t> positions = {0};
  sc::Rope rope{table, positions, 2};
  sc::Inputs in = h.in();
  in.rope = &rope;
  sc::Outputs r = sc::combine_f32(in);
  EXPECT_EQ(r.out[3].bits, 0x0000u);
  in.rotate_empty = true;
  r = sc::combine_f32(in);
  EXPECT_EQ(r.out[2].bits, 0x0000u);
  EXPECT_EQ(r.out[3].bits, 0x8000u);
  EXPECT_EQ(r.out[0].bits, 0x0000u);  // the head is not rotated
  // A +inf sink's zeros likewise.
  Hand s = hand({1}, {0}, {kInf});
  sc::Inputs si = s.in();
  si.rope = &rope;
  si.rotate_empty = true;
  EXPECT_EQ(sc::combine_f32(si).out[3].bits, 0x8000u);
}

}  // namespace
}  // namespace dsv4

// Foreign verdicts: a case whose dsv4.source is not dsv4 (or dsv4-replay --tolerant) is judged as
// SGLang's own tests would judge it (tied indices at a cut-off, either top-p rule at exact
// equality, derived tolerances for values), the project's cases stay bitwise (or --strict), and
// each family's SGLang layout replays: a legal alternative output matches, a wrong one names the
// row and the rule it breaks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "dsv4/cases/candidate_blocks.hpp"
#include "dsv4/cases/indexer_topk.hpp"
#include "dsv4/cases/sampling_renorm.hpp"
#include "dsv4/cases/sparse_decode.hpp"
#include "dsv4/cases/split_combine.hpp"
#include "dsv4/fixtures/case_file.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/fixtures/seed.hpp"
#include "dsv4/ref/split_combine.hpp"
#include "dsv4/replay/replay.hpp"

#include <unistd.h>

namespace dsv4::replay {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

const float kInf = std::numeric_limits<float>::infinity();

class Foreign : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dsv4_foreign_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  Result replay(const fx::Case& c, const std::string& name, Verdict v = Verdict::kAuto) {
    const std::string p = (dir_ / (name + ".safetensors")).string();
    c.write(p);
    Request r{p, "", Mode::kReference};
    r.verdict = v;
    return run(r);
  }
  // A case of `family` with `in` and the stored got.*, written by SGLang.
  static fx::Case sglang_case(const std::string& family, fx::Tensors in, fx::Tensors got) {
    fx::Case c;
    c.family = family;
    c.inputs = std::move(in);
    c.got = std::move(got);
    c.metadata["dsv4.source"] = "sglang";
    return c;
  }
  fs::path dir_;
};

TEST_F(Foreign, SourceDecidesTheVerdictAndFlagsOverrideIt) {
  fx::Case c;
  EXPECT_EQ(case_source(c), "dsv4");
  EXPECT_EQ(verdict_for(c, Verdict::kAuto), Verdict::kStrict);
  c.metadata["dsv4.source"] = "sglang";
  EXPECT_TRUE(foreign_source(c));
  EXPECT_EQ(verdict_for(c, Verdict::kAuto), Verdict::kTolerant);
  EXPECT_EQ(verdict_for(c, Verdict::kStrict), Verdict::kStrict);
  c.metadata["dsv4.source"] = "dsv4";
  EXPECT_EQ(verdict_for(c, Verdict::kTolerant), Verdict::kTolerant);
}

// Row 0 scores 5 once and 2 at four places; K = 3 takes the 5 and two of the four 2s. The
// reference takes the smaller indices (1, 2); SGLang may return any two.
fx::Tensors tied_topk(int select) {
  fx::Tensors in;
  in["scores"] = st::Tensor::of<float>({1, 8}, {0, 2, 2, 5, 2, -kInf, 2, 1});
  in["lens"] = st::Tensor::of<int32_t>({8});
  in["K"] = st::Tensor::scalar<int64_t>(3);
  in["sorted"] = st::Tensor::scalar<int32_t>(1);
  in["select"] = st::Tensor::scalar<int32_t>(select);
  return in;
}

TEST_F(Foreign, IndexerTopkAcceptsAnyTiedIndexAtTheCutOff) {
  fx::Case c = sglang_case("indexer_topk", tied_topk(1),
                           {{"out", st::Tensor::of<int32_t>({1, 3}, {3, 4, 6})}});
  const Result tol = replay(c, "tied");
  EXPECT_EQ(tol.exit_code, 0) << tol.report;
  EXPECT_THAT(tol.report, HasSubstr("source: sglang, verdict: tolerant"));
  const Result strict = replay(c, "tied", Verdict::kStrict);
  EXPECT_EQ(strict.exit_code, 1) << strict.report;
  // Not ascending, a below-cut index, a missing 5: each named.
  c.got["out"] = st::Tensor::of<int32_t>({1, 3}, {4, 3, 6});
  EXPECT_THAT(replay(c, "order").report, HasSubstr("does not ascend"));
  c.got["out"] = st::Tensor::of<int32_t>({1, 3}, {2, 3, 7});
  EXPECT_THAT(replay(c, "below").report, HasSubstr("index 7 scores 1, below the cut-off"));
  c.got["out"] = st::Tensor::of<int32_t>({1, 3}, {1, 2, 4});
  EXPECT_THAT(replay(c, "missing").report, HasSubstr("index 3 scores 5, above the cut-off"));
  // Two -inf keys (2, 5), K = 7 of 8: the dsv4 rule leaves a -1; SGLang's exactly-K rule takes
  // one -inf (either), and its mask step makes it -1 in place.
  fx::Tensors in = tied_topk(1);
  in["scores"] = st::Tensor::of<float>({1, 8}, {0, 2, -kInf, 5, 2, -kInf, 2, 1});
  in["K"] = st::Tensor::scalar<int64_t>(7);
  for (const std::vector<int32_t>& got :
       {std::vector<int32_t>{0, 1, 2, 3, 4, 6, 7}, std::vector<int32_t>{0, 1, 3, 4, 5, 6, 7}}) {
    c = sglang_case("indexer_topk", in, {{"out", st::Tensor::of<int32_t>({1, 7}, got)}});
    EXPECT_EQ(replay(c, "exact_k").exit_code, 0) << replay(c, "exact_k").report;
  }
  c.got["out"] = st::Tensor::of<int32_t>({1, 7}, {0, 1, 3, 4, 6, 7, -1});
  EXPECT_EQ(replay(c, "exact_k_short").exit_code, 1);
  in["select"] = st::Tensor::scalar<int32_t>(2);
  c = sglang_case("indexer_topk", in,
                  {{"out", st::Tensor::of<int32_t>({1, 7}, {0, 1, -1, 3, 4, 6, 7})}});
  EXPECT_EQ(replay(c, "masked").exit_code, 0) << replay(c, "masked").report;
  in["select"] = st::Tensor::scalar<int32_t>(0);
  c = sglang_case("indexer_topk", in,
                  {{"out", st::Tensor::of<int32_t>({1, 7}, {0, 1, 3, 4, 6, 7, -1})}});
  EXPECT_EQ(replay(c, "dsv4").exit_code, 0);
  // Unsorted under the mask step: the reference's own output (-1 in place) replays strictly too.
  in["select"] = st::Tensor::scalar<int32_t>(2);
  in["sorted"] = st::Tensor::scalar<int32_t>(0);
  c = sglang_case("indexer_topk", in, {});
  c.got = find_family("indexer_topk")->reference(c);
  EXPECT_EQ(replay(c, "masked_unsorted", Verdict::kStrict).exit_code, 0);
  EXPECT_EQ(replay(c, "masked_unsorted", Verdict::kTolerant).exit_code, 0);
}

// A sorted paged row without raw output is sorted by slot (SGLang's order); the project's order
// (by raw index) is accepted too.
TEST_F(Foreign, IndexerTopkPagedRowSortedBySlot) {
  fx::Tensors in = tied_topk(1);
  in["page_table"] = st::Tensor::of<int32_t>({1, 4}, {3, 0, 2, 1});  // pages of 2
  in["page_bits"] = st::Tensor::scalar<int32_t>(1);
  in["raw_out"] = st::Tensor::scalar<int32_t>(0);
  // Raw {1, 2, 3} -> slots {7, 0, 1}: by slot 0, 1, 7.
  const fx::Case ref_case = sglang_case("indexer_topk", in, {});
  const Outputs want = find_family("indexer_topk")->reference(ref_case);
  EXPECT_EQ(want.at("out").values<int32_t>(), (std::vector<int32_t>{0, 1, 7}));
  EXPECT_EQ(want.count("raw"), 0u);
  fx::Case c = sglang_case("indexer_topk", in, {{"out", want.at("out")}});
  EXPECT_EQ(replay(c, "slot").exit_code, 0);
  c.got["out"] = st::Tensor::of<int32_t>({1, 3}, {7, 0, 1});  // ascending raw index
  EXPECT_EQ(replay(c, "raw_order").exit_code, 0);
  c.got["out"] = st::Tensor::of<int32_t>({1, 3}, {0, 7, 1});
  EXPECT_EQ(replay(c, "neither").exit_code, 1);
}

// Blocks of 2 over 8 keys: block scores max(0, 2) = 2, max(2, 5) = 5, max(2, -inf) = 2, newest
// +inf; nb = 3 takes the newest, 5 and one of the two 2s (the reference: block 0; here block 2,
// whose keys 3, then two of the 2s at 4 and 6, follow). SGLang publishes in score order, or
// padded with num_blocks.
TEST_F(Foreign, CandidateBlocksNormalisesPublishedListsAndTakesTiedBlocks) {
  fx::Tensors in;
  in["scores"] = st::Tensor::of<float>({1, 8}, {0, 2, 2, 5, 2, -kInf, 2, 1});
  in["lens"] = st::Tensor::of<int32_t>({8});
  in["bs"] = st::Tensor::scalar<int64_t>(2);
  in["nb"] = st::Tensor::scalar<int64_t>(3);
  in["K"] = st::Tensor::scalar<int64_t>(3);
  fx::Case c = sglang_case("candidate_blocks", in,
                           {{"blocks", st::Tensor::of<int32_t>({1, 3}, {3, 1, 2})},
                            {"keys", st::Tensor::of<int32_t>({1, 3}, {6, 3, 4})}});
  const Result r = replay(c, "published");
  EXPECT_EQ(r.exit_code, 0) << r.report;
  EXPECT_EQ(replay(c, "published", Verdict::kStrict).exit_code, 1);
  c.got["blocks"] = st::Tensor::of<int32_t>({1, 3}, {3, 2, 4});  // a block short: 4 is padding
  EXPECT_THAT(replay(c, "short").report, HasSubstr("blocks row 0"));
  // Three keys (two blocks): the third place is padded with num_blocks = 2.
  in["lens"] = st::Tensor::of<int32_t>({3});
  c = sglang_case("candidate_blocks", in,
                  {{"blocks", st::Tensor::of<int32_t>({1, 3}, {1, 0, 2})},
                   {"keys", st::Tensor::of<int32_t>({1, 3}, {0, 1, 2})}});
  EXPECT_EQ(replay(c, "padded").exit_code, 0) << replay(c, "padded").report;
}

// Level one alone (no in.K, the sglang sweep's K = 0): blocks is the only output, judged as a
// published list (score order, num_blocks padding); a wrong block fails; the case reads back
// as K=0 and the reference publishes no keys.
TEST_F(Foreign, CandidateBlocksLevelOneAloneJudgesTheBlocksOnly) {
  fx::Tensors in;
  in["scores"] = st::Tensor::of<float>({1, 8}, {0, 2, 2, 5, 2, -kInf, 2, 1});
  in["lens"] = st::Tensor::of<int32_t>({8});
  in["bs"] = st::Tensor::scalar<int64_t>(2);
  in["nb"] = st::Tensor::scalar<int64_t>(3);
  fx::Case c =
      sglang_case("candidate_blocks", in, {{"blocks", st::Tensor::of<int32_t>({1, 3}, {3, 1, 2})}});
  const Family* fam = find_family("candidate_blocks");
  const Family::Bound b = fam->make(c);
  EXPECT_THAT(b.k->shape_spec(), HasSubstr("K=0"));
  const Outputs want = fam->reference(c);
  EXPECT_EQ(want.count("keys"), 0u);
  // Scores 2, 5, 2, +inf (the newest): 3, 1, and of the tied 0 and 2 the smaller index.
  EXPECT_EQ(want.at("blocks").values<int32_t>(), (std::vector<int32_t>{0, 1, 3}));
  Result r = replay(c, "level_one");
  EXPECT_EQ(r.exit_code, 0) << r.report;
  c.got["blocks"] = st::Tensor::of<int32_t>({1, 3}, {3, 0, 2});  // block 1 (5) left out
  r = replay(c, "level_one_wrong");
  EXPECT_EQ(r.exit_code, 1) << r.report;
  EXPECT_THAT(r.report, HasSubstr("blocks row 0"));
}

// The pad values are exact: -1, the row's block count, or the width's block count (SGLang's
// packed lists pad with num_blocks of the whole score width); any other value past the row's
// blocks is no pad and fails, naming it.
TEST_F(Foreign, CandidateBlocksAcceptsOnlyTheDocumentedPadValues) {
  fx::Tensors in;
  in["scores"] = st::Tensor::of<float>({1, 8}, {0, 2, 2, 5, 2, -kInf, 2, 1});
  in["lens"] = st::Tensor::of<int32_t>({3});  // two blocks of the width's four
  in["bs"] = st::Tensor::scalar<int64_t>(2);
  in["nb"] = st::Tensor::scalar<int64_t>(3);
  in["K"] = st::Tensor::scalar<int64_t>(3);
  auto with_pad = [&](int32_t pad) {
    return sglang_case("candidate_blocks", in,
                       {{"blocks", st::Tensor::of<int32_t>({1, 3}, {1, 0, pad})},
                        {"keys", st::Tensor::of<int32_t>({1, 3}, {0, 1, 2})}});
  };
  for (int32_t pad : {-1, 2, 4}) EXPECT_EQ(replay(with_pad(pad), "pad").exit_code, 0) << pad;
  for (int32_t pad : {3, 5, 7, -2}) {
    const Result r = replay(with_pad(pad), "bad_pad");
    EXPECT_EQ(r.exit_code, 1) << pad;
    EXPECT_THAT(r.report, HasSubstr("entry 2 = " + std::to_string(pad) + " is no block"));
  }
}

// p = 0.75 equals the mass of {0.5, 0.25}: FlashInfer keeps those two, renorm.py one more; a
// foreign output following either rule matches under the default rule, a value moved by 1e-3
// does not.
TEST_F(Foreign, SamplingRenormAcceptsEitherTopPRuleAtExactEquality) {
  fx::Tensors in;
  in["probs"] = st::Tensor::of<float>({1, 4}, {0.125f, 0.5f, 0.125f, 0.25f});
  in["p"] = st::Tensor::of<float>({0.75f});
  const std::vector<float> flashinfer = {0, 2.f / 3, 0, 1.f / 3};
  const std::vector<float> renorm_py = {0.125f, 0.5f, 0.125f, 0.25f};
  for (const auto& got : {flashinfer, renorm_py}) {
    fx::Case c = sglang_case("sampling_renorm", in, {{"out", st::Tensor::of<float>({1, 4}, got)}});
    const Result r = replay(c, "rule");
    EXPECT_EQ(r.exit_code, 0) << r.report;
  }
  fx::Case c =
      sglang_case("sampling_renorm", in, {{"out", st::Tensor::of<float>({1, 4}, renorm_py)}});
  EXPECT_EQ(replay(c, "strict", Verdict::kStrict).exit_code, 1);
  in["top_p_rule"] = st::Tensor::scalar<int32_t>(1);
  c.inputs = in;
  EXPECT_EQ(replay(c, "strict_renorm_py", Verdict::kStrict).exit_code, 0);
  std::vector<float> off = renorm_py;
  off[3] *= 1.001f;
  c.got["out"] = st::Tensor::of<float>({1, 4}, off);
  EXPECT_THAT(replay(c, "off").report, HasSubstr("entry 3"));
  // A mass below p is no legal output: keeping only the 0.5.
  c.got["out"] = st::Tensor::of<float>({1, 4}, {0, 1, 0, 0});
  EXPECT_THAT(replay(c, "short").report, HasSubstr("does not reach p"));
  // SGLang's k clamp: k = 0 keeps the maximum.
  fx::Tensors k;
  k["probs"] = in["probs"];
  k["k"] = st::Tensor::of<int32_t>({0});
  k["k_clamp"] = st::Tensor::scalar<int32_t>(1);
  c = sglang_case("sampling_renorm", k, {{"out", st::Tensor::of<float>({1, 4}, {0, 1, 0, 0})}});
  EXPECT_EQ(replay(c, "clamp").exit_code, 0);
}

// SGLang's unnormalised partials replay within the fp64 merge's tolerance; a NaN in an empty row
// (what SGLang's HIP reducer writes) fails naming it; out_lse may be left out.
TEST_F(Foreign, SplitCombineUnnormalisedLayoutAndTheEmptyRowRule) {
  const uint64_t seed = fx::test_seed();
  cases::SplitCombineShape s{3, 4, 2, 64, {.n_pos = 16}};
  s.unnormalised = true;
  s.rotate_empty = true;
  const cases::SplitCombineCase k(s);
  DSV4_CASE(seed, k.name());
  fx::Rng rng(seed);
  const fx::Tensors in = k.draw(rng);
  ASSERT_TRUE(in.count("acc") && in.count("m") && in.count("l"));
  const cases::SplitView v = cases::split_view_of(in);
  const ref::split_combine::OutputsF64 f = ref::split_combine::combine_f64(v.inputs());
  std::vector<float> out(f.out.begin(), f.out.end());
  st::Tensor t = st::Tensor::of<bf16>({3, 2, 64}, fx::to_bf16(out));
  fx::Case c = sglang_case("split_combine", in, {{"out", t}});
  const Result r = replay(c, "f64");
  EXPECT_EQ(r.exit_code, 0) << r.report;
  EXPECT_NE(replay(c, "f64", Verdict::kStrict).exit_code, 2);
  // Row 0 of batch 0 empty: n_splits 0.
  c.inputs["n_splits"] = st::Tensor::of<int32_t>({0, 4, 4});
  const fx::Tensors want = find_family("split_combine")->reference(c);
  auto bits = want.at("out").values<bf16>();
  bits[5] = f32_to_bf16(std::numeric_limits<float>::quiet_NaN());
  c.got["out"] = st::Tensor::of<bf16>({3, 2, 64}, bits);
  const Result nan = replay(c, "nan");
  EXPECT_EQ(nan.exit_code, 1);
  EXPECT_THAT(nan.report, HasSubstr("aiter_sparse_split_reduce"));
}

// sparse_decode with a v41_fp4 main cache and a v41 extra one, the inverse RoPE on the split
// path: the fp64 reference's output replays as a foreign source.
TEST_F(Foreign, SparseDecodeAnyV41PairingWithInverseRope) {
  const uint64_t seed = fx::test_seed();
  cases::SparseDecodeShape s;
  s.s = {.B = 2,
         .H = 16,
         .K = 16,
         .layout = KvLayout::kV41Fp4,
         .page_size = 16,
         .num_pages = 2,
         .Ke = 8,
         .extra_layout = KvLayout::kV41,
         .extra_page_size = 16,
         .extra_pages = 1};
  s.splits = 2;
  s.rope = true;
  const cases::SparseDecodeCase k(s);
  DSV4_CASE(seed, k.name());
  fx::Rng rng(seed);
  fx::Case c = sglang_case("sparse_decode", k.draw(rng), {});
  const Outputs want = find_family("sparse_decode")->reference(c);
  std::vector<double> o = want.at("out").to_f64("want.out");
  std::vector<float> of(o.begin(), o.end());
  c.got["out"] = st::Tensor::of<bf16>({2, 16, 512}, fx::to_bf16(of));
  const Result r = replay(c, "rope");
  EXPECT_EQ(r.exit_code, 0) << r.report;
  EXPECT_EQ(cases::SparseDecodeCase(c.inputs).cannot_run(), "");
  c.inputs.erase("splits");
  EXPECT_THAT(cases::SparseDecodeCase(c.inputs).cannot_run(), HasSubstr("no inverse RoPE"));
}

// The declared case layout is the reader: each way a case file can miss it is named (exit 2).
TEST_F(Foreign, DeclaredInputsNameWhatDoesNotFit) {
  const fx::Tensors good = tied_topk(1);
  auto refused = [&](fx::Tensors in, const std::string& why) {
    fx::Case c = sglang_case("indexer_topk", std::move(in),
                             {{"out", st::Tensor::of<int32_t>({1, 3}, {1, 2, 3})}});
    const Result r = replay(c, "bad");
    EXPECT_EQ(r.exit_code, 2) << r.report;
    EXPECT_THAT(r.report, HasSubstr(why));
  };
  fx::Tensors in = good;
  in.erase("lens");
  refused(in, "in.lens");
  in = good;
  in["K"] = st::Tensor::scalar<int32_t>(3);
  refused(in, "'in.K' field 'dtype': I32, the indexer_topk case layout reads I64");
  in = good;
  in["lens"] = st::Tensor::of<int32_t>({8, 8});
  refused(in, "B = 2, but in.scores has B = 1");
  in = good;
  in["topp"] = st::Tensor::scalar<float>(0.5f);
  refused(in, "in.topp");
  EXPECT_THAT(cases::describe(cases::IndexerTopkCase::declared_inputs()),
              HasSubstr("in.scores F32[B, stride], in.lens I32[B]"));
}

}  // namespace
}  // namespace dsv4::replay

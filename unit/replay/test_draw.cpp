// dsv4-replay --draw and the round trip of a drawn case: every family's shape parser against its
// vars() over every sweep point, drawn files read back to the same vars, replayed with want.* as
// got.* (match) and with one value changed (MISMATCH naming it), the file's start states and
// metadata, and the refusals with their exit codes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dsv4/cases/candidate_blocks.hpp"
#include "dsv4/cases/compact_pages.hpp"
#include "dsv4/cases/indexer_topk.hpp"
#include "dsv4/cases/kv_store.hpp"
#include "dsv4/cases/ring_layout.hpp"
#include "dsv4/cases/sampling_renorm.hpp"
#include "dsv4/cases/smoke.hpp"
#include "dsv4/cases/sparse_decode.hpp"
#include "dsv4/cases/split_combine.hpp"
#include "dsv4/fixtures/case_file.hpp"
#include "dsv4/gpu/runtime.hpp"
#include "dsv4/replay/replay.hpp"

namespace dsv4::replay {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// ---- the parser of each family's shape: the exact inverse of its vars() ---------------------

// Over every point of every named sweep: the vars' words parse back to the same vars, and to the
// very shape of the point (so --shape redraws what the GPU test launches).
template <class CaseClass>
void expect_every_sweep_point_parses(const std::string& family) {
  using Shape = typename CaseClass::Shape;
  size_t points = 0;
  for (const auto& sweep : CaseClass::sweeps()) {
    const auto all = sweep.points();
    EXPECT_FALSE(all.empty()) << family << " sweep " << sweep.name << " has no point";
    for (const auto& p : all) {
      ++points;
      const fx::Vars v = p.shape.vars();
      const Shape back = fx::shape_from_vars<Shape>(fx::Vars::parse(v.str()), family);
      EXPECT_EQ(back.vars().str(), v.str()) << family << " sweep " << sweep.name;
      EXPECT_TRUE(back.vars() == v) << v.str();
      EXPECT_TRUE(back == p.shape)
          << family << " " << v.str() << ": the parsed shape differs in a field vars() leaves out";
      EXPECT_TRUE(fx::Vars::parse(v.spec()) == v) << v.spec();
    }
  }
  EXPECT_GT(points, 0u) << family;
  EXPECT_TRUE(CaseClass::sweeps().front().name == "gpu") << family << ": the first sweep is gpu";
}

TEST(ShapeVars, SmokeParsesEverySweepPoint) {
  expect_every_sweep_point_parses<cases::SmokeCase>("smoke");
}
TEST(ShapeVars, KvStoreParsesEverySweepPoint) {
  expect_every_sweep_point_parses<cases::KvStoreCase>("kv_store");
}
TEST(ShapeVars, CompactPagesParsesEverySweepPoint) {
  expect_every_sweep_point_parses<cases::CompactPagesCase>("compact_pages");
}
TEST(ShapeVars, RingLayoutParsesEverySweepPoint) {
  expect_every_sweep_point_parses<cases::RingLayoutCase>("ring_layout");
}
TEST(ShapeVars, IndexerTopkParsesEverySweepPoint) {
  expect_every_sweep_point_parses<cases::IndexerTopkCase>("indexer_topk");
}
TEST(ShapeVars, CandidateBlocksParsesEverySweepPoint) {
  expect_every_sweep_point_parses<cases::CandidateBlocksCase>("candidate_blocks");
}
TEST(ShapeVars, SamplingRenormParsesEverySweepPoint) {
  expect_every_sweep_point_parses<cases::SamplingRenormCase>("sampling_renorm");
}
TEST(ShapeVars, SplitCombineParsesEverySweepPoint) {
  expect_every_sweep_point_parses<cases::SplitCombineCase>("split_combine");
}
TEST(ShapeVars, SparseDecodeParsesEverySweepPoint) {
  expect_every_sweep_point_parses<cases::SparseDecodeCase>("sparse_decode");
}

TEST(ShapeVars, MissingKeysKeepTheDefaultsAndBadWordsAreRefusedNamingThem) {
  using S = cases::SamplingRenormShape;
  const S s = fx::shape_from_vars<S>(fx::Vars::parse("V=1025, top-p"), "sampling_renorm");
  EXPECT_EQ(s.B, S{}.B);
  EXPECT_EQ(s.V, 1025);
  EXPECT_TRUE(s.top_p);
  auto refusal = [](const std::string& spec) {
    try {
      (void)fx::shape_from_vars<S>(fx::Vars::parse(spec), "sampling_renorm");
    } catch (const fx::VarsError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_THAT(refusal("B=4,Q=3"), HasSubstr("unknown key 'Q=3'"));
  EXPECT_THAT(refusal("B=4,Q=3"), HasSubstr("keys: B=1, V=1000, top-k|top-p"));
  EXPECT_THAT(refusal("B=four"), HasSubstr("B=four is not an integer"));
  EXPECT_THAT(refusal("top-p=1"), HasSubstr("'top-p' is a flag and takes no value"));
  EXPECT_THAT(refusal("top-k,top-p"), HasSubstr("exclude each other"));
  EXPECT_THAT(refusal("B=1,B=2"), HasSubstr("'B' is given twice"));
  EXPECT_THROW(fx::Vars::parse("=4"), fx::VarsError);
  EXPECT_THROW(fx::Vars::parse("B="), fx::VarsError);
}

// ---- drawn files ----------------------------------------------------------------------------

class DrawnCase : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dsv4_draw_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  struct Cli {
    int code;
    std::string out, err;
  };
  Cli cli(std::vector<std::string> args) {
    args.insert(args.begin(), "dsv4-replay");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    std::ostringstream out, err;
    const int code = main_cli(int(argv.size()), argv.data(), out, err);
    return {code, out.str(), err.str()};
  }
  // Draws `spec` of `family` with the CLI; the one path it printed.
  std::string draw_one(const std::string& family, const std::string& spec) {
    const Cli r = cli({"--draw", family, "--shape", spec, "--seed", "7", "--out", dir_.string()});
    EXPECT_EQ(r.code, 0) << r.err;
    std::istringstream lines(r.out);
    std::string path, extra;
    std::getline(lines, path);
    EXPECT_FALSE(std::getline(lines, extra)) << "one path per point: " << r.out;
    return path;
  }
  fs::path dir_;
};

// One element of `t` changed so that every comparator sees it: floats moved far (a NaN made 0),
// integers and bytes moved by one.
void change_first_value(st::Tensor& t) {
  const size_t n = (st::dtype_bits(t.dtype) + 7) / 8;
  ASSERT_GE(t.data.size(), n);
  switch (t.dtype) {
    case st::DType::F32: {
      float v;
      std::memcpy(&v, t.data.data(), 4);
      v = std::isfinite(v) ? v * 2 + 1000 : 0.f;
      std::memcpy(t.data.data(), &v, 4);
      return;
    }
    case st::DType::F64: {
      double v;
      std::memcpy(&v, t.data.data(), 8);
      v = std::isfinite(v) ? v * 2 + 1000 : 0.0;
      std::memcpy(t.data.data(), &v, 8);
      return;
    }
    case st::DType::BF16: {
      bf16 v;
      std::memcpy(&v, t.data.data(), 2);
      const float f = bf16_to_f32(v);
      v = f32_to_bf16(std::isfinite(f) ? f * 2 + 1000 : 0.f);
      std::memcpy(t.data.data(), &v, 2);
      return;
    }
    case st::DType::I32: {
      int32_t v;
      std::memcpy(&v, t.data.data(), 4);
      v = v < 0 ? 0 : v + 1;
      std::memcpy(t.data.data(), &v, 4);
      return;
    }
    case st::DType::I64: {
      int64_t v;
      std::memcpy(&v, t.data.data(), 8);
      v = v < 0 ? 0 : v + 1;
      std::memcpy(t.data.data(), &v, 8);
      return;
    }
    default:
      t.data[0] ^= 0x5a;
  }
}

// The round trip of item `spec` of `family`: the file reads back to the same vars, with its
// start states and metadata; with got.* = want.* it replays match; with one value of one output
// changed MISMATCH, naming that element.
void expect_round_trip(const fs::path& dir, const std::string& family, const std::string& spec,
                       const std::string& path) {
  SCOPED_TRACE(family + " " + spec);
  const Family* fam = find_family(family);
  ASSERT_NE(fam, nullptr);
  ASSERT_TRUE(fam->drawing);
  const auto drawn = fam->drawing->from_vars(fx::Vars::parse(spec));
  const fx::Vars v = fx::Vars::parse(drawn->shape_spec());  // the missing keys at their defaults
  const fx::Vars given = fx::Vars::parse(spec);
  for (const auto& item : given.items())
    EXPECT_NE(std::find(v.items().begin(), v.items().end(), item), v.items().end())
        << item.first << " given, not drawn";

  fx::Case c = fx::Case::read(path);
  EXPECT_EQ(c.family, family);
  EXPECT_EQ(c.name, v.str());
  EXPECT_EQ(c.metadata.at("dsv4.shape"), v.spec());
  EXPECT_EQ(c.metadata.at("dsv4.source"), "dsv4");
  EXPECT_THAT(c.metadata.at("dsv4.repro"),
              HasSubstr("--draw " + family + " --shape " + v.spec() + " --seed 7"));
  // Case(read(write(c))).vars() == c.vars()
  const Family::Bound b = fam->make(c);
  EXPECT_EQ(b.k->shape_spec(), v.spec()) << "the case read back has other vars";

  // The start states and the outputs' declaration.
  const auto outs = nlohmann::json::parse(c.metadata.at("dsv4.outputs"));
  const auto specs = drawn->outputs(c.inputs);
  ASSERT_EQ(outs.size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const fx::OutputSpec& o = specs[i];
    EXPECT_EQ(outs[i]["name"], o.name);
    ASSERT_EQ(c.start.count(o.name), 1u) << "start." << o.name;
    ASSERT_EQ(c.want.count(o.name), 1u) << "want." << o.name;
    const st::Tensor& s = c.start.at(o.name);
    EXPECT_EQ(s.dtype, o.dtype);
    EXPECT_EQ(s.shape, o.shape);
    EXPECT_EQ(outs[i]["shape"].get<std::vector<uint64_t>>(), o.shape);
    EXPECT_EQ(outs[i]["dtype"], st::dtype_name(o.dtype));
    if (o.init == fx::Init::kFromInput) {
      EXPECT_EQ(outs[i]["start"], "input");
      EXPECT_TRUE(s.data == c.inputs.at(o.name).data) << "start." << o.name << " is in." << o.name;
    } else {
      const uint8_t byte =
          o.init == fx::Init::kZero ? 0 : o.poison.value_or(fx::default_poison(o.dtype));
      EXPECT_EQ(outs[i]["start"], o.init == fx::Init::kZero ? "zero" : "poison");
      for (uint8_t x : s.data) ASSERT_EQ(x, byte) << "start." << o.name;
    }
  }
  const auto vars = nlohmann::json::parse(c.metadata.at("dsv4.vars"));
  for (const auto& [key, value] : v.items()) EXPECT_EQ(vars.at(key), value);

  // got.* = want.*: match.
  c.got = c.want;
  const std::string match = (dir / "match.safetensors").string();
  c.write(match);
  const Result ok = run(Request{.path = match, .family = ""});
  EXPECT_EQ(ok.exit_code, 0) << ok.report;

  // One value of one output changed: MISMATCH naming that element.
  std::string changed;
  for (const fx::OutputSpec& o : specs)
    if (!c.got.at(o.name).data.empty()) {
      changed = o.name;
      break;
    }
  ASSERT_FALSE(changed.empty()) << "no output holds an element";
  change_first_value(c.got.at(changed));
  const std::string bad = (dir / "bad.safetensors").string();
  c.write(bad);
  const Result no = run(Request{.path = bad, .family = ""});
  EXPECT_EQ(no.exit_code, 1) << no.report;
  EXPECT_THAT(no.report, HasSubstr("MISMATCH: got." + changed));
  bool named = false;
  for (const OutputVerdict& o : no.outputs)
    if (o.name == changed) {
      EXPECT_FALSE(o.ok);
      ASSERT_FALSE(o.first.empty()) << o.message;
      for (size_t i : o.first.front().index) EXPECT_EQ(i, 0u) << o.message;
      named = true;
    }
  EXPECT_TRUE(named) << no.report;
}

class RoundTrip : public DrawnCase {
 public:
  void check(const std::string& family, const std::vector<std::string>& specs) {
    for (const std::string& spec : specs)
      expect_round_trip(dir_, family, spec, draw_one(family, spec));
  }
};

TEST_F(RoundTrip, Smoke) { check("smoke", {"n=1000", "n=64,fault=5,at=3"}); }
TEST_F(RoundTrip, KvStore) {
  check("kv_store", {"T=64,R=99,W=64", "T=7,R=13,W=512,lanes=32",
                     "T=16,R=27,W=64,src_stride=128,pool_stride=72,lanes=16,order-sensitive",
                     "T=7,R=13,W=576,lanes=16,any-order"});
}
TEST_F(RoundTrip, CompactPages) {
  check("compact_pages",
        {"quantize,v41,P=64,pages=8,T=300",
         "dequantize_f32,v41_fp4,P=7,pages=215,T=1000,stride=528,variant=1",
         "quantize,v41_fp4,P=64,pages=3,T=100,V=16,variant=1", "quantize,v4,P=2,pages=3,whole"});
}
TEST_F(RoundTrip, RingLayout) {
  check("ring_layout",
        {"n=64", "n=777,V=4,win=8,ring=16,slots=37,max_pos=1048576,first=7,max_request=13"});
}
TEST_F(RoundTrip, IndexerTopk) {
  check("indexer_topk", {"B=4,width=2000,K=512,ragged,sorted,W=32",
                         "B=3,width=1200,stride=1205,K=512,len=1100,pages=2^6,permuted",
                         "B=2,width=1000,K=512,len=900,select=sglang"});
}
TEST_F(RoundTrip, CandidateBlocks) {
  check("candidate_blocks", {"B=5,width=300,len=200,bs=7,nb=16,K=64,W=16",
                             "B=3,width=1000,ragged,bs=64,nb=8,K=128,W=32,hostile",
                             "B=4,width=700,len=650,bs=8,nb=16,K=0,ties"});
}
TEST_F(RoundTrip, SamplingRenorm) {
  check("sampling_renorm", {"B=4,V=1025,top-p,boundary,fused", "B=3,V=2000,softmax,multi-launch",
                            "B=2,V=500,top-k,ties,in-place,k-clamp"});
}
TEST_F(RoundTrip, SplitCombine) {
  check("split_combine",
        {"B=8,S=3,H=2,D=64,sink,rope,weights-per-lane", "B=2,S=4,H=2,D=64,sink,sglang-natural",
         "B=8,S=5,H=2,D=64,sink,rope,order-sensitive", "B=3,S=33,H=7,D=512,sink,sglang-natural"});
}
TEST_F(RoundTrip, SparseDecode) {
  check("sparse_decode",
        {"B=1,H=16,K=64,v41,P=1", "B=4,H=16,K=576,v41,P=64,extra=v41_fp4,Ke=64,Pe=1,S=4,rope",
         "B=2,H=16,K=64,v4,P=16,finite-sinks"});
}

TEST_F(RoundTrip, EveryRegisteredFamilyDraws) {
  const auto names = family_names();
  EXPECT_EQ(names.size(), 9u);
  for (const std::string& n : names) {
    const Family* f = find_family(n);
    ASSERT_TRUE(f->drawing) << n << " draws no cases";
    EXPECT_FALSE(f->drawing->sweeps.empty()) << n;
  }
}

// What the inputs do not say (the kernel variant, the row kind) comes back from dsv4.shape; a file
// without it (a hand-written one) replays with the defaults; a dsv4.shape the inputs contradict is
// refused (exit 2) naming it.
TEST_F(RoundTrip, TheVariantIsReadBackAndAFileWithoutTheShapeKeepsTheDefaults) {
  for (const auto& [family, spec] : std::vector<std::pair<std::string, std::string>>{
           {"sampling_renorm", "B=3,V=2000,softmax,multi-launch"},
           {"split_combine", "B=8,S=3,H=2,D=64,sink,rope,weights-per-lane"}}) {
    fx::Case c = fx::Case::read(draw_one(family, spec));
    const Family* fam = find_family(family);
    EXPECT_EQ(fam->make(c).k->shape_spec(), c.metadata.at("dsv4.shape"));
    EXPECT_THAT(fam->make(c).k->shape_spec(), HasSubstr(spec.substr(spec.rfind(',') + 1)));
    c.metadata.erase("dsv4.shape");
    const std::string spec_without = fam->make(c).k->shape_spec();
    EXPECT_THAT(spec_without, ::testing::Not(HasSubstr(spec.substr(spec.rfind(',') + 1))))
        << "without dsv4.shape the variant takes its default";
    c.got = c.want;
    const std::string plain = (dir_ / "plain.safetensors").string();
    c.write(plain);
    EXPECT_EQ(run(Request{.path = plain, .family = ""}).exit_code, 0);
  }
  fx::Case c = fx::Case::read(draw_one("sampling_renorm", "B=3,V=2000,softmax"));
  c.metadata["dsv4.shape"] = "B=5,V=2000,softmax";
  c.got = c.want;
  const std::string lie = (dir_ / "lie.safetensors").string();
  c.write(lie);
  const Result r = run(Request{.path = lie, .family = ""});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.report, HasSubstr("__metadata__.dsv4.shape"));
  EXPECT_THAT(r.report, HasSubstr("B=5,V=2000,softmax"));
}

// ---- the --draw command line ----------------------------------------------------------------

TEST_F(DrawnCase, ASweepWritesOneFilePerDistinctPointNamedAfterIt) {
  const Cli r = cli({"--draw", "ring_layout", "--sweep", "geometry", "--out", dir_.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto& sweeps = find_family("ring_layout")->drawing->sweeps;
  ASSERT_EQ(sweeps.at(2).name, "geometry");
  const auto points = sweeps.at(2).points();
  EXPECT_EQ(points.size(), cases::ring_layout_geometry_sweep().size());
  const uint64_t seed = fx::case_seeds().front();
  std::string want;
  for (const fx::Vars& v : points) want += drawn_path(dir_.string(), "ring_layout", v, seed) + "\n";
  EXPECT_EQ(r.out, want);
  for (const fx::Vars& v : points)
    EXPECT_TRUE(fs::exists(
        dir_ / ("ring_layout--" + v.id() + "--seed" + std::to_string(seed) + ".safetensors")));
  const Cli list = cli({"--list"});
  EXPECT_THAT(list.out, HasSubstr("geometry (" + std::to_string(points.size()) + ")"));
  EXPECT_THAT(list.out, HasSubstr("shape keys: B=1, S=1, H=1, D=512, [sink]"));
}

TEST_F(DrawnCase, TheDrawnInputsAreWhatTheHarnessLaunchesForTheSeed) {
  const std::string path = draw_one("kv_store", "T=7,R=13,W=512,lanes=32");
  const fx::Case c = fx::Case::read(path);
  const cases::KvStoreCase k(cases::KvStoreShape{.T = 7, .R = 13, .width = 512, .lanes = 32});
  fx::Rng rng(7);
  const fx::Tensors in = k.draw(rng);
  ASSERT_EQ(in.size(), c.inputs.size());
  for (const auto& [n, t] : in) EXPECT_TRUE(c.inputs.at(n) == t) << "in." << n;
  ASSERT_TRUE(c.seed);
  EXPECT_EQ(*c.seed, 7u);
}

TEST_F(DrawnCase, BadUsageExitsTwoNamingTheKeyAndAnUnwritableFileThree) {
  Cli r = cli({"--draw", "sampling_renorm", "--shape", "B=4,Q=3", "--out", dir_.string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown key 'Q=3'"));
  EXPECT_THAT(r.err, HasSubstr("[in-place]"));
  EXPECT_TRUE(r.out.empty());
  r = cli({"--draw", "sampling_renorm", "--shape", "fused=1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("'fused' is a flag"));
  r = cli({"--draw", "sampling_renorm", "--sweep", "nightly"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("sweeps: gpu, hostile, boundary"));
  r = cli({"--draw", "kv_store", "--shape", "T=4,R=8,any-order"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("any-order needs lanes=N"));
  r = cli({"--draw", "no_such_family"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown family"));
  r = cli({"--draw", "smoke", "--seed", "-1"});
  EXPECT_EQ(r.code, 2);
  r = cli({"--draw", "smoke", "--shape", "n=4", "--sweep", "gpu"});
  EXPECT_EQ(r.code, 2);
  r = cli({"--shape", "n=4"});
  EXPECT_EQ(r.code, 2);
  fs::create_directories(dir_);
  const fs::path file = dir_ / "a_file";
  { std::ofstream(file) << "x"; }
  r = cli({"--draw", "smoke", "--out", (file / "sub").string()});
  EXPECT_EQ(r.code, 3) << r.err;
  fs::create_directories(dir_ / "ro");
  fs::permissions(dir_ / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  r = cli({"--draw", "smoke", "--out", (dir_ / "ro").string()});
  if (::geteuid() != 0) {
    EXPECT_EQ(r.code, 3) << r.err;
    EXPECT_THAT(r.err, HasSubstr("cannot write"));
  }
  fs::permissions(dir_ / "ro", fs::perms::owner_all);
}

// ---- --json -----------------------------------------------------------------------------------

TEST_F(DrawnCase, JsonReportsAMatchAMismatchWithCoordinatesABadCaseAndNoGpu) {
  fx::Case c = fx::Case::read(draw_one("sampling_renorm", "B=4,V=1025,top-p,boundary,fused"));
  c.got = c.want;
  const std::string good = (dir_ / "good.safetensors").string();
  c.write(good);
  Cli r = cli({good, "--json"});
  EXPECT_EQ(r.code, 0);
  auto j = nlohmann::json::parse(r.out);  // one JSON object, nothing else on stdout
  EXPECT_EQ(j["verdict"], "match");
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_EQ(j["family"], "sampling_renorm");
  EXPECT_EQ(j["case"], "B=4 V=1025 top-p boundary fused");
  EXPECT_EQ(j["path"], good);
  EXPECT_EQ(j["mode"], "reference");
  EXPECT_EQ(j["source"], "dsv4");
  EXPECT_EQ(j["rule"], "strict");
  EXPECT_THAT(j["rerun"].get<std::string>(), HasSubstr(good + " --family sampling_renorm"));
  EXPECT_THAT(j["redraw"].get<std::string>(), HasSubstr("--draw sampling_renorm --shape"));
  ASSERT_EQ(j["outputs"].size(), 1u);
  EXPECT_EQ(j["outputs"][0]["name"], "out");
  EXPECT_EQ(j["outputs"][0]["comparator"], "bitwise");
  EXPECT_EQ(j["outputs"][0]["ok"], true);
  EXPECT_EQ(j["outputs"][0]["checked"], 4 * 1025);
  EXPECT_EQ(j["outputs"][0]["mismatched"], 0);

  auto out = c.got.at("out").values<float>();
  out[1025 + 7] = std::numeric_limits<float>::quiet_NaN();  // row 1, entry 7
  out[2 * 1025 + 3] = 0.25f;
  c.got["out"] = st::Tensor::of<float>({4, 1025}, out);
  const std::string bad = (dir_ / "bad.safetensors").string();
  c.write(bad);
  r = cli({bad, "--json"});
  EXPECT_EQ(r.code, 1);
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "mismatch");
  const auto& o = j["outputs"][0];
  EXPECT_EQ(o["ok"], false);
  EXPECT_EQ(o["mismatched"], 2);
  ASSERT_EQ(o["first"].size(), 2u);
  EXPECT_EQ(o["first"][0]["index"], (std::vector<size_t>{1, 7}));
  EXPECT_EQ(o["first"][0]["got"], "nan");
  EXPECT_EQ(o["first"][1]["index"], (std::vector<size_t>{2, 3}));
  EXPECT_EQ(o["first"][1]["got"], 0.25);
  EXPECT_THAT(o["message"].get<std::string>(), HasSubstr("2 of 4100 elements differ"));

  const std::string junk = (dir_ / "junk.safetensors").string();
  { std::ofstream(junk) << "not a safetensors file"; }
  r = cli({junk, "--json"});
  EXPECT_EQ(r.code, 2);
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "bad_case");
  EXPECT_EQ(j["exit_code"], 2);
  EXPECT_THAT(j["error"].get<std::string>(), HasSubstr("malformed case file"));
  r = cli({"--json"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(nlohmann::json::parse(r.out)["verdict"], "bad_case");

  if (gpu::available()) GTEST_SKIP() << "a GPU answers: --device runs";
  r = cli({good, "--device", "--json"});
  EXPECT_EQ(r.code, 3);
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "could_not_run");
  EXPECT_EQ(j["mode"], "device");
  EXPECT_THAT(j["error"].get<std::string>(), HasSubstr("--device needs a GPU"));
}

// A row verdict (a foreign source's tie-tolerant selection) gives its rows as coordinates.
TEST_F(DrawnCase, JsonOfARowVerdictNamesTheRow) {
  fx::Case c = fx::Case::read(draw_one("indexer_topk", "B=3,width=1000,K=512,len=900"));
  c.got = c.want;
  auto out = c.got.at("out").values<int32_t>();
  out[2 * 512 + 5] = 999;  // row 2: an index past the row's length
  c.got["out"] = st::Tensor::of<int32_t>({3, 512}, out);
  c.metadata["dsv4.source"] = "sglang";
  const std::string bad = (dir_ / "row.safetensors").string();
  c.write(bad);
  const Cli r = cli({bad, "--json"});
  EXPECT_EQ(r.code, 1);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["rule"], "tolerant");
  EXPECT_EQ(j["outputs"][0]["mismatched"], 1);
  EXPECT_EQ(j["outputs"][0]["first"][0]["index"], (std::vector<size_t>{2}));
}

}  // namespace
}  // namespace dsv4::replay

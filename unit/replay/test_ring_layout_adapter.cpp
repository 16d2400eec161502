// dsv4-replay's ring_layout adapter: drawn cases of every geometry replay through the reference,
// a changed row is reported with its coordinates, a case of one launcher alone, refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "dsv4/cases/ring_layout.hpp"
#include "dsv4/fixtures/seed.hpp"
#include "dsv4/replay/replay.hpp"

#include <unistd.h>

namespace dsv4::replay {
namespace {

namespace fs = std::filesystem;
using cases::RingLayoutCase;
using cases::RingLayoutShape;
using ::testing::HasSubstr;

// A ring_layout case holding only the geometry scalars.
fx::Case geometry(int64_t ring, int64_t win, int64_t n_slots) {
  fx::Case c;
  c.family = "ring_layout";
  c.inputs["ring"] = st::Tensor::scalar<int64_t>(ring);
  c.inputs["win"] = st::Tensor::scalar<int64_t>(win);
  c.inputs["n_slots"] = st::Tensor::scalar<int64_t>(n_slots);
  return c;
}

class RingLayoutAdapter : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dsv4_replay_ring_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  Result replay(const fx::Case& c, const std::string& name) {
    const std::string p = (dir_ / (name + ".safetensors")).string();
    c.write(p);
    return run({p, "", Mode::kReference});
  }
  fs::path dir_;
};

// Every geometry the GPU sweep uses: the drawn case reads back as the same case (its outputs and
// name), its reference counts errors, and the case file replays to a match.
TEST_F(RingLayoutAdapter, DrawnCasesOfEveryGeometryReplayToAMatch) {
  const uint64_t seed = fx::test_seed();
  for (int64_t win : {1, 125, 512})
    for (int64_t V : {1, 4, 8}) {
      const RingLayoutShape s{.n = 257,
                              .V = V,
                              .win = win,
                              .ring = win + V + 2,
                              .n_slots = 37,
                              .max_pos = int64_t(1) << 20,
                              .first_offset = 5,
                              .max_request = 3 * V + 1};
      DSV4_CASE(seed, s.str());
      fx::Rng rng(seed);
      const RingLayoutCase k(s);
      fx::Case c{"ring_layout", k.name(), seed, k.draw(rng), {}, {}, {}};
      c.got = k.reference(c.inputs);
      EXPECT_GT(c.got.at("errors").item<int64_t>(), 0) << "hostile entries are counted";
      const RingLayoutCase back(c.inputs);
      EXPECT_EQ(back.outputs(c.inputs).size(), k.outputs(c.inputs).size());
      EXPECT_EQ(back.shape().ring_size(), s.ring_size());
      EXPECT_EQ(c.inputs.at("prefill_indptr").values<int32_t>()[0], 5);
      const Result r = replay(c, "ok");
      EXPECT_EQ(r.exit_code, 0) << r.report;
    }
}

TEST_F(RingLayoutAdapter, ChangedRowIsReportedWithItsCoordinates) {
  fx::Rng rng(fx::test_seed());
  const RingLayoutCase k({.n = 64});
  fx::Case c{"ring_layout", k.name(), std::nullopt, k.draw(rng), {}, {}, {}};
  c.got = k.reference(c.inputs);
  auto rows = fx::values_of<int32_t>(c.got.at("rows"));
  rows[3] ^= 1;
  const Result r = replay(c, "bad");
  EXPECT_EQ(r.exit_code, 1) << r.report;
  EXPECT_THAT(r.mismatches.at("rows"), HasSubstr("[3] got"));
}

// A case from elsewhere may hold one launcher's inputs only (here verify_locs).
TEST_F(RingLayoutAdapter, OneLauncherAlone) {
  fx::Case c = geometry(128, 125, 4);
  c.inputs["batch_slot"] = st::Tensor::of(std::vector<int64_t>{2, -1});
  c.inputs["verify_pos"] = st::Tensor::of<int64_t>({2, 2}, {130, 131, 5, 6});
  c.inputs["commit_len"] = st::Tensor::of(std::vector<int32_t>{1, 2});
  c.got["verify_loc"] = st::Tensor::of<int64_t>({2, 2}, {2 * 128 + 2, -1, -1, -1});
  c.got["errors"] = st::Tensor::scalar<int64_t>(0);
  const Result r = replay(c, "verify");
  EXPECT_EQ(r.exit_code, 0) << r.report;
}

// window_rows' fill variant is part of the shape (variant=N) and of the case file (in.variant):
// a drawn case reads back with it and replays to a match; a variant no fill has exits 2 naming
// the field.
TEST_F(RingLayoutAdapter, FillVariantTravelsInTheCaseFile) {
  const RingLayoutShape s{.n = 300, .launcher = "window_rows", .variant = 2};
  EXPECT_THAT(s.str(), HasSubstr("variant=2"));
  fx::Rng rng(fx::test_seed());
  const RingLayoutCase k(s);
  fx::Case c{"ring_layout", k.name(), std::nullopt, k.draw(rng), {}, {}, {}};
  ASSERT_TRUE(c.inputs.count("variant"));
  EXPECT_EQ(c.inputs.at("variant").item<int32_t>(), 2);
  EXPECT_EQ(RingLayoutCase(c.inputs).shape().variant, 2);
  c.got = k.reference(c.inputs);
  Result r = replay(c, "variant");
  EXPECT_EQ(r.exit_code, 0) << r.report;
  c.inputs["variant"] = st::Tensor::scalar<int32_t>(5);
  r = replay(c, "badvariant");
  EXPECT_EQ(r.exit_code, 2) << r.report;
  EXPECT_THAT(r.report, HasSubstr("in.variant"));
  EXPECT_THAT(r.report, HasSubstr("5 is not 0"));
}

TEST_F(RingLayoutAdapter, CasesThatDoNotFitExitTwo) {
  fx::Case c = geometry(4, 6, 1);
  c.got["errors"] = st::Tensor::scalar<int64_t>(0);
  Result r = replay(c, "ring");
  EXPECT_EQ(r.exit_code, 2) << r.report;
  EXPECT_THAT(r.report, HasSubstr("ring=4"));
  c.inputs.erase("win");
  r = replay(c, "nowin");
  EXPECT_EQ(r.exit_code, 2) << r.report;
  EXPECT_THAT(r.report, HasSubstr("in.win"));
}

}  // namespace
}  // namespace dsv4::replay

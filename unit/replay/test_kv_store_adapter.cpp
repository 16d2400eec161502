// dsv4-replay's kv_store adapter: the case layout, both variants against the reference, the
// error counter as an output, and the bound used for another implementation's fused store.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "dsv4/cases/kv_store.hpp"
#include "dsv4/fixtures/case_file.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/fixtures/seed.hpp"
#include "dsv4/gpu/runtime.hpp"
#include "dsv4/ref/kv_store.hpp"
#include "dsv4/replay/replay.hpp"

#include <unistd.h>

namespace dsv4::replay {
namespace {

namespace fs = std::filesystem;
namespace ref = ::dsv4::ref::kv_store;
using ::testing::HasSubstr;

constexpr size_t kT = 6, kRows = 8, kWidth = 64, kPoolStride = 72;

class KvStoreAdapter : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dsv4_replay_kv_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    seed_ = fx::test_seed();
    fx::Rng rng(seed_);
    c_ = fx::Case{};
    c_.family = "kv_store";
    c_.inputs["kv"] = st::Tensor::of<bf16>({kT, kWidth}, fx::uniform_bf16(rng, kT * kWidth, -2, 2));
    // Hostile slots: valid, -1 (skipped), another negative, R and 2^31-1 (rejected, counted).
    c_.inputs["loc"] =
        st::Tensor::of(std::vector<int64_t>{3, -1, 0, int64_t(kRows), -7, int64_t(2147483647)});
    std::vector<bf16> pool(kRows * kPoolStride, bf16{0x7fc1});  // NaN poison, gaps included
    c_.inputs["pool"] = st::Tensor::of<bf16>({kRows, kPoolStride}, pool);
    c_.inputs["width"] = st::Tensor::scalar<int64_t>(kWidth);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void add_norm_rope(bool lanes) {
    fx::Rng rng(seed_ + 1);
    c_.inputs["weight"] = st::Tensor::of(fx::uniform_f32(rng, kWidth, 0.5f, 1.5f));
    c_.inputs["cos_sin"] = st::Tensor::of<float>({16, ref::kRopeDim}, ref::rope_table(16, 64));
    c_.inputs["positions"] = st::Tensor::of(std::vector<int64_t>{5, 0, 15, 2, 1, 3});
    c_.inputs["eps"] = st::Tensor::scalar(1e-6f);
    if (lanes) c_.inputs["lanes"] = st::Tensor::scalar<int32_t>(16);
  }

  Result replay_with(const st::Tensor& pool, int64_t errors, const std::string& name) {
    fx::Case c = c_;
    c.got["pool"] = pool;
    c.got["errors"] = st::Tensor::scalar(errors);
    const std::string p = (dir_ / (name + ".safetensors")).string();
    c.write(p);
    return run({p, "", Mode::kReference});
  }
  Outputs reference() const { return find_family("kv_store")->reference(c_); }

  fs::path dir_;
  uint64_t seed_ = 0;
  fx::Case c_;
};

TEST_F(KvStoreAdapter, ScatterReferenceWritesValidRowsAndCountsRejections) {
  DSV4_CASE(seed_, "T=" << kT << " R=" << kRows << " width=" << kWidth);
  const Outputs out = reference();
  EXPECT_EQ(out.at("errors").item<int64_t>(), 2) << "loc R and 2^31-1 are rejected";
  const auto pool = out.at("pool").values<bf16>();
  const auto kv = c_.inputs.at("kv").values<bf16>();
  for (size_t j = 0; j < kWidth; ++j) {
    EXPECT_EQ(pool[3 * kPoolStride + j].bits, kv[0 * kWidth + j].bits) << j;
    EXPECT_EQ(pool[0 * kPoolStride + j].bits, kv[2 * kWidth + j].bits) << j;
  }
  EXPECT_EQ(pool[3 * kPoolStride + kWidth].bits, 0x7fc1) << "the stride gap stays untouched";
  EXPECT_EQ(pool[1 * kPoolStride].bits, 0x7fc1) << "unnamed rows stay untouched";

  Result r = replay_with(out.at("pool"), 2, "scatter_ok");
  EXPECT_EQ(r.exit_code, 0) << r.report;
}

TEST_F(KvStoreAdapter, ScatterMismatchAndWrongErrorCountAreReported) {
  DSV4_CASE(seed_, "T=" << kT);
  const Outputs out = reference();
  st::Tensor bad = out.at("pool");
  auto v = bad.values<bf16>();
  v[3 * kPoolStride + 5].bits ^= 1;       // a written value one ULP off
  v[1 * kPoolStride + 0] = bf16{0x0000};  // a row nobody writes, written
  bad = st::Tensor::of<bf16>(bad.shape, v);
  const Result r = replay_with(bad, 1, "scatter_bad");
  EXPECT_EQ(r.exit_code, 1) << r.report;
  EXPECT_THAT(r.mismatches.at("pool"),
              HasSubstr("pool [8, 72]: 2 of 576 elements differ bitwise; first at [1, 0]"));
  EXPECT_THAT(r.mismatches.at("pool"), HasSubstr("[3, 5] got"));
  EXPECT_THAT(r.mismatches.at("errors"), HasSubstr("[0] got 1 (0x0000000000000001) want 2"));
}

TEST_F(KvStoreAdapter, FusedWithLanesIsBitwise) {
  add_norm_rope(true);
  DSV4_CASE(seed_, "fused T=" << kT << " lanes=16");
  const Outputs out = reference();
  EXPECT_EQ(out.at("errors").item<int64_t>(), 2);
  EXPECT_EQ(replay_with(out.at("pool"), 2, "fused_ok").exit_code, 0);
  auto v = out.at("pool").values<bf16>();
  v[0 * kPoolStride + 63].bits += 1;  // the last RoPE value of the row loc 0 holds
  const Result r = replay_with(st::Tensor::of<bf16>(out.at("pool").shape, v), 2, "fused_bad");
  EXPECT_EQ(r.exit_code, 1) << r.report;
  EXPECT_THAT(r.mismatches.at("pool"), HasSubstr("1 of 576 elements differ bitwise; first at "
                                                 "[0, 63]"));
}

// A case saved from another implementation (no in.lanes): each written value rounded from the
// fp64 result passes; one off by 0.125 fails the stated bound; a value outside the written rows
// must still match bit for bit.
TEST_F(KvStoreAdapter, FusedFromAnotherImplementationIsHeldToTheBound) {
  add_norm_rope(false);
  DSV4_CASE(seed_, "fused T=" << kT << " fp64-rounded");
  const Outputs out = reference();
  auto v = out.at("pool").values<bf16>();
  const auto kv = c_.inputs.at("kv").values<bf16>();
  const auto w = c_.inputs.at("weight").values<float>();
  const auto cs = c_.inputs.at("cos_sin").values<float>();
  const auto pos = c_.inputs.at("positions").values<int64_t>();
  ref::NormRope p;
  p.weight = w;
  p.cos_sin = cs;
  p.positions = pos;
  ref::RowLayout layout;
  layout.width = kWidth;
  const auto f64 = ref::norm_rope_rows_f64(kv, kT, layout, p);
  for (const auto& [t, l] : std::vector<std::pair<size_t, size_t>>{{0, 3}, {2, 0}})
    for (size_t j = 0; j < kWidth; ++j)
      v[l * kPoolStride + j] = f32_to_bf16(float(f64[t * kWidth + j]));
  const auto shape = out.at("pool").shape;
  Result r = replay_with(st::Tensor::of<bf16>(shape, v), 2, "other_ok");
  EXPECT_EQ(r.exit_code, 0) << r.report;

  auto off = v;
  off[3 * kPoolStride + 10] = f32_to_bf16(float(f64[10]) + 0.125f);
  r = replay_with(st::Tensor::of<bf16>(shape, off), 2, "other_off");
  EXPECT_EQ(r.exit_code, 1) << r.report;
  EXPECT_THAT(r.mismatches.at("pool"), HasSubstr("pool (written rows vs fp64)"));
  EXPECT_THAT(r.mismatches.at("pool"), HasSubstr("1 of 128 elements exceed"));

  auto stray = v;
  stray[5 * kPoolStride + 1] = bf16{0};
  r = replay_with(st::Tensor::of<bf16>(shape, stray), 2, "other_stray");
  EXPECT_EQ(r.exit_code, 1) << r.report;
  EXPECT_THAT(r.mismatches.at("pool"), HasSubstr("pool (values no row writes)"));
}

TEST_F(KvStoreAdapter, MalformedCasesExitTwo) {
  c_.inputs["loc"] = st::Tensor::of(std::vector<int64_t>{1, 2});  // T=6 rows, 2 locs
  c_.got["pool"] = c_.inputs["pool"];
  c_.write((dir_ / "short_loc.safetensors").string());
  Result r = run({(dir_ / "short_loc.safetensors").string(), "", Mode::kReference});
  EXPECT_EQ(r.exit_code, 2) << r.report;
  EXPECT_THAT(r.report, HasSubstr("tensor 'in.loc' field 'shape'"));

  SetUp();
  c_.inputs["width"] = st::Tensor::scalar<int64_t>(80);  // wider than the pool's stride 72
  c_.got["pool"] = c_.inputs["pool"];
  c_.write((dir_ / "wide.safetensors").string());
  r = run({(dir_ / "wide.safetensors").string(), "", Mode::kReference});
  EXPECT_EQ(r.exit_code, 2) << r.report;
  EXPECT_THAT(r.report, HasSubstr("does not fit the family"));

  SetUp();
  add_norm_rope(false);
  c_.inputs.erase("positions");
  c_.got["pool"] = c_.inputs["pool"];
  c_.write((dir_ / "no_pos.safetensors").string());
  r = run({(dir_ / "no_pos.safetensors").string(), "", Mode::kReference});
  EXPECT_EQ(r.exit_code, 2) << r.report;
  EXPECT_THAT(r.report, HasSubstr("tensor 'in.positions' field 'missing'"));
}

// An order-sensitive draw: the stored pool under the case's lane count differs from the pool under
// some other lane count, so a golden file of it pins the kernel's summation order.
TEST(KvStoreCaseDraw, OrderSensitiveRowsPinTheLaneCount) {
  const uint64_t seed = fx::test_seed();
  for (int lanes : {16, 32}) {
    const cases::KvStoreCase k(
        {.T = 8, .R = 12, .width = 512, .lanes = lanes, .order_sensitive = true});
    DSV4_CASE(seed, k.name());
    fx::Rng rng(seed);
    fx::Tensors in = k.draw(rng);
    const auto want = k.reference(in).at("pool");
    int differing = 0;
    for (int other : {1, 2, 4, 8, 16, 32, 64}) {
      if (other == lanes) continue;
      in["lanes"] = st::Tensor::scalar<int32_t>(other);
      differing +=
          !fx::bitwise_tensors(cases::KvStoreCase(in).reference(in).at("pool"), want, "pool");
    }
    EXPECT_GT(differing, 0);
  }
}

// "any-order" (the sglang sweep): the fused store drawn without in.lanes. Another lane count's
// pool (which differs from want.pool bit for bit: order-sensitive rows) matches within the fp64
// bound, the same pool with in.lanes fails, one written value off by 0.125 fails; the file reads
// back to the same vars.
TEST(KvStoreCaseDraw, AnyOrderCaseIsJudgedWithinTheFp64Bound) {
  const uint64_t seed = fx::test_seed();
  const cases::KvStoreCase k(
      {.T = 8, .R = 12, .width = 512, .lanes = 32, .order_sensitive = true, .any_order = true});
  DSV4_CASE(seed, k.name());
  EXPECT_THAT(k.name(), HasSubstr("any-order"));
  fx::Rng rng(seed);
  const fx::Tensors in = k.draw(rng);
  ASSERT_EQ(in.count("lanes"), 0u);
  ASSERT_EQ(in.count("weight"), 1u);
  const st::Tensor want = k.reference(in).at("pool");
  st::Tensor other_pool;  // the pool of another lane count that differs from want.pool
  for (int lanes : {1, 2, 4, 8, 16, 64}) {
    fx::Tensors other = in;
    other["lanes"] = st::Tensor::scalar<int32_t>(lanes);
    other_pool = cases::KvStoreCase(other).reference(other).at("pool");
    if (!fx::bitwise_tensors(other_pool, want, "pool")) break;
  }
  ASSERT_FALSE(fx::bitwise_tensors(other_pool, want, "pool")) << "order-sensitive rows";

  const fs::path dir = fs::temp_directory_path() / ("dsv4_kv_any_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto verdict = [&](const fx::Tensors& inputs, const st::Tensor& pool, const std::string& name) {
    fx::Case c;
    c.family = "kv_store";
    c.inputs = inputs;
    c.got["pool"] = pool;
    c.got["errors"] = k.reference(in).at("errors");
    const std::string p = (dir / (name + ".safetensors")).string();
    c.write(p);
    return run({p, "", Mode::kReference});
  };
  Result r = verdict(in, other_pool, "other_lanes");
  EXPECT_EQ(r.exit_code, 0) << r.report;
  fx::Tensors pinned = in;
  pinned["lanes"] = st::Tensor::scalar<int32_t>(32);
  EXPECT_EQ(verdict(pinned, other_pool, "pinned").exit_code, 1);
  const auto loc = in.at("loc").values<int64_t>();
  const auto pos = in.at("positions").values<int64_t>();
  const size_t n_pos = in.at("cos_sin").shape[0];
  size_t slot = 12;  // a slot some row writes
  for (size_t t = 0; t < loc.size() && slot == 12; ++t)
    if (loc[t] >= 0 && loc[t] < 12 && pos[t] >= 0 && size_t(pos[t]) < n_pos) slot = size_t(loc[t]);
  ASSERT_LT(slot, 12u);
  auto off = other_pool.values<bf16>();
  off[slot * 512 + 10] = f32_to_bf16(bf16_to_f32(off[slot * 512 + 10]) + 0.125f);
  r = verdict(in, st::Tensor::of<bf16>(other_pool.shape, off), "off");
  EXPECT_EQ(r.exit_code, 1) << r.report;
  EXPECT_THAT(r.report, HasSubstr("pool (written rows vs fp64)"));

  fx::Case c;
  c.family = "kv_store";
  c.inputs = in;
  c.metadata["dsv4.shape"] = k.shape_spec();
  EXPECT_EQ(find_family("kv_store")->make(c).k->shape_spec(), k.shape_spec());
  c.inputs["lanes"] = st::Tensor::scalar<int32_t>(32);  // contradicts any-order
  EXPECT_THROW(find_family("kv_store")->make(c), st::FormatError);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dsv4::replay

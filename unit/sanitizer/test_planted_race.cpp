// sparse_decode built without the barrier after its first key tile is staged in shared memory:
// the plain check of the harness passes (the race rarely changes a bit), racecheck must not.
#include <gtest/gtest.h>

#include "dsv4/cases/sparse_decode.hpp"
#include "dsv4/fixtures/gpu_test.hpp"

namespace dsv4 {
namespace {

class PlantedRace : public fx::GpuTest {};

cases::SparseDecodeShape shape(size_t B, size_t H, size_t K, int64_t splits) {
  cases::SparseDecodeShape s;
  s.s = {.B = B, .H = H, .K = K, .page_size = 64, .num_pages = int64_t(2 * K / 64 + 2)};
  s.splits = splits;
  return s;
}

TEST_F(PlantedRace, SparseDecodeWithoutItsStagingBarrierPassesThePlainCheck) {
  for (const auto& s : {shape(1, 16, 64, 0), shape(2, 64, 576, 0)})
    fx::expect_case(cases::SparseDecodeCase(s), stream());
}

}  // namespace
}  // namespace dsv4

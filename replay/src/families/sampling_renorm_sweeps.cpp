// sampling_renorm's named sweeps: the GPU test's shapes, which dsv4-replay --draw draws too.
#include "dsv4/cases/sampling_renorm.hpp"

namespace dsv4::cases {
namespace {

using fx::Launch;
using kernels::sampling_renorm::Variant;
using Point = fx::Sweep<SamplingRenormShape>;

std::vector<Point> gpu_points_of(std::initializer_list<RowKind> kinds) {
  std::vector<Point> v;
  for (const Point& p : sampling_renorm_gpu_sweep())
    for (RowKind k : kinds)
      if (p.shape.rows == k) v.push_back(p);
  return v;
}

}  // namespace

std::vector<Point> sampling_renorm_gpu_sweep() {
  std::vector<Point> v;
  // Rows over several blocks: once per variant (the others run kAuto).
  auto both = [&v](SamplingRenormShape s, Launch l = Launch::kEager) {
    for (Variant x : {Variant::kFused, Variant::kMultiLaunch}) {
      s.variant = x;
      v.push_back({s, l});
    }
  };
  for (bool top_p : {false, true}) {
    for (int64_t V : {1, 2, 7, 1000, 1024, 1025, 4099, 129280, 262144})
      for (int64_t B : {1, 5}) {
        if (B == 1 && V >= 129280)
          both({.B = B, .V = V, .top_p = top_p});
        else
          v.push_back({{.B = B, .V = V, .top_p = top_p}});
      }
    for (RowKind k :
         {RowKind::kSoftmax, RowKind::kTies, RowKind::kEqual, RowKind::kOneHot, RowKind::kZero})
      v.push_back({{.B = 8, .V = 32000, .top_p = top_p, .rows = k}});
    both({.B = 8, .V = 32000, .top_p = top_p, .rows = RowKind::kHostile});
    both({.B = 64, .V = 129280, .top_p = top_p});
    // Small batches of long rows: several blocks per row (the multi-block passes), ragged k or p.
    for (int64_t V : {129280, 262144})
      for (int64_t B : {2, 3}) both({.B = B, .V = V, .top_p = top_p});
    both({.B = 3, .V = 262144, .top_p = top_p, .rows = RowKind::kSoftmax});
    both({.B = 2, .V = 129280, .top_p = top_p, .rows = RowKind::kTies});
    both({.B = 3, .V = 129280, .top_p = top_p}, Launch::kGraph);
    // Many rows of several chunks: one block per row over every chunk.
    v.push_back({{.B = 520, .V = 5000, .top_p = top_p}});
    v.push_back({{.B = 6, .V = 3000, .top_p = top_p}, Launch::kGraph});
    // Rows on the top-p boundary and rows whose kept sum depends on its order (golden-sized).
    v.push_back({{.B = 4, .V = 1025, .top_p = top_p, .rows = RowKind::kBoundary}});
  }
  return v;
}

std::vector<Point> sampling_renorm_hostile_sweep() {
  return gpu_points_of({RowKind::kHostile, RowKind::kZero});
}

std::vector<Point> sampling_renorm_boundary_sweep() { return gpu_points_of({RowKind::kBoundary}); }

std::vector<Point> sampling_renorm_soak_sweep() {
  std::vector<Point> v;
  for (bool top_p : {false, true}) {
    v.push_back({{.B = 64, .V = 129280, .top_p = top_p, .rows = RowKind::kSoftmax}});
    v.push_back({{.B = 1, .V = 129280, .top_p = top_p, .variant = Variant::kFused}});
    v.push_back({{.B = 3, .V = 20000, .top_p = top_p, .variant = Variant::kMultiLaunch}});
    v.push_back({{.B = 5, .V = 5000, .top_p = top_p, .in_place = true}});
    v.push_back({{.B = 512, .V = 4097, .top_p = top_p}});
    v.push_back({{.B = 7, .V = 1000, .top_p = top_p}});
  }
  return v;
}

}  // namespace dsv4::cases

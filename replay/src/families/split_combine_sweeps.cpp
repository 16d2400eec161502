// split_combine's named sweeps: the GPU test's shapes, which dsv4-replay --draw draws too.
#include <array>
#include <tuple>

#include "dsv4/cases/split_combine.hpp"

namespace dsv4::cases {

SplitCombineShape split_combine_shape(int64_t B, int64_t S, int64_t H, int64_t D, bool sink,
                                      bool rope, int variant, bool order_sensitive) {
  fx::PartialsMix mix;
  mix.sink = sink;
  mix.rope = rope;
  mix.bad_position = 0.1;
  if (B * S * H * D <= 8192) mix.n_pos = 16;  // small cases double as golden files
  SplitCombineShape s{B, S, H, D, mix, variant};
  s.order_sensitive = order_sensitive;
  return s;
}

std::vector<fx::Sweep<SplitCombineShape>> split_combine_gpu_sweep() {
  struct P {
    int64_t B, S, H, D;
    bool sink, rope;
  };
  std::vector<fx::Sweep<SplitCombineShape>> v;
  auto add = [&v](P p, int variant = 0, fx::Launch l = fx::Launch::kEager, bool order = false) {
    v.push_back({split_combine_shape(p.B, p.S, p.H, p.D, p.sink, p.rope, variant, order), l});
  };
  for (P p :
       {P{8, 3, 2, 64, true, true}, P{8, 4, 4, 68, true, true}, P{9, 1, 3, 64, false, false},
        P{8, 5, 2, 128, true, false}, P{8, 2, 1, 512, false, true}, P{1, 16, 128, 512, true, true},
        P{64, 8, 128, 512, true, false}, P{74, 4, 16, 512, true, true},
        P{12, 64, 8, 512, true, true}, P{3, 33, 7, 1024, true, true},
        P{2, 300, 4, 64, true, true}})  // more splits than the block stages: weights per lane
    add(p);
  for (P p : {P{8, 5, 2, 128, true, false}, P{1, 16, 128, 512, true, true},
              P{3, 33, 7, 1024, true, true}})
    add(p, 1);
  for (P p : {P{8, 4, 4, 68, true, true}, P{16, 8, 128, 512, true, true}})
    add(p, 0, fx::Launch::kGraph);
  add({8, 5, 2, 64, true, true}, 0, fx::Launch::kEager, true);  // lse terms whose sum depends on
                                                                // its order
  return v;
}

std::vector<fx::Sweep<SplitCombineShape>> split_combine_soak_sweep() {
  std::vector<fx::Sweep<SplitCombineShape>> v;
  for (int variant : {0, 1})
    for (auto [B, S, H] : {std::array<int64_t, 3>{4, 1, 16}, {8, 4, 16}, {2, 64, 128}})
      v.push_back({split_combine_shape(B, S, H, 512, true, true, variant)});
  return v;
}

std::vector<fx::Sweep<SplitCombineShape>> split_combine_sglang_sweep() {
  std::vector<fx::Sweep<SplitCombineShape>> v;
  for (auto [B, S, H, sink] : {std::tuple<int64_t, int64_t, int64_t, bool>{4, 1, 16, true},
                               {8, 4, 16, true},
                               {3, 33, 7, true},
                               {2, 16, 128, false},
                               {9, 5, 2, true},
                               {1, 64, 128, true}})
    v.push_back({split_combine_shape(B, S, H, 512, sink, false, 0, false)});
  return v;
}

}  // namespace dsv4::cases

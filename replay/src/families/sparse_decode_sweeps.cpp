// sparse_decode's named sweeps: the GPU test's shapes, which dsv4-replay --draw draws too.
#include "dsv4/cases/sparse_decode.hpp"

namespace dsv4::cases {

std::vector<fx::Sweep<SparseDecodeShape>> sparse_decode_gpu_sweep() {
  constexpr KvLayout kV41 = KvLayout::kV41, kFp4 = KvLayout::kV41Fp4, kV4 = KvLayout::kV4,
                     kFnuz = KvLayout::kV4Fnuz;
  struct P {
    size_t B, H, K;
    KvLayout layout;
    int64_t P;
    int64_t splits = 0;
    size_t Ke = 0;
    KvLayout extra = KvLayout::kV41;
    int64_t Pe = 64;
    fx::Launch launch = fx::Launch::kEager;
    bool rope = false;  // compact_attention_hip's inverse RoPE (the split path applies it)
  };
  std::vector<P> v = {
      {1, 16, 64, kV41, 1},
      {4, 64, 576, kV41, 64},
      {74, 16, 64, kFp4, 256},
      {1, 128, 2048, kV41, 64},
      {4, 16, 2048, kFp4, 1},
      {4, 16, 576, kV4, 64},
      {1, 16, 64, kV4, 256},
      {74, 16, 64, kV41, 64},
      {1, 128, 576, kFp4, 64},
      {4, 16, 576, kFnuz, 64},
      {2, 64, 64, kFnuz, 1, 3, 64, kFnuz, 64},
      {2, 48, 576, kV41, 64, 0, 64, kFp4, 64},  // three blocks of 16 heads, an extra cache
      {4, 16, 576, kV41, 64, 0, 64, kFp4, 1},
      {4, 16, 576, kFp4, 64, 0, 64, kV41, 1},
      {4, 64, 64, kFp4, 256, 0, 128, kFp4, 64},
      {2, 16, 2048, kV4, 64, 0, 64, kV4, 64},
      {74, 16, 64, kV41, 1, 0, 64, kV41, 256},
      {4, 16, 576, kV41, 64, 4},
      {74, 16, 64, kFp4, 64, 3, 64, kFp4, 1},
      {1, 128, 2048, kV41, 64, 8},
      {4, 64, 576, kV4, 256, 5, 64, kV4, 64},
      {1, 16, 64, kV41, 64, 16},  // more splits than tiles: empty splits
      {1, 64, 64, kFp4, 64, 0, 64, kFp4, 64},
      {1, 16, 64, kV41, 64, 4, 32, kFp4, 1},
  };
  for (P p : {P{4, 16, 576, kV41, 64, 0, 64, kFp4, 1}, P{4, 16, 576, kV41, 64, 4}}) {
    p.launch = fx::Launch::kGraph;
    v.push_back(p);
  }
  for (P p : {P{4, 16, 576, kV41, 64, 4}, P{1, 16, 64, kFp4, 64, 2, 32, kV41, 1}}) {
    p.rope = true;
    v.push_back(p);
  }
  std::vector<fx::Sweep<SparseDecodeShape>> out;
  for (const P& p : v) {
    SparseDecodeShape s = spread_shape(p.B, p.H, p.K, p.layout, p.P, p.splits, p.Ke, p.extra, p.Pe);
    s.rope = p.rope;
    out.push_back({s, p.launch});
  }
  // decode() picking its own splits (from the device's compute units): the benchmark's decode
  // batch sizes, an extra cache, fewer keys than one split needs, and a captured graph.
  struct A {
    size_t B, H, K;
    KvLayout layout;
    size_t Ke = 0;
    KvLayout extra = KvLayout::kV41;
    fx::Launch launch = fx::Launch::kEager;
  };
  // With the key-balanced schedule: more queries than parts (many whole in one part), queries cut
  // by several parts, an extra cache's tiles after main's; many queries cut into a few pieces,
  // replayed in a graph.
  for (const A& a :
       {A{1, 128, 2048, kV41}, A{8, 64, 2048, kFp4}, A{64, 128, 2048, kV41},
        A{2, 16, 576, kV41, 64, kFp4}, A{1, 16, 16, kV41},
        A{4, 64, 2048, kV41, 0, kV41, fx::Launch::kGraph}, A{300, 16, 64, kV41},
        A{40, 64, 576, kV41, 128, kFp4}, A{48, 64, 576, kFp4, 0, kV41, fx::Launch::kGraph}}) {
    SparseDecodeShape s = spread_shape(a.B, a.H, a.K, a.layout, 64, 0, a.Ke, a.extra, 64);
    s.auto_splits = true;
    out.push_back({s, a.launch});
  }
  return out;
}

std::vector<fx::Sweep<SparseDecodeShape>> sparse_decode_soak_sweep() {
  std::vector<fx::Sweep<SparseDecodeShape>> v;
  for (KvLayout l : {KvLayout::kV41, KvLayout::kV41Fp4, KvLayout::kV4, KvLayout::kV4Fnuz}) {
    v.push_back({spread_shape(2, 16, 576, l, 64, 0)});
    v.push_back({spread_shape(2, 64, 576, l, 64, 4)});
  }
  v.push_back({spread_shape(1, 128, 2048, KvLayout::kV41, 64, 0)});
  v.push_back({spread_shape(4, 16, 576, KvLayout::kV41, 64, 0, 64, KvLayout::kV41Fp4)});
  v.push_back({spread_shape(2, 48, 576, KvLayout::kV41, 64, 3, 64, KvLayout::kV41Fp4)});
  // decode()'s key-balanced schedule: queries cut by parts, merged afterwards.
  SparseDecodeShape sched = spread_shape(8, 64, 576, KvLayout::kV41, 64, 0);
  sched.auto_splits = true;
  v.push_back({sched});
  return v;
}

std::vector<fx::Sweep<SparseDecodeShape>> sparse_decode_sglang_sweep() {
  constexpr KvLayout kV41 = KvLayout::kV41, kFp4 = KvLayout::kV41Fp4, kV4 = KvLayout::kV4;
  struct P {
    size_t B, H, K;
    KvLayout layout;
    int64_t P, splits = 0;
    size_t Ke = 0;
    KvLayout extra = KvLayout::kV41;
    int64_t Pe = 64;
    bool rope = false;
  };
  std::vector<fx::Sweep<SparseDecodeShape>> v;
  // In this order --max-points 4 (the stand-in suite) keeps four compact_attention_hip points.
  for (const P& p :
       {P{4, 64, 576, kV41, 64}, P{4, 16, 576, kV4, 64}, P{4, 16, 576, kV41, 64, 0, 64, kFp4, 1},
        P{2, 16, 2048, kV4, 64, 0, 64, kV4, 64}, P{4, 16, 576, kV41, 64, 4},
        P{1, 128, 576, kV4, 256}, P{74, 16, 64, kFp4, 256},
        P{1, 16, 64, kFp4, 64, 2, 32, kV41, 1, true}}) {
    SparseDecodeShape s = spread_shape(p.B, p.H, p.K, p.layout, p.P, p.splits, p.Ke, p.extra, p.Pe);
    s.rope = p.rope;
    s.finite_sinks = true;
    v.push_back({s});
  }
  return v;
}

}  // namespace dsv4::cases

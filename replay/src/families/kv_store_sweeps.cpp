// kv_store's named sweeps: the GPU test's shapes, which dsv4-replay --draw draws too.
#include "dsv4/cases/kv_store.hpp"

namespace dsv4::cases {
namespace {

fx::Sweep<KvStoreShape> point(int64_t T, int64_t W, int lanes, fx::Launch l = fx::Launch::kEager,
                              bool strided = false) {
  return {{.T = T,
           .R = T + T / 2 + 3,
           .width = W,
           .src_stride = strided ? W + 64 : 0,
           .pool_stride = strided ? W + 8 : 0,
           .lanes = lanes},
          l};
}

}  // namespace

std::vector<fx::Sweep<KvStoreShape>> kv_store_gpu_sweep() {
  std::vector<fx::Sweep<KvStoreShape>> v;
  for (int lanes : {0, 16, 32, 64})
    for (int64_t T : fx::with_random_sizes({0, 1, 7, 64, 4096, 65536}, 2, 2, 5000, 1))
      for (int64_t W : {16, 64, 512, 576}) v.push_back(point(T, W, lanes));
  return v;
}

std::vector<fx::Sweep<KvStoreShape>> kv_store_strided_graph_sweep() {
  std::vector<fx::Sweep<KvStoreShape>> v;
  for (int lanes : {0, 16, 32})
    for (fx::Launch launch : {fx::Launch::kEager, fx::Launch::kGraph})
      for (bool strided : {false, true})
        for (int64_t T : {1, 777, 4096})
          if (launch == fx::Launch::kGraph || strided)
            v.push_back(point(T, 512, lanes, launch, strided));
  return v;
}

std::vector<fx::Sweep<KvStoreShape>> kv_store_soak_sweep() {
  std::vector<fx::Sweep<KvStoreShape>> v;
  for (int lanes : {0, 16, 32, 64}) {
    v.push_back({{.T = 256, .R = 400, .width = 512, .lanes = lanes}});
    v.push_back({{.T = 7, .R = 16, .width = 576, .lanes = lanes}});
  }
  return v;
}

std::vector<fx::Sweep<KvStoreShape>> kv_store_sglang_sweep() {
  std::vector<fx::Sweep<KvStoreShape>> v;
  for (int64_t T : {1, 7, 64, 777, 4096})
    for (int64_t W : {64, 512, 576}) {
      fx::Sweep<KvStoreShape> p = point(T, W, 32);
      p.shape.any_order = true;
      v.push_back(p);
    }
  return v;
}

}  // namespace dsv4::cases

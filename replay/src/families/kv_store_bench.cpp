// kv_store's benchmark rows and a launch's work: SGLang's store of a step's rows into the pool.
#include <algorithm>

#include "dsv4/cases/kv_store.hpp"

namespace dsv4::cases {

std::vector<BenchRow> KvStoreCase::bench_rows() {
  std::vector<BenchRow> rows;
  auto shape = [](int64_t T, int64_t W, int lanes) {
    return KvStoreShape{.T = T, .R = std::max<int64_t>(2 * T, 1024), .width = W, .lanes = lanes};
  };
  for (int64_t T : {1, 64, 512, 4096, 16384, 65536}) {
    BenchRow r{shape(T, 512, 0).vars()};
    if (T == 65536) r.targets = {target::of_copy(0.70)};
    if (T == 64) r.targets = {target::max_us(8)};
    rows.push_back(r);
  }
  rows.push_back({shape(65536, 576, 0).vars(), {}, "the 576-wide rows of the indexer cache"});
  for (int64_t T : {1, 64, 512, 4096, 16384, 65536}) {
    BenchRow r{shape(T, 512, 32).vars(), {}, "RMSNorm + RoPE + store"};
    if (T == 65536) r.targets = {target::of_copy(0.60)};
    rows.push_back(r);
  }
  rows.push_back({shape(65536, 512, 16).vars()});
  rows.push_back({shape(65536, 512, 64).vars(), {}, "wave64 devices only"});
  return rows;
}

// Each stored row read from kv and written to the pool once, every loc; the fused store also
// reads each row's position and RoPE table row, and the weight.
fx::Work KvStoreCase::work(const fx::Tensors& in, const fx::Tensors&) const {
  const st::Tensor& loc = fx::input_of(in, "loc", family());
  const int64_t R = int64_t(fx::input_of(in, "pool", family()).shape.at(0));
  const int64_t W = shape_.width;
  double stored = 0;
  for (int64_t l : loc.values<int64_t>("in.loc")) stored += (l >= 0 && l < R) ? 1 : 0;
  fx::Work w;
  w.bytes = stored * double(W) * 2 * 2 + double(loc.numel()) * 8;
  if (fused_) {
    const st::Tensor& cs = fx::input_of(in, "cos_sin", family());
    w.bytes += double(loc.numel()) * 8 + stored * double(cs.shape.at(1)) * 4 + double(W) * 4;
  }
  return w;
}

}  // namespace dsv4::cases

// sparse_decode's benchmark rows and a launch's work: DeepSeek-V4's decode attention, 128 heads.
#include "dsv4/cases/sparse_decode.hpp"

namespace dsv4::cases {

std::vector<BenchRow> SparseDecodeCase::bench_rows() {
  std::vector<BenchRow> rows;
  auto shape = [](KvLayout l, size_t B, int64_t splits, bool auto_splits) {
    SparseDecodeShape s;
    s.s.B = B, s.s.H = 128, s.s.K = 2048, s.s.layout = l, s.s.page_size = 64;
    s.splits = splits;
    s.auto_splits = auto_splits;
    return s.vars();
  };
  for (KvLayout l : {KvLayout::kV41, KvLayout::kV41Fp4}) {
    rows.push_back({shape(l, 1, 0, false), {}, "unsplit"});
    rows.push_back({shape(l, 1, 16, false)});
    rows.push_back({shape(l, 1, 64, false)});
    rows.push_back({shape(l, 64, 0, false), {}, "unsplit"});
    rows.push_back({shape(l, 64, 2, false)});
    // decode() over its key-balanced schedule, what a caller with a workspace runs.
    rows.push_back({shape(l, 64, 0, true),
                    {target::of_copy(0.40), target::speedup(3.0), target::tflops(250)},
                    "decode() schedules the keys"});
  }
  // B = 64 over more splits than one wave of blocks: the balance a split count buys against the
  // partials it writes and merges.
  for (int64_t S : {4, 8}) rows.push_back({shape(KvLayout::kV41, 64, S, false)});
  // decode() over its own schedule at SGLang's decode batch sizes.
  for (size_t B : {1, 2, 4, 8, 16, 32})
    rows.push_back(
        {shape(KvLayout::kV41, B, 0, true),
         B == 1 ? std::vector<BenchTarget>{target::max_us(40)} : std::vector<BenchTarget>{},
         "decode() schedules the keys"});
  return rows;
}

namespace {
// A cache's keys actually read (indices below the row's length, not -1) and its bytes per token.
void add_cache(const fx::Tensors& in, const std::string& prefix, double& keys, double& bytes) {
  if (!in.count(prefix + "indices")) return;
  const st::Tensor& idx = in.at(prefix + "indices");
  const std::vector<int32_t> ix = idx.values<int32_t>();
  const std::vector<int32_t> len = in.at(prefix + "lengths").values<int32_t>();
  const st::Tensor& pool = in.at(prefix + "pool");
  const double token_bytes =
      double(pool.shape.at(1)) / double(in.at(prefix + "page_size").item<int64_t>());
  const size_t K = idx.shape.at(1);
  double n = 0;
  for (size_t b = 0; b < len.size(); ++b)
    for (size_t k = 0; k < K && int64_t(k) < int64_t(len[b]); ++k) n += ix[b * K + k] >= 0;
  keys += n;
  bytes += n * token_bytes + double(idx.data.size()) + double(len.size()) * 4;
}
}  // namespace

// q read and out written once, each key a query reads gathered once from its cache (data and
// scales); the two products q k^T and p v are 2 * 512 flops per key and head each.
fx::Work SparseDecodeCase::work(const fx::Tensors& in, const fx::Tensors& want) const {
  const st::Tensor& q = fx::input_of(in, "q", family());
  const double H = double(q.shape.at(1));
  double keys = 0, bytes = double(q.data.size());
  add_cache(in, "", keys, bytes);
  add_cache(in, "extra_", keys, bytes);
  for (const char* n : {"out", "out_lse"})
    if (want.count(n)) bytes += double(want.at(n).data.size());
  return {.bytes = bytes, .flops = keys * H * 4 * 512};
}

std::string SparseDecodeCase::launch_note(const fx::Tensors& in) const {
  if (!shape_.auto_splits) return "";
  return "decode() parts: " +
         std::to_string(kernels::sparse_decode::decode_splits(sparse_decode_sized_args(in)));
}

}  // namespace dsv4::cases

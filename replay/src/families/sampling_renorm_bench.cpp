// sampling_renorm's benchmark rows and a launch's work: top-k / top-p at DeepSeek-V4's vocabulary.
#include "dsv4/cases/sampling_renorm.hpp"

namespace dsv4::cases {

std::vector<BenchRow> SamplingRenormCase::bench_rows() {
  namespace ks = kernels::sampling_renorm;
  std::vector<BenchRow> rows;
  for (int64_t B : {1, 64, 256})
    for (bool top_p : {false, true}) {
      auto shape = [&](ks::Variant v) {
        return SamplingRenormShape{
            .B = B, .V = 129280, .top_p = top_p, .rows = RowKind::kSoftmax, .variant = v};
      };
      // The path decode() picks: top-k 3x and top-p 5x faster than the faster PyTorch peer.
      rows.push_back({shape(ks::Variant::kAuto).vars(), {target::speedup(top_p ? 5.0 : 3.0)}});
      if (B <= 64)
        for (ks::Variant v : {ks::Variant::kFused, ks::Variant::kMultiLaunch})
          rows.push_back({shape(v).vars(), {}, "a path the launcher can also take"});
    }
  return rows;
}

// probs read once and out written once (the scalars' bytes besides).
fx::Work SamplingRenormCase::work(const fx::Tensors& in, const fx::Tensors& want) const {
  fx::Work w;
  for (const char* n : {"probs", "k", "p"})
    if (in.count(n)) w.bytes += double(in.at(n).data.size());
  for (const auto& [name, t] : want) w.bytes += double(t.data.size());
  return w;
}

std::string SamplingRenormCase::launch_note(const fx::Tensors&) const {
  namespace ks = kernels::sampling_renorm;
  return std::string("path: ") +
         ks::path_name(ks::path_of(shape_.B, shape_.V, shape_.top_p, shape_.variant));
}

}  // namespace dsv4::cases

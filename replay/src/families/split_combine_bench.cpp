// split_combine's benchmark rows and a launch's work: the merge of a decode step's split partials.
#include "dsv4/cases/split_combine.hpp"

namespace dsv4::cases {

std::vector<BenchRow> SplitCombineCase::bench_rows() {
  std::vector<BenchRow> rows;
  struct Row {
    int64_t B, S, H;
    bool sink, rope;
    std::vector<BenchTarget> targets;
  };
  const std::vector<Row> list = {
      {1, 16, 128, true, false, {target::max_us(10)}},
      {1, 16, 128, true, true, {}},
      {8, 8, 128, true, false, {}},
      {64, 8, 128, true, false, {target::of_copy(0.60)}},
      {64, 8, 128, true, true, {}},
      {64, 16, 64, false, false, {}},
  };
  for (const Row& r : list)
    for (int variant : {0, 1}) {
      SplitCombineShape s{.B = r.B, .S = r.S, .H = r.H, .D = 512, .variant = variant};
      s.mix.sink = r.sink;
      s.mix.rope = r.rope;
      rows.push_back({s.vars(), variant ? std::vector<BenchTarget>{} : r.targets,
                      variant ? "every lane computes every weight" : ""});
    }
  return rows;
}

// Each row's splits below its count read once (o or acc, with lse or m and l), the output written.
fx::Work SplitCombineCase::work(const fx::Tensors& in, const fx::Tensors& want) const {
  const std::vector<int32_t> n = fx::input_of(in, "n_splits", family()).values<int32_t>();
  const int64_t S = shape_.S, H = shape_.H, D = shape_.D;
  double splits = 0;
  for (int32_t c : n) splits += double(std::clamp<int64_t>(c, 0, S));
  const double per_split = double(H) * (double(D) * 4 + (in.count("m") ? 8 : 4));
  fx::Work w;
  w.bytes = splits * per_split + double(n.size()) * 4;
  for (const char* x : {"sink", "positions"})
    if (in.count(x)) w.bytes += double(in.at(x).data.size());
  for (const auto& [name, t] : want) w.bytes += double(t.data.size());
  return w;
}

}  // namespace dsv4::cases

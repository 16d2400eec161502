// ring_layout's benchmark rows and a launch's work: each launcher at DSpark's geometry, and
// window_rows' other fills.
#include "dsv4/cases/ring_layout.hpp"

#include <utility>

#include "dsv4/kernels/ring_layout.hpp"

namespace dsv4::cases {

namespace kr = ::dsv4::kernels::ring_layout;

std::vector<BenchRow> RingLayoutCase::bench_rows() {
  std::vector<BenchRow> rows;
  for (int64_t n : {64, 4096, 65536, 262144})
    for (const char* launcher : {"token_locs", "verify_locs", "window_rows", "prefill_slots"}) {
      // DSpark's geometry: window 125, 4 draft tokens, ring 128; positions up to 2^20.
      const RingLayoutShape dspark{.n = n,
                                   .V = 4,
                                   .win = 125,
                                   .n_slots = 4096,
                                   .max_pos = int64_t(1) << 20,
                                   .max_request = 8,
                                   .launcher = launcher};
      BenchRow r{dspark.vars()};
      if (std::string(launcher) == "window_rows" && n >= 65536) r.targets = {target::of_copy(0.50)};
      rows.push_back(r);
      // window_rows' other fills at the judged sizes, measured beside the default.
      if (std::string(launcher) == "window_rows" && n >= 65536)
        for (const auto& [variant, note] :
             {std::pair{kr::kWindowLookbackPlain, "look-back fill, plain stores"},
              std::pair{kr::kWindowThreePass, "three-pass fill"},
              std::pair{kr::kWindowLookbackNarrow, "look-back fill, blocks of 256"}}) {
          RingLayoutShape s = dspark;
          s.variant = variant;
          rows.push_back({s.vars(), {}, note});
        }
    }
  return rows;
}

// Every input and output once, of the window rows only those the indptr says are written.
fx::Work RingLayoutCase::work(const fx::Tensors& in, const fx::Tensors& want) const {
  fx::Work w;
  for (const auto& [name, t] : in) w.bytes += t.shape.empty() ? 0 : double(t.data.size());
  for (const auto& [name, t] : want) {
    if (name == "rows") {
      const auto ip = want.at("indptr").values<int32_t>();
      w.bytes += 4.0 * double(ip.back() - ip.front());
    } else if (name != "errors") {
      w.bytes += double(t.data.size());
    }
  }
  return w;
}

}  // namespace dsv4::cases

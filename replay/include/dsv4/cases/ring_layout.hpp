// The ring_layout kernel case: every launcher of the family (token locs, verify locs, window rows,
// prefill expansion) on one drawn batch, shared by the GPU test, dsv4-replay and the benchmark.
#pragma once

// Case layout. Geometry: in.ring, in.win, in.n_slots I64 []. Each launcher runs when its inputs
// are present, so a case may hold any subset:
//   token_locs    in.slot I64 [N], in.pos I64 [N], optional in.final_pos I64 [N] -> loc I64 [N]
//   verify_locs   in.batch_slot I64 [B], in.verify_pos I64 [B, V], in.commit_len I32 [B]
//                 -> verify_loc I64 [B, V]
//   window_rows   in.batch_id I32 [D], in.pos I64 [D], in.batch_slot I64 [B]
//                 -> indptr I32 [D+1], rows I32 [D*win] (entries past indptr[D] keep their poison);
//                 optional in.variant I32 [] (the fill, RingLayoutShape::variant)
//   prefill_slots in.req_slot I64 [B], in.prefill_indptr I32 [B+1], in.pos I64 [T]
//                 -> token_slot I64 [T], token_final_pos I64 [T]
// and errors I64 [] (the one counter every launcher adds to). Every output bit for bit.

#include <cstdint>
#include <string>

#include "dsv4/cases/bench_rows.hpp"
#include "dsv4/cases/declared_inputs.hpp"
#include "dsv4/cases/shaped_case.hpp"
#include "dsv4/fixtures/case_sweep.hpp"

namespace dsv4::cases {

namespace st = fx::st;

struct RingLayoutShape {
  int64_t n = 64;            // tokens: T of token_locs and prefill_slots, D of window_rows
  int64_t V = 4;             // draft tokens of a verify step (columns of the [B, V] layout)
  int64_t win = 125;         // sliding window
  int64_t ring = 0;          // rows per slot; 0: ring_rows(win, V) = win + V - 1
  int64_t n_slots = 64;      // state slots
  int64_t max_pos = 0;       // positions drawn in [0, max_pos]; 0: 4 * ring
  int64_t first_offset = 0;  // prefill tokens before the first request (indptr[0])
  int64_t max_request = 0;   // longest prefill request; 0: 2 * V
  // One launcher only (token_locs, verify_locs, window_rows, prefill_slots: the case draws
  // only its inputs); "": all four.
  std::string launcher = {};
  // window_rows' fill (kernels::ring_layout::WindowOptions::variant; in.variant I32 [] in a case
  // file): 0 look-back, 1 look-back with streaming stores, 2 three-pass. The same bytes each.
  int variant = 0;
  int64_t B() const { return n / V > 1 ? n / V : 1; }
  int64_t ring_size() const { return ring ? ring : win + V - 1; }
  fx::Vars vars() const;  // the case's identity (fx::Vars: str(), id())
  std::string str() const { return vars().str(); }
  static RingLayoutShape from_vars(fx::VarsReader& r);  // the inverse of vars()
  bool operator==(const RingLayoutShape&) const = default;
};

// The named sweeps (dsv4-replay --draw --sweep NAME; the GPU test instantiates from them).
// "sizes": fixed and seeded random token counts (0 to 65536), eager and graph.
std::vector<fx::Sweep<RingLayoutShape>> ring_layout_sizes_sweep();
// "geometry": windows, draft widths and ring slack, positions past 2^20, prefill offsets.
std::vector<fx::Sweep<RingLayoutShape>> ring_layout_geometry_sweep();
// "fill": window_rows alone by every fill variant at the fill's edges: one token, tiles not
// whole, windows of 1-8 rows (tile ranges starting and ending off a 16-byte boundary), short
// positions, more tiles than one look-back chunk and many waves of tiles, eager and graph.
std::vector<fx::Sweep<RingLayoutShape>> ring_layout_fill_sweep();
// "gpu": sizes, geometry and fill, the GPU test's every point.
std::vector<fx::Sweep<RingLayoutShape>> ring_layout_gpu_sweep();
// "soak": the soak's rotating shapes: every launcher (token, verify, window, prefill layouts).
std::vector<fx::Sweep<RingLayoutShape>> ring_layout_soak_sweep();

class RingLayoutCase : public ShapedCase<RingLayoutShape> {
 public:
  explicit RingLayoutCase(RingLayoutShape shape) : ShapedCase(shape) {}
  // From a case file's inputs, starting from the shape the file states (the drawing ranges).
  explicit RingLayoutCase(const fx::Tensors& in, const RingLayoutShape& stated = {});
  static std::vector<fx::NamedSweep<RingLayoutShape>> sweeps();
  // The case layout, declared once (the case-file reader and --list derive from it).
  static InputDecls declared_inputs();
  // dsv4-bench's rows and a launch's work (ring_layout_bench.cpp).
  static std::vector<BenchRow> bench_rows();
  fx::Work work(const fx::Tensors& in, const fx::Tensors& want) const override;

  std::string family() const override { return "ring_layout"; }
  fx::Tensors draw(fx::Rng& rng) const override;
  std::vector<fx::OutputSpec> outputs(const fx::Tensors& in) const override;
  fx::Tensors reference(const fx::Tensors& in) const override;
  void launch(const fx::DeviceTensors& dev, gpu::Stream s) const override;
};

}  // namespace dsv4::cases

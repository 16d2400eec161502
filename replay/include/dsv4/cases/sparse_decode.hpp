// The sparse_decode kernel case: case layout, draw, reference, launch and comparators of the
// sparse decode attention over SGLang's pages, unsplit or through split partials and
// split_combine, shared by the GPU test and dsv4-replay.
#pragma once

// Case layout: in.q BF16 [B, H, 512]; the main cache in.pool U8 [num_pages, page_bytes],
// in.layout I32 [] (KvLayout: 0 v41, 1 v41_fp4, 2 v4), in.page_size I64 [], in.indices I32 [B, K],
// in.lengths I32 [B]; optionally the extra cache under the same names prefixed "extra_";
// in.sm_scale F32 []; optional in.sink F32 [H]; optional in.splits I64 [] (S >= 1: the split-KV
// path; -1: decode() picking its own splits, with its workspace as the case's scratch). Outputs:
// out BF16 [B, H, 512], out_lse F32 [B, H] (natural log, sink excluded), errors I64
// [] (error columns); with splits also part_o F32 [B, S, H, 512] and part_lse F32 [B, S, H] (base
// 2), the partials split_combine merged into out. out, out_lse and the partials within the
// tolerance ref::sparse_decode::tolerance derives from the case's data; errors exact.
// Main and extra caches: v41 and v41_fp4 in any pairing (or the same layout twice). Optional
// inverse RoPE (compact_attention_hip's inv_rope): in.cos_sin F32 [n_pos, rope_dim] and
// in.positions I64 [B]; out's tail rotated back, errors counting a position outside the table
// once per query. The project's kernel applies it on the split path (in split_combine); its
// unsplit kernel has none. A foreign source (cases::Foreign) is held to the same tolerance, and
// a NaN in a row with no key or a +inf sink fails naming SGLang's HIP reducer.

#include <cstdint>
#include <string>
#include <vector>

#include "dsv4/cases/bench_rows.hpp"
#include "dsv4/cases/declared_inputs.hpp"
#include "dsv4/cases/foreign.hpp"
#include "dsv4/cases/shaped_case.hpp"
#include "dsv4/fixtures/attention_inputs.hpp"
#include "dsv4/fixtures/case_sweep.hpp"
#include "dsv4/kernels/sparse_decode.hpp"

namespace dsv4::cases {

namespace st = fx::st;

struct SparseDecodeShape {
  fx::SparseShape s;
  int64_t splits = 0;        // 0: the unsplit kernel
  bool auto_splits = false;  // decode() picks its own splits (in.splits = -1; a workspace)
  fx::CacheMix mix{};
  bool rope = false;        // inverse RoPE of the last 64 values
  double bad_position = 0;  // share of queries whose position is outside the table
  // Every head's sink finite ("finite-sinks"; else finite, +inf and -inf mixed): the cases
  // SGLang's triton_flashmla and compact_attention_hip state their convention for.
  bool finite_sinks = false;
  fx::Vars vars() const;  // the case's identity (fx::Vars: str(), id())
  std::string str() const { return vars().str(); }
  // The inverse of vars(): the spread_shape of those vars (the GPU test's shapes).
  static SparseDecodeShape from_vars(fx::VarsReader& r);
  bool operator==(const SparseDecodeShape&) const = default;
};

// A shape whose caches hold about twice the columns each row reads (so keys spread over pages and
// repeat rarely): B rows of H heads reading K main columns of `layout` in pages of P tokens, and Ke
// extra columns of `extra` in pages of Pe; `splits` 0 for the unsplit kernel.
SparseDecodeShape spread_shape(size_t B, size_t H, size_t K, KvLayout layout, int64_t P,
                               int64_t splits = 0, size_t Ke = 0, KvLayout extra = KvLayout::kV41,
                               int64_t Pe = 64);

// The named sweeps (dsv4-replay --draw --sweep NAME; the GPU test instantiates from them).
// "gpu": every layout and page size, extra caches of each layout, splits, graph launches, RoPE.
std::vector<fx::Sweep<SparseDecodeShape>> sparse_decode_gpu_sweep();
// "soak": the soak's rotating shapes: unsplit and split at every main layout, the extra caches
// SGLang pairs, 16 to 128 heads.
std::vector<fx::Sweep<SparseDecodeShape>> sparse_decode_soak_sweep();
// "sglang": finite sinks only, v4 pages without RoPE (triton_flashmla) between v41 and v41_fp4
// pages (compact_attention_hip: extra caches, splits, the inverse RoPE).
std::vector<fx::Sweep<SparseDecodeShape>> sparse_decode_sglang_sweep();
// KvLayout's names in its order (v41, v41_fp4, v4, v4_fnuz): the words a shape's vars use.
std::vector<std::string> kv_layout_names();

// The launcher's Args of a case's sizes alone (the workspace and the split choice need no data).
kernels::sparse_decode::Args sparse_decode_sized_args(const fx::Tensors& in);

class SparseDecodeCase : public ShapedCase<SparseDecodeShape>, public Foreign {
 public:
  explicit SparseDecodeCase(SparseDecodeShape shape);
  // From a case file's inputs (checked), starting from the shape the file states.
  explicit SparseDecodeCase(const fx::Tensors& in, const SparseDecodeShape& stated = {});
  static std::vector<fx::NamedSweep<SparseDecodeShape>> sweeps();
  // The case layout, declared once (the case-file reader and --list derive from it).
  static InputDecls declared_inputs();
  // dsv4-bench's rows and a launch's work (sparse_decode_bench.cpp).
  static std::vector<BenchRow> bench_rows();
  fx::Work work(const fx::Tensors& in, const fx::Tensors& want) const override;
  std::string launch_note(const fx::Tensors& in) const override;

  std::string family() const override { return "sparse_decode"; }
  fx::Tensors draw(fx::Rng& rng) const override;
  std::vector<fx::OutputSpec> outputs(const fx::Tensors& in) const override;
  fx::Tensors reference(const fx::Tensors& in) const override;
  // decode()'s workspace for a case whose in.splits is -1 (its own split choice).
  std::vector<fx::ScratchSpec> scratch(const fx::Tensors& in) const override;
  void launch(const fx::DeviceTensors& dev, gpu::Stream s) const override;
  ::testing::AssertionResult compare(const fx::OutputSpec& spec, const st::Tensor& got,
                                     const st::Tensor& want, const fx::Tensors& in) const override;
  // The matrix cores' fp32 sums follow no order a CPU reference can copy: golden files are held
  // within compare()'s derived tolerance (and bit for bit by the kernel on the arch that wrote
  // them, see unit/replay/test_replay_device.cpp).
  bool golden_bitwise() const override { return false; }
  std::string cannot_run() const override;
  ::testing::AssertionResult compare_foreign(const fx::OutputSpec& spec, const st::Tensor& got,
                                             const st::Tensor& want,
                                             const fx::Tensors& in) const override;
};

// A case's inputs with the optional inverse RoPE, as the reference reads them.
struct SparseView {
  fx::SparseCase c;
  std::vector<float> cos_sin;
  std::vector<int64_t> positions;
  size_t rope_dim = 0;
  ref::sparse_decode::Inputs inputs() const;  // valid while this object lives, unmoved
};
SparseView sparse_view_of(const fx::Tensors& in);

// The case's inputs as the reference's storage (SparseCase::inputs() views them), and back.
fx::SparseCase sparse_case_of(const fx::Tensors& in);
fx::Tensors tensors_of(const fx::SparseCase& c);

}  // namespace dsv4::cases

// The split_combine kernel case: case layout, draw, reference, launch and comparator of the merge
// of split-KV partials, shared by the GPU test, dsv4-replay and the golden files.
#pragma once

// Case layout: in.o F32 [B, S, H, D] (normalised partials), in.lse F32 [B, S, H] (base 2, -inf an
// empty split), in.n_splits I32 [B]; optional in.sink F32 [H]; optional inverse RoPE: in.cos_sin
// F32 [n_pos, rope_dim] and in.positions I64 [B]. Outputs: out BF16 [B, H, D], out_lse F32 [B, H]
// (natural log, sink excluded) and errors I64 [] (batch rows whose position is outside the table),
// all bit for bit against the fp32-order reference.
// SGLang's unnormalised layout in place of in.o / in.lse (ref::split_combine::Unnormalised):
// in.acc F32 [B, S, H, D], in.m F32 [B, S, H], in.l F32 [B, S, H], optional in.m_base2 I32 (1, the
// default: m in the base-2 domain as SGLang's HIP reducer; 0: natural as its SM100 path).
// Optional in.rotate_empty I32 (default 1 in SGLang's layout, 0 in the normalised one): a row
// with no key or a +inf sink is rotated by the inverse RoPE, -0 where SGLang writes -0. out_lse
// is this project's extension (SGLang's reducers return none): a foreign case may leave it out.
// The project's kernel runs the normalised layout without rotate_empty. A foreign source
// (cases::Foreign) is held to the fp64 merge within the stated tolerances (kOutAtolOfMax,
// kOutRtol, kLseAtol, kLseRtol); a NaN in a row with no key or a +inf sink fails naming SGLang's
// HIP reducer.

#include <cstdint>
#include <string>

#include "dsv4/cases/bench_rows.hpp"
#include "dsv4/cases/declared_inputs.hpp"
#include "dsv4/cases/foreign.hpp"
#include "dsv4/cases/shaped_case.hpp"
#include "dsv4/fixtures/attention_inputs.hpp"
#include "dsv4/fixtures/case_sweep.hpp"

namespace dsv4::cases {

namespace st = fx::st;

struct SplitCombineShape {
  int64_t B = 1, S = 1, H = 1, D = 512;
  fx::PartialsMix mix{};
  int variant = 0;               // kernels::split_combine::Args::variant (the same bits either way)
  bool unnormalised = false;     // SGLang's (acc, m, l) layout (reference and replay only)
  bool m2 = true;                // its m in the base-2 domain
  bool rotate_empty = false;     // an empty row through the inverse RoPE (SGLang's -0)
  bool order_sensitive = false;  // rows whose lse sum depends on the order of its terms
  fx::Vars vars() const;         // the case's identity (fx::Vars: str(), id())
  std::string str() const { return vars().str(); }
  // The inverse of vars(): the GPU test's shape of those vars (split_combine_shape below).
  static SplitCombineShape from_vars(fx::VarsReader& r);
  bool operator==(const SplitCombineShape&) const = default;
};

// The GPU test's shape of B, S, H, D: a tenth of the rows with a position outside the table, and
// a 16-row RoPE table for small cases (they double as golden files).
SplitCombineShape split_combine_shape(int64_t B, int64_t S, int64_t H, int64_t D, bool sink,
                                      bool rope, int variant = 0, bool order_sensitive = false);
// The named sweeps (dsv4-replay --draw --sweep NAME; the GPU test instantiates from them).
// "gpu": batches, splits (1 to 300), heads and widths, both weight variants, graph launches.
std::vector<fx::Sweep<SplitCombineShape>> split_combine_gpu_sweep();
// "soak": the soak's rotating shapes: one split and many, sinks and RoPE, both variants.
std::vector<fx::Sweep<SplitCombineShape>> split_combine_soak_sweep();
// "sglang": D = 512 without the inverse RoPE, as SGLang's SM100 caller merges (swapab_attention
// rotates after _combine): 1 to 64 splits, 2 to 128 heads, with and without sinks.
std::vector<fx::Sweep<SplitCombineShape>> split_combine_sglang_sweep();

class SplitCombineCase : public ShapedCase<SplitCombineShape>, public Foreign {
 public:
  explicit SplitCombineCase(SplitCombineShape shape);
  // From a case file's inputs (checked), starting from the shape the file states (the variant).
  explicit SplitCombineCase(const fx::Tensors& in, const SplitCombineShape& stated = {});
  static std::vector<fx::NamedSweep<SplitCombineShape>> sweeps();
  // The case layout, declared once (the case-file reader and --list derive from it).
  static InputDecls declared_inputs();
  // dsv4-bench's rows and a launch's work (split_combine_bench.cpp).
  static std::vector<BenchRow> bench_rows();
  fx::Work work(const fx::Tensors& in, const fx::Tensors& want) const override;

  std::string family() const override { return "split_combine"; }
  fx::Tensors draw(fx::Rng& rng) const override;
  std::vector<fx::OutputSpec> outputs(const fx::Tensors& in) const override;
  fx::Tensors reference(const fx::Tensors& in) const override;
  void launch(const fx::DeviceTensors& dev, gpu::Stream s) const override;
  std::string cannot_run() const override;
  ::testing::AssertionResult compare_foreign(const fx::OutputSpec& spec, const st::Tensor& got,
                                             const st::Tensor& want,
                                             const fx::Tensors& in) const override;
};

// A case's inputs in either layout, as the reference reads them (inputs() views this object).
struct SplitView {
  fx::SplitPartials p;  // shape, n_splits, sink, RoPE; o and lse empty in SGLang's layout
  std::vector<float> acc, m, l;
  bool unnormalised = false, m2 = true, rotate_empty = false;
  ref::split_combine::Inputs inputs() const;

 private:
  mutable ref::split_combine::Unnormalised un_;
};
SplitView split_view_of(const fx::Tensors& in);

// The case's inputs (the normalised layout) as the reference's storage (SplitPartials::inputs()
// views them), and back.
fx::SplitPartials split_partials_of(const fx::Tensors& in);
fx::Tensors tensors_of(const fx::SplitPartials& p);

}  // namespace dsv4::cases

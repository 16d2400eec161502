// The split_combine kernel case: case layout, draw, reference, launch and comparator of the merge
// of split-KV partials, shared by the GPU test, dsv4-replay and the golden files.
#pragma once

// Case layout: in.o F32 [B, S, H, D] (normalised partials), in.lse F32 [B, S, H] (base 2, -inf an
// empty split), in.n_splits I32 [B]; optional in.sink F32 [H]; optional inverse RoPE: in.cos_sin
// F32 [n_pos, rope_dim] and in.positions I64 [B]. Outputs: out BF16 [B, H, D], out_lse F32 [B, H]
// (natural log, sink excluded) and errors I64 [] (batch rows whose position is outside the table),
// all bit for bit against the fp32-order reference.

#include <cstdint>
#include <string>

#include "dsv4/cases/shaped_case.hpp"
#include "dsv4/fixtures/attention_inputs.hpp"

namespace dsv4::cases {

namespace st = fx::st;

struct SplitCombineShape {
  int64_t B = 1, S = 1, H = 1, D = 512;
  fx::PartialsMix mix{};
  int variant = 0;          // kernels::split_combine::Args::variant (the same bits either way)
  std::string str() const;  // "B=4 S=8 H=16 D=512 sink rope"
};

class SplitCombineCase : public ShapedCase<SplitCombineShape> {
 public:
  explicit SplitCombineCase(SplitCombineShape shape);
  explicit SplitCombineCase(const fx::Tensors& in);  // from a case file's inputs (checked)

  std::string family() const override { return "split_combine"; }
  fx::Tensors draw(fx::Rng& rng) const override;
  std::vector<fx::OutputSpec> outputs(const fx::Tensors& in) const override;
  fx::Tensors reference(const fx::Tensors& in) const override;
  void launch(const fx::DeviceTensors& dev, gpu::Stream s) const override;
};

// The case's inputs as the reference's storage (SplitPartials::inputs() views them), and back.
fx::SplitPartials split_partials_of(const fx::Tensors& in);
fx::Tensors tensors_of(const fx::SplitPartials& p);

}  // namespace dsv4::cases

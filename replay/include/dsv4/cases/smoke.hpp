// The smoke kernel case: out = x * scale + bias with planted faults, the harness's own proof.
#pragma once

// Case layout: in.x F32 [any shape], in.scale F32 [], in.bias F32 [], optional in.fault I32 and
// in.at I64 (the planted-fault launcher parameters; the reference ignores them). Output: out F32
// like in.x, poisoned before each launch, compared bit for bit.

#include <cstddef>
#include <string>

#include "dsv4/cases/declared_inputs.hpp"
#include "dsv4/cases/shaped_case.hpp"
#include "dsv4/fixtures/case_sweep.hpp"
#include "dsv4/kernels/smoke.hpp"

namespace dsv4::cases {

struct SmokeShape {
  size_t n = 1000;
  kernels::smoke::Fault fault = kernels::smoke::Fault::kNone;
  size_t at = 0;
  float scale = 2.0f, bias = 0.5f;
  bool draw_scalars = false;  // draw scale and bias too (host arguments a graph captures)
  fx::Vars vars() const;      // the case's identity (fx::Vars: str(), id())
  std::string str() const { return vars().str(); }
  static SmokeShape from_vars(fx::VarsReader& r);  // the inverse of vars()
  bool operator==(const SmokeShape&) const = default;
};

// The named sweeps (dsv4-replay --draw --sweep NAME; the GPU test instantiates from them).
std::vector<fx::Sweep<SmokeShape>> smoke_gpu_sweep();     // "gpu": the fault-free kernel
std::vector<fx::Sweep<SmokeShape>> smoke_faults_sweep();  // "faults": every planted fault

class SmokeCase : public ShapedCase<SmokeShape> {
 public:
  explicit SmokeCase(SmokeShape shape) : ShapedCase(shape) {}
  // From a case file's inputs, starting from the shape the file states.
  explicit SmokeCase(const fx::Tensors& in, const SmokeShape& stated = {});
  static std::vector<fx::NamedSweep<SmokeShape>> sweeps();
  // The case layout, declared once (the case-file reader and --list derive from it).
  static InputDecls declared_inputs();
  std::string family() const override { return "smoke"; }
  fx::Tensors draw(fx::Rng& rng) const override;
  std::vector<fx::OutputSpec> outputs(const fx::Tensors& in) const override;
  fx::Tensors reference(const fx::Tensors& in) const override;
  void launch(const fx::DeviceTensors& dev, gpu::Stream s) const override;
};

}  // namespace dsv4::cases

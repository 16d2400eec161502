// The sampling_renorm kernel case: case layout, draw, reference, launch and comparator of the
// top-k and top-p renormalisation, shared by the GPU test, dsv4-replay and the bench.
#pragma once

// Case layout: in.probs F32 [B, V] and either in.k I32 [B] (top-k) or in.p F32 [B] (top-p).
// Output: out F32 [B, V], poisoned before each launch (in place: in.out, a copy of in.probs, is
// both the kernel's input and its output), compared bit for bit with the reference in
// the kernel's arithmetic (ref::sampling_renorm::Arith::kKernel); the tests also hold it to the
// fp64 specification within rtol 1e-5. Scratch: workspace U8 [workspace_bytes(B, V)] when
// several blocks share a row. Named conventions (ref::sampling_renorm): optional in.k_clamp I32
// (KRule: 0 k <= 0 keeps all, the project's kernel; 1 SGLang's clamp of k to [1, V]) and
// in.top_p_rule I32 (TopPRule: 0 FlashInfer's, the default; 1 SGLang's renorm.py's, which keeps
// one more value where a kept mass equals p exactly). A foreign source (cases::Foreign) is judged
// by the kept set (top-k: exact; top-p: any pivot whose fp64 masses meet p within the fp32
// summation error, so either rule at exact equality) and the values within the derived
// tolerance of w / (the fp64 sum of the kept set), rtol (n_kept + 4) 2^-24.

#include <cstdint>
#include <string>

#include "dsv4/cases/bench_rows.hpp"
#include "dsv4/cases/declared_inputs.hpp"
#include "dsv4/cases/foreign.hpp"
#include "dsv4/cases/shaped_case.hpp"
#include "dsv4/fixtures/case_sweep.hpp"
#include "dsv4/kernels/sampling_renorm.hpp"

namespace dsv4::cases {

namespace st = fx::st;

// kBoundary: dyadic rows whose kept masses hit p exactly (top-p: p is drawn as the mass of the
// row's top values), and rows whose kept sum depends on the summation order (a large value with
// many tiny ones): the rows that tell the top-p equality rule and the kernel's chunk order apart.
enum class RowKind { kSoftmax, kTies, kEqual, kOneHot, kHostile, kZero, kBoundary, kMixed };

struct SamplingRenormShape {
  int64_t B = 1;
  int64_t V = 1000;
  bool top_p = false;
  RowKind rows = RowKind::kMixed;  // kMixed: each row a kind of its own
  kernels::sampling_renorm::Variant variant = kernels::sampling_renorm::Variant::kAuto;
  bool in_place = false;  // out == probs: the kernel reads each entry before writing it
  int k_clamp = 0;        // ref::sampling_renorm::KRule
  int top_p_rule = 0;     // ref::sampling_renorm::TopPRule
  fx::Vars vars() const;  // the case's identity (fx::Vars: str(), id())
  std::string str() const { return vars().str(); }
  static SamplingRenormShape from_vars(fx::VarsReader& r);  // the inverse of vars()
  bool operator==(const SamplingRenormShape&) const = default;
};

// The named sweeps (dsv4-replay --draw --sweep NAME; the GPU test instantiates from them).
// "gpu": V from 1 to 262144, batches, every row kind, both variants where rows span blocks.
std::vector<fx::Sweep<SamplingRenormShape>> sampling_renorm_gpu_sweep();
// "hostile": the gpu points of hostile (NaN, negatives, inf, subnormals) and zero rows.
std::vector<fx::Sweep<SamplingRenormShape>> sampling_renorm_hostile_sweep();
// "boundary": the gpu points of rows whose kept mass hits p exactly (the top-p rule's edge).
std::vector<fx::Sweep<SamplingRenormShape>> sampling_renorm_boundary_sweep();
// "soak": the soak's rotating shapes: one block per row, multi-launch and fused (B = 64 at the
// DSV4 vocabulary), top-k and top-p, in place.
std::vector<fx::Sweep<SamplingRenormShape>> sampling_renorm_soak_sweep();

class SamplingRenormCase : public ShapedCase<SamplingRenormShape>, public Foreign {
 public:
  explicit SamplingRenormCase(SamplingRenormShape shape) : ShapedCase(shape) {}
  // From a case file's inputs, starting from the shape the file states (rows, variant).
  explicit SamplingRenormCase(const fx::Tensors& in, const SamplingRenormShape& stated = {});
  static std::vector<fx::NamedSweep<SamplingRenormShape>> sweeps();
  // The case layout, declared once (the case-file reader and --list derive from it).
  static InputDecls declared_inputs();
  // dsv4-bench's rows and a launch's work (sampling_renorm_bench.cpp).
  static std::vector<BenchRow> bench_rows();
  fx::Work work(const fx::Tensors& in, const fx::Tensors& want) const override;
  std::string launch_note(const fx::Tensors& in) const override;

  std::string family() const override { return "sampling_renorm"; }
  fx::Tensors draw(fx::Rng& rng) const override;
  std::vector<fx::OutputSpec> outputs(const fx::Tensors& in) const override;
  fx::Tensors reference(const fx::Tensors& in) const override;
  std::vector<fx::ScratchSpec> scratch(const fx::Tensors& in) const override;  // "workspace"
  void launch(const fx::DeviceTensors& dev, gpu::Stream s) const override;
  std::string cannot_run() const override;
  ::testing::AssertionResult compare_foreign(const fx::OutputSpec& spec, const st::Tensor& got,
                                             const st::Tensor& want,
                                             const fx::Tensors& in) const override;
};

}  // namespace dsv4::cases

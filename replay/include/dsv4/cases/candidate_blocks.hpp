// The candidate_blocks kernel case: case layout, draw, reference and launch of the two-level
// indexer, shared by the GPU test and dsv4-replay.
#pragma once

// Case layout: in.scores F32 [B, stride], in.lens I32 [B], in.bs I64, in.nb I64, in.K I64,
// optional in.width I64 (default stride), optional in.wave I32 (the sorts' logical wave width).
// Outputs: blocks I32 [B, nb] and keys I32 [B, K], both sorted ascending with -1 last, bit for bit.
// Level one alone (shape K = 0, SGLang's candidate-block ops): no in.K and no keys output; the
// project's kernel still runs both levels, its keys (K = 1) into a scratch buffer.
// A foreign source (cases::Foreign): SGLang's published block lists are read as they are (padded
// with num_blocks or any index past the row's blocks, in score order or any other) and normalised
// (padding -> -1, ascending, -1 last), then judged tie-tolerantly (any tied block or key at a
// cut-off); its key lists likewise (ascending after normalisation).

#include <cstdint>
#include <string>
#include <vector>

#include "dsv4/cases/bench_rows.hpp"
#include "dsv4/cases/declared_inputs.hpp"
#include "dsv4/cases/foreign.hpp"
#include "dsv4/cases/shaped_case.hpp"
#include "dsv4/fixtures/case_sweep.hpp"

namespace dsv4::cases {

namespace st = fx::st;

struct CandidateBlocksShape {
  int64_t B = 1;
  int64_t width = 4096;
  int64_t len = -1;                   // every row's length; -1: ragged in [0, width]
  int64_t bs = 64, nb = 16, K = 512;  // K = 0: level one alone (no in.K, no keys output)
  int wave = 0;                       // 0: the device's
  bool ties = false;                  // integer-valued scores (ties within and across blocks)
  bool hostile = false;               // NaN, -inf and +inf sprinkled in
  fx::Vars vars() const;              // the case's identity (fx::Vars: str(), id())
  std::string str() const { return vars().str(); }
  static CandidateBlocksShape from_vars(fx::VarsReader& r);  // the inverse of vars()
  bool operator==(const CandidateBlocksShape&) const = default;
};

// The named sweeps (dsv4-replay --draw --sweep NAME; the GPU test instantiates from them).
// "gpu": block sizes 1 to 512 at lengths around them, every block, more blocks than the row has,
// long ragged rows, empty rows; wave widths 16 and 32, tied and hostile scores in turn.
std::vector<fx::Sweep<CandidateBlocksShape>> candidate_blocks_gpu_sweep();
// "soak": the soak's rotating shapes: block sizes 1, 64 and 512 at both wave widths, ragged and
// full rows, tied and hostile scores.
std::vector<fx::Sweep<CandidateBlocksShape>> candidate_blocks_soak_sweep();
// "sglang": level one alone (K = 0), as SGLang's candidate-block ops publish it: block sizes 7 to
// 128, every block, nb at its maximum, empty and ragged rows, tied and hostile scores.
std::vector<fx::Sweep<CandidateBlocksShape>> candidate_blocks_sglang_sweep();

class CandidateBlocksCase : public ShapedCase<CandidateBlocksShape>, public Foreign {
 public:
  explicit CandidateBlocksCase(CandidateBlocksShape shape) : ShapedCase(shape) {}
  // From a case file's inputs, starting from the shape the file states (len, ties, hostile).
  explicit CandidateBlocksCase(const fx::Tensors& in, const CandidateBlocksShape& stated = {});
  static std::vector<fx::NamedSweep<CandidateBlocksShape>> sweeps();
  // The case layout, declared once (the case-file reader and --list derive from it).
  static InputDecls declared_inputs();
  // dsv4-bench's rows and a launch's work (candidate_blocks_bench.cpp).
  static std::vector<BenchRow> bench_rows();
  fx::Work work(const fx::Tensors& in, const fx::Tensors& want) const override;

  std::string family() const override { return "candidate_blocks"; }
  fx::Tensors draw(fx::Rng& rng) const override;
  std::vector<fx::OutputSpec> outputs(const fx::Tensors& in) const override;
  fx::Tensors reference(const fx::Tensors& in) const override;
  // Level one alone: the kernel's level-two keys (K = 1), which no output holds.
  std::vector<fx::ScratchSpec> scratch(const fx::Tensors& in) const override;
  void launch(const fx::DeviceTensors& dev, gpu::Stream s) const override;
  std::string cannot_run() const override;
  ::testing::AssertionResult compare_foreign(const fx::OutputSpec& spec, const st::Tensor& got,
                                             const st::Tensor& want,
                                             const fx::Tensors& in) const override;
};

// A published block list ([rows, nb]) normalised: the pad values SGLang writes, -1 and num_blocks
// (the row's block count n_blocks[b], or `total`, the block count of the score width, which
// SGLang's packed lists pad with), become -1, and each row ascends with -1 last. Any other value
// at or past the row's block count is no pad: it stays, and `bad_pad` (when given) names the
// first such entry of each row ("" for a row without one).
std::vector<int32_t> normalise_blocks(std::vector<int32_t> blocks, size_t nb,
                                      const std::vector<int64_t>& n_blocks, int64_t total,
                                      std::vector<std::string>* bad_pad = nullptr);

}  // namespace dsv4::cases

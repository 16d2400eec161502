// The indexer_topk kernel case: case layout, draw, reference, launch and comparator of the per-row
// top-K with page transform and sorted output, shared by the GPU test, dsv4-replay and the bench.
#pragma once

// Case layout: in.scores F32 [B, stride], in.lens I32 [B], in.K I64, in.sorted I32 (0 or 1),
// optional in.width I64 (default stride), optional in.page_table I32 [B, pages] with
// in.page_bits I32 (the page transform), optional in.wave I32 (the sort's logical wave width;
// default the device's), optional in.select I32 (ref::indexer_topk::Select: 0 dsv4, the default
// and the project's kernel; 1 SGLang's exactly-K radix select; 2 that then SGLang's
// mask_topk_scores), optional in.raw_out I32 (default 1; 0: no raw output, and a sorted paged row
// is then sorted by slot, as SGLang sorts it). Outputs: out I32 [B, K] (paged when a page table is
// given, else raw) and, with a page table and raw_out, raw I32 [B, K]. Sorted outputs compare bit
// for bit; unsorted outputs compare as per-row sets with the -1s last (the kernel's order among
// selections is unspecified). A foreign source (cases::Foreign) is judged tie-tolerantly: any
// tied index at the cut-off, sorted rows ascending (by slot or by raw index for a paged row), -1
// last (anywhere under the mask step).

#include <cstdint>
#include <string>

#include "dsv4/cases/bench_rows.hpp"
#include "dsv4/cases/declared_inputs.hpp"
#include "dsv4/cases/foreign.hpp"
#include "dsv4/cases/shaped_case.hpp"
#include "dsv4/fixtures/case_sweep.hpp"

namespace dsv4::cases {

namespace st = fx::st;

enum class ScoreKind { kNormal, kTies, kHostile };

struct IndexerTopkShape {
  int64_t B = 1;
  int64_t width = 1024;
  int64_t stride = 0;  // 0: width
  int64_t K = 512;
  int64_t len =
      -1;  // every row's length; -1: ragged lengths in [0, width] (0, 1, K, K+1 among them)
  bool sorted = false;
  int wave = 0;           // 0: the device's
  int page_bits = -1;     // -1: no page transform
  bool permuted = false;  // a permuted page table, else the identity
  ScoreKind scores = ScoreKind::kNormal;
  int select = 0;         // ref::indexer_topk::Select
  bool raw_out = true;    // the raw output beside a paged one
  fx::Vars vars() const;  // the case's identity (fx::Vars: str(), id())
  std::string str() const { return vars().str(); }
  static IndexerTopkShape from_vars(fx::VarsReader& r);  // the inverse of vars()
  bool operator==(const IndexerTopkShape&) const = default;
};

// The named sweeps (dsv4-replay --draw --sweep NAME; the GPU test instantiates from them).
// "gpu": K 512, 1024, 2048 over lengths around K and the block edges up to 65537, batches 1 to
// 129, ragged rows; sorted or not, wave widths, identity or permuted page tables, tied and
// hostile scores, strided rows in turn.
std::vector<fx::Sweep<IndexerTopkShape>> indexer_topk_gpu_sweep();
// "soak": the soak's rotating shapes: sorted at each wave width and unsorted, ragged and full
// rows, a permuted page table, tied and hostile scores, a strided row.
std::vector<fx::Sweep<IndexerTopkShape>> indexer_topk_soak_sweep();

class IndexerTopkCase : public ShapedCase<IndexerTopkShape>, public Foreign {
 public:
  explicit IndexerTopkCase(IndexerTopkShape shape) : ShapedCase(shape) {}
  // From a case file's inputs, starting from the shape the file states (len, scores, permuted).
  explicit IndexerTopkCase(const fx::Tensors& in, const IndexerTopkShape& stated = {});
  static std::vector<fx::NamedSweep<IndexerTopkShape>> sweeps();
  // The case layout, declared once (the case-file reader and --list derive from it).
  static InputDecls declared_inputs();
  // dsv4-bench's rows and a launch's work (indexer_topk_bench.cpp).
  static std::vector<BenchRow> bench_rows();
  fx::Work work(const fx::Tensors& in, const fx::Tensors& want) const override;

  std::string family() const override { return "indexer_topk"; }
  fx::Tensors draw(fx::Rng& rng) const override;
  std::vector<fx::OutputSpec> outputs(const fx::Tensors& in) const override;
  fx::Tensors reference(const fx::Tensors& in) const override;
  void launch(const fx::DeviceTensors& dev, gpu::Stream s) const override;
  std::string cannot_run() const override;
  ::testing::AssertionResult compare(const fx::OutputSpec& spec, const st::Tensor& got,
                                     const st::Tensor& want, const fx::Tensors& in) const override;
  ::testing::AssertionResult compare_foreign(const fx::OutputSpec& spec, const st::Tensor& got,
                                             const st::Tensor& want,
                                             const fx::Tensors& in) const override;
};

// The tie-tolerant judgement of one row of raw indices `got` [K] of scores `row` with length
// `len` (clamped to [0, width]) under selection `sel`: "" when it is a selection the convention
// allows (any tied index at the cut-off), else why not. `sorted`: the selections must ascend by
// `order` (got itself when null), -1 last; unsorted, -1 last. Under kSglangMasked -1 may stand
// anywhere (fx::judge_selection under the indexer's rule).
std::string judge_topk_row(const float* row, int64_t len, size_t K, int sel, bool sorted,
                           const int32_t* got, const int32_t* order = nullptr);

// Why this device cannot run a sort of logical wave width W ("" when it can; W = 0 means the
// device's own); `built`: whether the family's kernels exist for W in this build. Shared by the
// top-k families (indexer_topk, candidate_blocks).
std::string wave_cannot_run(int W, bool built);

}  // namespace dsv4::cases

// The compact_pages kernel case: case layout, draw, reference, launch and comparator of the
// quantise (bf16 rows -> SGLang's paged layouts) and dequantise (slots -> bf16 / fp32 rows)
// kernels, shared by the GPU test, dsv4-replay and the bench.
#pragma once

// Case layout (declared_inputs(): the case-file reader and --list derive from it). Every case has
// in.layout I32 (KvLayout: 0 v41, 1 v41_fp4, 2 v4, 3 v4_fnuz) and in.page_size I64; a case file
// may give them instead as __metadata__ dsv4.layout (the layout's name) and dsv4.page_size, as a
// PyTorch-written file does (file_inputs()). One of four forms, whose inputs do not mix:
//   Quantise, slots:  in.src BF16 [T, S], in.slots I64 [T], in.pool U8 [num_pages, page_bytes]
//                     (the pool before), optional in.values_per_lane I32 -> pool (in place),
//                     errors I64 (rejected rows).
//   Quantise, pages:  in.k BF16 [num_pages, P, 512], optional in.values_per_lane -> pages U8
//                     [num_pages, page_bytes] from zeroed pages, slot s = row s of k (SGLang's
//                     torch references' form).
//   Dequantise, slots: in.pool U8 [num_pages, page_bytes], in.slots I64 [T], in.out BF16 or F32
//                     [T, S] (the output before) -> out (in place), errors I64.
//   Dequantise, pages: in.pages U8 [num_pages, page_bytes] -> k BF16 [num_pages, P, 512].
// Every form takes an optional in.variant I32 (the kernel variant). The page forms' in.slots
// (0..n-1, n = num_pages * P) and in.counter I64 (0, the kernel's error count) are implicit: a
// case file may hold them (a drawn one does) or leave them out.
// Every output is compared bit for bit; a page mismatch names its first differing byte as page,
// row, data or scale byte and tile (or padding).

#include <cstdint>
#include <string>

#include "dsv4/cases/bench_rows.hpp"
#include "dsv4/cases/declared_inputs.hpp"
#include "dsv4/cases/shaped_case.hpp"
#include "dsv4/fixtures/case_sweep.hpp"
#include "dsv4/fixtures/generators.hpp"
#include "dsv4/ref/formats/page_layout.hpp"

namespace dsv4::cases {

namespace st = fx::st;

enum class CompactOp { kQuantize, kDequantizeBf16, kDequantizeF32 };

struct CompactPagesShape {
  CompactOp op = CompactOp::kQuantize;
  KvLayout layout = KvLayout::kV41;
  int64_t page_size = 64;
  int64_t T = 0;  // rows (slot form); whole-page form: num_pages * page_size
  int64_t num_pages = 1;
  int64_t stride = 0;        // src_stride (quantise) or out_stride (dequantise); 0: 512
  int values_per_lane = 0;   // quantise kernel; 0: the layout's default
  int variant = 0;           // kernel variant (Options::variant, DequantOptions::variant)
  bool whole_pages = false;  // the pages form (no slots, no counter)
  fx::IndexMix mix{};        // how slots are drawn (hostile values mixed in)
  fx::Vars vars() const;     // the case's identity (fx::Vars: str(), id())
  std::string str() const { return vars().str(); }
  static CompactPagesShape from_vars(fx::VarsReader& r);  // the inverse of vars()
  bool operator==(const CompactPagesShape&) const = default;
};

// The named sweeps (dsv4-replay --draw --sweep NAME; the GPU test instantiates from them).
// "gpu": every layout, op and page size (1, 2, 7, 64, 128, 256) at 0, 1, 300 and 4096 rows.
std::vector<fx::Sweep<CompactPagesShape>> compact_pages_gpu_sweep();
// "options": every values-per-lane choice, strided rows, graph launches, both kernel variants.
std::vector<fx::Sweep<CompactPagesShape>> compact_pages_options_sweep();
// "soak": the soak's rotating shapes: quantise at each supported lane width and both variants,
// whole pages, dequantise to bf16 and f32 by each variant, every layout.
std::vector<fx::Sweep<CompactPagesShape>> compact_pages_soak_sweep();

class CompactPagesCase : public ShapedCase<CompactPagesShape> {
 public:
  explicit CompactPagesCase(CompactPagesShape shape);
  // From a case file's inputs (file_inputs(), checked against declared_inputs() first; throws
  // st::FormatError for what the declaration cannot state: a layout or page size out of range,
  // rows of a page that do not fit them, inputs of two forms). Starts from the shape the file
  // states.
  explicit CompactPagesCase(const fx::Tensors& in, const CompactPagesShape& stated = {});
  static std::vector<fx::NamedSweep<CompactPagesShape>> sweeps();
  // The case layout, declared once.
  static InputDecls declared_inputs();
  // A case file's inputs with in.layout / in.page_size taken from its __metadata__ (dsv4.layout,
  // dsv4.page_size) when absent, and the page forms' implicit in.slots and in.counter added.
  static fx::Tensors file_inputs(const fx::Case& c);
  // dsv4-bench's rows and a launch's work (compact_pages_bench.cpp).
  static std::vector<BenchRow> bench_rows();
  fx::Work work(const fx::Tensors& in, const fx::Tensors& want) const override;

  std::string family() const override { return "compact_pages"; }
  fx::Tensors draw(fx::Rng& rng) const override;
  std::vector<fx::OutputSpec> outputs(const fx::Tensors& in) const override;
  fx::Tensors reference(const fx::Tensors& in) const override;
  void launch(const fx::DeviceTensors& dev, gpu::Stream s) const override;
  ::testing::AssertionResult compare(const fx::OutputSpec& spec, const st::Tensor& got,
                                     const st::Tensor& want, const fx::Tensors& in) const override;
};

// Where byte `offset` of a pool lies: "page 2, row 5, data byte 40 (tile 1)", "page 0, row 3,
// scale byte 7 (tile 7)", "page 1, v4 pad byte of row 4", "page 1, padding byte 12".
std::string describe_pool_byte(KvLayout l, int64_t page_size, uint64_t offset);

// Rows whose tiles follow SGLang's hostile rules: ordinary tiles at scales across bf16's range,
// and about one tile in four all zeros (signed), below the layout's floor, holding a NaN, +-inf,
// an amax of exactly 448 * 2^k (or 240 * 2^k, 6 * 2^k), or bf16 values near the fp32 maximum.
// Gaps of a strided layout hold NaN.
std::vector<bf16> hostile_rows(fx::Rng& rng, KvLayout l, size_t T, size_t stride);

}  // namespace dsv4::cases

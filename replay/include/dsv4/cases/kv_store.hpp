// The kv_store kernel case: case layout, draw, reference, launch and comparator of the row scatter
// and of the fused RMSNorm + RoPE + bf16 store, shared by the GPU test, dsv4-replay and the bench.
#pragma once

// Case layout. Scatter: in.kv BF16 [T, S], in.loc I64 [T], in.pool BF16 [R, P] (the pool before
// the store), in.width I64 (optional in a case file, default S). The fused store adds in.weight
// F32 [width], in.cos_sin F32 [n_pos, rope_dim], in.positions I64 [T], in.eps F32 (optional,
// default 1e-6) and in.lanes I32 (the kernel's lane count, which fixes its fp32 order; a case
// without it comes from another implementation). Outputs: pool BF16 [R, P] (in place, starting
// from in.pool) and errors I64 [] (rejected rows, the launcher's counter). The scatter's pool is
// compared bit for bit; the fused store's too, except that every NaN equals every NaN (the
// reference leaves a NaN's sign and payload to the platform).

#include <cstdint>
#include <string>

#include "dsv4/cases/bench_rows.hpp"
#include "dsv4/cases/declared_inputs.hpp"
#include "dsv4/cases/shaped_case.hpp"
#include "dsv4/fixtures/case_sweep.hpp"
#include "dsv4/fixtures/generators.hpp"

namespace dsv4::cases {

namespace st = fx::st;

struct KvStoreShape {
  int64_t T = 0;  // rows to store
  int64_t R = 0;  // pool rows
  int64_t width = 512;
  int64_t src_stride = 0;   // 0: width
  int64_t pool_stride = 0;  // 0: width
  int lanes = 0;            // 0: scatter_rows; 16, 32, 64: norm_rope_store with that many lanes
  int64_t n_pos = 0;        // rows of the RoPE table; 0: clamp(4T, 64, 4096)
  fx::IndexMix mix{};       // how loc is drawn (hostile values mixed in)
  // Fused store: redraw each stored row until its bf16 values under this lane count differ from
  // those under some other lane count, so the case pins the fp32 summation order (golden files).
  bool order_sensitive = false;
  // Fused store without in.lanes ("any-order"): the case of another implementation's fp32 order
  // (SGLang's tl.sum + tl.rsqrt), its written rows judged within the reference's bound of the fp64
  // value; `lanes` still picks the project's kernel (and the reference's want.pool).
  bool any_order = false;
  fx::Vars vars() const;  // the case's identity (fx::Vars: str(), id())
  std::string str() const { return vars().str(); }
  static KvStoreShape from_vars(fx::VarsReader& r);  // the inverse of vars()
  bool operator==(const KvStoreShape&) const = default;
};

// The named sweeps (dsv4-replay --draw --sweep NAME; the GPU test instantiates from them).
// "gpu": every lane count (0: the plain scatter), fixed and seeded random row counts, four widths.
std::vector<fx::Sweep<KvStoreShape>> kv_store_gpu_sweep();
// "strided-graph": strided rows and pools, and graph launches, at width 512.
std::vector<fx::Sweep<KvStoreShape>> kv_store_strided_graph_sweep();
// "soak": the soak's rotating shapes: the scatter and the fused norm-RoPE store at each lane count.
std::vector<fx::Sweep<KvStoreShape>> kv_store_soak_sweep();
// "sglang": the fused store without in.lanes (any-order), the cases SGLang's fused norm + RoPE
// applies to: row counts from 1 to 4096, DeepSeek-V4's widths 512 and 576 and a narrow one.
std::vector<fx::Sweep<KvStoreShape>> kv_store_sglang_sweep();

class KvStoreCase : public ShapedCase<KvStoreShape> {
 public:
  explicit KvStoreCase(KvStoreShape shape);
  // From a case file's inputs (checked; throws st::FormatError or std::invalid_argument).
  // Starts from the shape the file states (order_sensitive).
  explicit KvStoreCase(const fx::Tensors& in, const KvStoreShape& stated = {});
  static std::vector<fx::NamedSweep<KvStoreShape>> sweeps();
  // The case layout, declared once (the case-file reader and --list derive from it).
  static InputDecls declared_inputs();
  // dsv4-bench's rows and a launch's work (kv_store_bench.cpp).
  static std::vector<BenchRow> bench_rows();
  fx::Work work(const fx::Tensors& in, const fx::Tensors& want) const override;
  bool fused() const { return fused_; }

  std::string family() const override { return "kv_store"; }
  fx::Tensors draw(fx::Rng& rng) const override;
  std::vector<fx::OutputSpec> outputs(const fx::Tensors& in) const override;
  fx::Tensors reference(const fx::Tensors& in) const override;
  void launch(const fx::DeviceTensors& dev, gpu::Stream s) const override;
  std::string cannot_run() const override;
  ::testing::AssertionResult compare(const fx::OutputSpec& spec, const st::Tensor& got,
                                     const st::Tensor& want, const fx::Tensors& in) const override;

 private:
  bool fused_ = false;
  bool lanes_given_ = true;  // false: a fused case from another implementation's fp32 order
};

// Writes the special rows of the fused store's specification (dsv4/ref/kv_store.hpp) into rows
// 0..7 of a drawn case, each stored to its own slot t: all zeros; zeros and one NaN; an +inf; a
// -inf in the RoPE part; all subnormal; normal and subnormal mixed; values whose squares overflow
// fp32; a NaN in the RoPE part. Other rows naming slots 0..7 are turned into padding (-1). Needs
// T >= 8 and R >= 8.
void plant_special_rows(fx::Tensors& in);

// Every bf16 bit pattern (NaNs, infinities, subnormals): the row values a scatter must copy.
std::vector<bf16> raw_bf16_bits(fx::Rng& rng, size_t n);

}  // namespace dsv4::cases

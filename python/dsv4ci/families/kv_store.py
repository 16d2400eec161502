"""kv_store: SGLang's unified-KV row scatter and fused RMSNorm + RoPE on the family's cases.

Case layout (replay/include/dsv4/cases/kv_store.hpp): in.kv BF16 [T, S], in.loc I64 [T], in.pool
BF16 [R, P] -> pool (in place) and errors; the fused store adds in.weight, in.cos_sin [n_pos,
rope_dim] (SGLang's freqs_cis viewed as fp32 pairs), in.positions, in.eps, in.lanes (absent in an
any-order case: the sglang sweep, SGLang's fp32 order judged within the fp64 bound).

SGLang's scatter skips loc < 0 (and rows its caller marks invalid) but has no bounds check; its
callers mark nothing past the pool, and neither do they reach the kernel here: the mapping passes
them as invalid rows through the kernel's own `valid` argument. SGLang counts nothing: `errors`
is not judged (the mappings return None for it).
"""

import torch

from dsv4ci.ops import Op, register

RUNTIME = "sglang.srt.layers.attention.dsv4.unified_kv_kernels.runtime"
ROPE = "sglang.kernels.ops.attention.deepseek_v4_rope"
UKV = "python/sglang/srt/layers/attention/dsv4/unified_kv_kernels/"


def width(live):
    return int(live.scalar("width")) if "width" in live.inp else live.inp["kv"].shape[1]


def contiguous_rows(live):
    """None when the rows are contiguous, as SGLang's store requires, else why not."""
    W, kv, pool = width(live), live.inp["kv"], live.inp["pool"]
    if kv.shape[1] != W or pool.shape[1] != W:
        return "strided rows (kv stride %d, pool stride %d, width %d): SGLang's store writes " \
               "contiguous rows of width head_dim" % (kv.shape[1], pool.shape[1], W)
    return None


def scatter_applies(live):
    if "weight" in live.inp:
        return "a fused norm + RoPE case"
    return contiguous_rows(live)


def scatter(fn, live):
    """_scatter_rows(src, loc, dst, valid=...) as store_compressed_into_unified calls it."""
    loc, pool = live.inp["loc"].contiguous(), live.out["pool"]
    valid = (loc < pool.shape[0]).to(torch.int32)
    fn(live.inp["kv"].contiguous(), loc, pool, dst_base=0, valid=valid)
    return {"errors": None}  # SGLang counts nothing: errors is not judged


def fused_applies(live):
    if "weight" not in live.inp:
        return "a plain scatter case"
    if "lanes" in live.inp:
        return ("the case pins the project's fp32 order bit for bit (in.lanes=%d: a lane-by-lane "
                "fmaf sum of squares and 1/sqrtf); SGLang's _fused_norm_rope_kernel sums the row "
                "with tl.sum and takes tl.rsqrt, another order (its cases carry no in.lanes and "
                "are judged within the fp64 bound: the sglang sweep's any-order cases)"
                % int(live.scalar("lanes")))
    return contiguous_rows(live)


def fused(fn, live):
    """fused_norm_rope_inplace_triton on every token (as the caller runs it on a padded batch, its
    positions clamped into the table), freqs_cis the complex view of in.cos_sin, then the bf16 rows
    of the tokens to store written to pool[loc]. No host synchronisation (no nonzero), so a graph
    can capture it: the rows not stored go to a spare row past the pool."""
    kv, loc, pos = live.inp["kv"], live.inp["loc"], live.inp["positions"]
    pool, cs = live.out["pool"], live.inp["cos_sin"]
    n_pos, R = cs.shape[0], pool.shape[0]
    stored = (loc >= 0) & (loc < R) & (pos >= 0) & (pos < n_pos)
    x = kv.clone().contiguous()
    eps = float(live.scalar("eps")) if "eps" in live.inp else 1e-6
    freqs = torch.view_as_complex(cs.float().reshape(n_pos, -1, 2).contiguous())
    if n_pos:  # else no token has a position to store at
        fn(x, live.inp["weight"], eps, freqs, positions=pos.clamp(0, n_pos - 1).contiguous())
    spare = torch.cat((pool, pool.new_zeros((1, pool.shape[1]))))  # row R: every row not stored
    spare.index_copy_(0, torch.where(stored, loc, torch.full_like(loc, R)), x.to(pool.dtype))
    pool.copy_(spare[:R])
    return {"errors": None}  # SGLang counts nothing: errors is not judged


register(Op(
    family="kv_store",
    name="unified_kv_kernels.runtime._scatter_rows",
    module=RUNTIME,
    attr="_scatter_rows",
    platforms=("cuda", "hip"),
    backend="triton",
    sweeps=("gpu",),
    applies=scatter_applies,
    call=scatter,
    standin="dsv4ci.standins.kv_store:_scatter_rows",
    files=(UKV + "runtime.py", UKV + "paged_decode_indices.py", UKV + "paged_decode.py",
           UKV + "paged_prefill.py"),
    notes="The unified-KV scatter (store_compressed_into_unified): loc < 0 and valid == 0 rows are "
          "skipped; a loc past the pool is written out of bounds (no check, runtime.py "
          "_scatter_rows_kernel), so the mapping marks such rows invalid (SGLang counts nothing: errors is not judged).",
))

register(Op(
    family="kv_store",
    name="deepseek_v4_rope.fused_norm_rope_inplace_triton",
    module=ROPE,
    attr="fused_norm_rope_inplace_triton",
    platforms=("cuda", "hip"),
    backend="triton",
    sweeps=("gpu", "sglang"),
    applies=fused_applies,
    call=fused,
    standin="dsv4ci.standins.kv_store:fused_norm_rope_inplace_triton",
    files=("python/sglang/kernels/ops/attention/deepseek_v4_rope.py",),
    notes="SGLang's fp32 order is not the project's: tl.sum over the whole row and tl.rsqrt "
          "(deepseek_v4_rope.py _fused_norm_rope_kernel) where the reference (in.lanes) pins a "
          "lane-by-lane fmaf sum and 1/sqrtf, so a value one bf16 step away would be a MISMATCH "
          "under the case's bitwise rule, not a bug: the op skips a case with in.lanes, and runs "
          "on a fused case without it (judged within the fp64 bound), the sglang sweep's any-order "
          "cases. "
          "A position outside freqs_cis is read out of bounds (no check): the "
          "mapping withholds such rows, as the reference rejects them (errors is not judged).",
))

"""sampling_renorm: SGLang's top-k / top-p renormalisation ops mapped onto the family's case."""

import torch

from ..ops import Op, register

_STANDIN = "dsv4ci.standins.sampling_renorm:"
_RENORM = "python/sglang/kernels/ops/sampling/renorm.py"
_TRITON = "python/sglang/kernels/ops/sampling/renorm_triton.py"
# renorm.py's pivots read the device back, so SGLang's renormalisation is never graph-captured.
_NOT_CAPTURABLE = ("renorm.py's pivots read the device back (top_k_pivots: int(top_ks.max()"
                   ".item()); top_p_pivots: bool(overflow.any()))")


def not_probabilities(live):
    """Why the case's rows are no probability rows (NaN, an infinity or a negative entry), or None.

    SGLang's renormalisation is defined on probabilities: it keeps +inf (inf / inf = NaN), lets a NaN
    pivot keep nothing and keeps negative entries when k reaches V, where the reference counts such
    entries as weight 0. No SGLang code states a rule for them, so those cases are not judged.
    """
    x = live.case.inputs["probs"]
    bad = ~torch.isfinite(x) | (x < 0)
    if bool(bad.any()):
        return f"{int(bad.sum())} entries are NaN, infinite or negative (no probability row)"
    return None


def _top_k_case(live):
    return not_probabilities(live) if "k" in live.inp else "a top-p case"


def _top_p_case(live):
    return not_probabilities(live) if "p" in live.inp else "a top-k case"


def _call_k(fn, live):
    return {"out": fn(live.inp["probs"], live.inp["k"])}


def _call_k_clamped(fn, live):
    # SGLang's callers clamp k to [1, V] before FlashInfer's kernel (its speculative and sampling code).
    return {"out": fn(live.inp["probs"], live.inp["k"].clamp(1, live.inp["probs"].shape[1]))}


def _call_p(fn, live):
    return {"out": fn(live.inp["probs"], live.inp["p"])}


_PIVOT_NOTES = (
    "renorm.py's pivot (shared by renorm_triton.py): k clamped to [1, V] (k <= 0 keeps the maximum "
    "and its ties); top-p keeps an entry while the mass before it in descending order is at most "
    "sum(row) - (1 - p), the rule that keeps one more value where a kept mass equals p exactly "
    "(in.top_p_rule = 1); a row with nothing kept is zeros. top_k_pivots reads k.max() on the host "
    "(no graph capture).")

register(Op(
    family="sampling_renorm", name="renorm_triton.top_k_renorm_probs_triton",
    module="sglang.kernels.ops.sampling.renorm_triton", attr="top_k_renorm_probs_triton",
    platforms=("hip",), backend="triton", shape={"k-clamp": ""}, applies=_top_k_case, call=_call_k,
    standin=_STANDIN + "top_k_renorm_probs_triton", not_capturable=_NOT_CAPTURABLE, files=(_TRITON, _RENORM), notes=_PIVOT_NOTES))

register(Op(
    family="sampling_renorm", name="renorm_triton.top_p_renorm_probs_triton",
    module="sglang.kernels.ops.sampling.renorm_triton", attr="top_p_renorm_probs_triton",
    platforms=("hip",), backend="triton", shape={"renorm-py": ""}, applies=_top_p_case, call=_call_p,
    standin=_STANDIN + "top_p_renorm_probs_triton", not_capturable=_NOT_CAPTURABLE, files=(_TRITON, _RENORM), notes=_PIVOT_NOTES))

register(Op(
    family="sampling_renorm", name="renorm.top_k_renorm_probs_torch",
    module="sglang.kernels.ops.sampling.renorm", attr="top_k_renorm_probs_torch",
    platforms=("cuda", "hip"), backend="torch", shape={"k-clamp": ""}, applies=_top_k_case,
    call=_call_k, standin=_STANDIN + "top_k_renorm_probs_torch", not_capturable=_NOT_CAPTURABLE, files=(_RENORM,),
    notes=_PIVOT_NOTES + " The portable path of devices with neither FlashInfer nor Triton."))

register(Op(
    family="sampling_renorm", name="renorm.top_p_renorm_probs_torch",
    module="sglang.kernels.ops.sampling.renorm", attr="top_p_renorm_probs_torch",
    platforms=("cuda", "hip"), backend="torch", shape={"renorm-py": ""}, applies=_top_p_case,
    call=_call_p, standin=_STANDIN + "top_p_renorm_probs_torch", not_capturable=_NOT_CAPTURABLE, files=(_RENORM,),
    notes=_PIVOT_NOTES + " The portable path of devices with neither FlashInfer nor Triton."))

register(Op(
    family="sampling_renorm", name="sgl_kernel.top_k_renorm_prob",
    module="sgl_kernel", attr="top_k_renorm_prob",
    platforms=("cuda",), backend="sgl-kernel", shape={"k-clamp": ""}, applies=_top_k_case,
    call=_call_k_clamped, standin=_STANDIN + "top_k_renorm_prob",
    notes="FlashInfer's top-k renorm (SGLang's CUDA path); SGLang clamps k to [1, V] before it."))

register(Op(
    family="sampling_renorm", name="sgl_kernel.top_p_renorm_prob",
    module="sgl_kernel", attr="top_p_renorm_prob",
    platforms=("cuda",), backend="sgl-kernel", applies=_top_p_case, call=_call_p,
    standin=_STANDIN + "top_p_renorm_prob",
    notes="FlashInfer's top-p renorm (SGLang's CUDA path): the pivot where the kept mass first "
          "reaches p (in.top_p_rule = 0, the default)."))

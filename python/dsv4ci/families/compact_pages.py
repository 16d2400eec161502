"""compact_pages: SGLang's DSV4 paged KV writer (v4) and readers (v4, v41, v41_fp4) on the family's cases.

Case layout (replay/include/dsv4/cases/compact_pages.hpp): in.layout (0 v41, 1 v41_fp4, 2 v4,
3 v4_fnuz), in.page_size; the slot form (in.src or in.out, in.slots, in.pool -> pool or out, and
errors) and the whole-page form (in.k -> pages, in.pages -> k).

SGLang's writer and readers trust their slots: no padding value, no bounds check (a slot of -1
would write before the pool). Its callers hand them only real slots, masking the others with the
writer's own write_mask; the mappings below do the same (the reader is given the real slots
only), so a hostile slot never reaches SGLang's kernel. SGLang counts nothing: `errors` is
not judged (the mappings return None for it).
"""

import importlib
from types import SimpleNamespace

import torch

from dsv4ci.ops import Op, register

LAYOUTS = ("v41", "v41_fp4", "v4", "v4_fnuz")
QUANT = "sglang.kernels.ops.attention.dsv4.quant_k_cache"
DEQUANT = "sglang.kernels.ops.attention.dsv4.dequant_k_cache"
SRC = "python/sglang/kernels/ops/attention/dsv4/"
FP8_SHIM = "python/sglang/kernels/ops/quantization/fp8_kernel.py"  # is_fp8_fnuz (shimmed)
QUANT_FILES = (SRC + "quant_k_cache.py", SRC + "index_buf_accessor.py")
DEQUANT_FILES = (SRC + "dequant_k_cache.py", SRC + "kv_layout.py")


def layout_of(live):
    v = int(live.scalar("layout"))
    if not 0 <= v < len(LAYOUTS):
        raise ValueError("compact_pages: in.layout=%d is not 0..3 (%s)" % (v, ", ".join(LAYOUTS)))
    return LAYOUTS[v]


def page_size(live):
    return int(live.scalar("page_size"))


def real_slots(live, slots, pool):
    """The mask of slots inside the pool (negative slots are padding), on the device."""
    total = pool.shape[0] * page_size(live)
    return (slots >= 0) & (slots < total)


def accessor(fn):
    """index_buf_accessor beside SGLang's quant_k_cache (the stand-in module holds both)."""
    name = fn.__module__
    if name.endswith(".quant_k_cache"):
        name = name[: -len("quant_k_cache")] + "index_buf_accessor"
    return importlib.import_module(name)


def quantize(fn, live):
    """quant_to_nope_fp8_rope_bf16_pack_triton on every row, then SetKAndS.execute as
    DeepSeekV4TokenToKVPool.set_key_buffer calls it, masked to the real slots."""
    whole = "k" in live.inp
    if whole:
        rows = live.inp["k"].reshape(-1, 512)
        buf = live.out["pages"]
        slots = torch.arange(rows.shape[0], dtype=torch.int64, device=rows.device)
    else:
        rows = live.inp["src"][:, :512]
        buf = live.out["pool"]
        slots = live.inp["slots"].contiguous()
    mask = real_slots(live, slots, buf)
    pack = fn(rows.contiguous())
    accessor(fn).SetKAndS.execute(
        pool=SimpleNamespace(page_size=page_size(live)), buf=buf, loc=slots,
        nope_fp8_rope_bf16_pack=pack, write_mask=mask.contiguous())
    if not whole:
        return {"errors": None}  # SGLang counts nothing: errors is not judged


def dequantize(fn, live):
    """dequantize_k_cache_paged on the real slots (layout v4, v41 or v41_fp4), its bf16 rows
    written to their places in the output (the others keep their start state)."""
    layout = layout_of(live)
    if "pages" in live.inp:
        pool = live.inp["pages"]
        n = pool.shape[0] * page_size(live)
        slots = torch.arange(n, dtype=torch.int64, device=pool.device)
        fn(pool, slots, page_size(live), out=live.out["k"].view(n, 1, 512),
           layout="v4" if layout == "v4_fnuz" else layout)
        return
    pool, slots = live.inp["pool"], live.inp["slots"]
    # Every slot read (one outside the pool reads slot 0 instead) and only the real ones kept: no
    # data-dependent size, so the mapping reads nothing back and a captured graph follows new slots.
    mask = real_slots(live, slots, pool)
    safe = torch.where(mask, slots, torch.zeros_like(slots)).contiguous()
    rows = fn(pool, safe, page_size(live), layout="v4" if layout == "v4_fnuz" else layout)
    out = live.out["out"]
    out[:, :512] = torch.where(mask[:, None], rows[:, 0].to(out.dtype), out[:, :512])
    return {"errors": None}  # SGLang counts nothing: errors is not judged


# Per layout: data bytes a row, scale bytes a row, code bytes and scales read of a row.
ROW_BYTES = {"v4": (576, 8, 448, 7), "v4_fnuz": (576, 8, 448, 7), "v41": (512, 16, 512, 16),
             "v41_fp4": (256, 32, 256, 32)}


def nan_values(live):
    """How many values of the rows the reader is given come out NaN in fp32 (before the bf16
    cast): an fp8 NaN code, a v4 zero code times the infinite scale of byte 255, any v41 code
    under scale byte 255, any v41_fp4 code under an e4m3fn NaN scale."""
    layout, P = layout_of(live), page_size(live)
    pool = live.inp["pages"] if "pages" in live.inp else live.inp["pool"]
    if "pages" in live.inp:
        slots = torch.arange(pool.shape[0] * P, device=pool.device)
    else:
        slots = live.inp["slots"]
        slots = slots[real_slots(live, slots, pool)]
    data, stride, n_codes, n_scales = ROW_BYTES[layout]
    flat, base, r = pool.reshape(-1), (slots // P) * pool.shape[1], slots % P
    codes = flat[(base + r * data)[:, None] + torch.arange(n_codes, device=pool.device)].long()
    sc = flat[(base + P * data + r * stride)[:, None] + torch.arange(n_scales, device=pool.device)].long()
    if layout == "v41_fp4":
        return int(((sc & 0x7F) == 0x7F).sum()) * 16
    sc = sc.repeat_interleave(n_codes // n_scales, dim=1)
    if layout == "v41":
        return int((((codes & 0x7F) == 0x7F) | (sc == 255)).sum())
    nan_code = codes == 0x80 if layout == "v4_fnuz" else (codes & 0x7F) == 0x7F
    zero = codes == 0 if layout == "v4_fnuz" else (codes & 0x7F) == 0
    return int((nan_code | (zero & (sc == 255))).sum())


NAN_REASON = (
    "%d value(s) of the rows read are NaN: SGLang's bf16 cast (.to(tl.bfloat16)) writes every NaN "
    "as 0x7fff, where the reference keeps its sign and payload (quiet bit set) and the case is "
    "judged bit for bit; SGLang's own test compares with equal_nan=True (see the op's notes)")


def applies_to(layouts, quant):
    def applies(live):
        if ("src" in live.inp or "k" in live.inp) != quant:
            return "a %s case" % ("dequantise" if quant else "quantise")
        layout = layout_of(live)
        if layout not in layouts:
            return "layout %s (this op reads or writes %s)" % (layout, ", ".join(layouts))
        if not quant and "out" in live.inp and live.inp["out"].dtype != torch.bfloat16:
            return "an fp32 output (SGLang's reader writes bf16 rows)"
        if not quant:
            n = nan_values(live)
            if n:
                return NAN_REASON % n
        return None
    return applies


NAN_NOTES = (
    " NaN: the reader's bf16 cast is Triton's .to(tl.bfloat16) (dequant_k_cache.py "
    "_dequantize_k_cache_paged_kernel and the v41 kernels), which writes every NaN as 0x7fff (PTX "
    "cvt.rn.bf16.f32; Triton's AMD lowering before CDNA4), where the reference keeps the NaN's "
    "sign and payload with the quiet bit set (0x7fc0, 0xffc0) and the family is judged bit for "
    "bit; SGLang's own check (dequant_k_cache.py __main__) is assert_close(..., equal_nan=True), "
    "NaN for NaN. The op skips a case whose rows read hold a NaN value.")

SLOT_NOTES = (
    " Slots: SGLang has no padding value and no bounds check (index_buf_accessor.py "
    "_set_k_and_s_triton_kernel, dequant_k_cache.py _dequantize_k_cache_paged_kernel); its callers "
    "pass real slots only, and so does this mapping; SGLang counts nothing, so errors is not judged.")

for suffix, layout, platforms, flavour in (("", "v4", ("cuda",), "e4m3fn"),
                                            ("_fnuz", "v4_fnuz", ("hip",), "e4m3fnuz")):
    register(Op(
        family="compact_pages",
        name="quant_k_cache.quant_to_nope_fp8_rope_bf16_pack_triton+SetKAndS[%s]" % layout,
        module=QUANT,
        attr="quant_to_nope_fp8_rope_bf16_pack_triton",
        platforms=platforms,
        native_only=layout == "v4_fnuz",  # is_fp8_fnuz() is the platform's: off gfx942 it is fn
        backend="triton",
        sweeps=("gpu",),
        shape={"quantize": "", layout: ""},
        applies=applies_to((layout,), True),
        call=quantize,
        standin="dsv4ci.standins.compact_pages:quant_to_nope_fp8_rope_bf16_pack_triton" + suffix,
        files=QUANT_FILES + (FP8_SHIM,),
        notes=("SGLang's v4 writer (%s; is_fp8_fnuz() picks e4m3fnuz on gfx942, e4m3fn elsewhere, so "
               "gfx950 runs the v4 op): tile amax by tl.max (a NaN does not propagate), scale "
               "2^ceil(log2(max(amax, 1e-8)/M)); tl.clamp of a NaN value, which Triton leaves unspecified, "
               "stores +M (0x7e) on the H200 (Triton 3.6) where the reference stores -M (0xfe): a "
               "MISMATCH naming that byte (docs/DESIGN.md, foreign kernels); +inf "
               "gives scale byte 0x7e (int32 wrap-around of ceil(log2(inf)) + 127)." % flavour)
              + SLOT_NOTES,
    ))
    register(Op(
        family="compact_pages",
        name="dequant_k_cache.dequantize_k_cache_paged[%s]" % layout,
        module=DEQUANT,
        attr="dequantize_k_cache_paged",
        platforms=platforms,
        native_only=layout == "v4_fnuz",
        backend="triton",
        sweeps=("gpu",),
        shape={"dequantize_bf16": "", layout: ""},
        applies=applies_to((layout,), False),
        call=dequantize,
        standin="dsv4ci.standins.compact_pages:dequantize_k_cache_paged" + suffix,
        files=DEQUANT_FILES + (FP8_SHIM,),
        notes="SGLang's v4 reader: codes times exp2(scale - 127) (byte 255: inf), the rope part's "
              "stored bf16, one rounding to bf16." + NAN_NOTES + SLOT_NOTES,
    ))

for layout in ("v41", "v41_fp4"):
    register(Op(
        family="compact_pages",
        name="dequant_k_cache.dequantize_k_cache_paged[%s]" % layout,
        module=DEQUANT,
        attr="dequantize_k_cache_paged",
        platforms=("cuda", "hip"),
        backend="triton",
        sweeps=("gpu",),
        shape={"dequantize_bf16": "", layout: ""},
        applies=applies_to((layout,), False),
        call=dequantize,
        standin="dsv4ci.standins.compact_pages:dequantize_k_cache_paged",
        files=DEQUANT_FILES + (FP8_SHIM,),
        notes="dequantize_k_cache_paged_v41: v41 e4m3fn codes times the ue8m0 scale (0: 2^-127, "
              "255: NaN), v41_fp4 e2m1 codes times the e4m3fn scale, one rounding to bf16."
              + NAN_NOTES + SLOT_NOTES,
    ))

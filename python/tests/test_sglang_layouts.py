"""The case layouts of SGLang's conventions (the families' `sglang` sweeps): each op registered for
one applies to a drawn case of it, its stand-in matches the reference there, and the same outputs
with one written value changed are a MISMATCH."""

import functools
import os

import pytest
import torch

from dsv4ci import ops, replay
from dsv4ci.case import Case
from dsv4ci.live import LiveCase
from dsv4ci.standins import sparse_decode as sd

# triton_flashmla's stand-in with fp32 scores: SGLang's bf16 scores are outside the reference's
# tolerance wherever they run (test_sparse_decode), so the mapping is judged with FlashMLA's.
FP32_SCORES = functools.partial(sd.flash_mla_with_kvcache_triton, bf16_scores=False)

# (op, family, the shape drawn: a point of the family's sglang sweep, the output planted, the
# function run: None for the op's stand-in)
LAYOUTS = [
    ("deepseek_v4_rope.fused_norm_rope_inplace_triton", "kv_store",
     "T=64,R=99,W=512,lanes=32,any-order", "pool", None),
    ("compact_attention_hip.compact_attention_hip", "sparse_decode",
     "B=4,H=16,K=576,v41,P=64,extra=v41_fp4,Ke=64,Pe=1,finite-sinks", "out", None),
    ("compact_attention_hip.compact_attention_hip", "sparse_decode",
     "B=1,H=16,K=64,v41_fp4,P=64,extra=v41,Ke=32,Pe=1,S=2,rope,finite-sinks", "out", None),
    ("triton_flashmla.flash_mla_with_kvcache_triton", "sparse_decode",
     "B=2,H=16,K=2048,v4,P=64,extra=v4,Ke=64,Pe=64,finite-sinks", "out", FP32_SCORES),
    ("decode_attention_sm100._combine", "split_combine", "B=8,S=4,H=16,D=512,sink,sglang-natural",
     "out", None),
    ("decode_attention_sm100._combine", "split_combine", "B=2,S=16,H=128,D=512,sglang-natural",
     "out", None),
    ("candidate_blocks.candidate_block_indices", "candidate_blocks",
     "B=5,width=8193,len=1000,bs=64,nb=16,K=0,ties", "blocks", None),
    ("candidate_blocks_hip.select_candidate_blocks_hip", "candidate_blocks",
     "B=5,width=8193,ragged,bs=128,nb=16,K=0,hostile", "blocks", None),
]


def _op(name):
    return {o.name: o for o in ops.all_ops()}[name]


def _planted(got, start, name):
    """got with the first element of output `name` the op wrote (where it differs from the start
    state) changed: a float moved by half its magnitude plus 0.25, an index made 2^30 (no block,
    key or pad value of any case here)."""
    t = got[name].clone()
    flat, before = t.view(-1), start.reshape(-1)
    if t.is_floating_point():
        written = (flat.float() != before.float()) & flat.float().isfinite()
    else:
        written = flat != before
    assert bool(written.any()), f"the op wrote no finite {name}"
    i = int(written.nonzero()[0])
    x = float(flat[i])
    flat[i] = x + 0.5 * abs(x) + 0.25 if t.is_floating_point() else 2 ** 30
    return dict(got, **{name: t})


@pytest.mark.parametrize("op_name,family,spec,planted,fn", LAYOUTS, ids=[x[2] for x in LAYOUTS])
def test_standin_matches_on_the_layout_and_a_changed_value_does_not(op_name, family, spec, planted,
                                                                    fn, tool, tmp_path):
    op = _op(op_name)
    assert op.family == family and "sglang" in op.sweeps
    case = Case.load(replay.draw(tool, family, tmp_path / "drawn", shape=spec, seed=7)[0])
    live = LiveCase(case, "cpu", tool, str(tmp_path / "kept"), label=op.name,
                    source="dsv4-standin" if fn is None else "sglang")
    assert op.applies(live) is None, op.applies(live)
    fn = fn or op.function(standin=True)
    assert live.run(lambda lc: op.call(fn, lc)).ok

    live.reset()
    live._store(op.call(fn, live))
    got = _planted(live._outputs_cpu(), case.start_state(planted), planted)
    path = os.path.join(tmp_path, "planted.safetensors")
    case.with_got(got, **{"dsv4.source": "dsv4-standin"}).save(path)
    v = replay.judge(tool, path)
    assert v.exit_code == replay.EXIT_MISMATCH and v.verdict == "mismatch", v.summary()
    assert any(o["name"] == planted and not o["ok"] for o in v.report["outputs"]), v.summary()

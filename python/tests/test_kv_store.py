"""CPU tests of the kv_store family module: the scatter's padding and withheld rows, and the fused
norm + RoPE stand-in against its fp64 value and through the mapping."""

import math

import torch

from dsv4ci.families import kv_store as fam
from dsv4ci.standins import kv_store as si


class FakeLive:
    def __init__(self, inp, out):
        self.inp, self.out = inp, out

    def scalar(self, name):  # as LiveCase.scalar: a 0-d input on the host
        return self.inp[name].item()


def scatter_case(loc, R=6, W=16):
    torch.manual_seed(0)
    kv = torch.randn(len(loc), W).to(torch.bfloat16)
    pool = torch.full((R, W), -3.0).to(torch.bfloat16)
    inp = {"kv": kv, "loc": torch.tensor(loc, dtype=torch.int64), "pool": pool,
           "width": torch.tensor(W)}
    return FakeLive(inp, {"pool": pool.clone(), "errors": torch.tensor(-1)})


def test_scatter_skips_padding_and_withholds_rows_past_the_pool():
    live = scatter_case([4, -1, 6, 0, 2**62, -7])
    assert fam.scatter(si._scatter_rows, live) == {"errors": None}
    assert int(live.out["errors"]) == -1  # SGLang counts nothing: errors is left unjudged
    pool, kv = live.out["pool"], live.inp["kv"]
    assert torch.equal(pool[4], kv[0]) and torch.equal(pool[0], kv[3])
    untouched = [1, 2, 3, 5]
    assert torch.equal(pool[untouched], live.inp["pool"][untouched])


def test_scatter_refuses_strided_rows():
    live = scatter_case([0])
    live.inp["width"] = torch.tensor(8)
    assert "strided rows" in fam.scatter_applies(live)
    assert fam.scatter_applies(scatter_case([0])) is None


def rope_table(n_pos, rd):
    i = torch.arange(rd // 2, dtype=torch.float64)
    th = torch.arange(n_pos, dtype=torch.float64)[:, None] * 10000.0 ** (-2 * i / rd)
    return torch.stack([th.cos(), th.sin()], dim=-1).reshape(n_pos, rd).float()


def fp64_rows(kv, w, eps, cs, pos):
    x = kv.double()
    D, rd = x.shape[1], cs.shape[1]
    y = x / torch.sqrt((x * x).sum(1, keepdim=True) / D + eps) * w.double()
    f = cs.double()[pos]
    r, m = y[:, D - rd::2].clone(), y[:, D - rd + 1::2].clone()
    y[:, D - rd::2] = r * f[:, 0::2] - m * f[:, 1::2]
    y[:, D - rd + 1::2] = r * f[:, 1::2] + m * f[:, 0::2]
    return y


def test_fused_standin_within_a_bf16_step_of_fp64():
    torch.manual_seed(1)
    T, W, n_pos = 5, 512, 40
    kv = (torch.randn(T, W) * 4).to(torch.bfloat16)
    w = torch.rand(W) + 0.5
    cs = rope_table(n_pos, 64)
    pos = torch.tensor([0, 3, 39, 17, 8])
    x = kv.clone()
    si.fused_norm_rope_inplace_triton(x, w, 1e-6, torch.view_as_complex(cs.reshape(n_pos, 32, 2)), pos)
    want = fp64_rows(kv, w, 1e-6, cs, pos)
    err = (x.double() - want).abs()
    assert bool((err <= want.abs() * 2**-8 + 1e-6).all())
    assert float(err.max()) > 0  # rounded to bf16, not copied


def test_fused_mapping_withholds_rows_without_a_slot_or_position():
    torch.manual_seed(2)
    T, W, R, n_pos = 6, 128, 8, 16
    kv = torch.randn(T, W).to(torch.bfloat16)
    pool = torch.full((R, W), 9.0).to(torch.bfloat16)
    loc = torch.tensor([3, -1, 9, 5, 1, 0])
    pos = torch.tensor([2, 100, 1, 16, -4, 15])
    cs = rope_table(n_pos, 64)
    inp = {"kv": kv, "loc": loc, "pool": pool, "width": torch.tensor(W), "weight": torch.ones(W),
           "cos_sin": cs, "positions": pos, "eps": torch.tensor(1e-6)}
    live = FakeLive(inp, {"pool": pool.clone(), "errors": torch.tensor(-1)})
    assert fam.fused_applies(live) is None and fam.scatter_applies(live) is not None
    assert fam.fused(si.fused_norm_rope_inplace_triton, live) == {"errors": None}
    # row 1: padding (not checked); rows 2, 3, 4: past the pool, position 16 past the table, -4
    assert int(live.out["errors"]) == -1  # SGLang counts nothing: errors is left unjudged
    got = live.out["pool"]
    for t, slot in ((0, 3), (5, 0)):
        row = kv[t:t + 1].clone()
        si.fused_norm_rope_inplace_triton(row, torch.ones(W), 1e-6,
                                          torch.view_as_complex(cs.reshape(n_pos, 32, 2)),
                                          pos[t:t + 1])
        assert torch.equal(got[slot], row[0])
    untouched = [1, 2, 4, 5, 6, 7]
    assert torch.equal(got[untouched], pool[untouched])
    assert not math.isnan(float(got.float().sum()))


def test_fused_refuses_a_case_pinning_the_lane_order():
    # in.lanes pins the project's fp32 order bit for bit; SGLang's kernel sums in another one.
    W, n_pos = 128, 16
    inp = {"kv": torch.zeros(1, W).to(torch.bfloat16), "loc": torch.tensor([0]),
           "pool": torch.zeros(1, W).to(torch.bfloat16), "weight": torch.ones(W),
           "cos_sin": rope_table(n_pos, 64), "positions": torch.tensor([0])}
    assert fam.fused_applies(FakeLive(inp, {})) is None
    why = fam.fused_applies(FakeLive(dict(inp, lanes=torch.tensor(64)), {}))
    assert "in.lanes=64" in why and "tl.sum" in why

"""CPU tests of the compact_pages family module: the stand-ins' tile rules and page bytes, and the
mappings' handling of hostile slots (withheld from SGLang's writer and reader, counted)."""

from types import SimpleNamespace

import pytest
import torch

from dsv4ci.families import compact_pages as fam
from dsv4ci.standins import compact_pages as si


def bf16_row(values):
    row = torch.zeros(512, dtype=torch.float32)
    row[: len(values)] = torch.tensor(values, dtype=torch.float32)
    return row.to(torch.bfloat16)


@pytest.mark.parametrize("flavour", ["e4m3fn", "e4m3fnuz"])
def test_encode_fp8_inverts_every_code(flavour):
    table = si.fp8_values(flavour)
    codes = torch.arange(256)
    finite = ~torch.isnan(table)
    got = si.encode_fp8(table[finite], flavour)
    want = codes[finite].to(torch.uint8)
    if flavour == "e4m3fnuz":
        assert int((got != want).sum()) == 0
    else:  # -0 and +0 are distinct codes in e4m3fn
        assert torch.equal(got, want)


def test_encode_fp8_rounds_half_to_even():
    # 1.0625 lies halfway between 1.0 (0x38) and 1.125 (0x39): even code 0x38; 1.1875 -> 0x3a.
    got = si.encode_fp8(torch.tensor([1.0625, 1.1875, -1.0625]), "e4m3fn")
    assert got.tolist() == [0x38, 0x3A, 0xB8]


@pytest.mark.parametrize("flavour,M,neg_max", [("e4m3fn", 448.0, 0xFE), ("e4m3fnuz", 240.0, 0xFF)])
def test_v4_writer_tile_rules(flavour, M, neg_max):
    k = torch.stack([bf16_row([M * 4, 1.0]),                      # amax = M * 2^2: scale 2^2
                     bf16_row([1.0, float("nan"), 2.0]),           # NaN -> -M, amax 2
                     bf16_row([float("inf"), 3.0, -3.0]),          # inf tile: scale 0x7e
                     bf16_row([])])                                # zeros: scale 2^ceil(log2(1e-8/M))
    p = si.quant_to_nope_fp8_rope_bf16_pack_triton(k, flavour)
    assert p.scale_k_nope_ue8m0[0, 0] == 127 + 2
    assert p.k_nope_fp8[0, 0] == si.encode_fp8(torch.tensor([M]), flavour)[0]
    assert p.k_nope_fp8[1, 1] == neg_max
    assert p.scale_k_nope_ue8m0[2, 0] == 0x7E
    assert p.k_nope_fp8[2, 0] == neg_max and p.k_nope_fp8[2, 1] == 0
    assert p.k_nope_fp8[2, 2] == (0 if flavour == "e4m3fnuz" else 0x80)  # -0
    assert p.scale_k_nope_ue8m0[3, 0] == 127 + int(torch.tensor(1e-8 / M).log2().ceil())
    assert torch.equal(p.k_rope_bf16, k[:, 448:])


class FakeLive:
    """The part of LiveCase a mapping touches: inputs and outputs by name."""

    def __init__(self, inp, out):
        self.inp, self.out = inp, out

    def scalar(self, name):  # as LiveCase.scalar: a 0-d input on the host
        return self.inp[name].item()


def v4_case(slots, P=4, pages=2):
    pb = -(-P * 584 // 576) * 576
    torch.manual_seed(0)
    src = torch.randn(len(slots), 512).to(torch.bfloat16)
    pool = torch.full((pages, pb), 0xA5, dtype=torch.uint8)
    inp = {"layout": torch.tensor(2, dtype=torch.int32), "page_size": torch.tensor(P),
           "src": src, "slots": torch.tensor(slots, dtype=torch.int64), "pool": pool}
    return FakeLive(inp, {"pool": pool.clone(), "errors": torch.tensor(-1)})


def test_quantize_mapping_writes_real_slots_only():
    live = v4_case([5, -1, 8, 0, 2**40])  # 8 = past the 2 x 4 slots, 2^40 far past
    assert fam.quantize(si.quant_to_nope_fp8_rope_bf16_pack_triton, live) == {"errors": None}
    assert int(live.out["errors"]) == -1  # SGLang counts nothing: errors is left unjudged
    pool, before = live.out["pool"], live.inp["pool"]
    p = si.quant_to_nope_fp8_rope_bf16_pack_triton(live.inp["src"])
    # slot 5: page 1, row 1; slot 0: page 0, row 0
    assert torch.equal(pool[1, 576:576 + 448], p.k_nope_fp8[0])
    assert torch.equal(pool[0, 4 * 576:4 * 576 + 7], p.scale_k_nope_ue8m0[3])
    assert pool[0, 4 * 576 + 7] == 0xA5  # the pad byte is never written
    changed = (pool != before).nonzero()[:, 0].unique().tolist()
    assert changed == [0, 1]
    rows = {(int(i) // 576) for i in (pool[0] != before[0]).nonzero().flatten() if int(i) < 4 * 576}
    assert rows == {0}  # page 0: only row 0 (slot 0) of the data rows


@pytest.mark.parametrize("layout", ["v4", "v41", "v41_fp4"])
def test_dequantize_mapping_leaves_padding_rows(layout):
    P, pages = 4, 2
    L = {"v4": (576, 8, 576), "v41": (512, 16, 512), "v41_fp4": (256, 32, 256)}[layout]
    pb = -(-P * (L[0] + L[1]) // L[2]) * L[2]
    torch.manual_seed(1)
    pool = torch.randint(0, 256, (pages, pb), dtype=torch.uint8)
    slots = torch.tensor([3, -1, 9, 7], dtype=torch.int64)
    out = torch.full((4, 520), 7.0).to(torch.bfloat16)
    live = FakeLive({"layout": torch.tensor(fam.LAYOUTS.index(layout), dtype=torch.int32),
                     "page_size": torch.tensor(P), "pool": pool, "slots": slots, "out": out},
                    {"out": out.clone(), "errors": torch.tensor(-1)})
    assert fam.dequantize(si.dequantize_k_cache_paged, live) == {"errors": None}
    assert int(live.out["errors"]) == -1  # SGLang counts nothing: errors is left unjudged
    want = si.dequantize_k_cache_paged(pool, torch.tensor([3, 7]), P, layout=layout)[:, 0]
    got = live.out["out"]
    assert torch.equal(got[[0, 3], :512].view(torch.int16), want.view(torch.int16))
    assert torch.equal(got[[1, 2]], out[[1, 2]]) and torch.equal(got[:, 512:], out[:, 512:])


def test_v4_round_trip_within_a_sixteenth():
    torch.manual_seed(2)
    k = (torch.randn(8, 512) * 3).to(torch.bfloat16)
    P = 4
    buf = torch.zeros(2, -(-P * 584 // 576) * 576, dtype=torch.uint8)
    pack = si.quant_to_nope_fp8_rope_bf16_pack_triton(k)
    si.SetKAndS.execute(SimpleNamespace(page_size=P), buf, torch.arange(8), pack)
    back = si.dequantize_k_cache_paged(buf, torch.arange(8), P)[:, 0].float()
    x = k.float()
    assert torch.equal(back[:, 448:], x[:, 448:])
    scale = torch.ldexp(torch.ones(8, 7), pack.scale_k_nope_ue8m0.float() - 127).repeat_interleave(64, 1)
    assert bool(((back[:, :448] - x[:, :448]).abs() <= x[:, :448].abs() / 16 + scale * 2**-9 * 1.01).all())


def test_every_op_registered_with_its_standin():
    from dsv4ci.ops import all_ops

    mine = all_ops(families=["compact_pages"])
    assert {o.name for o in mine} >= {
        "dequant_k_cache.dequantize_k_cache_paged[v41]",
        "dequant_k_cache.dequantize_k_cache_paged[v41_fp4]",
        "dequant_k_cache.dequantize_k_cache_paged[v4]",
        "quant_k_cache.quant_to_nope_fp8_rope_bf16_pack_triton+SetKAndS[v4]"}
    for o in mine:
        assert callable(o.function(standin=True)), o.name


def dequant_live(layout, P=4, pages=2, slots=(3, -1, 6)):
    data, stride, _, _ = fam.ROW_BYTES[layout]
    pb = -(-P * (data + stride) // data) * data  # a page: whole data rows
    pool = torch.zeros(pages, pb, dtype=torch.uint8)
    out = torch.full((len(slots), 512), 7.0).to(torch.bfloat16)
    return FakeLive({"layout": torch.tensor(fam.LAYOUTS.index(layout), dtype=torch.int32),
                     "page_size": torch.tensor(P), "pool": pool,
                     "slots": torch.tensor(slots, dtype=torch.int64), "out": out},
                    {"out": out.clone(), "errors": torch.tensor(-1)})


def test_reader_casts_every_nan_to_0x7fff_as_triton_does():
    # Triton's .to(tl.bfloat16) gives every NaN 0x7fff; torch's CPU cast would give 0xffff.
    live = dequant_live("v41")
    pool, P = live.inp["pool"], 4
    pool[0, 3 * 512 + 0] = 0x7F  # slot 3, value 0: the e4m3fn NaN code
    pool[0, 3 * 512 + 1] = 0xFF  # value 1: -NaN
    pool[0, 3 * 512 + 2] = 0x38  # value 2: 1.0
    pool[0, P * 512 + 3 * 16 + 1] = 255  # slot 3, tile 1 (values 32..63): the NaN scale
    pool[0, P * 512 + 3 * 16 + 0] = 127  # tile 0: 2^0
    row = si.dequantize_k_cache_paged(pool, torch.tensor([3]), P, layout="v41")[0, 0]
    bits = row.view(torch.int16).int() & 0xFFFF
    assert bits[:2].tolist() == [0x7FFF, 0x7FFF] and bits[2] == 0x3F80
    assert set(bits[32:64].tolist()) == {0x7FFF}


@pytest.mark.parametrize("layout", ["v4", "v4_fnuz", "v41", "v41_fp4"])
def test_dequantize_refuses_rows_reading_a_nan(layout):
    live = dequant_live(layout)
    applies = fam.applies_to((layout,), False)
    assert applies(live) is None  # zero codes under zero scale bytes: no NaN
    data, stride, n_codes, n_scales = fam.ROW_BYTES[layout]
    pool, P = live.inp["pool"], 4
    pool[1, 1 * data + 5] = 0x80 if layout == "v4_fnuz" else 0x7F  # slot 5: not read
    pool[1, P * data + 1 * stride] = 0x7F if layout == "v41_fp4" else 255
    assert applies(live) is None
    pool[1, 2 * data + 5] = 0x80 if layout == "v4_fnuz" else 0x7F  # slot 6, value 5: read
    want = {"v4": 1, "v4_fnuz": 1, "v41": 1, "v41_fp4": 0}[layout]
    if layout == "v41_fp4":
        pool[1, P * data + 2 * stride + 3] = 0xFF  # slot 6, scale 3: 16 values under a NaN
        want = 16
    if layout in ("v4", "v4_fnuz"):
        pool[1, P * data + 2 * stride + 1] = 255  # slot 6, tile 1: zero codes times inf
        want += 64
    assert fam.nan_values(live) == want
    assert applies(live).startswith("%d value(s) of the rows read are NaN" % want)

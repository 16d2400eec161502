"""CPU tests of the indexer_topk family module: the publication of torch.topk's selection through
sort_map_topk's stand-in, with and without a page table."""

import torch

from dsv4ci.families import indexer_topk as fam
from dsv4ci.standins import indexer_topk as si


class FakeLive:
    def __init__(self, inp, out):
        self.inp, self.out = inp, out

    def scalar(self, name):  # as LiveCase.scalar: a 0-d input on the host
        return self.inp[name].item()


def case(page_bits=None, K=4):
    scores = torch.tensor([[0.5, 3.0, -1.0, 2.0, 9.0, 1.0, float("nan"), 7.0],
                           [5.0, 4.0, 1.0, float("nan"), float("nan"), 0.0, 0.0, 0.0],
                           [1.0, -2.0, 3.0, 0.0, 0.0, 0.0, 0.0, 8.0]])
    inp = {"scores": scores, "lens": torch.tensor([6, 3, 8], dtype=torch.int32),
           "K": torch.tensor(K), "sorted": torch.tensor(1, dtype=torch.int32),
           "width": torch.tensor(8)}
    out = {"out": torch.full((3, K), 77, dtype=torch.int32)}
    if page_bits is not None:
        inp["page_table"] = torch.tensor([[3, 0], [1, 2], [5, 4]], dtype=torch.int32)
        inp["page_bits"] = torch.tensor(page_bits, dtype=torch.int32)
        out["raw"] = torch.full((3, K), 77, dtype=torch.int32)
    return FakeLive(inp, out)


def test_sorted_selection_and_trivial_rows():
    live = case()
    assert fam.applies(live) is None
    fam.publish(si.sort_map_topk, live)
    # row 0: the 4 largest of its 6 keys (9, 3, 2, 1) ascending; row 1: len 3 <= K, 0 1 2 then -1
    assert live.out["out"][:2].tolist() == [[1, 3, 4, 5], [0, 1, 2, -1]]
    # row 2: 8, 3, 1 and one of the tied zeros (indices 3..6: any, as SGLang leaves it)
    r2 = live.out["out"][2].tolist()
    assert r2[0] == 0 and r2[1] == 2 and r2[2] in (3, 4, 5, 6) and r2[3] == 7


def test_paged_publication_maps_slots_beside_raw():
    live = case(page_bits=2)
    fam.publish(si.sort_map_topk, live)
    raw, out = live.out["raw"], live.out["out"]
    assert raw[:2].tolist() == [[1, 3, 4, 5], [0, 1, 2, -1]]
    # row 0: pages (3, 0) of 4 keys: raw 1 -> 3*4+1, 3 -> 15, 4 -> 0*4+0, 5 -> 1
    assert out[0].tolist() == [13, 15, 0, 1] and out[1].tolist() == [4, 5, 6, -1]


def test_k_past_the_width_leaves_minus_one():
    live = case(K=10)
    live.out["out"] = torch.full((3, 10), 77, dtype=torch.int32)
    fam.publish(si.sort_map_topk, live)
    assert live.out["out"][0].tolist() == [0, 1, 2, 3, 4, 5] + [-1] * 4


def test_applies_refuses_what_the_caller_never_publishes():
    live = case()
    live.inp["sorted"] = torch.tensor(0, dtype=torch.int32)
    assert "unsorted" in fam.applies(live)
    live = case(K=2048)
    assert "1024" in fam.applies(live)


def test_applies_refuses_a_selecting_row_with_a_negative_nan():
    # torch.topk (SGLang's caller) ranks -NaN above +inf; SGLang's radix key ranks it below -inf.
    live = case()
    live.inp["scores"][2, 5] = -float("nan")  # row 2: len 8 > K=4
    why = fam.applies(live)
    assert "1 row(s) longer than K=4 (first: row 2)" in why and "torch.topk" in why
    live = case()
    live.inp["scores"][1, 1] = -float("nan")  # row 1: len 3 <= K, the trivial path
    live.inp["scores"][0, 7] = -float("nan")  # row 0: past its length 6
    assert fam.applies(live) is None

"""CPU tests of the ring_layout family module: the window rows and the verify layout through the
mappings, against the rules of ref/ring_layout.hpp written out by hand."""

import torch

from dsv4ci.families import ring_layout as fam
from dsv4ci.standins import ring_layout as si


class FakeLive:
    def __init__(self, inp, out):
        self.inp, self.out = inp, out

    def scalar(self, name):  # as LiveCase.scalar: a 0-d input on the host
        return self.inp[name].item()


def geometry(ring=6, win=4, n_slots=3):
    return {"ring": torch.tensor(ring), "win": torch.tensor(win), "n_slots": torch.tensor(n_slots)}


def test_window_rows_packed_and_bad_tokens_counted():
    inp = dict(geometry(),
               batch_id=torch.tensor([0, -1, 1, 2, 5, -7], dtype=torch.int32),
               pos=torch.tensor([9, 3, 1, 2, 0, 4]),
               batch_slot=torch.tensor([2, 0, 3]))  # batch 2's slot is past the 3 slots
    D, win = 6, 4
    out = {"indptr": torch.full((D + 1,), -5, dtype=torch.int32),
           "rows": torch.full((D * win,), -5, dtype=torch.int32), "errors": torch.tensor(-1)}
    live = FakeLive(inp, out)
    assert fam.needs("window_rows")(live) is None
    assert fam.window_rows(si.write_v4_paged_decode_indices, live) == {"errors": None}
    # token 0: slot 2, pos 9 -> 4 rows 12 + (6..9) % 6; token 2: slot 0, pos 1 -> rows 0, 1
    assert live.out["indptr"].tolist() == [0, 4, 4, 6, 6, 6, 6]
    assert live.out["rows"][:6].tolist() == [12, 13, 14, 15, 0, 1]
    assert (live.out["rows"][6:] == -5).all()
    assert int(live.out["errors"]) == -1  # SGLang counts nothing: errors is left unjudged


def test_verify_locs_commit_mask_and_errors():
    inp = dict(geometry(),
               batch_slot=torch.tensor([1, -1, 0, 7]),
               verify_pos=torch.tensor([[4, 5, 6], [1, 2, 3], [-2, 7, 8], [0, 1, 2]]),
               commit_len=torch.tensor([2, 3, 9, 1], dtype=torch.int32))
    out = {"verify_loc": torch.full((4, 3), -5, dtype=torch.int64), "errors": torch.tensor(-1)}
    live = FakeLive(inp, out)
    assert fam.verify_locs(si.build_commit_inject_layout_triton, live) == {"errors": None}
    assert live.out["verify_loc"].tolist() == [[10, 11, -1], [-1, -1, -1], [-1, 1, 2],
                                               [-1, -1, -1]]
    assert int(live.out["errors"]) == -1  # SGLang counts nothing: errors is left unjudged


ALL_OUTPUTS = ("loc", "verify_loc", "indptr", "rows", "token_slot", "token_final_pos", "errors")


def test_ops_apply_to_a_case_of_every_launcher_and_judge_their_own_outputs():
    # A drawn case holds every launcher's inputs: each op reads its own and leaves the other
    # launchers' outputs (and errors) unproduced, so only what SGLang computes is judged.
    inp = dict(geometry(), batch_slot=torch.tensor([0]), verify_pos=torch.tensor([[0]]),
               commit_len=torch.tensor([1], dtype=torch.int32), slot=torch.tensor([0]),
               pos=torch.tensor([3]), final_pos=torch.tensor([3]),
               batch_id=torch.tensor([0], dtype=torch.int32), req_slot=torch.tensor([0]),
               prefill_indptr=torch.tensor([0, 1], dtype=torch.int32))
    out = {n: torch.full((8,), -5, dtype=torch.int32 if n in ("indptr", "rows") else torch.int64)
           for n in ALL_OUTPUTS}
    out["verify_loc"] = torch.full((1, 1), -5, dtype=torch.int64)
    live = FakeLive(inp, out)
    assert fam.needs("verify_locs")(live) is None and fam.needs("window_rows")(live) is None
    got = fam.verify_locs(si.build_commit_inject_layout_triton, live)
    assert got == {n: None for n in ALL_OUTPUTS if n != "verify_loc"}
    assert live.out["verify_loc"].tolist() == [[0]]  # slot 0, verify pos 0: ring row 0
    got = fam.window_rows(si.write_v4_paged_decode_indices, live)
    assert got == {n: None for n in ALL_OUTPUTS if n not in ("indptr", "rows")}
    assert live.out["indptr"][:2].tolist() == [0, 4]
    assert live.out["rows"][:4].tolist() == [0, 1, 2, 3]


def test_ops_refuse_a_case_without_their_launcher():
    inp = dict(geometry(), slot=torch.tensor([0]), pos=torch.tensor([0]))
    why = fam.needs("verify_locs")(FakeLive(inp, {}))
    assert "batch_slot, commit_len, verify_pos missing" in why
    assert "batch_id, batch_slot missing" in fam.needs("window_rows")(FakeLive(inp, {}))

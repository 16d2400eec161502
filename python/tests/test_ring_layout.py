"""CPU tests of the ring_layout family module: the window rows and the verify layout through the
mappings, against the rules of ref/ring_layout.hpp written out by hand."""

import torch

from dsv4ci.families import ring_layout as fam
from dsv4ci.standins import ring_layout as si


class FakeLive:
    def __init__(self, inp, out):
        self.inp, self.out = inp, out


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
    assert fam.only("window_rows")(live) is None
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


def test_ops_apply_to_their_launcher_only():
    inp = dict(geometry(), batch_slot=torch.tensor([0]), verify_pos=torch.tensor([[0]]),
               commit_len=torch.tensor([1], dtype=torch.int32), slot=torch.tensor([0]),
               pos=torch.tensor([0]))
    why = fam.only("verify_locs")(FakeLive(inp, {}))
    assert "pos, slot" in why

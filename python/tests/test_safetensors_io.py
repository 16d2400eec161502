"""The package's safetensors reader and writer: round trips, the C++ writer's files, refusals."""

import glob
import struct

import pytest
import torch

from dsv4ci import safetensors_io as st


def test_round_trip_of_every_dtype_and_metadata(tmp_path):
    ts = {
        "f64": torch.tensor([1.0, -2.5], dtype=torch.float64),
        "f32": torch.tensor([[float("nan"), float("inf")], [-0.0, 1e-40]]),
        "f16": torch.tensor([65504.0, -1.0], dtype=torch.float16),
        "bf16": torch.tensor([3.0, -7.5, float("-inf")], dtype=torch.bfloat16),
        "i64": torch.tensor([-(2**62), 5], dtype=torch.int64),
        "i32": torch.arange(7, dtype=torch.int32) - 3,
        "i16": torch.tensor([-32768, 32767], dtype=torch.int16),
        "i8": torch.tensor([-128, 127], dtype=torch.int8),
        "u8": torch.tensor([0, 255, 0xA5], dtype=torch.uint8),
        "b": torch.tensor([True, False]),
        "scalar": torch.tensor(1.5),
        "empty": torch.zeros(0, 4),
    }
    p = tmp_path / "x.safetensors"
    st.save(p, ts, {"dsv4.family": "smoke", "k": "v"})
    back, meta = st.load(p)
    assert meta == {"dsv4.family": "smoke", "k": "v"}
    assert set(back) == set(ts)
    for n, t in ts.items():
        assert back[n].dtype == t.dtype and back[n].shape == t.shape, n
        assert st.tensor_bytes(back[n]) == st.tensor_bytes(t), n


def test_larger_elements_first_so_every_tensor_is_aligned(tmp_path):
    p = tmp_path / "a.safetensors"
    st.save(p, {"a": torch.zeros(3, dtype=torch.uint8), "b": torch.zeros(2, dtype=torch.float64)})
    raw = p.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0
    import json

    h = json.loads(raw[8 : 8 + n])
    assert h["b"]["data_offsets"][0] == 0 and h["a"]["data_offsets"][0] == 16


def test_reads_every_golden_file_the_cpp_writer_wrote(golden):
    files = glob.glob(golden("*", "*.safetensors"))
    assert len(files) > 20, "the golden files are missing"
    for f in files:
        tensors, meta = st.load(f)
        assert meta.get("dsv4.family"), f
        assert any(n.startswith("in.") for n in tensors), f


@pytest.mark.parametrize(
    "blob, field",
    [
        (b"\x01\x00", "8-byte header length"),
        (struct.pack("<Q", 100) + b"{}", "runs past"),
        (struct.pack("<Q", 2) + b"[]", "not a JSON object"),
        (struct.pack("<Q", 4) + b"{x:1", "not JSON"),
    ],
)
def test_malformed_headers_are_refused_by_name(tmp_path, blob, field):
    p = tmp_path / "bad.safetensors"
    p.write_bytes(blob)
    with pytest.raises(st.FormatError, match=field):
        st.load(p)


def test_a_tensor_whose_bytes_disagree_with_its_shape_is_refused(tmp_path):
    import json

    h = json.dumps({"in.x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}).encode()
    p = tmp_path / "bad.safetensors"
    p.write_bytes(struct.pack("<Q", len(h)) + h + bytes(8))
    with pytest.raises(st.FormatError, match=r"'in.x': 8 bytes for F32 \[3\] \(needs 12\)"):
        st.load(p)


def test_unknown_dtype_is_refused_by_name():
    with pytest.raises(st.FormatError, match="'C64'"):
        st.torch_dtype("C64")

"""Tests for psrt.checkpoint's integrity checks (issue 10, item 6): a CRC-32C per tensor in
the header metadata, checked on every read, as TF's tensor bundle; DataLossError for a
corrupt or truncated file.

Files are corrupted the way a disk or a copy does it: bytes overwritten inside one tensor's
data region (found from the safetensors header), or the file cut short. The fake session of
tests/test_checkpoint.py stands in for psrt's session in the Saver tests.
"""

from __future__ import annotations

import json
import os
import re

import crc32c
import numpy as np
import pytest
import safetensors.numpy

from psrt import checkpoint as ckpt
from psrt import errors

from test_checkpoint import FakeSession, adam_model
CHECKSUM_MISMATCH = (r"Checksum does not match: stored (\d+) vs\. calculated on the restored "
                     r"bytes (\d+)")


# ---- helpers: the file layout, read independently of psrt --------------------------------------

def _bytes(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _header(path) -> tuple[dict, int]:
    """The safetensors header of ``path`` and the file offset where tensor data starts."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(n)), 8 + n


def _data_span(path, name: str) -> tuple[int, int]:
    """File offsets [start, end) of tensor ``name``'s data bytes."""
    header, base = _header(path)
    start, end = header[name]["data_offsets"]
    return base + start, base + end


def _corrupt(path, name: str, how: str = "flip") -> None:
    """Overwrites bytes inside tensor ``name``'s data: one bit of its middle byte ("flip"),
    its first 4 bytes with a float32 NaN ("nan"), or all of it with zeros ("zero")."""
    start, end = _data_span(path, name)
    data = bytearray(_bytes(path))
    if how == "flip":
        data[(start + end) // 2] ^= 0x10
    elif how == "nan":
        data[start:start + 4] = b"\x00\x00\xc0\x7f"
    else:
        data[start:end] = bytes(end - start)
    with open(path, "wb") as f:
        f.write(data)


def _snapshot(sess: FakeSession) -> dict[str, np.ndarray]:
    return {k: v.copy() for k, v in sess.values.items()}


def _assert_values(sess: FakeSession, want: dict[str, np.ndarray]) -> None:
    assert sorted(sess.values) == sorted(want)
    for k, v in want.items():
        assert sess.values[k].dtype == v.dtype, k
        np.testing.assert_array_equal(sess.values[k], v, err_msg=k)


def _fresh_target(seed: int = 9) -> tuple[FakeSession, list]:
    """A session with the same variables as adam_model and other values."""
    sess, var_list = adam_model(seed=seed)
    sess.values["global_step"] = np.array(-1, dtype=np.int64)
    return sess, var_list


# ---- the checksum table -------------------------------------------------------------------------

def test_checksum_table_is_crc32c_of_each_tensors_stored_bytes(tmp_path):
    """The "crc32c" metadata entry, recomputed here from the file's own bytes with the crc32c
    package, for every layout write_checkpoint_file accepts."""
    tensors = {
        "W": np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
        "strided": np.arange(24, dtype=np.float64).reshape(4, 6)[:, ::2],
        "fortran": np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)),
        "big_endian": np.arange(5, dtype=">i8"),
        "flag": np.array([True, False, True]),
        "step": np.int64(150),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    path = tmp_path / "m"
    # A "crc32c" entry in the given metadata (e.g. copied from another file) is replaced.
    ckpt.write_checkpoint_file(path, tensors, metadata={"crc32c": '{"W": 1}', "note": "x"})
    header, base = _header(path)
    meta = header["__metadata__"]
    assert sorted(meta) == ["crc32c", "format", "note"]
    table = json.loads(meta["crc32c"])
    raw = _bytes(path)
    expected = {}
    for name in tensors:
        start, end = header[name]["data_offsets"]
        expected[name] = crc32c.crc32c(raw[base + start:base + end])
    assert table == expected
    assert table["empty"] == 0
    assert table["big_endian"] == crc32c.crc32c(np.arange(5, dtype="<i8").tobytes())
    assert ckpt.CHECKSUMS_KEY == "crc32c"


# ---- corrupt data: every read path raises DataLossError -----------------------------------------

@pytest.mark.parametrize("name,how", [("W", "flip"), ("W", "nan"), ("b/Adam_1", "zero"),
                                      ("global_step", "flip"), ("table", "flip")])
def test_overwritten_tensor_bytes_are_data_loss_naming_file_and_tensor(tmp_path, name, how):
    sess, var_list = adam_model(seed=1)
    path = ckpt.Saver(var_list).save(sess, str(tmp_path / "model.ckpt"), global_step=7,
                                     write_state=False)
    stored = json.loads(ckpt.load_checkpoint(path).metadata["crc32c"])[name]
    _corrupt(path, name, how)

    target, target_vars = _fresh_target()
    before = _snapshot(target)
    with pytest.raises(errors.DataLossError, match=CHECKSUM_MISMATCH) as e:
        ckpt.Saver(target_vars).restore(target, path)
    message = str(e.value)
    assert path in message and repr(name) in message
    got_stored, computed = (int(x) for x in re.search(CHECKSUM_MISMATCH, message).groups())
    assert got_stored == stored and computed != stored
    # Nothing was assigned: not the corrupt tensor, not the intact ones.
    assert target.writes == 0
    _assert_values(target, before)

    # Every other read path that returns the tensor's value.
    reader = ckpt.load_checkpoint(path)
    with pytest.raises(errors.DataLossError, match=CHECKSUM_MISMATCH):
        reader.get_tensor(name)
    with pytest.raises(errors.DataLossError, match=repr(name)):
        ckpt.load_variable(path, name)
    with pytest.raises(errors.DataLossError, match=repr(name)):
        ckpt.read_checkpoint_file(path)
    # The intact tensors still read, each checked on its own (as TF's bundle reader).
    other = "b" if name != "b" else "W"
    np.testing.assert_array_equal(reader.get_tensor(other), sess.values[other])
    # Listing reads the header only.
    assert dict(ckpt.list_variables(path))[name] == list(sess.values[name].shape)


def test_truncated_file_is_data_loss_naming_the_tensors_cut_off(tmp_path):
    sess, var_list = adam_model()
    path = ckpt.Saver(var_list).save(sess, str(tmp_path / "model.ckpt"), global_step=3,
                                     write_state=False)
    header, base = _header(path)
    spans = sorted((v["data_offsets"][1], k) for k, v in header.items() if k != "__metadata__")
    last = spans[-1][1]
    raw = _bytes(path)
    torn = tmp_path / "model.ckpt-4"
    torn.write_bytes(raw[:-3])  # the last 3 bytes of the last tensor are gone

    target, target_vars = _fresh_target()
    before = _snapshot(target)
    for read in (lambda: ckpt.Saver(target_vars).restore(target, str(torn)),
                 lambda: ckpt.load_checkpoint(torn),
                 lambda: ckpt.read_checkpoint_file(torn),
                 lambda: ckpt.list_variables(torn)):
        with pytest.raises(errors.DataLossError, match="truncated") as e:
            read()
        assert str(torn) in str(e.value) and repr(last) in str(e.value)
    assert target.writes == 0
    _assert_values(target, before)

    # Cut in the middle: every tensor whose data lies past the end is counted.
    half = base + (spans[-1][0] // 2)
    torn.write_bytes(raw[:half])
    with pytest.raises(errors.DataLossError, match=r"truncated.* and \d+ more") as e:
        ckpt.load_checkpoint(torn)
    # Cut inside the header: the file is named, safetensors says why.
    torn.write_bytes(raw[:5])
    with pytest.raises(errors.DataLossError, match="model.ckpt-4.*not a valid safetensors"):
        ckpt.load_checkpoint(torn)
    # Bytes appended after the last tensor.
    torn.write_bytes(raw + b"\0" * 5)
    with pytest.raises(errors.DataLossError, match="5 unexpected bytes follow"):
        ckpt.load_checkpoint(torn)


def _write_raw(path, tensors: dict, metadata: dict) -> None:
    """A safetensors file with exactly this metadata, bypassing psrt's writer."""
    with open(path, "wb") as f:
        f.write(safetensors.numpy.save(tensors, metadata=metadata))


@pytest.mark.parametrize("table,match", [
    ("not json", "not valid JSON"),
    ('["W"]', "not a JSON object of tensor name to unsigned 32-bit int"),
    ('{"W": -1, "b": 2}', "unsigned 32-bit int"),
    ('{"W": 4294967296, "b": 2}', "unsigned 32-bit int"),
    ('{"W": true, "b": 2}', "unsigned 32-bit int"),
    ('{"W": 1}', r"no checksum for \['b'\]"),
    ('{"W": 1, "b": 2, "V": 3}', r"checksums of tensors not in the file: \['V'\]"),
])
def test_corrupt_checksum_table_is_data_loss(tmp_path, table, match):
    path = tmp_path / "m"
    _write_raw(path, {"W": np.ones(3, np.float32), "b": np.zeros(2, np.float32)},
               {"format": "psrt-ckpt-1", "crc32c": table})
    for read in (lambda: ckpt.load_checkpoint(path), lambda: ckpt.read_checkpoint_file(path)):
        with pytest.raises(errors.DataLossError, match=match) as e:
            read()
        assert str(path) in str(e.value)


# ---- checkpoints written before checksums -------------------------------------------------------

def test_checkpoint_without_checksums_loads_as_before(tmp_path):
    """A file exactly as psrt wrote it before this change: safetensors with only "format"
    and "global_step" metadata. It restores, reads and lists; its bytes are not checked."""
    sess, var_list = adam_model(seed=6)
    d = str(tmp_path)
    path = os.path.join(d, "model.ckpt-150")
    _write_raw(path, sess._psrt_read_state(var_list),
               {"format": "psrt-ckpt-1", "global_step": "150"})
    ckpt.update_checkpoint_state(d, path)

    target, target_vars = _fresh_target()
    ckpt.Saver(target_vars).restore(target, ckpt.latest_checkpoint(d))
    _assert_values(target, sess.values)
    reader = ckpt.load_checkpoint(d)
    assert reader.metadata == {"format": "psrt-ckpt-1", "global_step": "150"}
    np.testing.assert_array_equal(reader.get_tensor("W/Adam"), sess.values["W/Adam"])
    assert sorted(ckpt.read_checkpoint_file(path)) == sorted(sess.values)

    # Without a checksum a changed byte cannot be detected: it loads, as it always did.
    _corrupt(path, "table", "flip")
    changed = ckpt.load_variable(path, "table")
    assert not np.array_equal(changed, sess.values["table"])

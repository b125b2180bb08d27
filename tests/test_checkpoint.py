"""Tests for psrt.checkpoint: TF1's Saver and checkpoint utilities over safetensors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import crc32c
import numpy as np
import pytest
import safetensors
import safetensors.numpy

import psrt
from psrt.checkpoint import atomic_file
from psrt.checkpoint import checkpoint_format as ckpt_format
from psrt.checkpoint import checkpoint_management as ckpt_mgmt
from psrt.checkpoint import checkpoint_reader as ckpt_reader
from psrt.checkpoint import saver as ckpt_saver
from psrt import errors

SRC_DIR = os.path.dirname(os.path.dirname(os.path.abspath(psrt.__file__)))


# --------------------------------------------------------------------------------------
# A fake session implementing the contract Saver relies on.

class FakeVariable:
    def __init__(self, name, shape, dtype):
        self.name = name
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)

    def __repr__(self):
        return "FakeVariable(%r)" % self.name


class FakeSession:
    """Holds variables, per-variable slots ("W/Adam") and non-slot state ("beta1_power").

    ``_psrt_read_state``/``_psrt_expected_state`` cover the given variables, their slots
    and all non-slot state, keyed by checkpoint name, as the real session does.
    """

    def __init__(self):
        self.values = {}
        self.slots = {}  # variable name -> list of slot suffixes
        self.non_slot = []
        self.writes = 0

    def variable(self, name, value, slots=()):
        value = np.array(value)
        self.values[name] = value.copy()
        self.slots[name] = list(slots)
        for s in slots:
            self.values["%s/%s" % (name, s)] = np.zeros_like(value)
        return FakeVariable(name, value.shape, value.dtype)

    def non_slot_state(self, name, value):
        self.values[name] = np.array(value)
        self.non_slot.append(name)

    def _keys(self, variables):
        keys = []
        for v in variables:
            keys.append(v.name)
            keys.extend("%s/%s" % (v.name, s) for s in self.slots[v.name])
        return keys + list(self.non_slot)

    def _psrt_read_state(self, variables, progress=None):
        if progress is not None:
            progress.update(sum(self.values[k].nbytes for k in self._keys(variables)))
            progress.close()
        return {k: self.values[k].copy() for k in self._keys(variables)}

    def _psrt_expected_state(self, variables):
        return {k: (self.values[k].shape, self.values[k].dtype) for k in self._keys(variables)}

    def _psrt_write_state(self, variables, tensors, progress=None):
        if progress is not None:
            progress.update(sum(np.asarray(v).nbytes for v in tensors.values()))
            progress.close()
        for k in self._keys(variables):
            if k not in tensors:
                raise errors.NotFoundError(None, None, "Key %s not found" % k)
        for k in self._keys(variables):
            self.values[k] = np.array(tensors[k], dtype=self.values[k].dtype).reshape(
                self.values[k].shape)
        self.writes += 1

    def run(self, fetch):
        return int(self.values[fetch.name])


def adam_model(seed=0):
    """A small model with Adam state: W, b (float32), a float64 table, an int64 counter."""
    rng = np.random.default_rng(seed)
    sess = FakeSession()
    w = sess.variable("W", rng.standard_normal((4, 3)).astype(np.float32), slots=("Adam", "Adam_1"))
    b = sess.variable("b", rng.standard_normal(3).astype(np.float32), slots=("Adam", "Adam_1"))
    t = sess.variable("table", rng.standard_normal((2, 5)), slots=())
    gs = sess.variable("global_step", np.int64(0))
    sess.values["W/Adam"] = rng.standard_normal((4, 3)).astype(np.float32)
    sess.values["b/Adam_1"] = rng.standard_normal(3).astype(np.float32)
    sess.non_slot_state("beta1_power", np.float32(0.9 ** 3))
    sess.non_slot_state("beta2_power", np.float32(0.999 ** 3))
    return sess, [w, b, t, gs]


def listdir(d):
    return sorted(os.listdir(d))


def read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


# --------------------------------------------------------------------------------------
# Low-level file format.

def test_write_read_round_trip_dtypes_and_scalars(tmp_path):
    tensors = {
        "W": np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
        "hid_w": np.linspace(-1, 1, 10, dtype=np.float64).reshape(2, 5),
        "ids": np.array([1, -2, 2**40], dtype=np.int64),
        "global_step": np.int64(150),
        "lr": np.float32(0.125),
        "flag": np.array([True, False]),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "py_float": 2.5,
    }
    path = tmp_path / "model.ckpt-150"
    ckpt_format.write_checkpoint_file(path, tensors, metadata={"global_step": "150"})
    out = ckpt_format.read_checkpoint_file(path)
    assert list(out) == sorted(tensors)
    for k, v in tensors.items():
        v = np.asarray(v)
        assert out[k].dtype == v.dtype, k
        assert out[k].shape == v.shape, k
        np.testing.assert_array_equal(out[k], v)
    assert out["global_step"].shape == ()
    assert int(out["global_step"]) == 150
    assert out["W"].flags.writeable
    out["W"][0, 0] = 99.0  # owned, writable copy

    plain = safetensors.numpy.load_file(str(path))
    np.testing.assert_array_equal(plain["hid_w"], tensors["hid_w"])
    assert plain["ids"].dtype == np.int64
    with safetensors.safe_open(str(path), framework="np") as f:
        meta = f.metadata()
    # The checksum table: CRC-32C of each tensor's little-endian C-order bytes, by name.
    assert json.loads(meta.pop("crc32c")) == {
        k: crc32c.crc32c(np.asarray(v).tobytes()) for k, v in tensors.items()}
    assert meta == {"format": "psrt-ckpt-1", "global_step": "150"}
    assert listdir(tmp_path) == ["model.ckpt-150"]  # no temporary file left


@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.uint8, np.int16, np.uint16,
                                   np.int32, np.uint32, np.uint64, np.complex64])
def test_other_dtypes_round_trip(tmp_path, dtype):
    value = (np.arange(6) * 3 + 1).astype(dtype).reshape(2, 3)
    ckpt_format.write_checkpoint_file(tmp_path / "m", {"x": value})
    reader = ckpt_reader.load_checkpoint(tmp_path / "m")
    assert reader.get_variable_to_dtype_map() == {"x": np.dtype(dtype)}
    out = reader.get_tensor("x")
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, value)


def test_write_noncontiguous_and_big_endian_arrays(tmp_path):
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    strided = base[:, ::2]
    fortran = np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3))
    big = np.arange(5, dtype=">i8")
    ckpt_format.write_checkpoint_file(tmp_path / "f", {"s": strided, "f": fortran, "big": big})
    out = safetensors.numpy.load_file(str(tmp_path / "f"))
    np.testing.assert_array_equal(out["s"], [[0, 2, 4], [6, 8, 10], [12, 14, 16], [18, 20, 22]])
    np.testing.assert_array_equal(out["f"], [[0, 1, 2], [3, 4, 5]])
    assert out["big"].dtype == np.int64
    np.testing.assert_array_equal(out["big"], [0, 1, 2, 3, 4])


def test_write_rejects_bad_input(tmp_path):
    with pytest.raises(TypeError,
                       match=r"dtype <U1 not supported for checkpoint tensor 'x'.*float32"):
        ckpt_format.write_checkpoint_file(tmp_path / "a", {"x": np.array(["a"])})
    with pytest.raises(TypeError, match="non-empty str"):
        ckpt_format.write_checkpoint_file(tmp_path / "a", {3: np.zeros(1)})
    with pytest.raises(ValueError, match="reserved"):
        ckpt_format.write_checkpoint_file(tmp_path / "a", {"__metadata__": np.zeros(1)})
    with pytest.raises(TypeError, match="metadata must map str to str"):
        ckpt_format.write_checkpoint_file(tmp_path / "a", {"x": np.zeros(1)}, metadata={"step": 3})
    with pytest.raises(TypeError, match="mapping"):
        ckpt_format.write_checkpoint_file(tmp_path / "a", [np.zeros(1)])
    missing = tmp_path / "nodir" / "a"
    with pytest.raises(errors.NotFoundError, match="nodir"):
        ckpt_format.write_checkpoint_file(missing, {"x": np.zeros(1)})
    assert listdir(tmp_path) == []


def test_write_replaces_existing_file_atomically(tmp_path):
    path = tmp_path / "m"
    ckpt_format.write_checkpoint_file(path, {"x": np.zeros(3, np.float32)})
    ckpt_format.write_checkpoint_file(path, {"y": np.ones(2, np.int64)})
    assert list(ckpt_format.read_checkpoint_file(path)) == ["y"]
    assert listdir(tmp_path) == ["m"]


def test_read_errors(tmp_path):
    with pytest.raises(errors.NotFoundError, match="nope"):
        ckpt_format.read_checkpoint_file(tmp_path / "nope")
    bad = tmp_path / "bad"
    bad.write_bytes(b"not a safetensors file at all")
    with pytest.raises(errors.DataLossError, match="not a valid safetensors file"):
        ckpt_format.read_checkpoint_file(bad)
    good = tmp_path / "good"
    ckpt_format.write_checkpoint_file(good, {"x": np.arange(100, dtype=np.float64)})
    data = good.read_bytes()
    (tmp_path / "torn").write_bytes(data[: len(data) - 17])
    with pytest.raises(errors.DataLossError, match="torn"):
        ckpt_format.read_checkpoint_file(tmp_path / "torn")
    with pytest.raises(errors.DataLossError):
        ckpt_reader.load_checkpoint(tmp_path / "torn")


# --------------------------------------------------------------------------------------
# State file: text format, get/update, latest_checkpoint.

def test_update_checkpoint_state_text_exact(tmp_path):
    d = str(tmp_path)
    ckpt_mgmt.update_checkpoint_state(d, os.path.join(d, "model.ckpt-150"),
                                      [os.path.join(d, "model.ckpt-100"),
                                  os.path.join(d, "model.ckpt-150")])
    assert (tmp_path / "checkpoint").read_text() == (
        'model_checkpoint_path: "%s/model.ckpt-150"\n'
        'all_model_checkpoint_paths: "%s/model.ckpt-100"\n'
        'all_model_checkpoint_paths: "%s/model.ckpt-150"\n' % (d, d, d))
    # Relative paths are written as given; model path appended when not last.
    ckpt_mgmt.update_checkpoint_state(d, "model.ckpt-3", ["model.ckpt-1"],
                                      all_model_checkpoint_timestamps=[1500000000.5, 1500000100.25],
                                      last_preserved_timestamp=1499999999.0)
    assert (tmp_path / "checkpoint").read_text() == (
        'model_checkpoint_path: "model.ckpt-3"\n'
        'all_model_checkpoint_paths: "model.ckpt-1"\n'
        'all_model_checkpoint_paths: "model.ckpt-3"\n'
        'all_model_checkpoint_timestamps: 1500000000.5\n'
        'all_model_checkpoint_timestamps: 1500000100.25\n'
        'last_preserved_timestamp: 1499999999.0\n')
    state = ckpt_mgmt.get_checkpoint_state(d)
    assert state.model_checkpoint_path == os.path.join(d, "model.ckpt-3")
    assert state.all_model_checkpoint_paths == [os.path.join(d, "model.ckpt-1"),
                                                os.path.join(d, "model.ckpt-3")]
    assert state.all_model_checkpoint_timestamps == [1500000000.5, 1500000100.25]
    assert state.last_preserved_timestamp == 1499999999.0
    assert listdir(tmp_path) == ["checkpoint"]


def test_update_checkpoint_state_errors(tmp_path):
    d = str(tmp_path)
    with pytest.raises(RuntimeError, match="conflicts with path used for checkpoint state"):
        ckpt_mgmt.update_checkpoint_state(d, os.path.join(d, "checkpoint"))
    with pytest.raises(ValueError, match="must match checkpoint paths"):
        ckpt_mgmt.update_checkpoint_state(d, "a", ["a"], all_model_checkpoint_timestamps=[1.0, 2.0])
    with pytest.raises(errors.NotFoundError):
        ckpt_mgmt.update_checkpoint_state(os.path.join(d, "missing"), "a")


def test_generate_state_relative_save_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    state = ckpt_mgmt.generate_checkpoint_state_proto("train", "train/model.ckpt-5",
                                                      ["train/model.ckpt-4"])
    assert state.model_checkpoint_path == "model.ckpt-5"
    assert state.all_model_checkpoint_paths == ["model.ckpt-4", "model.ckpt-5"]
    state = ckpt_mgmt.generate_checkpoint_state_proto("/abs", "/abs/model.ckpt-5")
    assert state.all_model_checkpoint_paths == ["/abs/model.ckpt-5"]


def test_get_checkpoint_state_parsing(tmp_path):
    d = str(tmp_path)
    assert ckpt_mgmt.get_checkpoint_state(d) is None
    assert ckpt_mgmt.latest_checkpoint(d) is None
    (tmp_path / "checkpoint").write_text(
        '# a comment\n'
        'all_model_checkpoint_paths: "/abs/x-1"\n'
        "model_checkpoint_path: 'sub/x-2'  all_model_checkpoint_paths: \"sub/\" \"x-2\"\n"
        'all_model_checkpoint_timestamps: [1.5, 2e3, inf]\n'
        'last_preserved_timestamp: 7\n')
    state = ckpt_mgmt.get_checkpoint_state(d)
    assert state.model_checkpoint_path == os.path.join(d, "sub/x-2")
    assert state.all_model_checkpoint_paths == ["/abs/x-1", os.path.join(d, "sub/x-2")]
    assert state.all_model_checkpoint_timestamps == [1.5, 2000.0, float("inf")]
    assert state.last_preserved_timestamp == 7.0

    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "x" bogus_field: 3\n')
    assert ckpt_mgmt.get_checkpoint_state(d) is None
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "unterminated\n')
    assert ckpt_mgmt.get_checkpoint_state(d) is None
    (tmp_path / "checkpoint").write_text('all_model_checkpoint_paths: "x"\n')
    with pytest.raises(ValueError, match="Invalid checkpoint state loaded from " + d):
        ckpt_mgmt.get_checkpoint_state(d)


def test_state_file_escapes_round_trip(tmp_path):
    d = str(tmp_path)
    odd = 'we"ird\\na\'me\tü'
    ckpt_mgmt.update_checkpoint_state(d, odd)
    text = (tmp_path / "checkpoint").read_text()
    assert text.splitlines()[0] == (
        'model_checkpoint_path: "we\\"ird\\\\na\\\'me\\t\\303\\274"')
    assert ckpt_mgmt.get_checkpoint_state(d).model_checkpoint_path == os.path.join(d, odd)


def test_latest_checkpoint_requires_named_file(tmp_path):
    d = str(tmp_path)
    ckpt_mgmt.update_checkpoint_state(d, os.path.join(d, "model.ckpt-7"))
    assert ckpt_mgmt.latest_checkpoint(d) is None  # the state file names a missing file
    ckpt_format.write_checkpoint_file(os.path.join(d, "model.ckpt-7"), {"x": np.zeros(1)})
    assert ckpt_mgmt.latest_checkpoint(d) == os.path.join(d, "model.ckpt-7")
    assert ckpt_mgmt.checkpoint_exists(os.path.join(d, "model.ckpt-7"))
    assert not ckpt_mgmt.checkpoint_exists(os.path.join(d, "model.ckpt-8"))
    assert not ckpt_mgmt.checkpoint_exists(d)
    ckpt_format.write_checkpoint_file(os.path.join(d, "other-1"), {"x": np.zeros(1)})
    ckpt_mgmt.update_checkpoint_state(d, os.path.join(d, "other-1"), latest_filename="other_state")
    assert (ckpt_mgmt.latest_checkpoint(d, latest_filename="other_state")
            == os.path.join(d, "other-1"))
    assert ckpt_mgmt.latest_checkpoint(d) == os.path.join(d, "model.ckpt-7")


# --------------------------------------------------------------------------------------
# Readers.

def test_load_checkpoint_reader_and_utils(tmp_path):
    sess, var_list = adam_model()
    saver = ckpt_saver.Saver(var_list)
    path = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=150)
    assert path == str(tmp_path / "model.ckpt-150")

    for source in (path, str(tmp_path), tmp_path):
        reader = ckpt_reader.load_checkpoint(source)
        assert reader.path == path
        assert reader.has_tensor("W/Adam") and not reader.has_tensor("W/Momentum")
        assert reader.get_variable_to_shape_map() == {
            "W": [4, 3], "W/Adam": [4, 3], "W/Adam_1": [4, 3], "b": [3], "b/Adam": [3],
            "b/Adam_1": [3], "table": [2, 5], "global_step": [], "beta1_power": [],
            "beta2_power": []}
        dtypes = reader.get_variable_to_dtype_map()
        assert dtypes["W"] == np.float32 and dtypes["table"] == np.float64
        assert dtypes["global_step"] == np.int64
        np.testing.assert_array_equal(reader.get_tensor("W/Adam"), sess.values["W/Adam"])
    meta = reader.metadata
    assert sorted(json.loads(meta.pop("crc32c"))) == sorted(reader.get_variable_to_shape_map())
    assert meta == {"format": "psrt-ckpt-1", "global_step": "150"}
    assert reader.debug_string().splitlines()[0] == b"W (float32) [4, 3]"

    assert ckpt_reader.list_variables(tmp_path) == [
        ("W", [4, 3]), ("W/Adam", [4, 3]), ("W/Adam_1", [4, 3]), ("b", [3]), ("b/Adam", [3]),
        ("b/Adam_1", [3]), ("beta1_power", []), ("beta2_power", []), ("global_step", []),
        ("table", [2, 5])]
    np.testing.assert_array_equal(ckpt_reader.load_variable(tmp_path, "table:0"),
                                  sess.values["table"])
    assert ckpt_reader.load_variable(path, "beta1_power") == np.float32(0.9 ** 3)

    with pytest.raises(errors.NotFoundError, match="Key W/Momentum not found in checkpoint"):
        reader.get_tensor("W/Momentum")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="Couldn't find 'checkpoint' file or checkpoints"):
        ckpt_reader.load_checkpoint(empty)
    with pytest.raises(errors.NotFoundError, match="model.ckpt-999"):
        ckpt_reader.load_checkpoint(tmp_path / "model.ckpt-999")


# --------------------------------------------------------------------------------------
# Saver.save / restore.

def test_saver_round_trip_with_optimizer_state(tmp_path):
    sess, var_list = adam_model(seed=1)
    saved = {k: v.copy() for k, v in sess.values.items()}
    saver = ckpt_saver.Saver(var_list)
    path = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=var_list[3])
    assert path == str(tmp_path / "model.ckpt-0")

    other, other_vars = adam_model(seed=2)
    other.values["W/Adam_1"] += 1.0
    other.values["global_step"] = np.array(5, dtype=np.int64)
    other.values["beta1_power"] = np.float32(0.5)
    assert not any(np.array_equal(other.values[k], saved[k])
                   for k in ("W", "W/Adam", "W/Adam_1", "table", "global_step", "beta1_power"))
    ckpt_saver.Saver(other_vars).restore(other, path)
    assert other.writes == 1
    assert sorted(other.values) == sorted(saved)
    for k, v in saved.items():
        assert other.values[k].dtype == v.dtype
        np.testing.assert_array_equal(other.values[k], v)


def test_saver_global_step_variable_and_padding(tmp_path):
    sess, var_list = adam_model()
    sess.values["global_step"] = np.array(42, dtype=np.int64)
    saver = ckpt_saver.Saver(var_list, pad_step_number=True)
    path = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=var_list[3])
    assert path == str(tmp_path / "model.ckpt-00000042")
    path = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=np.int32(7))
    assert path == str(tmp_path / "model.ckpt-00000007")
    path = saver.save(sess, str(tmp_path / "plain"))
    assert path == str(tmp_path / "plain")
    with safetensors.safe_open(path, framework="np") as f:
        assert sorted(f.metadata()) == ["crc32c", "format"]
        assert f.metadata()["format"] == "psrt-ckpt-1"


def test_saver_state_file_exact_absolute_and_relative(tmp_path, monkeypatch):
    sess, var_list = adam_model()
    d = str(tmp_path / "abs")
    os.mkdir(d)
    saver = ckpt_saver.Saver(var_list, max_to_keep=3)
    for step in (100, 150):
        saver.save(sess, os.path.join(d, "model.ckpt"), global_step=step)
    assert read_text(os.path.join(d, "checkpoint")) == (
        'model_checkpoint_path: "%s/model.ckpt-150"\n'
        'all_model_checkpoint_paths: "%s/model.ckpt-100"\n'
        'all_model_checkpoint_paths: "%s/model.ckpt-150"\n' % (d, d, d))

    d2 = str(tmp_path / "rel")
    os.mkdir(d2)
    saver = ckpt_saver.Saver(var_list, save_relative_paths=True)
    for step in (100, 150):
        saver.save(sess, os.path.join(d2, "model.ckpt"), global_step=step)
    assert read_text(os.path.join(d2, "checkpoint")) == (
        'model_checkpoint_path: "model.ckpt-150"\n'
        'all_model_checkpoint_paths: "model.ckpt-100"\n'
        'all_model_checkpoint_paths: "model.ckpt-150"\n')
    assert saver.last_checkpoints == [os.path.join(d2, "model.ckpt-100"),
                                      os.path.join(d2, "model.ckpt-150")]
    moved = str(tmp_path / "moved")
    os.rename(d2, moved)
    assert ckpt_mgmt.latest_checkpoint(moved) == os.path.join(moved, "model.ckpt-150")

    # A relative save_path records paths relative to its directory, as TF.
    monkeypatch.chdir(tmp_path)
    os.mkdir("run")
    saver = ckpt_saver.Saver(var_list)
    assert saver.save(sess, "run/model.ckpt", global_step=1) == "run/model.ckpt-1"
    assert read_text("run/checkpoint") == (
        'model_checkpoint_path: "model.ckpt-1"\n'
        'all_model_checkpoint_paths: "model.ckpt-1"\n')
    assert ckpt_mgmt.latest_checkpoint("run") == "run/model.ckpt-1"
    # No directory at all: the state file is ./checkpoint.
    assert saver.save(sess, "top.ckpt", global_step=2) == "top.ckpt-2"
    assert read_text("checkpoint") == (
        'model_checkpoint_path: "top.ckpt-2"\n'
        'all_model_checkpoint_paths: "run/model.ckpt-1"\n'
        'all_model_checkpoint_paths: "top.ckpt-2"\n')


def test_retention_max_to_keep_2_over_5_saves(tmp_path):
    sess, var_list = adam_model()
    d = str(tmp_path)
    saver = ckpt_saver.Saver(var_list, max_to_keep=2)
    prefix = os.path.join(d, "model.ckpt")
    expected_files = [
        ["checkpoint", "model.ckpt-1"],
        ["checkpoint", "model.ckpt-1", "model.ckpt-2"],
        ["checkpoint", "model.ckpt-2", "model.ckpt-3"],
        ["checkpoint", "model.ckpt-3", "model.ckpt-4"],
        ["checkpoint", "model.ckpt-4", "model.ckpt-5"],
    ]
    for step, files in zip(range(1, 6), expected_files):
        sess.values["global_step"] = np.array(step, dtype=np.int64)
        saver.save(sess, prefix, global_step=step)
        assert listdir(d) == files, step
    assert saver.last_checkpoints == [prefix + "-4", prefix + "-5"]
    assert read_text(os.path.join(d, "checkpoint")) == (
        'model_checkpoint_path: "%s-5"\n'
        'all_model_checkpoint_paths: "%s-4"\n'
        'all_model_checkpoint_paths: "%s-5"\n' % (prefix, prefix, prefix))
    assert int(ckpt_reader.load_variable(d, "global_step")) == 5

    # Re-saving an existing name moves it to the end instead of duplicating it (TF).
    saver.save(sess, prefix, global_step=4)
    assert saver.last_checkpoints == [prefix + "-5", prefix + "-4"]
    assert listdir(d) == ["checkpoint", "model.ckpt-4", "model.ckpt-5"]
    assert ckpt_mgmt.latest_checkpoint(d) == prefix + "-4"


@pytest.mark.parametrize("max_to_keep", [None, 0])
def test_max_to_keep_none_or_zero_keeps_all_files(tmp_path, max_to_keep):
    sess, var_list = adam_model()
    d = str(tmp_path)
    saver = ckpt_saver.Saver(var_list, max_to_keep=max_to_keep)
    for step in range(1, 5):
        saver.save(sess, os.path.join(d, "model.ckpt"), global_step=step)
    assert listdir(d) == ["checkpoint"] + ["model.ckpt-%d" % s for s in range(1, 5)]
    assert saver.last_checkpoints == []
    # As TF: only the latest is listed in the state file.
    assert read_text(os.path.join(d, "checkpoint")) == (
        'model_checkpoint_path: "%s/model.ckpt-4"\n'
        'all_model_checkpoint_paths: "%s/model.ckpt-4"\n' % (d, d))


def test_write_state_false_touches_nothing_else(tmp_path):
    sess, var_list = adam_model()
    saver = ckpt_saver.Saver(var_list, max_to_keep=1)
    for step in (1, 2, 3):
        saver.save(sess, str(tmp_path / "m"), global_step=step, write_state=False)
    assert listdir(tmp_path) == ["m-1", "m-2", "m-3"]
    assert saver.last_checkpoints == []


class _Clock:
    def __init__(self, now):
        self.now = now

    def time(self):
        return self.now


def test_keep_checkpoint_every_n_hours(tmp_path, monkeypatch):
    clock = _Clock(0.0)
    monkeypatch.setattr(ckpt_saver, "time", clock)
    sess, var_list = adam_model()
    d = str(tmp_path)
    saver = ckpt_saver.Saver(var_list, max_to_keep=2, keep_checkpoint_every_n_hours=1.0)
    # Next preserved checkpoint must be newer than t=3600 s, then 7200 s, ...
    for step, t in [(1, 1000), (2, 2000), (3, 5000), (4, 6000), (5, 9000), (6, 9500),
                    (7, 9600)]:
        clock.now = float(t)
        saver.save(sess, os.path.join(d, "m"), global_step=step)
    # m-1 (t=1000) and m-2 (2000) and m-4 (6000 <= 7200) deleted; m-3 (5000 > 3600) and
    # m-5 (9000 > 7200) preserved but no longer listed; m-6, m-7 are the window.
    assert listdir(d) == ["checkpoint", "m-3", "m-5", "m-6", "m-7"]
    assert ckpt_mgmt.get_checkpoint_state(d).all_model_checkpoint_paths == [
        os.path.join(d, "m-6"), os.path.join(d, "m-7")]


def test_recover_last_checkpoints_after_restart(tmp_path):
    sess, var_list = adam_model()
    d = str(tmp_path)
    prefix = os.path.join(d, "model.ckpt")
    first = ckpt_saver.Saver(var_list, max_to_keep=2)
    for step in (1, 2):
        first.save(sess, prefix, global_step=step)

    restarted = ckpt_saver.Saver(var_list, max_to_keep=2)
    state = ckpt_mgmt.get_checkpoint_state(d)
    restarted.recover_last_checkpoints(state.all_model_checkpoint_paths + [prefix + "-99"])
    assert restarted.last_checkpoints == [prefix + "-1", prefix + "-2"]  # -99 missing
    restarted.save(sess, prefix, global_step=3)
    assert listdir(d) == ["checkpoint", "model.ckpt-2", "model.ckpt-3"]

    restarted.set_last_checkpoints_with_time([(prefix + "-3", 5.0)])
    assert restarted.last_checkpoints == [prefix + "-3"]
    restarted.set_last_checkpoints([prefix + "-2"])
    assert restarted.last_checkpoints == [prefix + "-2"]
    with pytest.raises(TypeError):
        restarted.set_last_checkpoints_with_time((prefix, 1.0))
    assert ckpt_mgmt.get_checkpoint_mtimes([prefix + "-2", prefix + "-99"]) == [
        os.stat(prefix + "-2").st_mtime_ns / 1e9]


def test_restore_by_name_ignores_order_and_extra_keys(tmp_path):
    """A checkpoint holds tensors by name only, so the restoring session may declare the
    variables in another order, on any number of ps tasks, or only a subset of them."""
    sess, var_list = adam_model(seed=3)
    path = ckpt_saver.Saver(var_list).save(sess, str(tmp_path / "m"), global_step=1)

    small = FakeSession()
    b = small.variable("b", np.zeros(3, np.float32), slots=("Adam", "Adam_1"))
    w = small.variable("W", np.zeros((4, 3), np.float32), slots=("Adam", "Adam_1"))
    ckpt_saver.Saver([b, w]).restore(small, path)
    for k in ("W", "W/Adam", "W/Adam_1", "b", "b/Adam", "b/Adam_1"):
        np.testing.assert_array_equal(small.values[k], sess.values[k])


def test_restore_errors(tmp_path):
    sess, var_list = adam_model()
    saver = ckpt_saver.Saver(var_list)
    path = saver.save(sess, str(tmp_path / "m"), global_step=1)

    with pytest.raises(ValueError, match="^Can't load save_path when it is None.$"):
        saver.restore(sess, None)
    with pytest.raises(ValueError, match="The passed save_path is not a valid checkpoint: .*m-2"):
        saver.restore(sess, str(tmp_path / "m-2"))

    # Missing key: a slot the checkpoint does not hold.
    target = FakeSession()
    w = target.variable("W", np.zeros((4, 3), np.float32), slots=("Momentum",))
    before = {k: v.copy() for k, v in target.values.items()}
    with pytest.raises(errors.NotFoundError, match="Key W/Momentum not found in checkpoint") as e:
        ckpt_saver.Saver([w]).restore(target, path)
    assert "'W/Adam'" in str(e.value)  # the keys present are listed
    assert target.writes == 0

    # Shape mismatch names the variable and both shapes; nothing is assigned.
    target = FakeSession()
    w = target.variable("W", np.zeros((3, 4), np.float32))
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"lhs shape= \[3,4\] rhs shape= \[4,3\]: variable 'W' has shape"):
        ckpt_saver.Saver([w]).restore(target, path)
    assert target.writes == 0
    ckpt_saver.Saver([w], reshape=True).restore(target, path)
    np.testing.assert_array_equal(target.values["W"], sess.values["W"].reshape(3, 4))

    target = FakeSession()
    w = target.variable("W", np.zeros((2, 3), np.float32))
    with pytest.raises(errors.InvalidArgumentError, match=r"lhs shape= \[2,3\]"):
        ckpt_saver.Saver([w], reshape=True).restore(target, path)

    # Dtype mismatch.
    target = FakeSession()
    w = target.variable("W", np.zeros((4, 3), np.float64))
    with pytest.raises(errors.InvalidArgumentError,
                       match="tensor_name = W; expected dtype float64 does not equal "
                             "original dtype float32"):
        ckpt_saver.Saver([w]).restore(target, path)
    assert np.array_equal(before["W"], np.zeros((4, 3), np.float32))

    # A corrupt file is DataLossError.
    (tmp_path / "m-1").write_bytes(b"\x00" * 64)
    with pytest.raises(errors.DataLossError):
        saver.restore(sess, path)


def test_dict_var_list_renames_variable_and_slots(tmp_path):
    sess, var_list = adam_model()
    w, b = var_list[0], var_list[1]
    path = ckpt_saver.Saver({"layer/kernel": w, "b": b}).save(sess, str(tmp_path / "m"))
    names = [n for n, _ in ckpt_reader.list_variables(path)]
    assert names == ["b", "b/Adam", "b/Adam_1", "beta1_power", "beta2_power",
                     "layer/kernel", "layer/kernel/Adam", "layer/kernel/Adam_1"]
    np.testing.assert_array_equal(ckpt_reader.load_variable(path, "layer/kernel/Adam"),
                                  sess.values["W/Adam"])

    other, other_vars = adam_model(seed=9)
    ckpt_saver.Saver({"layer/kernel": other_vars[0], "b": other_vars[1]}).restore(other, path)
    for k in ("W", "W/Adam", "W/Adam_1", "b/Adam_1"):
        np.testing.assert_array_equal(other.values[k], sess.values[k])


def test_saver_var_list_validation(tmp_path):
    sess, var_list = adam_model()
    with pytest.raises(ValueError, match="At least two variables have the same name: W"):
        ckpt_saver.Saver([var_list[0], FakeVariable("W", (1,), np.float32)])
    with pytest.raises(ValueError, match="appears twice"):
        ckpt_saver.Saver({"a": var_list[0], "c": var_list[0]})
    with pytest.raises(TypeError, match="dict or a list"):
        ckpt_saver.Saver(var_list[0])
    with pytest.raises(TypeError, match=r"var_list\[1\]"):
        ckpt_saver.Saver([var_list[0], "W"])
    with pytest.raises(ValueError, match="No variables to save"):
        ckpt_saver.Saver([])
    with pytest.raises(ValueError, match="max_to_keep must be None or an int >= 0; got -1"):
        ckpt_saver.Saver(var_list, max_to_keep=-1)
    with pytest.raises(ValueError, match="build cannot be deferred"):
        ckpt_saver.Saver(var_list, defer_build=True)
    empty = ckpt_saver.Saver([], allow_empty=True)
    assert empty.save(sess, str(tmp_path / "m"), global_step=1) is None
    empty.restore(sess, None)  # no-op, as TF
    assert listdir(tmp_path) == []


def test_saver_save_argument_errors(tmp_path):
    sess, var_list = adam_model()
    saver = ckpt_saver.Saver(var_list)
    with pytest.raises(ValueError, match="Parent directory of .*missing/m doesn't exist"):
        saver.save(sess, str(tmp_path / "missing" / "m"), global_step=1)
    with pytest.raises(ValueError, match="must not contain path components"):
        saver.save(sess, str(tmp_path / "m"), latest_filename="a/b")
    with pytest.raises(ValueError, match="'latest_filename' collides with 'save_path'"):
        saver.save(sess, str(tmp_path / "checkpoint"))
    assert listdir(tmp_path) == []


def test_var_list_none_uses_global_variables(tmp_path, monkeypatch):
    sess, var_list = adam_model()
    calls = []

    class FakeVariablesModule:
        @staticmethod
        def global_variables():
            calls.append(1)
            return list(var_list)

    monkeypatch.setattr(ckpt_saver, "global_variables", FakeVariablesModule.global_variables)
    saver = ckpt_saver.Saver()
    assert calls == []  # resolved lazily
    path = saver.save(sess, str(tmp_path / "m"), global_step=3)
    saver.save(sess, str(tmp_path / "m"), global_step=4)
    assert calls == [1]  # then kept, as TF's build-time snapshot
    assert "table" in dict(ckpt_reader.list_variables(path))


# --------------------------------------------------------------------------------------
# The default saver, as TF's _get_saver_or_default (tensorflow/python/training/saver.py,
# r1.15): the one item of the graph's SAVERS collection; a new Saver() added to it when the
# collection is empty; RuntimeError when it holds several. Each test uses a graph of its
# own, so no Saver is left in the process's default graph.

def test_get_saver_or_default_creates_and_collects_one_saver():
    with psrt.Graph().as_default():
        assert psrt.GraphKeys.SAVERS == "savers"
        assert psrt.get_collection(psrt.GraphKeys.SAVERS) == []
        saver = ckpt_saver._get_saver_or_default()
        assert type(saver) is ckpt_saver.Saver
        assert psrt.get_collection(psrt.GraphKeys.SAVERS) == [saver]
        assert ckpt_saver._get_saver_or_default() is saver
        assert psrt.get_collection(psrt.GraphKeys.SAVERS) == [saver]


def test_get_saver_or_default_returns_the_collected_saver():
    _, var_list = adam_model()
    with psrt.Graph().as_default():
        mine = ckpt_saver.Saver(var_list, max_to_keep=1)
        psrt.add_to_collection(psrt.GraphKeys.SAVERS, mine)
        assert ckpt_saver._get_saver_or_default() is mine
        assert psrt.get_collection(psrt.GraphKeys.SAVERS) == [mine]


def test_get_saver_or_default_rejects_two_collected_savers():
    with psrt.Graph().as_default():
        psrt.add_to_collection(psrt.GraphKeys.SAVERS, ckpt_saver.Saver())
        psrt.add_to_collection(psrt.GraphKeys.SAVERS, ckpt_saver.Saver())
        with pytest.raises(RuntimeError, match=(
                r"^More than one item in collection savers\. Please indicate which one to "
                r"use by passing it to the constructor\.$")):
            ckpt_saver._get_saver_or_default()


# --------------------------------------------------------------------------------------
# Crash safety.

def _reap(proc):
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def test_stale_temp_files_are_cleaned_only_for_dead_processes(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = atomic_file._host_tag()
    stale = tmp_path / (".m-1.psrt-tmp-%s-%d-0123abcd" % (host, dead.pid))
    live = tmp_path / (".m-1.psrt-tmp-%s-%d-0123abcd" % (host, os.getppid()))
    foreign = tmp_path / (".m-1.psrt-tmp-otherhost-%d-0123abcd" % dead.pid)
    for f in (stale, live, foreign):
        f.write_bytes(b"partial")
    ckpt_format.write_checkpoint_file(tmp_path / "m-2", {"x": np.zeros(1)})
    assert not stale.exists()
    assert live.exists() and foreign.exists()


CHILD = textwrap.dedent("""
    import os, sys
    import numpy as np
    from psrt.checkpoint import atomic_file
    from psrt.checkpoint import checkpoint_management as ckpt_mgmt
    from psrt.checkpoint import checkpoint_reader as ckpt_reader
    from psrt.checkpoint import saver as ckpt_saver

    d = sys.argv[1]
    n = int(sys.argv[2])

    # Test instrumentation: announce each atomic file write (checkpoint data, then the
    # state file) so the parent can kill at a known phase of a save.
    _atomic_write = atomic_file._atomic_write

    def traced(path, write_temp):
        print("write", os.path.basename(path), flush=True)
        _atomic_write(path, write_temp)

    atomic_file._atomic_write = traced

    class Var:
        def __init__(self, name, shape, dtype):
            self.name, self.shape, self.dtype = name, shape, np.dtype(dtype)

    class Sess:
        step = 0
        def _psrt_expected_state(self, variables):
            return {k: (v.shape, v.dtype) for k, v in self._psrt_read_state(variables).items()}

        def _psrt_read_state(self, variables, progress=None):
            return {"W": np.full(n, self.step, np.float32),
                    "W/Adam": np.full(n // 4, -self.step, np.float64),
                    "global_step": np.array(self.step, np.int64)}

    sess = Sess()
    saver = ckpt_saver.Saver([Var("W", (n,), np.float32), Var("global_step", (), np.int64)],
                             max_to_keep=2)
    state = ckpt_mgmt.get_checkpoint_state(d)
    if state is not None:
        saver.recover_last_checkpoints(state.all_model_checkpoint_paths)
        sess.step = int(ckpt_reader.load_variable(state.model_checkpoint_path, "global_step"))
    while True:
        sess.step += 1
        print("begin", sess.step, flush=True)
        saver.save(sess, os.path.join(d, "model.ckpt"), global_step=sess.step)
        print("done", sess.step, flush=True)
""")


def _check_directory_consistent(d):
    latest = ckpt_mgmt.latest_checkpoint(d)
    assert latest is not None
    state = ckpt_mgmt.get_checkpoint_state(d)
    assert state.model_checkpoint_path == latest
    assert 1 <= len(state.all_model_checkpoint_paths) <= 2
    assert state.all_model_checkpoint_paths[-1] == latest
    for p in state.all_model_checkpoint_paths:
        tensors = safetensors.numpy.load_file(p)  # every listed file is whole
        step = int(tensors["global_step"])
        assert p.endswith("-%d" % step)
        assert np.all(tensors["W"] == step) and np.all(tensors["W/Adam"] == -step)
    reader = ckpt_reader.load_checkpoint(d)
    return int(reader.get_tensor("global_step"))


def _read_until(proc, prefix):
    """Reads the child's lines until one starts with ``prefix``; returns its arrival time."""
    while True:
        line = proc.stdout.readline()
        assert line, "child exited (rc=%s) before printing %r" % (proc.poll(), prefix)
        if line.startswith(prefix):
            return time.monotonic()


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_during_save_keeps_previous_checkpoint(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    d = tmp_path / "train"
    d.mkdir()
    env = dict(os.environ, PYTHONPATH=SRC_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    n = 8 * 1024 * 1024  # 32 MiB of float32 + 16 MiB of float64 per checkpoint

    # (phase, fraction): kill after the child reaches that phase of its second save,
    # waiting that fraction of the data-file write time measured on its first save.
    #   "begin": before any write;
    #   "write model.ckpt": the data file write is starting;
    #   "temp model.ckpt": the temporary data file exists on disk (polled), so the kill
    #       lands mid-write;
    #   "write checkpoint": the data file is in place, the state file write is starting.
    plans = [("temp model.ckpt", 0.0), ("write model.ckpt", 0.5), ("write checkpoint", 0.0),
             ("temp model.ckpt", 0.0), ("begin", 0.0), ("write model.ckpt", 0.25),
             ("write checkpoint", 0.02), ("temp model.ckpt", 0.0)]
    last_step = 0
    left_temp = {}
    for i, (phase, fraction) in enumerate(plans):
        proc = subprocess.Popen([sys.executable, str(script), str(d), str(n)],
                                stdout=subprocess.PIPE, text=True, env=env)
        try:
            t_data = _read_until(proc, "write model.ckpt")
            t_state = _read_until(proc, "write checkpoint")
            write_seconds = t_state - t_data
            _read_until(proc, "done")
            if phase == "temp model.ckpt":
                _read_until(proc, "write model.ckpt")
                deadline = time.monotonic() + 60
                while not any(f.startswith(".model.ckpt-") and ".psrt-tmp-" in f
                              for f in os.listdir(d)):
                    assert time.monotonic() < deadline, "no temporary data file appeared"
            else:
                _read_until(proc, phase)
                time.sleep(fraction * write_seconds)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            assert proc.returncode == -signal.SIGKILL
        finally:
            _reap(proc)
        names = os.listdir(d)
        left_temp[i] = [f for f in names if ".psrt-tmp-" in f]
        if phase == "temp model.ckpt":
            assert any(f.startswith(".model.ckpt-") for f in left_temp[i]), left_temp[i]
        step = _check_directory_consistent(str(d))
        assert step > last_step
        last_step = step
        # No model.ckpt-N is ever torn, listed or not (one killed after the data rename
        # but before the state file is unlisted, and rewritten by the next run, as TF).
        for f in names:
            if f.startswith("model.ckpt-"):
                tensors = safetensors.numpy.load_file(str(d / f))
                assert np.all(tensors["W"] == int(f.rsplit("-", 1)[1])), f

    # The next save (the killed processes are reaped) removes their leftovers.
    class Var:
        def __init__(self, name):
            self.name = name

    class Sess:
        def _psrt_expected_state(self, variables):
            return {k: (v.shape, v.dtype) for k, v in self._psrt_read_state(variables).items()}

        def _psrt_read_state(self, variables, progress=None):
            return {"W": np.full(4, last_step + 1, np.float32),
                    "W/Adam": np.full(1, -(last_step + 1), np.float64),
                    "global_step": np.array(last_step + 1, np.int64)}

    saver = ckpt_saver.Saver([Var("W"), Var("global_step")], max_to_keep=2)
    saver.recover_last_checkpoints(
        ckpt_mgmt.get_checkpoint_state(str(d)).all_model_checkpoint_paths)
    saver.save(Sess(), str(d / "model.ckpt"), global_step=last_step + 1)
    assert [f for f in os.listdir(d) if ".psrt-tmp-" in f] == []
    assert _check_directory_consistent(str(d)) == last_step + 1

"""Tests for psrt.checkpoint's integrity checks (issue 10, item 6): a CRC-32C per tensor in
the header metadata, checked on every read, as TF's tensor bundle; DataLossError for a
corrupt or truncated file; and, beyond TF, Saver.restore (so the chief of
MonitoredTrainingSession, Supervisor and SessionManager) falling back to the newest intact
checkpoint the state file lists.

Files are corrupted the way a disk or a copy does it: bytes overwritten inside one tensor's
data region (found from the safetensors header), or the file cut short. The fake session of
tests/test_checkpoint.py stands in for psrt's session in the Saver tests; the
MonitoredTrainingSession and Supervisor tests run real ps subprocesses (tests/_mts_cluster.py,
ports from the OS, reaped by PID), one test a whole chief process.
"""

from __future__ import annotations

import json
import logging
import os
import re

import crc32c
import numpy as np
import pytest
import safetensors.numpy

import psrt
from psrt.checkpoint import checkpoint_format as ckpt_format
from psrt.checkpoint import checkpoint_management as ckpt_mgmt
from psrt.checkpoint import checkpoint_reader as ckpt_reader
from psrt.checkpoint import saver as ckpt_saver
from psrt import errors

from _mts_cluster import (  # noqa: F401  (fixtures)
    Job,
    fresh_graph,
    tasks,
)
from test_checkpoint import FakeSession, adam_model

STATE_KEYS = ("W", "b", "W/Adagrad", "b/Adagrad", "global_step")
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


def _three_checkpoints(d) -> tuple[list, dict[int, dict[str, np.ndarray]], list[str]]:
    """Saves an Adam model at steps 10, 20 and 30 with different values each time; returns
    its variables, the values saved per step and the paths (oldest first)."""
    sess, var_list = adam_model(seed=4)
    saver = ckpt_saver.Saver(var_list)
    saved, paths = {}, []
    for step in (10, 20, 30):
        for k in sess.values:
            if sess.values[k].dtype.kind == "f":
                sess.values[k] = (sess.values[k] + step).astype(sess.values[k].dtype)
        sess.values["global_step"] = np.array(step, dtype=np.int64)
        paths.append(saver.save(sess, os.path.join(str(d), "model.ckpt"), global_step=step))
        saved[step] = _snapshot(sess)
    return var_list, saved, paths


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
    ckpt_format.write_checkpoint_file(path, tensors, metadata={"crc32c": '{"W": 1}', "note": "x"})
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
    assert ckpt_format.CHECKSUMS_KEY == "crc32c"


# ---- corrupt data: every read path raises DataLossError -----------------------------------------

@pytest.mark.parametrize("name,how", [("W", "flip"), ("W", "nan"), ("b/Adam_1", "zero"),
                                      ("global_step", "flip"), ("table", "flip")])
def test_overwritten_tensor_bytes_are_data_loss_naming_file_and_tensor(tmp_path, name, how):
    sess, var_list = adam_model(seed=1)
    path = ckpt_saver.Saver(var_list).save(sess, str(tmp_path / "model.ckpt"), global_step=7,
                                           write_state=False)
    stored = json.loads(ckpt_reader.load_checkpoint(path).metadata["crc32c"])[name]
    _corrupt(path, name, how)

    target, target_vars = _fresh_target()
    before = _snapshot(target)
    with pytest.raises(errors.DataLossError, match=CHECKSUM_MISMATCH) as e:
        ckpt_saver.Saver(target_vars).restore(target, path)
    message = str(e.value)
    assert path in message and repr(name) in message
    got_stored, computed = (int(x) for x in re.search(CHECKSUM_MISMATCH, message).groups())
    assert got_stored == stored and computed != stored
    # Nothing was assigned: not the corrupt tensor, not the intact ones.
    assert target.writes == 0
    _assert_values(target, before)

    # Every other read path that returns the tensor's value.
    reader = ckpt_reader.load_checkpoint(path)
    with pytest.raises(errors.DataLossError, match=CHECKSUM_MISMATCH):
        reader.get_tensor(name)
    with pytest.raises(errors.DataLossError, match=repr(name)):
        ckpt_reader.load_variable(path, name)
    with pytest.raises(errors.DataLossError, match=repr(name)):
        ckpt_format.read_checkpoint_file(path)
    # The intact tensors still read, each checked on its own (as TF's bundle reader).
    other = "b" if name != "b" else "W"
    np.testing.assert_array_equal(reader.get_tensor(other), sess.values[other])
    # Listing reads the header only.
    assert dict(ckpt_reader.list_variables(path))[name] == list(sess.values[name].shape)


def test_truncated_file_is_data_loss_naming_the_tensors_cut_off(tmp_path):
    sess, var_list = adam_model()
    path = ckpt_saver.Saver(var_list).save(sess, str(tmp_path / "model.ckpt"), global_step=3,
                                           write_state=False)
    header, base = _header(path)
    spans = sorted((v["data_offsets"][1], k) for k, v in header.items() if k != "__metadata__")
    last = spans[-1][1]
    raw = _bytes(path)
    torn = tmp_path / "model.ckpt-4"
    torn.write_bytes(raw[:-3])  # the last 3 bytes of the last tensor are gone

    target, target_vars = _fresh_target()
    before = _snapshot(target)
    for read in (lambda: ckpt_saver.Saver(target_vars).restore(target, str(torn)),
                 lambda: ckpt_reader.load_checkpoint(torn),
                 lambda: ckpt_format.read_checkpoint_file(torn),
                 lambda: ckpt_reader.list_variables(torn)):
        with pytest.raises(errors.DataLossError, match="truncated") as e:
            read()
        assert str(torn) in str(e.value) and repr(last) in str(e.value)
    assert target.writes == 0
    _assert_values(target, before)

    # Cut in the middle: every tensor whose data lies past the end is counted.
    half = base + (spans[-1][0] // 2)
    torn.write_bytes(raw[:half])
    with pytest.raises(errors.DataLossError, match=r"truncated.* and \d+ more") as e:
        ckpt_reader.load_checkpoint(torn)
    # Cut inside the header: the file is named, safetensors says why.
    torn.write_bytes(raw[:5])
    with pytest.raises(errors.DataLossError, match="model.ckpt-4.*not a valid safetensors"):
        ckpt_reader.load_checkpoint(torn)
    # Bytes appended after the last tensor.
    torn.write_bytes(raw + b"\0" * 5)
    with pytest.raises(errors.DataLossError, match="5 unexpected bytes follow"):
        ckpt_reader.load_checkpoint(torn)


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
    for read in (lambda: ckpt_reader.load_checkpoint(path),
                 lambda: ckpt_format.read_checkpoint_file(path)):
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
    ckpt_mgmt.update_checkpoint_state(d, path)

    target, target_vars = _fresh_target()
    ckpt_saver.Saver(target_vars).restore(target, ckpt_mgmt.latest_checkpoint(d))
    _assert_values(target, sess.values)
    reader = ckpt_reader.load_checkpoint(d)
    assert reader.metadata == {"format": "psrt-ckpt-1", "global_step": "150"}
    np.testing.assert_array_equal(reader.get_tensor("W/Adam"), sess.values["W/Adam"])
    assert sorted(ckpt_format.read_checkpoint_file(path)) == sorted(sess.values)

    # Without a checksum a changed byte cannot be detected: it loads, as it always did.
    _corrupt(path, "table", "flip")
    changed = ckpt_reader.load_variable(path, "table")
    assert not np.array_equal(changed, sess.values["table"])


# ---- Saver.restore falls back to the newest intact listed checkpoint ----------------------------

def test_restore_latest_falls_back_to_previous_intact_checkpoint(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="psrt")
    var_list, saved, paths = _three_checkpoints(tmp_path)
    _corrupt(paths[2], "W/Adam", "nan")

    target, target_vars = _fresh_target()
    latest = ckpt_mgmt.latest_checkpoint(str(tmp_path))
    assert latest == paths[2]
    ckpt_saver.Saver(target_vars).restore(target, latest)
    _assert_values(target, saved[20])
    assert target.writes == 1
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    text = warnings[0].getMessage()
    assert paths[2] in text and "'W/Adam'" in text and "Checksum does not match" in text
    assert "Restored %s instead" % paths[1] in text

    # Two corrupt (one torn, one flipped): the oldest is used, each failure is logged.
    caplog.clear()
    raw = _bytes(paths[1])
    with open(paths[1], "wb") as f:
        f.write(raw[:-1])
    target, target_vars = _fresh_target()
    ckpt_saver.Saver(target_vars).restore(target, latest)
    _assert_values(target, saved[10])
    text = "\n".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert "Older checkpoint %s, tried because %s is corrupt, cannot be restored" % (
        paths[1], paths[2]) in text
    assert "truncated" in text and "Restored %s instead" % paths[0] in text


def test_restore_with_every_listed_checkpoint_corrupt_is_data_loss(tmp_path):
    var_list, saved, paths = _three_checkpoints(tmp_path)
    _corrupt(paths[2], "W", "flip")
    _corrupt(paths[1], "b", "zero")
    os.remove(paths[0])

    target, target_vars = _fresh_target()
    before = _snapshot(target)
    with pytest.raises(errors.DataLossError, match=CHECKSUM_MISMATCH) as e:
        ckpt_saver.Saver(target_vars).restore(target, paths[2])
    message = str(e.value)
    # The requested file and its tensor first, then each older one tried and why.
    assert message.startswith("Checkpoint %r, tensor 'W'" % paths[2])
    assert "no older checkpoint listed in %s restores either" % os.path.join(
        str(tmp_path), "checkpoint") in message
    assert "%s: Checkpoint %r, tensor 'b'" % (paths[1], paths[1]) in message
    assert "%s: no such file" % paths[0] in message
    assert target.writes == 0
    _assert_values(target, before)


def test_explicit_path_falls_back_only_to_older_listed_checkpoints(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="psrt")
    var_list, saved, paths = _three_checkpoints(tmp_path)
    _corrupt(paths[1], "table", "flip")

    # Step 20 asked for: 10 is restored, never the newer (intact) 30.
    target, target_vars = _fresh_target()
    ckpt_saver.Saver(target_vars).restore(target, paths[1])
    _assert_values(target, saved[10])
    assert "Restored %s instead" % paths[0] in caplog.text

    # The oldest listed one has nothing older to fall back to.
    _corrupt(paths[0], "table", "flip")
    with pytest.raises(errors.DataLossError,
                       match="no older checkpoint is listed with it in .*checkpoint"):
        ckpt_saver.Saver(target_vars).restore(target, paths[0])

    # A file the state file does not list (here a copy elsewhere) gets no fallback.
    elsewhere = tmp_path / "copy"
    elsewhere.mkdir()
    copy = elsewhere / "model.ckpt-30"
    copy.write_bytes(_bytes(paths[2]))
    _corrupt(copy, "W", "flip")
    with pytest.raises(errors.DataLossError, match="no older checkpoint is listed"):
        ckpt_saver.Saver(target_vars).restore(target, str(copy))


def test_fallback_is_for_data_loss_only(tmp_path):
    """A model that does not match the checkpoint is the caller's error, not corruption:
    it is raised as before, even when the checkpoint is also corrupt elsewhere."""
    var_list, saved, paths = _three_checkpoints(tmp_path)
    _corrupt(paths[2], "W", "flip")
    target = FakeSession()
    w = target.variable("W", np.zeros((4, 3), np.float32), slots=("Momentum",))
    with pytest.raises(errors.NotFoundError, match="Key W/Momentum not found"):
        ckpt_saver.Saver([w]).restore(target, paths[2])
    assert target.writes == 0


# ---- the chief of MonitoredTrainingSession and Supervisor ---------------------------------------

def _state(sess, model) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in sess.run(model.state_fetches()).items()}


def _checkpoint_state(path: str) -> dict[str, np.ndarray]:
    reader = psrt.train.load_checkpoint(path)
    return {k: reader.get_tensor(k) for k in STATE_KEYS}


def test_chief_restores_previous_checkpoint_when_latest_is_corrupt(tasks, fresh_graph,
                                                                    tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="psrt")
    ckpt_dir = str(tmp_path / "train")
    first = Job(tasks, init_seed=5)
    try:
        with psrt.train.MonitoredTrainingSession(
                master=first.target, checkpoint_dir=ckpt_dir, save_checkpoint_steps=5,
                hooks=[psrt.train.StopAtStepHook(last_step=12)]) as sess:
            while not sess.should_stop():
                sess.run(first.model.train_op)
    finally:
        first.end()
    at_10 = _checkpoint_state(os.path.join(ckpt_dir, "model.ckpt-10"))
    latest = os.path.join(ckpt_dir, "model.ckpt-12")
    assert psrt.train.latest_checkpoint(ckpt_dir) == latest
    _corrupt(latest, "W/Adagrad", "flip")

    # Supervisor (through SessionManager.prepare_session): step 10's values, not 12's.
    sv_job = Job(tasks, init_seed=99)
    try:
        sv = psrt.train.Supervisor(is_chief=True, logdir=ckpt_dir, saver=psrt.train.Saver(),
                                   global_step=sv_job.model.global_step, summary_op=None)
        sess = sv.prepare_or_wait_for_session(sv_job.target, start_standard_services=False)
        try:
            got = _state(sess, sv_job.model)
        finally:
            sess.close()
    finally:
        sv_job.end()
    assert int(got["global_step"]) == 10
    for k in STATE_KEYS:
        np.testing.assert_array_equal(got[k], at_10[k], err_msg=k)
    assert latest in caplog.text and "'W/Adagrad'" in caplog.text
    assert "Restored %s instead" % os.path.join(ckpt_dir, "model.ckpt-10") in caplog.text

    # MonitoredTrainingSession: restored at 10, never initialized, trains on from 11.
    caplog.clear()
    second = Job(tasks, init_seed=99)
    try:
        inits, created = [], []
        with psrt.train.MonitoredTrainingSession(
                master=second.target, checkpoint_dir=ckpt_dir, save_checkpoint_steps=None,
                save_checkpoint_secs=None,
                scaffold=psrt.train.Scaffold(init_fn=lambda s, sess: inits.append(1))) as sess:
            created.append(_state(sess, second.model))
            _, step = sess.run([second.model.train_op, second.model.global_step])
    finally:
        second.end()
    assert inits == []
    for k in STATE_KEYS:
        np.testing.assert_array_equal(created[0][k], at_10[k], err_msg=k)
    assert step == 11
    assert "Restored %s instead" % os.path.join(ckpt_dir, "model.ckpt-10") in caplog.text


@pytest.mark.slow
def test_restarted_chief_process_continues_from_previous_checkpoint(tasks, tmp_path):
    """A whole job (ps and chief processes) run to step 100, the newest checkpoint corrupted
    on disk, the job started again: the chief goes on from step 50's values."""
    ckpt_dir = str(tmp_path / "train")

    def job(name: str, **config):
        ps = tasks.ps(1, workers=1)
        chief = tasks.worker(name, ps, 1, 0, checkpoint_dir=ckpt_dir, save_checkpoint_steps=50,
                             init_seed=11, **config)
        chief.expect_exit(0, timeout=60)
        for p in ps:
            assert p.reap() == 0
        return chief

    first = job("first", last_step=100)
    assert first.expect("done")["last"] == 100
    at_50 = _checkpoint_state(os.path.join(ckpt_dir, "model.ckpt-50"))
    newest = os.path.join(ckpt_dir, "model.ckpt-100")
    assert psrt.train.latest_checkpoint(ckpt_dir) == newest
    _corrupt(newest, "W", "nan")

    again = job("again", num_steps=20)
    session = again.expect("session")
    assert session["step"] == 50
    for k in STATE_KEYS:
        np.testing.assert_array_equal(np.asarray(session["state"][k], at_50[k].dtype), at_50[k],
                                      err_msg=k)
    assert again.event("init") is None
    done = again.expect("done")
    assert (done["runs"], done["first"], done["last"]) == (20, 51, 70)
    stderr = again.stderr_tail()
    assert "Checkpoint %r, tensor 'W'" % newest in stderr
    assert "Restored %s instead" % os.path.join(ckpt_dir, "model.ckpt-50") in stderr

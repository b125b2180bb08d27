"""Tests of the fused optimizer kernels (csrc/kernels.cc, csrc/kernels_impl.cc).

Every test that computes runs once per kernel target this CPU supports, against a numpy
reference written with TensorFlow 1.x's formulas (tensorflow/core/kernels/training_ops.cc) in the
variable's dtype. Lengths are chosen not to be multiples of any vector width, and one is above
the size at which ApplyDense splits the work across threads.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from psrt import _core, errors

TARGETS = _core.kernel_targets()
# ApplyDense splits tensors of at least 1 << 20 elements across threads; the extra 17 leaves a
# ragged tail for every vector width.
THREADED_N = (1 << 20) + 17
LENGTHS = [1, 7, 17, 1000, THREADED_N]
DTYPES = [np.float32, np.float64]
TOL = {
    np.float32: {"rtol": 1e-6, "atol": 1e-6},
    np.float64: {"rtol": 1e-12, "atol": 1e-12},
}

# (optimizer, kwargs for _core.apply_*). Adam's beta powers are filled in per step.
CASES = {
    "GradientDescent": ("GradientDescent", {"learning_rate": 0.1}),
    "Adagrad": ("Adagrad", {"learning_rate": 0.1}),
    "Momentum": ("Momentum", {"learning_rate": 0.1, "momentum": 0.9}),
    "MomentumNesterov": ("Momentum", {"learning_rate": 0.1, "momentum": 0.9, "use_nesterov": True}),
    "Adam": ("Adam", {"learning_rate": 0.01, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}),
}
NUM_SLOTS = {"GradientDescent": 0, "Adagrad": 1, "Momentum": 1, "Adam": 2}


@pytest.fixture(params=TARGETS)
def target(request):
    """Runs the test with one kernel target active, then restores the previous one."""
    previous = _core.kernel_target()
    _core.set_kernel_target(request.param)
    yield request.param
    _core.set_kernel_target(previous)


def reference_step(optimizer, var, slots, grad, kw):
    """One TF1 update in numpy, in place, every scalar cast to the variable's dtype first."""
    t = var.dtype.type
    lr = t(kw["learning_rate"])
    if optimizer == "GradientDescent":
        var -= grad * lr
    elif optimizer == "Adagrad":
        (accum,) = slots
        accum += grad * grad
        var -= lr * grad / np.sqrt(accum)
    elif optimizer == "Momentum":
        (accum,) = slots
        momentum = t(kw["momentum"])
        accum[...] = accum * momentum + grad
        if kw.get("use_nesterov", False):
            var -= grad * lr + accum * momentum * lr
        else:
            var -= accum * lr
    elif optimizer == "Adam":
        m, v = slots
        lr_t = lr * np.sqrt(t(1) - t(kw["beta2_power"])) / (t(1) - t(kw["beta1_power"]))
        m += (grad - m) * (t(1) - t(kw["beta1"]))
        v += (grad * grad - v) * (t(1) - t(kw["beta2"]))
        var -= (m * lr_t) / (np.sqrt(v) + t(kw["epsilon"]))
    else:
        raise ValueError(optimizer)


def step_kwargs(optimizer, base, step):
    kw = dict(base)
    if optimizer == "Adam":
        kw["beta1_power"] = kw["beta1"] ** step
        kw["beta2_power"] = kw["beta2"] ** step
    return kw


def make_state(optimizer, shape, dtype, seed):
    rng = np.random.default_rng(seed)
    var = rng.standard_normal(shape).astype(dtype)
    # Adagrad's accumulator starts at TF's default 0.1; Momentum and Adam slots at zero.
    fill = 0.1 if optimizer == "Adagrad" else 0.0
    slots = [np.full(shape, fill, dtype) for _ in range(NUM_SLOTS[optimizer])]
    return var, slots


def grads(shape, dtype, seed, steps=3):
    rng = np.random.default_rng(seed + 1000)
    return [rng.standard_normal(shape).astype(dtype) for _ in range(steps)]


# ---- Dense --------------------------------------------------------------------------------


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("case", list(CASES))
def test_dense_matches_numpy(target, case, dtype, n):
    optimizer, base = CASES[case]
    var, slots = make_state(optimizer, n, dtype, seed=n)
    ref_var, ref_slots = var.copy(), [s.copy() for s in slots]
    for step, g in enumerate(grads(n, dtype, seed=n), start=1):
        kw = step_kwargs(optimizer, base, step)
        _core.apply_dense(optimizer, var, slots, g, **kw)
        reference_step(optimizer, ref_var, ref_slots, g, kw)
    np.testing.assert_allclose(var, ref_var, **TOL[dtype])
    for s, r in zip(slots, ref_slots):
        np.testing.assert_allclose(s, r, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("case", list(CASES))
def test_targets_agree_bit_for_bit(case, dtype):
    # kernels_impl.cc turns off FMA contraction so that every target rounds each operation
    # exactly as the baseline does; a difference here means a target computes something else.
    optimizer, base = CASES[case]
    n = 1037
    results = {}
    previous = _core.kernel_target()
    try:
        for t in TARGETS:
            _core.set_kernel_target(t)
            var, slots = make_state(optimizer, n, dtype, seed=7)
            for step, g in enumerate(grads(n, dtype, seed=7), start=1):
                _core.apply_dense(optimizer, var, slots, g, **step_kwargs(optimizer, base, step))
            results[t] = [var] + slots
    finally:
        _core.set_kernel_target(previous)
    for t, arrays in results.items():
        for a, b in zip(arrays, results["baseline"]):
            np.testing.assert_array_equal(a, b, err_msg=f"target {t} differs from baseline")


@pytest.mark.parametrize("case", ["Adagrad", "Adam"])
def test_threaded_split_equals_unsplit(target, case):
    # var starts one element past a 64-byte boundary, so the threads' cache-line-aligned chunk
    # boundaries differ from the even split; an element missed or updated twice would show.
    optimizer, base = CASES[case]
    n = THREADED_N
    backing, slots = make_state(optimizer, n + 1, np.float32, seed=3)
    var = backing[1:]
    slots = [s[1:] for s in slots]
    assert var.flags.c_contiguous
    var_pieces, slots_pieces = var.copy(), [s.copy() for s in slots]
    g = grads(n, np.float32, seed=3, steps=1)[0]
    kw = step_kwargs(optimizer, base, 1)
    _core.apply_dense(optimizer, var, slots, g, **kw)
    piece = 100_003  # below the threading threshold
    for b in range(0, n, piece):
        e = min(n, b + piece)
        _core.apply_dense(optimizer, var_pieces[b:e], [s[b:e] for s in slots_pieces], g[b:e], **kw)
    np.testing.assert_array_equal(var, var_pieces)
    for s, r in zip(slots, slots_pieces):
        np.testing.assert_array_equal(s, r)


def test_adagrad_tf_pinned_values(target):
    # tensorflow/python/training/adagrad_test.py, testBasic (float32, 3 steps).
    var0 = np.array([1.0, 2.0], np.float32)
    var1 = np.array([3.0, 4.0], np.float32)
    accum0 = np.full(2, 0.1, np.float32)
    accum1 = np.full(2, 0.1, np.float32)
    grads0 = np.array([0.1, 0.1], np.float32)
    grads1 = np.array([0.01, 0.01], np.float32)
    for _ in range(3):
        _core.apply_dense("Adagrad", var0, [accum0], grads0, learning_rate=3.0)
        _core.apply_dense("Adagrad", var1, [accum1], grads1, learning_rate=3.0)
    np.testing.assert_allclose(var0, [-1.6026098728179932, -0.6026098728179932], rtol=0, atol=1e-6)
    np.testing.assert_allclose(var1, [2.715679168701172, 3.715679168701172], rtol=0, atol=1e-6)


def test_dense_empty_is_a_no_op(target):
    var = np.zeros(0, np.float32)
    _core.apply_dense("Adagrad", var, [np.zeros(0, np.float32)], var.copy(), learning_rate=0.1)


# ---- Sparse -------------------------------------------------------------------------------


def sparse_reference(optimizer, var, slots, indices, rows, kw):
    """TF1's _apply_sparse_duplicate_indices: sum rows of equal index, then update each once."""
    uniq, inverse = np.unique(indices, return_inverse=True)
    summed = np.zeros((len(uniq), var.shape[1]), var.dtype)
    np.add.at(summed, inverse, rows)
    v = var[uniq]
    s = [slot[uniq] for slot in slots]
    reference_step(optimizer, v, s, summed, kw)
    var[uniq] = v
    for slot, new in zip(slots, s):
        slot[uniq] = new


INDEX_SETS = {
    "sorted": [0, 2, 5, 9],
    "unsorted": [9, 0, 5, 2],
    "duplicates": [3, 1, 3, 3, 8, 1, 0],
    "all_same": [4, 4, 4, 4, 4],
}


@pytest.mark.parametrize("width", [1, 17])
@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("which", list(INDEX_SETS))
@pytest.mark.parametrize("case", list(CASES))
def test_sparse_matches_numpy(target, case, which, dtype, width):
    optimizer, base = CASES[case]
    num_rows = 10
    indices = np.array(INDEX_SETS[which], np.int64)
    var, slots = make_state(optimizer, (num_rows, width), dtype, seed=width)
    ref_var, ref_slots = var.copy(), [s.copy() for s in slots]
    rng = np.random.default_rng(width)
    for step in range(1, 4):
        rows = rng.standard_normal((len(indices), width)).astype(dtype)
        kw = step_kwargs(optimizer, base, step)
        _core.apply_sparse(optimizer, var, slots, indices, rows, **kw)
        sparse_reference(optimizer, ref_var, ref_slots, indices, rows, kw)
    np.testing.assert_allclose(var, ref_var, **TOL[dtype])
    for s, r in zip(slots, ref_slots):
        np.testing.assert_allclose(s, r, **TOL[dtype])
    untouched = np.setdiff1d(np.arange(num_rows), indices)
    init_var, _ = make_state(optimizer, (num_rows, width), dtype, seed=width)
    np.testing.assert_array_equal(var[untouched], init_var[untouched])


@pytest.mark.parametrize("bad,position", [(17, 3), (-1, 2), (10, 0)])
def test_sparse_out_of_range_writes_nothing(target, bad, position):
    indices = np.array([1, 2, 3, 4], np.int64)
    indices[position] = bad
    var, (accum,) = make_state("Adagrad", (10, 5), np.float32, seed=1)
    var_before, accum_before = var.copy(), accum.copy()
    rows = np.ones((4, 5), np.float32)
    with pytest.raises(errors.InvalidArgumentError) as info:
        _core.apply_sparse("Adagrad", var, [accum], indices, rows, learning_rate=0.1)
    assert str(info.value).endswith(
        f"index {bad} at position {position} is out of range [0, 10)"), str(info.value)
    np.testing.assert_array_equal(var, var_before)
    np.testing.assert_array_equal(accum, accum_before)


def test_sparse_no_indices_is_a_no_op(target):
    var, (accum,) = make_state("Adagrad", (4, 3), np.float32, seed=2)
    before = var.copy()
    _core.apply_sparse("Adagrad", var, [accum], np.zeros(0, np.int64),
                       np.zeros((0, 3), np.float32), learning_rate=0.1)
    np.testing.assert_array_equal(var, before)


# ---- Target selection ---------------------------------------------------------------------


def test_target_lists():
    compiled = _core.compiled_kernel_targets()
    assert compiled[-1] == "baseline"
    assert set(compiled) <= {"avx512", "avx2", "baseline"}
    assert TARGETS == [t for t in compiled if t in TARGETS], "supported targets not best-first"
    assert "baseline" in TARGETS
    assert _core.kernel_target() in TARGETS


def test_set_kernel_target_bad_name():
    before = _core.kernel_target()
    with pytest.raises(errors.InvalidArgumentError) as info:
        _core.set_kernel_target("sse9")
    message = str(info.value)
    assert "'sse9'" in message
    for t in TARGETS:
        assert t in message
    assert _core.kernel_target() == before


def _target_in_subprocess(value):
    env = dict(os.environ, PSRT_KERNEL_TARGET=value)
    out = subprocess.run(
        [sys.executable, "-c", "from psrt import _core; print(_core.kernel_target())"],
        env=env, capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip(), out.stderr


@pytest.mark.parametrize("name", TARGETS)
def test_env_var_forces_target(name):
    chosen, _ = _target_in_subprocess(name)
    assert chosen == name


def test_env_var_bad_value_falls_back_to_best():
    chosen, stderr = _target_in_subprocess("sse9")
    assert chosen == TARGETS[0]
    assert "sse9" in stderr

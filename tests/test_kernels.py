"""Tests of the fused optimizer kernels (csrc/kernels.cc, csrc/kernels_impl.cc).

Every test that computes runs once per kernel target this CPU supports, against a numpy
reference written with TensorFlow 1.x's formulas (tensorflow/core/kernels/training_ops.cc, TF
1.15) in the variable's dtype and in TF's order of operations, and, where TF's own tests pin
values (tensorflow/python/training/*_test.py), against those. Lengths are chosen not to be
multiples of any vector width, and one is above the size at which ApplyDense splits the work
across threads.
"""

from __future__ import annotations

import math
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
# The reference rounds every operation as the kernels do (kernels_impl.cc turns FMA contraction
# off), so it matches them bit for bit, and a kernel that takes the dense formula where TF's
# sparse kernel computes in another order fails. The exception is pow (Ftrl with lr_power other
# than -0.5): numpy's power and libm's may differ in the last place.
INEXACT = {"Ftrl_pow"}


def assert_matches(case, arrays, expected, dtype):
    for i, (a, e) in enumerate(zip(arrays, expected)):
        what = f"{case}: {'var' if i == 0 else f'slot {i - 1}'}"
        if case in INEXACT:
            np.testing.assert_allclose(a, e, **TOL[dtype], err_msg=what)
        else:
            np.testing.assert_array_equal(a, e, err_msg=what)

# (optimizer, kwargs for _core.apply_*). Adam's beta powers and AdagradDA's step are filled in
# per step. l1 values are large enough that both sides of every threshold are taken.
CASES = {
    "GradientDescent": ("GradientDescent", {"learning_rate": 0.1}),
    "Adagrad": ("Adagrad", {"learning_rate": 0.1}),
    "Momentum": ("Momentum", {"learning_rate": 0.1, "momentum": 0.9}),
    "MomentumNesterov": ("Momentum", {"learning_rate": 0.1, "momentum": 0.9, "use_nesterov": True}),
    "Adam": ("Adam", {"learning_rate": 0.01, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}),
    "Adadelta": ("Adadelta", {"learning_rate": 0.5, "rho": 0.95, "epsilon": 1e-6}),
    "AdagradDA": ("AdagradDA", {"learning_rate": 0.5, "l2": 0.1}),
    "AdagradDA_L1": ("AdagradDA", {"learning_rate": 0.5, "l1": 0.3, "l2": 0.1}),
    "Ftrl": ("Ftrl", {"learning_rate": 0.5, "l1": 0.5, "l2": 0.1}),
    "Ftrl_pow": ("Ftrl", {"learning_rate": 0.5, "l1": 0.1, "l2": 0.1, "lr_power": -0.3}),
    "FtrlV2": ("Ftrl", {"learning_rate": 0.5, "l1": 0.5, "l2": 0.1, "l2_shrinkage": 0.2}),
    "ProximalGradientDescent": ("ProximalGradientDescent", {"learning_rate": 0.1, "l2": 0.1}),
    "ProximalGradientDescent_L1": ("ProximalGradientDescent",
                                   {"learning_rate": 0.1, "l1": 2.0, "l2": 0.1}),
    "ProximalAdagrad": ("ProximalAdagrad", {"learning_rate": 0.1, "l2": 0.1}),
    "ProximalAdagrad_L1": ("ProximalAdagrad", {"learning_rate": 0.1, "l1": 2.0, "l2": 0.1}),
    "RMSProp": ("RMSProp", {"learning_rate": 0.01, "rho": 0.9, "epsilon": 1e-10}),
    "RMSPropMomentum": ("RMSProp", {"learning_rate": 0.01, "rho": 0.9, "momentum": 0.5,
                                    "epsilon": 1e-6}),
    "CenteredRMSProp": ("CenteredRMSProp", {"learning_rate": 0.01, "rho": 0.9, "momentum": 0.5,
                                            "epsilon": 1e-6}),
}
# Each slot's initial value in TF1's optimizers (Adagrad's, ProximalAdagrad's and Ftrl's
# accumulators 0.1; AdagradDA's squared accumulator 0.1; RMSProp's rms 1.0), in slot order.
SLOT_INIT = {
    "GradientDescent": (), "Adagrad": (0.1,), "Momentum": (0.0,), "Adam": (0.0, 0.0),
    "Adadelta": (0.0, 0.0), "AdagradDA": (0.0, 0.1), "Ftrl": (0.1, 0.0),
    "ProximalGradientDescent": (), "ProximalAdagrad": (0.1,), "RMSProp": (1.0, 0.0),
    "CenteredRMSProp": (1.0, 0.0, 0.0),
}
SLOT_NAMES = {
    "GradientDescent": [], "Adagrad": ["Adagrad"], "Momentum": ["Momentum"],
    "Adam": ["Adam", "Adam_1"], "Adadelta": ["accum", "accum_update"],
    "AdagradDA": ["gradient_accumulator", "gradient_squared_accumulator"],
    "Ftrl": ["accum", "linear"], "ProximalGradientDescent": [],
    "ProximalAdagrad": ["accumulator"], "RMSProp": ["rms", "momentum"],
    "CenteredRMSProp": ["rms", "momentum", "mg"],
}


@pytest.fixture(params=TARGETS)
def target(request):
    """Runs the test with one kernel target active, then restores the previous one."""
    previous = _core.kernel_target()
    _core.set_kernel_target(request.param)
    yield request.param
    _core.set_kernel_target(previous)


def wide(x):
    return np.asarray(x, np.float64)


def pow_(x, p):
    """x**p rounded once to x's dtype (as libm's powf/pow, up to their last-place error)."""
    return np.power(wide(x), float(p)).astype(x.dtype)


def reference_step(optimizer, var, slots, grad, kw, form="dense"):
    """One TF1 update in numpy, in place, every scalar cast to the variable's dtype first and
    every expression evaluated in TF's order.

    form: "dense" (Apply*), "rows" (a Sparse* kernel's loop over rows) or "scalars" (its loop
    over a rank-1 variable's elements), where TF's kernels compute differently.
    """
    t = var.dtype.type
    lr = t(kw["learning_rate"])
    l1, l2 = t(kw.get("l1", 0.0)), t(kw.get("l2", 0.0))
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
    elif optimizer == "Adadelta":  # ApplyAdadelta = SparseApplyAdadelta
        accum, accum_update = slots
        rho, eps = t(kw["rho"]), t(kw["epsilon"])
        accum[...] = accum * rho + grad * grad * (t(1) - rho)
        update = np.sqrt(accum_update + eps) * (t(1) / np.sqrt(accum + eps)) * grad
        var -= update * lr
        accum_update[...] = accum_update * rho + update * update * (t(1) - rho)
    elif optimizer == "AdagradDA":
        gacc, gg = slots
        step = kw["global_step"]
        if form == "scalars":  # the gradient and the arithmetic after the sums in double
            g = wide(grad)
            gacc[...] = (wide(gacc) + g).astype(t)
            gg[...] = (wide(gg) + g * g).astype(t)
            den = float(step) * float(l2) * float(lr) + wide(np.sqrt(gg))
            if l1 > 0:
                m = wide(np.abs(gacc)) - float(step) * float(l1)
                var[...] = (wide(np.sign(-gacc)) * float(lr) * np.maximum(m, 0.0) / den).astype(t)
            else:
                var[...] = (wide(-gacc) * float(lr) / den).astype(t)
            return
        gacc += grad
        gg += grad * grad
        if form == "rows":  # the step in T, divided out of the numerator
            step_t = t(step)
            den = l2 + np.sqrt(gg) / (step_t * lr)
            if l1 > 0:
                m = np.maximum(np.abs(gacc) / step_t - l1, t(0))
                var[...] = t(-1) * np.sign(gacc) * m / den
            else:
                var[...] = t(-1) * (gacc / step_t) / den
        else:  # ApplyAdagradDA's functor takes the step as float
            step_f = t(np.float32(step))
            den = l2 * (step_f * lr) + np.sqrt(gg)
            if l1 > 0:
                var[...] = lr * t(-1) * np.sign(gacc) * np.maximum(np.abs(gacc) - step_f * l1,
                                                                   t(0)) / den
            else:
                var[...] = lr * gacc * t(-1) / den
    elif optimizer == "Ftrl":  # ApplyFtrl, or ApplyFtrlV2 when l2_shrinkage > 0
        accum, linear = slots
        neg_p = -t(kw.get("lr_power", -0.5))
        power = (lambda x: np.sqrt(x)) if neg_p == t(0.5) else (lambda x: pow_(x, neg_p))
        v, a = var.copy(), accum.copy()
        shrinkage = kw.get("l2_shrinkage", 0.0) > 0
        gs = grad + t(2) * t(kw.get("l2_shrinkage", 0.0)) * v if shrinkage else grad
        na = a + grad * grad
        if form == "scalars":  # pow even for lr_power -0.5; summed left to right
            sigma = (pow_(na, neg_p) - pow_(a, neg_p)) / lr
            lin = linear + gs - sigma * v
        else:
            lin = linear + (gs - (power(na) - power(a)) / lr * v)
        y = power(na) / lr + t(2) * l2
        with np.errstate(divide="ignore", invalid="ignore"):
            if form == "dense":
                var[...] = np.where(np.abs(lin) > l1, (l1 * np.sign(lin) - lin) / y, t(0))
            else:  # SparseApplyFtrl clips linear instead of selecting
                var[...] = (np.maximum(np.minimum(lin, l1), -l1) - lin) / y
        linear[...] = lin
        accum[...] = na
    elif optimizer == "ProximalGradientDescent":
        if form == "scalars":  # the division by 1.0 + l2*lr, a double
            prox = var - lr * grad
            num = np.sign(prox) * np.maximum(np.abs(prox) - lr * l1, t(0)) if l1 > 0 else prox
            var[...] = (wide(num) / (1.0 + float(l2 * lr))).astype(t)
        else:
            prox = var - grad * lr
            if l1 > 0:
                m = np.maximum(np.abs(prox) - lr * l1, t(0))
                var[...] = np.sign(prox) * m / (t(1) + l2 * lr)
            else:
                var[...] = prox / (t(1) + l2 * lr)
    elif optimizer == "ProximalAdagrad":
        (accum,) = slots
        accum += grad * grad
        if form == "scalars":  # rate = lr / sqrt(accum); the division in double
            rate = lr / np.sqrt(accum)
            prox = var - rate * grad
            num = np.sign(prox) * np.maximum(np.abs(prox) - rate * l1, t(0)) if l1 > 0 else prox
            var[...] = (wide(num) / (1.0 + wide(l2 * rate))).astype(t)
        else:
            rate = lr * (t(1) / np.sqrt(accum))
            prox = var - grad * rate
            if l1 > 0:
                var[...] = (np.sign(prox) * np.maximum(np.abs(prox) - rate * l1, t(0))
                            / (t(1) + l2 * rate))
            else:
                var[...] = prox / (t(1) + l2 * rate)
    elif optimizer in ("RMSProp", "CenteredRMSProp"):
        ms, mom = slots[0], slots[1]
        rho, momentum, eps = t(kw["rho"]), t(kw.get("momentum", 0.0)), t(kw["epsilon"])
        omr = t(1) - rho
        if form == "dense":  # ApplyRMSProp, ApplyCenteredRMSProp
            ms += (grad * grad - ms) * omr
            if optimizer == "CenteredRMSProp":
                mg = slots[2]
                mg += (grad - mg) * omr
                mom[...] = mom * momentum + grad * lr / np.sqrt(ms - mg * mg + eps)
            else:
                mom[...] = mom * momentum + grad * lr / np.sqrt(ms + eps)
        else:  # SparseApplyRMSProp, SparseApplyCenteredRMSProp
            ms[...] = ms * rho + grad * grad * omr
            if optimizer == "CenteredRMSProp":
                mg = slots[2]
                mg[...] = mg * rho + grad * omr
                mom[...] = mom * momentum + t(1) / np.sqrt(ms + eps - mg * mg) * lr * grad
            else:
                mom[...] = mom * momentum + t(1) / np.sqrt(ms + eps) * lr * grad
        var -= mom
    else:
        raise ValueError(optimizer)


def step_kwargs(optimizer, base, step):
    kw = dict(base)
    if optimizer == "Adam":
        kw["beta1_power"] = kw["beta1"] ** step
        kw["beta2_power"] = kw["beta2"] ** step
    if optimizer == "AdagradDA":
        kw["global_step"] = step  # TF's AdagradDAOptimizer passes its global step + 1
    return kw


def make_state(optimizer, shape, dtype, seed):
    rng = np.random.default_rng(seed)
    var = rng.standard_normal(shape).astype(dtype)
    slots = [np.full(shape, fill, dtype) for fill in SLOT_INIT[optimizer]]
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
    assert_matches(case, [var] + slots, [ref_var] + ref_slots, dtype)


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


@pytest.mark.parametrize("case", ["Adagrad", "Adam", "FtrlV2", "CenteredRMSProp"])
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
    """TF1's _apply_sparse_duplicate_indices: sum rows of equal index, then update each once
    with the Sparse* kernel's formula (its scalar loop for rows of one element)."""
    uniq, inverse = np.unique(indices, return_inverse=True)
    summed = np.zeros((len(uniq), var.shape[1]), var.dtype)
    np.add.at(summed, inverse, rows)
    v = var[uniq]
    s = [slot[uniq] for slot in slots]
    reference_step(optimizer, v, s, summed, kw, form="scalars" if var.shape[1] == 1 else "rows")
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
    assert_matches(case, [var] + slots, [ref_var] + ref_slots, dtype)
    untouched = np.setdiff1d(np.arange(num_rows), indices)
    init_var, _ = make_state(optimizer, (num_rows, width), dtype, seed=width)
    np.testing.assert_array_equal(var[untouched], init_var[untouched])


@pytest.mark.parametrize("case", [c for c in CASES if "_" not in c])
@pytest.mark.parametrize("bad,position", [(17, 3), (-1, 2), (10, 0)])
def test_sparse_out_of_range_writes_nothing(target, case, bad, position):
    # The bad index comes after good ones, some repeated: nothing is written before the check.
    optimizer, base = CASES[case]
    indices = np.array([1, 2, 1, 4], np.int64)
    indices[position] = bad
    var, slots = make_state(optimizer, (10, 5), np.float32, seed=1)
    before = [a.copy() for a in [var] + slots]
    rows = np.ones((4, 5), np.float32)
    with pytest.raises(errors.InvalidArgumentError) as info:
        _core.apply_sparse(optimizer, var, slots, indices, rows, **step_kwargs(optimizer, base, 1))
    assert str(info.value).endswith(
        f"index {bad} at position {position} is out of range [0, 10)"), str(info.value)
    for a, b in zip([var] + slots, before):
        np.testing.assert_array_equal(a, b)


def test_sparse_no_indices_is_a_no_op(target):
    var, (accum,) = make_state("Adagrad", (4, 3), np.float32, seed=2)
    before = var.copy()
    _core.apply_sparse("Adagrad", var, [accum], np.zeros(0, np.int64),
                       np.zeros((0, 3), np.float32), learning_rate=0.1)
    np.testing.assert_array_equal(var, before)


def test_sparse_ftrl_zero_accumulator_gives_nan_as_tf():
    # SparseApplyFtrl divides clip(linear) - linear = 0 by y = sqrt(0)/lr + 2*l2 = 0 where
    # ApplyFtrl selects 0 (TF 1.15 training_ops.cc): a zero accumulator (initial value 0 is
    # allowed) and a zero gradient give NaN in the sparse kernel only. psrt reproduces it.
    for width in (1, 3):
        var, accum, linear = (np.zeros((2, width), np.float32) for _ in range(3))
        _core.apply_sparse("Ftrl", var, [accum, linear], np.array([0], np.int64),
                           np.zeros((1, width), np.float32), learning_rate=0.1)
        assert np.isnan(var[0]).all() and (var[1] == 0).all()
    var, accum, linear = (np.zeros(3, np.float32) for _ in range(3))
    _core.apply_dense("Ftrl", var, [accum, linear], np.zeros(3, np.float32), learning_rate=0.1)
    np.testing.assert_array_equal(var, 0)


# ---- TF's own test values ------------------------------------------------------------------
# Each entry: the TF test (tensorflow/python/training/<file>, TF 1.15) whose pinned values it
# checks, the optimizer, its keyword arguments, the number of steps, and (initial var,
# gradient, expected var) for each of the test's variables. Slots start at TF's initial values.

TF_DENSE = [
    ("adagrad_da_test.py testAdagradDAwithoutRegularizationBasic1", "AdagradDA",
     {"learning_rate": 3.0}, 1,
     [([0.0, 0.0], [0.1, 0.2], [-0.904534, -1.603567]),
      ([0.0, 0.0], [0.01, 0.02], [-0.094821, -0.189358])]),
    ("adagrad_da_test.py testAdagradDAwithoutRegularizationBasic2", "AdagradDA",
     {"learning_rate": 3.0}, 1,
     [([1.0, 2.0], [0.1, 0.2], [-0.904534, -1.603567]),
      ([4.0, 3.0], [0.01, 0.02], [-0.094821, -0.189358])]),
    ("adagrad_da_test.py testAdagradDAWithL1", "AdagradDA",
     {"learning_rate": 3.0, "l1": 0.001}, 1,
     [([1.0, 2.0], [0.1, 0.2], [-0.895489, -1.59555]),
      ([4.0, 3.0], [0.01, 0.02], [-0.085339, -0.17989])]),
    ("adagrad_da_test.py testAdagradDAWithL1_L2", "AdagradDA",
     {"learning_rate": 3.0, "l1": 0.001, "l2": 2.0}, 1,
     [([1.0, 2.0], [0.1, 0.2], [-0.046907, -0.093659]),
      ([4.0, 3.0], [0.01, 0.02], [-0.004275, -0.009023])]),
    ("ftrl_test.py testFtrlwithoutRegularization", "Ftrl", {"learning_rate": 3.0}, 3,
     [([0.0, 0.0], [0.1, 0.2], [-2.60260963, -4.29698515]),
      ([0.0, 0.0], [0.01, 0.02], [-0.28432083, -0.56694895])]),
    ("ftrl_test.py testFtrlwithoutRegularization2", "Ftrl", {"learning_rate": 3.0}, 3,
     [([1.0, 2.0], [0.1, 0.2], [-2.55607247, -3.98729396]),
      ([4.0, 3.0], [0.01, 0.02], [-0.28232238, -0.56096673])]),
    ("ftrl_test.py testFtrlWithL1", "Ftrl", {"learning_rate": 3.0, "l1": 0.001}, 10,
     [([1.0, 2.0], [0.1, 0.2], [-7.66718769, -10.91273689]),
      ([4.0, 3.0], [0.01, 0.02], [-0.93460727, -1.86147261])]),
    ("ftrl_test.py testFtrlWithL1_L2", "Ftrl", {"learning_rate": 3.0, "l1": 0.001, "l2": 2.0}, 10,
     [([1.0, 2.0], [0.1, 0.2], [-0.24059935, -0.46829352]),
      ([4.0, 3.0], [0.01, 0.02], [-0.02406147, -0.04830509])]),
    ("ftrl_test.py testFtrlWithL1_L2_L2Shrinkage", "Ftrl",
     {"learning_rate": 3.0, "l1": 0.001, "l2": 2.0, "l2_shrinkage": 0.1}, 10,
     [([1.0, 2.0], [0.1, 0.2], [-0.22578995, -0.44345796]),
      ([4.0, 3.0], [0.01, 0.02], [-0.14378493, -0.13229476])]),
    ("proximal_adagrad_test.py testProximalAdagradwithoutRegularization", "ProximalAdagrad",
     {"learning_rate": 3.0}, 3,
     [([0.0, 0.0], [0.1, 0.2], [-2.60260963, -4.29698515]),
      ([0.0, 0.0], [0.01, 0.02], [-0.28432083, -0.56694895])]),
    ("proximal_adagrad_test.py testProximalAdagradwithoutRegularization2", "ProximalAdagrad",
     {"learning_rate": 3.0}, 3,
     [([1.0, 2.0], [0.1, 0.2], [-1.60261, -2.296985]),
      ([4.0, 3.0], [0.01, 0.02], [3.715679, 2.433051])]),
    ("proximal_adagrad_test.py testProximalAdagradWithL1", "ProximalAdagrad",
     {"learning_rate": 3.0, "l1": 0.001}, 10,
     [([1.0, 2.0], [0.1, 0.2], [-6.663634, -9.190331]),
      ([4.0, 3.0], [0.01, 0.02], [2.959304, 1.029232])]),
    ("proximal_adagrad_test.py testProximalAdagradWithL1_L2", "ProximalAdagrad",
     {"learning_rate": 3.0, "l1": 0.001, "l2": 2.0}, 10,
     [([1.0, 2.0], [0.1, 0.2], [-0.0495, -0.0995]),
      ([4.0, 3.0], [0.01, 0.02], [-0.0045, -0.0095])]),
    ("proximal_gradient_descent_test.py testProximalGradientDescentwithoutRegularization",
     "ProximalGradientDescent", {"learning_rate": 3.0}, 3,
     [([0.0, 0.0], [0.1, 0.2], [-0.9, -1.8]), ([0.0, 0.0], [0.01, 0.02], [-0.09, -0.18])]),
    ("proximal_gradient_descent_test.py testProximalGradientDescentwithoutRegularization2",
     "ProximalGradientDescent", {"learning_rate": 3.0}, 3,
     [([1.0, 2.0], [0.1, 0.2], [0.1, 0.2]), ([4.0, 3.0], [0.01, 0.02], [3.91, 2.82])]),
    ("proximal_gradient_descent_test.py testProximalGradientDescentWithL1_L2",
     "ProximalGradientDescent", {"learning_rate": 3.0, "l1": 0.001, "l2": 2.0}, 10,
     [([1.0, 2.0], [0.1, 0.2], [-0.0495, -0.0995]),
      ([4.0, 3.0], [0.01, 0.02], [-0.0045, -0.0095])]),
]


def tf_run_dense(optimizer, kw, steps, var, grad, dtype):
    """`steps` dense updates of a variable starting at `var`, slots at TF's initial values."""
    var = np.array(var, dtype)
    slots = [np.full(var.shape, fill, dtype) for fill in SLOT_INIT[optimizer]]
    g = np.array(grad, dtype)
    for step in range(1, steps + 1):
        _core.apply_dense(optimizer, var, slots, g, **step_kwargs(optimizer, kw, step))
    return var, slots


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("test,optimizer,kw,steps,variables", TF_DENSE,
                         ids=[t[0].split()[1] for t in TF_DENSE])
def test_tf_pinned_dense(target, test, optimizer, kw, steps, variables, dtype):
    for var, grad, want in variables:
        got, _ = tf_run_dense(optimizer, kw, steps, var, grad, dtype)
        # assertAllClose / assertAllCloseAccordingToType: rtol = atol = 1e-6.
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=test)


# testMinimizeSparseResourceVariable in each TF test file: var0 = [[1, 2]], loss = (var0[0] .
# [4, 5])^2, so one sparse update of row 0 with the gradient 2 * 14 * [4, 5] = [112, 140].
TF_MINIMIZE_SPARSE = [
    ("adadelta_test.py", "Adadelta", {"learning_rate": 1.0, "rho": 1.0, "epsilon": 1.0},
     [-111, -138], {"rtol": 1e-6, "atol": 1e-6}),
    ("adagrad_da_test.py", "AdagradDA", {"learning_rate": 1.0}, [-1, -1], {"rtol": 0.01}),
    ("ftrl_test.py", "Ftrl", {"learning_rate": 1.0}, [0, 1], {"atol": 0.01}),
    ("proximal_adagrad_test.py", "ProximalAdagrad", {"learning_rate": 1.0}, [0, 1],
     {"atol": 0.01}),
    ("proximal_gradient_descent_test.py", "ProximalGradientDescent", {"learning_rate": 1.0},
     [-111, -138], {"atol": 0.01}),
    ("rmsprop_test.py", "RMSProp", {"learning_rate": 1.0, "rho": 0.0, "epsilon": 0.0}, [0, 1],
     {"atol": 0.01}),
    ("rmsprop_test.py Centered", "CenteredRMSProp",
     {"learning_rate": 1.0, "rho": 0.0, "epsilon": 1.0}, [-111, -138], {"atol": 0.01}),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("test,optimizer,kw,want,tol", TF_MINIMIZE_SPARSE,
                         ids=[t[1] for t in TF_MINIMIZE_SPARSE])
def test_tf_pinned_minimize_sparse(target, test, optimizer, kw, want, tol, dtype):
    var = np.array([[1.0, 2.0]], dtype)
    slots = [np.full(var.shape, fill, dtype) for fill in SLOT_INIT[optimizer]]
    _core.apply_sparse(optimizer, var, slots, np.array([0], np.int64),
                       np.array([[112.0, 140.0]], dtype), **step_kwargs(optimizer, kw, 1))
    np.testing.assert_allclose(var, [want], **tol, err_msg=test)


def tf_run_sparse(optimizer, kw, steps, dtype, var, index, grad):
    """ftrl_test.py / proximal_*_test.py applyOptimizer(is_sparse=True): a [2, 1] variable and
    one gradient row at `index`, `steps` times."""
    var = np.array(var, dtype)
    slots = [np.full(var.shape, fill, dtype) for fill in SLOT_INIT[optimizer]]
    for step in range(1, steps + 1):
        _core.apply_sparse(optimizer, var, slots, np.array([index], np.int64),
                           np.array([[grad]], dtype), **step_kwargs(optimizer, kw, step))
    return var, slots


def test_tf_ftrl_l2_shrinkage_sparse(target):
    # ftrl_test.py testFtrlWithL1_L2_L2ShrinkageSparse (float32; TF's scalar loop, width 1).
    kw = {"learning_rate": 3.0, "l1": 0.001, "l2": 2.0, "l2_shrinkage": 0.1}
    var0, _ = tf_run_sparse("Ftrl", kw, 10, np.float32, [[1.0], [2.0]], 0, 0.1)
    var1, _ = tf_run_sparse("Ftrl", kw, 10, np.float32, [[4.0], [3.0]], 1, 0.02)
    np.testing.assert_allclose(var0, [[-0.22578995], [2.0]], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(var1, [[4.0], [-0.13229476]], rtol=1e-6, atol=1e-6)


def test_tf_ftrl_l2_shrinkage_keeps_accumulator(target):
    # ftrl_test.py testFtrlWithL2ShrinkageDoesNotChangeLrSchedule: with shrinkage the weights
    # are smaller, and the accumulator is the one without it.
    base = {"learning_rate": 3.0, "l1": 0.001, "l2": 2.0}
    var0, (accum0, _) = tf_run_dense("Ftrl", {**base, "l2_shrinkage": 0.1}, 10, [1.0, 2.0],
                                     [0.1, 0.2], np.float32)
    var1, (accum1, _) = tf_run_dense("Ftrl", base, 10, [1.0, 2.0], [0.1, 0.2], np.float32)
    assert (var0 ** 2 < var1 ** 2).all()
    np.testing.assert_allclose(accum0, accum1, rtol=1e-6, atol=1e-6)


# The equivalences TF's tests assert, from zero-initialized (FTRL) or given variables:
# (test, optimizer and kwargs, the equivalent optimizer and kwargs, initial vars).
TF_EQUIVALENT = [
    ("ftrl_test.py testEquivAdagradwithoutRegularization",
     ("Ftrl", {"learning_rate": 3.0, "lr_power": -0.5}), ("Adagrad", {"learning_rate": 3.0}),
     ([0.0, 0.0], [0.0, 0.0])),
    ("ftrl_test.py testEquivGradientDescentwithoutRegularization",
     ("Ftrl", {"learning_rate": 3.0, "lr_power": -0.0}),
     ("GradientDescent", {"learning_rate": 3.0}), ([0.0, 0.0], [0.0, 0.0])),
    ("proximal_adagrad_test.py testEquivAdagradwithoutRegularization",
     ("ProximalAdagrad", {"learning_rate": 3.0}), ("Adagrad", {"learning_rate": 3.0}),
     ([1.0, 2.0], [3.0, 4.0])),
    ("proximal_gradient_descent_test.py testEquivGradientDescentwithoutRegularization",
     ("ProximalGradientDescent", {"learning_rate": 3.0}),
     ("GradientDescent", {"learning_rate": 3.0}), ([1.0, 2.0], [3.0, 4.0])),
]


@pytest.mark.parametrize("test,first,second,init", TF_EQUIVALENT,
                         ids=[t[0].replace(".py ", ".") for t in TF_EQUIVALENT])
def test_tf_equivalences(target, test, first, second, init):
    # applyOptimizer: 5 steps; dense gradients [0.1, 0.2] and [0.01, 0.02]; sparse: a [2, 1]
    # variable, gradient 0.1 at row 0 and 0.02 at row 1.
    as_rows = ([[x] for x in init[0]], [[x] for x in init[1]])
    for (v0, v1), dense in [(init, True), (as_rows, False)]:
        results = []
        for optimizer, kw in (first, second):
            if dense:
                a, _ = tf_run_dense(optimizer, kw, 5, v0, [0.1, 0.2], np.float32)
                b, _ = tf_run_dense(optimizer, kw, 5, v1, [0.01, 0.02], np.float32)
            else:
                a, _ = tf_run_sparse(optimizer, kw, 5, np.float32, v0, 0, 0.1)
                b, _ = tf_run_sparse(optimizer, kw, 5, np.float32, v1, 1, 0.02)
            results.append((a, b))
        for got, want in zip(results[0], results[1]):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=test)


@pytest.mark.parametrize("grad", [0.2, 0.1, 0.01])
@pytest.mark.parametrize("lr", [1.0, 0.5, 0.1])
def test_tf_adadelta_basic(target, grad, lr):
    # adadelta_test.py testBasic (float32): 4 steps checked against TF's own loop in Python
    # floats, rho 0.95, epsilon 1e-8, rtol 1e-3.
    rho, epsilon = 0.95, 1e-8
    var = np.array([1.0, 2.0], np.float32)
    accum, accum_update = np.zeros(2, np.float32), np.zeros(2, np.float32)
    g = np.array([grad, grad], np.float32)
    want_accum = want_update = total = 0.0
    for _ in range(4):
        _core.apply_dense("Adadelta", var, [accum, accum_update], g, learning_rate=lr, rho=rho,
                          epsilon=epsilon)
        want_accum = want_accum * rho + grad ** 2 * (1 - rho)
        update = math.sqrt(want_update + epsilon) * (1.0 / math.sqrt(want_accum + epsilon)) * grad
        want_update = want_update * rho + update ** 2 * (1.0 - rho)
        total += update * lr
        np.testing.assert_allclose(accum, [want_accum] * 2, rtol=1e-3)
        np.testing.assert_allclose(accum_update, [want_update] * 2, rtol=1e-3)
        np.testing.assert_allclose(var, [1.0 - total, 2.0 - total], rtol=1e-3)


@pytest.mark.parametrize("momentum,epsilon", [(0.0, 1.0), (0.5, 1e-5)])
def test_tf_rmsprop_two_steps(target, momentum, epsilon):
    # rmsprop_test.py testWithoutMomentum (epsilon 1.0) and testWithMomentum (momentum 0.5,
    # epsilon 1e-5): learning rate 2, decay 0.9, rms starting at 1; TF's closed-form values.
    var0, var1 = np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0], np.float32)
    s0 = [np.ones(2, np.float32), np.zeros(2, np.float32)]
    s1 = [np.ones(2, np.float32), np.zeros(2, np.float32)]
    kw = {"learning_rate": 2.0, "rho": 0.9, "momentum": momentum, "epsilon": epsilon}
    for g, var, slots, start in ((0.1, var0, s0, [1.0, 2.0]), (0.01, var1, s1, [3.0, 4.0])):
        grads_ = np.full(2, g, np.float32)
        rms1 = 0.9 + 0.1 * g * g  # 0.901, 0.90001
        mom1 = g * 2.0 / math.sqrt(rms1 + epsilon)
        _core.apply_dense("RMSProp", var, slots, grads_, **kw)
        np.testing.assert_allclose(slots[0], [rms1] * 2, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(var, [x - mom1 for x in start], rtol=1e-6, atol=1e-6)
        rms2 = rms1 * 0.9 + 0.1 * g * g  # 0.901 * 0.9 + 0.001, 0.90001 * 0.9 + 1e-5
        mom2 = momentum * mom1 + g * 2.0 / math.sqrt(rms2 + epsilon)
        _core.apply_dense("RMSProp", var, slots, grads_, **kw)
        np.testing.assert_allclose(slots[0], [rms2] * 2, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(slots[1], [mom2] * 2, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(var, [x - mom1 - mom2 for x in start], rtol=1e-6, atol=1e-6)


# rmsprop_test.py _TEST_PARAM_VALUES: learning_rate, decay, momentum, epsilon, centered.
TF_RMSPROP_PARAMS = [
    (0.5, 0.9, 0.0, 1e-3, True), (0.5, 0.9, 0.0, 1e-3, False), (0.1, 0.9, 0.0, 1e-3, True),
    (0.5, 0.95, 0.0, 1e-3, False), (0.5, 0.95, 0.0, 1e-5, True), (0.5, 0.95, 0.9, 1e-5, True),
]


def tf_rmsprop_update_numpy(var, g, mg, rms, mom, lr, decay, momentum, epsilon, centered):
    """rmsprop_test.py _rmsprop_update_numpy, TF's reference for testDense and testSparse."""
    rms_t = rms * decay + (1 - decay) * g * g
    denom_t = rms_t + epsilon
    if centered:
        mg_t = mg * decay + (1 - decay) * g
        denom_t -= mg_t * mg_t
    else:
        mg_t = mg
    mom_t = momentum * mom + lr * g / np.sqrt(denom_t, dtype=denom_t.dtype)
    return var - mom_t, mg_t, rms_t, mom_t


@pytest.mark.parametrize("sparse", [False, True], ids=["testDense", "testSparse"])
@pytest.mark.parametrize("lr,decay,momentum,epsilon,centered", TF_RMSPROP_PARAMS)
def test_tf_rmsprop_against_tf_numpy(target, sparse, lr, decay, momentum, epsilon, centered):
    # rmsprop_test.py testDense / testSparse (float32, 4 steps, assertAllCloseAccordingToType);
    # testSparse updates row 0 of var0 with 0.1 and row 1 of var1 with 0.01.
    optimizer = "CenteredRMSProp" if centered else "RMSProp"
    kw = {"learning_rate": lr, "rho": decay, "momentum": momentum, "epsilon": epsilon}
    cases = ([([1.0, 2.0], [0.1, 0.2], None), ([3.0, 4.0], [0.01, 0.2], None)] if not sparse
             else [([1.0, 2.0], [0.1], 0), ([3.0, 4.0], [0.01], 1)])
    for init, g, index in cases:
        var = np.array(init, np.float32)
        slots = [np.full(2, fill, np.float32) for fill in SLOT_INIT[optimizer]]
        want = [var.copy(), np.zeros(2, np.float32), np.ones(2, np.float32),
                np.zeros(2, np.float32)]  # var, mg, rms, mom
        g = np.array(g, np.float32)
        for _ in range(4):
            if sparse:
                _core.apply_sparse(optimizer, var.reshape(2, 1), [s.reshape(2, 1) for s in slots],
                                   np.array([index], np.int64), g.reshape(1, 1), **kw)
                rows = [w[index:index + 1] for w in want]
                rows = tf_rmsprop_update_numpy(*rows[:1], g, *rows[1:], lr, decay, momentum,
                                               epsilon, centered)
                for w, r in zip(want, rows):
                    w[index:index + 1] = r
            else:
                _core.apply_dense(optimizer, var, slots, g, **kw)
                want = list(tf_rmsprop_update_numpy(want[0], g, *want[1:], lr, decay, momentum,
                                                    epsilon, centered))
            got = [var, slots[2] if centered else None, slots[0], slots[1]]
            for name, a, w in zip(["var", "mg", "rms", "mom"], got, want):
                if a is not None:
                    np.testing.assert_allclose(a, w, rtol=1e-6, atol=1e-6, err_msg=name)


# ---- Arguments ---------------------------------------------------------------------------


def test_slot_names():
    for optimizer, names in SLOT_NAMES.items():
        assert _core.slot_names(optimizer) == names, optimizer
    with pytest.raises(errors.InvalidArgumentError) as info:
        _core.slot_names("Adamax")
    assert "'Adamax'" in str(info.value)
    for optimizer in SLOT_NAMES:
        assert optimizer in str(info.value)


def test_wrong_slot_count_names_the_slots():
    var = np.zeros(3, np.float32)
    with pytest.raises(errors.InvalidArgumentError) as info:
        _core.apply_dense("CenteredRMSProp", var, [var.copy(), var.copy()], var.copy(),
                          learning_rate=0.1)
    assert "CenteredRMSProp needs 3 slots (rms, momentum, mg); got 2" in str(info.value)


@pytest.mark.parametrize("optimizer,defaults,explicit", [
    ("RMSProp", {}, {"rho": 0.9, "epsilon": 1e-10}),
    ("CenteredRMSProp", {}, {"rho": 0.9, "epsilon": 1e-10}),
    ("Adadelta", {}, {"rho": 0.95, "epsilon": 1e-8}),
    ("Adam", {"beta1_power": 0.9, "beta2_power": 0.999},
     {"beta1_power": 0.9, "beta2_power": 0.999, "epsilon": 1e-8}),
])
def test_rho_and_epsilon_default_to_tf_defaults(optimizer, defaults, explicit):
    results = []
    for kw in (defaults, explicit):
        var, slots = make_state(optimizer, 9, np.float64, seed=4)
        _core.apply_dense(optimizer, var, slots, grads(9, np.float64, seed=4)[0],
                          learning_rate=0.01, **kw)
        results.append(var)
    np.testing.assert_array_equal(results[0], results[1])


# Hyper-parameters TF's kernels refuse (training_ops.cc: ApplyFtrlOp, SparseApplyFtrlOp,
# ApplyProximalAdagradOp, SparseApplyProximalAdagradOp), and AdagradDA without a step.
REFUSED = [
    ("Ftrl", {"learning_rate": 0.0}, "learning_rate 0 must be > 0"),
    ("Ftrl", {"learning_rate": 0.1, "l1": -0.5}, "l1 -0.5 must be >= 0"),
    ("Ftrl", {"learning_rate": 0.1, "l2": -1.0}, "l2 -1 must be >= 0"),
    ("Ftrl", {"learning_rate": 0.1, "lr_power": 0.5}, "lr_power 0.5 must be <= 0"),
    ("Ftrl", {"learning_rate": 0.1, "l2_shrinkage": -0.1}, "l2_shrinkage -0.1 must be >= 0"),
    ("Ftrl", {"learning_rate": float("nan")}, "learning_rate nan must be > 0"),
    ("ProximalAdagrad", {"learning_rate": -0.1}, "learning_rate -0.1 must be > 0"),
    ("ProximalAdagrad", {"learning_rate": 0.1, "l1": -1.0}, "l1 -1 must be >= 0"),
    ("ProximalAdagrad", {"learning_rate": 0.1, "l2": -1.0}, "l2 -1 must be >= 0"),
    ("AdagradDA", {"learning_rate": 0.1}, "global_step 0 must be >= 1"),
]


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("optimizer,kw,message", REFUSED,
                         ids=[f"{o}-{m.split()[0]}" for o, _, m in REFUSED])
def test_refused_hyper_parameters_write_nothing(target, optimizer, kw, message, sparse):
    var, slots = make_state(optimizer, (4, 3), np.float32, seed=6)
    before = [a.copy() for a in [var] + slots]
    with pytest.raises(errors.InvalidArgumentError) as info:
        if sparse:
            _core.apply_sparse(optimizer, var, slots, np.array([1, 1], np.int64),
                               np.ones((2, 3), np.float32), **kw)
        else:
            _core.apply_dense(optimizer, var, slots, np.ones((4, 3), np.float32), **kw)
    assert message in str(info.value) and optimizer in str(info.value), str(info.value)
    for a, b in zip([var] + slots, before):
        np.testing.assert_array_equal(a, b)


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

"""Fused optimizer throughput: psrt's kernels vs numpy (and Adagrad vs a plain C loop), same
data, same run.

Run with ``pytest benchmarks/ --benchmark-only``; without that flag these tests skip.

Adagrad moves 20 bytes per float32 element (read var, accum, grad; write var, accum), so the
figure of merit is GB/s at 20 bytes/element, and its ceiling is memory bandwidth. References:

- numpy in place with ``out=``, the best a numpy user gets (6 passes over memory instead of 1);
- the same fused loop in C compiled here with ``cc -O3 -march=native -fno-math-errno``: what the
  machine can do single-threaded with no dispatch, no threads and no Python binding. Skipped if
  no C compiler is installed.

Goals: psrt >= 4x numpy and >= 0.9x the native loop. The numbers are printed, not asserted: on a
shared 2-vCPU machine they vary by 15-25 % from run to run. Every figure also goes to the run's
closing table (benchmarks/conftest.py), where a missed goal shows as MISSED.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from psrt import _core

BYTES_PER_ELEMENT = 20
LR = np.float32(0.1)

NATIVE_SOURCE = r"""
#include <math.h>
#include <stddef.h>
void adagrad(float *restrict var, float *restrict accum, const float *restrict grad, size_t n,
             float lr) {
  for (size_t i = 0; i < n; ++i) {
    float g = grad[i];
    float a = accum[i] + g * g;
    accum[i] = a;
    var[i] -= lr * g / sqrtf(a);
  }
}
"""


@pytest.fixture(autouse=True)
def _only_with_benchmark_only(request):
    if not request.config.getoption("benchmark_only", False):
        pytest.skip("benchmark: run with pytest benchmarks/ --benchmark-only")


@pytest.fixture(scope="module")
def native_adagrad():
    """The C loop as a ctypes function, or None when no working C compiler is found."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        yield None
        return
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "adagrad.c"
        lib_path = Path(tmp) / "libadagrad.so"
        src.write_text(NATIVE_SOURCE)
        build = subprocess.run(
            [cc, "-O3", "-march=native", "-fno-math-errno", "-fPIC", "-shared", str(src), "-o",
             str(lib_path)], capture_output=True, text=True, check=False)
        if build.returncode != 0:
            yield None
            return
        lib = ctypes.CDLL(str(lib_path))
        lib.adagrad.restype = None
        lib.adagrad.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_size_t, ctypes.c_float]

        def run(var, accum, grad):
            lib.adagrad(var.ctypes.data, accum.ctypes.data, grad.ctypes.data, var.size, LR)

        yield run


def aligned_empty(n, dtype=np.float32, align=64):
    """An uninitialized array whose data starts on a cache line, as the ps store allocates."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.empty(n * itemsize + align, np.uint8)
    offset = (-raw.ctypes.data) % align
    return raw[offset:offset + n * itemsize].view(dtype)


def make_data(n):
    rng = np.random.default_rng(0)
    var, accum, grad = aligned_empty(n), aligned_empty(n), aligned_empty(n)
    var[...] = rng.standard_normal(n, dtype=np.float32)
    accum[...] = 0.1
    grad[...] = rng.standard_normal(n, dtype=np.float32)
    return var, accum, grad


def psrt_adagrad(var, accum, grad):
    _core.apply_dense("Adagrad", var, [accum], grad, learning_rate=float(LR))


def numpy_adagrad(tmp):
    def run(var, accum, grad):
        np.multiply(grad, grad, out=tmp)
        accum += tmp
        np.sqrt(accum, out=tmp)
        np.divide(grad, tmp, out=tmp)
        np.multiply(tmp, LR, out=tmp)
        var -= tmp

    return run


def check_one_step(name, fn, var, accum, grad):
    """Asserts that one step of `fn` matches TF's formula (float32, numpy, written plainly)."""
    want_accum = accum + grad * grad
    want_var = var - LR * grad / np.sqrt(want_accum)
    v, a = var.copy(), accum.copy()
    fn(v, a, grad)
    np.testing.assert_allclose(a, want_accum, rtol=1e-6, err_msg=name)
    np.testing.assert_allclose(v, want_var, rtol=1e-5, atol=1e-6, err_msg=name)


def report(capsys, line):
    # Printed past the capture so the ratio shows in a normal run, next to pytest-benchmark's
    # table, and not only with -s.
    with capsys.disabled():
        print("\n" + line)


# The goal of psrt's kernel against each reference (ratio of GB/s).
GOALS = {"numpy": 4.0, "native C": 0.9}


@pytest.mark.parametrize("label,n,rounds", [("1M", 1 << 20, 40), ("16M", 1 << 24, 8)])
def test_adagrad_float32(benchmark, capsys, figures, native_adagrad, label, n, rounds):
    benchmark.group = f"adagrad float32 {label}"
    var, accum, grad = make_data(n)
    tmp = aligned_empty(n)
    refs = {"numpy": numpy_adagrad(tmp)}
    if native_adagrad is not None:
        refs["native C"] = native_adagrad

    check_one_step("psrt", psrt_adagrad, var, accum, grad)
    for name, fn in refs.items():
        check_one_step(name, fn, var, accum, grad)

    # The references run in the untimed setup of each psrt round, so all three are measured
    # interleaved on the same arrays and share whatever the machine is doing at the time.
    ref_seconds = {name: [] for name in refs}

    def run_references():
        for name, fn in refs.items():
            t0 = time.perf_counter()
            fn(var, accum, grad)
            ref_seconds[name].append(time.perf_counter() - t0)

    benchmark.pedantic(psrt_adagrad, args=(var, accum, grad), setup=run_references,
                       rounds=rounds, warmup_rounds=1, iterations=1)

    def gbps(seconds):
        return BYTES_PER_ELEMENT * n / seconds / 1e9

    psrt_gbps = gbps(benchmark.stats.stats.median)
    target = _core.kernel_target()
    parts = [f"adagrad {label}: psrt[{target}] {psrt_gbps:.1f} GB/s"]
    figures.add(f"adagrad {label}: psrt[{target}]", psrt_gbps, "GB/s")
    ref_gbps_of = {name: gbps(float(np.median(times))) for name, times in ref_seconds.items()}
    for name, ref_gbps in ref_gbps_of.items():
        figures.add(f"adagrad {label}: {name}", ref_gbps, "GB/s")
    for name, ref_gbps in ref_gbps_of.items():
        ratio = psrt_gbps / ref_gbps
        met = figures.add(f"adagrad {label}: psrt / {name}", ratio, "x", at_least=GOALS[name])
        parts.append(f"{name} {ref_gbps:.1f} GB/s -> {ratio:.2f}x (goal >= {GOALS[name]:g}x"
                     f"{'' if met else ', MISSED'})")
        benchmark.extra_info[f"{name}_gbps"] = round(ref_gbps, 2)
        benchmark.extra_info[f"ratio_vs_{name}"] = round(ratio, 3)
    if native_adagrad is None:
        parts.append("native C skipped (no C compiler)")
    benchmark.extra_info["psrt_gbps"] = round(psrt_gbps, 2)
    report(capsys, "; ".join(parts))


# ---- TF1's other optimizers: psrt's fused kernel vs numpy, same data, same run -------------
#
# Each numpy reference is the same update written as a numpy user would at best: in place,
# with out= and preallocated temporaries, the L1 shrinkage sign(v) * max(|v| - c, 0) as
# v - clip(v, -c, c) (equal, in fewer and faster passes than np.sign). Bytes per element count
# what the update must read and write (float32): Adadelta, Ftrl, RMSProp 28; CenteredRMSProp
# 36; AdagradDA 24 (it does not read var); ProximalAdagrad 20; ProximalGradientDescent 12.
# psrt's goal: >= 3x numpy at 16M elements (the fused pass reads and writes each array once
# where numpy makes 5 to 15 passes over memory) and >= 2x at 1M, where numpy's arrays and
# temporaries stay in cache between its passes.

OTHER_GOALS = {"1M": 2.0, "16M": 3.0}
# optimizer: (keyword arguments, slot initial values, bytes per element)
OTHERS = {
    "Adadelta": ({"learning_rate": 1.0, "rho": 0.95, "epsilon": 1e-6}, (0.0, 0.0), 28),
    "AdagradDA": ({"learning_rate": 0.01, "l1": 0.01, "l2": 0.01, "global_step": 7},
                  (0.0, 0.1), 24),
    "Ftrl": ({"learning_rate": 0.01, "l1": 0.01, "l2": 0.01}, (0.1, 0.0), 28),
    "ProximalGradientDescent": ({"learning_rate": 0.01, "l1": 0.01, "l2": 0.01}, (), 12),
    "ProximalAdagrad": ({"learning_rate": 0.01, "l1": 0.01, "l2": 0.01}, (0.1,), 20),
    "RMSProp": ({"learning_rate": 0.01, "rho": 0.9, "momentum": 0.9, "epsilon": 1e-6},
                (1.0, 0.0), 28),
    "CenteredRMSProp": ({"learning_rate": 0.01, "rho": 0.9, "momentum": 0.9, "epsilon": 1e-6},
                        (1.0, 0.0, 0.0), 36),
}


def numpy_other(optimizer, kw, n):
    """The numpy update of `optimizer` as run(var, slots, grad), with its temporaries."""
    f = np.float32
    # Each function unpacks these into locals (in-place operators rebind the name they update).
    tmp = (aligned_empty(n), aligned_empty(n), aligned_empty(n))
    lr = f(kw["learning_rate"])
    l1, l2 = f(kw.get("l1", 0.0)), f(kw.get("l2", 0.0))
    rho, eps, momentum = f(kw.get("rho", 0.0)), f(kw.get("epsilon", 0.0)), f(kw.get("momentum", 0))

    def adadelta(var, slots, g):
        t1, t2, t3 = tmp
        accum, update_acc = slots
        np.multiply(g, g, out=t1)
        t1 *= f(1) - rho
        accum *= rho
        accum += t1
        np.add(update_acc, eps, out=t1)
        np.sqrt(t1, out=t1)
        np.add(accum, eps, out=t2)
        np.sqrt(t2, out=t2)
        np.divide(t1, t2, out=t1)
        t1 *= g  # the update
        np.multiply(t1, lr, out=t2)
        var -= t2
        np.multiply(t1, t1, out=t1)
        t1 *= f(1) - rho
        update_acc *= rho
        update_acc += t1

    def adagrad_da(var, slots, g):
        t1, t2, t3 = tmp
        gacc, gg = slots
        step = f(kw["global_step"])
        gacc += g
        np.multiply(g, g, out=t1)
        gg += t1
        np.sqrt(gg, out=t1)
        t1 += l2 * (step * lr)
        np.clip(gacc, -step * l1, step * l1, out=t2)
        np.subtract(t2, gacc, out=t2)  # -sign(gacc) * max(|gacc| - step * l1, 0)
        t2 *= lr
        np.divide(t2, t1, out=var)

    def ftrl(var, slots, g):
        t1, t2, t3 = tmp
        accum, linear = slots
        np.multiply(g, g, out=t1)
        t1 += accum  # the new accumulator
        np.sqrt(t1, out=t2)
        np.sqrt(accum, out=t3)
        t3 -= t2
        t3 /= lr
        t3 *= var
        t3 += g
        linear += t3
        np.copyto(accum, t1)
        t2 /= lr
        t2 += f(2) * l2
        np.clip(linear, -l1, l1, out=t3)
        t3 -= linear  # l1 * sign(linear) - linear where |linear| > l1, else 0
        np.divide(t3, t2, out=var)

    def proximal_gd(var, slots, g):
        t1, t2, t3 = tmp
        np.multiply(g, lr, out=t1)
        var -= t1
        np.clip(var, -lr * l1, lr * l1, out=t1)
        var -= t1
        var /= f(1) + l2 * lr

    def proximal_adagrad(var, slots, g):
        t1, t2, t3 = tmp
        (accum,) = slots
        np.multiply(g, g, out=t1)
        accum += t1
        np.sqrt(accum, out=t1)
        np.divide(lr, t1, out=t1)  # the rate
        np.multiply(g, t1, out=t2)
        var -= t2
        np.multiply(t1, l1, out=t3)  # per-element threshold: clip with array bounds is slow
        np.minimum(var, t3, out=t2)
        np.negative(t3, out=t3)
        np.maximum(t2, t3, out=t2)
        var -= t2
        np.multiply(t1, l2, out=t1)
        t1 += f(1)
        var /= t1

    def rmsprop(var, slots, g):
        t1, t2, t3 = tmp
        ms, mom = slots[0], slots[1]
        np.multiply(g, g, out=t1)
        t1 -= ms
        t1 *= f(1) - rho
        ms += t1
        if len(slots) == 3:
            mg = slots[2]
            np.subtract(g, mg, out=t1)
            t1 *= f(1) - rho
            mg += t1
            np.multiply(mg, mg, out=t1)
            np.subtract(ms, t1, out=t1)
        else:
            np.copyto(t1, ms)
        t1 += eps
        np.sqrt(t1, out=t1)
        np.multiply(g, lr, out=t2)
        t2 /= t1
        mom *= momentum
        mom += t2
        var -= mom

    return {"Adadelta": adadelta, "AdagradDA": adagrad_da, "Ftrl": ftrl,
            "ProximalGradientDescent": proximal_gd, "ProximalAdagrad": proximal_adagrad,
            "RMSProp": rmsprop, "CenteredRMSProp": rmsprop}[optimizer]


@pytest.mark.parametrize("label,n,rounds", [("1M", 1 << 20, 30), ("16M", 1 << 24, 6)])
@pytest.mark.parametrize("optimizer", list(OTHERS))
def test_other_optimizers_float32(benchmark, capsys, figures, optimizer, label, n, rounds):
    benchmark.group = f"{optimizer} float32 {label}"
    kw, slot_init, bytes_per_element = OTHERS[optimizer]
    rng = np.random.default_rng(0)
    var, grad = aligned_empty(n), aligned_empty(n)
    var[...] = rng.standard_normal(n, dtype=np.float32)
    grad[...] = rng.standard_normal(n, dtype=np.float32)
    slots = []
    for fill in slot_init:
        slots.append(aligned_empty(n))
        slots[-1][...] = fill

    def psrt_step(var, slots, g):
        _core.apply_dense(optimizer, var, slots, g, **kw)

    numpy_step = numpy_other(optimizer, kw, n)

    # One step of each from the same state agrees (their orders of operations differ).
    ours = [var.copy()] + [s.copy() for s in slots]
    theirs = [var.copy()] + [s.copy() for s in slots]
    psrt_step(ours[0], ours[1:], grad)
    numpy_step(theirs[0], theirs[1:], grad)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=f"{optimizer} array {i}")
    del ours, theirs

    numpy_seconds = []

    def run_numpy():
        t0 = time.perf_counter()
        numpy_step(var, slots, grad)
        numpy_seconds.append(time.perf_counter() - t0)

    benchmark.pedantic(psrt_step, args=(var, slots, grad), setup=run_numpy, rounds=rounds,
                       warmup_rounds=1, iterations=1)
    assert all(np.isfinite(a).all() for a in [var] + slots), optimizer

    def gbps(seconds):
        return bytes_per_element * n / seconds / 1e9

    psrt_gbps = gbps(benchmark.stats.stats.median)
    numpy_gbps = gbps(float(np.median(numpy_seconds)))
    ratio = psrt_gbps / numpy_gbps
    target = _core.kernel_target()
    figures.add(f"{optimizer} {label}: psrt[{target}]", psrt_gbps, "GB/s")
    figures.add(f"{optimizer} {label}: numpy", numpy_gbps, "GB/s")
    goal = OTHER_GOALS[label]
    met = figures.add(f"{optimizer} {label}: psrt / numpy", ratio, "x", at_least=goal)
    benchmark.extra_info.update(psrt_gbps=round(psrt_gbps, 2), numpy_gbps=round(numpy_gbps, 2),
                                ratio_vs_numpy=round(ratio, 3))
    report(capsys, f"{optimizer} {label}: psrt[{target}] {psrt_gbps:.1f} GB/s; numpy "
                   f"{numpy_gbps:.1f} GB/s -> {ratio:.2f}x (goal >= {goal:g}x"
                   f"{'' if met else ', MISSED'})")

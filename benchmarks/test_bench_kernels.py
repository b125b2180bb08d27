"""Fused Adagrad throughput: psrt's kernel vs numpy and vs a plain C loop, same data, same run.

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

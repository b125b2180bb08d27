"""The variable store applies every optimizer on the ps exactly as the kernel does locally.

For each of TF1's optimizers psrt has a kernel for, a variable registered on a ps task (another
process, real TCP) with its hyper-parameters and slot initial values is pushed dense and
row-sparse gradients; its value and every slot must equal, bit for bit, the same kernel run
in this process through ``_core.apply_dense``/``apply_sparse`` on numpy arrays (the kernels
themselves are checked against TF's formulas and TF's test values in tests/test_kernels.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from _ps_task import PsProcess
from psrt import _core

# name, hyper-parameters as the VarSpec carries them, slot initial values (TF's defaults)
OPTIMIZERS = [
    ("Adadelta", {"learning_rate": 1.0, "rho": 0.95, "epsilon": 1e-6}, [0.0, 0.0]),
    ("Ftrl", {"learning_rate": 0.1, "l1": 0.01, "l2": 0.02, "lr_power": -0.5}, [0.1, 0.0]),
    ("Ftrl", {"learning_rate": 0.1, "l1": 0.01, "l2": 0.02, "l2_shrinkage": 0.1,
              "lr_power": -0.5}, [0.1, 0.0]),
    ("ProximalGradientDescent", {"learning_rate": 0.1, "l1": 0.01, "l2": 0.02}, []),
    ("ProximalAdagrad", {"learning_rate": 0.1, "l1": 0.01, "l2": 0.02}, [0.1]),
    ("RMSProp", {"learning_rate": 0.01, "rho": 0.9, "momentum": 0.5, "epsilon": 1e-10},
     [1.0, 0.0]),
    ("CenteredRMSProp", {"learning_rate": 0.01, "rho": 0.9, "momentum": 0.5,
                         "epsilon": 1e-10}, [1.0, 0.0, 0.0]),
]
KEYS = ("momentum", "epsilon", "rho", "l1", "l2", "l2_shrinkage", "lr_power")


@pytest.fixture(scope="module")
def ps():
    proc = PsProcess()
    yield proc
    proc.stop()


_names = iter(range(1_000_000))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,hyper,inits", OPTIMIZERS,
                         ids=[f"{o[0]}{i}" for i, o in enumerate(OPTIMIZERS)])
def test_remote_update_equals_the_local_kernel(ps, name, hyper, inits, dtype):
    c = _core.Client("worker", 0)
    c.timeout = 20.0
    c.connect(0, ps.address, 10.0)
    try:
        rng = np.random.default_rng(11)
        shape = (37, 5)
        v0 = rng.standard_normal(shape).astype(dtype)
        params = dict(hyper)
        for k, value in zip(("slot_init", "slot_init2", "slot_init3"), inits):
            params[k] = value
        [(h, _)] = c.register([(0, f"{name}{next(_names)}", dtype, list(shape), name, params,
                                v0)])
        var = v0.copy()
        slots = [np.full(shape, value, dtype) for value in inits]
        kw = {k: hyper[k] for k in KEYS if k in hyper}
        for step in range(1, 4):
            g = rng.standard_normal(shape).astype(dtype)
            c.push([h], [g])
            _core.apply_dense(name, var, slots, g, learning_rate=hyper["learning_rate"], **kw)
            idx = np.array([3, 0, 3, 36], np.int64)  # a duplicate: summed first
            rows = rng.standard_normal((4, 5)).astype(dtype)
            c.push_sparse(h, idx, rows)
            _core.apply_sparse(name, var, slots, idx, rows,
                               learning_rate=hyper["learning_rate"], **kw)
        out = np.empty(shape, dtype)
        c.pull([h], [out])
        assert out.tobytes() == var.tobytes()
        for k, s in enumerate(slots, start=1):
            got = np.empty(shape, dtype)
            c.pull([h], [got], slot=k)
            assert got.tobytes() == s.tobytes(), (name, k)
    finally:
        c.close()


def test_adagrad_da_counts_its_own_steps(ps):
    # AdagradDA's update depends on the step; the ps counts the variable's applies (1, 2, ...)
    # as TF's optimizer passes global_step + 1 when every step updates the variable once.
    c = _core.Client("worker", 0)
    c.connect(0, ps.address, 10.0)
    try:
        hyper = {"learning_rate": 0.1, "l1": 0.01, "l2": 0.02, "slot_init": 0.0,
                 "slot_init2": 0.1}
        v0 = np.linspace(-1, 1, 12).astype(np.float32)
        [(h, _)] = c.register([(0, f"da{next(_names)}", "float32", [12], "AdagradDA", hyper,
                                v0)])
        var, slots = v0.copy(), [np.zeros(12, np.float32), np.full(12, 0.1, np.float32)]
        rng = np.random.default_rng(5)
        for step in (1, 2, 3):
            g = rng.standard_normal(12).astype(np.float32)
            c.push([h], [g])
            _core.apply_dense("AdagradDA", var, slots, g, learning_rate=0.1, l1=0.01, l2=0.02,
                              global_step=step)
        out = np.empty(12, np.float32)
        c.pull([h], [out])
        assert out.tobytes() == var.tobytes()
    finally:
        c.close()

"""glibc malloc thresholds fixed for training loops (psrt/_malloc.py)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

import psrt

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc",
                                reason="the thresholds are glibc's")

# A step that frees 3 MiB at the top of the heap, after a 1.3 MiB mmapped block set glibc's
# dynamic thresholds to 1.3 MiB (mmap) and 2.6 MiB (trim): by default each step gives the
# top back to the system and page-faults it in again (~768 faults); with the thresholds
# fixed it reuses the heap.
PATTERN = r"""
import resource, sys
import numpy as np
if sys.argv[1] == "1":
    import psrt.runtime.malloc
    assert psrt.runtime.malloc.fix_thresholds()
warm = np.ones(1300 * 1024 // 8)
del warm
def step():
    a = np.ones((3, 1 << 17))   # three 1 MiB rows, one block each below
    b, c, d = np.ones(1 << 17), np.ones(1 << 17), np.ones(1 << 17)
    del a, b, c, d
for _ in range(5):
    step()
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / 50)
"""


def _faults_per_step(tuned: bool) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    src = os.path.dirname(os.path.dirname(os.path.abspath(psrt.__file__)))
    env["PYTHONPATH"] = src
    out = subprocess.run([sys.executable, "-c", PATTERN, "1" if tuned else "0"],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    return float(out.stdout.strip())


def test_fixed_thresholds_stop_the_page_faults_of_a_repeated_step():
    default, tuned = _faults_per_step(False), _faults_per_step(True)
    assert default > 200, f"the default pattern did not fault ({default}): the test is void"
    assert tuned < 20, (default, tuned)


def test_opt_out_and_idempotence(monkeypatch):
    from psrt.runtime import malloc as _malloc

    monkeypatch.setattr(_malloc, "_done", False)
    monkeypatch.setenv("PSRT_MALLOC_TUNING", "0")
    assert _malloc.fix_thresholds() is False
    monkeypatch.delenv("PSRT_MALLOC_TUNING")
    assert _malloc.fix_thresholds() is True
    assert _malloc.fix_thresholds() is True

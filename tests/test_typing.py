"""The public API as a type checker sees it (the architecture issue): ``mypy --strict`` on a
plain TF1-style training script reports nothing, so every name it uses is an explicit
re-export of its face, and ``except psrt.errors.UnavailableError as e: e.message`` type-checks
(the error classes are classes mypy can see, not made by a factory)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

import psrt

SCRIPT = pathlib.Path(__file__).parent / "data" / "typed_script.py"


def test_mypy_strict_accepts_a_training_script(tmp_path):
    pytest.importorskip("mypy", reason="mypy comes with the test extra (pip install '.[test]')")
    env = {**os.environ, "MYPY_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
                          str(SCRIPT)], capture_output=True, text=True, env=env, timeout=600)
    assert "does not explicitly export" not in out.stdout
    assert "must be derived from BaseException" not in out.stdout
    assert out.returncode == 0, out.stdout + out.stderr


def test_error_classes_are_plain_subclasses():
    for name in psrt.errors.__all__:
        cls = getattr(psrt.errors, name)
        if isinstance(cls, type) and name != "OpError":
            assert issubclass(cls, psrt.errors.OpError) and cls.__name__ == name
            err = cls(None, None, "m")
            assert err.message == "m"
            assert err.error_code == psrt.errors.error_code_from_exception_type(cls)

"""Tests for the benchmarks' closing table (benchmarks/conftest.py): every figure with its
target and met/missed, a missed target impossible to overlook, PSRT_BENCH_STRICT=1 failing
the run. A stand-in benchmark records figures in a pytest run of its own (the real
benchmarks take minutes and stay opt-in)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("pytest_benchmark", reason="the benchmarks need pytest-benchmark")

CONFTEST = Path(__file__).resolve().parents[1] / "benchmarks" / "conftest.py"

_BENCH = textwrap.dedent("""
    def test_stand_in(benchmark, figures):
        benchmark.pedantic(lambda: None, rounds=2, iterations=1)
        figures.add("push 4MB: psrt", 2.5, "GB/s")
        figures.add("push 4MB: psrt / raw", 0.91, "x", at_least=0.85)
        figures.add("round trip: psrt / raw", {ratio}, "x", at_most=1.3)
""")


def _run(tmp_path: Path, ratio: float, strict: bool) -> subprocess.CompletedProcess[str]:
    # As in the repository: the conftest in a benchmarks/ directory below the rootdir.
    bench = tmp_path / "benchmarks"
    bench.mkdir()
    shutil.copy(CONFTEST, bench / "conftest.py")
    (bench / "test_bench_stand_in.py").write_text(_BENCH.format(ratio=ratio))
    env = {k: v for k, v in os.environ.items() if k != "PSRT_BENCH_STRICT"}
    if strict:
        env["PSRT_BENCH_STRICT"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--benchmark-only",
         "--rootdir", str(tmp_path), "-c", os.devnull, "benchmarks"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def _table(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "psrt benchmark figures and targets" in line)
    return lines[start:]


def test_every_figure_in_one_table_and_all_met(tmp_path):
    result = _run(tmp_path, ratio=1.1, strict=True)
    assert result.returncode == 0, result.stdout + result.stderr
    table = _table(result.stdout)
    assert table[1].split() == ["figure", "value", "target", "result"]
    rows = [" ".join(line.split()) for line in table[3:6]]
    assert rows == ["push 4MB: psrt 2.500 GB/s - -",
                    "push 4MB: psrt / raw 0.910x >= 0.85x met",
                    "round trip: psrt / raw 1.100x <= 1.3x met"]
    assert "every target met (2 of 2)" in result.stdout
    assert "MISSED" not in result.stdout
    assert result.stdout.rstrip().splitlines()[-1].startswith("1 passed")


def test_a_missed_target_is_flagged_and_the_run_still_passes(tmp_path):
    result = _run(tmp_path, ratio=1.6, strict=False)
    assert result.returncode == 0, result.stdout + result.stderr
    table = _table(result.stdout)
    assert " ".join(table[5].split()) == "round trip: psrt / raw 1.600x <= 1.3x MISSED"
    assert ("1 benchmark target(s) MISSED of 2 (set PSRT_BENCH_STRICT=1 to fail the run)"
            in result.stdout)
    assert "MISSED: round trip: psrt / raw: 1.600x, target <= 1.3x" in result.stdout
    assert result.stdout.rstrip().splitlines()[-1].startswith("1 passed, 1 missed")


def test_strict_fails_the_run_on_a_missed_target(tmp_path):
    result = _run(tmp_path, ratio=1.6, strict=True)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "(PSRT_BENCH_STRICT=1: the run fails)" in result.stdout

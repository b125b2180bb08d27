"""Benchmarks run only when asked for: ``pytest benchmarks/ --benchmark-only``.

pytest-benchmark times every test that uses its fixture whenever the test runs, so a plain
``pytest benchmarks/`` would spend minutes measuring. Without ``--benchmark-only`` every test
here is skipped instead. (``python -m pytest`` alone collects tests/ only: testpaths.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("benchmark_only", False):
        return
    skip = pytest.mark.skip(reason="benchmark: run with pytest benchmarks/ --benchmark-only")
    for item in items:  # this hook sees the whole session's items: mark only ours
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(skip)

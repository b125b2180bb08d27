"""Benchmarks run only when asked for: ``pytest benchmarks/ --benchmark-only``.

pytest-benchmark times every test that uses its fixture whenever the test runs, so a plain
``pytest benchmarks/`` would spend minutes measuring. Without ``--benchmark-only`` every test
here is skipped instead. (``python -m pytest`` alone collects tests/ only: testpaths.)

Every figure a benchmark measures goes through the ``figures`` fixture, with its target when
it has one. A run ends with one table of every figure, its target and whether it was met,
after pytest-benchmark's timing tables. A missed target is shown three ways: ``MISSED`` in
its row, a red ``N benchmark target(s) MISSED`` banner naming them, and ``N missed`` in
pytest's final line. The tests themselves pass (on a shared 2-vCPU machine throughput varies
by 15-25 % from run to run, so a missed target is a finding to look at, not a broken build);
``PSRT_BENCH_STRICT=1`` makes the session exit with status 1 when any target is missed, for
a run on a quiet machine that must meet them (a release check, a dedicated CI runner).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
STRICT_ENV = "PSRT_BENCH_STRICT"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("benchmark_only", False):
        return
    skip = pytest.mark.skip(reason="benchmark: run with pytest benchmarks/ --benchmark-only")
    for item in items:  # this hook sees the whole session's items: mark only ours
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(skip)


@dataclasses.dataclass(frozen=True)
class Figure:
    """One measured figure: ``value`` in ``unit``, with an optional target."""

    name: str
    value: float
    unit: str
    at_least: float | None = None
    at_most: float | None = None

    @property
    def target(self) -> str:
        """``">= 0.85x"``, ``"<= 5 s"``, or ``""`` for a figure without a target."""
        unit = self.unit if self.unit in ("x", "") else f" {self.unit}"
        if self.at_least is not None:
            return f">= {self.at_least:g}{unit}"
        if self.at_most is not None:
            return f"<= {self.at_most:g}{unit}"
        return ""

    @property
    def met(self) -> bool | None:
        """True or False against the target; None without one."""
        if self.at_least is not None:
            return self.value >= self.at_least
        if self.at_most is not None:
            return self.value <= self.at_most
        return None

    def shown(self) -> str:
        unit = self.unit if self.unit in ("x", "") else f" {self.unit}"
        magnitude = abs(self.value)
        digits = 3 if magnitude < 10 else 1 if magnitude < 1000 else 0
        return f"{self.value:,.{digits}f}{unit}"


_FIGURES = pytest.StashKey[list[Figure]]()


class Figures:
    """The ``figures`` fixture: ``figures.add(name, value, unit, at_least=..., at_most=...)``
    records a figure for the run's closing table and returns whether its target was met
    (None without a target), e.g. for the benchmark's own report line."""

    def __init__(self, store: list[Figure]) -> None:
        self._store = store

    def add(self, name: str, value: float, unit: str = "", *, at_least: float | None = None,
            at_most: float | None = None) -> bool | None:
        figure = Figure(name, float(value), unit, at_least, at_most)
        self._store.append(figure)
        return figure.met


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Figures:
    return Figures(request.config.stash.setdefault(_FIGURES, []))


def _missed(config: pytest.Config) -> list[Figure]:
    return [f for f in config.stash.get(_FIGURES, []) if f.met is False]


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    rows = config.stash.get(_FIGURES, [])
    if not rows:
        return
    tr = terminalreporter
    tr.write_sep("=", "psrt benchmark figures and targets")
    header = ("figure", "value", "target", "result")
    table = [(f.name, f.shown(), f.target or "-",
              "-" if f.met is None else "met" if f.met else "MISSED") for f in rows]
    widths = [max(len(r[i]) for r in [header, *table]) for i in range(4)]
    line = f"{{:<{widths[0]}}}  {{:>{widths[1]}}}  {{:<{widths[2]}}}  {{}}"
    tr.write_line(line.format(*header))
    tr.write_line("-" * (sum(widths) + 6))
    for row, figure in zip(table, rows):
        markup = {"red": True, "bold": True} if figure.met is False else (
            {"green": True} if figure.met else {})
        tr.write_line(line.format(*row), **markup)
    missed = _missed(config)
    with_target = sum(f.met is not None for f in rows)
    if missed:
        strict = os.environ.get(STRICT_ENV) == "1"
        tr.write_sep("!", f"{len(missed)} benchmark target(s) MISSED of {with_target}"
                          + (f" ({STRICT_ENV}=1: the run fails)" if strict else
                             f" (set {STRICT_ENV}=1 to fail the run)"), red=True, bold=True)
        for f in missed:
            tr.write_line(f"MISSED: {f.name}: {f.shown()}, target {f.target}", red=True,
                          bold=True)
        tr.stats.setdefault("missed", []).extend(missed)
    else:
        tr.write_line(f"every target met ({with_target} of {with_target})", green=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if (os.environ.get(STRICT_ENV) == "1" and _missed(session.config)
            and exitstatus == pytest.ExitCode.OK):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

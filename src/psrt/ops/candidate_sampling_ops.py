"""TF1's candidate samplers (tensorflow/python/ops/candidate_sampling_ops.py, r1.15):
``log_uniform_candidate_sampler``, ``uniform_candidate_sampler`` and
``compute_accidental_hits``, the sampling half of ``nce_loss`` and ``sampled_softmax_loss``.

The distributions and expected counts are TF's (tensorflow/core/kernels/range_sampler.cc):
the log-uniform (Zipfian) sampler draws ``floor(exp(u * log(range_max + 1))) - 1`` for
``u`` uniform in ``[0, 1)``, so class ``c`` has probability
``log((c + 2) / (c + 1)) / log(range_max + 1)``; the uniform one ``1 / range_max``. With
``unique=True`` draws continue until ``num_sampled`` distinct classes are found (``tries``
draws in all) and a class of probability ``p`` has the expected count
``1 - (1 - p) ** tries`` (TF's ``-expm1(tries * log1p(-p))``); without, ``p * num_sampled``.
Seeds as TF's graph and op seeds (``psrt.set_random_seed``); the generator is numpy's, so the
classes drawn are not TF's. The ops have no gradient (TF's neither).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.framework import errors as _errors
from psrt.framework import op_def_library as _lib
from psrt.framework.random_seed import get_seed
from psrt.framework.tensor_shape import TensorShape

__all__ = ["compute_accidental_hits", "log_uniform_candidate_sampler",
           "uniform_candidate_sampler"]

_FLT_MAX = float(np.finfo(np.float32).max)


def expected_count(p: np.ndarray, num_sampled: int, tries: int) -> np.ndarray:
    """TF's ExpectedCountHelper (range_sampler.cc) as float32: ``p * num_sampled`` when
    every draw was kept (``tries == num_sampled``, always so without ``unique``), else the
    probability ``1 - (1 - p) ** tries`` that a class was drawn at least once."""
    p = np.asarray(p, np.float64)
    if tries == num_sampled:
        return (p * num_sampled).astype(np.float32)
    return (-np.expm1(tries * np.log1p(-p))).astype(np.float32)


class _Sampler:
    """The kernel of a candidate sampler: its generator (advanced at each run), the
    distribution and the checks of TF's CandidateSamplerOp."""

    __slots__ = ("rng", "kind", "num_true", "num_sampled", "unique", "range_max")

    def __init__(self, kind: str, num_true: int, num_sampled: int, unique: bool,
                 range_max: int, seed: Any) -> None:
        graph_seed, op_seed = get_seed(seed)
        self.rng = np.random.default_rng(
            None if op_seed is None else [int(graph_seed or 0), int(op_seed)])
        self.kind, self.num_true, self.num_sampled = kind, num_true, num_sampled
        self.unique, self.range_max = unique, range_max

    def probability(self, c: np.ndarray) -> np.ndarray:
        """P(class c) of one draw (float64): log((c+2)/(c+1)) / log(range_max+1) for the
        log-uniform (Zipfian) sampler, 1/range_max for the uniform one (range_sampler.cc)."""
        c = np.asarray(c, np.float64)
        if self.kind == "log_uniform":
            return np.log((c + 2.0) / (c + 1.0)) / np.log1p(self.range_max)
        return np.full(c.shape, 1.0 / self.range_max)

    def draw(self, n: int) -> np.ndarray:
        """``n`` int64 classes in [0, range_max), drawn with replacement."""
        if self.kind == "log_uniform":
            u = self.rng.random(n)
            v = np.exp(u * np.log1p(self.range_max)).astype(np.int64) - 1
            return v % self.range_max      # TF's guard against round-off past range_max
        return self.rng.integers(0, self.range_max, n, dtype=np.int64)

    def sample(self) -> tuple[np.ndarray, int]:
        """``num_sampled`` classes (distinct when ``unique``) and the number of draws taken
        (the tries TF's expected counts use)."""
        s = self.num_sampled
        if not self.unique:
            return self.draw(s), s
        drawn = np.empty(0, np.int64)
        while True:
            drawn = np.concatenate([drawn, self.draw(max(2 * s, 64))])
            _, first = np.unique(drawn, return_index=True)
            if len(first) >= s:
                first = np.sort(first)[:s]     # the first s distinct classes, in draw order
                return drawn[first], int(first[-1]) + 1

    def __call__(self, true_classes: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        t = np.asarray(true_classes)
        if t.ndim != 2:
            raise _errors.InvalidArgumentError(
                None, None, f"true_classes must be a matrix; got shape {list(t.shape)}")
        if t.shape[1] != self.num_true:
            raise _errors.InvalidArgumentError(
                None, None, f"true_classes must have num_true columns, expected: "
                f"[{self.num_true}] was: [{t.shape[1]}]")
        sampled, tries = self.sample()
        return (sampled, expected_count(self.probability(t), self.num_sampled, tries),
                expected_count(self.probability(sampled), self.num_sampled, tries))


def _candidate_sampler(op: str, kind: str, true_classes: Any, num_true: int,
                       num_sampled: int, unique: bool, range_max: int, seed: Any,
                       name: str | None) -> tuple[Any, Any, Any]:
    for arg, v, low in (("num_true", num_true, 1), ("num_sampled", num_sampled, 1),
                        ("range_max", range_max, 1)):
        if isinstance(v, bool) or int(v) != v or v < low:
            raise ValueError(f"{arg} must be an int >= {low}; got {v!r}")
    if unique and num_sampled > range_max:
        raise _errors.InvalidArgumentError(
            None, None, f"Sampler's range is too small: num_sampled {num_sampled} > "
            f"range_max {range_max} with unique=True")
    t = true_classes if _lib.is_graph_value(true_classes) else np.asarray(true_classes)
    dt = _lib.static_dtype(t)
    if dt is not None and np.dtype(dt).kind not in "iu":
        raise TypeError(f"true_classes must be int64 (or int32) class ids; got "
                        f"{np.dtype(dt).name}")
    shape = _lib.static_shape(t)
    if shape.ndims not in (None, 2):
        raise ValueError(f"true_classes must be a matrix [batch_size, num_true]; got shape "
                         f"{shape}")
    batch = shape.as_list()[0] if shape.ndims else None
    kernel = _Sampler(kind, int(num_true), int(num_sampled), bool(unique), int(range_max),
                      seed)
    s = int(num_sampled)
    outs = _lib.apply_op_outputs(op, name or op, [t], kernel,
                                 [np.int64, np.float32, np.float32],
                                 [TensorShape([s]), TensorShape([batch, int(num_true)]),
                                  TensorShape([s])])
    return outs[0], outs[1], outs[2]


def log_uniform_candidate_sampler(true_classes: Any, num_true: int, num_sampled: int,
                                  unique: bool, range_max: int, seed: int | None = None,
                                  name: str | None = None) -> tuple[Any, Any, Any]:
    """Samples classes from the log-uniform (Zipfian) distribution over
    ``[0, range_max)``, as ``tf.nn.log_uniform_candidate_sampler`` (TF's
    LogUniformCandidateSampler): class ``c`` has probability ``log((c + 2) / (c + 1)) /
    log(range_max + 1)``, for vocabularies sorted by decreasing frequency. Drawn anew at
    each run; expected counts as the module docstring.

    Args:
        true_classes: int64 (or int32) ``[batch_size, num_true]``, the target classes.
        num_true: The number of target classes per example.
        num_sampled: How many classes to draw.
        unique: Draw without replacement (``num_sampled <= range_max``).
        range_max: The number of classes.
        seed: The op seed (TF's ``random_seed.get_seed``).
        name: The op name (default ``"LogUniformCandidateSampler"``).

    Returns:
        ``(sampled_candidates, true_expected_count, sampled_expected_count)``: int64
        ``[num_sampled]``, float32 ``[batch_size, num_true]``, float32 ``[num_sampled]``.

    Raises:
        ValueError: a count that is not a positive int, or ``true_classes`` of a known rank
            other than 2.
        TypeError: non-integer ``true_classes``.
        InvalidArgumentError: ``unique`` with ``num_sampled > range_max`` (TF's "Sampler's
            range is too small"); at run, ``true_classes`` not ``[batch, num_true]``.
    """
    return _candidate_sampler("LogUniformCandidateSampler", "log_uniform", true_classes,
                              num_true, num_sampled, unique, range_max, seed, name)


def uniform_candidate_sampler(true_classes: Any, num_true: int, num_sampled: int,
                              unique: bool, range_max: int, seed: int | None = None,
                              name: str | None = None) -> tuple[Any, Any, Any]:
    """Samples classes uniformly from ``[0, range_max)``, as
    ``tf.nn.uniform_candidate_sampler`` (TF's UniformCandidateSampler: each class has
    probability ``1 / range_max``). Arguments, outputs and errors as
    :func:`log_uniform_candidate_sampler` (default name ``"UniformCandidateSampler"``)."""
    return _candidate_sampler("UniformCandidateSampler", "uniform", true_classes, num_true,
                              num_sampled, unique, range_max, seed, name)


def accidental_hits(true_classes: np.ndarray, sampled: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(rows, positions) of the sampled candidates equal to a true class of their row, in
    TF's order (row by row, true class by true class; a candidate sampled twice is found at
    its last position: TF's ComputeAccidentalHitsOp)."""
    sampled = np.asarray(sampled).reshape(-1)
    pos = {int(c): i for i, c in enumerate(sampled)}
    rows: list[int] = []
    where: list[int] = []
    for r, row in enumerate(np.asarray(true_classes)):
        for c in row:
            j = pos.get(int(c))
            if j is not None:
                rows.append(r)
                where.append(j)
    return np.asarray(rows, np.int32), np.asarray(where, np.int64)


def _hits(true_classes: Any, sampled: Any, num_true: int) -> Any:
    t = np.asarray(true_classes)
    if t.ndim != 2 or t.shape[1] != num_true:
        raise _errors.InvalidArgumentError(
            None, None, f"true_classes must be a matrix with num_true={num_true} columns; "
            f"got shape {list(t.shape)}")
    rows, where = accidental_hits(t, sampled)
    return rows, where, np.full(len(rows), -_FLT_MAX, np.float32)


def compute_accidental_hits(true_classes: Any, sampled_candidates: Any, num_true: int,
                            seed: int | None = None, name: str | None = None
                            ) -> tuple[Any, Any, Any]:
    """The sampled candidates that equal a target class, as
    ``tf.nn.compute_accidental_hits``: for each row ``i`` and target ``true_classes[i, j]``
    found among ``sampled_candidates`` (at position ``k``), ``indices`` gets ``i``, ``ids``
    ``k`` and ``weights`` ``-FLT_MAX`` (added to a sampled logit it removes the hit).

    Args:
        true_classes: int64 ``[batch_size, num_true]``.
        sampled_candidates: int64 ``[num_sampled]`` (a sampler's first output).
        num_true: The number of target classes per example.
        seed: Unused, as TF's (the op is deterministic).
        name: The op name (default ``"ComputeAccidentalHits"``).

    Returns:
        ``(indices, ids, weights)``: int32, int64 and float32, each ``[num_hits]``.

    Raises:
        InvalidArgumentError (at run): ``true_classes`` not ``[batch, num_true]``.
    """
    def kernel(t: Any, s: Any) -> Any:
        return _hits(t, s, int(num_true))
    return tuple(_lib.apply_op_outputs(
        "ComputeAccidentalHits", name or "ComputeAccidentalHits",
        [true_classes, sampled_candidates], kernel, [np.int32, np.int64, np.float32],
        [TensorShape([None])] * 3))

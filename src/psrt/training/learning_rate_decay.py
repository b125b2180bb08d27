"""Learning-rate schedules of the global step, as TF1's ``tf.train.*_decay`` functions
(tensorflow/python/training/learning_rate_decay.py, r1.15).

Each function returns a :class:`psrt.Tensor` computed from the global step's value at run
time, as TF's returns a tensor of the graph:

* ``sess.run(lr)`` reads the global step from its ps task and computes the rate (forward
  only, nothing pushed);
* given as an optimizer's ``learning_rate`` it is computed at every training step from the
  global step's value then (one parallel read of the global step before the push; a global
  step this run already advanced comes from that push's reply), and the ps applies that
  rate;
* ``psrt.summary.scalar("learning_rate", lr)`` records it.

``global_step`` may be a psrt Variable (the global step), a :class:`psrt.Tensor`, or a plain
number (a constant schedule, as TF's tests use). The rate is computed in float64 and given
in the learning rate's dtype: float32 for a Python float (TF's conversion), float64 for a
numpy float64.

Example::

    global_step = psrt.train.get_or_create_global_step()
    lr = psrt.train.exponential_decay(0.1, global_step, decay_steps=1000,
                                      decay_rate=0.96, staircase=True)
    train_op = psrt.train.GradientDescentOptimizer(lr).minimize(loss,
                                                                global_step=global_step)
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Sequence

import numpy as np

from psrt.framework.tensor import Tensor, py_func
from psrt.ops.variables import Variable

__all__ = ["cosine_decay", "exponential_decay", "inverse_time_decay", "natural_exp_decay",
           "piecewise_constant", "polynomial_decay"]


def _is_number(x: Any) -> bool:
    return isinstance(x, (numbers.Real, np.floating, np.integer)) and not isinstance(x, bool)


def _rate(learning_rate: Any, fn: str) -> tuple[Any, np.dtype]:
    """``learning_rate`` (a number or a Tensor) and the dtype of the schedule's value."""
    if isinstance(learning_rate, Tensor):
        dt = learning_rate.dtype if learning_rate.dtype is not None else np.dtype(np.float32)
        return learning_rate, np.dtype(dt)
    if not _is_number(learning_rate):
        raise TypeError(f"{fn}: learning_rate must be a number or a psrt.Tensor; got "
                        f"{learning_rate!r}")
    dt = np.dtype(np.float64) if isinstance(learning_rate, np.float64) else \
        np.dtype(np.float32)
    return float(learning_rate), dt


def _step(global_step: Any, fn: str) -> Any:
    """The global step input: a Variable, a Tensor, or a number (constant)."""
    if global_step is None:
        raise ValueError(f"global_step is required for {fn}.")
    if isinstance(global_step, (Variable, Tensor)) or _is_number(global_step):
        return global_step
    raise TypeError(f"{fn}: global_step must be the global step psrt.Variable, a psrt.Tensor "
                    f"or a number; got {global_step!r}")


def _positive(value: Any, what: str, fn: str) -> float:
    if not _is_number(value):
        raise TypeError(f"{fn}: {what} must be a number > 0; got {value!r}")
    if not value > 0:
        raise ValueError(f"{fn}: {what} must be > 0 (it divides the global step); got "
                         f"{value!r}")
    return float(value)


def _number(value: Any, what: str, fn: str) -> float:
    if not _is_number(value):
        raise TypeError(f"{fn}: {what} must be a number; got {value!r}")
    return float(value)


def _schedule(fn: str, name: str | None, learning_rate: Any, global_step: Any,
              rate_of: Callable[[float, float], float]) -> Tensor:
    """A Tensor ``rate_of(learning_rate, global_step)`` in the learning rate's dtype."""
    lr, dtype = _rate(learning_rate, fn)
    step = _step(global_step, fn)

    def compute(lr_value: Any, step_value: Any) -> np.ndarray:
        return np.asarray(rate_of(float(lr_value), float(step_value)), dtype)

    out = py_func(compute, [lr, step], dtype, name=name or fn)
    out.shape = ()
    return out


def exponential_decay(learning_rate: Any, global_step: Any, decay_steps: Any,
                      decay_rate: Any, staircase: bool = False,
                      name: str | None = None) -> Tensor:
    """``learning_rate * decay_rate ^ (global_step / decay_steps)``, as
    ``tf.train.exponential_decay``; with ``staircase`` the exponent is floored (the rate
    drops every ``decay_steps`` steps).

    Args:
        learning_rate: The initial rate (float, or a scalar :class:`psrt.Tensor`).
        global_step: The global step Variable (or a Tensor, or a number).
        decay_steps: float > 0.
        decay_rate: float.
        staircase: Floor ``global_step / decay_steps``.
        name: Op name (default "ExponentialDecay").

    Returns:
        A scalar :class:`psrt.Tensor` (float32 for a Python float ``learning_rate``).

    Raises:
        ValueError: ``global_step`` is None (TF's "global_step is required for
            exponential_decay."), ``decay_steps`` <= 0.
        TypeError: an argument of the wrong type.
    """
    fn = "exponential_decay"
    steps = _positive(decay_steps, "decay_steps", fn)
    rate = _number(decay_rate, "decay_rate", fn)
    floor = bool(staircase)

    def rate_of(lr: float, step: float) -> float:
        p = step / steps
        return lr * rate ** (math.floor(p) if floor else p)
    return _schedule(fn, name or "ExponentialDecay", learning_rate, global_step, rate_of)


def natural_exp_decay(learning_rate: Any, global_step: Any, decay_steps: Any,
                      decay_rate: Any, staircase: bool = False,
                      name: str | None = None) -> Tensor:
    """``learning_rate * exp(-decay_rate * global_step / decay_steps)``, as
    ``tf.train.natural_exp_decay`` (``staircase`` floors ``global_step / decay_steps``).

    Args, Returns and Raises: as :func:`exponential_decay` (default name
    "NaturalExpDecay").
    """
    fn = "natural_exp_decay"
    steps = _positive(decay_steps, "decay_steps", fn)
    rate = _number(decay_rate, "decay_rate", fn)
    floor = bool(staircase)

    def rate_of(lr: float, step: float) -> float:
        p = step / steps
        return lr * math.exp(-rate * (math.floor(p) if floor else p))
    return _schedule(fn, name or "NaturalExpDecay", learning_rate, global_step, rate_of)


def inverse_time_decay(learning_rate: Any, global_step: Any, decay_steps: Any,
                       decay_rate: Any, staircase: bool = False,
                       name: str | None = None) -> Tensor:
    """``learning_rate / (1 + decay_rate * global_step / decay_steps)``, as
    ``tf.train.inverse_time_decay`` (``staircase`` floors ``global_step / decay_steps``).

    Args, Returns and Raises: as :func:`exponential_decay` (default name
    "InverseTimeDecay").
    """
    fn = "inverse_time_decay"
    steps = _positive(decay_steps, "decay_steps", fn)
    rate = _number(decay_rate, "decay_rate", fn)
    floor = bool(staircase)

    def rate_of(lr: float, step: float) -> float:
        p = step / steps
        return lr / (1.0 + rate * (math.floor(p) if floor else p))
    return _schedule(fn, name or "InverseTimeDecay", learning_rate, global_step, rate_of)


def polynomial_decay(learning_rate: Any, global_step: Any, decay_steps: Any,
                     end_learning_rate: Any = 0.0001, power: Any = 1.0, cycle: bool = False,
                     name: str | None = None) -> Tensor:
    """``(learning_rate - end_learning_rate) * (1 - step / decay_steps) ^ power +
    end_learning_rate``, as ``tf.train.polynomial_decay``: ``step = min(global_step,
    decay_steps)``, so the rate stays at ``end_learning_rate`` afterwards; with ``cycle``
    the decay restarts, ``decay_steps`` multiplied by ``ceil(global_step / decay_steps)``
    (1 at step 0, as TF).

    Args:
        learning_rate: The initial rate (float, or a scalar :class:`psrt.Tensor`).
        global_step: The global step Variable (or a Tensor, or a number).
        decay_steps: float > 0.
        end_learning_rate: float (default 0.0001).
        power: float (default 1.0: linear).
        cycle: Restart the decay past ``decay_steps``.
        name: Op name (default "PolynomialDecay").

    Returns and Raises: as :func:`exponential_decay`.
    """
    fn = "polynomial_decay"
    steps = _positive(decay_steps, "decay_steps", fn)
    end = _number(end_learning_rate, "end_learning_rate", fn)
    pw = _number(power, "power", fn)
    restart = bool(cycle)

    def rate_of(lr: float, step: float) -> float:
        if restart:
            span = steps * (1.0 if step == 0 else math.ceil(step / steps))
        else:
            span, step = steps, min(step, steps)
        return (lr - end) * (1.0 - step / span) ** pw + end
    return _schedule(fn, name or "PolynomialDecay", learning_rate, global_step, rate_of)


def cosine_decay(learning_rate: Any, global_step: Any, decay_steps: Any, alpha: Any = 0.0,
                 name: str | None = None) -> Tensor:
    """``learning_rate * ((1 - alpha) * 0.5 * (1 + cos(pi * step / decay_steps)) + alpha)``
    with ``step = min(global_step, decay_steps)``, as ``tf.train.cosine_decay`` (SGDR
    without restarts).

    Args:
        learning_rate: The initial rate (float, or a scalar :class:`psrt.Tensor`).
        global_step: The global step Variable (or a Tensor, or a number).
        decay_steps: float > 0.
        alpha: The minimum rate as a fraction of ``learning_rate`` (default 0.0).
        name: Op name (default "CosineDecay").

    Returns and Raises: as :func:`exponential_decay`.
    """
    fn = "cosine_decay"
    steps = _positive(decay_steps, "decay_steps", fn)
    a = _number(alpha, "alpha", fn)

    def rate_of(lr: float, step: float) -> float:
        done = min(step, steps) / steps
        return lr * ((1.0 - a) * 0.5 * (1.0 + math.cos(math.pi * done)) + a)
    return _schedule(fn, name or "CosineDecay", learning_rate, global_step, rate_of)


def _kind(x: Any) -> str:
    """"int" or "float": the dtype class TF's conversion gives a Python or numpy number."""
    if isinstance(x, (bool, np.bool_)):
        return "bool"
    if isinstance(x, (numbers.Integral, np.integer)):
        return "int"
    if isinstance(x, (numbers.Real, np.floating)):
        return "float"
    raise TypeError(f"piecewise_constant: {x!r} is not a number")


def piecewise_constant(x: Any, boundaries: Sequence[Any], values: Sequence[Any],
                       name: str | None = None) -> Tensor:
    """A step function of ``x`` (usually the global step), as ``tf.train.piecewise_constant``:
    ``values[0]`` while ``x <= boundaries[0]``, ``values[i]`` while ``boundaries[i-1] < x <=
    boundaries[i]``, ``values[-1]`` once ``x > boundaries[-1]``.

    Args:
        x: The global step Variable (or a Tensor, or a number).
        boundaries: Increasing numbers of ``x``'s kind: integers for an integer ``x``
            (TF promotes int32 boundaries to an int64 step), floats for a float ``x``.
        values: ``len(boundaries) + 1`` numbers, all int or all float.
        name: Op name (default "PiecewiseConstant").

    Returns:
        A scalar :class:`psrt.Tensor` of the values' dtype (float32 for Python floats,
        int32 for Python ints).

    Raises:
        ValueError: TF's "The length of boundaries should be 1 less than the length of
            values", "Boundaries (...) must have the same dtype as x (...)", "Values must have
            elements all with the same dtype (... vs ...)"; ``x`` is None.
    """
    fn = "piecewise_constant"
    if x is None:
        raise ValueError("x is required for piecewise_constant.")
    step = _step(x, fn)
    bounds = list(boundaries)
    vals = list(values)
    if len(bounds) != len(vals) - 1:
        raise ValueError("The length of boundaries should be 1 less than the length of values")
    if isinstance(step, (Variable, Tensor)):
        x_dtype = step.dtype
        x_kind = "int" if x_dtype is not None and np.dtype(x_dtype).kind in "iu" else "float"
    else:
        x_kind = _kind(step)
    names = {"int": "int", "float": "float"}
    for b in bounds:
        if _kind(b) != x_kind:
            raise ValueError(f"Boundaries ({names.get(_kind(b), _kind(b))}) must have the same "
                             f"dtype as x ({x_kind}).")
    kinds = [_kind(v) for v in vals]
    for k in kinds[1:]:
        if k != kinds[0]:
            raise ValueError(f"Values must have elements all with the same dtype ({kinds[0]} "
                             f"vs {k}).")
    if all(isinstance(v, np.generic) for v in vals):
        dtype = np.result_type(*vals)
    else:
        dtype = np.dtype(np.int32) if kinds[0] == "int" else np.dtype(np.float32)
    table = np.asarray(vals, dtype)
    edges = np.asarray(bounds, np.float64)

    def compute(step_value: Any) -> np.ndarray:
        return table[int(np.count_nonzero(float(step_value) > edges))].copy()

    out = py_func(compute, [step], dtype, name=name or "PiecewiseConstant")
    out.shape = ()
    return out

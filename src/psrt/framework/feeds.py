"""A run's feeds as TF's session takes them (tensorflow/python/client/session.py, r1.15,
``BaseSession._run``): the name a ``feed_dict`` key stands for, a fed value converted exactly
to its tensor's dtype and checked against its shape, and TF's error for a placeholder left
unfed. The executor (psrt/runtime/executor.py) converts every feed with these before anything
of a run is sent; psrt/framework/autodiff.py raises :func:`missing_feed`."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from psrt.framework import dtypes as _dtypes
from psrt.framework import errors
from psrt.framework.ops import Graph
from psrt.framework.tensor import Tensor, _shape_str, _shape_tuple_str


def missing_feed(p: Tensor) -> errors.InvalidArgumentError:
    """TF's error for an unfed placeholder (``tensorflow/core/kernels/placeholder_op.cc``)."""
    dt = p.dtype
    dname = _dtypes.TF_NAMES.get(dt.name, dt.name) if dt is not None else "unknown"
    shape = "" if p._shape is None else f" and shape {_shape_str(p._shape)}"
    return errors.InvalidArgumentError(
        None, None, f"You must feed a value for placeholder tensor '{p.op.name}' with dtype "
        f"{dname}{shape}")


def convert_feed(p: Tensor, value: Any, check_shape: bool = True) -> Any:
    """A fed value as TF's session converts it (tensorflow/python/client/session.py,
    ``BaseSession._run``): to the tensor's dtype (:func:`exact_feed_array`), then its shape
    checked against the tensor's (ValueError "Cannot feed value of shape ...").

    Raises:
        InvalidArgumentError: a value that does not convert exactly to the dtype (see
            :func:`exact_feed_array`), naming the tensor, the dtype and the value.
        ValueError: the shape is not the tensor's (with ``check_shape``).
    """
    if p.dtype is not None:
        arr = exact_feed_array(p.op.name, p.dtype, value)
    else:
        arr = np.asarray(value)
    if check_shape and p._shape is not None:
        ok = arr.ndim == len(p._shape) and all(d is None or d == n
                                                for d, n in zip(p._shape, arr.shape))
        if not ok:
            raise ValueError(f"Cannot feed value of shape {arr.shape!r} for Tensor "
                             f"'{p.name}', which has shape '{_shape_tuple_str(p._shape)}'")
    return arr


def exact_feed_array(name: str, dtype: Any, value: Any) -> np.ndarray:
    """``value`` as an array of ``dtype``, for a feed of the tensor ``name``, refusing what
    does not convert exactly.

    TF's session (tensorflow/python/client/session.py, r1.15, ``BaseSession._run``)
    converts a feed with ``np.asarray(value, dtype=...)`` after refusing a Python int that
    does not survive that conversion (``_convert_to_numpy_obj(dtype, v) != v``: "Type of feed
    value ... is not compatible with Tensor type ..."). psrt applies the same round-trip rule
    to every element, so none of numpy's silent conversions reaches the model: None (NaN in
    a float feed), strings (numpy parses "1.5"), complex numbers in a real feed, 1.5 in an
    integer feed (numpy truncates it to 1), integers outside the dtype's range (numpy wraps
    them), 2 in a bool feed, an integer a float dtype cannot hold (2**24 + 1 in float32), a
    finite float that overflows to inf. A float rounded to a narrower float dtype (0.1 into
    float32) is the one inexact conversion accepted, as in TF. ``string`` (object) feeds are
    converted as numpy does.

    Args:
        name: The fed tensor's op name (for the error).
        dtype: Its numpy dtype.
        value: The fed value: an array, a scalar or nested lists.

    Returns:
        An ndarray of ``dtype`` (``value`` itself when it is one already).

    Raises:
        InvalidArgumentError: naming the tensor, the dtype, the offending element (and its
            index) and what the dtype takes; nothing of the run has been sent.
    """
    dt = np.dtype(dtype)
    if isinstance(value, np.ndarray) and value.dtype == dt:
        return value
    if dt.kind not in "biufc":
        return np.asarray(value, dtype=dt)
    src = value if isinstance(value, np.ndarray) else np.asarray(value)
    if src.dtype.kind in "USV" and not isinstance(value, np.ndarray):
        src = np.asarray(value, dtype=object)   # numpy made strings of all: find the one
    if src.dtype.kind == "O":
        src = _numbers_of(name, dt, src)
    if src.dtype.kind not in "biufc":
        _refuse(name, dt, src, np.ones(src.shape, bool))
    if src.dtype.kind == "c" and dt.kind != "c":
        if (src.imag != 0).any():
            _refuse(name, dt, src, src.imag != 0)
        src = src.real
    with np.errstate(all="ignore"):
        arr = src.astype(dt)
        bad = _inexact(src, arr, dt)
    if bad is not None and bad.any():
        _refuse(name, dt, src, bad)
    return arr


def _numbers_of(name: str, dt: np.dtype, src: np.ndarray) -> np.ndarray:
    """An object array (a feed with None, Decimals, huge ints ...) as a numeric array, or the
    refusal of its first element that is not a number numpy can hold."""
    flat = src.reshape(-1)
    for i, x in enumerate(flat):
        if not isinstance(x, (numbers.Number, np.bool_)) or np.asarray(x).dtype.kind == "O":
            bad = np.zeros(flat.shape, bool)
            bad[i] = True
            _refuse(name, dt, src, bad.reshape(src.shape))
    return np.array(src.tolist())


def _inexact(src: np.ndarray, arr: np.ndarray, dt: np.dtype) -> Any:
    """Where ``arr`` (``src`` converted to ``dt``) differs from ``src`` beyond the rounding
    of a float to a narrower float; None when nothing can differ."""
    sk, tk = src.dtype.kind, dt.kind
    if tk == "c" or sk == "b":
        return None
    if tk == "b":
        return (src != 0) & (src != 1)
    if tk in "iu" and sk in "iu":
        if np.can_cast(src.dtype, dt, "safe"):
            return None
        info = np.iinfo(dt)
        return (src < info.min) | (src > info.max)
    if tk in "iu" or sk in "iu":
        # float -> int: fractions, NaN, inf and values out of range do not come back; int ->
        # float: integers past the float's mantissa do not (a narrower int always does).
        if sk in "iu" and src.dtype.itemsize < dt.itemsize:
            return None
        return arr.astype(src.dtype) != src
    if dt.itemsize >= src.dtype.itemsize:   # float -> float as wide: exact
        return None
    inf = np.isinf(arr)
    return inf & np.isfinite(src) if inf.any() else None


def _refuse(name: str, dt: np.dtype, src: np.ndarray, bad: np.ndarray) -> None:
    index = tuple(int(i) for i in np.argwhere(bad)[0]) if src.ndim else ()
    elem = src[index] if index else src[()]
    elem = elem.item() if isinstance(elem, np.generic) else elem
    where = f" (element {list(index)} of the fed value)" if index else ""
    if dt.kind == "b":
        takes = "True, False, 0 or 1"
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        takes = f"integers in [{info.min}, {info.max}]"
    elif dt.kind == "f":
        fi = np.finfo(dt)
        takes = (f"bools, integers up to 2**{fi.nmant + 1} in magnitude and floats up to "
                 f"{float(fi.max):g}")
    else:
        takes = "bools, integers, floats and complex numbers"
    raise errors.InvalidArgumentError(
        None, None, f"Cannot feed {elem!r}{where} to '{name}' of dtype {dt.name}: it does not "
        f"convert exactly to {dt.name}; a feed of dtype {dt.name} takes {takes} (None, strings "
        f"and values numpy would truncate, wrap or turn into NaN are refused)")


def feed_name(key: Any, graph: Graph | None = None) -> str:
    """The name a ``feed_dict`` key stands for: a Tensor's op name, a name without ``:0``,
    or the ``name`` of another object."""
    if isinstance(key, Tensor):
        return key.op.name
    if isinstance(key, str):
        name = key
    elif hasattr(key, "name"):
        name = key.name
    else:
        raise TypeError(f"feed_dict key {key!r} must be a placeholder, a name (str) or have "
                        f"a .name")
    return name[:-2] if name.endswith(":0") else name

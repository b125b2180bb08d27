"""Initializers, as TF1's ``tensorflow/python/ops/init_ops.py`` (r1.15): ``Zeros``, ``Ones``,
``Constant``, ``RandomUniform``, ``RandomNormal``, ``TruncatedNormal``, ``VarianceScaling``,
``GlorotUniform``, ``GlorotNormal`` and their lower-case aliases (``tf.zeros_initializer``...).

Where TF runs an initializer on the variable's device, psrt sends it to the ps task as a
specification (``docs/protocol.md``, "Initializers"): :func:`psrt.get_variable` and a
``psrt.Variable`` whose initial value is ``functools.partial(initializer, shape, ...)`` (the
form TF's ``get_variable`` builds) never hold their value on the worker; the ps task computes
it. Calling an initializer in Python (``init(shape, dtype)``, as in TF) computes the same
values on the host with :func:`initial_value`, psrt's documented host implementation of the
ps task's streams.

The random streams are counter-based: element *j* of the whole variable depends only on the
kind, its parameters, a 64-bit seed and *j*, so a partitioned variable's parts, on any number
of ps tasks, make exactly the value of the unpartitioned variable. They are psrt's own: the
same seed does not give TF's values (TF draws from Philox). Seeds follow TF's
``random_seed.get_seed``: a graph seed (``psrt.set_random_seed``) and an op seed (the
initializer's ``seed``, else the graph's op counter) make the 64-bit seed
``graph_seed << 32 | op_seed``; with neither, a random seed is drawn on the worker when the
variable is built (once for all its parts). Unlike TF's stateful random ops, running a
variable's initializer again gives the same values: they are a function of the seed.
"""

from __future__ import annotations

import copy
import math
import os
from typing import Any, Sequence

import numpy as np

from psrt.framework import dtypes as _dtypes
from psrt.framework.random_seed import get_seed

__all__ = [
    "Initializer", "Zeros", "Ones", "Constant", "RandomUniform", "RandomNormal",
    "TruncatedNormal", "VarianceScaling", "GlorotUniform", "GlorotNormal",
    "zeros_initializer", "ones_initializer", "constant_initializer",
    "random_uniform_initializer", "random_normal_initializer", "truncated_normal_initializer",
    "variance_scaling_initializer", "glorot_uniform_initializer", "glorot_normal_initializer",
    "initial_value",
]

# TF's VarianceScaling (r1.15): the stddev of a unit normal truncated at +-2 (scipy's
# truncnorm.std(a=-2, b=2)); the truncated draw is divided by it to keep the variance.
TRUNCATED_NORMAL_STDDEV = 0.87962566103423978

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_BLOCK = 1 << 16  # host fill: elements per block (bounds the temporaries to a few MB)
_MAX_NORMAL_TRIES = 32
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_KINDS = ("zeros", "ones", "constant", "random_uniform", "random_normal", "truncated_normal",
          "variance_scaling")
_MODES = ("fan_in", "fan_out", "fan_avg")
_DISTRIBUTIONS = ("truncated_normal", "untruncated_normal", "uniform")


# ---- the host implementation of the ps task's streams ---------------------------------------

def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer on uint64 (wrapping arithmetic), in place."""
    z ^= z >> np.uint64(30)
    z *= _M1
    z ^= z >> np.uint64(27)
    z *= _M2
    z ^= z >> np.uint64(31)
    return z


def _key(seed: int) -> Any:
    """``mix(seed + golden)``: the stream's key, a numpy uint64."""
    z = np.array([(int(seed) + 0x9E3779B97F4A7C15) % 2**64], np.uint64)
    return _mix(z)[0]


def _uniform(key: Any, j: np.ndarray, k: int) -> np.ndarray:
    """Draw ``k`` of elements ``j`` (uint64): 53 random bits as a float64 in [0, 1)."""
    z = j * np.uint64(64)
    z += np.uint64(k)
    z ^= key
    _mix(z)
    z >>= np.uint64(11)
    return z.astype(np.float64) * (1.0 / 9007199254740992.0)


def _normal(key: Any, j: np.ndarray, t: int) -> np.ndarray:
    """Box-Muller from draws 2t and 2t+1."""
    u1 = _uniform(key, j, 2 * t)
    u2 = _uniform(key, j, 2 * t + 1)
    np.subtract(1.0, u1, out=u1)
    np.log(u1, out=u1)
    u1 *= -2.0
    np.sqrt(u1, out=u1)
    u2 *= 6.283185307179586476925286766559
    np.cos(u2, out=u2)
    u1 *= u2
    return u1


def _truncated_normal(key: Any, j: np.ndarray) -> np.ndarray:
    """The first of up to 32 normal draws within 2 of 0 (0.0 if none is)."""
    out = _normal(key, j, 0)
    redo = np.flatnonzero(np.abs(out) > 2.0)
    for t in range(1, _MAX_NORMAL_TRIES):
        if redo.size == 0:
            break
        z = _normal(key, j[redo], t)
        ok = np.abs(z) <= 2.0
        out[redo[ok]] = z[ok]
        redo = redo[~ok]
    out[redo] = 0.0
    return out


def compute_fans(shape: Sequence[int]) -> tuple[float, float]:
    """``(fan_in, fan_out)`` of a weight shape, as TF's ``init_ops._compute_fans``: scalar
    1, 1; vector n, n; matrix rows, columns; higher ranks (convolution kernels ``[..., in,
    out]``) multiply by the receptive field, the product of the leading dimensions."""
    if len(shape) == 0:
        return 1.0, 1.0
    if len(shape) == 1:
        return float(shape[0]), float(shape[0])
    if len(shape) == 2:
        return float(shape[0]), float(shape[1])
    receptive = 1.0
    for d in shape[:-2]:
        receptive *= float(d)
    return float(shape[-2]) * receptive, float(shape[-1]) * receptive


def _generator(spec: dict[str, Any], shape: Sequence[int]) -> tuple[str, float, float, int]:
    """(kind, a, b, distribution) with variance_scaling's b made its limit or stddev, as the
    ps task derives them (csrc/initializers.cc)."""
    kind = spec["kind"]
    if kind not in _KINDS:
        raise ValueError(f"initializer kind {kind!r} not supported; expected "
                         f"{', '.join(_KINDS[:-1])} or {_KINDS[-1]}")
    a, b = float(spec.get("a", 0.0)), float(spec.get("b", 0.0))
    dist = 0
    if kind == "variance_scaling":
        mode = spec.get("fan_mode", "fan_in")
        name = spec.get("distribution", "truncated_normal")
        if mode not in _MODES:
            raise ValueError(f"fan_mode {mode!r} not supported; expected {', '.join(_MODES)}")
        if name not in _DISTRIBUTIONS:
            raise ValueError(f"distribution {name!r} not supported; expected "
                             f"{', '.join(_DISTRIBUTIONS)}")
        dist = _DISTRIBUTIONS.index(name)
        full = spec.get("full_shape")
        fan_in, fan_out = compute_fans(list(full) if full is not None else list(shape))
        n = fan_in if mode == "fan_in" else fan_out if mode == "fan_out" else (
            fan_in + fan_out) / 2
        scale = a / max(1.0, n)
        b = (math.sqrt(3.0 * scale) if dist == 2 else math.sqrt(scale) if dist == 1
             else math.sqrt(scale) / TRUNCATED_NORMAL_STDDEV)
    return kind, a, b, dist


def initial_value(spec: dict[str, Any], shape: Sequence[int], dtype: Any,
                  out: np.ndarray | None = None) -> np.ndarray:
    """The value a ps task computes for an initializer specification: psrt's host
    implementation of ``docs/protocol.md`` "Initializers" (csrc/initializers.cc).

    Args:
        spec: The dict a session sends (``kind``; ``a``, ``b``, ``fan_mode``,
            ``distribution``, ``seed`` as the kind needs; ``offset``, the element of the whole
            variable this part starts at, and ``full_shape``, the whole's shape, for a part).
        shape: The shape to fill (a part's own shape).
        dtype: float32 or float64; int64 or int32 for zeros, ones and constant.
        out: Optional C-contiguous array of ``shape`` and ``dtype`` to fill instead of a new
            one.

    Returns:
        The array (computed in float64 in blocks of 65,536 elements, then cast to ``dtype``,
        so a large fill needs only a few MB besides the result).

    Raises:
        ValueError: an unknown kind, mode or distribution, or a random kind for an integer
            dtype.
    """
    dt = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    kind, a, b, dist = _generator(spec, shape)
    if dt.kind != "f" and kind not in ("zeros", "ones", "constant"):
        raise ValueError(f"initializer kind {kind!r} needs float32 or float64; got {dt.name}")
    if out is None:
        out = np.empty(shape, dt)
    flat = out.reshape(-1)
    if kind in ("zeros", "ones", "constant"):
        value = {"zeros": 0.0, "ones": 1.0}.get(kind, a)
        flat[:] = np.array(value).astype(dt) if dt.kind != "f" else value
        return out
    key = _key(int(spec.get("seed", 0)))
    offset = int(spec.get("offset", 0))
    with np.errstate(over="ignore"):
        for start in range(0, flat.size, _BLOCK):
            stop = min(flat.size, start + _BLOCK)
            j = np.arange(offset + start, offset + stop, dtype=np.uint64)
            if kind == "random_uniform":
                v = a + (b - a) * _uniform(key, j, 0)
            elif kind == "random_normal":
                v = a + b * _normal(key, j, 0)
            elif kind == "truncated_normal":
                v = a + b * _truncated_normal(key, j)
            elif dist == 2:
                v = -b + 2 * b * _uniform(key, j, 0)
            elif dist == 1:
                v = b * _normal(key, j, 0)
            else:
                v = b * _truncated_normal(key, j)
            flat[start:stop] = v
    return out


# ---- seeds ----------------------------------------------------------------------------------

def _resolve_seed(op_seed: int | None) -> int:
    """The 64-bit seed of a random initializer created now, from TF's ``get_seed``:
    ``graph_seed << 32 | op_seed`` (each reduced modulo 2**31 - 1, as TF's), or a random one
    drawn on this worker when neither the graph nor the initializer has a seed."""
    graph_seed, seed = get_seed(op_seed)
    if graph_seed is None or seed is None:
        return int.from_bytes(os.urandom(8), "little")
    return (int(graph_seed) << 32) | int(seed)


def _as_float_dtype(dtype: Any) -> np.dtype:
    """TF's ``_assert_float_dtype``."""
    dt = _np_dtype(dtype)
    if dt not in _FLOATS:
        raise ValueError(f"Expected floating point type, got {dt.name}: this initializer "
                         f"takes float32 or float64.")
    return dt


def _np_dtype(dtype: Any) -> np.dtype:
    return dtype.dtype if isinstance(dtype, _dtypes.DType) else np.dtype(dtype)


def _shape_tuple(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    try:
        dims = tuple(int(d) for d in shape)
    except TypeError:
        raise TypeError(f"shape must be a sequence of ints; got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise ValueError(f"shape {list(dims)} has a negative dimension")
    return dims


class _PartitionInfo:
    """Where a part lies in its whole variable, as TF's ``variable_scope._PartitionInfo``:
    ``full_shape`` (the whole's shape) and ``var_offset`` (the part's first index in each
    dimension). Passed to an initializer as ``partition_info``."""

    def __init__(self, full_shape: Sequence[int], var_offset: Sequence[int]) -> None:
        self.full_shape = [int(d) for d in full_shape]
        self.var_offset = [int(d) for d in var_offset]
        if len(self.full_shape) != len(self.var_offset):
            raise ValueError(f"full_shape {self.full_shape} and var_offset {self.var_offset} "
                             f"differ in rank")

    def single_offset(self, shape: Sequence[int]) -> int:
        """The offset along the one dimension the part is sliced in (0 if none), as TF's."""
        dim = self.single_slice_dim(shape)
        return 0 if dim is None else self.var_offset[dim]

    def single_slice_dim(self, shape: Sequence[int]) -> int | None:
        """The dimension the part is sliced in, or None when it is the whole, as TF's."""
        dims = [i for i, (s, f) in enumerate(zip(shape, self.full_shape)) if s != f]
        if len(dims) > 1:
            raise ValueError(f"Cannot use single_slice_dim() with shape {list(shape)} and "
                             f"full_shape {self.full_shape}: sliced in more than one dimension")
        return dims[0] if dims else None

    def _element_offset(self, shape: Sequence[int]) -> int | None:
        """The part's first element in the whole (row-major), or None when the part is not
        one contiguous run of the whole's elements (sliced past its first dimension)."""
        if list(shape[1:]) != self.full_shape[1:] or any(self.var_offset[1:]):
            return None
        return self.var_offset[0] * int(np.prod(self.full_shape[1:], dtype=np.int64))


# ---- initializers ---------------------------------------------------------------------------

class Initializer:
    """Base of the initializers, as TF's ``init_ops.Initializer``: ``init(shape, dtype=None,
    partition_info=None)`` returns the initial value (a numpy array of ``shape`` and
    ``dtype``, default the initializer's); ``get_config()`` / ``from_config(config)`` give
    and take its arguments."""

    dtype: np.dtype
    _random = False

    def __init__(self) -> None:
        self._fixed_seed: int | None = None

    def get_config(self) -> dict[str, Any]:
        """The arguments of this initializer (dict), as TF's."""
        return {}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Initializer":
        """An initializer made from ``get_config()``'s dict, as TF's."""
        return cls(**config)

    def _kind_spec(self, shape: tuple[int, ...], dtype: np.dtype) -> dict[str, Any] | None:
        """The ps specification without seed, offset or full shape; None when only the host
        can compute the value."""
        raise NotImplementedError

    def _host_value(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        raise NotImplementedError

    def _call_dtype(self, dtype: Any) -> np.dtype:
        return self.dtype if dtype is None else _np_dtype(dtype)

    def _seeded(self) -> "Initializer":
        """This initializer with its seed decided now (TF decides it when the initializer's
        op is created): every part of one variable uses the returned copy."""
        if not self._random or self._fixed_seed is not None:
            return self
        bound = copy.copy(self)
        bound._fixed_seed = _resolve_seed(getattr(self, "seed", None))
        return bound

    def _spec(self, shape: Any, dtype: Any = None,
              partition_info: _PartitionInfo | None = None) -> dict[str, Any] | None:
        """The full ps specification of the value ``self(shape, dtype, partition_info)``
        (with the seed decided if it was not), or None when it needs the host."""
        shape = _shape_tuple(shape)
        dt = self._call_dtype(dtype)
        spec = self._kind_spec(shape if partition_info is None
                               else tuple(partition_info.full_shape), dt)
        if spec is None:
            return None
        if self._random:
            spec["seed"] = (self._fixed_seed if self._fixed_seed is not None
                            else _resolve_seed(getattr(self, "seed", None)))
        if partition_info is not None:
            offset = partition_info._element_offset(shape)
            if offset is None:
                return None
            spec["offset"] = offset
            spec["full_shape"] = list(partition_info.full_shape)
        return spec

    def __call__(self, shape: Any, dtype: Any = None,
                 partition_info: _PartitionInfo | None = None) -> np.ndarray:
        shape = _shape_tuple(shape)
        dt = self._call_dtype(dtype)
        spec = self._spec(shape, dt, partition_info)
        if spec is not None:
            return initial_value(spec, shape, dt)
        if partition_info is None:
            return self._host_value(shape, dt)
        whole = self(partition_info.full_shape, dt)
        index = tuple(slice(o, o + s) for o, s in zip(partition_info.var_offset, shape))
        return np.ascontiguousarray(whole[index])


class _Fill(Initializer):
    """An initializer whose only argument is a dtype: every element the same ``_kind``."""

    _kind = ""

    def __init__(self, dtype: Any = np.float32) -> None:
        super().__init__()
        self.dtype = _np_dtype(dtype)

    def _kind_spec(self, shape, dtype):
        return {"kind": self._kind}

    def get_config(self) -> dict[str, Any]:
        """The constructor's arguments (dtype as its name), as TF's ``get_config``."""
        return {"dtype": self.dtype.name}


class Zeros(_Fill):
    """Zeros, as ``tf.zeros_initializer`` (``init_ops.Zeros``).

    Args:
        dtype: The default dtype of the values (float32; any variable dtype).
    """

    _kind = "zeros"


class Ones(_Fill):
    """Ones, as ``tf.ones_initializer`` (``init_ops.Ones``).

    Args:
        dtype: The default dtype of the values (float32; any variable dtype).
    """

    _kind = "ones"


class Constant(Initializer):
    """A constant, as ``tf.constant_initializer`` (``init_ops.Constant``).

    A scalar ``value`` fills the shape and is computed on the ps task. A list or array is
    TF1's ``tf.constant(value, shape=shape)``: its elements in row-major order, the last one
    repeated when it has fewer than the shape (computed on the worker, as the value is
    there already).

    Args:
        value: A Python scalar, list or array.
        dtype: The default dtype of the values (float32).
        verify_shape: If True, a list or array must have exactly the shape, as TF's.

    Raises:
        TypeError (when called): ``verify_shape`` and ``value``'s shape differs
            ("Expected Tensor's shape: ..., got ...", TF's message).
        ValueError (when called): more elements than the shape holds ("Too many elements
            provided. Needed at most N, but received M", TF's message).
    """

    def __init__(self, value: Any = 0, dtype: Any = np.float32,
                 verify_shape: bool = False) -> None:
        super().__init__()
        self.value = value
        self.dtype = _np_dtype(dtype)
        self._verify_shape = bool(verify_shape)

    def _kind_spec(self, shape, dtype):
        v = np.asarray(self.value)
        if v.ndim != 0 or v.dtype.kind not in "biuf":
            return None
        if dtype.kind == "f":
            return {"kind": "constant", "a": float(v)}
        # An integer variable: the ps casts the float64 `a`, exact up to 2**53.
        iv = int(np.asarray(v).astype(dtype))
        return {"kind": "constant", "a": float(iv)} if abs(iv) <= 2**53 else None

    def _host_value(self, shape, dtype):
        v = np.asarray(self.value, dtype)
        if v.ndim == 0:
            return np.full(shape, v, dtype)
        if self._verify_shape and v.shape != shape:
            raise TypeError(f"Expected Tensor's shape: {shape}, got {v.shape}.")
        n = int(np.prod(shape, dtype=np.int64))
        if v.size > n:
            raise ValueError(f"Too many elements provided. Needed at most {n}, but received "
                             f"{v.size}")
        out = np.empty(n, dtype)
        out[:v.size] = v.reshape(-1)
        if v.size:
            out[v.size:] = v.reshape(-1)[-1]
        return out.reshape(shape)

    def get_config(self) -> dict[str, Any]:
        """The constructor's arguments (dtype as its name), as TF's ``get_config``."""
        return {"value": self.value, "dtype": self.dtype.name,
                "verify_shape": self._verify_shape}


class RandomUniform(Initializer):
    """Uniform values in ``[minval, maxval)``, as ``tf.random_uniform_initializer``
    (``init_ops.RandomUniform``).

    Args:
        minval: Lower bound (float; default 0).
        maxval: Upper bound, excluded (float; default None: 1 for floats; required for
            integer dtypes).
        seed: Op-level seed (int) or None; see :func:`psrt.set_random_seed`.
        dtype: float32 or float64 (computed on the ps task), or an integer dtype
            (``minval + floor((maxval - minval) * u)``, computed on the worker).

    Raises:
        ValueError (when called): an integer dtype without ``maxval`` (TF's "Must specify
            maxval for integer dtype").
    """

    _random = True

    def __init__(self, minval: float = 0, maxval: float | None = None,
                 seed: int | None = None, dtype: Any = np.float32) -> None:
        super().__init__()
        self.minval, self.maxval, self.seed = minval, maxval, seed
        self.dtype = _np_dtype(dtype)

    def _kind_spec(self, shape, dtype):
        if dtype.kind != "f":
            return None
        hi = 1.0 if self.maxval is None else float(self.maxval)
        return {"kind": "random_uniform", "a": float(self.minval), "b": hi}

    def _host_value(self, shape, dtype):
        if self.maxval is None:
            raise ValueError(f"Must specify maxval for integer dtype {dtype.name}")
        seeded = self._seeded()
        spec = {"kind": "random_uniform", "a": 0.0, "b": 1.0, "seed": seeded._fixed_seed}
        u = initial_value(spec, shape, np.float64)
        span = int(self.maxval) - int(self.minval)
        return (int(self.minval) + np.floor(u * span)).astype(dtype)

    def get_config(self) -> dict[str, Any]:
        """The constructor's arguments (dtype as its name), as TF's ``get_config``."""
        return {"minval": self.minval, "maxval": self.maxval, "seed": self.seed,
                "dtype": self.dtype.name}


class RandomNormal(Initializer):
    """Normal values, as ``tf.random_normal_initializer`` (``init_ops.RandomNormal``).

    Args:
        mean: Mean (float; default 0).
        stddev: Standard deviation (float; default 1).
        seed: Op-level seed (int) or None; see :func:`psrt.set_random_seed`.
        dtype: float32 or float64.

    Raises:
        ValueError: a dtype that is not floating point ("Expected floating point type...").
    """

    _random = True

    def __init__(self, mean: float = 0.0, stddev: float = 1.0, seed: int | None = None,
                 dtype: Any = np.float32) -> None:
        super().__init__()
        self.mean, self.stddev, self.seed = mean, stddev, seed
        self.dtype = _as_float_dtype(dtype)

    def _call_dtype(self, dtype):
        return _as_float_dtype(self.dtype if dtype is None else dtype)

    def _kind_spec(self, shape, dtype):
        return {"kind": "random_normal", "a": float(self.mean), "b": float(self.stddev)}

    def get_config(self) -> dict[str, Any]:
        """The constructor's arguments (dtype as its name), as TF's ``get_config``."""
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed,
                "dtype": self.dtype.name}


class TruncatedNormal(RandomNormal):
    """Normal values redrawn when more than two standard deviations from the mean, as
    ``tf.truncated_normal_initializer`` (``init_ops.TruncatedNormal``). Arguments as
    :class:`RandomNormal` (``stddev`` is that of the normal before truncation, as TF's)."""

    def _kind_spec(self, shape, dtype):
        return {"kind": "truncated_normal", "a": float(self.mean), "b": float(self.stddev)}


class VarianceScaling(Initializer):
    """Values scaled to the shape, as ``tf.variance_scaling_initializer``
    (``init_ops.VarianceScaling``, r1.15).

    With ``n`` the fan ``mode`` names (of the whole variable for a part, from TF's
    ``_compute_fans``) and ``s = scale / max(1, n)``: ``"truncated_normal"`` (``"normal"``,
    TF's deprecated alias) draws a normal truncated at two standard deviations with
    stddev ``sqrt(s) / 0.87962566103423978``, so that the truncated values have stddev
    ``sqrt(s)``; ``"untruncated_normal"`` a normal of stddev ``sqrt(s)``; ``"uniform"``
    values in ``[-sqrt(3 s), sqrt(3 s))``.

    Args:
        scale: Positive float (default 1).
        mode: ``"fan_in"`` (default), ``"fan_out"`` or ``"fan_avg"``.
        distribution: ``"truncated_normal"`` (default), ``"untruncated_normal"``,
            ``"uniform"`` or ``"normal"`` (case-insensitive).
        seed: Op-level seed (int) or None; see :func:`psrt.set_random_seed`.
        dtype: float32 or float64.

    Raises:
        ValueError: ``scale`` not positive, or an unknown ``mode`` or ``distribution``
            (naming it and the choices), or a dtype that is not floating point.
    """

    _random = True

    def __init__(self, scale: float = 1.0, mode: str = "fan_in",
                 distribution: str = "truncated_normal", seed: int | None = None,
                 dtype: Any = np.float32) -> None:
        super().__init__()
        if not scale > 0.0:
            raise ValueError(f"`scale` must be positive float; got {scale!r}.")
        if mode not in _MODES:
            raise ValueError(f"Invalid `mode` argument: {mode!r}; expected 'fan_in', "
                             f"'fan_out' or 'fan_avg'")
        dist = str(distribution).lower()
        if dist not in ("normal",) + _DISTRIBUTIONS:
            raise ValueError(f"Invalid `distribution` argument: {distribution!r}; expected "
                             f"'truncated_normal', 'untruncated_normal', 'uniform' or "
                             f"'normal'")
        self.scale, self.mode, self.distribution, self.seed = scale, mode, dist, seed
        self.dtype = _as_float_dtype(dtype)

    def _call_dtype(self, dtype):
        return _as_float_dtype(self.dtype if dtype is None else dtype)

    def _kind_spec(self, shape, dtype):
        dist = "truncated_normal" if self.distribution == "normal" else self.distribution
        return {"kind": "variance_scaling", "a": float(self.scale), "fan_mode": self.mode,
                "distribution": dist, "full_shape": list(shape)}

    def get_config(self) -> dict[str, Any]:
        """The constructor's arguments (dtype as its name), as TF's ``get_config``."""
        return {"scale": self.scale, "mode": self.mode, "distribution": self.distribution,
                "seed": self.seed, "dtype": self.dtype.name}


class GlorotUniform(VarianceScaling):
    """Glorot (Xavier) uniform: values in ``±sqrt(6 / (fan_in + fan_out))``, as
    ``tf.glorot_uniform_initializer`` (``init_ops.GlorotUniform``: VarianceScaling with
    scale 1, ``fan_avg``, ``uniform``).

    Args:
        seed: Op-level seed (int) or None.
        dtype: float32 or float64.
    """

    def __init__(self, seed: int | None = None, dtype: Any = np.float32) -> None:
        super().__init__(1.0, "fan_avg", "uniform", seed, dtype)

    def get_config(self) -> dict[str, Any]:
        """The constructor's arguments (dtype as its name), as TF's ``get_config``."""
        return {"seed": self.seed, "dtype": self.dtype.name}


class GlorotNormal(VarianceScaling):
    """Glorot (Xavier) normal: a truncated normal of stddev ``sqrt(2 / (fan_in +
    fan_out))`` after truncation, as ``tf.glorot_normal_initializer``
    (``init_ops.GlorotNormal``: VarianceScaling with scale 1, ``fan_avg``,
    ``truncated_normal``).

    Args:
        seed: Op-level seed (int) or None.
        dtype: float32 or float64.
    """

    def __init__(self, seed: int | None = None, dtype: Any = np.float32) -> None:
        super().__init__(1.0, "fan_avg", "truncated_normal", seed, dtype)

    def get_config(self) -> dict[str, Any]:
        """The constructor's arguments (dtype as its name), as TF's ``get_config``."""
        return {"seed": self.seed, "dtype": self.dtype.name}


# TF's lower-case aliases (init_ops.py, "Aliases").
zeros_initializer = Zeros
ones_initializer = Ones
constant_initializer = Constant
random_uniform_initializer = RandomUniform
random_normal_initializer = RandomNormal
truncated_normal_initializer = TruncatedNormal
variance_scaling_initializer = VarianceScaling
glorot_uniform_initializer = GlorotUniform
glorot_normal_initializer = GlorotNormal

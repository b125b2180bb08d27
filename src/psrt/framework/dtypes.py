"""TF1's dtype objects (``tf.float32``, ``tf.int32``, ..., ``tf.as_dtype``) over numpy dtypes.

A :class:`DType` is what TF1 scripts pass as ``dtype=``: psrt's functions, and numpy's, take
it wherever they take a numpy dtype (it has numpy's ``dtype`` attribute protocol:
``numpy.zeros(3, psrt.float32)`` works), and it compares equal to the numpy dtype, its type
and its name (``psrt.float32 == numpy.float32 == "float32"``), as TF's ``DType.__eq__``
accepts anything ``as_dtype`` takes (tensorflow/python/framework/dtypes.py).

``psrt.string`` is TF's ``tf.string``: numpy ``object`` holding ``bytes``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["DType", "as_dtype", "bool", "float16", "float32", "float64", "int8", "int16",
           "int32", "int64", "string", "uint8", "uint16", "double", "half"]

_builtin_bool = bool


class DType:
    """A tensor element type, as ``tf.DType``: ``name``, ``as_numpy_dtype``, ``is_integer``,
    ``is_floating``, ``is_bool``, ``size``, ``min``, ``max``, ``base_dtype``.

    Create them with :func:`as_dtype` (or use the module's constants).
    """

    __slots__ = ("_np", "_name")

    def __init__(self, np_dtype: Any, name: str) -> None:
        self._np = np.dtype(np_dtype)
        self._name = name

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype (numpy's protocol: lets numpy take this object as a dtype)."""
        return self._np

    @property
    def name(self) -> str:
        """TF's name: ``"float32"``, ``"int32"``, ``"string"``, ..."""
        return self._name

    @property
    def as_numpy_dtype(self) -> type:
        """The numpy scalar type (``numpy.float32``; ``object`` for ``string``), as TF."""
        return self._np.type

    @property
    def base_dtype(self) -> "DType":
        """This dtype (psrt has no reference dtypes)."""
        return self

    @property
    def real_dtype(self) -> "DType":
        """This dtype (psrt has no complex dtypes)."""
        return self

    @property
    def is_integer(self) -> _builtin_bool:
        """True for signed and unsigned integers (not bool), as TF."""
        return self._np.kind in "iu"

    @property
    def is_floating(self) -> _builtin_bool:
        """True for float16/32/64, as TF."""
        return self._np.kind == "f"

    @property
    def is_bool(self) -> _builtin_bool:
        """True for ``bool``."""
        return self._np.kind == "b"

    @property
    def is_unsigned(self) -> _builtin_bool:
        """True for ``uint8``/``uint16``, as TF."""
        return self._np.kind == "u"

    @property
    def size(self) -> int:
        """Bytes per element (numpy's item size)."""
        return int(self._np.itemsize)

    @property
    def min(self) -> Any:
        """The smallest value, as TF (TypeError for bool and string)."""
        if self._np.kind == "f":
            return float(np.finfo(self._np).min)
        if self._np.kind in "iu":
            return int(np.iinfo(self._np).min)
        raise TypeError(f"Cannot find minimum value of {self._name}.")

    @property
    def max(self) -> Any:
        """The largest value, as TF (TypeError for bool and string)."""
        if self._np.kind == "f":
            return float(np.finfo(self._np).max)
        if self._np.kind in "iu":
            return int(np.iinfo(self._np).max)
        raise TypeError(f"Cannot find maximum value of {self._name}.")

    def is_compatible_with(self, other: Any) -> _builtin_bool:
        """True when ``other`` names the same dtype."""
        return self == other

    def __eq__(self, other: object) -> _builtin_bool:
        if other is None:
            return False
        try:
            return as_dtype(other) is self
        except TypeError:
            return False

    def __ne__(self, other: object) -> _builtin_bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self._np)

    def __repr__(self) -> str:
        return f"psrt.{self._name}"

    def __reduce__(self) -> Any:
        return (as_dtype, (self._name,))


float16 = half = DType(np.float16, "float16")
float32 = DType(np.float32, "float32")
float64 = double = DType(np.float64, "float64")
int8 = DType(np.int8, "int8")
int16 = DType(np.int16, "int16")
int32 = DType(np.int32, "int32")
int64 = DType(np.int64, "int64")
uint8 = DType(np.uint8, "uint8")
uint16 = DType(np.uint16, "uint16")
bool = DType(np.bool_, "bool")  # noqa: A001 - TF's name
string = DType(np.object_, "string")

_ALL = (float16, float32, float64, int8, int16, int32, int64, uint8, uint16, bool, string)
_BY_NAME = {d.name: d for d in _ALL}
_BY_NAME.update({"half": float16, "double": float64})
_BY_NP = {d.dtype: d for d in _ALL}


def as_dtype(type_value: Any) -> DType:
    """The :class:`DType` for ``type_value``, as ``tf.as_dtype``: a DType, a TF name
    (``"float32"``, ``"int64"``, ``"string"``, ...), a numpy dtype or scalar type, or
    Python's ``float``/``int``/``bool``/``bytes``/``str`` (float64, int64, bool, string,
    string, as numpy maps them; TF maps ``float`` to float32 only in conversions, not here).

    Raises:
        TypeError: ``type_value`` names no dtype: "Cannot convert value ... to a TensorFlow
            DType.", as TF.
    """
    if isinstance(type_value, DType):
        return type_value
    if isinstance(type_value, str) and type_value in _BY_NAME:
        return _BY_NAME[type_value]
    if type_value is None:
        raise TypeError("Cannot convert value None to a TensorFlow DType.")
    if type_value in (bytes, str):
        return string
    try:
        np_dtype = np.dtype(type_value)
    except TypeError:
        np_dtype = None
    if np_dtype is not None and np_dtype in _BY_NP:
        return _BY_NP[np_dtype]
    raise TypeError(f"Cannot convert value {type_value!r} to a TensorFlow DType.")


# ---- the dtype rules of graph values and of variables on the ps --------------------------------

TF_NAMES = {"float32": "float", "float64": "double", "float16": "half"}
"""TF's names of numpy dtypes, as its error messages print them ("with dtype float")."""

VARIABLE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64),
                   np.dtype(np.int32))
"""The dtypes a variable can have (the core stores float32, float64 and int64)."""

WIRE_NAMES = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64",
              np.dtype(np.int64): "int64"}
"""The core's names of the dtypes a ps task stores, by numpy dtype."""


def as_numpy_dtype(dtype: Any) -> np.dtype | None:
    """A numpy dtype from a numpy dtype, a type, a name, or a :class:`DType` (anything with
    ``as_numpy_dtype``); None stays None (unknown).

    Raises:
        TypeError: ``dtype`` is not a dtype.
    """
    if dtype is None:
        return None
    dtype = getattr(dtype, "as_numpy_dtype", dtype)
    try:
        return np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{dtype!r} is not a dtype (e.g. numpy.float32)") from None


def variable_dtype(dtype: Any, name: str) -> np.dtype:
    """The dtype a variable named ``name`` of ``dtype`` (a numpy dtype, a :class:`DType` or a
    TF name) has: float32, float64, int32 or int64 (int32 is stored on the ps as int64, see
    :func:`wire_dtype`; the variable keeps int32 as its ``dtype``, as TF accepts int32 global
    steps).

    Raises:
        TypeError: not a dtype, or a dtype variables cannot have.
    """
    try:
        dt = dtype.dtype if isinstance(dtype, DType) else np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"dtype {dtype!r} of variable '{name}' is not a numpy dtype") from e
    if dt not in VARIABLE_DTYPES:
        shown = "string" if dt == np.object_ else dt.name
        raise TypeError(f"dtype {shown} not supported for variable '{name}'; expected "
                        f"float32, float64, int32 or int64")
    return dt


def wire_dtype(dt: np.dtype) -> np.dtype:
    """The dtype a ps task stores and sends values of a variable of dtype ``dt`` in (int64 for
    int32: the core's integers are int64)."""
    return np.dtype(np.int64) if dt == np.int32 else np.dtype(dt)


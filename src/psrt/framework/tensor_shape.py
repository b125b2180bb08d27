"""Static shapes, as tensorflow/python/framework/tensor_shape.py (r1.15): :class:`Dimension`
(a size or unknown) and :class:`TensorShape` (a list of them, or unknown rank).

Every graph op computes its output's static shape from its inputs' when it is built (TF's
shape inference); ``None`` marks a size known only at run time (a batch dimension).
"""

from __future__ import annotations

from typing import Any, Iterator


class Dimension:
    """One dimension of a static shape: an int ``value`` >= 0, or None (unknown), as TF1's
    ``tf.Dimension``. Arithmetic with an unknown dimension is unknown; ``==`` with an
    unknown dimension is None (TF's three-valued comparison).

    Raises:
        ValueError: a negative size.
        TypeError: a value that is not an int or None.
    """

    __slots__ = ("_value",)

    def __init__(self, value: Any) -> None:
        if isinstance(value, Dimension):
            value = value.value
        if value is None:
            self._value: int | None = None
        else:
            try:
                v = int(value.__index__() if hasattr(value, "__index__") else value)
            except (TypeError, AttributeError):
                raise TypeError(f"Dimension value must be integer or None, got value "
                                f"{value!r} with type {type(value).__name__}") from None
            if v != value:
                raise TypeError(f"Dimension value must be integer or None, got {value!r}")
            if v < 0:
                raise ValueError(f"Dimension {v} must be >= 0")
            self._value = v

    @property
    def value(self) -> int | None:
        """The size, or None when unknown."""
        return self._value

    def __repr__(self) -> str:
        return f"Dimension({self._value!r})"

    def __str__(self) -> str:
        return "?" if self._value is None else str(self._value)

    def __int__(self) -> int:
        if self._value is None:
            raise TypeError("Cannot convert an unknown Dimension to int")
        return self._value

    __index__ = __int__

    def __eq__(self, other: object) -> Any:
        try:
            o = as_dimension(other)
        except (TypeError, ValueError):
            return NotImplemented
        if self._value is None or o._value is None:
            return None
        return self._value == o._value

    def __ne__(self, other: object) -> Any:
        eq = self.__eq__(other)
        return eq if eq is None or eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(self._value)

    def is_compatible_with(self, other: Any) -> bool:
        """True when either is unknown or both are equal."""
        o = as_dimension(other)
        return self._value is None or o._value is None or self._value == o._value

    def merge_with(self, other: Any) -> "Dimension":
        """The known one of two compatible dimensions.

        Raises:
            ValueError: they are known and differ.
        """
        o = as_dimension(other)
        if not self.is_compatible_with(o):
            raise ValueError(f"Dimensions {self} and {o} are not compatible")
        return self if self._value is not None else o

    def _arith(self, other: Any, fn: Any) -> "Dimension":
        o = as_dimension(other)
        if self._value is None or o._value is None:
            return Dimension(None)
        return Dimension(fn(self._value, o._value))

    def __add__(self, other: Any) -> "Dimension":
        return self._arith(other, lambda a, b: a + b)

    __radd__ = __add__

    def __sub__(self, other: Any) -> "Dimension":
        return self._arith(other, lambda a, b: a - b)

    def __mul__(self, other: Any) -> "Dimension":
        return self._arith(other, lambda a, b: a * b)

    __rmul__ = __mul__

    def __floordiv__(self, other: Any) -> "Dimension":
        return self._arith(other, lambda a, b: a // b)


def as_dimension(value: Any) -> Dimension:
    """``value`` as a :class:`Dimension` (itself when it is one)."""
    return value if isinstance(value, Dimension) else Dimension(value)


def dimension_value(dimension: Any) -> int | None:
    """The int (or None) of a Dimension, an int or None, as ``tf.compat.dimension_value``."""
    return dimension.value if isinstance(dimension, Dimension) else dimension


class TensorShape:
    """A static shape, as ``tf.TensorShape``: a list of :class:`Dimension`, or unknown rank
    (``TensorShape(None)``).

    ``len``, indexing (a Dimension; a slice gives a TensorShape), iteration, ``as_list()``,
    ``ndims``, ``is_fully_defined()``, ``merge_with``, ``concatenate``, ``with_rank``. It
    compares equal to another shape or a list/tuple of the same sizes with None for unknown
    ones (``x.shape == (None, 784)``); TF's own ``==`` treats unknown dimensions as
    unequal, psrt's compares them as equal, so tests and scripts can check shapes plainly.

    Raises:
        ValueError, TypeError: a dimension that is negative or not an int or None.
    """

    __slots__ = ("_dims",)

    def __init__(self, dims: Any) -> None:
        if dims is None:
            self._dims: tuple[Dimension, ...] | None = None
        elif isinstance(dims, TensorShape):
            self._dims = dims._dims
        elif isinstance(dims, (int, Dimension)) and not isinstance(dims, bool):
            self._dims = (as_dimension(dims),)
        else:
            self._dims = tuple(as_dimension(d) for d in dims)

    @property
    def dims(self) -> list[Dimension] | None:
        """The dimensions, or None for unknown rank."""
        return None if self._dims is None else list(self._dims)

    @property
    def ndims(self) -> int | None:
        """The rank, or None."""
        return None if self._dims is None else len(self._dims)

    rank = ndims

    def as_list(self) -> list[int | None]:
        """The sizes, None for unknown ones.

        Raises:
            ValueError: unknown rank (TF's message).
        """
        if self._dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return [d.value for d in self._dims]

    def _as_tuple(self) -> tuple[int | None, ...] | None:
        return None if self._dims is None else tuple(d.value for d in self._dims)

    def is_fully_defined(self) -> bool:
        """True when the rank and every size are known."""
        return self._dims is not None and all(d.value is not None for d in self._dims)

    def num_elements(self) -> int | None:
        """The number of elements, or None when not fully defined."""
        if not self.is_fully_defined():
            return None
        n = 1
        for d in self._dims or ():
            n *= d.value or 0
        return n

    def is_compatible_with(self, other: Any) -> bool:
        """True when the ranks and every pair of sizes are compatible."""
        o = as_shape(other)
        if self._dims is None or o._dims is None:
            return True
        return len(self._dims) == len(o._dims) and all(
            a.is_compatible_with(b) for a, b in zip(self._dims, o._dims))

    def merge_with(self, other: Any) -> "TensorShape":
        """The most specific shape compatible with both.

        Raises:
            ValueError: they are not compatible (TF's message).
        """
        o = as_shape(other)
        if self._dims is None:
            return o
        if o._dims is None:
            return self
        if not self.is_compatible_with(o):
            raise ValueError(f"Shapes {self} and {o} are not compatible")
        return TensorShape([a.merge_with(b) for a, b in zip(self._dims, o._dims)])

    def concatenate(self, other: Any) -> "TensorShape":
        """This shape followed by ``other``'s dimensions (unknown rank if either is)."""
        o = as_shape(other)
        if self._dims is None or o._dims is None:
            return TensorShape(None)
        return TensorShape(self._dims + o._dims)

    def with_rank(self, rank: int) -> "TensorShape":
        """This shape with rank ``rank``.

        Raises:
            ValueError: a known rank that differs (TF's message).
        """
        if self._dims is None:
            return TensorShape([None] * rank)
        if len(self._dims) != rank:
            raise ValueError(f"Shape {self} must have rank {rank}")
        return self

    def assert_is_compatible_with(self, other: Any) -> None:
        """Raises ValueError (TF's message) when ``other`` is not compatible."""
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {as_shape(other)} are incompatible")

    def __len__(self) -> int:
        if self._dims is None:
            raise ValueError("Cannot take the length of shape with unknown rank.")
        return len(self._dims)

    def __bool__(self) -> bool:
        return self._dims is not None

    def __iter__(self) -> Iterator[Dimension]:
        if self._dims is None:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        return iter(self._dims)

    def __getitem__(self, key: Any) -> Any:
        if self._dims is None:
            return TensorShape(None) if isinstance(key, slice) else Dimension(None)
        if isinstance(key, slice):
            return TensorShape(self._dims[key])
        return self._dims[key]

    def __add__(self, other: Any) -> "TensorShape":
        return self.concatenate(other)

    def __radd__(self, other: Any) -> "TensorShape":
        return as_shape(other).concatenate(self)

    def __eq__(self, other: object) -> bool:
        try:
            o = as_shape(other)
        except (TypeError, ValueError):
            return NotImplemented
        return self._as_tuple() == o._as_tuple()

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(self._as_tuple())

    def __repr__(self) -> str:
        if self._dims is None:
            return "TensorShape(None)"
        return f"TensorShape({[d for d in self._dims]!r})"

    def __str__(self) -> str:
        if self._dims is None:
            return "<unknown>"
        if len(self._dims) == 1:
            return f"({self._dims[0]},)"
        return "(" + ", ".join(str(d) for d in self._dims) + ")"


def as_shape(shape: Any) -> TensorShape:
    """``shape`` (a TensorShape, list or tuple of ints/None, or None) as a TensorShape."""
    return shape if isinstance(shape, TensorShape) else TensorShape(shape)


def unknown_shape(rank: int | None = None) -> TensorShape:
    """A shape of unknown sizes (and rank, when ``rank`` is None), as TF's."""
    return TensorShape(None if rank is None else [None] * rank)


def scalar() -> TensorShape:
    """The shape of a scalar, ``TensorShape([])``."""
    return TensorShape([])


def broadcast_static(a: TensorShape, b: TensorShape) -> TensorShape:
    """numpy's broadcast of two static shapes (None where unknown).

    Raises:
        ValueError: known sizes that do not broadcast (TF's message).
    """
    if a.ndims is None or b.ndims is None:
        return TensorShape(None)
    x, y = a.as_list(), b.as_list()
    n = max(len(x), len(y))
    x = [1] * (n - len(x)) + x
    y = [1] * (n - len(y)) + y
    out: list[int | None] = []
    for p, q in zip(x, y):
        if p == 1:
            out.append(q)
        elif q == 1:
            out.append(p)
        elif p is None or q is None:
            out.append(p if q is None else q)
        elif p == q:
            out.append(p)
        else:
            raise ValueError(f"Dimensions must be equal, but are {p} and {q}; shapes "
                             f"{a} and {b} do not broadcast")
    return TensorShape(out)

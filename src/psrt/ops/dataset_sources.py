"""The sources of ``tf.data`` (psrt/ops/dataset_ops.py's ``Dataset.from_tensor_slices``,
``from_tensors``, ``from_generator``, ``range``, ``zip``, ``concatenate``, ``list_files``) as
dataset nodes (psrt/ops/dataset_structure.py): each makes the iterator of its flat elements
for one initialization, as TF's dataset kernels (tensorflow/core/kernels/data/, r1.15)."""

from __future__ import annotations

import glob
from typing import Any, Callable, Iterator

import numpy as np

from psrt.framework import errors as _errors
from psrt.framework import random_seed as _random_seed
from psrt.framework.tensor import Tensor
from psrt.framework.tensor_shape import TensorShape
from psrt.ops import dataset_structure as _st
from psrt.ops.dataset_structure import DatasetNode, Flat

__all__ = ["Concatenate", "Generator", "ListFiles", "Range", "TensorSlices", "Tensors", "Zip",
           "rng", "spec"]

def spec(x: Any) -> tuple[np.dtype, TensorShape]:
    """The numpy dtype and static shape of a dataset source's component ``x`` (a Tensor or
    a value). Raises TypeError for a tensor without a static dtype."""
    if isinstance(x, Tensor):
        if x.dtype is None:
            raise TypeError(f"tensor {x.name} has no static dtype (give its py_func a Tout)")
        return np.dtype(x.dtype), x.shape
    return x.dtype, TensorShape(x.shape)


class Tensors(DatasetNode):
    """``Dataset.from_tensors``: one element, the (nested) ``tensors``."""

    def __init__(self, tensors: Any) -> None:
        structure = _st.map_structure(_st.element_value, tensors)
        self._values = _st.flatten(structure)
        specs = [spec(v) for v in self._values]
        self._set_spec(structure, [d for d, _ in specs], [s for _, s in specs])

    def _tensors(self) -> list[Any]:
        return self._values

    def _make(self, ctx: _st.Context) -> Iterator[Flat]:
        return iter([[ctx.array(v) for v in self._values]])


class TensorSlices(Tensors):
    """``Dataset.from_tensor_slices``: one element per row of the first dimension, which
    every component must share (else ValueError), as TF's TensorSliceDataset."""

    def __init__(self, tensors: Any) -> None:
        super().__init__(tensors)
        first = None
        for v, s in zip(self._values, self._shapes):
            if s.ndims == 0:
                raise ValueError("Shape must be at least rank 1 but is rank 0")
            n = s.as_list()[0] if s.ndims is not None else None
            if n is not None and first is not None and n != first:
                raise ValueError(f"Dimensions {first} and {n} are not compatible")
            first = n if first is None else first
        self._shapes = [TensorShape(s.as_list()[1:]) if s.ndims is not None else s
                        for s in self._shapes]

    def _make(self, ctx: _st.Context) -> Iterator[Flat]:
        values = [ctx.array(v) for v in self._values]
        sizes = {v.shape[0] if v.ndim else None for v in values}
        if None in sizes or len(sizes) != 1:
            raise _errors.InvalidArgumentError(
                None, None, f"All components must have the same size in the 0th dimension; "
                f"got shapes {[list(v.shape) for v in values]}")
        n = int(values[0].shape[0]) if values else 0
        # v[i, ...]: a 0-d array, not a numpy scalar (which Python's `i * [1]` would repeat)
        return ([v[i, ...] for v in values] for i in range(n))


class Range(DatasetNode):
    """``Dataset.range(stop)`` / ``(start, stop[, step])``: int64 scalars, as Python's range
    and TF's RangeDataset."""

    def __init__(self, *args: Any) -> None:
        if not 1 <= len(args) <= 3:
            raise ValueError(f"Invalid arguments to range: {args!r}")
        self._args = list(args)
        self._set_spec(0, [np.int64], [TensorShape([])])

    def _tensors(self) -> list[Any]:
        return self._args

    def _make(self, ctx: _st.Context) -> Iterator[Flat]:
        vals = [ctx.scalar(a, "range's arguments") for a in self._args]
        start, stop, step = (0, vals[0], 1) if len(vals) == 1 else \
            (vals[0], vals[1], vals[2] if len(vals) == 3 else 1)
        if step == 0:
            raise _errors.InvalidArgumentError(None, None, "step size cannot be 0")
        return ([np.array(i, np.int64)] for i in range(start, stop, step))


class Generator(DatasetNode):
    """``Dataset.from_generator``: the elements ``generator(*args)`` yields, a new generator
    per iteration. At ``get_next``: TypeError for an element that does not match the
    structure or convert to ``output_types``, InvalidArgumentError for one whose shape is
    not ``output_shapes``."""

    def __init__(self, generator: Callable[..., Any], output_types: Any, output_shapes: Any,
                 args: Any) -> None:
        if not callable(generator):
            raise TypeError("`generator` must be callable.")
        types = _st.to_dtypes(output_types)
        shapes = _st.to_shapes(output_shapes, types)
        self._gen = generator
        self._args = [_st.element_value(a) for a in (args or [])]
        self._set_spec(types, [d.dtype for d in _st.flatten(types)], _st.flatten(shapes))

    def _tensors(self) -> list[Any]:
        return self._args

    def _make(self, ctx: _st.Context) -> Iterator[Flat]:
        args = [ctx.array(a) for a in self._args]
        source = self._gen(*args)

        def gen() -> Iterator[Flat]:
            for elem in source:
                yield self._convert(elem)
        return gen()

    def _convert(self, elem: Any) -> Flat:
        if isinstance(elem, list) and isinstance(self._structure, tuple):
            elem = tuple(elem)
        try:
            leaves = _st.flatten(_st.pack(self._structure, _flat_like(self._structure, elem)))
        except (TypeError, ValueError, StopIteration):
            raise TypeError(f"`generator` yielded an element that did not match the expected "
                            f"structure. The expected structure was {self.output_types()}, but "
                            f"the yielded element was {elem!r}.") from None
        out = []
        for v, dt, shape in zip(leaves, self._dtypes, self._shapes):
            try:
                arr = _st.as_tensor_value(v, dt)
            except (TypeError, ValueError):
                raise TypeError(f"`generator` yielded an element that could not be converted "
                                f"to the expected type. The expected type was {dt.name}, but "
                                f"the yielded element was {v!r}.") from None
            if not shape.is_compatible_with(arr.shape):
                raise _errors.InvalidArgumentError(
                    None, None, f"`generator` yielded an element of shape {list(arr.shape)} "
                    f"where an element of shape {shape.as_list()} was expected.")
            out.append(arr)
        return out


def _flat_like(template: Any, elem: Any) -> list[Any]:
    """The leaves of ``elem`` following ``template``'s structure (TypeError if it differs)."""
    if isinstance(template, dict):
        if not isinstance(elem, dict) or sorted(elem) != sorted(template):
            raise TypeError("structure")
        return [x for k in sorted(template) for x in _flat_like(template[k], elem[k])]
    if isinstance(template, tuple):
        if not isinstance(elem, (tuple, list)) or len(elem) != len(template):
            raise TypeError("structure")
        return [x for t, e in zip(template, elem) for x in _flat_like(t, e)]
    return [elem]


class Zip(DatasetNode):
    """``Dataset.zip``: elements of several datasets side by side, ending with the shortest."""

    def __init__(self, datasets: Any) -> None:
        self._datasets = _st.flatten(datasets)
        for d in self._datasets:
            if not isinstance(d, DatasetNode):
                raise TypeError(f"The argument to `Dataset.zip()` must be a nested structure "
                                f"of `Dataset` objects; got {d!r}")
        structure = _st.pack(datasets, [d._structure for d in self._datasets])
        self._set_spec(structure, [x for d in self._datasets for x in d._dtypes],
                       [x for d in self._datasets for x in d._shapes],
                       [x for d in self._datasets for x in d._sparse])

    def _inputs(self) -> list[DatasetNode]:
        return self._datasets

    def _make(self, ctx: _st.Context) -> Iterator[Flat]:
        its = [d._make(ctx) for d in self._datasets]
        return ([x for e in parts for x in e] for parts in zip(*its))


class Concatenate(DatasetNode):
    """``Dataset.concatenate``: ``a``'s elements, then ``b``'s (same types and structure)."""

    def __init__(self, a: DatasetNode, b: DatasetNode) -> None:
        if not isinstance(b, DatasetNode):
            raise TypeError(f"concatenate takes a Dataset; got {b!r}")
        if a.output_types() != b.output_types() or a.output_classes() != b.output_classes():
            raise TypeError(f"Two datasets to concatenate have different types "
                            f"{a.output_types()} and {b.output_types()}")
        self._a, self._b = a, b
        shapes = [s if s == t else _most_specific(s, t) for s, t in zip(a._shapes, b._shapes)]
        self._set_spec(a._structure, a._dtypes, shapes, a._sparse)

    def _inputs(self) -> list[DatasetNode]:
        return [self._a, self._b]

    def _make(self, ctx: _st.Context) -> Iterator[Flat]:
        first = self._a._make(ctx)

        def gen() -> Iterator[Flat]:
            yield from first
            yield from self._b._make(ctx)
        return gen()


def _most_specific(s: TensorShape, t: TensorShape) -> TensorShape:
    """The most specific shape both ``s`` and ``t`` have (TF's
    ``most_specific_compatible_shape``)."""
    if s.ndims is None or t.ndims is None or s.ndims != t.ndims:
        return TensorShape(None)
    return TensorShape([a if a == b else None for a, b in zip(s.as_list(), t.as_list())])


class ListFiles(DatasetNode):
    """``Dataset.list_files``: the file names (bytes) matching ``pattern``, shuffled unless
    ``shuffle=False`` (seeded), as TF's list_files."""

    def __init__(self, pattern: Any, shuffle: bool | None, seed: int | None) -> None:
        self._pattern = _st.element_value(pattern)
        self._shuffle = True if shuffle is None else bool(shuffle)
        self._seeds = _random_seed.get_seed(seed)
        self._set_spec(0, [np.object_], [TensorShape([])])

    def _tensors(self) -> list[Any]:
        return [self._pattern]

    def _make(self, ctx: _st.Context) -> Iterator[Flat]:
        pats = [p.decode() if isinstance(p, bytes) else str(p)
                for p in ctx.array(self._pattern).reshape(-1)]
        files = sorted({f for p in pats for f in glob.glob(p)})
        if not files:
            raise _errors.InvalidArgumentError(
                None, None, f"No files matched pattern: {', '.join(pats)}")
        if self._shuffle:
            order = rng(self._seeds, ctx.counter(id(self))).permutation(len(files))
            files = [files[i] for i in order]
        return ([np.array(f.encode(), dtype=object)] for f in files)


def rng(seeds: tuple[int | None, int | None], iteration: int) -> np.random.Generator:
    """The generator of one iteration of a seeded random dataset (fresh entropy when neither
    a graph nor an op seed is set, as TF's (0, 0) seeds)."""
    seed, seed2 = seeds
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng([int(seed), int(seed2 or 0), iteration])



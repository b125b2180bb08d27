"""``tf.data.Dataset`` in TF 1.x graph mode (tensorflow/python/data/ops/dataset_ops.py, r1.15):
the sources (``from_tensor_slices``, ``from_tensors``, ``from_generator``, ``range``,
``zip``, ``list_files``) and the transformations (``map``, ``filter``, ``batch``,
``padded_batch``, ``shuffle``, ``repeat``, ``take``, ``skip``, ``prefetch``, ``interleave``,
``flat_map``, ``shard``, ``cache``, ``concatenate``, ``apply``).

A Dataset is a description; its elements are produced by an iterator
(psrt/ops/iterator_ops.py), in Python over numpy, on the worker that runs ``get_next``.
``map``/``filter``/``interleave`` functions are traced once over placeholders shaped as the
element (psrt/ops/dataset_structure.py) and their graph is evaluated per element (per batch
after ``batch``: ``dataset.batch(n).map(parse_example_fn)`` parses a whole batch in one call,
the fast path). Tensors given as arguments are computed once per initialization of the
iterator, from the feeds of the initializer's run.
"""

from __future__ import annotations

from typing import Any, Callable

from psrt.ops import dataset_kernels as _k
from psrt.ops import dataset_sources as _src
from psrt.ops import iterator_ops as _iter
from psrt.ops.dataset_structure import DatasetNode

__all__ = ["AUTOTUNE", "Dataset", "map_and_batch", "parallel_interleave", "shuffle_and_repeat",
           "unbatch"]

AUTOTUNE = _k.AUTOTUNE


class Dataset:
    """A sequence of elements, each a nested structure (tuples, dicts) of arrays, as
    ``tf.data.Dataset`` (TF r1.15, graph mode). Build one with a source (``from_tensor_slices``,
    ``TFRecordDataset`` ...), chain transformations, and read it with
    :meth:`make_one_shot_iterator` or :meth:`make_initializable_iterator`."""

    _node: DatasetNode

    @classmethod
    def _wrap(cls, node: DatasetNode) -> "Dataset":
        ds = cls.__new__(cls)
        ds._node = node
        return ds

    @property
    def output_types(self) -> Any:
        """The structure of the element's dtypes (:class:`psrt.DType`), as TF 1.15."""
        return self._node.output_types()

    @property
    def output_shapes(self) -> Any:
        """The structure of the element's static shapes (:class:`psrt.TensorShape`)."""
        return self._node.output_shapes()

    @property
    def output_classes(self) -> Any:
        """The structure of the element's classes (``psrt.Tensor`` for each component)."""
        return self._node.output_classes()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} shapes: {self.output_shapes}, types: {self.output_types}>"

    def __iter__(self) -> Any:
        raise TypeError("`tf.data.Dataset` only supports Python-style iteration in eager mode; "
                        "in graph mode use make_one_shot_iterator() or "
                        "make_initializable_iterator()")

    # ---- iterators -------------------------------------------------------------------------

    def make_one_shot_iterator(self) -> _iter.Iterator:
        """An iterator that needs no initialization, as ``Dataset.make_one_shot_iterator``:
        it starts at the first run of its ``get_next()``.

        Raises:
            ValueError: the pipeline reads a placeholder (TF: "Cannot capture a placeholder
                ... by value"; use :meth:`make_initializable_iterator`).
        """
        return _iter.Iterator._one_shot(self._node)

    def make_initializable_iterator(self, shared_name: str | None = None) -> _iter.Iterator:
        """An iterator whose ``initializer`` op (re)starts it, as
        ``Dataset.make_initializable_iterator``; the run of the initializer feeds the
        pipeline's placeholders (``sess.run(it.initializer, {filenames: [...]})``)."""
        return _iter.Iterator._initializable(self._node, shared_name)

    # ---- sources ------------------------------------------------------------------------

    @staticmethod
    def from_tensor_slices(tensors: Any) -> "Dataset":
        """One element per slice of ``tensors`` along their first dimension (a nested
        structure of arrays or tensors sharing that dimension), as TF.

        Raises:
            ValueError: a component is a scalar, or the components' first dimensions differ.
        """
        return Dataset._wrap(_src.TensorSlices(tensors))

    @staticmethod
    def from_tensors(tensors: Any) -> "Dataset":
        """One element: ``tensors`` (a nested structure), as ``Dataset.from_tensors``."""
        return Dataset._wrap(_src.Tensors(tensors))

    @staticmethod
    def from_generator(generator: Callable[..., Any], output_types: Any,
                       output_shapes: Any = None, args: Any = None) -> "Dataset":
        """The elements ``generator(*args)`` yields, converted to ``output_types`` (a
        structure of dtypes) and checked against ``output_shapes``, as
        ``Dataset.from_generator``; ``args`` (tensors or values) are computed at each
        initialization and passed as numpy values (strings as bytes).

        Raises (when the element is produced):
            TypeError: an element that does not convert to ``output_types``.
            InvalidArgumentError: an element of another shape than ``output_shapes``.
        """
        return Dataset._wrap(_src.Generator(generator, output_types, output_shapes, args))

    @staticmethod
    def range(*args: Any) -> "Dataset":
        """``range(stop)``, ``range(start, stop[, step])`` as int64 scalars, as
        ``Dataset.range``.

        Raises:
            ValueError: no argument, more than three, or a step of 0 (when run:
                InvalidArgumentError "step size cannot be 0", as TF).
        """
        return Dataset._wrap(_src.Range(*args))

    @staticmethod
    def zip(datasets: Any) -> "Dataset":
        """Elements of ``datasets`` (a nested structure of datasets) side by side, until
        the shortest ends, as ``Dataset.zip``.

        Raises:
            TypeError: a leaf of ``datasets`` is not a Dataset.
        """
        return Dataset._wrap(_src.Zip(_nodes(datasets)))

    @staticmethod
    def list_files(file_pattern: Any, shuffle: bool | None = None, seed: int | None = None
                   ) -> "Dataset":
        """The files matching ``file_pattern`` (a glob, or a list of them) as scalar
        strings, sorted, then shuffled unless ``shuffle=False`` (default True, as TF).

        Raises:
            InvalidArgumentError: no file matches (TF: "No files matched pattern: ...").
        """
        return Dataset._wrap(_src.ListFiles(file_pattern, shuffle, seed))

    # ---- transformations ----------------------------------------------------------------

    def map(self, map_func: Callable[..., Any], num_parallel_calls: Any = None) -> "Dataset":
        """``map_func`` applied to each element (a tuple element as separate arguments), as
        ``Dataset.map``; the function is traced once over placeholders (``tf.*`` ops such as
        ``parse_single_example``, ``decode_raw``, arithmetic). ``num_parallel_calls`` is
        accepted (psrt maps in order, in the iterator's thread)."""
        return Dataset._wrap(_k.Map(self._node, map_func))

    def filter(self, predicate: Callable[..., Any]) -> "Dataset":
        """The elements for which ``predicate`` (traced as :meth:`map`'s function) is a
        true scalar bool, as ``Dataset.filter``.

        Raises:
            ValueError: the predicate does not return a scalar bool tensor (TF's message).
        """
        return Dataset._wrap(_k.Filter(self._node, predicate))

    def batch(self, batch_size: Any, drop_remainder: bool = False) -> "Dataset":
        """Consecutive elements stacked along a new first axis, ``batch_size`` at a time;
        the last batch is smaller unless ``drop_remainder``, as ``Dataset.batch``.

        Raises (when run):
            InvalidArgumentError: ``batch_size`` <= 0, or elements of different shapes
                (TF: "Cannot batch tensors with different shapes in component 0 ...").
        """
        return Dataset._wrap(_k.Batch(self._node, batch_size, drop_remainder))

    def padded_batch(self, batch_size: Any, padded_shapes: Any, padding_values: Any = None,
                     drop_remainder: bool = False) -> "Dataset":
        """As :meth:`batch`, each component padded to ``padded_shapes`` (-1 or None: the
        batch's largest) with ``padding_values`` (default 0, b"" for strings), as
        ``Dataset.padded_batch``.

        Raises (when run):
            InvalidArgumentError: an element larger than its padded shape.
        """
        return Dataset._wrap(_k.PaddedBatch(self._node, batch_size, padded_shapes,
                                            padding_values, drop_remainder))

    def unbatch(self) -> "Dataset":
        """Each element split into the slices along its first dimension, as
        ``Dataset.unbatch`` (``tf.data.experimental.unbatch()``).

        Raises:
            ValueError: a scalar component. InvalidArgumentError (when run): components of
                different first dimensions.
        """
        return Dataset._wrap(_k.Unbatch(self._node))

    def shuffle(self, buffer_size: Any, seed: int | None = None,
                reshuffle_each_iteration: bool | None = None) -> "Dataset":
        """Elements drawn at random from a buffer of ``buffer_size``, as
        ``Dataset.shuffle``. The seeds are TF's graph and op seeds
        (``tf.set_random_seed``, ``seed``; psrt/framework/random_seed.py): seeded, every
        initialization gives the same orders; ``reshuffle_each_iteration`` (default True)
        gives each epoch of a ``repeat`` another order."""
        return Dataset._wrap(_k.Shuffle(self._node, buffer_size, seed,
                                        reshuffle_each_iteration))

    def repeat(self, count: Any = None) -> "Dataset":
        """The elements ``count`` times (None or -1: forever), as ``Dataset.repeat``."""
        return Dataset._wrap(_k.Repeat(self._node, count))

    def take(self, count: Any) -> "Dataset":
        """The first ``count`` elements (-1: all), as ``Dataset.take``."""
        return Dataset._wrap(_k.Take(self._node, count))

    def skip(self, count: Any) -> "Dataset":
        """The elements after the first ``count`` (-1: none), as ``Dataset.skip``."""
        return Dataset._wrap(_k.Skip(self._node, count))

    def prefetch(self, buffer_size: Any) -> "Dataset":
        """The same elements, produced ahead by a background thread into a bounded buffer of
        ``buffer_size`` (AUTOTUNE: 2), as ``Dataset.prefetch``."""
        return Dataset._wrap(_k.Prefetch(self._node, buffer_size))

    def interleave(self, map_func: Callable[..., Any], cycle_length: Any = AUTOTUNE,
                   block_length: Any = 1, num_parallel_calls: Any = None) -> "Dataset":
        """The elements of the datasets ``map_func`` returns for each input element,
        ``block_length`` at a time from ``cycle_length`` of them in turn, in TF's order
        (tensorflow/core/kernels/data/interleave_dataset_op.cc)."""
        return Dataset._wrap(_k.Interleave(self._node, map_func, cycle_length, block_length))

    def flat_map(self, map_func: Callable[..., Any]) -> "Dataset":
        """The elements of the datasets ``map_func`` returns, one dataset after another."""
        return Dataset._wrap(_k.Interleave(self._node, map_func, 1, 1))

    def shard(self, num_shards: Any, index: Any) -> "Dataset":
        """Every ``num_shards``-th element from ``index`` on, as ``Dataset.shard`` (shard
        the files before reading them when you can).

        Raises (when run):
            InvalidArgumentError: ``num_shards`` <= 0 or ``index`` not in
                ``[0, num_shards)`` (TF's messages).
        """
        return Dataset._wrap(_k.Shard(self._node, num_shards, index))

    def cache(self, filename: str = "") -> "Dataset":
        """The elements, kept in memory after the first complete pass of an initialization
        and replayed after (``filename`` is accepted; psrt caches in memory)."""
        return Dataset._wrap(_k.Cache(self._node))

    def concatenate(self, dataset: "Dataset") -> "Dataset":
        """This dataset's elements, then ``dataset``'s, as ``Dataset.concatenate``.

        Raises:
            TypeError: the two have different structures or dtypes.
        """
        return Dataset._wrap(_src.Concatenate(self._node, _nodes(dataset)))

    def apply(self, transformation_func: Callable[["Dataset"], "Dataset"]) -> "Dataset":
        """``transformation_func(self)``, as ``Dataset.apply``.

        Raises:
            TypeError: the function does not return a Dataset.
        """
        out = transformation_func(self)
        if not isinstance(out, Dataset):
            raise TypeError("`transformation_func` must return a Dataset.")
        return out


def _nodes(datasets: Any) -> Any:
    """The nodes of a structure of Datasets (anything else is left for the node's check)."""
    if isinstance(datasets, Dataset):
        return datasets._node
    if isinstance(datasets, dict):
        return type(datasets)((k, _nodes(v)) for k, v in datasets.items())
    if isinstance(datasets, tuple):
        vals = [_nodes(v) for v in datasets]
        return type(datasets)(*vals) if hasattr(datasets, "_fields") else tuple(vals)
    return datasets


# ---- tf.data.experimental's transformations (functions for Dataset.apply) -------------------


def shuffle_and_repeat(buffer_size: Any, count: Any = None, seed: int | None = None
                       ) -> Callable[[Dataset], Dataset]:
    """``lambda ds: ds.shuffle(buffer_size, seed).repeat(count)``, as
    ``tf.data.experimental.shuffle_and_repeat`` (each epoch in another order)."""
    return lambda ds: ds.shuffle(buffer_size, seed).repeat(count)


def map_and_batch(map_func: Callable[..., Any], batch_size: Any, num_parallel_batches: Any = None,
                  drop_remainder: bool = False, num_parallel_calls: Any = None
                  ) -> Callable[[Dataset], Dataset]:
    """``lambda ds: ds.map(map_func).batch(batch_size, drop_remainder)``, as
    ``tf.data.experimental.map_and_batch``."""
    return lambda ds: ds.map(map_func).batch(batch_size, drop_remainder)


def unbatch() -> Callable[[Dataset], Dataset]:
    """``lambda ds: ds.unbatch()``, as ``tf.data.experimental.unbatch``."""
    return lambda ds: ds.unbatch()


def parallel_interleave(map_func: Callable[..., Any], cycle_length: Any, block_length: Any = 1,
                        sloppy: bool = False, buffer_output_elements: Any = None,
                        prefetch_input_elements: Any = None) -> Callable[[Dataset], Dataset]:
    """``lambda ds: ds.interleave(map_func, cycle_length, block_length)``, as
    ``tf.data.experimental.parallel_interleave`` (the deterministic order of ``sloppy=False``
    whatever ``sloppy``)."""
    return lambda ds: ds.interleave(map_func, cycle_length, block_length)

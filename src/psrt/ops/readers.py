"""``tf.data``'s file datasets (tensorflow/python/data/ops/readers.py, r1.15):
``TFRecordDataset``, ``TextLineDataset`` and ``FixedLengthRecordDataset``. Each element is
a scalar string (``bytes``): a record, a line without its line end, or a fixed-length
record. ``filenames`` may be a string, a list of them, a string tensor (a placeholder fed
at the iterator's initialization) or a dataset of strings (``Dataset.list_files``); with
``num_parallel_reads`` > 1 the files are read ``num_parallel_reads`` at a time, one record
from each in turn (TF's ``parallel_interleave(cycle_length=num_parallel_reads,
block_length=1)``, deterministic). Record files go through psrt/framework/tf_record.py."""

from __future__ import annotations

import gzip
import io
import zlib
from typing import IO, Any, Callable, Iterator

import numpy as np

from psrt.framework import errors as _errors
from psrt.framework import tf_record as _tf_record
from psrt.framework.tensor import Tensor
from psrt.framework.tensor_shape import TensorShape
from psrt.ops import dataset_structure as _st
from psrt.ops.dataset_kernels import interleave_iterators
from psrt.ops.dataset_ops import Dataset
from psrt.ops.dataset_structure import DatasetNode, Flat

__all__ = ["FixedLengthRecordDataset", "TFRecordDataset", "TextLineDataset"]


class _Names(DatasetNode):
    """The file names of a string, a list of them or a string tensor (rank 0 or 1)."""

    def __init__(self, filenames: Any) -> None:
        self._value = _st.element_value(filenames)
        dt = self._value.dtype
        if dt is not None and np.dtype(dt) != np.object_:
            raise TypeError(f"`filenames` must be a `tf.Tensor` of `tf.string`; got dtype "
                            f"{np.dtype(dt).name}")
        shape = self._value.shape if isinstance(self._value, Tensor) else \
            TensorShape(self._value.shape)
        if shape.ndims is not None and shape.ndims > 1:
            raise TypeError(f"`filenames` must be a scalar or a vector of strings; got shape "
                            f"{shape}")
        self._set_spec(0, [np.object_], [TensorShape([])])

    def _tensors(self) -> list[Any]:
        return [self._value]

    def _make(self, ctx: _st.Context) -> Iterator[Flat]:
        names = ctx.array(self._value).reshape(-1)
        return ([np.array(n, dtype=object)] for n in names)


def _names_node(filenames: Any) -> DatasetNode:
    if isinstance(filenames, Dataset):
        node = filenames._node
        if node._dtypes != [np.dtype(object)] or node._shapes[0].ndims not in (0, None):
            raise TypeError(f"`filenames` must be a `tf.data.Dataset` of scalar `tf.string` "
                            f"elements; got {filenames!r}")
        return node
    return _Names(filenames)


def _path(name: Any) -> str:
    v = np.asarray(name).reshape(()).item()
    return v.decode() if isinstance(v, bytes) else str(v)


def _compression(ctx: _st.Context, value: Any) -> str:
    v = ctx.value(value)
    if isinstance(v, np.ndarray):
        v = v.reshape(()).item()
    if isinstance(v, bytes):
        v = v.decode()
    return _tf_record.TFRecordOptions.get_compression_type_string(v)


def _open(path: str, compression: str) -> IO[bytes]:
    """``path`` opened for reading its uncompressed bytes."""
    f = _tf_record._open(path, "rb")
    if compression == "GZIP":
        g = gzip.GzipFile(fileobj=f)
        g.myfileobj = f  # type: ignore[assignment]  # closing g closes the file
        return g  # type: ignore[return-value]
    if compression == "ZLIB":
        with f:
            try:
                return io.BytesIO(zlib.decompress(f.read()))
            except zlib.error as e:
                raise _errors.DataLossError(None, None, f"{path}: bad ZLIB data ({e})") from e
    return f


class _Files(DatasetNode):
    """The records of each file of ``names``, read by ``read(path, ctx)``."""

    def __init__(self, names: DatasetNode, read: Callable[[str, _st.Context], Iterator[bytes]],
                 tensors: list[Any], parallel: Any) -> None:
        self._names = names
        self._read = read
        self._args = tensors
        self._parallel = _st.element_value(1 if parallel is None else parallel)
        self._set_spec(0, [np.object_], [TensorShape([])])

    def _inputs(self) -> list[DatasetNode]:
        return [self._names]

    def _tensors(self) -> list[Any]:
        return [*self._args, self._parallel]

    def _make(self, ctx: _st.Context) -> Iterator[Flat]:
        n = ctx.scalar(self._parallel, "num_parallel_reads")
        if n <= 0 and n != -1:
            raise _errors.InvalidArgumentError(None, None, f"num_parallel_reads must be "
                                               f"positive or AUTOTUNE (-1); got {n}")
        files = self._names._make(ctx)

        def records(elem: Flat) -> Iterator[Flat]:
            return ([np.array(r, dtype=object)] for r in self._read(_path(elem[0]), ctx))
        if n == 1:
            return (r for f in files for r in records(f))
        return interleave_iterators(files, records, 4 if n == -1 else n, 1)


class TFRecordDataset(Dataset):
    """The records of TFRecord files as scalar strings, as ``tf.data.TFRecordDataset``.

    Args:
        filenames: A string, a list of strings, a string tensor of rank 0 or 1, or a
            dataset of strings.
        compression_type: ``""`` (default), ``"ZLIB"`` or ``"GZIP"`` (or a string tensor).
        buffer_size: Accepted (bytes of read buffer in TF).
        num_parallel_reads: Files read at once, one record of each in turn (default 1:
            file after file).

    Raises:
        TypeError: ``filenames`` is not strings.
        ValueError (when run): a bad ``compression_type``.
        DataLossError, NotFoundError (when run): a corrupt or cut record, a missing file
            (psrt/framework/tf_record.py).
    """

    def __init__(self, filenames: Any, compression_type: Any = None, buffer_size: Any = None,
                 num_parallel_reads: Any = None) -> None:
        comp = _st.element_value("" if compression_type is None else compression_type)

        def read(path: str, ctx: _st.Context) -> Iterator[bytes]:
            return _tf_record.tf_record_iterator(path, _compression(ctx, comp))
        self._node = _Files(_names_node(filenames), read, [comp], num_parallel_reads)


def _lines(path: str, compression: str) -> Iterator[bytes]:
    with _open(path, compression) as f:
        for line in f:
            if line.endswith(b"\n"):
                line = line[:-1]
                if line.endswith(b"\r"):
                    line = line[:-1]
            yield line


class TextLineDataset(Dataset):
    """The lines of text files (without ``\\n`` or ``\\r\\n``) as scalar strings, as
    ``tf.data.TextLineDataset``. Arguments as :class:`TFRecordDataset`'s."""

    def __init__(self, filenames: Any, compression_type: Any = None, buffer_size: Any = None,
                 num_parallel_reads: Any = None) -> None:
        comp = _st.element_value("" if compression_type is None else compression_type)

        def read(path: str, ctx: _st.Context) -> Iterator[bytes]:
            return _lines(path, _compression(ctx, comp))
        self._node = _Files(_names_node(filenames), read, [comp], num_parallel_reads)


class FixedLengthRecordDataset(Dataset):
    """Records of ``record_bytes`` bytes from binary files (after ``header_bytes``, before
    ``footer_bytes``) as scalar strings, as ``tf.data.FixedLengthRecordDataset`` (the
    CIFAR-10 binaries); a last partial record is dropped, as TF's.

    Raises (when run):
        InvalidArgumentError: ``record_bytes`` <= 0, or negative header or footer sizes.
    """

    def __init__(self, filenames: Any, record_bytes: Any, header_bytes: Any = None,
                 footer_bytes: Any = None, buffer_size: Any = None,
                 compression_type: Any = None, num_parallel_reads: Any = None) -> None:
        comp = _st.element_value("" if compression_type is None else compression_type)
        sizes = [_st.element_value(0 if x is None else x)
                 for x in (record_bytes, header_bytes, footer_bytes)]

        def read(path: str, ctx: _st.Context) -> Iterator[bytes]:
            rec, head, foot = (ctx.scalar(x, what) for x, what in
                               zip(sizes, ("record_bytes", "header_bytes", "footer_bytes")))
            if rec <= 0 or head < 0 or foot < 0:
                raise _errors.InvalidArgumentError(
                    None, None, f"record_bytes must be > 0 and header_bytes, footer_bytes "
                    f">= 0; got {rec}, {head}, {foot}")
            with _open(path, _compression(ctx, comp)) as f:
                data = f.read()
            body = data[head:max(head, len(data) - foot)]
            return (body[i:i + rec] for i in range(0, len(body) - rec + 1, rec))
        self._node = _Files(_names_node(filenames), read, [comp, *sizes], num_parallel_reads)

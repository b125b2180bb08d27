"""TF1's file readers as graph ops (tensorflow/python/ops/io_ops.py, r1.15; kernels
tensorflow/core/framework/reader_base.cc and core/kernels/*_reader_op.cc):
``TFRecordReader``, ``TextLineReader``, ``FixedLengthRecordReader``, ``WholeFileReader``,
and ``matching_files``, ``read_file``.

A reader works through file names it dequeues from a queue (``string_input_producer``'s),
one file (TF's "work unit") at a time: ``read(queue)`` gives the next record's
``(key, value)`` string scalars, dequeuing the next file name when the current file is
done; once the queue is closed and empty, OutOfRangeError (the end of the epochs). Keys
are TF's:

==========================  ================================================================
reader                      key
==========================  ================================================================
``TFRecordReader``          ``"<file>:<offset>"``: the byte offset of the record's framing
                            in the (uncompressed) file
``TextLineReader``          ``"<file>:<line number>"``, from 1, header lines counted
``FixedLengthRecordReader`` ``"<file>:<record number>"``, from 0
``WholeFileReader``         ``"<file>"`` (the value is the whole file)
==========================  ================================================================

A record that fails its CRC, or a file cut short, is DataLossError naming the file and the
offset; a missing file NotFoundError: the error reaches the ``Session.run`` that reads (in a
queue runner thread: its Coordinator, then the training loop).
"""

from __future__ import annotations

import collections
import glob as _glob
import os
import threading
import zlib
from typing import IO, Any

import numpy as np

from psrt.framework import errors
from psrt.framework import ops as _ops
from psrt.framework import tensor as _tensor
from psrt.framework import tf_record as _tf_record
from psrt.ops.data_flow_ops import QueueBase, local_op

__all__ = ["FixedLengthRecordReader", "ReaderBase", "TFRecordReader", "TextLineReader",
           "WholeFileReader", "matching_files", "read_file"]

_STRING = np.dtype(object)

# What read and read_up_to return, as TF's generated ops' namedtuples.
ReaderReadResult = collections.namedtuple("ReaderReadResult", ["key", "value"])
ReaderReadUpToResult = collections.namedtuple("ReaderReadUpToResult", ["keys", "values"])


def _scalar(b: bytes) -> np.ndarray:
    out = np.empty((), dtype=object)
    out[()] = b
    return out


def _vector(items: list[bytes]) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def _work_name(work: Any) -> str:
    if isinstance(work, np.ndarray):
        if work.size != 1:
            raise errors.InvalidArgumentError(
                None, None, "Expected to dequeue a one-element string tensor")
        work = work.reshape(-1)[0]
    if isinstance(work, bytes):
        return work.decode("utf-8")
    if isinstance(work, str):
        return work
    raise errors.InvalidArgumentError(None, None, "Expected queue with single string component")


class ReaderBase:
    """What TF's readers share (``io_ops.ReaderBase``, core/framework/reader_base.cc): the
    current file, the counters, ``read``, ``read_up_to``, ``num_records_produced``,
    ``num_work_units_completed``, ``reset``. Subclasses open a file and read its records."""

    _default_name = "Reader"

    def __init__(self, name: str | None = None) -> None:
        graph = _ops.get_default_graph()
        self.name = graph.unique_name(name or self._default_name)
        graph._has_input_ops = True
        # Held for a whole read, as TF's mu_: one file's records in order.
        self._lock = threading.Lock()
        self._work: str | None = None
        self._source: Any = None
        self._work_started = 0
        self._work_finished = 0
        self._produced = 0

    @property
    def reader_ref(self) -> "ReaderBase":
        """The reader itself (TF's handle)."""
        return self

    @property
    def supports_serialize(self) -> bool:
        """False: psrt's readers do not serialize their state (as most of TF's)."""
        return False

    # ---- what a subclass provides ------------------------------------------------------------

    def _open(self, path: str) -> Any:
        raise NotImplementedError

    def _next(self, source: Any) -> tuple[bytes, bytes] | None:
        """The next (key suffix, value) of the open file, or None at its end."""
        raise NotImplementedError

    def _close_source(self) -> None:
        src, self._source = self._source, None
        close = getattr(src, "close", None)
        if close is not None:
            close()

    # ---- the reading, as ReaderBase::Read/ReadUpTo -------------------------------------------

    def _start_work(self, queue: QueueBase) -> None:
        (item,) = queue._take(1, False)
        if len(item) != 1:
            raise errors.InvalidArgumentError(None, None, "Expected single component queue")
        self._work = _work_name(item[0] if isinstance(item, tuple) else item)
        self._source = self._open(self._work)
        self._work_started += 1

    def _finish_work(self) -> None:
        self._close_source()
        self._work = None
        self._work_finished = self._work_started

    def _read_records(self, queue: QueueBase, n: int) -> list[tuple[bytes, bytes]]:
        out: list[tuple[bytes, bytes]] = []
        with self._lock:
            while len(out) < n:
                if self._work is None:
                    self._start_work(queue)
                try:
                    rec = self._next(self._source)
                except BaseException:
                    self._close_source()
                    self._work = None
                    raise
                if rec is None:
                    self._finish_work()
                    if out:
                        break   # read_up_to: at most one file's records per call, as TF
                    continue
                key, value = rec
                out.append(((self._work or "").encode("utf-8") + key, value))
                self._produced += 1
        return out

    # ---- graph ops ---------------------------------------------------------------------------

    def read(self, queue: Any, name: str | None = None) -> tuple[Any, Any]:
        """The next record: ``(key, value)``, string scalar tensors, computed once per run.

        Raises (in the run): OutOfRangeError once ``queue`` is closed and empty and the
        current file is done; DataLossError for a corrupt record; NotFoundError for a
        missing file.
        """
        q = _queue_of(queue)

        def run() -> list[Any]:
            ((key, value),) = self._read_records(q, 1)
            return [_scalar(key), _scalar(value)]
        key, value = _tensor.py_func(run, [], [_STRING, _STRING],
                                     name=name or f"{self.name}_ReaderRead")
        key.shape = []
        value.shape = []
        return ReaderReadResult(key, value)

    def read_up_to(self, queue: Any, num_records: int,
                   name: str | None = None) -> tuple[Any, Any]:
        """Up to ``num_records`` records of one file: ``(keys, values)``, string vectors, as
        TF's ``read_up_to`` (fewer at a file's end; OutOfRangeError once nothing is left).

        Raises:
            ValueError: ``num_records`` < 1.
        """
        n = int(num_records)
        if n < 1:
            raise ValueError(f"num_records must be >= 1; got {num_records}")
        q = _queue_of(queue)

        def run() -> list[Any]:
            recs = self._read_records(q, n)
            return [_vector([k for k, _ in recs]), _vector([v for _, v in recs])]
        keys, values = _tensor.py_func(run, [], [_STRING, _STRING],
                                       name=name or f"{self.name}_ReaderReadUpTo")
        keys.shape = [None]
        values.shape = [None]
        return ReaderReadUpToResult(keys, values)

    def num_records_produced(self, name: str | None = None) -> Any:
        """The records read since the start or the last reset: an int64 scalar tensor."""
        t = _tensor.py_func(lambda: np.int64(self._produced), [], np.int64,
                            name=name or f"{self.name}_NumRecordsProduced")
        t.shape = []
        return t

    def num_work_units_completed(self, name: str | None = None) -> Any:
        """The files read to their end: an int64 scalar tensor."""
        t = _tensor.py_func(lambda: np.int64(self._work_finished), [], np.int64,
                            name=name or f"{self.name}_NumWorkUnitsCompleted")
        t.shape = []
        return t

    def reset(self, name: str | None = None) -> Any:
        """An op returning the reader to its initial state (counters zero, no current
        file), as TF's ``reset``."""
        def run() -> None:
            with self._lock:
                self._close_source()
                self._work = None
                self._work_started = self._work_finished = self._produced = 0
        scope = name or f"{self.name}_ReaderReset"
        t = _tensor.py_func(run, [], None, name=scope + "_run")
        return local_op(t, _ops.get_default_graph().unique_name(scope))

    def serialize_state(self, name: str | None = None) -> Any:
        """Not supported, as most of TF's readers: UnimplementedError when run."""
        def run() -> None:
            raise errors.UnimplementedError(None, None, "Reader SerializeState")
        return _tensor.py_func(run, [], _STRING, name=name or f"{self.name}_SerializeState")


def _queue_of(queue: Any) -> QueueBase:
    q = getattr(queue, "queue_ref", queue)
    if not isinstance(q, QueueBase) or q._legacy:
        raise TypeError(f"a reader reads file names from a queue with dtypes "
                        f"(psrt.FIFOQueue(..., [psrt.string]) or string_input_producer); "
                        f"got {queue!r}")
    return q


def _open_binary(path: str) -> IO[bytes]:
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"{path}; No such file or directory") from None
    except IsADirectoryError:
        raise errors.FailedPreconditionError(None, None, f"{path}; Is a directory") from None


class TFRecordReader(ReaderBase):
    """Reads the records of TFRecord files, as ``tf.TFRecordReader``
    (core/kernels/tf_record_reader_op.cc): key ``"<file>:<offset>"``.

    Args:
        name: Op name (default ``"TFRecordReader"``).
        options: A :class:`psrt.python_io.TFRecordOptions` (GZIP/ZLIB), or None.
    """

    _default_name = "TFRecordReader"

    def __init__(self, name: str | None = None, options: Any = None) -> None:
        super().__init__(name)
        self._options = options

    def _open(self, path: str) -> Any:
        return _tf_record.RecordReader(path, self._options)

    def _next(self, source: Any) -> tuple[bytes, bytes] | None:
        rec = source.read_record()
        if rec is None:
            return None
        offset, data = rec
        return f":{offset}".encode(), data


class TextLineReader(ReaderBase):
    """Reads the lines of text files, as ``tf.TextLineReader``
    (core/kernels/text_line_reader_op.cc): the value is the line without its ``\\n`` (and
    a ``\\r`` before it); key ``"<file>:<line number>"`` counting from 1, header lines
    included; the first ``skip_header_lines`` lines of each file are skipped."""

    _default_name = "TextLineReader"

    def __init__(self, skip_header_lines: int | None = None, name: str | None = None) -> None:
        super().__init__(name)
        self._skip = int(skip_header_lines or 0)
        if self._skip < 0:
            raise ValueError(f"skip_header_lines must be >= 0; got {skip_header_lines}")

    def _open(self, path: str) -> Any:
        f = _open_binary(path)
        src = _Lines(f)
        for _ in range(self._skip):
            if src.line() is None:
                break
        return src

    def _next(self, source: Any) -> tuple[bytes, bytes] | None:
        line = source.line()
        if line is None:
            return None
        return f":{source.number}".encode(), line


class _Lines:
    def __init__(self, f: IO[bytes]) -> None:
        self._f = f
        self.number = 0

    def line(self) -> bytes | None:
        """The next line without its newline (b"" for an empty one); None at the end."""
        raw = self._f.readline()
        if not raw:
            return None
        self.number += 1
        if raw.endswith(b"\n"):
            raw = raw[:-1]
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        return raw

    def close(self) -> None:
        """Closes the file."""
        self._f.close()


class FixedLengthRecordReader(ReaderBase):
    """Reads fixed-length records, as ``tf.FixedLengthRecordReader``
    (core/kernels/fixed_length_record_reader_op.cc): each file is ``header_bytes``, then
    records of ``record_bytes`` (the next one starting ``hop_bytes`` after the previous when
    given), then ``footer_bytes``; a partial record at the end is dropped. Key
    ``"<file>:<record number>"`` from 0. ``encoding``: None, ``"ZLIB"`` or ``"GZIP"``.

    Raises:
        ValueError: ``record_bytes`` < 1, a negative size, or an unknown encoding.
    """

    _default_name = "FixedLengthRecordReader"

    def __init__(self, record_bytes: int, header_bytes: int | None = None,
                 footer_bytes: int | None = None, hop_bytes: int | None = None,
                 name: str | None = None, encoding: str | None = None) -> None:
        super().__init__(name)
        self._record = int(record_bytes)
        self._header = int(header_bytes or 0)
        self._footer = int(footer_bytes or 0)
        self._hop = int(hop_bytes or 0)
        if self._record < 1 or min(self._header, self._footer, self._hop) < 0:
            raise ValueError(f"record_bytes must be >= 1 and header_bytes, footer_bytes, "
                             f"hop_bytes >= 0; got {record_bytes}, {header_bytes}, "
                             f"{footer_bytes}, {hop_bytes}")
        if encoding not in (None, "", "ZLIB", "GZIP"):
            raise ValueError(f"encoding must be None, 'ZLIB' or 'GZIP'; got {encoding!r}")
        self._encoding = encoding or None

    def _open(self, path: str) -> Any:
        with _open_binary(path) as f:
            data = f.read()
        if self._encoding is not None:
            wbits = 31 if self._encoding == "GZIP" else 15
            try:
                data = zlib.decompress(data, wbits)
            except zlib.error as e:
                raise errors.DataLossError(None, None, f"{path}: {e}") from None
        return _Fixed(data, self._header, len(data) - self._footer)

    def _next(self, source: Any) -> tuple[bytes, bytes] | None:
        start = source.pos
        if start + self._record > source.limit:
            return None
        value = source.data[start:start + self._record]
        source.pos = start + (self._hop or self._record)
        key = f":{source.number}".encode()
        source.number += 1
        return key, value


class _Fixed:
    def __init__(self, data: bytes, pos: int, limit: int) -> None:
        self.data = data
        self.pos = pos
        self.limit = limit
        self.number = 0


class WholeFileReader(ReaderBase):
    """Reads each file whole, as ``tf.WholeFileReader``: key the file name, value its
    bytes."""

    _default_name = "WholeFileReader"

    def _open(self, path: str) -> Any:
        with _open_binary(path) as f:
            return [f.read()]

    def _next(self, source: Any) -> tuple[bytes, bytes] | None:
        if not source:
            return None
        return b"", source.pop()


def _matching(pattern: Any) -> np.ndarray:
    pats = np.asarray(pattern, dtype=object).reshape(-1)
    found: list[str] = []
    for p in pats:
        p = p.decode("utf-8") if isinstance(p, bytes) else str(p)
        found.extend(_glob.glob(p))
    return _vector(sorted(os.fsencode(f) for f in set(found)))


def matching_files(pattern: Any, name: str | None = None) -> Any:
    """The files matching a glob ``pattern`` (a string or a vector of them), sorted, as
    ``tf.matching_files`` (``tf.io.matching_files``): a string vector tensor."""
    t = _tensor.py_func(_matching, [pattern], _STRING, name=name or "MatchingFiles")
    t.shape = [None]
    return t


def _read_whole(filename: Any) -> np.ndarray:
    path = _work_name(np.asarray(filename, dtype=object))
    with _open_binary(path) as f:
        return _scalar(f.read())


def read_file(filename: Any, name: str | None = None) -> Any:
    """The contents of a file, as ``tf.read_file`` (``tf.io.read_file``): a string scalar.
    Raises NotFoundError in the run for a missing file."""
    t = _tensor.py_func(_read_whole, [filename], _STRING, name=name or "ReadFile")
    t.shape = []
    return t

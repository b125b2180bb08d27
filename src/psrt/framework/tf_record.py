"""TFRecord files: TF's record framing, written and read as TF's ``tf.python_io`` does.

The format is TF's (``tensorflow/core/lib/io/record_writer.cc`` and ``record_reader.cc``;
the Python API is ``tensorflow/python/lib/io/tf_record.py``, r1.15). Each record is::

    uint64  length                      (little-endian)
    uint32  masked CRC-32C of length    (little-endian)
    bytes   data[length]
    uint32  masked CRC-32C of data      (little-endian)

with TF's mask ``((crc >> 15) | (crc << 17)) + 0xa282ead8`` (mod 2**32) over the CRC-32C
(Castagnoli) of the bytes (``tensorflow/core/lib/hash/crc32c.h``). A file written here is
byte-identical to one written by TF without compression; a GZIP or ZLIB file is the same
record stream through zlib (TF's ``ZlibOutputBuffer``), readable by either side.

Reading checks both CRCs of every record. A bad CRC or a record cut short is
:class:`psrt.errors.DataLossError` naming the file and the byte offset of the record (in the
uncompressed stream), as TF's ``"corrupted record at N"`` / ``"truncated record at N"``.

Files are opened through :func:`_open` only, over tf.gfile's file systems (local paths and
fsspec URLs such as ``s3://``). The module sits in framework/, not platform/, because it
raises framework's ``DataLossError`` and ``NotFoundError`` (platform/ imports nothing of
psrt).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import IO, Any

import crc32c as _crc32c

from psrt.framework.errors import DataLossError
from psrt.framework.file_io import open_binary

__all__ = [
    "RecordReader",
    "TFRecordCompressionType",
    "TFRecordOptions",
    "TFRecordWriter",
    "masked_crc32c",
    "tf_record_iterator",
]

_MASK_DELTA = 0xA282EAD8
_HEADER = 12  # uint64 length + uint32 masked crc of it
_FOOTER = 4  # uint32 masked crc of the data
_READ_CHUNK = 1 << 16


def _open(path: str, mode: str) -> IO[bytes]:
    """Opens ``path`` in binary ``mode`` ("rb" or "wb"): the one place record files are
    opened, through tf.gfile's file systems (framework/file_io.py): a local path or any
    fsspec URL (``s3://bucket/train.tfrecord``). A missing file is :class:`NotFoundError`
    naming it, as TF's file system."""
    return open_binary(path, mode)


def masked_crc32c(data: bytes) -> int:
    """The masked CRC-32C of ``data`` as TF's ``crc32c::Mask(crc32c::Value(data))``
    (``tensorflow/core/lib/hash/crc32c.h``): ``((crc >> 15) | (crc << 17)) + 0xa282ead8``
    mod 2**32. Returns an int in [0, 2**32)."""
    crc = _crc32c.crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


class TFRecordCompressionType:
    """The compression of a record file, as ``tf.python_io.TFRecordCompressionType``:
    ``NONE`` (0), ``ZLIB`` (1), ``GZIP`` (2)."""

    NONE = 0
    ZLIB = 1
    GZIP = 2


_TYPE_NAMES = {
    TFRecordCompressionType.ZLIB: "ZLIB",
    TFRecordCompressionType.GZIP: "GZIP",
    TFRecordCompressionType.NONE: "",
}


class TFRecordOptions:
    """Options of a record file, as ``tf.io.TFRecordOptions`` (r1.15).

    Args:
      compression_type: ``TFRecordCompressionType.NONE/ZLIB/GZIP``, or the strings
        ``""``, ``"ZLIB"``, ``"GZIP"``, or None (no compression).
      flush_mode, input_buffer_size, output_buffer_size: accepted for TF's signature; the
        zlib streams here buffer by themselves.
      window_bits: zlib window bits (8..15, default 15 as TF's); GZIP adds zlib's 16.
      compression_level: zlib level 0..9, or -1 for zlib's default (TF's default).
      compression_method, mem_level, compression_strategy: zlib's deflate parameters
        (defaults: deflated, 8, default strategy, as TF's ``ZlibCompressionOptions``).

    Raises:
      ValueError: ``compression_type`` is not one of the valid choices.
    """

    compression_type_map = dict(_TYPE_NAMES)

    def __init__(
        self,
        compression_type: Any = None,
        flush_mode: int | None = None,
        input_buffer_size: int | None = None,
        output_buffer_size: int | None = None,
        window_bits: int | None = None,
        compression_level: int | None = None,
        compression_method: int | None = None,
        mem_level: int | None = None,
        compression_strategy: int | None = None,
    ) -> None:
        self.compression_type = _compression_string(compression_type)
        self.flush_mode = flush_mode
        self.input_buffer_size = input_buffer_size
        self.output_buffer_size = output_buffer_size
        self.window_bits = window_bits
        self.compression_level = compression_level
        self.compression_method = compression_method
        self.mem_level = mem_level
        self.compression_strategy = compression_strategy

    @classmethod
    def get_compression_type_string(cls, options: Any) -> str:
        """The compression of ``options`` (a ``TFRecordOptions``, a
        ``TFRecordCompressionType`` value, a string, or None) as TF's string: "", "ZLIB"
        or "GZIP". Raises ValueError for anything else."""
        if isinstance(options, TFRecordOptions):
            return options.compression_type
        return _compression_string(options)

    def _wbits(self) -> int:
        bits = 15 if self.window_bits is None else int(self.window_bits)
        if not 8 <= bits <= 15:
            raise ValueError(f"window_bits {bits} out of range; expected 8..15")
        return bits + 16 if self.compression_type == "GZIP" else bits


def _compression_string(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        if value in ("", "ZLIB", "GZIP"):
            return value
    elif isinstance(value, int) and value in _TYPE_NAMES:
        return _TYPE_NAMES[value]
    raise ValueError(
        f'Not a valid compression_type: "{value}"; expected TFRecordCompressionType.NONE, '
        'ZLIB, GZIP or one of "", "ZLIB", "GZIP"'
    )


def _as_options(options: Any) -> TFRecordOptions:
    if isinstance(options, TFRecordOptions):
        return options
    return TFRecordOptions(options)


def encode_record(data: bytes) -> bytes:
    """One record's framed bytes (header, data, footer) as TF's ``RecordWriter``."""
    header = struct.pack("<Q", len(data))
    return b"".join(
        (
            header,
            struct.pack("<I", masked_crc32c(header)),
            data,
            struct.pack("<I", masked_crc32c(data)),
        )
    )


class TFRecordWriter:
    """Writes records to a TFRecord file, as ``tf.python_io.TFRecordWriter``.

    Args:
      path: the file to write (created or truncated).
      options: a ``TFRecordOptions``, a ``TFRecordCompressionType`` or a compression
        string ("", "ZLIB", "GZIP"), or None.

    Use as a context manager, or call :meth:`close`. Raises ValueError for a bad
    ``options``; OSError (or NotFoundError for a missing directory) when the file cannot
    be created.
    """

    def __init__(self, path: str, options: Any = None) -> None:
        opts = _as_options(options)
        self._path = str(path)
        self._compress: Any = None
        if opts.compression_type:
            level = -1 if opts.compression_level is None else int(opts.compression_level)
            self._compress = zlib.compressobj(
                level,
                zlib.DEFLATED if opts.compression_method is None else opts.compression_method,
                opts._wbits(),
                8 if opts.mem_level is None else int(opts.mem_level),
                zlib.Z_DEFAULT_STRATEGY
                if opts.compression_strategy is None
                else int(opts.compression_strategy),
            )
        self._file: IO[bytes] | None = _open(self._path, "wb")

    def _handle(self) -> IO[bytes]:
        if self._file is None:
            raise ValueError(f"TFRecordWriter of {self._path} is closed")
        return self._file

    def write(self, record: bytes) -> None:
        """Writes one record (bytes; a str is encoded as UTF-8, as TF's ``as_bytes``)."""
        if isinstance(record, str):
            record = record.encode("utf-8")
        framed = encode_record(bytes(record))
        handle = self._handle()
        handle.write(self._compress.compress(framed) if self._compress else framed)

    def flush(self) -> None:
        """Flushes what was written to the file (a compressed file gets a zlib sync flush,
        so a reader sees every record written so far)."""
        handle = self._handle()
        if self._compress is not None:
            handle.write(self._compress.flush(zlib.Z_SYNC_FLUSH))
        handle.flush()

    def close(self) -> None:
        """Finishes the stream (the zlib trailer) and closes the file; a second call does
        nothing."""
        if self._file is None:
            return
        try:
            if self._compress is not None:
                self._file.write(self._compress.flush(zlib.Z_FINISH))
        finally:
            self._file.close()
            self._file = None

    def __enter__(self) -> TFRecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Stream:
    """The uncompressed bytes of a record file, read in chunks."""

    def __init__(self, handle: IO[bytes], wbits: int | None) -> None:
        self._handle = handle
        self._inflate = zlib.decompressobj(wbits) if wbits is not None else None
        self._buf = bytearray()
        self._eof = False

    def read(self, n: int, path: str, offset: int) -> bytes:
        """The next ``n`` bytes of the (decompressed) file; fewer only at its end. ``path``
        and ``offset`` name the record in a DataLossError for a corrupt compressed stream."""
        while len(self._buf) < n and not self._eof:
            chunk = self._handle.read(max(_READ_CHUNK, n - len(self._buf)))
            if self._inflate is None:
                if not chunk:
                    self._eof = True
                self._buf += chunk
                continue
            try:
                if chunk:
                    self._buf += self._inflate.decompress(chunk)
                    # a second gzip member after the first: TF's reader stops at the first
                else:
                    self._buf += self._inflate.flush()
                    self._eof = True
                    if not self._inflate.eof and len(self._buf) < n:
                        raise DataLossError(
                            None, None, f"truncated record at {offset} in file {path} (the "
                            f"compressed stream ends early)")
            except zlib.error as e:
                raise DataLossError(
                    None, None, f"corrupted compressed data near record at {offset} in {path}: {e}"
                ) from e
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out


class RecordReader:
    """The records of one TFRecord file with their offsets: the reader under
    ``tf_record_iterator`` and the queue readers (TF's ``TFRecordReader`` keys records
    ``"<file>:<offset>"``, the offset of the record's first byte in the uncompressed
    stream, as ``tensorflow/core/kernels/tf_record_reader_op.cc``).

    Args:
      path: the file.
      options: as :class:`TFRecordWriter`'s.

    Iterating yields ``(offset, record)`` pairs (int, bytes). Raises DataLossError naming
    the file and the offset for a bad CRC or a record cut short; NotFoundError for a
    missing file. Call :meth:`close` (or use ``with``) to release the file early.
    """

    def __init__(self, path: str, options: Any = None) -> None:
        opts = _as_options(options)
        self.path = str(path)
        self.offset = 0
        wbits = opts._wbits() if opts.compression_type else None
        self._file: IO[bytes] | None = _open(self.path, "rb")
        self._stream = _Stream(self._file, wbits)

    def read_record(self) -> tuple[int, bytes] | None:
        """The next ``(offset, record)``, or None at the end of the file."""
        if self._file is None:
            return None
        start = self.offset
        header = self._stream.read(_HEADER, self.path, start)
        if not header:
            return None
        if len(header) < _HEADER:
            raise self._loss("truncated", start)
        (length,) = struct.unpack("<Q", header[:8])
        (crc,) = struct.unpack("<I", header[8:])
        if crc != masked_crc32c(header[:8]):
            raise self._loss("corrupted", start)
        body = self._stream.read(length + _FOOTER, self.path, start)
        if len(body) < length + _FOOTER:
            raise self._loss("truncated", start)
        data = body[:length]
        (crc,) = struct.unpack("<I", body[length:])
        if crc != masked_crc32c(data):
            raise self._loss("corrupted", start)
        self.offset = start + _HEADER + length + _FOOTER
        return start, data

    def _loss(self, what: str, offset: int) -> DataLossError:
        return DataLossError(None, None, f"{what} record at {offset} in file {self.path}")

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        try:
            while True:
                item = self.read_record()
                if item is None:
                    return
                yield item
        finally:
            self.close()

    def close(self) -> None:
        """Closes the file; a second call does nothing."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> RecordReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def tf_record_iterator(path: str, options: Any = None) -> Iterator[bytes]:
    """Yields the records of a TFRecord file (bytes), as ``tf.python_io.tf_record_iterator``.

    Args:
      path: the file.
      options: a ``TFRecordOptions``, a ``TFRecordCompressionType`` or a compression string.

    Raises:
      DataLossError: a record with a bad CRC or cut short (the message names the file and
        the record's byte offset).
      NotFoundError: ``path`` does not exist.
      ValueError: a bad ``options``.
    """
    reader = RecordReader(path, options)
    for _, record in reader:
        yield record

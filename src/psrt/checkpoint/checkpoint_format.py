"""The psrt checkpoint file: one safetensors file with a CRC-32C per tensor.

A psrt checkpoint is ONE safetensors file (``model.ckpt-STEP``, no ``.index``/``.data``
pair) holding every variable, every optimizer slot (``"W/Adagrad"``, ``"W/Momentum"``,
``"W/Adam"``, ``"W/Adam_1"``) and any optimizer non-slot state (``"beta1_power"``) under
its TF name. Tensors are addressed by name, never by ps task, so a checkpoint written by
a cluster with 2 ps tasks restores into 1 or 3. The files open with the plain
``safetensors`` library. Their header metadata (safetensors allows str to str only) is:

* ``"format"``: ``"psrt-ckpt-1"``;
* ``"global_step"``: the step as a decimal string, when the Saver was given one;
* ``"crc32c"``: one JSON object mapping every tensor's name to the CRC-32C (Castagnoli
  polynomial; the plain value, not TF's masked one) of that tensor's data bytes exactly
  as the file stores them (dense C order, little-endian), as an unsigned 32-bit int, e.g.
  ``{"W":2020883037,"b":727758173}`` for ``W = np.arange(6, dtype=np.float32).reshape(2,
  3)`` and ``b = np.zeros(3, np.float32)``. docs/checkpoints.md describes the format.

Checksums copy TF's tensor bundle (``tensorflow/core/util/tensor_bundle/tensor_bundle.cc``),
whose index stores a crc32c per tensor that every read checks. Here too every read that
returns tensor values (``Saver.restore``, ``CheckpointReader.get_tensor``,
``load_variable``, :func:`read_checkpoint_file`) recomputes the checksum of each tensor
it reads, and a mismatch, a truncated file or a tensor whose bytes cannot be read is
:class:`psrt.errors.DataLossError` naming the file and the tensor; a mismatch also gives
both checksums, in TF's words ("Checksum does not match: stored X vs. calculated on the
restored bytes Y"). A ``"crc32c"`` table that does not parse, or whose names differ from
the file's tensors, is DataLossError as well. Files written before psrt stored checksums
(no ``"crc32c"`` key) are read as before, unverified. The checksums are computed by the
``crc32c`` package (hardware CRC32 instructions where the CPU has them).

Files are written atomically (:mod:`psrt.checkpoint.atomic_file`): a crash leaves the old
file or the whole new one, never a torn file.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Mapping

import crc32c as _crc32c
import numpy as np
import safetensors
import safetensors.numpy

from psrt.checkpoint import atomic_file
from psrt.framework import errors
from psrt.platform.progress import Progress

__all__ = [
    "CHECKSUMS_KEY",
    "FORMAT",
    "read_checkpoint_file",
    "write_checkpoint_file",
]

FORMAT = "psrt-ckpt-1"
"""Value of the ``"format"`` metadata key in every checkpoint psrt writes."""

CHECKSUMS_KEY = "crc32c"
"""Metadata key of the checksum table: a JSON object of tensor name to the CRC-32C of its
data bytes (unsigned 32-bit int). Absent from checkpoints written before psrt stored
checksums, which are read unverified."""

# safetensors' dtype tags and the numpy dtypes psrt writes and reads (safetensors also
# knows bfloat16 and float8 types, which numpy cannot hold).
_SAFETENSORS_DTYPES = {
    "BOOL": np.dtype(np.bool_),
    "U8": np.dtype(np.uint8),
    "I8": np.dtype(np.int8),
    "U16": np.dtype(np.uint16),
    "I16": np.dtype(np.int16),
    "U32": np.dtype(np.uint32),
    "I32": np.dtype(np.int32),
    "U64": np.dtype(np.uint64),
    "I64": np.dtype(np.int64),
    "F16": np.dtype(np.float16),
    "F32": np.dtype(np.float32),
    "F64": np.dtype(np.float64),
    "C64": np.dtype(np.complex64),
}
_SUPPORTED_DTYPES = frozenset(_SAFETENSORS_DTYPES.values())
# Bytes per write, and per read of a large tensor, between two progress updates.
_CHUNK_BYTES = 16 << 20
_SUPPORTED_DTYPE_NAMES = ", ".join(sorted(d.name for d in _SUPPORTED_DTYPES))


def _shape_str(shape) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _names_preview(names, limit=20) -> str:
    names = sorted(names)
    head = ", ".join(repr(n) for n in names[:limit])
    if len(names) > limit:
        head += ", ... (%d more)" % (len(names) - limit)
    return "[" + head + "]"


def _normalize_tensor(name, value) -> np.ndarray:
    if not isinstance(name, str) or not name:
        raise TypeError("Checkpoint tensor names must be non-empty str; got %r" % (name,))
    if name == "__metadata__":
        raise ValueError("'__metadata__' is reserved by safetensors and cannot name a tensor")
    arr = np.asarray(value)
    if arr.dtype.newbyteorder("=") not in _SUPPORTED_DTYPES:
        raise TypeError("dtype %s not supported for checkpoint tensor %r; expected one of: %s"
                        % (arr.dtype, name, _SUPPORTED_DTYPE_NAMES))
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    # safetensors.numpy reads raw memory from data pointer and nbytes: it must be dense.
    # (Not np.ascontiguousarray, which turns a 0-d scalar into shape (1,).)
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")
    return arr


# --------------------------------------------------------------------------------------
# Per-tensor checksums (TF's tensor bundle stores a crc32c per tensor, checked on read).

_UINT32_LIMIT = 1 << 32


def _tensor_crc32c(arr: np.ndarray) -> int:
    """CRC-32C of the bytes safetensors stores for ``arr``: dense C order, little-endian."""
    if arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and sys.byteorder == "big"):
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")
    # A uint8 view of the same memory, so nothing is copied; crc32c releases the GIL for
    # buffers of 32 KiB and more.
    return int(_crc32c.crc32c(arr.reshape(-1).view(np.uint8)))


def _encode_checksums(arrays: Mapping) -> str:
    return json.dumps({name: _tensor_crc32c(arr) for name, arr in arrays.items()},
                      sort_keys=True, separators=(",", ":"))


def _decode_checksums(metadata: Mapping, path: str, names) -> dict[str, int] | None:
    """The checksum table of a file's header metadata, checked against its tensor names;
    None for a file written without one.

    Raises:
        psrt.errors.DataLossError: The table does not parse, holds something other than
            unsigned 32-bit ints, or its names differ from the file's tensors.
    """
    raw = metadata.get(CHECKSUMS_KEY)
    if raw is None:
        return None
    try:
        table = json.loads(raw)
    except ValueError as e:
        raise errors.DataLossError(
            None, None, "Checkpoint %r: its checksum table (header metadata %r) is not valid "
            "JSON: %s" % (path, CHECKSUMS_KEY, e)) from e
    if not isinstance(table, dict) or not all(
            type(v) is int and 0 <= v < _UINT32_LIMIT for v in table.values()):
        raise errors.DataLossError(
            None, None, "Checkpoint %r: its checksum table (header metadata %r) is not a JSON "
            "object of tensor name to unsigned 32-bit int: %.200s" % (path, CHECKSUMS_KEY, raw))
    names = set(names)
    unchecked = names.difference(table)
    unknown = set(table).difference(names)
    if unchecked or unknown:
        raise errors.DataLossError(
            None, None, "Checkpoint %r: its checksum table (header metadata %r) does not match "
            "its tensors: no checksum for %s; checksums of tensors not in the file: %s"
            % (path, CHECKSUMS_KEY, _names_preview(unchecked), _names_preview(unknown)))
    return table


def _verify_tensor(path: str, name: str, value: np.ndarray, stored: int) -> None:
    computed = _tensor_crc32c(value)
    if computed != stored:
        raise errors.DataLossError(
            None, None, "Checkpoint %r, tensor %r (%s %s, %d bytes): Checksum does not match: "
            "stored %d vs. calculated on the restored bytes %d"
            % (path, name, value.dtype.name, _shape_str(value.shape), value.nbytes, stored,
               computed))


def write_checkpoint_file(path, tensors, metadata=None,
                          progress: Progress | None = None) -> None:
    """Writes one safetensors checkpoint file atomically, with a checksum per tensor.

    The header metadata gets the CRC-32C of each tensor's data bytes (the ``"crc32c"``
    key; the module docstring gives the format), which every read checks, as TF's tensor
    bundle does. The file is written under a temporary name in the same directory,
    flushed, fsynced and renamed over ``path``, then the directory is fsynced. A crash at
    any point leaves either the old ``path`` (or none) or the complete new one, never a
    torn file.

    Args:
        path: Final file path (str or os.PathLike). Its directory must exist.
        tensors: Mapping of tensor name (non-empty str) to array-like. Arrays may have any
            shape, including 0-d scalars; dtype must be one of bool, int8..int64,
            uint8..uint64, float16, float32, float64, complex64. Non-contiguous or
            big-endian arrays are copied to the dense little-endian layout safetensors
            stores.
        metadata: Optional mapping of str to str stored in the safetensors header.
            ``"format": "psrt-ckpt-1"`` is added unless given. The ``"crc32c"`` entry is
            always the checksum table of the tensors written (see the module docstring);
            one given here (e.g. copied from another file's metadata) is replaced.
        progress: Told the file's size and each 16 MB written
            (:class:`psrt.platform.progress.Progress`); None: no report.

    Raises:
        TypeError: A name, value dtype or metadata entry has the wrong type.
        ValueError: A tensor is named ``"__metadata__"`` (reserved by safetensors).
        psrt.errors.NotFoundError: The directory of ``path`` does not exist.
        psrt.errors.PermissionDeniedError: The directory is not writable.
        psrt.errors.ResourceExhaustedError: The disk is full.
    """
    path = os.fspath(path)
    if not isinstance(tensors, Mapping):
        raise TypeError("tensors must be a mapping of name to numpy array; got %s"
                        % type(tensors).__name__)
    arrays = {name: _normalize_tensor(name, value) for name, value in tensors.items()}
    meta = {"format": FORMAT}
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            raise TypeError("metadata must be a mapping of str to str; got %s"
                            % type(metadata).__name__)
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError("metadata must map str to str; got %r: %r" % (k, v))
        meta.update(metadata)
    meta[CHECKSUMS_KEY] = _encode_checksums(arrays)

    # safetensors.numpy.save_file is not used: it renames its own ".tmpXXXXXX" file into
    # place, which a crash would leave behind under a name psrt cannot recognise.
    data = safetensors.numpy.save(arrays, metadata=meta)

    def write(f):
        if progress is None:
            f.write(data)
        else:
            progress.begin(len(data))
            view = memoryview(data)
            for start in range(0, len(data), _CHUNK_BYTES):
                f.write(view[start:start + _CHUNK_BYTES])
                progress.add(min(_CHUNK_BYTES, len(data) - start))

    atomic_file._atomic_write(path, write)


# safetensors refuses headers larger than this; so does the diagnosis of a torn file.
_MAX_HEADER_BYTES = 100_000_000


def _describe_torn_file(path: str) -> str:
    """Why a file whose header parses is no whole safetensors file: the tensors whose data
    a truncated file cuts off, or the bytes after the last tensor. "" when the header
    itself cannot be read (then safetensors' own message says why)."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            length = int.from_bytes(fh.read(8), "little")
            if size < 8 or length > min(size - 8, _MAX_HEADER_BYTES):
                return ""
            header = json.loads(fh.read(length))
    except (OSError, ValueError):
        return ""
    if not isinstance(header, dict):
        return ""
    spans = []
    for name, entry in header.items():
        if name == "__metadata__" or not isinstance(entry, dict):
            continue
        offsets = entry.get("data_offsets")
        if (isinstance(offsets, list) and len(offsets) == 2
                and all(type(o) is int for o in offsets)):
            spans.append((offsets[0], offsets[1], name))
    data = size - 8 - length
    end = max((e for _, e, _ in spans), default=0)
    if data < end:
        cut = sorted(t for t in spans if t[1] > data)
        start, stop, first = cut[0]
        return ("the file is truncated: %d of its %d data bytes are present, so tensor %r "
                "(data bytes %d to %d)%s cannot be read"
                % (data, end, first, start, stop,
                   "" if len(cut) == 1 else " and %d more, %s," % (
                       len(cut) - 1, _names_preview(n for _, _, n in cut[1:]))))
    if data > end:
        return "%d unexpected bytes follow the last tensor's data" % (data - end)
    return ""


def _open_checkpoint(path: str):
    """Opens a safetensors file, mapping failures to TF's reader errors."""
    try:
        return safetensors.safe_open(path, framework="np")
    except FileNotFoundError as e:
        raise errors.NotFoundError(
            None, None, "Unsuccessful checkpoint read: failed to find any matching files for "
            "%r: %s" % (path, e.strerror or e)) from e
    except OSError as e:
        raise atomic_file._os_error(e, "Opening checkpoint", path) from e
    except safetensors.SafetensorError as e:
        why = _describe_torn_file(path)
        raise errors.DataLossError(
            None, None, "Checkpoint %r is not a valid safetensors file: %s%s"
            % (path, why + "; " if why else "", e)) from e


def _get_tensor(f, name: str, progress: Progress | None) -> np.ndarray:
    """One tensor of an open file; a large one read in pieces of about 16 MB of rows, each
    reported to ``progress``."""
    if progress is None:
        return f.get_tensor(name)
    piece = f.get_slice(name)
    shape = [int(d) for d in piece.get_shape()]
    dtype = _SAFETENSORS_DTYPES.get(piece.get_dtype())
    nbytes = math.prod(shape) * (dtype.itemsize if dtype is not None else 0)
    if dtype is None or not shape or nbytes <= _CHUNK_BYTES or shape[0] < 2:
        value = f.get_tensor(name)
        progress.add(value.nbytes)
        return value
    rows = max(1, _CHUNK_BYTES // (nbytes // shape[0]))
    value = np.empty(shape, dtype)
    for start in range(0, shape[0], rows):
        part = piece[start:start + rows]
        value[start:start + len(part)] = part
        progress.add(part.nbytes)
    return value


def _read_tensors(path: str, names=None,
                  progress: Progress | None = None) -> dict[str, np.ndarray]:
    """Reads tensors (all of them, in name order, for ``names`` None) and checks each one's
    checksum when the file has a checksum table; ``progress`` is told their total size and
    each piece read.

    Raises:
        psrt.errors.NotFoundError: ``path`` does not exist.
        psrt.errors.DataLossError: Not a whole safetensors file, a bad checksum table, a
            tensor that cannot be read, or a checksum mismatch (file and tensor named).
    """
    with _open_checkpoint(path) as f:
        present = list(f.keys())
        # The table is read from the same open as the data, so a file replaced since a
        # CheckpointReader read its header is checked against its own checksums.
        table = _decode_checksums(f.metadata() or {}, path, present)
        out = {}
        wanted = sorted(present) if names is None else list(names)
        if progress is not None:
            progress.begin(_header_bytes(path, wanted))
        for name in wanted:
            try:
                value = _get_tensor(f, name, progress)
            except safetensors.SafetensorError as e:
                raise errors.DataLossError(
                    None, None, "Checkpoint %r: tensor %r could not be read: %s"
                    % (path, name, e)) from e
            if table is not None:
                _verify_tensor(path, name, value, table[name])
            out[name] = value
        return out


def _header_bytes(path: str, names) -> int | None:
    """The data bytes of ``names`` from the file's header, or None when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            length = int.from_bytes(fh.read(8), "little")
            if length > _MAX_HEADER_BYTES:
                return None
            header = json.loads(fh.read(length))
        return sum(header[n]["data_offsets"][1] - header[n]["data_offsets"][0] for n in names)
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def read_checkpoint_file(path) -> dict[str, np.ndarray]:
    """Reads every tensor of a safetensors checkpoint file, checking their checksums.

    Args:
        path: The checkpoint file (str or os.PathLike), e.g. ``"/train/model.ckpt-150"``.

    Returns:
        A dict of tensor name to a new, writable numpy array, in name order.

    Raises:
        psrt.errors.NotFoundError: ``path`` does not exist.
        psrt.errors.DataLossError: ``path`` is not a whole safetensors file (a truncated
            one names the tensors cut off), a tensor cannot be read, or a tensor's bytes
            do not match its stored CRC-32C (file, tensor and both checksums named), as
            TF's tensor bundle reader.
    """
    return _read_tensors(os.fspath(path))

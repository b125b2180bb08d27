"""Reading checkpoints: ``CheckpointReader``, ``load_checkpoint``, ``load_variable``,
``list_variables``.

Copies TF 1.x's ``CheckpointReader`` (``tensorflow/python/pywrap_tensorflow``'s
``NewCheckpointReader``) and ``tensorflow/python/training/checkpoint_utils.py`` over psrt's
one-file safetensors checkpoints (:mod:`psrt.checkpoint.checkpoint_format`). Every tensor
read is checked against the CRC-32C the file stores for it; a directory argument means
the latest checkpoint its ``checkpoint`` state file names
(:func:`psrt.checkpoint.checkpoint_management.latest_checkpoint`).
"""

from __future__ import annotations

import os
import weakref

import numpy as np

from psrt.checkpoint.checkpoint_format import (
    _SAFETENSORS_DTYPES,
    _decode_checksums,
    _open_checkpoint,
    _read_tensors,
)
from psrt.checkpoint.checkpoint_management import latest_checkpoint
from psrt.framework import errors
from psrt.framework import file_io

__all__ = [
    "CheckpointReader",
    "list_variables",
    "load_checkpoint",
    "load_variable",
]


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


class CheckpointReader:
    """Reads tensors from one checkpoint file, as TF's ``CheckpointReader``.

    The header (names, shapes, dtypes, checksum table) is read once on construction; each
    :meth:`get_tensor` reads that tensor's bytes from the file and checks them against
    the CRC-32C stored for it, as TF's tensor bundle reader does (files written without
    checksums are read unverified).

    Args:
        path: The checkpoint file (str or os.PathLike).

    Raises:
        psrt.errors.NotFoundError: ``path`` does not exist.
        psrt.errors.DataLossError: ``path`` is not a whole safetensors file (a truncated
            one names the tensors cut off), or its checksum table does not parse or does
            not name exactly its tensors.
        psrt.errors.UnimplementedError: A tensor has a dtype numpy cannot hold.
    """

    def __init__(self, path) -> None:
        self._path = os.fspath(path)
        # A URL (s3://...) is read from a local copy (safetensors maps a local file),
        # downloaded once and removed with the reader.
        self._file = self._path
        if file_io.is_url(self._path):
            self._file = file_io.local_copy(self._path)
            weakref.finalize(self, _remove_quietly, self._file)
        with _open_checkpoint(self._file) as f:
            self._metadata = dict(f.metadata() or {})
            _decode_checksums(self._metadata, self._path, f.keys())
            self._shapes = {}
            self._dtypes = {}
            for name in f.keys():
                s = f.get_slice(name)
                tag = s.get_dtype()
                if tag not in _SAFETENSORS_DTYPES:
                    raise errors.UnimplementedError(
                        None, None, "Tensor %r in checkpoint %r has dtype %s, which numpy "
                        "cannot hold; supported: %s" % (name, self._path, tag,
                                                        ", ".join(_SAFETENSORS_DTYPES)))
                self._shapes[name] = [int(d) for d in s.get_shape()]
                self._dtypes[name] = _SAFETENSORS_DTYPES[tag]

    @property
    def path(self) -> str:
        """The checkpoint file this reader reads (str)."""
        return self._path

    @property
    def metadata(self) -> dict[str, str]:
        """The safetensors header metadata, e.g. ``{"format": "psrt-ckpt-1",
        "global_step": "150", "crc32c": "{...}"}`` (dict of str to str; a copy)."""
        return dict(self._metadata)

    def has_tensor(self, name: str) -> bool:
        """Whether the checkpoint holds a tensor named ``name``."""
        return name in self._shapes

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        """Tensor name to shape (list of int; ``[]`` for a scalar)."""
        return {n: list(s) for n, s in self._shapes.items()}

    def get_variable_to_dtype_map(self) -> dict[str, np.dtype]:
        """Tensor name to numpy dtype (TF returns a ``tf.DType``)."""
        return dict(self._dtypes)

    def get_tensor(self, name: str) -> np.ndarray:
        """Reads one tensor.

        Args:
            name: Tensor name, e.g. ``"W"`` or ``"W/Adam"``.

        Returns:
            A new, writable numpy array with the stored shape and dtype.

        Raises:
            psrt.errors.NotFoundError: No tensor ``name`` ("Key W not found in
                checkpoint", TF's message), or the file has since been deleted.
            psrt.errors.DataLossError: The tensor's bytes do not match the CRC-32C stored
                for them ("Checksum does not match: stored X vs. calculated on the
                restored bytes Y", with the file and tensor, as TF), they cannot be read,
                or the file is no longer a whole safetensors file.
        """
        return self._get_tensors([name])[name]

    def _get_tensors(self, names, progress=None) -> dict[str, np.ndarray]:
        """Reads and checks ``names`` in one open of the file: all of them or an error;
        ``progress`` (a :class:`psrt.platform.progress.Progress`) follows the read."""
        for name in names:
            if name not in self._shapes:
                raise errors.NotFoundError(
                    None, None, "Key %s not found in checkpoint %s" % (name, self._path))
        return _read_tensors(self._file, names, progress)

    def debug_string(self) -> bytes:
        """One ``name (dtype) [shape]`` line per tensor, in name order (bytes, as TF)."""
        return "".join("%s (%s) %s\n" % (n, self._dtypes[n].name, self._shapes[n])
                       for n in sorted(self._shapes)).encode("utf-8")

    def __repr__(self) -> str:
        return "CheckpointReader(%r, %d tensors)" % (self._path, len(self._shapes))


def _get_checkpoint_filename_for(ckpt_dir_or_file) -> str | None:
    ckpt_dir_or_file = os.fspath(ckpt_dir_or_file)
    if file_io.IsDirectory(ckpt_dir_or_file):
        return latest_checkpoint(ckpt_dir_or_file)
    return ckpt_dir_or_file


def load_checkpoint(ckpt_dir_or_file) -> CheckpointReader:
    """Returns a reader for a checkpoint, as ``tf.train.load_checkpoint``.

    Args:
        ckpt_dir_or_file: A checkpoint file, or a directory whose ``checkpoint`` state
            file names the latest one.

    Returns:
        A :class:`CheckpointReader`, which checks each tensor's checksum as it reads it.
        For a directory, the latest checkpoint as TF: no fallback to an older one (that
        is :meth:`Saver.restore`'s).

    Raises:
        ValueError: A directory with no state file, or whose latest checkpoint is gone.
        psrt.errors.NotFoundError: ``ckpt_dir_or_file`` is neither a directory nor a file.
        psrt.errors.DataLossError: The file is not a whole safetensors file, or its
            checksum table is corrupt.
    """
    filename = _get_checkpoint_filename_for(ckpt_dir_or_file)
    if filename is None:
        raise ValueError("Couldn't find 'checkpoint' file or checkpoints in given directory %s"
                         % os.fspath(ckpt_dir_or_file))
    return CheckpointReader(filename)


def load_variable(ckpt_dir_or_file, name: str) -> np.ndarray:
    """Reads one tensor from a checkpoint, as ``tf.train.load_variable``.

    Args:
        ckpt_dir_or_file: A checkpoint file or a directory (see :func:`load_checkpoint`).
        name: Tensor name; a TF-style ``":0"`` suffix is dropped.

    Returns:
        A numpy array with the stored shape and dtype.

    Raises:
        psrt.errors.NotFoundError: No such tensor or file.
        psrt.errors.DataLossError: The tensor's bytes do not match their stored CRC-32C,
            or the file is not a whole checkpoint (see :meth:`CheckpointReader.get_tensor`).
        ValueError: A directory without checkpoints.
    """
    if name.endswith(":0"):
        name = name[:-2]
    return load_checkpoint(ckpt_dir_or_file).get_tensor(name)


def list_variables(ckpt_dir_or_file) -> list[tuple[str, list[int]]]:
    """Lists the tensors of a checkpoint, as ``tf.train.list_variables``.

    Args:
        ckpt_dir_or_file: A checkpoint file or a directory (see :func:`load_checkpoint`).

    Returns:
        ``[(name, shape), ...]`` sorted by name; shape is a list of int.

    Raises:
        psrt.errors.DataLossError: The file is not a whole safetensors file, or its
            checksum table is corrupt (tensor data is not read, so not checked).
    """
    shapes = load_checkpoint(ckpt_dir_or_file).get_variable_to_shape_map()
    return [(name, shapes[name]) for name in sorted(shapes)]

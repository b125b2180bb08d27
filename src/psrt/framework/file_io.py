"""``tf.gfile``: TF 1.x's file functions (``tensorflow/python/lib/io/file_io.py`` and
``tensorflow/python/platform/gfile.py``, r1.15) over local paths and any fsspec URL.

A path with a ``scheme://`` (``s3://bucket/key``, ``gs://``, ``memory://``, ``file://``, ...)
goes through fsspec's file system for that scheme (``s3://`` needs the ``s3fs`` package at
run time, as TF needed its S3 file system); any other path is a local one and goes through
``os``, ``shutil`` and ``glob`` directly, so relative paths stay relative (``Glob("d/*.txt")``
returns ``"d/a.txt"``, as TF).

Errors are TF's: a missing path is :class:`NotFoundError` (``"<path>; No such file or
directory"``), an existing target of ``Rename``/``Copy`` without ``overwrite=True`` or of
``MkDir`` is :class:`AlreadyExistsError`, a denied path :class:`PermissionDeniedError`, a bad
mode :class:`InvalidArgumentError`, other I/O errors :class:`UnknownError`. The module is in
framework/ because it raises framework's errors.

``GFile`` opens its file on first use (a read, a write, ``seek``, ...), as TF's ``FileIO``
does: ``GFile(path, "w")`` closed without a write creates no file, and a missing file
raises ``NotFoundError`` at the first read. In text modes (no ``b``) reads return ``str``
decoded from UTF-8 per call and writes take ``str`` (or bytes); ``tell``/``seek`` count bytes.
"""

from __future__ import annotations

import errno
import glob as _glob
import os
import shutil
import stat as _stat
from collections.abc import Iterator
from typing import IO, Any

from psrt.framework.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    OpError,
    PermissionDeniedError,
    UnimplementedError,
    UnknownError,
)

__all__ = [
    "Copy",
    "DeleteRecursively",
    "Exists",
    "FastGFile",
    "FileStatistics",
    "GFile",
    "Glob",
    "IsDirectory",
    "ListDirectory",
    "MakeDirs",
    "MkDir",
    "Open",
    "Remove",
    "Rename",
    "Stat",
    "Walk",
    "copy",
    "exists",
    "glob",
    "is_url",
    "isdir",
    "join",
    "listdir",
    "local_copy",
    "makedirs",
    "mkdir",
    "open_binary",
    "remove",
    "rename",
    "rmtree",
    "stat",
    "walk",
]

_MODES = ("r", "w", "a", "rb", "wb", "ab", "r+", "w+", "a+", "rb+", "wb+", "ab+",
          "r+b", "w+b", "a+b")


def is_url(path: str) -> bool:
    """True when ``path`` has a ``scheme://`` prefix (it then goes through fsspec)."""
    scheme, sep, _ = path.partition("://")
    return bool(sep) and scheme.replace("+", "").replace("-", "").replace(".", "").isalnum()


def local_copy(path: str, directory: str | None = None) -> str:
    """Downloads the file ``path`` (a URL) to a new local temporary file, in ``directory``
    (default: the system's), and returns its path; the caller removes it.

    Raises:
        NotFoundError: ``path`` does not exist.
    """
    import tempfile

    base = path.rstrip("/").rpartition("/")[2] or "file"
    fd, local = tempfile.mkstemp(prefix=f"psrt-{base}-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as dst, open_binary(path, "rb") as src:
            shutil.copyfileobj(src, dst, 1 << 20)
    except BaseException:
        os.remove(local)
        raise
    return local


def _fs(path: str) -> tuple[Any, str]:
    """(fsspec file system, path within it) of a URL."""
    import fsspec  # type: ignore[import-untyped]  # third-party, on the first URL only

    try:
        fs, inner = fsspec.core.url_to_fs(path)
        return fs, str(inner)
    except (ImportError, ValueError) as e:
        scheme = path.partition("://")[0]
        raise UnimplementedError(
            None, None, f"{path}: no file system for scheme {scheme!r} ({e}); install the "
            f"fsspec implementation for it (s3:// needs s3fs, gs:// gcsfs)") from e


def _path_str(path: Any) -> str:
    if isinstance(path, bytes):
        return path.decode("utf-8")
    if isinstance(path, os.PathLike):
        return str(os.fspath(path))
    if not isinstance(path, str):
        raise InvalidArgumentError(None, None, f"a path must be str, bytes or os.PathLike, "
                                   f"got {type(path).__name__}: {path!r}")
    return path


def _error(exc: BaseException, path: str) -> OpError:
    """The TF error of an OSError (or fsspec's) on ``path``."""
    if isinstance(exc, OpError):
        return exc
    if isinstance(exc, FileNotFoundError) or getattr(exc, "errno", None) == errno.ENOENT:
        return NotFoundError(None, None, f"{path}; No such file or directory")
    if isinstance(exc, FileExistsError) or getattr(exc, "errno", None) == errno.EEXIST:
        return AlreadyExistsError(None, None, f"{path}; File exists")
    if isinstance(exc, PermissionError):
        return PermissionDeniedError(None, None, f"{path}; Permission denied")
    if isinstance(exc, (IsADirectoryError, NotADirectoryError)):
        return FailedPreconditionError(None, None, f"{path}; {exc.strerror or exc}")
    return UnknownError(None, None, f"{path}; {exc}")


def open_binary(path: str, mode: str) -> IO[bytes]:
    """Opens ``path`` (local or URL) in binary ``mode`` ("rb", "wb", "ab") now and returns
    the file object; the caller closes it. Errors as the module docstring says."""
    path = _path_str(path)
    try:
        if is_url(path):
            fs, p = _fs(path)
            if "r" in mode and not fs.exists(p):
                raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
            return fs.open(p, mode)  # type: ignore[no-any-return]
        return open(path, mode)  # noqa: SIM115 (the caller owns the handle)
    except Exception as e:
        raise _error(e, path) from e


class GFile:
    """``tf.gfile.GFile`` (also ``Open``, ``FastGFile``): a file on any file system.

    Args:
        name: The path: local, or any fsspec URL.
        mode: One of "r", "w", "a", "rb", "wb", "ab", or those with "+".

    Raises:
        InvalidArgumentError: a mode outside that list.
        NotFoundError: (on first use) a file opened for reading does not exist.
        PermissionDeniedError: a read on a file opened for writing, or the reverse (TF's
            "File isn't open for reading/writing").
    """

    def __init__(self, name: Any, mode: str = "r") -> None:
        self._name = _path_str(name)
        if mode not in _MODES:
            raise InvalidArgumentError(None, None, f"GFile({self._name!r}, mode={mode!r}): "
                                       f"mode must be one of {', '.join(_MODES)}")
        self._mode = mode
        self._binary = "b" in mode
        self._readable = "r" in mode or "+" in mode
        self._writable = "r" not in mode or "+" in mode
        self._file: IO[bytes] | None = None

    @property
    def name(self) -> str:
        """The path the file was opened with."""
        return self._name

    @property
    def mode(self) -> str:
        """The mode the file was opened with."""
        return self._mode

    def _handle(self) -> IO[bytes]:
        if self._file is None:
            raw = self._mode.replace("b", "").replace("+", "")
            binary = raw + "b" + ("+" if "+" in self._mode else "")
            self._file = open_binary(self._name, binary)
        return self._file

    def _check(self, reading: bool) -> IO[bytes]:
        if reading and not self._readable:
            raise PermissionDeniedError(None, None, f"{self._name}: File isn't open for "
                                        f"reading (mode {self._mode!r})")
        if not reading and not self._writable:
            raise PermissionDeniedError(None, None, f"{self._name}: File isn't open for "
                                        f"writing (mode {self._mode!r})")
        return self._handle()

    def _value(self, data: bytes) -> Any:
        return data if self._binary else data.decode("utf-8")

    def size(self) -> int:
        """The file's length in bytes (TF's ``FileIO.size``)."""
        if self._file is not None and self._writable:
            self._file.flush()
        return Stat(self._name).length

    def write(self, file_content: Any) -> None:
        """Writes ``file_content`` (str, encoded as UTF-8, or bytes)."""
        f = self._check(reading=False)
        data = file_content.encode("utf-8") if isinstance(file_content, str) else file_content
        try:
            f.write(bytes(data))
        except OSError as e:
            raise _error(e, self._name) from e

    def read(self, n: int = -1) -> Any:
        """Reads ``n`` bytes (all of the rest when ``n`` is -1): bytes in binary mode, str
        otherwise."""
        f = self._check(reading=True)
        return self._value(f.read() if n is None or n < 0 else f.read(n))

    def readline(self) -> Any:
        """The next line, with its newline; empty at the end."""
        return self._value(self._check(reading=True).readline())

    def readlines(self) -> list[Any]:
        """All the remaining lines."""
        return [self._value(line) for line in self._check(reading=True).readlines()]

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    next = __next__

    def seek(self, offset: int | None = None, whence: int = 0,
             position: int | None = None) -> int:
        """Moves to byte ``offset`` from ``whence`` (0 start, 1 here, 2 end); TF's old
        ``position=`` keyword is ``offset``.

        Raises:
            InvalidArgumentError: both or neither of ``offset`` and ``position``.
        """
        if (offset is None) == (position is None):
            raise InvalidArgumentError(None, None, "seek() needs exactly one of offset and "
                                       f"position, got offset={offset!r}, position={position!r}")
        target = offset if offset is not None else position
        assert target is not None
        return self._handle().seek(target, whence)

    def tell(self) -> int:
        """The current byte offset."""
        return self._handle().tell()

    def seekable(self) -> bool:
        """True (TF's files can always seek)."""
        return True

    def flush(self) -> None:
        """Flushes what was written to the file system."""
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        """Flushes and closes the file; a later use opens it again."""
        if self._file is not None:
            f, self._file = self._file, None
            try:
                f.close()
            except OSError as e:
                raise _error(e, self._name) from e

    def __del__(self) -> None:
        # As TF's FileIO, whose C++ file closes when the object goes: a GFile read without
        # a ``with`` (``GFile(p).read()``) leaks no handle.
        f = self.__dict__.get("_file")
        if f is not None:
            try:
                f.close()
            except Exception:  # noqa: BLE001,S110 (nothing to tell at collection)
                pass

    def __enter__(self) -> GFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


Open = GFile
FastGFile = GFile


class FileStatistics:
    """What ``Stat`` returns (TF's ``FileStatistics``): ``length`` (bytes), ``mtime_nsec``
    (modification time, nanoseconds since the epoch; 0 where the file system has none) and
    ``is_directory``."""

    def __init__(self, length: int = 0, mtime_nsec: int = 0, is_directory: bool = False):
        self.length = int(length)
        self.mtime_nsec = int(mtime_nsec)
        self.is_directory = bool(is_directory)

    def __repr__(self) -> str:
        return (f"FileStatistics(length={self.length}, mtime_nsec={self.mtime_nsec}, "
                f"is_directory={self.is_directory})")


def join(path: str, *paths: str) -> str:
    """Joins path parts with "/" for URLs, ``os.path.join`` for local paths."""
    path = _path_str(path)
    if is_url(path):
        out = path
        for p in paths:
            out = p if is_url(p) else out.rstrip("/") + "/" + p.lstrip("/")
        return out
    return os.path.join(path, *paths)


def Exists(filename: Any) -> bool:  # noqa: N802 (TF's name)
    """True when ``filename`` (a file or a directory) exists."""
    path = _path_str(filename)
    try:
        if is_url(path):
            fs, p = _fs(path)
            return bool(fs.exists(p))
        return os.path.exists(path)
    except Exception as e:
        raise _error(e, path) from e


def IsDirectory(dirname: Any) -> bool:  # noqa: N802 (TF's name)
    """True when ``dirname`` is a directory (on object stores: a prefix with objects)."""
    path = _path_str(dirname)
    try:
        if is_url(path):
            fs, p = _fs(path)
            return bool(fs.isdir(p))
        return os.path.isdir(path)
    except Exception as e:
        raise _error(e, path) from e


def MakeDirs(dirname: Any) -> None:  # noqa: N802 (TF's name)
    """Creates ``dirname`` and its missing parents; an existing directory is fine.

    Raises:
        FailedPreconditionError: a part of the path is a file.
    """
    path = _path_str(dirname)
    try:
        if is_url(path):
            fs, p = _fs(path)
            fs.makedirs(p, exist_ok=True)
        else:
            os.makedirs(path, exist_ok=True)
    except FileExistsError as e:
        raise FailedPreconditionError(None, None, f"{path}; Not a directory") from e
    except Exception as e:
        raise _error(e, path) from e


def MkDir(dirname: Any) -> None:  # noqa: N802 (TF's name)
    """Creates the directory ``dirname``; its parent must exist.

    Raises:
        AlreadyExistsError: ``dirname`` exists.
        NotFoundError: its parent does not exist (local paths).
    """
    path = _path_str(dirname)
    try:
        if is_url(path):
            fs, p = _fs(path)
            if fs.exists(p):
                raise FileExistsError(errno.EEXIST, "File exists", path)
            fs.mkdir(p, create_parents=False)
        else:
            os.mkdir(path)
    except Exception as e:
        raise _error(e, path) from e


def Remove(filename: Any) -> None:  # noqa: N802 (TF's name)
    """Deletes the file ``filename``.

    Raises:
        NotFoundError: it does not exist.
    """
    path = _path_str(filename)
    try:
        if is_url(path):
            fs, p = _fs(path)
            if not fs.exists(p):
                raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
            fs.rm_file(p)
        else:
            os.remove(path)
    except Exception as e:
        raise _error(e, path) from e


def DeleteRecursively(dirname: Any) -> None:  # noqa: N802 (TF's name)
    """Deletes ``dirname`` and everything under it (a file: just it).

    Raises:
        NotFoundError: it does not exist.
    """
    path = _path_str(dirname)
    try:
        if is_url(path):
            fs, p = _fs(path)
            if not fs.exists(p):
                raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
            fs.rm(p, recursive=True)
        elif os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
    except Exception as e:
        raise _error(e, path) from e


def ListDirectory(dirname: Any) -> list[str]:  # noqa: N802 (TF's name)
    """The names (not paths) of the entries of ``dirname``, without "." and "..", in no
    promised order.

    Raises:
        NotFoundError: ``dirname`` is not a directory (TF's "Could not find directory").
    """
    path = _path_str(dirname)
    if not IsDirectory(path):
        raise NotFoundError(None, None, f"Could not find directory {path}")
    try:
        if is_url(path):
            fs, p = _fs(path)
            base = p.rstrip("/")
            names = [e.rstrip("/").rpartition("/")[2] for e in fs.ls(p, detail=False)
                     if e.rstrip("/") != base]
            return names
        return os.listdir(path)
    except Exception as e:
        raise _error(e, path) from e


def Glob(filename: Any) -> list[str]:  # noqa: N802 (TF's name)
    """The paths matching the pattern ``filename`` (``*``, ``?``, ``[...]``), in the form of
    the pattern (a URL pattern gives URLs); an empty list when none match."""
    path = _path_str(filename)
    try:
        if is_url(path):
            fs, p = _fs(path)
            scheme = path.partition("://")[0]
            return sorted(f"{scheme}://{m.lstrip('/')}" if scheme != "file" else f"file://{m}"
                          for m in fs.glob(p))
        return sorted(_glob.glob(path))
    except Exception as e:
        raise _error(e, path) from e


def _exists_guard(path: str, overwrite: bool, what: str) -> None:
    if not overwrite and Exists(path):
        raise AlreadyExistsError(None, None, f"{what}: {path}; File already exists (pass "
                                 "overwrite=True to replace it)")


def Rename(oldname: Any, newname: Any, overwrite: bool = False) -> None:  # noqa: N802
    """Renames (moves) the file ``oldname`` to ``newname``.

    Raises:
        NotFoundError: ``oldname`` does not exist.
        AlreadyExistsError: ``newname`` exists and ``overwrite`` is False.
    """
    old, new = _path_str(oldname), _path_str(newname)
    _exists_guard(new, overwrite, f"Rename({old!r})")
    try:
        if is_url(old) or is_url(new):
            if not Exists(old):
                raise FileNotFoundError(errno.ENOENT, "No such file or directory", old)
            fs_old, p_old = _fs(old) if is_url(old) else (None, old)
            fs_new, p_new = _fs(new) if is_url(new) else (None, new)
            if fs_old is not None and fs_new is not None and type(fs_old) is type(fs_new):
                fs_old.mv(p_old, p_new)
                return
            Copy(old, new, overwrite=True)
            Remove(old)
        else:
            os.replace(old, new)
    except Exception as e:
        raise _error(e, new if Exists(old) else old) from e


def Copy(oldpath: Any, newpath: Any, overwrite: bool = False) -> None:  # noqa: N802
    """Copies the file ``oldpath`` to ``newpath`` (across file systems too).

    Raises:
        NotFoundError: ``oldpath`` does not exist.
        AlreadyExistsError: ``newpath`` exists and ``overwrite`` is False.
    """
    old, new = _path_str(oldpath), _path_str(newpath)
    _exists_guard(new, overwrite, f"Copy({old!r})")
    try:
        if not (is_url(old) or is_url(new)):
            shutil.copyfile(old, new)
            return
        with open_binary(old, "rb") as src, open_binary(new, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except Exception as e:
        raise _error(e, new if Exists(old) else old) from e


def _mtime_nsec(info: dict[str, Any]) -> int:
    for key in ("mtime", "LastModified", "last_modified", "updated", "created"):
        value = info.get(key)
        if value is None:
            continue
        if hasattr(value, "timestamp"):
            return int(value.timestamp() * 1e9)
        if isinstance(value, (int, float)):
            return int(value * 1e9)
    return 0


def Stat(filename: Any) -> FileStatistics:  # noqa: N802 (TF's name)
    """``FileStatistics`` (``length``, ``mtime_nsec``, ``is_directory``) of ``filename``.

    Raises:
        NotFoundError: it does not exist.
    """
    path = _path_str(filename)
    try:
        if is_url(path):
            fs, p = _fs(path)
            info = fs.info(p)
            is_dir = info.get("type") == "directory"
            return FileStatistics(0 if is_dir else info.get("size") or 0, _mtime_nsec(info),
                                  is_dir)
        st = os.stat(path)
        return FileStatistics(st.st_size, st.st_mtime_ns, _stat.S_ISDIR(st.st_mode))
    except Exception as e:
        raise _error(e, path) from e


def Walk(top: Any, in_order: bool = True) -> Iterator[tuple[str, list[str], list[str]]]:
    """Yields ``(dirname, subdir_names, file_names)`` for ``top`` and each directory under
    it: parents before children when ``in_order`` (TF's top-down), children first otherwise.
    A ``top`` that is not a directory yields nothing (as TF)."""
    path = _path_str(top)
    if not IsDirectory(path):
        return
    try:
        names = ListDirectory(path)
    except NotFoundError:
        return
    subdirs: list[str] = []
    files: list[str] = []
    for name in sorted(names):
        (subdirs if IsDirectory(join(path, name)) else files).append(name)
    here = (path, subdirs, files)
    if in_order:
        yield here
    for sub in subdirs:
        yield from Walk(join(path, sub), in_order)
    if not in_order:
        yield here


# ---- tf.io.gfile: the same operations under TF's v2 names (file_io.py's *_v2) ---------------


def exists(path: Any) -> bool:
    """``tf.io.gfile.exists``: ``Exists``."""
    return Exists(path)


def isdir(path: Any) -> bool:
    """``tf.io.gfile.isdir``: ``IsDirectory``."""
    return IsDirectory(path)


def listdir(path: Any) -> list[str]:
    """``tf.io.gfile.listdir``: ``ListDirectory`` (NotFoundError for no directory)."""
    return ListDirectory(path)


def glob(pattern: Any) -> list[str]:
    """``tf.io.gfile.glob``: ``Glob``."""
    return Glob(pattern)


def makedirs(path: Any) -> None:
    """``tf.io.gfile.makedirs``: ``MakeDirs``."""
    MakeDirs(path)


def mkdir(path: Any) -> None:
    """``tf.io.gfile.mkdir``: ``MkDir`` (AlreadyExistsError when it exists)."""
    MkDir(path)


def remove(path: Any) -> None:
    """``tf.io.gfile.remove``: ``Remove`` (NotFoundError when missing)."""
    Remove(path)


def rmtree(path: Any) -> None:
    """``tf.io.gfile.rmtree``: ``DeleteRecursively``."""
    DeleteRecursively(path)


def rename(src: Any, dst: Any, overwrite: bool = False) -> None:
    """``tf.io.gfile.rename``: ``Rename`` (AlreadyExistsError without ``overwrite``)."""
    Rename(src, dst, overwrite)


def copy(src: Any, dst: Any, overwrite: bool = False) -> None:
    """``tf.io.gfile.copy``: ``Copy`` (AlreadyExistsError without ``overwrite``)."""
    Copy(src, dst, overwrite)


def stat(path: Any) -> FileStatistics:
    """``tf.io.gfile.stat``: ``Stat``."""
    return Stat(path)


def walk(top: Any, topdown: bool = True,
         onerror: Any = None) -> Iterator[tuple[str, list[str], list[str]]]:
    """``tf.io.gfile.walk``: ``Walk(top, in_order=topdown)``; ``onerror`` is called with the
    NotFoundError of a directory that vanished while walked (TF's), else it ends the walk."""
    try:
        yield from Walk(top, in_order=topdown)
    except NotFoundError as e:
        if onerror is None:
            return
        onerror(e)

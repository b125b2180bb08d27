"""Crash-safe file writes for checkpoints and the ``checkpoint`` state file.

A file is written under a temporary name in its final directory (``.<final
name>.psrt-tmp-<host>-<pid>-<8 hex>``), flushed and fsynced, renamed over the final name
with ``os.replace`` and the directory fsynced, as TF's
``file_io.atomic_write_string_to_file`` (``tensorflow/python/lib/io/file_io.py``) writes
a temporary file and renames it. A process killed mid-write leaves the previous file
whole. Temporary files left by a dead process on this host are removed by the next write
into that directory.

OS errors become the ``psrt.errors`` class TF's ``file_io`` raises for the errno.
Nothing here is public API: :mod:`psrt.checkpoint.checkpoint_format` and
:mod:`psrt.checkpoint.checkpoint_management` call these helpers through the module
(``atomic_file._atomic_write``), so a test can trace every atomic write by replacing it.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import socket
import uuid

from psrt.framework import errors

__all__: list[str] = []

_logger = logging.getLogger(__name__)

_TEMP_MARK = ".psrt-tmp-"
# ".<final name>.psrt-tmp-<host>-<pid>-<8 hex>"; the host may itself contain "-".
_TEMP_RE = re.compile(r"^\.(?P<final>.+)\.psrt-tmp-(?P<host>.+)-(?P<pid>\d+)-[0-9a-f]{8}$")


def _host_tag() -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname()) or "localhost"


def _temp_path(path: str) -> str:
    directory, base = os.path.split(path)
    name = ".%s%s%s-%d-%s" % (base, _TEMP_MARK, _host_tag(), os.getpid(), uuid.uuid4().hex[:8])
    return os.path.join(directory, name)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_temp_files(directory: str) -> None:
    """Deletes temporary files that a dead process on this host left in ``directory``.

    Only files named by :func:`_temp_path` whose host is this host and whose pid is not
    a live process are removed, so a concurrent writer (another live process, or a
    process on another machine sharing the directory) is never disturbed. Skipped on
    Windows, where ``os.kill(pid, 0)`` would terminate the process.
    """
    if os.name == "nt":
        return
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return
    host = _host_tag()
    me = os.getpid()
    for name in names:
        if _TEMP_MARK not in name:
            continue
        m = _TEMP_RE.match(name)
        if m is None or m.group("host") != host:
            continue
        pid = int(m.group("pid"))
        if pid == me or _pid_alive(pid):
            continue
        try:
            os.unlink(os.path.join(directory, name))
            _logger.info("Removed %s, left by dead process %d", name, pid)
        except OSError:
            pass


def _os_error(exc: OSError, what: str, path: str) -> errors.OpError:
    """Maps an OSError to the psrt.errors class TF's file_io raises for that errno."""
    code = exc.errno
    if code == errno.ENOENT:
        cls = errors.NotFoundError
    elif code in (errno.EACCES, errno.EPERM, errno.EROFS):
        cls = errors.PermissionDeniedError
    elif code in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG):
        cls = errors.ResourceExhaustedError
    elif code in (errno.EISDIR, errno.ENOTDIR):
        cls = errors.FailedPreconditionError
    else:
        cls = errors.UnknownError
    reason = exc.strerror or str(exc)
    return cls(None, None, "%s %r failed: %s (errno %s)" % (what, path, reason, code))


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(directory: str) -> None:
    """Makes a rename in ``directory`` durable. A no-op where directories cannot be
    opened (Windows) or the file system rejects fsync on them (EINVAL)."""
    if os.name == "nt":
        return
    fd = os.open(directory or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _atomic_write(path: str, write_temp) -> None:
    """Writes ``path`` through a temporary file: ``write_temp(tmp)``, fsync, rename, fsync
    of the directory. On any failure the temporary file is removed and ``path`` is left
    as it was."""
    directory = os.path.dirname(path)
    _remove_stale_temp_files(directory)
    tmp = _temp_path(path)
    try:
        try:
            write_temp(tmp)
            _fsync_path(tmp)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        _fsync_dir(directory)
    except OSError as e:
        raise _os_error(e, "Writing", path) from e

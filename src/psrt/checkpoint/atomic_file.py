"""Crash-safe file writes for checkpoints and the ``checkpoint`` state file.

A file is written under a temporary name in its final directory (``.<final
name>.psrt-tmp-<host>-<pid>-<8 hex>``), flushed and fsynced, renamed over the final name
with ``os.replace`` and the directory fsynced, as TF's
``file_io.atomic_write_string_to_file`` (``tensorflow/python/lib/io/file_io.py``) writes
a temporary file and renames it. A process killed mid-write leaves the previous file
whole. Temporary files left by a dead process on this host are removed by the next write
into that directory.

A process that ends while a write is under way (Ctrl-C in the main thread while a
Supervisor's checkpoint thread saves, the interpreter exiting past daemon threads) removes
that write's temporary file on its way out (``atexit``), and no new write starts then, so
a checkpoint directory never keeps ``.model.ckpt-N.psrt-tmp-*`` files of a live or
cleanly ended process (nor of one that SIGTERM as PID 1 ends with ``os._exit``:
psrt.platform.sigterm runs the same clean-up first). Only a process killed outright (SIGKILL) leaves one, and the next
write into the directory removes it.

OS errors become the ``psrt.errors`` class TF's ``file_io`` raises for the errno.
Nothing here is public API: :mod:`psrt.checkpoint.checkpoint_format` and
:mod:`psrt.checkpoint.checkpoint_management` call these helpers through the module
(``atomic_file._atomic_write``), so a test can trace every atomic write by replacing it.
"""

from __future__ import annotations

import atexit
import errno
import logging
import os
import re
import socket
import threading
import uuid

from psrt.framework import errors
from psrt.framework import file_io
from psrt.platform import sigterm as _sigterm

__all__: list[str] = []

_logger = logging.getLogger(__name__)

_TEMP_MARK = ".psrt-tmp-"
# ".<final name>.psrt-tmp-<host>-<pid>-<8 hex>"; the host may itself contain "-".
_TEMP_RE = re.compile(r"^\.(?P<final>.+)\.psrt-tmp-(?P<host>.+)-(?P<pid>\d+)-[0-9a-f]{8}$")


# Temporary files of the writes under way in this process, and whether it is exiting: both
# changed under _unfinished_lock, so a file is created only while the exit hook can see it.
_unfinished: set[str] = set()
_unfinished_lock = threading.Lock()
_exiting = False


@atexit.register
def _remove_unfinished_temp_files() -> None:
    """At interpreter exit: removes the temporary files of writes still under way (a daemon
    thread's save cut off by the exit) and refuses new writes."""
    global _exiting
    with _unfinished_lock:
        _exiting = True
        paths = sorted(_unfinished)
        _unfinished.clear()
    for path in paths:
        try:
            os.unlink(path)
            _logger.info("Removed %s: the process exited during the write", path)
        except OSError:
            pass


# SIGTERM as PID 1 may end the process with os._exit, which runs no atexit handler.
_sigterm.before_forced_exit(_remove_unfinished_temp_files)


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
    """Writes ``path`` through a temporary file: ``write_temp(f)`` with ``f`` the temporary
    file open for binary writing, flush, fsync, rename, fsync of the directory. On any
    failure (KeyboardInterrupt included) the temporary file is removed and ``path`` is left
    as it was; so it is when the process exits during the write.

    Raises:
        psrt.errors.OpError: the OS error's class (PermissionDeniedError, ...), naming
            ``path``; CancelledError when the process is exiting.
    """
    if file_io.is_url(path):
        # An object store (s3://, gs://) replaces an object whole when its upload ends, so
        # readers see the old or the new object: no temporary name, no rename, no fsync.
        with file_io.open_binary(path, "wb") as f:
            write_temp(f)
        return
    directory = os.path.dirname(path)
    _remove_stale_temp_files(directory)
    tmp = _temp_path(path)
    try:
        with _unfinished_lock:
            if _exiting:
                raise errors.CancelledError(None, None, "not writing %r: the process is "
                                            "exiting" % path)
            _unfinished.add(tmp)
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL |
                             getattr(os, "O_BINARY", 0), 0o666)
            except BaseException:
                _unfinished.discard(tmp)
                raise
        try:
            with os.fdopen(fd, "wb") as f:
                write_temp(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        finally:
            with _unfinished_lock:
                _unfinished.discard(tmp)
        _fsync_dir(directory)
    except OSError as e:
        if _exiting:
            raise errors.CancelledError(None, None, "writing %r was cut off: the process "
                                        "is exiting" % path) from e
        raise _os_error(e, "Writing", path) from e


def check_writable_dir(directory: str, what: str) -> None:
    """Creates ``directory`` (and its parents) when missing and creates and removes a file in
    it, so that a directory no file can be written to fails when a job starts, not at its
    first save.

    Args:
        directory: The directory (str or os.PathLike).
        what: What it is, for the error ("Supervisor logdir").

    Raises:
        psrt.errors.PermissionDeniedError: it is not writable (EACCES, EPERM, EROFS),
            naming it and the OS's reason; other OS errors as their class (NotFoundError,
            FailedPreconditionError for a file in the way, ResourceExhaustedError).
    """
    directory = os.fspath(directory)
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        raise _os_error(e, "Creating %s" % what, directory) from e
    probe = _temp_path(os.path.join(directory, "write-check"))
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as e:
        raise _os_error(e, "Creating a file in %s" % what, directory) from e
    try:
        os.unlink(probe)
    except OSError:
        pass

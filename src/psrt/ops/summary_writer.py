"""FileWriter and FileWriterCache: TensorBoard event files written by a background thread
through tensorboardX, as tensorflow/python/summary/writer/writer.py and writer_cache.py."""

from __future__ import annotations

import logging
import os
import queue
import shutil
import socket
import tempfile
import threading
import time
import warnings
import weakref
from typing import Any

from psrt.framework import file_io
from psrt.ops.summary_ops import (
    _proto,
    _SummaryOp,
)

_logger = logging.getLogger("psrt")

_STOP = object()


def _event_file_suffix(logdir: str, suffix: str) -> str:
    """``suffix``, or, when tensorboardX's file name for this second already exists,
    ``.PID.N`` before it (TF2's pattern), so no writer truncates another's file."""
    base = os.path.join(logdir, "events.out.tfevents." + str(time.time())[:10] + "." +
                        socket.gethostname())
    if not os.path.exists(base + suffix):
        return suffix
    while True:
        _file_counter[0] += 1
        unique = f".{os.getpid()}.{_file_counter[0]}{suffix}"
        if not os.path.exists(base + unique):
            return unique


def _write_loop(events_queue: queue.Queue, events_writer: Any, flush_secs: float) -> None:
    """The writer thread: writes queued events, flushes the file ``flush_secs`` after the
    first pending event (the very first at once, as TF), ends at ``_STOP``."""
    next_flush = 0.0
    pending = False
    while True:
        try:
            if pending:
                item = events_queue.get(timeout=max(0.0, next_flush - time.monotonic()))
            else:
                item = events_queue.get()
        except queue.Empty:
            item = None
        try:
            if item is _STOP:
                return
            if item is not None:
                events_writer.write_event(item)
                pending = True
            if pending and time.monotonic() >= next_flush:
                events_writer.flush()
                pending = False
                next_flush = time.monotonic() + flush_secs
        except Exception as e:  # noqa: BLE001 - an I/O error must not end the thread
            _logger.error("Summary writer for %s: %s", events_writer._file_name, e)
        finally:
            if item is not None:
                events_queue.task_done()


def _close_event_file(events_queue: queue.Queue, thread: threading.Thread,
                      events_writer: Any) -> None:
    """Writes what is queued, then stops the thread and closes the file (also run at exit
    and when an unclosed FileWriter is garbage collected)."""
    if thread.is_alive():
        events_queue.put(_STOP)
        thread.join()
    events_writer.close()


class _UploadedEventFile:
    """An event file of a URL logdir (``s3://bucket/logs``): written in a local staging
    directory and uploaded whole to ``logdir/<its name>`` at every flush (the writer
    thread's ``flush_secs`` ones too) and at close, since an object store has no append
    (TF's S3 file uploads at Flush and Close as well). The staging directory goes at close."""

    def __init__(self, events_writer: Any, logdir: str, staging: str) -> None:
        self._writer = events_writer
        self._staging = staging
        self._local = events_writer._file_name
        self._file_name = file_io.join(logdir, os.path.basename(self._local))

    def write_event(self, event: Any) -> None:
        self._writer.write_event(event)

    def flush(self) -> None:
        self._writer.flush()
        file_io.Copy(self._local, self._file_name, overwrite=True)

    def close(self) -> None:
        try:
            self._writer.close()
            file_io.Copy(self._local, self._file_name, overwrite=True)
        finally:
            shutil.rmtree(self._staging, ignore_errors=True)


class FileWriter:
    """Writes ``Summary`` protocol buffers and events to an event file, as TF1's
    ``tf.summary.FileWriter``; TensorBoard reads the directory.

    Creates ``logdir`` if needed and a new file ``events.out.tfevents.SECONDS.HOSTNAME`` in
    it (a URL logdir, ``s3://bucket/logs``: the file is written locally and uploaded there
    at each flush and at close) (tensorboardX's ``EventsWriter`` writes the records: TFRecord framing with masked
    CRC-32C, a first ``file_version`` event). Events are written by a background thread, so
    ``add_summary`` returns at once; it blocks only when ``max_queue`` events are pending.
    The file is flushed ``flush_secs`` after an event is written, and by :meth:`flush` and
    :meth:`close`; unclosed writers are closed at interpreter exit. Safe to share between
    threads.

    Args:
        logdir: Directory of the event file (str or path).
        graph: Accepted for TF's signature: psrt has no dataflow graph to show (a debug
            log says so).
        max_queue: Events pending before an ``add_*`` call blocks (default 10).
        flush_secs: Seconds between flushes of written events (default 120).
        graph_def: Accepted and ignored, as ``graph``.
        filename_suffix: Appended to the event file's name.
        session: Accepted for TF's signature and ignored.
    """

    def __init__(self, logdir: Any, graph: Any = None, max_queue: int = 10,
                 flush_secs: float = 120, graph_def: Any = None,
                 filename_suffix: str | None = None, session: Any = None) -> None:
        self._logdir = os.fspath(logdir)
        self._max_queue = int(max_queue)
        self._flush_secs = float(flush_secs)
        self._suffix = filename_suffix or ""
        self._seen_summary_tags: set[str] = set()
        self._lock = threading.Lock()
        self._closed = True
        if session is not None:
            _logger.debug("FileWriter(session=...) is accepted and ignored by psrt")
        self._open()
        if graph is not None or graph_def is not None:
            self.add_graph(graph, graph_def=graph_def)

    def _open(self) -> None:
        from tensorboardX.event_file_writer import EventsWriter  # noqa: PLC0415 (lazy)

        if file_io.is_url(self._logdir):
            staging = tempfile.mkdtemp(prefix="psrt-events-")
            events_writer = _UploadedEventFile(
                EventsWriter(os.path.join(staging, "events"), self._suffix), self._logdir,
                staging)
        else:
            os.makedirs(self._logdir, exist_ok=True)
            with _create_lock:
                suffix = _event_file_suffix(self._logdir, self._suffix)
                events_writer = EventsWriter(os.path.join(self._logdir, "events"), suffix)
        events_queue: queue.Queue = queue.Queue(self._max_queue)
        thread = threading.Thread(target=_write_loop,
                                  args=(events_queue, events_writer, self._flush_secs),
                                  name=f"psrt-summary-writer:{self._logdir}", daemon=True)
        thread.start()
        self._queue = events_queue
        self._events_writer = events_writer
        self._finalizer = weakref.finalize(self, _close_event_file, events_queue, thread,
                                           events_writer)
        self._closed = False

    @property
    def event_file_path(self) -> str:
        """The path of the event file being written (psrt only)."""
        return self._events_writer._file_name

    def get_logdir(self) -> str:
        """The directory of the event file."""
        return self._logdir

    def _warn_if_closed(self) -> bool:
        if self._closed:
            warnings.warn("Attempting to use a closed FileWriter. The operation will be a "
                          "noop unless the FileWriter is explicitly reopened.", stacklevel=3)
        return self._closed

    def add_event(self, event: Any) -> None:
        """Queues an ``Event`` protocol buffer for the file (a warning and nothing more once
        closed, as TF)."""
        if self._warn_if_closed():
            return
        self._queue.put(event)

    def _add_event(self, event: Any, step: Any) -> None:
        event.wall_time = time.time()
        if step is not None:
            event.step = int(step)
        self.add_event(event)

    def add_summary(self, summary: Any, global_step: Any = None) -> None:
        """Adds a summary to the event file, as TF's ``add_summary``.

        Args:
            summary: What ``Session.run`` of a summary op returned (serialized ``Summary``
                bytes), or a ``psrt.Summary`` protocol buffer built by hand (e.g. an
                accuracy computed in Python).
            global_step: The step to record with it (int), or None.

        Like TF, a value's ``metadata`` (e.g. the text plugin's) is written with the first
        value of its tag only.

        Raises:
            TypeError: ``summary`` is a summary op (run it first) or another type.
        """
        pb = _proto("summary_pb2")
        if isinstance(summary, _SummaryOp):
            raise TypeError(f"add_summary takes the value of a summary op, not the op: pass "
                            f"sess.run({summary.name}) rather than the op")
        if isinstance(summary, bytes):
            parsed = pb.Summary()
            parsed.ParseFromString(summary)
            summary = parsed
        elif not isinstance(summary, pb.Summary):
            raise TypeError(f"add_summary takes a serialized Summary (bytes) or a "
                            f"psrt.Summary; got {type(summary).__name__}")
        copied = False
        for i, value in enumerate(summary.value):
            if not value.HasField("metadata"):
                continue
            if value.tag in self._seen_summary_tags:
                if not copied:  # strip on a copy: the caller's proto stays as it was
                    summary = pb.Summary.FromString(summary.SerializeToString())
                    copied = True
                summary.value[i].ClearField("metadata")
                continue
            self._seen_summary_tags.add(value.tag)
        self._add_event(_proto("event_pb2").Event(summary=summary), global_step)

    def add_session_log(self, session_log: Any, global_step: Any = None) -> None:
        """Adds a ``SessionLog`` (START, STOP, CHECKPOINT) to the event file. TensorBoard
        uses a START at step S to discard events at steps >= S left by a run that was
        restarted from an earlier checkpoint."""
        self._add_event(_proto("event_pb2").Event(session_log=session_log), global_step)

    def add_graph(self, graph: Any, global_step: Any = None, graph_def: Any = None) -> None:
        """Accepted for TF compatibility: psrt has no dataflow graph, so nothing is written
        (a debug log says so).

        Raises:
            ValueError: both ``graph`` and ``graph_def`` were given, as TF.
        """
        if graph is not None and graph_def is not None:
            raise ValueError("Please pass only graph, or graph_def (deprecated), but not both.")
        _logger.debug("FileWriter.add_graph: psrt has no dataflow graph to write to %s",
                      self._logdir)

    def add_meta_graph(self, meta_graph_def: Any, global_step: Any = None) -> None:
        """Accepted for TF compatibility; writes nothing (psrt has no meta graph)."""
        _logger.debug("FileWriter.add_meta_graph: psrt has no meta graph to write")

    def add_run_metadata(self, run_metadata: Any, tag: str, global_step: Any = None) -> None:
        """Accepted for TF compatibility; writes nothing (psrt collects no run metadata)."""
        _logger.debug("FileWriter.add_run_metadata: psrt collects no run metadata")

    def flush(self) -> None:
        """Writes every event added so far to disk."""
        if self._warn_if_closed():
            return
        self._queue.join()
        self._events_writer.flush()

    def close(self) -> None:
        """Writes every pending event and closes the file. Later ``add_*`` calls warn and do
        nothing until :meth:`reopen`. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._finalizer()

    def reopen(self) -> None:
        """Reopens a closed writer; later events go to a new event file. Does nothing if
        the writer is open."""
        with self._lock:
            if self._closed:
                self._open()

    def __enter__(self) -> "FileWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<psrt.summary.FileWriter '{self._logdir}'{' closed' if self._closed else ''}>"


class FileWriterCache:
    """One shared :class:`FileWriter` per directory, as ``tf.summary.FileWriterCache``: the
    writer ``SummarySaverHook``, ``StepCounterHook`` and ``CheckpointSaverHook`` write to
    when given an output directory, so a script's own summaries can go to the same file."""

    _cache: dict[str, FileWriter] = {}
    _lock = threading.RLock()

    @staticmethod
    def get(logdir: Any) -> FileWriter:
        """The writer for ``logdir`` (str or path), created on first use."""
        logdir = os.fspath(logdir)
        with FileWriterCache._lock:
            writer = FileWriterCache._cache.get(logdir)
            if writer is None:
                writer = FileWriterCache._cache[logdir] = FileWriter(logdir)
            return writer

    @staticmethod
    def clear() -> None:
        """Closes and forgets every cached writer."""
        with FileWriterCache._lock:
            for writer in FileWriterCache._cache.values():
                writer.close()
            FileWriterCache._cache = {}


# Serializes writer creation in this process, so that two writers of one directory created
# in the same second get different file names (tensorboardX names files by the second and
# truncates an existing file).
_create_lock = threading.Lock()


_file_counter = [0]

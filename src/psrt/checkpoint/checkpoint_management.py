"""The ``checkpoint`` state file, as TF's ``checkpoint_management``.

Next to the checkpoints, the ``checkpoint`` state file is TF's ``CheckpointState`` in
protobuf text format::

    model_checkpoint_path: "/train/model.ckpt-150"
    all_model_checkpoint_paths: "/train/model.ckpt-100"
    all_model_checkpoint_paths: "/train/model.ckpt-150"

:class:`CheckpointState` holds it, with a writer and a parser of that text format (no
protobuf dependency). The functions copy TF 1.x's
``tensorflow/python/training/checkpoint_management.py``:
:func:`generate_checkpoint_state_proto`, :func:`update_checkpoint_state`,
:func:`get_checkpoint_state`, :func:`checkpoint_exists`, :func:`latest_checkpoint`,
:func:`get_checkpoint_mtimes` and :func:`remove_checkpoint`. In psrt a checkpoint "prefix"
is the checkpoint file itself.

The state file is written atomically (:mod:`psrt.checkpoint.atomic_file`), and the Saver
writes it LAST, after the checkpoint file: a process killed mid-save leaves the previous
checkpoint and the previous state file whole, and :func:`latest_checkpoint` keeps naming a
loadable file.
"""

from __future__ import annotations

import logging
import math
import os
import re

from psrt.checkpoint import atomic_file
from psrt.framework import errors as _errors
from psrt.framework import file_io

__all__ = [
    "CheckpointState",
    "checkpoint_exists",
    "generate_checkpoint_state_proto",
    "get_checkpoint_mtimes",
    "get_checkpoint_state",
    "latest_checkpoint",
    "remove_checkpoint",
    "update_checkpoint_state",
]

_logger = logging.getLogger(__name__)

_DEFAULT_LATEST_FILENAME = "checkpoint"


# --------------------------------------------------------------------------------------
# The CheckpointState proto and its text format.

class CheckpointState:
    """The contents of the ``checkpoint`` state file, as TF's ``CheckpointState`` proto.

    ``str(state)`` is the protobuf text format TF writes, one field per line.

    Attributes:
        model_checkpoint_path: Path of the latest checkpoint (str).
        all_model_checkpoint_paths: Paths of all not-yet-deleted checkpoints, oldest
            first; the last one is ``model_checkpoint_path`` (list of str).
        all_model_checkpoint_timestamps: Creation times of those checkpoints in seconds
            since the Epoch, or empty (list of float).
        last_preserved_timestamp: Seconds since the Epoch when the last checkpoint kept
            by ``keep_checkpoint_every_n_hours`` was written; 0.0 when unset (float).
    """

    __slots__ = ("model_checkpoint_path", "all_model_checkpoint_paths",
                 "all_model_checkpoint_timestamps", "last_preserved_timestamp")

    def __init__(self, model_checkpoint_path: str = "", all_model_checkpoint_paths=None,
                 all_model_checkpoint_timestamps=None,
                 last_preserved_timestamp: float | None = None) -> None:
        self.model_checkpoint_path = model_checkpoint_path
        self.all_model_checkpoint_paths = list(all_model_checkpoint_paths or [])
        self.all_model_checkpoint_timestamps = [
            float(t) for t in (all_model_checkpoint_timestamps or [])]
        self.last_preserved_timestamp = float(last_preserved_timestamp or 0.0)

    def __eq__(self, other) -> bool:
        if not isinstance(other, CheckpointState):
            return NotImplemented
        return all(getattr(self, a) == getattr(other, a) for a in self.__slots__)

    def __repr__(self) -> str:
        return "CheckpointState(%s)" % ", ".join(
            "%s=%r" % (a, getattr(self, a)) for a in self.__slots__)

    def __str__(self) -> str:
        lines = []
        if self.model_checkpoint_path:
            lines.append("model_checkpoint_path: %s" % _quote(self.model_checkpoint_path))
        for p in self.all_model_checkpoint_paths:
            lines.append("all_model_checkpoint_paths: %s" % _quote(p))
        for t in self.all_model_checkpoint_timestamps:
            lines.append("all_model_checkpoint_timestamps: %s" % _format_double(t))
        if self.last_preserved_timestamp:
            lines.append("last_preserved_timestamp: %s"
                         % _format_double(self.last_preserved_timestamp))
        return "".join(line + "\n" for line in lines)


_ESCAPES = {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x22: '\\"', 0x27: "\\'", 0x5C: "\\\\"}


def _quote(s: str) -> str:
    """A string literal as protobuf's text format writes it (CEscape, as_utf8=False)."""
    out = []
    for b in s.encode("utf-8"):
        if b in _ESCAPES:
            out.append(_ESCAPES[b])
        elif b < 0x20 or b >= 0x7F:
            out.append("\\%03o" % b)
        else:
            out.append(chr(b))
    return '"' + "".join(out) + '"'


def _format_double(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(float(x))


class _ParseError(ValueError):
    pass


_TOKEN_RE = re.compile(r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<num>[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[fF]?|(?:inf(?:inity)?|nan)\b))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[:\[\],;])
""", re.VERBOSE | re.IGNORECASE)

_SIMPLE_UNESCAPES = {"n": 0x0A, "r": 0x0D, "t": 0x09, '"': 0x22, "'": 0x27, "\\": 0x5C,
                     "a": 0x07, "b": 0x08, "f": 0x0C, "v": 0x0B, "?": 0x3F}


def _unquote(literal: str) -> bytes:
    body = literal[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        i += 1
        if i >= len(body):
            raise _ParseError("string ends in a lone backslash: %s" % literal)
        c = body[i]
        if c in _SIMPLE_UNESCAPES:
            out.append(_SIMPLE_UNESCAPES[c])
            i += 1
        elif c in "01234567":
            j = i
            while j < len(body) and j < i + 3 and body[j] in "01234567":
                j += 1
            out.append(int(body[i:j], 8) & 0xFF)
            i = j
        elif c in "xX":
            j = i + 1
            while j < len(body) and j < i + 3 and body[j] in "0123456789abcdefABCDEF":
                j += 1
            if j == i + 1:
                raise _ParseError("\\x without hex digits in %s" % literal)
            out.append(int(body[i + 1:j], 16))
            i = j
        elif c in "uU":
            n = 4 if c == "u" else 8
            digits = body[i + 1:i + 1 + n]
            if len(digits) != n or not re.fullmatch(r"[0-9a-fA-F]+", digits):
                raise _ParseError("bad \\%s escape in %s" % (c, literal))
            out += chr(int(digits, 16)).encode("utf-8")
            i += 1 + n
        else:
            raise _ParseError("invalid escape \\%s in %s" % (c, literal))
    return bytes(out)


# field name -> (kind, repeated)
_STATE_FIELDS = {
    "model_checkpoint_path": ("str", False),
    "all_model_checkpoint_paths": ("str", True),
    "all_model_checkpoint_timestamps": ("float", True),
    "last_preserved_timestamp": ("float", False),
}


def _tokenize(text: str):
    pos = 0
    tokens = []
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise _ParseError("unexpected character %r at offset %d" % (text[pos], pos))
        pos = m.end()
        if m.lastgroup != "space":
            tokens.append((m.lastgroup, m.group()))
    return tokens


def _parse_checkpoint_state(text: str) -> CheckpointState:
    """Parses ``CheckpointState`` text format as protobuf's ``text_format.Merge`` does:
    fields in any order, a singular field given twice keeps the last value, adjacent
    string literals concatenate, ``[a, b]`` lists for repeated fields, ``#`` comments.

    Raises:
        _ParseError: Unknown field, bad literal or bad syntax.
    """
    tokens = _tokenize(text)
    state = CheckpointState()
    i = 0

    def value(kind):
        nonlocal i
        if i >= len(tokens):
            raise _ParseError("expected a value at end of input")
        tok_kind, tok = tokens[i]
        if kind == "str":
            if tok_kind != "str":
                raise _ParseError("expected a string literal, got %r" % tok)
            raw = b""
            while i < len(tokens) and tokens[i][0] == "str":
                raw += _unquote(tokens[i][1])
                i += 1
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise _ParseError("string field is not valid UTF-8: %s" % e) from e
        if tok_kind == "num" or (tok_kind == "ident" and tok.lower() in ("inf", "infinity", "nan")):
            i += 1
            t = tok.lower()
            if t.endswith("f") and not t.endswith("inf"):
                t = t[:-1]
            try:
                return float(t)
            except ValueError as e:
                raise _ParseError("bad number %r" % tok) from e
        raise _ParseError("expected a number, got %r" % tok)

    while i < len(tokens):
        kind, name = tokens[i]
        if kind != "ident":
            raise _ParseError("expected a field name, got %r" % name)
        if name not in _STATE_FIELDS:
            raise _ParseError("message type \"tensorflow.CheckpointState\" has no field named "
                              "\"%s\"" % name)
        field_kind, repeated = _STATE_FIELDS[name]
        i += 1
        if i >= len(tokens) or tokens[i][1] != ":":
            raise _ParseError("expected ':' after field %s" % name)
        i += 1
        if repeated and i < len(tokens) and tokens[i][1] == "[":
            i += 1
            values = []
            if i < len(tokens) and tokens[i][1] == "]":
                i += 1
            else:
                while True:
                    values.append(value(field_kind))
                    if i < len(tokens) and tokens[i][1] == ",":
                        i += 1
                        continue
                    if i < len(tokens) and tokens[i][1] == "]":
                        i += 1
                        break
                    raise _ParseError("expected ',' or ']' in the list for %s" % name)
        else:
            values = [value(field_kind)]
        if repeated:
            getattr(state, name).extend(values)
        else:
            setattr(state, name, values[-1])
        if i < len(tokens) and tokens[i][1] in (",", ";"):
            i += 1
    return state


# --------------------------------------------------------------------------------------
# checkpoint_management

def _get_checkpoint_filename(save_dir: str, latest_filename: str | None) -> str:
    if latest_filename is None:
        latest_filename = _DEFAULT_LATEST_FILENAME
    return file_io.join(save_dir, latest_filename)


def _isabs(path: str) -> bool:
    """Absolute: an absolute local path or a URL (``s3://bucket/dir/model.ckpt``)."""
    return file_io.is_url(path) or os.path.isabs(path)


def generate_checkpoint_state_proto(save_dir, model_checkpoint_path,
                                    all_model_checkpoint_paths=None,
                                    all_model_checkpoint_timestamps=None,
                                    last_preserved_timestamp=None) -> CheckpointState:
    """Builds a :class:`CheckpointState`, as ``tf.train.generate_checkpoint_state_proto``.

    ``model_checkpoint_path`` is appended to ``all_model_checkpoint_paths`` unless it is
    already the last entry. When ``save_dir`` is relative, relative paths are rewritten
    relative to ``save_dir`` (TF's rule), so ``("ckpt", "ckpt/model.ckpt-5")`` records
    ``"model.ckpt-5"``; absolute paths are kept as given.

    Args:
        save_dir: Directory of the state file (str).
        model_checkpoint_path: The latest checkpoint (str).
        all_model_checkpoint_paths: Not-yet-deleted checkpoints, oldest first (list of
            str), or None.
        all_model_checkpoint_timestamps: Their creation times in seconds since the Epoch
            (list of float), or None.
        last_preserved_timestamp: Seconds since the Epoch of the last checkpoint kept by
            ``keep_checkpoint_every_n_hours``, or None.

    Returns:
        A new CheckpointState.

    Raises:
        ValueError: Timestamps are given and their count differs from the paths'.
    """
    save_dir = os.fspath(save_dir)
    model_checkpoint_path = os.fspath(model_checkpoint_path)
    paths = [os.fspath(p) for p in (all_model_checkpoint_paths or [])]
    if not paths or paths[-1] != model_checkpoint_path:
        _logger.info("%s is not in all_model_checkpoint_paths. Manually adding it.",
                      model_checkpoint_path)
        paths.append(model_checkpoint_path)
    if all_model_checkpoint_timestamps and len(all_model_checkpoint_timestamps) != len(paths):
        raise ValueError("Checkpoint timestamps, if provided, must match checkpoint paths "
                         "(got paths %s and timestamps %s)"
                         % (paths, list(all_model_checkpoint_timestamps)))
    if not _isabs(save_dir):
        base = save_dir or os.curdir
        if not _isabs(model_checkpoint_path):
            model_checkpoint_path = os.path.relpath(model_checkpoint_path, base)
        paths = [p if _isabs(p) else os.path.relpath(p, base) for p in paths]
    return CheckpointState(model_checkpoint_path, paths, all_model_checkpoint_timestamps,
                           last_preserved_timestamp)


def _update_checkpoint_state_internal(save_dir, model_checkpoint_path,
                                      all_model_checkpoint_paths=None, latest_filename=None,
                                      save_relative_paths=False,
                                      all_model_checkpoint_timestamps=None,
                                      last_preserved_timestamp=None) -> None:
    save_dir = os.fspath(save_dir)
    model_checkpoint_path = os.fspath(model_checkpoint_path)
    paths = [os.fspath(p) for p in (all_model_checkpoint_paths or [])]
    state_file = _get_checkpoint_filename(save_dir, latest_filename)
    if save_relative_paths:
        base = save_dir or os.curdir
        if _isabs(model_checkpoint_path):
            model_checkpoint_path = os.path.relpath(model_checkpoint_path, base)
        paths = [os.path.relpath(p, base) if _isabs(p) else p for p in paths]
    state = generate_checkpoint_state_proto(
        save_dir, model_checkpoint_path, all_model_checkpoint_paths=paths,
        all_model_checkpoint_timestamps=all_model_checkpoint_timestamps,
        last_preserved_timestamp=last_preserved_timestamp)
    if state_file == state.model_checkpoint_path:
        raise RuntimeError("Save path '%s' conflicts with path used for checkpoint state.  "
                           "Please use a different save path." % model_checkpoint_path)
    text = str(state)

    def write(f):
        f.write(text.encode("utf-8"))

    atomic_file._atomic_write(state_file, write)


def update_checkpoint_state(save_dir, model_checkpoint_path, all_model_checkpoint_paths=None,
                            latest_filename=None, all_model_checkpoint_timestamps=None,
                            last_preserved_timestamp=None) -> None:
    """Atomically rewrites the ``checkpoint`` state file, as ``tf.train.update_checkpoint_state``.

    Paths are recorded as given (absolute stay absolute); with a relative ``save_dir``
    relative paths are rewritten relative to it (see
    :func:`generate_checkpoint_state_proto`). The file is written to a temporary name,
    fsynced and renamed, so readers see the old or the new state, never a torn one.

    Args:
        save_dir: Directory holding the checkpoints and the state file (str).
        model_checkpoint_path: The latest checkpoint (str).
        all_model_checkpoint_paths: Not-yet-deleted checkpoints, oldest first; if the
            last is not ``model_checkpoint_path`` that path is appended (list of str).
        latest_filename: Name of the state file in ``save_dir``; default ``"checkpoint"``.
        all_model_checkpoint_timestamps: Creation times, seconds since the Epoch.
        last_preserved_timestamp: Seconds since the Epoch of the last checkpoint kept by
            ``keep_checkpoint_every_n_hours``.

    Raises:
        RuntimeError: ``model_checkpoint_path`` is the state file's own path.
        ValueError: Timestamps given with a different count from the paths.
        psrt.errors.NotFoundError: ``save_dir`` does not exist.
    """
    _update_checkpoint_state_internal(
        save_dir, model_checkpoint_path, all_model_checkpoint_paths, latest_filename,
        save_relative_paths=False,
        all_model_checkpoint_timestamps=all_model_checkpoint_timestamps,
        last_preserved_timestamp=last_preserved_timestamp)


def get_checkpoint_state(checkpoint_dir, latest_filename=None) -> CheckpointState | None:
    """Reads the ``checkpoint`` state file, as ``tf.train.get_checkpoint_state``.

    Relative paths in the file are joined to ``checkpoint_dir`` (TF's
    ``os.path.join(checkpoint_dir, p)``; absolute paths are returned unchanged), so a
    directory saved with relative paths can be moved and still read.

    Args:
        checkpoint_dir: The directory of checkpoints (str or os.PathLike).
        latest_filename: Name of the state file; default ``"checkpoint"``.

    Returns:
        A CheckpointState, or None when the file does not exist, cannot be read or does
        not parse (logged as a warning, as TF).

    Raises:
        ValueError: The file parses but has no ``model_checkpoint_path``.
    """
    checkpoint_dir = os.fspath(checkpoint_dir)
    state_file = _get_checkpoint_filename(checkpoint_dir, latest_filename)
    try:
        with file_io.open_binary(state_file, "rb") as f:
            raw = f.read()
    except (FileNotFoundError, _errors.NotFoundError):
        return None
    except (OSError, _errors.OpError) as e:
        _logger.warning("%s: %s: Checkpoint ignored", state_file, e)
        return None
    try:
        state = _parse_checkpoint_state(raw.decode("utf-8"))
    except (_ParseError, UnicodeDecodeError) as e:
        _logger.warning("%s: %s: Checkpoint ignored", state_file, e)
        return None
    if not state.model_checkpoint_path:
        raise ValueError("Invalid checkpoint state loaded from " + checkpoint_dir)
    if not _isabs(state.model_checkpoint_path):
        state.model_checkpoint_path = file_io.join(checkpoint_dir, state.model_checkpoint_path)
    state.all_model_checkpoint_paths = [
        p if _isabs(p) else file_io.join(checkpoint_dir, p)
        for p in state.all_model_checkpoint_paths]
    return state


def checkpoint_exists(checkpoint_prefix) -> bool:
    """Whether a checkpoint file exists at ``checkpoint_prefix``, as ``tf.train.checkpoint_exists``.

    Args:
        checkpoint_prefix: A path returned by :meth:`Saver.save` or
            :func:`latest_checkpoint` (in psrt the prefix is the file itself).

    Returns:
        True if ``checkpoint_prefix`` is an existing regular file.
    """
    path = os.fspath(checkpoint_prefix)
    if file_io.is_url(path):
        return file_io.Exists(path) and not file_io.IsDirectory(path)
    return os.path.isfile(path)


def latest_checkpoint(checkpoint_dir, latest_filename=None) -> str | None:
    """Finds the latest saved checkpoint, as ``tf.train.latest_checkpoint``.

    Args:
        checkpoint_dir: Directory where the checkpoints were saved.
        latest_filename: Name of the state file; default ``"checkpoint"`` (see
            :meth:`Saver.save`).

    Returns:
        The path of the latest checkpoint, or None when there is no state file or the
        file it names does not exist (logged, as TF).
    """
    state = get_checkpoint_state(checkpoint_dir, latest_filename)
    if state and state.model_checkpoint_path:
        if checkpoint_exists(state.model_checkpoint_path):
            return state.model_checkpoint_path
        _logger.error("Couldn't match files for checkpoint %s", state.model_checkpoint_path)
    return None


def get_checkpoint_mtimes(checkpoint_prefixes) -> list[float]:
    """Modification times of the existing checkpoints, as ``tf.train.get_checkpoint_mtimes``.

    Args:
        checkpoint_prefixes: Checkpoint paths (list of str).

    Returns:
        The mtimes in seconds since the Epoch (float) of those that exist, in order;
        missing ones are skipped, so the list may be shorter than the input.
    """
    mtimes = []
    for p in checkpoint_prefixes:
        try:
            mtimes.append(file_io.Stat(os.fspath(p)).mtime_nsec / 1e9)
        except _errors.OpError:
            pass
    return mtimes


def remove_checkpoint(checkpoint_prefix, checkpoint_format_version=2,
                      meta_graph_suffix="meta") -> None:
    """Deletes a checkpoint file, as ``tf.train.remove_checkpoint``.

    Also deletes ``checkpoint_prefix + "." + meta_graph_suffix`` if one exists (psrt
    writes none). A missing file is not an error. ``checkpoint_format_version`` is
    accepted for TF's signature and ignored.
    """
    prefix = os.fspath(checkpoint_prefix)
    for path in (prefix, prefix + "." + meta_graph_suffix):
        try:
            file_io.Remove(path)
        except _errors.NotFoundError:
            pass


def _same_file_key(path: str) -> str:
    if file_io.is_url(path):
        return path
    return os.path.normcase(os.path.realpath(path))


def _listed_before(save_path: str) -> list[str]:
    """The checkpoints that ``save_path``'s directory's ``checkpoint`` state file lists
    before ``save_path`` (older ones), newest first; [] when it is not listed there."""
    try:
        state = get_checkpoint_state(os.path.dirname(save_path))
    except ValueError:
        return []
    if state is None:
        return []
    listed = list(state.all_model_checkpoint_paths)
    if state.model_checkpoint_path and (
            not listed or _same_file_key(listed[-1]) != _same_file_key(
                state.model_checkpoint_path)):
        listed.append(state.model_checkpoint_path)
    keys = [_same_file_key(p) for p in listed]
    key = _same_file_key(save_path)
    if key not in keys:
        return []
    last = len(keys) - 1 - keys[::-1].index(key)
    out, seen = [], {key}
    for path, k in zip(reversed(listed[:last]), reversed(keys[:last])):
        if k not in seen:
            seen.add(k)
            out.append(path)
    return out

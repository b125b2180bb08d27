"""``tf.train.Saver``: saves and restores variables and their optimizer state.

A checkpoint is one safetensors file with a CRC-32C per tensor
(:mod:`psrt.checkpoint.checkpoint_format`); the ``checkpoint`` state file next to it lists
the kept ones (:mod:`psrt.checkpoint.checkpoint_management`); restore reads through
:class:`~psrt.checkpoint.checkpoint_reader.CheckpointReader`, which checks every tensor.
Saves are crash safe: the checkpoint file is written atomically, then the state file,
LAST (:mod:`psrt.checkpoint.atomic_file`).

Beyond TF, :meth:`Saver.restore` (and so the chief of MonitoredTrainingSession, Supervisor
and SessionManager, which restore through it) falls back to the newest intact older
checkpoint that the directory's ``checkpoint`` state file lists when the requested one is
corrupt, with a WARNING naming both; see :meth:`Saver.restore`.

How :class:`Saver` talks to the session (duck-typed; psrt's session implements it):

* ``sess._psrt_read_state(variables, progress=None) -> dict[str, np.ndarray]``: the values
  of the given Variables, of their optimizer slots and of the optimizer's non-slot state,
  keyed by checkpoint name (``"W"``, ``"W/Adam"``, ``"beta1_power"``); it reports the bytes
  it transfers to ``progress`` (a :class:`psrt.platform.progress.Progress`) and closes it.
* ``sess._psrt_expected_state(variables) -> dict[str, (tuple[int, ...], np.dtype)]``: the
  names, shapes and dtypes that ``_psrt_write_state`` would assign (also the size a save
  reads; ``-1`` for a dynamic table's row count).
* ``sess._psrt_write_state(variables, tensors: dict[str, np.ndarray], progress=None) ->
  None``: assigns the variables and their slots from ``tensors`` (keys as above), reporting
  to ``progress`` as ``_psrt_read_state`` does.

Long saves and restores log progress (bytes done, MB/s, time left) every few seconds under
the ``"psrt"`` logger, reading from the ps tasks and writing the file, then reading the file
and writing to the ps tasks (:mod:`psrt.platform.progress`; ``PSRT_PROGRESS_SECS``).
* ``sess.run(global_step_variable)``: the step, convertible with ``int``.

Variables are objects with ``.name`` (str, no ``":0"`` suffix), ``.shape`` (tuple) and
``.dtype`` (numpy dtype).

Public names and behaviour copy TF 1.x's ``tensorflow/python/training/saver.py``.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Mapping

import numpy as np

from psrt.checkpoint.checkpoint_format import (
    FORMAT,
    _names_preview,
    _shape_str,
    write_checkpoint_file,
)
from psrt.checkpoint.checkpoint_management import (
    _DEFAULT_LATEST_FILENAME,
    _get_checkpoint_filename,
    _listed_before,
    _update_checkpoint_state_internal,
    checkpoint_exists,
    get_checkpoint_mtimes,
    remove_checkpoint,
)
from psrt.checkpoint.checkpoint_reader import CheckpointReader
from psrt.framework import errors
from psrt.framework import file_io
from psrt.framework.ops import GraphKeys, add_to_collection, get_collection
from psrt.ops.variables import global_variables
from psrt.platform.progress import Progress

__all__ = ["Saver"]

_logger = logging.getLogger(__name__)

_RESTORE_MISSING = (
    "Restoring from checkpoint failed. This is most likely due to a Variable name or other "
    "graph key that is missing from the checkpoint. Please ensure that you have not altered "
    "the graph expected based on the checkpoint. Original error:\n\n")
_RESTORE_MISMATCH = (
    "Restoring from checkpoint failed. This is most likely due to a mismatch between the "
    "current graph and the graph from the checkpoint. Please ensure that you have not "
    "altered the graph expected based on the checkpoint. Original error:\n\n")


def _check_variable(v, where: str) -> None:
    if not isinstance(getattr(v, "name", None), str):
        raise TypeError("Variables to save should be passed in a dict or a list of psrt "
                        "Variables (objects with a str .name); %s is %r" % (where, v))


def _var_list_to_pairs(var_list) -> list[tuple[str, object]]:
    """``var_list`` as ``[(checkpoint name, variable)]``, validated as TF's
    ``op_list_to_dict`` (unique names, list or dict)."""
    if isinstance(var_list, Mapping):
        pairs = []
        for key, v in var_list.items():
            if not isinstance(key, str):
                raise TypeError("var_list dict keys must be str checkpoint names; got %r" % (key,))
            _check_variable(v, "var_list[%r]" % key)
            pairs.append((key, v))
    elif isinstance(var_list, (list, tuple, set, frozenset)):
        pairs = []
        for i, v in enumerate(var_list):
            _check_variable(v, "var_list[%d]" % i)
            pairs.append((v.name, v))
    else:
        raise TypeError("Variables to save should be passed in a dict or a list: %r"
                        % (var_list,))
    seen_keys = set()
    seen_vars: dict[str, str] = {}
    for key, v in pairs:
        if key in seen_keys:
            raise ValueError("At least two variables have the same name: %s" % key)
        seen_keys.add(key)
        if v.name in seen_vars:
            raise ValueError("Variable %r appears twice in var_list, as %r and %r"
                             % (v.name, seen_vars[v.name], key))
        seen_vars[v.name] = key
    return pairs


def _state_bytes(sess, variables) -> int | None:
    """The bytes a save pulls: every expected tensor's size; None when a dynamic table's row
    count (``-1``) makes it unknown."""
    total = 0
    for shape, dtype in sess._psrt_expected_state(variables).values():
        if any(int(d) < 0 for d in shape):
            return None
        total += math.prod(int(d) for d in shape) * np.dtype(dtype).itemsize
    return total


def _get_saver_or_default():
    """Returns the Saver of the ``SAVERS`` collection, or creates the default one.

    Copies TF's ``_get_saver_or_default`` (``tensorflow/python/training/saver.py``, r1.15),
    which ``CheckpointSaverHook`` uses when given neither a saver nor a scaffold with one:
    the one item of the default graph's ``GraphKeys.SAVERS`` (``"savers"``) collection;
    when the collection is empty, a new ``Saver()`` over all global variables (resolved at
    its first save), added to the collection so later calls return the same Saver.

    Difference from TF: TF creates ``Saver(sharded=True, allow_empty=True)``. psrt always
    writes one file (``sharded`` is ignored), and the default Saver keeps
    ``allow_empty=False``, as psrt's hook always created it: a graph without variables
    fails at the first save with ``ValueError("No variables to save")``.

    Returns:
        A :class:`Saver`, or whatever single item the collection holds.

    Raises:
        RuntimeError: The collection holds more than one item ("More than one item in
            collection savers. Please indicate which one to use by passing it to the
            constructor.", TF's message).
    """
    collection_key = GraphKeys.SAVERS
    savers = get_collection(collection_key)
    if savers:
        if len(savers) > 1:
            raise RuntimeError(
                "More than one item in collection {}. Please indicate which one to use by "
                "passing it to the constructor.".format(collection_key))
        return savers[0]
    saver = Saver()
    add_to_collection(collection_key, saver)
    return saver


class Saver:
    """Saves and restores variables and their optimizer state, as ``tf.train.Saver``.

    A checkpoint is one safetensors file holding each variable under its checkpoint name
    (its ``.name``, or the dict key when ``var_list`` is a dict), each of its optimizer
    slots under ``"<name>/<slot>"`` (``"W/Adam"``, ``"W/Adam_1"``, ``"W/Momentum"``,
    ``"W/Adagrad"``) and the optimizer's non-slot state (``"beta1_power"``) as the
    session names it. Restore matches by name only, so it works for any number and
    placement of ps tasks.

    Example::

        saver = psrt.train.Saver(max_to_keep=2)
        for step in range(1000):
            sess.run(train_op)
            if step % 100 == 0:
                saver.save(sess, "/train/model.ckpt", global_step=step)
        saver.restore(sess, psrt.train.latest_checkpoint("/train"))

    Args:
        var_list: None (all global variables, from ``psrt.variables.global_variables()``,
            looked up at the first save/restore/build and then kept, as TF snapshots them
            when the Saver is built), a list of Variables (saved under their ``.name``),
            or a dict of checkpoint name to Variable (the variable's slots are renamed
            with it: ``{"w": W}`` saves ``"w"`` and ``"w/Adam"``).
        reshape: If True, restoring a tensor whose stored shape differs from the
            variable's is allowed when both hold the same number of elements.
        sharded: Ignored (psrt always writes one file).
        max_to_keep: How many recent checkpoints to keep (int >= 0). None or 0 keeps all
            files, and then, as TF, the state file lists only the latest. Default 5.
        keep_checkpoint_every_n_hours: When a checkpoint falls out of the ``max_to_keep``
            window, keep its file anyway if it was written more than this many hours
            after the previous one kept this way (first: after the Saver was built).
            Kept files are no longer listed in the state file. Default 10000.0.
        name, restore_sequentially, saver_def, builder, write_version, filename: Ignored;
            accepted for TF's signature (psrt has no graph ops to build).
        defer_build: Accepted for TF's signature; as TF, True together with a
            ``var_list`` is a ValueError. Variables are resolved lazily either way.
        allow_empty: If False (default), saving or restoring with no variables raises
            ValueError("No variables to save"); if True the Saver is a no-op.
        pad_step_number: If True, the step in file names is zero-padded to 8 digits
            (``model.ckpt-00000150``) so they sort.
        save_relative_paths: If True, the state file records paths relative to its
            directory, so the directory can be copied and read elsewhere. If False (TF's
            default) paths are recorded as given: absolute when ``save_path`` is.

    Raises:
        TypeError: ``var_list`` is not None, a list or a dict of Variables.
        ValueError: Duplicate names in ``var_list``; bad ``max_to_keep``.
    """

    def __init__(self, var_list=None, reshape=False, sharded=False, max_to_keep=5,
                 keep_checkpoint_every_n_hours=10000.0, name=None,
                 restore_sequentially=False, saver_def=None, builder=None,
                 defer_build=False, allow_empty=False, write_version=2,
                 pad_step_number=False, save_relative_paths=False, filename=None) -> None:
        if defer_build and var_list:
            raise ValueError("If `var_list` is provided then build cannot be deferred. "
                             "Either set defer_build=False or var_list=None.")
        if max_to_keep is not None and (isinstance(max_to_keep, bool)
                                        or not isinstance(max_to_keep, (int, np.integer))
                                        or max_to_keep < 0):
            raise ValueError("max_to_keep must be None or an int >= 0; got %r" % (max_to_keep,))
        self._var_list = var_list
        self._reshape = bool(reshape)
        self._max_to_keep = int(max_to_keep) if max_to_keep is not None else None
        self._keep_checkpoint_every_n_hours = float(keep_checkpoint_every_n_hours)
        self._allow_empty = bool(allow_empty)
        self._pad_step_number = bool(pad_step_number)
        self._save_relative_paths = bool(save_relative_paths)
        self._name = name
        self._pairs: list[tuple[str, object]] | None = None
        self._session_to_ckpt: dict[str, str] = {}
        self._prefixes: list[str] = []
        self._last_checkpoints: list[tuple[str, float]] = []
        self._checkpoints_to_be_deleted: list[tuple[str, float]] = []
        self._next_checkpoint_time = time.time() + self._keep_checkpoint_every_n_hours * 3600
        if var_list is not None:
            self.build()

    # ----- variables and names

    def build(self) -> None:
        """Resolves ``var_list`` now (for ``var_list=None``, the current global variables).

        Raises:
            ValueError: No variables and ``allow_empty`` is False.
        """
        if self._pairs is not None:
            return
        var_list = self._var_list
        if var_list is None:
            var_list = list(global_variables())
        pairs = _var_list_to_pairs(var_list)
        if not pairs and not self._allow_empty:
            raise ValueError("No variables to save")
        self._pairs = pairs
        self._session_to_ckpt = {v.name: key for key, v in pairs}
        self._prefixes = sorted((v.name for _, v in pairs), key=len, reverse=True)

    def _variables(self) -> list:
        self.build()
        return [v for _, v in self._pairs]

    def _ckpt_name(self, session_name: str) -> str:
        """The checkpoint name of a session state key: a variable renamed by a dict
        ``var_list`` carries its slots (``"<var name>/<slot>"``) with it."""
        mapped = self._session_to_ckpt.get(session_name)
        if mapped is not None:
            return mapped
        for prefix in self._prefixes:
            if session_name.startswith(prefix + "/"):
                return self._session_to_ckpt[prefix] + session_name[len(prefix):]
        return session_name

    def _to_checkpoint_names(self, state: Mapping) -> dict:
        out = {}
        origin = {}
        for key, value in state.items():
            name = self._ckpt_name(key)
            if name in out:
                raise ValueError("Session state keys %r and %r both map to checkpoint name %r; "
                                 "rename one in var_list" % (origin[name], key, name))
            out[name] = value
            origin[name] = key
        return out

    # ----- bookkeeping of kept checkpoints, as TF

    @property
    def last_checkpoints(self) -> list[str]:
        """Not-yet-deleted checkpoint paths, oldest first (list of str)."""
        return [p for p, _ in self._last_checkpoints]

    def set_last_checkpoints(self, last_checkpoints) -> None:
        """DEPRECATED (as TF): use :meth:`set_last_checkpoints_with_time`.

        Sets the kept checkpoints with timestamp +inf, so that
        ``keep_checkpoint_every_n_hours`` never deletes them.
        """
        if not isinstance(last_checkpoints, list):
            raise TypeError("last_checkpoints must be a list; got %s"
                            % type(last_checkpoints).__name__)
        self._last_checkpoints = [(s, math.inf) for s in last_checkpoints]

    def set_last_checkpoints_with_time(self, last_checkpoints_with_time) -> None:
        """Sets the kept checkpoints.

        Args:
            last_checkpoints_with_time: ``[(path, timestamp), ...]``, oldest first;
                timestamps in seconds since the Epoch.

        Raises:
            TypeError: Not a list.
        """
        if not isinstance(last_checkpoints_with_time, list):
            raise TypeError("last_checkpoints_with_time must be a list; got %s"
                            % type(last_checkpoints_with_time).__name__)
        self._last_checkpoints = [(p, float(t)) for p, t in last_checkpoints_with_time]

    def recover_last_checkpoints(self, checkpoint_paths) -> None:
        """Recovers the kept-checkpoint list after a restart, as TF.

        Each path that exists is kept with its file's mtime as timestamp; missing ones
        are dropped. Typical use:
        ``saver.recover_last_checkpoints(get_checkpoint_state(d).all_model_checkpoint_paths)``.

        Args:
            checkpoint_paths: Checkpoint paths, oldest first (list of str).
        """
        recovered = []
        for p in checkpoint_paths:
            mtime = get_checkpoint_mtimes([p])
            if mtime:
                recovered.append((p, mtime[0]))
        self.set_last_checkpoints_with_time(recovered)

    def _record_last_checkpoint(self, latest_save_path: str) -> None:
        if not self._max_to_keep:
            return
        self._last_checkpoints = [p for p in self._last_checkpoints if p[0] != latest_save_path]
        self._last_checkpoints.append((latest_save_path, time.time()))
        if len(self._last_checkpoints) > self._max_to_keep:
            self._checkpoints_to_be_deleted.append(self._last_checkpoints.pop(0))

    def _maybe_delete_old_checkpoints(self, meta_graph_suffix: str = "meta") -> None:
        if not self._checkpoints_to_be_deleted:
            return
        path, timestamp = self._checkpoints_to_be_deleted.pop(0)
        if timestamp > self._next_checkpoint_time:
            self._next_checkpoint_time += self._keep_checkpoint_every_n_hours * 3600
            return
        try:
            remove_checkpoint(path, meta_graph_suffix=meta_graph_suffix)
        except OSError as e:
            _logger.warning("Ignoring: %s", e)

    # ----- save / restore

    @staticmethod
    def _state_session(sess):
        """The psrt Session under a MonitoredTrainingSession (kept as ``_sess``)."""
        for _ in range(8):
            if hasattr(sess, "_psrt_read_state") or getattr(sess, "_sess", None) is None:
                break
            sess = sess._sess
        if not hasattr(sess, "_psrt_read_state"):
            raise TypeError("Saver needs a psrt Session (or an open MonitoredTrainingSession); "
                            "got %r" % (sess,))
        return sess

    def save(self, sess, save_path, global_step=None, latest_filename=None,
             meta_graph_suffix="meta", write_meta_graph=True, write_state=True,
             strip_default_attrs=False, save_debug_info=False) -> str | None:
        """Saves the variables and their optimizer state, as ``tf.train.Saver.save``.

        Writes ``save_path-STEP`` (or ``save_path`` without a step) atomically, then, if
        ``write_state``, records it in the ``max_to_keep`` window, rewrites the state
        file (last) and deletes the checkpoint that fell out of the window unless
        ``keep_checkpoint_every_n_hours`` preserves it.

        Args:
            sess: The psrt session (the contract is in the module docstring).
            save_path: Path prefix of the checkpoint, e.g. ``"/train/model.ckpt"``. Its
                directory must exist.
            global_step: None, an int, or a Variable whose value (``int(sess.run(v))``)
                is appended as ``-STEP``.
            latest_filename: Name of the state file; default ``"checkpoint"``.
            meta_graph_suffix: Suffix of meta graph files deleted with old checkpoints.
            write_meta_graph, strip_default_attrs, save_debug_info: Ignored (psrt has no
                graph to export).
            write_state: If False, neither the state file nor the kept list is updated
                and nothing is deleted.

        Returns:
            The path written (``save_path + "-" + str(step)``, or ``save_path``), to pass
            to :meth:`restore`; None when the Saver has no variables and ``allow_empty``.

        Raises:
            ValueError: ``latest_filename`` has a directory part or equals the file
                name of ``save_path``; the directory of ``save_path`` does not exist; no
                variables and not ``allow_empty``.
            RuntimeError: The checkpoint path is the state file's path.
            psrt.errors.OpError: The session failed to read the state, or a write failed
                (e.g. PermissionDeniedError, ResourceExhaustedError).
        """
        sess = self._state_session(sess)
        if latest_filename is None:
            latest_filename = _DEFAULT_LATEST_FILENAME
        if os.path.split(latest_filename)[0]:
            raise ValueError("'latest_filename' must not contain path components: %r"
                             % latest_filename)
        save_path = os.fspath(save_path)
        step = None
        if global_step is not None:
            if isinstance(global_step, (int, np.integer)) and not isinstance(global_step, bool):
                step = int(global_step)
            else:
                step = int(sess.run(global_step))
            if self._pad_step_number:
                checkpoint_file = "%s-%08d" % (save_path, step)
            else:
                checkpoint_file = "%s-%d" % (save_path, step)
        else:
            checkpoint_file = save_path
            if os.path.basename(save_path) == latest_filename:
                raise ValueError("'latest_filename' collides with 'save_path': '%s' and '%s'"
                                 % (latest_filename, save_path))

        variables = self._variables()
        if not variables:
            return None
        save_path_parent = os.path.dirname(save_path)
        # An object store (s3://) has no directories to check: its prefixes exist once an
        # object is under them.
        remote = file_io.is_url(save_path)
        if not remote and not os.path.isdir(save_path_parent or os.curdir):
            raise ValueError("Parent directory of {} doesn't exist, can't save.".format(save_path))

        # Progress lines while it takes long: the pull from the ps tasks, then the write.
        state = sess._psrt_read_state(
            variables, progress=Progress(f"Saving checkpoint {checkpoint_file}: reading from "
                                         f"the ps tasks", _state_bytes(sess, variables)))
        tensors = self._to_checkpoint_names(state)
        metadata = {"format": FORMAT}
        if step is not None:
            metadata["global_step"] = str(step)
        try:
            with Progress(f"Saving checkpoint {checkpoint_file}: writing", None) as progress:
                write_checkpoint_file(checkpoint_file, tensors, metadata, progress=progress)
        except (errors.NotFoundError, errors.FailedPreconditionError) as e:
            if not remote and not os.path.isdir(save_path_parent or os.curdir):
                raise ValueError("Parent directory of {} doesn't exist, can't save."
                                 .format(save_path)) from e
            raise

        if write_state:
            self._record_last_checkpoint(checkpoint_file)
            _update_checkpoint_state_internal(
                save_dir=save_path_parent, model_checkpoint_path=checkpoint_file,
                all_model_checkpoint_paths=self.last_checkpoints,
                latest_filename=latest_filename,
                save_relative_paths=self._save_relative_paths)
            self._maybe_delete_old_checkpoints(meta_graph_suffix=meta_graph_suffix)
        return checkpoint_file

    def restore(self, sess, save_path) -> None:
        """Restores variables and their optimizer state, as ``tf.train.Saver.restore``.

        Every key the session expects (``sess._psrt_expected_state``) is checked against
        the checkpoint's header (presence, shape, dtype), then every tensor is read and its
        CRC-32C checked (TF's tensor bundle check), all before anything is assigned: a
        failed restore leaves the session's variables untouched. Tensors in the checkpoint
        that the session does not expect are ignored, as TF.

        Beyond TF, a corrupt checkpoint is not the end: when reading ``save_path`` fails
        with DataLossError (checksum mismatch, truncated or unreadable file) and
        ``save_path`` is listed in the ``checkpoint`` state file of its own directory, the
        checkpoints listed before it there (``all_model_checkpoint_paths``, so only older
        ones) are tried newest first, and the first that restores whole is used; a WARNING
        names the corrupt file, its error and the checkpoint restored instead. This holds
        for an explicit ``save_path`` too (never a newer checkpoint than the one asked
        for, never one from another directory or another state file name), and it is how
        the chief of MonitoredTrainingSession, Supervisor and SessionManager, which
        restore the latest checkpoint through this method, gets past a corrupt latest one.
        A state file written with ``max_to_keep`` None or 0 lists only the latest
        checkpoint, so there is nothing to fall back to.

        Args:
            sess: The psrt session.
            save_path: A path returned by :meth:`save` or :func:`latest_checkpoint`.

        Raises:
            ValueError: ``save_path`` is None ("Can't load save_path when it is None."),
                or no file exists there ("The passed save_path is not a valid
                checkpoint: ..."), as TF.
            psrt.errors.NotFoundError: A key is missing from the checkpoint; the message
                holds TF's "Key W not found in checkpoint" and the keys present.
            psrt.errors.InvalidArgumentError: A stored shape or dtype differs from the
                variable's (both are named).
            psrt.errors.DataLossError: ``save_path`` is corrupt (its message names the file
                and the tensor, and for a mismatch both checksums) and no older checkpoint
                listed in the state file restores either (each one tried is named, with
                why it failed).
        """
        variables = self._variables()
        if not variables:
            return
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        save_path = os.fspath(save_path)
        if not checkpoint_exists(save_path):
            raise ValueError("The passed save_path is not a valid checkpoint: " + save_path)
        _logger.info("Restoring parameters from %s", save_path)
        sess = self._state_session(sess)
        expected = sess._psrt_expected_state(variables)
        try:
            tensors = self._read_for_restore(save_path, expected)
        except errors.DataLossError as e:
            tensors = self._restore_fallback(save_path, expected, e)
        total = sum(int(np.asarray(v).nbytes) for v in tensors.values())
        sess._psrt_write_state(variables, tensors, progress=Progress(
            f"Restoring checkpoint {save_path}: writing to the ps tasks", total))

    def _read_for_restore(self, save_path: str, expected: Mapping) -> dict[str, np.ndarray]:
        """The checked tensors of ``save_path`` for the session's ``expected`` state, keyed
        by session name and shaped as the variables; nothing is assigned."""
        reader = CheckpointReader(save_path)
        stored_shapes = reader.get_variable_to_shape_map()
        stored_dtypes = reader.get_variable_to_dtype_map()
        wanted = {}
        for session_name, (shape, dtype) in expected.items():
            name = self._ckpt_name(session_name)
            if name not in stored_shapes:
                raise errors.NotFoundError(
                    None, None, _RESTORE_MISSING + "Key %s not found in checkpoint %s "
                    "(needed for %r; the checkpoint holds %s)"
                    % (name, save_path, session_name, _names_preview(stored_shapes)))
            shape = tuple(int(d) for d in shape)
            stored = tuple(stored_shapes[name])
            if len(stored) == len(shape) and all(d in (-1, e) for d, e in zip(shape, stored)):
                shape = stored  # -1: any size (a dynamic table's row count)
            if stored != shape:
                same_size = math.prod(stored) == math.prod(shape)
                if not (self._reshape and same_size):
                    raise errors.InvalidArgumentError(
                        None, None, _RESTORE_MISMATCH + "Assign requires shapes of both tensors "
                        "to match. lhs shape= %s rhs shape= %s: variable %r has shape %s but "
                        "checkpoint %s holds shape %s for key %r%s"
                        % (_shape_str(shape), _shape_str(stored), session_name,
                           _shape_str(shape), save_path, _shape_str(stored), name,
                           "" if self._reshape else " (Saver(reshape=True) accepts the same "
                           "number of elements in another shape)"))
            dtype = np.dtype(dtype)
            if stored_dtypes[name] != dtype:
                raise errors.InvalidArgumentError(
                    None, None, _RESTORE_MISMATCH + "tensor_name = %s; expected dtype %s does "
                    "not equal original dtype %s (variable %r, checkpoint %s)"
                    % (name, dtype.name, stored_dtypes[name].name, session_name, save_path))
            wanted[session_name] = (name, shape)
        with Progress(f"Restoring checkpoint {save_path}: reading", None) as progress:
            values = reader._get_tensors(list(dict.fromkeys(n for n, _ in wanted.values())),
                                         progress)
        tensors = {}
        for session_name, (name, shape) in wanted.items():
            value = values[name]
            if value.shape != shape:
                value = value.reshape(shape)
            tensors[session_name] = value
        return tensors

    def _restore_fallback(self, save_path: str, expected: Mapping,
                          error: errors.DataLossError) -> dict[str, np.ndarray]:
        """The tensors of the newest checkpoint listed before the corrupt ``save_path`` in
        its directory's state file that restores whole; ``error`` (with what was tried
        added) when there is none."""
        state_file = _get_checkpoint_filename(os.path.dirname(save_path), None)
        candidates = _listed_before(save_path)
        tried = []
        for path in candidates:
            if not checkpoint_exists(path):
                tried.append("%s: no such file" % path)
                continue
            try:
                tensors = self._read_for_restore(path, expected)
            except (errors.DataLossError, errors.NotFoundError, errors.InvalidArgumentError,
                    errors.UnimplementedError) as e:
                _logger.warning("Older checkpoint %s, tried because %s is corrupt, cannot be "
                                "restored: %s", path, save_path, e)
                tried.append("%s: %s" % (path, e))
                continue
            _logger.warning("Checkpoint %s is corrupt: %s. Restored %s instead, the newest "
                            "intact checkpoint listed before it in %s.",
                            save_path, error, path, state_file)
            return tensors
        if candidates:
            why = ("no older checkpoint listed in %s restores either: %s"
                   % (state_file, "; ".join(tried)))
        else:
            why = "no older checkpoint is listed with it in %s to fall back to" % state_file
        raise errors.DataLossError(None, None, "%s\n(%s)" % (error.message, why)) from error

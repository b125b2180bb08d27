"""Dynamic embedding tables: rows keyed by arbitrary int64 ids, with no vocabulary size.

Beyond TF1: TF's embeddings need a table of fixed ``[vocab, dim]`` and ids in
``[0, vocab)``; recommendation models see ids (user ids, item ids, hashed features) whose
set is not known in advance. As TensorFlow Recommenders-Addons' ``dynamic_embedding`` and
Monolith's collisionless tables, a :class:`DynamicEmbeddingVariable` is a hash table on the
ps tasks: the first lookup of an id creates its row there from the table's initializer, and
the optimizer keeps its slots per row.

* **Sharding.** The table is split into ``num_shards`` shards, each a hash table on one ps
  task (placed by the device scope, as variables are: under ``replica_device_setter`` the
  shards go round-robin over the ps tasks). Id ``k`` lives in shard ``k % num_shards``
  (Python's modulo: non-negative for a negative id), as TRA's default partition function.
* **Rows on first use.** Element ``j`` of the row of id ``k`` starts as element
  ``k * dim + j`` (mod 2^64) of the initializer's stream on the ps (docs/protocol.md, "Hash
  tables"), so a row depends on its id and the seed only: not on the order ids arrive, the
  shard count or the ps task that holds it. The initializer must be one the ps computes
  (``zeros``, ``ones``, ``constant``, ``random_uniform``, ``random_normal``,
  ``truncated_normal``, ``glorot_*``, ``variance_scaling``; their fans are those of the
  row shape ``[dim]``).
* **Training.** :func:`embedding_lookup` returns a tensor of the rows of the fed ids; a loss
  through it differentiates those rows, and ``minimize`` pushes them as row-sparse
  gradients (id-keyed) to the shards, beside the dense gradients of the step: a step moves
  the rows it touches, never the table. Any optimizer works (its sparse kernel runs on the
  rows: FTRL, Adagrad, Adam, ...). Updates of one shard are serialized on its ps task.
* **Size.** :meth:`DynamicEmbeddingVariable.size` and ``memory_bytes`` read the shards' row
  counts and memory; ``max_rows`` bounds the rows (split evenly over the shards, rounded
  up): a step that would create more fails with ResourceExhaustedError naming the table,
  its rows and the limit, and creates nothing.
* **Eviction.** :meth:`DynamicEmbeddingVariable.evict` removes rows not looked up or
  trained for ``unseen_steps`` updates of their shard, or trained fewer than ``min_count``
  times; :class:`EvictionHook` does it every N steps on the chief. An evicted id that comes
  back starts again from the initializer.
* **Checkpoints.** ``Saver`` saves the rows that exist, keyed by id:
  ``"<name>-keys"`` (int64 [N]), ``"<name>-counts"`` (int64 [N], how often each row was
  trained), ``"<name>-values"`` ([N, dim]) and ``"<name>/<slot>-values"`` per optimizer
  slot. A restore empties the table and writes every row into shard ``id % num_shards`` of
  the restoring graph, so a checkpoint restores into any number of shards and ps tasks.
"""

from __future__ import annotations

import logging
import math
import operator
from typing import Any, Iterable, Sequence

import numpy as np

from psrt.framework import device as _placement
from psrt.framework import errors
from psrt.framework.ops import GLOBAL_VARIABLES, get_default_graph
from psrt.ops.variables import Variable

__all__ = [
    "DynamicEmbeddingVariable",
    "get_variable",
]

_logger = logging.getLogger("psrt")


def _default_num_shards() -> int:
    """The ps tasks of the innermost ``replica_device_setter`` in scope, else 1."""
    for entry in reversed(_placement._stack.entries):
        chooser = getattr(entry.function, "__self__", None)
        tasks = getattr(chooser, "_ps_tasks", None)
        if tasks:
            return int(tasks)
    return 1


class TableShard(Variable):
    """One shard of a :class:`DynamicEmbeddingVariable`: a hash table on one ps task.

    Its shape is ``(0, dim...)``: rows exist only as ids are used. It is a variable of the
    graph (so sessions register it, initializers and ``report_uninitialized_variables``
    see it), but its value cannot be fetched whole; use the table's methods.
    """

    def __init__(self, table: "DynamicEmbeddingVariable", index: int, name: str,
                 trainable: bool, collections: Sequence[str] | None) -> None:
        graph = get_default_graph()
        self._name = graph.unique_name(name)
        self._init_spec = table._init_spec
        self._init_fn = None
        self._initial_value = None
        self._dtype = table.dtype
        self._shape = (0,) + table.row_shape
        self._table = (table, index)
        self._finish_init(graph, trainable, collections)

    def _ps_initial_value(self) -> dict[str, Any] | None:
        """The row initializer's spec (None: zeros), sent with every registration."""
        return dict(self._init_spec) if self._init_spec is not None else None

    def _table_params(self, init: bool) -> dict[str, float]:
        """What the session adds to the registration: a table, its shard's row limit, and
        whether to (re)initialize it (empty it)."""
        table = self._table[0]
        return {"table": 1.0, "max_rows": float(table._shard_max_rows),
                "initialize": 1.0 if init else 0.0}

    def _ps_spec(self, init: bool) -> tuple[str, tuple[int, ...], str, dict[str, float], Any]:
        """As a variable's, with the table's parameters; a table's row specification always
        travels (a shard is created with it)."""
        dtype, shape, kernel, hyper, _ = super()._ps_spec(False)
        return dtype, shape, kernel, {**hyper, **self._table_params(init)}, self._ps_initial_value()

    def initial_value_array(self) -> np.ndarray:
        """A shard has no value to compute: always InvalidArgumentError."""
        raise errors.InvalidArgumentError(
            None, None, f"'{self._name}' is a shard of dynamic embedding table "
            f"'{self._table[0].name}': it has no value to compute, its rows are made on the ps "
            f"task at first use")

    def __repr__(self) -> str:
        return (f"<psrt.dynamic_embedding shard {self._table[1]} of '{self._table[0].name}' "
                f"dim={self._shape[1:]} dtype={self._dtype.name} device='{self.device}'>")


class DynamicEmbeddingVariable:
    """A hash table of embedding rows keyed by int64 ids, sharded over the ps tasks (see the
    module docstring). Create it with :func:`get_variable`.

    Attributes:
        name: The table's name (str); its shards are ``"<name>/shard_<k>"``.
        dim: Elements of one row (int); ``row_shape`` is ``(dim,)``.
        dtype: float32 or float64.
        num_shards: Shards (int).
        max_rows: The table's row limit (int) or None.
    """

    def __init__(self, name: str, dim: int, dtype: Any, initializer: Any, num_shards: int,
                 max_rows: int | None, trainable: bool,
                 collections: Sequence[str] | None) -> None:
        self._name = name
        self.row_shape = (int(dim),)
        self._dtype = np.dtype(dtype)
        self.num_shards = num_shards
        self.max_rows = max_rows
        self._shard_max_rows = 0 if max_rows is None else math.ceil(max_rows / num_shards)
        self._init_spec = _row_spec(initializer, self.row_shape, self._dtype, name)
        self.shards = [TableShard(self, k, f"{name}/shard_{k}", trainable, collections)
                       for k in range(num_shards)]

    @property
    def name(self) -> str:
        """The table's name (str)."""
        return self._name

    @property
    def dim(self) -> int:
        """Elements of one row (int)."""
        return self.row_shape[0]

    @property
    def dtype(self) -> np.dtype:
        """The rows' dtype: float32 or float64."""
        return self._dtype

    @property
    def key_dtype(self) -> np.dtype:
        """int64, as TRA's ``key_dtype``."""
        return np.dtype(np.int64)

    def _get_variable_list(self) -> list[TableShard]:
        return list(self.shards)

    def shard_of(self, ids: Any) -> np.ndarray:
        """The shard of each id (int64 array of ``ids``' shape): ``id % num_shards``."""
        return np.asarray(ids, np.int64) % self.num_shards

    def _stats(self, sess: Any) -> list[dict[str, Any]]:
        sess = raw_session(sess)
        out = []
        for shard in self.shards:
            handle = sess._handle(shard)
            target = sess._client.var_info(handle)
            listed = {d["name"]: d for d in sess._client.list_variables(target[0])}
            out.append(listed[shard.name])
        return out

    def size(self, sess: Any) -> int:
        """Rows the table holds now (int), over all its shards (as TRA's ``size()``)."""
        return sum(int(d["rows"]) for d in self._stats(sess))

    def memory_bytes(self, sess: Any) -> int:
        """Bytes the shards hold for rows, slots and their index (int)."""
        return sum(int(d["bytes"]) for d in self._stats(sess))

    def evict(self, sess: Any, unseen_steps: int = 0, min_count: int = 0) -> int:
        """Removes the rows not seen (looked up or trained) for at least ``unseen_steps``
        updates of their shard, or trained fewer than ``min_count`` times; 0 turns a rule
        off. Returns the rows removed (int).

        Raises:
            ValueError: a negative threshold.
        """
        limit = (1 << 63) - 1
        if not (0 <= unseen_steps <= limit and 0 <= min_count <= limit):
            raise ValueError(f"unseen_steps {unseen_steps} and min_count {min_count} must be "
                             f"in [0, 2^63 - 1] (0: rule off)")
        sess = raw_session(sess)
        removed = 0
        for shard in self.shards:
            n, _ = sess._client.table_evict(sess._handle(shard), int(unseen_steps),
                                            int(min_count))
            removed += int(n)
        return removed

    def __repr__(self) -> str:
        return (f"<psrt.dynamic_embedding.DynamicEmbeddingVariable '{self._name}' "
                f"dim={self.dim} dtype={self._dtype.name} shards={self.num_shards}>")


def _row_spec(initializer: Any, row_shape: tuple[int, ...], dtype: np.dtype,
              name: str) -> dict[str, Any] | None:
    if initializer is None:
        return None
    spec_fn = getattr(initializer, "_spec", None)
    spec = spec_fn(row_shape, dtype) if spec_fn is not None else None
    if spec is None:
        raise TypeError(f"dynamic embedding table '{name}': the initializer must be one the ps "
                        f"task computes (psrt.zeros_initializer, ones_initializer, "
                        f"constant_initializer with a scalar, random_uniform_initializer, "
                        f"random_normal_initializer, truncated_normal_initializer, "
                        f"glorot_*_initializer, variance_scaling_initializer); got "
                        f"{initializer!r}")
    spec.pop("offset", None)
    spec.pop("full_shape", None)
    return spec


def get_variable(name: str, dim: int = 1, value_dtype: Any = np.float32,
                 initializer: Any = None, num_shards: int | None = None,
                 max_rows: int | None = None, trainable: bool = True,
                 key_dtype: Any = np.int64,
                 collections: Sequence[str] | None = None) -> DynamicEmbeddingVariable:
    """A new dynamic embedding table, as TensorFlow Recommenders-Addons'
    ``tfra.dynamic_embedding.get_variable`` (see the module docstring).

    Args:
        name: The table's name (str).
        dim: Elements of one row (int >= 1).
        value_dtype: float32 (default) or float64.
        initializer: A psrt initializer the ps task computes (e.g.
            ``psrt.truncated_normal_initializer(stddev=0.05)``); None: zeros.
        num_shards: Shards (each a hash table on one ps task); default: the ps tasks of the
            ``replica_device_setter`` in scope, else 1.
        max_rows: The most rows the table may hold (None: no limit); split evenly over the
            shards, rounded up.
        trainable: If True the shards are in ``TRAINABLE_VARIABLES``, so ``minimize``
            trains the rows its loss looks up.
        key_dtype: int64 (TRA's default); int32 ids are widened.
        collections: Collections of the shards; default ``[GLOBAL_VARIABLES]``.

    Returns:
        A :class:`DynamicEmbeddingVariable`.

    Raises:
        ValueError: ``dim``, ``num_shards`` or ``max_rows`` below 1, or a key dtype that is
            not an integer.
        TypeError: a value dtype other than float32/float64, or an initializer the ps cannot
            compute.
    """
    dim = _whole(dim, "dim")
    if dim < 1:
        raise ValueError(f"dim must be >= 1; got {dim}")
    if np.dtype(key_dtype) not in (np.dtype(np.int64), np.dtype(np.int32)):
        raise ValueError(f"key_dtype must be int64 (or int32, widened); got "
                         f"{np.dtype(key_dtype)}")
    dt = np.dtype(value_dtype)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"dynamic embedding table '{name}': value_dtype must be float32 or "
                        f"float64; got {dt}")
    shards = _default_num_shards() if num_shards is None else _whole(num_shards, "num_shards")
    if shards < 1:
        raise ValueError(f"num_shards must be >= 1; got {num_shards}")
    if max_rows is not None and _whole(max_rows, "max_rows") < 1:
        raise ValueError(f"max_rows must be >= 1 or None; got {max_rows}")
    graph = get_default_graph()
    tables = graph.__dict__.setdefault("_psrt_dynamic_tables", {})
    if name in tables:
        # As TF's get_variable (and TRA's): one table per name, else two would share a
        # checkpoint's keys.
        raise ValueError(f"Variable {name} already exists, disallowed: a dynamic embedding "
                         f"table of that name was created before in this graph")
    # (Variable._finish_init adds trainable shards to TRAINABLE_VARIABLES.)
    cols = list(collections) if collections is not None else [GLOBAL_VARIABLES]
    table = DynamicEmbeddingVariable(name, dim, dt, initializer, shards,
                                     None if max_rows is None else int(max_rows),
                                     bool(trainable), cols)
    tables[name] = table
    return table


def _whole(value: Any, what: str) -> int:
    """``value`` as an int; TypeError for a float or string (no silent truncation)."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer; got {value!r}") from None


# ---- checkpoints (the session's state protocol, psrt/checkpoint/) -----------------------

def tables_of(variables: Iterable[Any]) -> list[DynamicEmbeddingVariable]:
    """The distinct tables among ``variables`` (tables or their shards), in order."""
    seen: dict[int, DynamicEmbeddingVariable] = {}
    for v in variables:
        t = v if isinstance(v, DynamicEmbeddingVariable) else (
            v._table[0] if isinstance(v, TableShard) else None)
        if t is not None:
            seen.setdefault(id(t), t)
    return list(seen.values())


def _slot_names(table: DynamicEmbeddingVariable) -> list[str]:
    opt = table.shards[0]._optimizer
    return list(opt._slot_var_names()) if opt is not None else []


def expected_state(table: DynamicEmbeddingVariable) -> dict[str, tuple[tuple[int, ...],
                                                                         np.dtype]]:
    """Checkpoint names, shapes (-1: any row count) and dtypes of a table's state."""
    rows = (-1,) + table.row_shape
    out = {f"{table.name}-keys": ((-1,), np.dtype(np.int64)),
           f"{table.name}-counts": ((-1,), np.dtype(np.int64)),
           f"{table.name}-values": (rows, table.dtype)}
    for s in _slot_names(table):
        out[f"{table.name}/{s}-values"] = (rows, table.dtype)
    return out


def raw_session(sess: Any) -> Any:
    """The psrt Session under a MonitoredTrainingSession (or any wrapper keeping it as
    ``_sess``), so table methods take what a training loop holds.

    Raises:
        RuntimeError: the monitored session is closed (it holds no session).
    """
    seen = 0
    while not hasattr(sess, "_client") and seen < 8:
        inner = getattr(sess, "_sess", None)
        if inner is None:
            raise RuntimeError(f"{type(sess).__name__} holds no open psrt Session (closed?); "
                               f"pass the psrt.Session or an open MonitoredTrainingSession")
        sess = inner
        seen += 1
    return sess

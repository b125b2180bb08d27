"""Summaries for TensorBoard, as TF1's ``tf.summary``: summary ops, ``merge``/``merge_all``,
``FileWriter`` and ``FileWriterCache``; event files are written by tensorboardX.

How a summary op fits psrt (which has no dataflow graph)
--------------------------------------------------------
``scalar``, ``histogram`` and ``text`` return a summary op: a fetchable object, added to the
``SUMMARIES`` collection of the default graph as TF does. ``Session.run`` of it (alone, in a
list, or with a train op) returns the serialized ``Summary`` protocol buffer, ``bytes``, as
TF's string tensor, so ``writer.add_summary(sess.run(merged), step)`` works unchanged. Its
value is computed from what it summarizes, fetched in the same ``run`` as everything else
(variables in the same pull; each op once per run). What a summary may summarize, TF1's
tensor on the left:

* a variable (``W``): a :class:`psrt.Variable`, partitioned variable or optimizer slot; its
  value is pulled from its ps task.
* the loss (``loss`` with ``train_op = opt.minimize(loss)``): the train op itself,
  ``psrt.summary.scalar("loss", train_op)``; its value is the loss of that train op's step
  *in the same run* (``sess.run([train_op, merged])``, or a ``SummarySaverHook`` beside the
  training loop's run). A summary never runs a training step: fetched in a run without its
  train op it raises InvalidArgumentError, as TF does for a loss whose placeholders are not
  fed.
* a placeholder (``tf.placeholder(name="x")``): its name, ``"x"``; the value is
  ``feed_dict["x"]`` (psrt feeds are keyed by name). A name nothing feeds is the variable of
  that name, else InvalidArgumentError "You must feed a value for 'x'", as TF.
* a tensor computed from placeholders (``tf.reduce_mean(x)``): a Python function whose
  parameters name the feeds it needs, ``lambda x: x.mean()`` (``**kwargs`` receives every
  feed). A ``psrt.Tensor`` is not a summary input (yet): summarize the train op (its
  loss), a variable, or such a function.
* a constant: a number or a numpy array (for ``text``, a ``str`` or ``bytes`` is the text
  itself, not a name).

Summary values are TF1's: ``scalar`` writes ``simple_value``, ``histogram`` a
``HistogramProto`` with TF's own bucket limits (TF's ``histogram.cc``: 10 % wide buckets
from 1e-12 to 1e20, mirrored, empty runs collapsed), ``text`` a string tensor for
TensorBoard's text plugin. Tags follow TF's ``summary_scope``: illegal characters become
``_``, a taken name gets ``_1``, ``_2``..., and ``family`` prefixes the tag.

``Summary``, ``Event``, ``SessionLog``, ``SummaryDescription`` and ``TaggedRunMetadata``
are the protocol buffer classes (tensorboardX's copies of TF's, imported on first use), so
``psrt.Summary(value=[psrt.Summary.Value(tag="acc", simple_value=0.9)])`` is TF1's
``tf.Summary(...)``.

Example::

    loss_summary = psrt.summary.scalar("loss", train_op)
    psrt.summary.histogram("weights", W)
    merged = psrt.summary.merge_all()
    writer = psrt.summary.FileWriter("/tmp/logs")
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        for step in range(1000):
            _, summary = sess.run([train_op, merged], feed_dict={"x": x, "y": y})
            writer.add_summary(summary, step)
    writer.close()
"""

from __future__ import annotations

import functools
import importlib
import io as _io
import inspect
import logging
import re
import sys
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from psrt.framework import errors
from psrt.framework import ops as _ops
from psrt.framework.ops import Operation
from psrt.ops.training_ops import SlotVariable, TrainOp
from psrt.ops.variables import PartitionedVariable, Variable

_logger = logging.getLogger("psrt")

SUMMARIES = "summaries"
"""The collection summary ops join by default (TF's ``tf.GraphKeys.SUMMARIES``)."""

SUMMARY_OP = "summary_op"
"""The collection of the merged summary op a Scaffold or Supervisor uses by default (TF's
``tf.GraphKeys.SUMMARY_OP``)."""

# The protocol buffer classes this module exports, by the tensorboardX module defining them.
_PROTOS = {"Summary": "summary_pb2", "SummaryDescription": "summary_pb2",
           "HistogramProto": "summary_pb2", "SummaryMetadata": "summary_pb2",
           "Event": "event_pb2", "SessionLog": "event_pb2", "TaggedRunMetadata": "event_pb2"}


def _proto(module: str) -> Any:
    """A tensorboardX protobuf module (``summary_pb2``...). Imported on first use: importing
    tensorboardX takes ~70 ms, which only processes that write summaries pay."""
    return importlib.import_module(f"tensorboardX.proto.{module}")


def proto_attribute(name: str) -> Any:
    """The protocol buffer class ``name`` (``Summary``, ``Event``, ...) from tensorboardX.

    Raises:
      AttributeError: ``name`` is not one of them (``module 'psrt.summary' has no attribute``).
    """
    if name in _PROTOS:
        return getattr(_proto(_PROTOS[name]), name)
    raise AttributeError(f"module 'psrt.summary' has no attribute {name!r}")


def __getattr__(name: str) -> Any:
    return proto_attribute(name)


# ---- names and tags --------------------------------------------------------------------------

_INVALID_TAG_CHARACTERS = re.compile(r"[^-/\w.]")


def _clean_tag(name: str) -> str:
    """``name`` with characters other than letters, digits, ``_-/.`` replaced by ``_`` and
    leading slashes removed, as TF's ``summary_op_util.clean_tag`` (logged when changed)."""
    new_name = _INVALID_TAG_CHARACTERS.sub("_", name).lstrip("/")
    if new_name != name:
        _logger.info("Summary name %s is illegal; using %s instead.", name, new_name)
    return new_name


def _graph_for_new_op() -> _ops.Graph:
    graph = _ops.get_default_graph()
    if graph.finalized:
        raise RuntimeError("Graph is finalized and cannot be modified.")
    return graph


def _summary_scope(graph: _ops.Graph, name: str, family: str | None) -> tuple[str, str]:
    """``(tag, op name)`` as TF's ``summary_scope``: the op name is ``name`` (``family/name``
    with a family) made unique in the graph; the tag is the op name, prefixed by the family
    again when there is one (TF shows it as the TensorBoard tab)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a summary needs a name (a non-empty str); got {name!r}")
    name = _clean_tag(name)
    family = None if family is None else _clean_tag(family)
    scope = graph.unique_name(name if family is None else f"{family}/{name}")
    return (scope if family is None else f"{family}/{scope}"), scope


# ---- what a summary reads --------------------------------------------------------------------

def _missing_feed(name: str, owner: str) -> Exception:
    return errors.InvalidArgumentError(
        None, None, f"You must feed a value for '{name}' (read by {owner}): pass "
        f"feed_dict={{'{name}': value}}")


class _Input:
    """The value a summary op summarizes, resolved at every run as the module docstring
    describes: from the run's fetched values (variables, ops), its feeds, a function of its
    feeds, or a constant."""

    def __init__(self, tensor: Any, graph: _ops.Graph, owner: str,
                 str_is_name: bool = True) -> None:
        self.tensor = tensor
        self.graph = graph
        self.owner = owner
        self.params: list[tuple[str, bool]] = []  # a function's (parameter, has default)
        self.all_feeds = False
        if isinstance(tensor, (Variable, PartitionedVariable, SlotVariable)):
            self.kind = "fetch"
        elif isinstance(tensor, TrainOp):
            self.kind = "train_op"
        elif isinstance(tensor, Operation):
            self.kind = "fetch"
        elif isinstance(tensor, str) and str_is_name:
            self.kind = "name"
            self.tensor = tensor[:-2] if tensor.endswith(":0") else tensor
        elif isinstance(tensor, (str, bytes, np.ndarray, np.generic, int, float, list, tuple)):
            self.kind = "const"
        elif callable(tensor):
            self.kind = "call"
            self._read_signature(tensor)
        elif isinstance(getattr(tensor, "name", None), str):
            # A named fetchable psrt does not know here (e.g. a placeholder object): its
            # feed when fed, else whatever Session.run makes of it.
            self.kind = "named"
        else:
            raise TypeError(f"{owner}: cannot summarize {tensor!r} ({type(tensor).__name__}); "
                            f"expected a psrt Variable, a train op, a feed name (str), a "
                            f"function of feeds, or a constant")

    def _read_signature(self, fn: Callable[..., Any]) -> None:
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return  # a builtin without a signature: called with no arguments
        for p in sig.parameters.values():
            if p.kind == p.VAR_KEYWORD:
                self.all_feeds = True
            elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                self.params.append((p.name, p.default is not p.empty))

    def fetch(self, feeds: dict[str, Any], fetched: Sequence[Any]) -> Any:
        """What ``Session.run`` fetches for this input in a run with ``feeds`` and the
        leaves ``fetched``: the variable or op, or None when the value is known without.
        Called before anything of the run executes, so a missing feed fails the whole run.

        Raises:
            InvalidArgumentError: a feed the input needs is missing, or its train op is not
                one of ``fetched``.
        """
        kind = self.kind
        if kind == "fetch":
            return self.tensor
        if kind == "train_op":
            if not any(f is self.tensor for f in fetched):
                raise errors.InvalidArgumentError(
                    None, None, f"{self.owner} reads the loss of train op "
                    f"'{self.tensor.name}', which exists only in a run that also runs that "
                    f"train op: fetch both, e.g. sess.run([train_op, summary_op]) (psrt "
                    f"cannot compute the loss without a training step yet)")
            return self.tensor
        if kind == "name":
            if self.tensor in feeds:
                return None
            var = self.graph.get_variable_by_name(self.tensor)
            if var is None:
                raise _missing_feed(self.tensor, self.owner)
            return var
        if kind == "named":
            name = self.tensor.name
            return None if (name[:-2] if name.endswith(":0") else name) in feeds \
                else self.tensor
        if kind == "call":
            for name, has_default in self.params:
                if name not in feeds and not has_default:
                    raise _missing_feed(name, self.owner)
        return None

    def value(self, fetched_value: Any, feeds: dict[str, Any]) -> Any:
        """This input's value in the run: ``fetched_value`` (what Session.run returned for
        :meth:`fetch`'s answer), or the feed, function value or constant."""
        kind = self.kind
        if kind in ("fetch", "train_op"):
            return fetched_value
        if kind == "name":
            return feeds[self.tensor] if self.tensor in feeds else fetched_value
        if kind == "named":
            name = self.tensor.name
            name = name[:-2] if name.endswith(":0") else name
            return feeds[name] if name in feeds else fetched_value
        if kind == "call":
            if self.all_feeds:
                return self.tensor(**feeds)
            return self.tensor(**{name: feeds[name] for name, _ in self.params
                                  if name in feeds})
        return self.tensor


# ---- summary ops -----------------------------------------------------------------------------

class _SummaryOp:
    """A summary op, as TF's scalar string tensor: ``Session.run`` of it returns the
    serialized ``Summary`` (bytes).

    Attributes:
        name: The op's name (str, unique in its graph, without TF's ``:0``).
        tags: The tags of the values it produces (list of str).
        graph: The :class:`psrt.Graph` it was created in.
    """

    def __init__(self, name: str, tags: list[str], graph: _ops.Graph,
                 collections: Iterable[str]) -> None:
        self.name = name
        self.tags = tags
        self.graph = graph
        for key in collections:
            graph.add_to_collection(key, self)

    @property
    def op(self) -> "_SummaryOp":
        """The op itself (psrt has no separate tensor objects)."""
        return self

    @property
    def dtype(self) -> str:
        """``"string"``, as TF's summary tensors."""
        return "string"

    def eval(self, feed_dict: dict[Any, Any] | None = None, session: Any = None) -> bytes:
        """``session.run(self, feed_dict)``, as ``tf.Tensor.eval``.

        Raises:
            ValueError: no ``session`` (psrt has no default session).
        """
        if session is None:
            raise ValueError("psrt has no default session: pass session=")
        return session.run(self, feed_dict=feed_dict)

    # The computed-fetch protocol of Session.run: the inputs are fetched in the same run,
    # then the value is computed from them.

    def _psrt_fetch_inputs(self, feeds: dict[str, Any], fetched: Sequence[Any]) -> Any:
        raise NotImplementedError

    def _summary_values(self, values: Any, feeds: dict[str, Any]) -> list[Any]:
        raise NotImplementedError

    def _psrt_compute(self, values: Any, feeds: dict[str, Any]) -> bytes:
        pb = _proto("summary_pb2")
        return pb.Summary(value=self._summary_values(values, feeds)).SerializeToString()

    def __repr__(self) -> str:
        return f"<psrt.summary op '{self.name}' tags={self.tags}>"


class _ValueSummary(_SummaryOp):
    """A summary of one input: ``scalar``, ``histogram`` or ``text``."""

    def __init__(self, kind: str, name: str, tensor: Any, collections: Sequence[str] | None,
                 family: str | None, make: Callable[[str, Any], Any]) -> None:
        graph = _graph_for_new_op()
        tag, op_name = _summary_scope(graph, name, family)
        self.kind = kind
        self._make = make
        self._input = _Input(tensor, graph, f"{kind} summary '{tag}'",
                             str_is_name=kind != "text")
        super().__init__(op_name, [tag], graph,
                         [SUMMARIES] if collections is None else collections)

    def _psrt_fetch_inputs(self, feeds: dict[str, Any], fetched: Sequence[Any]) -> Any:
        return [self._input.fetch(feeds, fetched)]

    def _summary_values(self, values: Any, feeds: dict[str, Any]) -> list[Any]:
        return [self._make(self.tags[0], self._input.value(values[0], feeds))]


class _MergedSummary(_SummaryOp):
    """``merge``: the values of its inputs, in order, in one Summary."""

    def __init__(self, inputs: Iterable[Any], collections: Sequence[str] | None,
                 name: str | None) -> None:
        graph = _graph_for_new_op()
        self._items: list[Any] = []   # summary ops, and serialized Summary constants
        tags: list[str] = []
        for x in inputs:
            if isinstance(x, _SummaryOp):
                self._items.append(x)
                tags.extend(x.tags)
            elif isinstance(x, bytes):
                self._items.append(x)
            elif hasattr(x, "SerializeToString") and hasattr(x, "value"):
                self._items.append(x.SerializeToString())
            else:
                raise TypeError(f"merge: inputs must be summary ops (psrt.summary.scalar, "
                                f"...), serialized Summary bytes or Summary protos; got "
                                f"{x!r}")
        super().__init__(graph.unique_name(_clean_tag(name or "Merge") or "Merge"), tags, graph,
                         [] if collections is None else collections)

    def _psrt_fetch_inputs(self, feeds: dict[str, Any], fetched: Sequence[Any]) -> Any:
        return [x._psrt_fetch_inputs(feeds, fetched) if isinstance(x, _SummaryOp) else []
                for x in self._items]

    def _summary_values(self, values: Any, feeds: dict[str, Any]) -> list[Any]:
        out: list[Any] = []
        for x, v in zip(self._items, values):
            if isinstance(x, _SummaryOp):
                out.extend(x._summary_values(v, feeds))
            else:
                parsed = _proto("summary_pb2").Summary()
                parsed.ParseFromString(x)
                out.extend(parsed.value)
        seen: set[str] = set()
        for value in out:
            if value.tag and value.tag in seen:
                raise errors.InvalidArgumentError(
                    None, None, f"Duplicate tag {value.tag} found in summary inputs of "
                    f"merge '{self.name}'")
            seen.add(value.tag)
        return out


def _scalar_value(tag: str, value: Any) -> Any:
    arr = np.asarray(value)
    if arr.ndim != 0 or arr.dtype.kind not in "biuf":
        raise errors.InvalidArgumentError(
            None, None, f"scalar summary '{tag}' takes one real number; got "
            f"{arr.dtype}{list(arr.shape)}: {value!r:.80}")
    pb = _proto("summary_pb2")
    return pb.Summary.Value(tag=tag, simple_value=float(arr))


@functools.cache
def _bucket_limits() -> np.ndarray:
    """TF's default histogram bucket limits (``histogram.cc``): 1e-12 growing by 10 % up to
    1e20, then DBL_MAX; mirrored below zero, with 0 between."""
    pos = []
    v = 1.0e-12
    while v < 1.0e20:
        pos.append(v)
        v *= 1.1
    pos.append(sys.float_info.max)
    return np.array([-x for x in reversed(pos)] + [0.0] + pos)


def _histogram_value(tag: str, values: Any) -> Any:
    """A ``Summary.Value`` with TF's histogram of ``values`` (``Histogram::Add`` per value,
    then ``EncodeToProto``: non-empty buckets, each run of empty ones collapsed into one)."""
    try:
        x = np.asarray(values, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise errors.InvalidArgumentError(
            None, None, f"histogram summary '{tag}' takes real numbers; got "
            f"{type(values).__name__}") from None
    finite = np.isfinite(x)
    if not finite.all():
        bad = x[~finite][0]
        raise errors.InvalidArgumentError(
            None, None, f"{'Nan' if np.isnan(bad) else 'Infinity'} in summary histogram for: "
                        f"{tag}")
    limits = _bucket_limits()
    # upper_bound: the first limit greater than the value (DBL_MAX itself: the last bucket).
    index = np.minimum(np.searchsorted(limits, x, side="right"), len(limits) - 1)
    counts = np.bincount(index, minlength=len(limits))
    nonzero = counts > 0
    keep = nonzero.copy()
    keep[:-1] |= nonzero[1:]   # a run of empty buckets shows as its last one
    keep[-1] = True
    pb = _proto("summary_pb2")
    hist = pb.HistogramProto(
        min=float(x.min()) if x.size else sys.float_info.max,
        max=float(x.max()) if x.size else -sys.float_info.max,
        num=float(x.size), sum=float(x.sum()), sum_squares=float(x @ x),
        bucket_limit=limits[keep].tolist(), bucket=counts[keep].astype(np.float64).tolist())
    return pb.Summary.Value(tag=tag, histo=hist)


def _text_value(tag: str, value: Any) -> Any:
    """A ``Summary.Value`` holding ``value`` (str, bytes or an array of them, any shape) as
    TF's text summary: a string tensor with the text plugin's metadata."""
    arr = np.asarray(value, dtype=object)
    flat = []
    for s in arr.reshape(-1).tolist():
        if isinstance(s, str):
            flat.append(s.encode("utf-8"))
        elif isinstance(s, bytes):
            flat.append(s)
        else:
            raise errors.InvalidArgumentError(
                None, None, f"text summary '{tag}' takes str or bytes (or an array of them); "
                f"got {type(s).__name__} {s!r:.80}")
    summary_pb2 = _proto("summary_pb2")
    tensor_pb2 = _proto("tensor_pb2")
    shape_pb2 = _proto("tensor_shape_pb2")
    text_pb2 = _proto("plugin_text_pb2")
    tensor = tensor_pb2.TensorProto(
        dtype=_proto("types_pb2").DT_STRING, string_val=flat,
        tensor_shape=shape_pb2.TensorShapeProto(
            dim=[shape_pb2.TensorShapeProto.Dim(size=d) for d in arr.shape]))
    metadata = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(
        plugin_name="text", content=text_pb2.TextPluginData(version=0).SerializeToString()))
    return summary_pb2.Summary.Value(tag=tag, tensor=tensor, metadata=metadata)


def scalar(name: str, tensor: Any, collections: Sequence[str] | None = None,
           family: str | None = None) -> _SummaryOp:
    """A summary op writing one real number, as ``tf.summary.scalar``.

    Args:
        name: The op's name, also the tag (the series name in TensorBoard); characters
            other than letters, digits and ``_-/.`` become ``_``; a taken name gets ``_1``...
        tensor: What to summarize (see the module docstring): a scalar Variable, a train op
            (its loss in the same run), a feed name, a function of feeds, or a number.
        collections: Collections to add the op to; default ``[SUMMARIES]``.
        family: Optional prefix of the tag (the TensorBoard tab).

    Returns:
        A summary op; ``Session.run`` of it returns a serialized ``Summary`` (bytes) with
        one value, ``simple_value`` = the number.

    Raises:
        ValueError: ``tensor`` is a Variable that is not a scalar (shape ``()``), or no name.
        RuntimeError: the default graph is finalized.
        InvalidArgumentError: (at run) the value is not one real number, a feed is missing,
            or the train op does not run in the same run.
    """
    if isinstance(tensor, (Variable, PartitionedVariable)) and tuple(tensor.shape) != ():
        raise ValueError(f"scalar summary '{name}': variable '{tensor.name}' has shape "
                         f"{list(tensor.shape)}; a scalar summary needs shape []")
    return _ValueSummary("scalar", name, tensor, collections, family, _scalar_value)


def histogram(name: str, values: Any, collections: Sequence[str] | None = None,
              family: str | None = None) -> _SummaryOp:
    """A summary op writing a histogram of ``values``, as ``tf.summary.histogram``.

    The buckets are TF's default ones, so TensorBoard's histogram and distribution views
    show psrt's summaries as they show TF's.

    Args:
        name: The op's name and tag (cleaned and made unique as :func:`scalar`'s).
        values: What to summarize, any shape (see the module docstring): a Variable, a
            feed name, a function of feeds, or an array.
        collections: Collections to add the op to; default ``[SUMMARIES]``.
        family: Optional prefix of the tag.

    Returns:
        A summary op; its run value is a serialized ``Summary`` with one ``histo`` value
        (min, max, num, sum, sum_squares and the non-empty buckets).

    Raises:
        InvalidArgumentError: (at run) a NaN or infinite value ("Nan in summary histogram
            for: NAME", as TF), or values that are not real numbers.
    """
    return _ValueSummary("histogram", name, values, collections, family, _histogram_value)


def text(name: str, tensor: Any, collections: Sequence[str] | None = None) -> _SummaryOp:
    """A summary op writing text for TensorBoard's text dashboard, as ``tf.summary.text``.

    Args:
        name: The op's name and tag.
        tensor: The text: a ``str`` or ``bytes`` (the text itself, not a name), an array
            of them (TensorBoard shows 1-D and 2-D arrays as tables), a Variable-free
            function of feeds returning one, or a placeholder object.
        collections: Collections to add the op to; default ``[SUMMARIES]``.

    Returns:
        A summary op; its run value is a serialized ``Summary`` with one string tensor
        value tagged ``name``, with the text plugin's metadata.

    Raises:
        InvalidArgumentError: (at run) a value that is not text.
    """
    return _ValueSummary("text", name, tensor, collections, None, _text_value)


class _ImageSummary(_ValueSummary):
    """``image``: one ``Summary.Value`` per image, tagged ``name/image/i``."""

    def __init__(self, name: str, tensor: Any, max_outputs: int,
                 collections: Sequence[str] | None, family: str | None) -> None:
        self.max_outputs = max_outputs
        super().__init__("image", name, tensor, collections, family, self._no_make)
        self.base_tag = self.tags[0]
        self.tags = ([f"{self.base_tag}/image/{i}" for i in range(max_outputs)]
                     if max_outputs > 1 else [f"{self.base_tag}/image"])

    @staticmethod
    def _no_make(tag: str, value: Any) -> Any:
        raise AssertionError("unused")

    def _summary_values(self, values: Any, feeds: dict[str, Any]) -> list[Any]:
        return _image_values(self.base_tag, self._input.value(values[0], feeds),
                             self.max_outputs)


def _uint8_image(img: np.ndarray) -> np.ndarray:
    """TF's NormalizeFloatImage (summary_image_op.cc): non-negative images scaled by
    255 / max, others by 127 / max|x| around 128 (truncating to uint8), non-finite pixels
    red."""
    flat = img.reshape(-1, img.shape[-1]).astype(np.float32)
    finite = np.isfinite(flat).all(axis=1)
    good = flat[finite]
    lo = float(good.min()) if good.size else np.inf
    hi = float(good.max()) if good.size else -np.inf
    if lo < 0:
        peak = max(abs(lo), abs(hi))
        scale, offset = (0.0 if peak < 1e-6 else 127.0 / peak), 128.0
    else:
        scale, offset = (0.0 if hi < 1e-6 else 255.0 / hi), 0.0
    out = np.empty(flat.shape, np.uint8)
    with np.errstate(invalid="ignore"):
        out[finite] = (good * np.float32(scale) + np.float32(offset)).astype(np.uint8)
    out[~finite] = np.array([255, 0, 0, 255], np.uint8)[:img.shape[-1]]
    return out.reshape(img.shape)


def _image_values(tag: str, value: Any, max_outputs: int) -> list[Any]:
    """TF's ImageSummary kernel: the first ``max_outputs`` images of a [batch, h, w, c]
    uint8 or float value, PNG-encoded (Pillow)."""
    arr = np.asarray(value)
    if arr.ndim != 4 or arr.shape[3] not in (1, 3, 4):
        raise errors.InvalidArgumentError(
            None, None, f"Tensor must be 4-D with last dim 1, 3, or 4, not "
                        f"{list(arr.shape)} (image summary '{tag}')")
    if arr.dtype != np.uint8 and arr.dtype.kind != "f":
        raise errors.InvalidArgumentError(
            None, None, f"image summary '{tag}' takes uint8, float16, float32 or float64 "
                        f"images; got {arr.dtype}")
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("psrt.summary.image needs Pillow to encode PNG: pip install "
                          "'psrt-runtime[image]' (or pip install Pillow)") from None

    pb = _proto("summary_pb2")
    out = []
    _, h, w, depth = arr.shape
    for i in range(min(max_outputs, arr.shape[0])):
        img = arr[i] if arr.dtype == np.uint8 else _uint8_image(arr[i])
        buf = _io.BytesIO()
        mode = {1: "L", 3: "RGB", 4: "RGBA"}[depth]
        Image.fromarray(img[..., 0] if depth == 1 else img, mode).save(buf, "PNG")
        out.append(pb.Summary.Value(
            tag=f"{tag}/image/{i}" if max_outputs > 1 else f"{tag}/image",
            image=pb.Summary.Image(height=h, width=w, colorspace=depth,
                                   encoded_image_string=buf.getvalue())))
    return out


def image(name: str, tensor: Any, max_outputs: int = 3,
          collections: Sequence[str] | None = None, family: str | None = None) -> _SummaryOp:
    """A summary op writing up to ``max_outputs`` images, as ``tf.summary.image``.

    Args:
        name: The op's name; the tags are ``name/image/0``, ``name/image/1``... (``name/
            image`` when ``max_outputs`` is 1), as TF's ImageSummary kernel.
        tensor: A 4-D ``[batch, height, width, channels]`` value (channels 1, 3 or 4):
            a psrt Tensor (e.g. decoded images), a feed name, a function of feeds, or an
            array. uint8 is written as it is; floats are scaled as TF's: non-negative
            images by ``255 / max``, others by ``127 / max|x|`` around 128; NaN and inf
            pixels are red.
        max_outputs: How many of the batch's images to write (default 3).
        collections: Collections to add the op to; default ``[SUMMARIES]``.
        family: Optional prefix of the tags.

    Returns:
        A summary op; its run value is a serialized ``Summary`` with one ``image`` value
        (PNG, height, width, colorspace = channels) per image written.

    Raises:
        ValueError: ``max_outputs`` below 1.
        ImportError: (at run) Pillow is missing (the ``image`` extra).
        InvalidArgumentError: (at run) a value that is not 4-D with 1, 3 or 4 channels.
    """
    if int(max_outputs) < 1:
        raise ValueError(f"max_outputs must be >= 1; got {max_outputs}")
    return _ImageSummary(name, tensor, int(max_outputs), collections, family)


def merge(inputs: Iterable[Any], collections: Sequence[str] | None = None,
          name: str | None = None) -> _SummaryOp:
    """A summary op with every value of ``inputs``, as ``tf.summary.merge``.

    Args:
        inputs: Summary ops (including other merges), serialized ``Summary`` bytes or
            ``Summary`` protos.
        collections: Collections to add the op to; default none.
        name: The op's name (default ``"Merge"``).

    Returns:
        A summary op whose run value is one serialized ``Summary`` with the values of all
        inputs in order; their inputs are fetched in the same run.

    Raises:
        TypeError: an input of another kind.
        InvalidArgumentError: (at run) two values with the same tag, as TF.
    """
    return _MergedSummary(inputs, collections, name)


def merge_all(key: str = SUMMARIES, scope: str | None = None,
              name: str | None = None) -> _SummaryOp | None:
    """Merges every summary op in collection ``key`` of the default graph, as
    ``tf.summary.merge_all``.

    Args:
        key: The collection (default ``SUMMARIES``, which scalar/histogram/text join).
        scope: Keep only ops whose name ``re.match``es it.
        name: The merged op's name.

    Returns:
        None when the collection holds no summary op, else a :func:`merge` of them.
    """
    ops = _ops.get_default_graph().get_collection(key)
    if scope is not None:
        ops = [op for op in ops if re.match(scope, getattr(op, "name", ""))]
    if not ops:
        return None
    return merge(ops, name=name)





"""TF1 names psrt does not implement, and what to use instead.

Each public module's ``__getattr__`` asks :func:`missing` before its plain AttributeError,
so ``psrt.contrib`` or ``psrt.estimator`` fail with a message naming the TF1 name and the
way forward instead of "module 'psrt' has no attribute 'contrib'". Adding a name is one
row in ``MISSING``; tests/test_missing.py checks every row.
"""

from __future__ import annotations

# (module, name) -> what to use instead. Module names are psrt's ("psrt", "psrt.train", ...).
MISSING: dict[tuple[str, str], str] = {
    # tf.*
    ("psrt", "estimator"): "psrt has no Estimator API; write the training loop with "
                           "psrt.train.MonitoredTrainingSession and hooks",
    ("psrt", "keras"): "psrt has no Keras; write the model as a numpy function and train it "
                       "with a psrt.train optimizer",
    ("psrt", "InteractiveSession"): "use psrt.Session(server.target)",
    ("psrt", "while_loop"): "use a Python loop over numpy values",
    ("psrt", "saved_model"): "psrt saves checkpoints only: psrt.train.Saver",
    ("psrt", "tables_initializer"): "psrt.global_variables_initializer() initializes "
                                    "psrt.dynamic_embedding tables too; drop it",
    # tf.metrics.*, tf.losses.* (the streaming metrics and losses psrt lacks)
    ("psrt.metrics", "average_precision_at_k"): "psrt.metrics has precision_at_k and "
                                                "recall_at_k, not the average precision; "
                                                "compute it from psrt.nn.top_k's indices",
    ("psrt.metrics", "sparse_average_precision_at_k"): "psrt.metrics has precision_at_k and "
                                                       "recall_at_k, not the average "
                                                       "precision",
    ("psrt.losses", "mean_pairwise_squared_error"): "psrt.losses has the pointwise losses; "
                                                    "write it with psrt's math ops",
    # tf.nn.*
    # tf.train.*
    ("psrt.train", "import_meta_graph"): "psrt has no meta graphs: rebuild the model in "
                                         "Python, then psrt.train.Saver().restore",
    ("psrt.train", "export_meta_graph"): "psrt has no meta graphs; psrt.train.Saver saves "
                                         "the variables",
    ("psrt.train", "write_graph"): "psrt has no GraphDef to write",
}


def missing(module: str, name: str) -> AttributeError | None:
    """The error for ``module.name`` when it is a TF1 name psrt does not have, else None.

    The error is an AttributeError (so ``hasattr`` and ``getattr(..., default)`` keep
    working) whose message names the TF1 name and what to use instead.
    """
    hint = MISSING.get((module, name))
    if hint is None:
        return None
    tf_name = "tf" + module[len("psrt"):] + "." + name
    return AttributeError(f"{module}.{name} ({tf_name} in TensorFlow 1.x) is not implemented "
                          f"by psrt: {hint}")


_CONTRIB_HINT = ("psrt.contrib has only framework.get_or_create_global_step, "
                 "layers.fully_connected/l2_regularizer/xavier_initializer/"
                 "variance_scaling_initializer and nn.deprecated_flipped_*; its distributed "
                 "pieces are in psrt.train (e.g. GreedyLoadBalancingStrategy, "
                 "byte_size_load_fn)")


def contrib_missing(name: str) -> AttributeError:
    """The error for any ``psrt.contrib.<name>`` psrt does not have (``tf.contrib.slim``,
    ``tf.contrib.learn``, ...): TF's name and what psrt.contrib has instead."""
    return AttributeError(f"psrt.contrib.{name} (tf.contrib.{name} in TensorFlow 1.x) is not "
                          f"implemented by psrt: {_CONTRIB_HINT}")


def module_getattr(module: str):  # type: ignore[no-untyped-def]
    """A module-level ``__getattr__`` for ``module`` raising :func:`missing`'s error, or the
    plain "module ... has no attribute" AttributeError for other names."""
    def __getattr__(name: str) -> object:
        err = missing(module, name)
        if err is not None:
            raise err
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return __getattr__

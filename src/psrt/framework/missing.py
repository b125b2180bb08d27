"""TF1 names psrt does not implement, and what to use instead.

Each public module's ``__getattr__`` asks :func:`missing` before its plain AttributeError,
so ``psrt.contrib`` or ``psrt.nn.conv2d`` fail with a message naming the TF1 name and the
way forward instead of "module 'psrt' has no attribute 'contrib'". Adding a name is one
row in ``MISSING``; tests/test_missing.py checks every row.
"""

from __future__ import annotations

# (module, name) -> what to use instead. Module names are psrt's ("psrt", "psrt.train", ...).
MISSING: dict[tuple[str, str], str] = {
    # tf.*
    ("psrt", "contrib"): "psrt has no tf.contrib; its distributed pieces are in psrt.train "
                         "(e.g. GreedyLoadBalancingStrategy, byte_size_load_fn)",
    ("psrt", "estimator"): "psrt has no Estimator API; write the training loop with "
                           "psrt.train.MonitoredTrainingSession and hooks",
    ("psrt", "keras"): "psrt has no Keras; write the model as a numpy function and train it "
                       "with a psrt.train optimizer",
    ("psrt", "layers"): "psrt has no tf.layers; create the weights with psrt.get_variable "
                        "and compute the layer in numpy",
    ("psrt", "data"): "psrt has no tf.data; feed numpy batches through feed_dict (e.g. "
                      "psrt.datasets.mnist's next_batch) or a psrt.train.QueueRunner",
    ("psrt", "InteractiveSession"): "use psrt.Session(server.target)",
    ("psrt", "while_loop"): "use a Python loop over numpy values",
    ("psrt", "saved_model"): "psrt saves checkpoints only: psrt.train.Saver",
    ("psrt", "local_variables_initializer"): "psrt has no local variables; drop it, or use "
                                             "psrt.global_variables_initializer()",
    ("psrt", "tables_initializer"): "psrt.global_variables_initializer() initializes "
                                    "psrt.dynamic_embedding tables too; drop it",
    # tf.nn.*
    ("psrt.nn", "conv2d"): "psrt.nn has embedding lookups, activations and cross-entropies "
                           "only; write the convolution in numpy inside a @psrt.function "
                           "(autograd differentiates it)",
    ("psrt.nn", "dropout"): "multiply by a numpy mask inside a @psrt.function",
    ("psrt.nn", "max_pool"): "compute it in numpy inside a @psrt.function",
    ("psrt.nn", "nce_loss"): "compute it in numpy inside a @psrt.function over the rows of "
                             "psrt.nn.embedding_lookup (only those rows are pushed)",
    ("psrt.nn", "sampled_softmax_loss"): "compute it in numpy inside a @psrt.function over "
                                         "rows of psrt.nn.embedding_lookup",
    # tf.train.*
    ("psrt.train", "shuffle_batch"): "use a psrt.train.QueueRunner filling a "
                                     "psrt.train.FIFOQueue with shuffled numpy batches",
    ("psrt.train", "batch"): "use a psrt.train.QueueRunner filling a psrt.train.FIFOQueue "
                             "with numpy batches",
    ("psrt.train", "string_input_producer"): "read the files in a Python producer given to "
                                             "psrt.train.QueueRunner",
    ("psrt.train", "slice_input_producer"): "slice the numpy arrays in a Python producer "
                                            "given to psrt.train.QueueRunner",
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


def module_getattr(module: str):  # type: ignore[no-untyped-def]
    """A module-level ``__getattr__`` for ``module`` raising :func:`missing`'s error, or the
    plain "module ... has no attribute" AttributeError for other names."""
    def __getattr__(name: str) -> object:
        err = missing(module, name)
        if err is not None:
            raise err
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return __getattr__

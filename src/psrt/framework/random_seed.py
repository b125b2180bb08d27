"""Random seeds, as tensorflow/python/framework/random_seed.py: a graph-level seed and the
op-level seeds derived from it."""

from __future__ import annotations

from psrt.framework.ops import get_default_graph

DEFAULT_GRAPH_SEED = 87654321  # TF's, used when only an op seed is given


_MAXINT32 = 2**31 - 1  # TF's random_seed._MAXINT32


def set_random_seed(seed: int | None) -> None:
    """Sets the default graph's random seed, as ``tf.set_random_seed``: initializers
    created without their own ``seed`` then draw deterministic values, each from the
    op-level seed TF would give it (the graph's count of random ops so far), so the same
    program gives the same initial values on every run and different variables different
    values (tensorflow/python/framework/random_seed.py, ``get_seed``)."""
    get_default_graph().seed = seed


def get_seed(op_seed: int | None) -> tuple[int | None, int | None]:
    """``(graph seed, op seed)`` for an op with ``op_seed``, as TF's ``random_seed.get_seed``
    (tensorflow/python/framework/random_seed.py): with a graph seed and no op seed, the op
    seed is the next of the graph's counter; with an op seed only, the graph seed is
    ``DEFAULT_GRAPH_SEED``; with neither, (None, None). Seeds are reduced modulo 2**31 - 1,
    and (0, 0) becomes (0, 2**31 - 1), as TF's."""
    graph = get_default_graph()
    if graph.seed is not None:
        op = graph._next_op_seed() if op_seed is None else int(op_seed)
        seeds: tuple[int | None, int | None] = (graph.seed % _MAXINT32, op % _MAXINT32)
    elif op_seed is not None:
        seeds = DEFAULT_GRAPH_SEED, int(op_seed) % _MAXINT32
    else:
        seeds = None, None
    return (0, _MAXINT32) if seeds == (0, 0) else seeds

"""psrt.ops: the graph side of variables, initializers, partitioners, embeddings, nn,
summaries, feature columns and dynamic tables.

Internal layer: import public names from the faces (``psrt``, ``psrt.train``, ...)."""

"""psrt.runtime: the only Python that imports psrt._core: sessions, the executor, servers, row
lookups.

Internal layer: import public names from the faces (``psrt``, ``psrt.train``, ...)."""

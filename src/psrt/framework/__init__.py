"""psrt.framework: value types, dtypes, errors, protos, graphs and collections, tensors and
autodiff, devices.

Internal layer: import public names from the faces (``psrt``, ``psrt.train``, ...)."""

"""psrt.checkpoint: checkpoint files, the checkpoint state file, readers and the Saver.

Internal layer: import public names from the faces (``psrt``, ``psrt.train``, ...)."""

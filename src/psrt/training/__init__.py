"""psrt.training: hooks, optimizers, synchronous replicas, moving averages, schedules, queue
runners and the monitored sessions.

Internal layer: import public names from the faces (``psrt``, ``psrt.train``, ...)."""

"""psrt.platform: process-wide set-up below everything else (the "psrt" logger, SIGTERM as
PID 1).

Internal layer: import public names from the faces (``psrt``, ``psrt.train``, ...)."""

"""Helpers of tests/test_atomic_push.py: a worker that dies (SIGKILL, sent to itself) in the
middle of pushing the gradient of a big variable, as a real subprocess.

Run as the child process::

    python tests/_push_task.py PS_ADDRESS MODE N

MODE is ``async`` (gradient descent, pushes streamed chunk by chunk), ``atomic`` (the same
with ``ConfigProto(atomic_pushes=True)``) or ``sync`` (``SyncReplicasOptimizer``, 2 replicas
of 2). The child initializes the model (:func:`build`), prints ``READY``, then runs one train
step whose gradient is ``KILLED_GRADIENT`` everywhere; a thread watching the session's
client kills the process once a quarter of the gradient's bytes are sent, so the ps task
sees a push cut off in the middle.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

import numpy as np

W0 = np.float32(0.5)             # every element's initial value
KILLED_GRADIENT = np.float32(1000.0)
LR = 1.0


def _loss(w: np.ndarray, x: Any = None) -> tuple[float, list[np.ndarray]]:
    """0.5 |w - x|^2 with x fed per run: gradient w - x (float32, exact for these values)."""
    g = (w - np.float32(x)).astype(np.float32)
    return 0.0, [g]


def build(mode: str, n: int) -> tuple[Any, Any, Any]:
    """The model on /job:ps/task:0 of the current default graph: ``(W, global_step,
    train_op)``; W float32[n] starts at W0."""
    import psrt  # noqa: PLC0415

    with psrt.device("/job:ps/task:0"):
        gs = psrt.train.get_or_create_global_step()
        w = psrt.Variable(np.full(n, W0, np.float32), name="W")
    opt: Any = psrt.train.GradientDescentOptimizer(LR)
    if mode == "sync":
        opt = psrt.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=2,
                                               total_num_replicas=2)
    return w, gs, opt.minimize(_loss, global_step=gs, var_list=[w])


def config(address: str, mode: str) -> Any:
    import psrt  # noqa: PLC0415

    return psrt.ConfigProto(cluster_def={"ps": [address]}, atomic_pushes=(mode == "atomic"),
                            sync_timeout_secs=60.0)


def main(address: str, mode: str, n: str) -> None:
    import psrt  # noqa: PLC0415

    size = int(n)
    _, _, train_op = build(mode, size)
    sess = psrt.Session(f"psrt://{address}", config=config(address, mode))
    sess.run(psrt.global_variables_initializer())
    client = sess._client
    base = client.bytes_sent
    quarter = size * 4 // 4

    def kill_mid_push() -> None:
        while client.bytes_sent - base < quarter:
            pass
        os.kill(os.getpid(), signal.SIGKILL)

    print("READY", flush=True)
    threading.Thread(target=kill_mid_push, daemon=True).start()
    sess.run(train_op, feed_dict={"x": W0 - KILLED_GRADIENT})
    print("PUSHED", flush=True)  # never reached: the push outlives the kill


if __name__ == "__main__":
    main(*sys.argv[1:])

"""Threads for the chunks of a convolution pass (psrt/ops/conv_ops.py).

A convolution pass is a loop over chunks of images: im2col into a cache-sized patch matrix
(the compiled kernel releases the GIL), one GEMM (``np.matmul`` releases it too), and for the
input gradient col2im back into those images' rows. Chunks of different images touch
different memory, so the loop splits into contiguous parts that run at once.

The threads are the BLAS's own: a pass that would give T > 1 BLAS threads to each GEMM
instead sets the BLAS to one thread (threadpoolctl, process-wide) and runs T parts, each
with single-threaded GEMMs on 1 MB chunks, and sets the BLAS back afterwards. Measured on a
quiet 2-core host, the MNIST conv net's step (benchmarks/test_bench_convnet.py): one BLAS
thread 14.1 steps/s, two BLAS threads splitting each GEMM 8.7 steps/s (every GEMM call waits
for both threads, whose spinning also takes the core the rest of the step needs). With a BLAS
limited to one thread (psrt-launch's share when workers fill the host, or
``OPENBLAS_NUM_THREADS=1``) a pass runs as one part, in the calling thread, as before,
unless the session's ``ConfigProto(intra_op_parallelism_threads=N)`` asks for N threads:
with a one-thread BLAS and N = 2 the step above ran at 20.0 steps/s (15.1 with the
defaults), its conv2d passes 1.4-1.9x faster.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

__all__: list[str] = []

_pool: list[ThreadPoolExecutor] = []
_intra_op = [0]   # ConfigProto.intra_op_parallelism_threads of the last session; 0: unset
_pool_lock = threading.Lock()
# One pass at a time sets the BLAS to one thread and back (another session's pass may run
# in another thread).
_blas_lock = threading.Lock()


def _executor(workers: int) -> ThreadPoolExecutor:
    with _pool_lock:
        if not _pool or _pool[0]._max_workers < workers:  # noqa: SLF001
            _pool[:] = [ThreadPoolExecutor(max_workers=workers,
                                           thread_name_prefix="psrt-conv")]
        return _pool[0]


def set_intra_op_threads(n: int) -> None:
    """The threads a conv2d pass uses from now on (a session's
    ``ConfigProto.intra_op_parallelism_threads``); 0: the BLAS's thread count."""
    _intra_op[0] = max(0, int(n))


def pass_threads(blas_threads: int) -> int:
    """Threads for a pass when the BLAS has ``blas_threads``: the intra-op setting, else
    the BLAS's count."""
    return _intra_op[0] or max(1, blas_threads)


def split(items: Sequence[Any], parts: int) -> list[Sequence[Any]]:
    """``items`` as at most ``parts`` contiguous, non-empty runs of near-equal length."""
    parts = max(1, min(parts, len(items)))
    size, extra = divmod(len(items), parts)
    out, at = [], 0
    for i in range(parts):
        n = size + (1 if i < extra else 0)
        out.append(items[at:at + n])
        at += n
    return out


def run_parts(work: Callable[[Sequence[Any]], Any], chunks: Sequence[Any], threads: int,
              blas: Sequence[Any], blas_threads: int) -> list[Any]:
    """``[work(part) for part in split(chunks, threads)]``, the parts at once (the first in
    the calling thread) with the BLAS controllers ``blas`` set to one thread meanwhile and
    back to ``blas_threads`` after. One part (``threads`` 1, or one chunk): in the calling thread,
    the BLAS untouched. An exception of a part is raised after every part ended."""
    parts = split(chunks, threads)
    if len(parts) == 1:
        return [work(parts[0])]
    with _blas_lock:
        for lib in blas:
            lib.set_num_threads(1)
        try:
            futures = [_executor(len(parts) - 1).submit(work, p) for p in parts[1:]]
            first: Any = None
            error: BaseException | None = None
            try:
                first = work(parts[0])
            except BaseException as e:  # noqa: BLE001 -- re-raised once the others ended
                error = e
            rest = []
            for f in futures:
                try:
                    rest.append(f.result())
                except BaseException as e:  # noqa: BLE001
                    error = error or e
            if error is not None:
                raise error
            return [first, *rest]
        finally:
            for lib in blas:
                lib.set_num_threads(blas_threads)

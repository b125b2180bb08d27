"""glibc malloc's thresholds, fixed for a training loop (beyond TF: TF brings its own
allocator).

A training step allocates and frees the same few arrays of 0.1-30 MB each time (pulled rows,
gradients, activations). glibc serves a block at or above its *mmap threshold* with a fresh
mmap, and gives the top of its heap back to the system once more than its *trim threshold*
(twice the mmap threshold) is free there; both thresholds move with the history of the
process (glibc raises the mmap threshold to the size of each mmapped block freed, up to
32 MiB). Depending on which arrays a process happened to free first (an evaluation lookup,
a checkpoint), the same step then either reuses heap memory or page-faults every array in
again: measured here, the [1e6,64] embedding benchmark ran at 630 or at 290 steps/s with
~1,000 minor page faults a step, with the same code, depending on what ran before.

:func:`fix_thresholds` sets the thresholds to where glibc's own rule ends (mmap 32 MiB, trim
64 MiB), which also stops their drift: blocks under 32 MiB come from the heap and up to
64 MiB of freed heap stays in the process for the next step; larger blocks (a big model's
values and gradients) are still mmapped and returned when freed. A session calls it once per
process; ``PSRT_MALLOC_TUNING=0`` leaves malloc alone. Other C libraries: nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import platform

_logger = logging.getLogger("psrt")

# <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 32 << 20   # bytes: glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit hosts
TRIM_THRESHOLD = 64 << 20   # bytes: twice the mmap threshold, glibc's own rule

_done = False


def fix_thresholds() -> bool:
    """Sets glibc's mmap and trim thresholds once per process (see the module docstring).

    Returns:
        True when they are set now or were before, False when skipped (not glibc, or
        ``PSRT_MALLOC_TUNING=0``).
    """
    global _done
    if _done:
        return True
    if os.environ.get("PSRT_MALLOC_TUNING", "1") == "0":
        return False
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and \
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    if ok:
        _done = True
        _logger.debug("glibc malloc: mmap threshold %d, trim threshold %d bytes",
                      MMAP_THRESHOLD, TRIM_THRESHOLD)
    return ok

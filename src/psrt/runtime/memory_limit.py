"""A ps task's memory limit: what its variables may hold at most (psrt only; TF has none).

The core (csrc/memory_account.h) reserves the bytes of every value, optimizer slot,
synchronous gradient sum and hash-table growth against it before allocating, and refuses
what would pass it with ResourceExhaustedError naming the variable, the bytes asked and the
limit, so one oversized REGISTER cannot get a ps OOM-killed.

The limit is, first found: ``ConfigProto(ps_memory_limit_bytes=...)``; the environment variable
``PSRT_PS_MEMORY_LIMIT`` (bytes, or a number with a K, M, G or T suffix, powers of 1024;
0: no limit); else what the process may use (its cgroup's ``memory.max`` (v2) or
``memory.limit_in_bytes`` (v1), every ancestor's included, and the machine's physical RAM,
whichever is least) minus a margin of an eighth of it, at least 128 MiB, for the process
itself and the in-flight budget.
"""

from __future__ import annotations

import os
import re

MEMORY_LIMIT_ENV = "PSRT_PS_MEMORY_LIMIT"

_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_FORM = re.compile(r"^\s*(\d+)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)
_MIN_MARGIN = 128 << 20
# A cgroup v1 "no limit" is a page-rounded 2^63 - 1; anything this large means none.
_UNLIMITED = 1 << 60


def parse_memory_size(text: str, name: str = MEMORY_LIMIT_ENV) -> int:
    """Bytes from "1073741824", "512M", "1G", "64k" (K/M/G/T: powers of 1024; an optional
    "B" or "iB" after the suffix).

    Raises:
        ValueError: naming ``name``, the bad value and the valid forms.
    """
    m = _FORM.match(text)
    if m is None:
        raise ValueError(f"{name}={text!r} is not a memory size; valid forms: a whole number of "
                         f"bytes (1073741824), or one with a K, M, G or T suffix (powers of "
                         f"1024: 64K, 512M, 1G); 0 means no limit")
    return int(m.group(1)) * _SUFFIXES[m.group(2).upper()]


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            text = f.read().strip()
    except OSError:
        return None
    if text == "max" or not text.isdigit():
        return None
    value = int(text)
    return None if value >= _UNLIMITED else value


def cgroup_memory_limit() -> int | None:
    """The least memory limit (bytes) of this process's cgroup and its ancestors (v2
    ``memory.max``, v1 ``memory.limit_in_bytes``), or None when there is none."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    limits = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            root, leaf = "/sys/fs/cgroup", "memory.max"
        elif "memory" in controllers.split(","):
            root, leaf = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
        else:
            continue
        path = path.strip("/")
        while True:
            value = _read_int(os.path.join(root, path, leaf))
            if value is not None:
                limits.append(value)
            if not path:
                break
            path = os.path.dirname(path)
    return min(limits) if limits else None


def physical_memory() -> int | None:
    """The machine's physical RAM in bytes, or None when the OS does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def default_memory_limit() -> int:
    """What the process may use (cgroup, physical RAM) minus the margin; 0 when unknown."""
    known = [v for v in (cgroup_memory_limit(), physical_memory()) if v]
    if not known:
        return 0
    available = min(known)
    return max(available - max(available // 8, _MIN_MARGIN), 1)


def resolve_memory_limit(configured: int | None) -> int:
    """The ps task's memory limit in bytes (0: none): ``configured`` (ConfigProto's
    ``ps_memory_limit_bytes``) if not None, else ``PSRT_PS_MEMORY_LIMIT``, else
    :func:`default_memory_limit`.

    Raises:
        ValueError: a bad ``PSRT_PS_MEMORY_LIMIT``, naming it and the valid forms.
    """
    if configured is not None:
        return int(configured)
    env = os.environ.get(MEMORY_LIMIT_ENV)
    if env is not None and env.strip() != "":
        return parse_memory_size(env)
    return default_memory_limit()

"""The job's shared secret: where a task finds it, and the warning for unprotected servers.

Every task of a job (ps tasks and workers) must hold the same secret; the C++ core proves it
with HMAC-SHA256 challenge-response at connect time (docs/protocol.md, "Authentication"), so
the secret itself never crosses the network. psrt-launch generates one per job.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
from typing import Any

SECRET_ENV = "PSRT_AUTH_SECRET"
SECRET_FILE_ENV = "PSRT_AUTH_SECRET_FILE"

_logger = logging.getLogger("psrt")
_warned: set[str] = set()


def resolve_secret(explicit: Any = None) -> bytes:
    """The job's secret as bytes; b"" when none is set.

    Looked up in this order: ``explicit`` (``ConfigProto(auth_secret=...)``, str or bytes),
    the ``PSRT_AUTH_SECRET`` environment variable, then the file named by
    ``PSRT_AUTH_SECRET_FILE`` (its bytes, one trailing newline dropped).

    Raises:
        TypeError: ``explicit`` is not str or bytes.
        ValueError: the secret file cannot be read, or is empty.
    """
    if explicit is not None:
        if isinstance(explicit, str):
            return explicit.encode()
        if isinstance(explicit, (bytes, bytearray)):
            return bytes(explicit)
        raise TypeError(f"auth_secret must be str or bytes; got {type(explicit).__name__}")
    value = os.environ.get(SECRET_ENV)
    if value:
        return value.encode()
    path = os.environ.get(SECRET_FILE_ENV)
    if path:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ValueError(f"{SECRET_FILE_ENV}={path!r} cannot be read: {e.strerror}") from e
        if data.endswith(b"\n"):
            data = data[:-1]
        if not data:
            raise ValueError(f"{SECRET_FILE_ENV}={path!r} is empty; put the job's secret in it")
        return data
    return b""


def is_loopback(host: str) -> bool:
    """True when ``host`` names only this machine (127.0.0.0/8, ::1, localhost)."""
    if host in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


def warn_if_unprotected(host: str, port: int, secret: bytes, task: str) -> None:
    """Logs one WARNING per address when a server listens beyond loopback without a secret:
    anyone who reaches the port can then read and change the model."""
    if secret or is_loopback(host):
        return
    where = f"{host or '0.0.0.0'}:{port}"
    if where in _warned:
        return
    _warned.add(where)
    _logger.warning(
        "%s listens on %s without a job secret: any peer that reaches this port can read and "
        "change the model and end training. Give every task of the job the same secret "
        "(%s, or %s naming a file, or ConfigProto(auth_secret=...)); psrt-launch sets one "
        "for its tasks. The secret authenticates peers; it does not encrypt traffic (see "
        "README, 'Security').", task, where, SECRET_ENV, SECRET_FILE_ENV)

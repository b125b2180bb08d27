"""``tf.compat``'s string helpers (``tensorflow/python/util/compat.py``, r1.15): ``as_bytes``,
``as_text`` (``as_str``), ``as_str_any``, ``path_to_str``."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["as_bytes", "as_str", "as_str_any", "as_text", "path_to_str"]


def as_bytes(bytes_or_text: Any, encoding: str = "utf-8") -> bytes:
    """``bytes_or_text`` as bytes: str encoded with ``encoding``, bytes-like unchanged.

    Raises:
        TypeError: anything else (TF's "Expected binary or unicode string, got ...").
    """
    if isinstance(bytes_or_text, bytearray):
        return bytes(bytes_or_text)
    if isinstance(bytes_or_text, str):
        return bytes_or_text.encode(encoding)
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


def as_text(bytes_or_text: Any, encoding: str = "utf-8") -> str:
    """``bytes_or_text`` as str: bytes decoded with ``encoding``, str unchanged.

    Raises:
        TypeError: anything else (TF's "Expected binary or unicode string, got ...").
    """
    if isinstance(bytes_or_text, str):
        return bytes_or_text
    if isinstance(bytes_or_text, (bytes, bytearray)):
        return bytes(bytes_or_text).decode(encoding)
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


as_str = as_text


def as_str_any(value: Any) -> str:
    """``as_str(value)`` for bytes, ``str(value)`` for anything else."""
    if isinstance(value, bytes):
        return as_str(value)
    return str(value)


def path_to_str(path: Any) -> Any:
    """``os.fspath(path)`` for an ``os.PathLike``; anything else unchanged."""
    if isinstance(path, os.PathLike):
        return os.fspath(path)
    return path

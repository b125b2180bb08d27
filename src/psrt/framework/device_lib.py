"""``tensorflow.python.client.device_lib.list_local_devices``: the devices this process
computes on. psrt computes with numpy on the CPU, so the list is one CPU device, as TF's
on a machine without GPUs: scripts that count GPUs (``[d.name for d in
list_local_devices() if d.device_type == "GPU"]``) find none and take their CPU path."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["DeviceAttributes", "list_local_devices"]


class DeviceAttributes:
    """What ``list_local_devices`` lists (the fields of TF's ``DeviceAttributes`` proto):
    ``name`` ("/device:CPU:0"), ``device_type`` ("CPU"), ``memory_limit`` (bytes: the
    machine's physical memory, 0 when unknown), ``locality`` (None), ``incarnation`` (int),
    ``physical_device_desc`` (str)."""

    def __init__(self, name: str, device_type: str, memory_limit: int, incarnation: int,
                 physical_device_desc: str = "") -> None:
        self.name = name
        self.device_type = device_type
        self.memory_limit = memory_limit
        self.locality = None
        self.incarnation = incarnation
        self.physical_device_desc = physical_device_desc

    def __repr__(self) -> str:
        return (f'name: "{self.name}"\ndevice_type: "{self.device_type}"\n'
                f"memory_limit: {self.memory_limit}\nincarnation: {self.incarnation}\n")


def _physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def list_local_devices(session_config: Any = None) -> list[DeviceAttributes]:
    """The local devices: ``[DeviceAttributes("/device:CPU:0", "CPU", ...)]``.
    ``session_config`` is accepted for TF's signature and ignored."""
    return [DeviceAttributes("/device:CPU:0", "CPU", _physical_memory(),
                             incarnation=os.getpid())]

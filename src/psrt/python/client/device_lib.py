"""``tensorflow.python.client.device_lib``: ``list_local_devices`` (one CPU device). A face."""

from psrt.framework.device_lib import list_local_devices

__all__ = ["list_local_devices"]

"""``tensorflow.python.training.server_lib``: ``Server`` and ``ClusterSpec``. A face."""

from psrt.distribute.cluster_spec import ClusterSpec
from psrt.runtime.server import Server

__all__ = ["ClusterSpec", "Server"]

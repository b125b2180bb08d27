"""``tensorflow.python``: the TF1 import paths scripts use (``from tensorflow.python.training
import server_lib``, ``from tensorflow.python.framework import ops``, ``from
tensorflow.python.platform import flags``), each a face over psrt's own module.
docs/porting.md ("platform") lists them."""

__all__: list[str] = []

"""Data sets for psrt's examples, read with TF1's `input_data` API; nothing is downloaded.

`psrt.datasets.mnist.read_data_sets` copies
`tensorflow.examples.tutorials.mnist.input_data.read_data_sets`.
"""

from psrt.datasets import mnist

__all__ = ["mnist"]

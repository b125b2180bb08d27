"""``tensorflow.examples.tutorials.mnist.input_data``: TF1's MNIST reader,
``read_data_sets(train_dir, fake_data=False, one_hot=False, dtype=float32, reshape=True,
validation_size=5000, seed=None)``, over psrt/datasets/mnist.py (which never downloads: see
its docstring for the data sources). A face."""

from psrt.datasets.mnist import (
    DataSet,
    Datasets,
    dense_to_one_hot,
    extract_images,
    extract_labels,
    read_data_sets,
)

__all__ = ["DataSet", "Datasets", "dense_to_one_hot", "extract_images", "extract_labels",
           "read_data_sets"]

"""``tf.io.gfile`` (``psrt.io.gfile``): TF's file functions under their v2 names (``exists``,
``glob``, ``makedirs``, ``rename``, ``walk``, ...) and ``GFile``, over local paths and any
fsspec URL. A face: see psrt/framework/file_io.py (``tf.gfile`` has the TF1 CamelCase
names)."""

from psrt.framework.file_io import (
    GFile,
    copy,
    exists,
    glob,
    isdir,
    listdir,
    makedirs,
    mkdir,
    remove,
    rename,
    rmtree,
    stat,
    walk,
)

__all__ = [
    "GFile",
    "copy",
    "exists",
    "glob",
    "isdir",
    "listdir",
    "makedirs",
    "mkdir",
    "remove",
    "rename",
    "rmtree",
    "stat",
    "walk",
]

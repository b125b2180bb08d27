"""``tf.gfile``: TF 1.x's file functions over local paths and any fsspec URL (``s3://``
needs s3fs). A face: see psrt/framework/file_io.py."""

from psrt.framework.file_io import (
    Copy,
    DeleteRecursively,
    Exists,
    FastGFile,
    GFile,
    Glob,
    IsDirectory,
    ListDirectory,
    MakeDirs,
    MkDir,
    Open,
    Remove,
    Rename,
    Stat,
    Walk,
)

__all__ = [
    "Copy",
    "DeleteRecursively",
    "Exists",
    "FastGFile",
    "GFile",
    "Glob",
    "IsDirectory",
    "ListDirectory",
    "MakeDirs",
    "MkDir",
    "Open",
    "Remove",
    "Rename",
    "Stat",
    "Walk",
]

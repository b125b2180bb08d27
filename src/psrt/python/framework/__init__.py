"""``tensorflow.python.framework``: faces of the TF1 import paths under it."""

__all__: list[str] = []

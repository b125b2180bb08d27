"""``tensorflow.examples.tutorials``."""

__all__: list[str] = []

"""``tensorflow.examples.tutorials.mnist``."""

__all__: list[str] = []

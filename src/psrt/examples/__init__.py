"""``tensorflow.examples``."""

__all__: list[str] = []

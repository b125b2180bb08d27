"""``tensorflow.core.example``."""

__all__: list[str] = []

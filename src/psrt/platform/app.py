"""``tf.app.run``: TF 1.x's entry point of a script (``tensorflow/python/platform/app.py``,
r1.15), over absl-py's ``absl.app.run``.

``run(main=None, argv=None)`` parses the flags it knows from ``argv`` (default ``sys.argv``)
with ``FLAGS(argv, known_only=True)``: the defined flags get their values, and the rest (the
program name first, then unknown ``--flags`` and positional arguments, in order) is the list
``main`` is called with. ``main`` defaults to the ``main`` function of the ``__main__`` module.
The process then exits with ``sys.exit(main(argv))``: status 0 when ``main`` returns None, its
value otherwise. absl's ``--help``, ``--helpfull`` and ``--flagfile`` work as in TF.

``absl.app`` is imported by ``run`` only, not by ``import psrt``: it imports absl.logging,
which defines its own flags (``--log_dir``, ``--verbosity``, ``--logtostderr``, ...), and a
script that defines a ``--log_dir`` flag of its own (several TF1 scripts do) would fail
with ``DuplicateFlagError`` at import. Such a script still cannot call ``run`` (TF >= 1.5,
whose app is absl's, has the same clash).
"""

from __future__ import annotations

import sys
from typing import Any, Callable, NoReturn

from psrt.platform import flags

__all__ = ["flags", "run"]


def _parse_known_flags(argv: list[str]) -> list[str]:
    return flags.FLAGS(argv, known_only=True)  # type: ignore[no-any-return]


def run(main: Callable[[list[str]], Any] | None = None,
        argv: list[str] | None = None) -> NoReturn:
    """Parses the known flags of ``argv``, then ``sys.exit(main(remaining_argv))``.

    Args:
        main: The function to run, called with the list of arguments the flags left (the
            program name first); default ``sys.modules["__main__"].main``.
        argv: The command line; default ``sys.argv``.

    Raises:
        SystemExit: always, with ``main``'s return value (0 for None); status 1 after a
            flag value absl rejects (it prints the error and the usage), as TF.
        AttributeError: ``main`` is None and the ``__main__`` module has no ``main``.
    """
    if main is None:
        main = getattr(sys.modules["__main__"], "main", None)
        if main is None:
            raise AttributeError("tf.app.run() was given no main and the __main__ module "
                                 "defines no main function; pass run(main=fn)")
    from absl import app as absl_app  # third-party, lazily: see the module docstring

    absl_app.run(main, argv=sys.argv if argv is None else argv,
                  flags_parser=_parse_known_flags)
    raise AssertionError("absl.app.run returned")  # absl.app.run always exits

"""``tf.flags`` (also ``tf.app.flags``): absl-py's flags as TF 1.x exposes them.

TF's ``tensorflow/python/platform/flags.py`` (r1.15) is absl's flags module with two changes,
both kept here:

* The ``DEFINE_string``, ``DEFINE_boolean`` (``DEFINE_bool``), ``DEFINE_float`` and
  ``DEFINE_integer`` functions also take TF's old keyword names ``flag_name``,
  ``default_value`` and ``docstring`` (for ``name``, ``default``, ``help``), logging a
  deprecation warning when they are used.
* ``FLAGS`` parses ``sys.argv`` on the first read of a flag's value when nothing parsed it
  before (absl's own ``FLAGS`` raises ``UnparsedFlagAccessError`` there). That parse is a full
  one: an unknown ``--flag`` in ``sys.argv`` raises ``absl.flags.UnrecognizedFlagError``, as
  in TF. ``tf.app.run`` (``psrt.platform.app.run``) instead parses the known flags only and
  hands the rest of the command line to ``main``.

The other names (``DEFINE_enum``, ``DEFINE_list``, ``DEFINE_multi_string``, validators, the
error classes, ...) are absl's own. Flags are process-wide: every module's definitions go
into the one ``absl.flags.FLAGS`` registry, so a flag defined twice raises
``absl.flags.DuplicateFlagError``.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Callable, Iterator

from absl import flags as _absl_flags
from absl.flags import (
    DEFINE,
    DEFINE_alias,
    DEFINE_enum,
    DEFINE_flag,
    DEFINE_list,
    DEFINE_multi_enum,
    DEFINE_multi_float,
    DEFINE_multi_integer,
    DEFINE_multi_string,
    DEFINE_spaceseplist,
    BooleanFlag,
    CantOpenFlagFileError,
    DuplicateFlagError,
    Error,
    Flag,
    FlagValues,
    IllegalFlagValueError,
    UnparsedFlagAccessError,
    UnrecognizedFlagError,
    ValidationError,
    adopt_module_key_flags,
    declare_key_flag,
    mark_flag_as_required,
    mark_flags_as_mutual_exclusive,
    mark_flags_as_required,
    multi_flags_validator,
    register_multi_flags_validator,
    register_validator,
    text_wrap,
    validator,
)

__all__ = [
    "BooleanFlag",
    "CantOpenFlagFileError",
    "DEFINE",
    "DEFINE_alias",
    "DEFINE_bool",
    "DEFINE_boolean",
    "DEFINE_enum",
    "DEFINE_flag",
    "DEFINE_float",
    "DEFINE_integer",
    "DEFINE_list",
    "DEFINE_multi_enum",
    "DEFINE_multi_float",
    "DEFINE_multi_integer",
    "DEFINE_multi_string",
    "DEFINE_spaceseplist",
    "DEFINE_string",
    "DuplicateFlagError",
    "Error",
    "FLAGS",
    "Flag",
    "FlagValues",
    "IllegalFlagValueError",
    "UnparsedFlagAccessError",
    "UnrecognizedFlagError",
    "ValidationError",
    "adopt_module_key_flags",
    "declare_key_flag",
    "mark_flag_as_required",
    "mark_flags_as_mutual_exclusive",
    "mark_flags_as_required",
    "multi_flags_validator",
    "register_multi_flags_validator",
    "register_validator",
    "text_wrap",
    "validator",
]

# The DEFINE wrappers below call absl from this module: absl must credit the flags to the
# module that called the wrapper (the script), as TF's flags.py arranges with this call.
_absl_flags.disclaim_key_flags()

# TF 1.x's keyword names -> absl's (TF's _RENAMED_ARGUMENTS).
_RENAMED_ARGUMENTS = {"flag_name": "name", "default_value": "default", "docstring": "help"}


def _accept_old_names(define: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        renamed = False
        for old, new in _RENAMED_ARGUMENTS.items():
            if old in kwargs:
                kwargs[new] = kwargs.pop(old)
                renamed = True
        if renamed:
            logging.warning("Use of the keyword argument names (flag_name, default_value, "
                            "docstring) is deprecated, please use (name, default, help) "
                            "instead.")
        return define(*args, **kwargs)

    wrapper.__name__ = define.__name__
    wrapper.__qualname__ = define.__qualname__
    wrapper.__doc__ = define.__doc__
    wrapper.__wrapped__ = define  # type: ignore[attr-defined]
    return wrapper


DEFINE_string = _accept_old_names(_absl_flags.DEFINE_string)
DEFINE_boolean = _accept_old_names(_absl_flags.DEFINE_boolean)
DEFINE_bool = DEFINE_boolean
DEFINE_float = _accept_old_names(_absl_flags.DEFINE_float)
DEFINE_integer = _accept_old_names(_absl_flags.DEFINE_integer)


class _FlagValuesWrapper:
    """``tf.flags.FLAGS``: absl's ``FLAGS`` that parses ``sys.argv`` on the first read of a
    flag when it is not parsed yet (TF's ``_FlagValuesWrapper``). Everything else (setting a
    value, ``FLAGS(argv, known_only=True)``, ``FLAGS["name"]``, ``is_parsed()``,
    ``flag_values_dict()``) goes to absl's object unchanged."""

    def __init__(self, wrapped: FlagValues) -> None:
        self.__dict__["__wrapped"] = wrapped

    def __getattribute__(self, name: str) -> Any:
        if name == "__dict__":
            return super().__getattribute__(name)
        return self.__dict__["__wrapped"].__getattribute__(name)

    def __getattr__(self, name: str) -> Any:
        wrapped = self.__dict__["__wrapped"]
        if not wrapped.is_parsed():
            wrapped(sys.argv)
        return wrapped.__getattr__(name)

    def __setattr__(self, name: str, value: Any) -> None:
        self.__dict__["__wrapped"].__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        self.__dict__["__wrapped"].__delattr__(name)

    def __dir__(self) -> list[str]:
        return list(self.__dict__["__wrapped"].__dir__())

    def __getitem__(self, name: str) -> Flag[Any]:
        return self.__dict__["__wrapped"].__getitem__(name)  # type: ignore[no-any-return]

    def __setitem__(self, name: str, flag: Flag[Any]) -> None:
        self.__dict__["__wrapped"].__setitem__(name, flag)

    def __len__(self) -> int:
        return len(self.__dict__["__wrapped"])

    def __iter__(self) -> Iterator[str]:
        return iter(self.__dict__["__wrapped"])

    def __str__(self) -> str:
        return str(self.__dict__["__wrapped"])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__dict__["__wrapped"](*args, **kwargs)


FLAGS: Any = _FlagValuesWrapper(_absl_flags.FLAGS)

"""src/psrt/_core.pyi mirrors the compiled psrt._core exactly.

Every public name of the module (functions, classes, constants) and of each class (methods,
properties, settable or not) is in the stub and every name of the stub is in the module.
Functions and methods also agree on parameter names, order, keyword-only markers and default
values, read from the signatures pybind11 writes into each docstring. Constants agree on
their values.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import pytest

from psrt import _core

STUB = Path(__file__).resolve().parents[1] / "src" / "psrt" / "_core.pyi"


def public(names) -> set[str]:
    return {n for n in names if not n.startswith("_") or n == "__init__"}


@pytest.fixture(scope="module")
def stub() -> ast.Module:
    return ast.parse(STUB.read_text(), filename=str(STUB))


def stub_members(body: list[ast.stmt]) -> dict[str, Any]:
    """name -> FunctionDef (last definition wins, e.g. a property's setter), ClassDef, or the
    annotated assignment of a constant."""
    out: dict[str, Any] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.setdefault(node.name, node)
            if isinstance(node, ast.FunctionDef) and is_setter(node):
                out[node.name + ".setter"] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node
    return out


def decorators(fn: ast.FunctionDef) -> list[str]:
    return [ast.unparse(d) for d in fn.decorator_list]


def is_setter(fn: ast.FunctionDef) -> bool:
    return any(d.endswith(".setter") for d in decorators(fn))


def split_top_level(s: str) -> list[str]:
    """Splits on commas outside brackets and quotes."""
    parts, depth, quote, cur = [], 0, "", []
    for ch in s:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def compiled_params(obj: Any, name: str) -> list[tuple[str, bool, Any]]:
    """[(name, keyword_only, default or inspect.Parameter.empty)] from pybind11's docstring
    signature "name(a: T, *, b: T = 1) -> R", without self."""
    doc = (obj.__doc__ or "").strip().splitlines()
    line = next((ln for ln in doc if ln.startswith(name + "(")), None)
    assert line is not None, f"no signature for {name} in its docstring: {doc[:1]}"
    args = line[len(name) + 1:line.rindex(") -> ")]
    out, kw_only = [], False
    for p in split_top_level(args):
        if p == "*":
            kw_only = True
            continue
        pname, _, rest = p.partition(":")
        default: Any = inspect.Parameter.empty
        if " = " in rest:
            default = ast.literal_eval(rest.split(" = ", 1)[1].strip())
        if pname.strip() == "self":
            continue
        out.append((pname.strip(), kw_only, default))
    return out


def stub_params(fn: ast.FunctionDef) -> list[tuple[str, bool, Any]]:
    a = fn.args
    assert not a.vararg and not a.kwarg and not a.posonlyargs, f"{fn.name}: *args/**kw/pos-only"
    positional = a.args
    defaults = [inspect.Parameter.empty] * (len(positional) - len(a.defaults)) + [
        ast.literal_eval(d) for d in a.defaults]
    out = [(p.arg, False, d) for p, d in zip(positional, defaults)]
    out += [(p.arg, True, inspect.Parameter.empty if d is None else ast.literal_eval(d))
            for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    return [p for p in out if p[0] != "self"]


def test_module_names_match(stub):
    in_stub = set(stub_members(stub.body))
    in_module = public(dir(_core))
    assert in_module - in_stub == set(), "compiled names missing from _core.pyi"
    assert in_stub - in_module == set(), "names in _core.pyi that the module does not have"


def test_module_kinds_and_constants(stub):
    for name, node in stub_members(stub.body).items():
        obj = getattr(_core, name)
        if isinstance(node, ast.ClassDef):
            assert inspect.isclass(obj), name
        elif isinstance(node, ast.FunctionDef):
            assert callable(obj) and not inspect.isclass(obj), name
        else:
            assert not callable(obj), name
            assert node.value is not None, f"{name}: give the constant's value in the stub"
            assert ast.literal_eval(node.value) == obj, name


def test_module_function_signatures(stub):
    for name, node in stub_members(stub.body).items():
        if isinstance(node, ast.FunctionDef):
            assert stub_params(node) == compiled_params(getattr(_core, name), name), name


@pytest.mark.parametrize("cls_name", sorted(n for n in public(dir(_core))
                                            if inspect.isclass(getattr(_core, n))))
def test_class_members_match(stub, cls_name):
    cls = getattr(_core, cls_name)
    node = stub_members(stub.body)[cls_name]
    members = {k: v for k, v in stub_members(node.body).items() if not k.endswith(".setter")}
    setters = {k[:-len(".setter")] for k in stub_members(node.body) if k.endswith(".setter")}
    compiled = public(vars(cls))
    assert compiled - set(members) == set(), f"{cls_name} members missing from _core.pyi"
    assert set(members) - compiled == set(), f"{cls_name} members in _core.pyi but not compiled"
    for name, fn in members.items():
        attr = vars(cls)[name]
        assert isinstance(fn, ast.FunctionDef), f"{cls_name}.{name}"
        if isinstance(attr, property):
            assert "property" in decorators(fn), f"{cls_name}.{name} is a property"
            assert (attr.fset is not None) == (name in setters), f"{cls_name}.{name} setter"
        else:
            assert "property" not in decorators(fn), f"{cls_name}.{name} is a method"
            assert stub_params(fn) == compiled_params(attr, name), f"{cls_name}.{name}"

"""The package's layers (docs/architecture.md): every ``import psrt...`` in src/psrt, in functions
too, goes from a layer to itself or to a layer below; there is no import cycle; no module is
over 800 lines; only runtime/ imports the compiled core (ops/ alone imports the compiled
convolution loops, which import nothing of psrt); the faces only re-export, with an
``__all__`` that type checkers read."""

from __future__ import annotations

import ast
import graphlib
import importlib
import pathlib

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "psrt"

# Lowest first. A module may import from its own layer and from the layers before it.
LAYERS = ["platform", "framework", "distribute", "ops", "runtime", "checkpoint", "training"]
# Top-level modules that import nothing of psrt's layers (a command and a data reader).
LEAVES = {"psrt.launch", "psrt.datasets"}
FACES = ["psrt", "psrt.train", "psrt.nn", "psrt.summary", "psrt.errors", "psrt.init_ops",
         "psrt.feature_column", "psrt.dynamic_embedding", "psrt.embedding_ops", "psrt.image",
         "psrt.io", "psrt.python_io", "psrt.math", "psrt.data", "psrt.data.experimental",
         "psrt.losses", "psrt.layers", "psrt.metrics", "psrt.contrib", "psrt.contrib.framework",
         "psrt.contrib.layers", "psrt.contrib.nn",
         "psrt.app", "psrt.flags", "psrt.logging", "psrt.gfile",
         # tf.compat and the TF1 import paths (tensorflow.python..., tensorflow.core...)
         "psrt.compat", "psrt.compat.v1", "psrt.train.queue_runner",
         "psrt.python.training.server_lib", "psrt.python.training.moving_averages",
         "psrt.python.training.queue_runner", "psrt.python.training.saver",
         "psrt.python.framework.ops", "psrt.python.framework.dtypes",
         "psrt.python.framework.errors", "psrt.python.platform.flags",
         "psrt.python.platform.app", "psrt.python.platform.tf_logging",
         "psrt.python.platform.gfile", "psrt.core.protobuf.config_pb2",
         "psrt.core.protobuf.cluster_pb2", "psrt.core.protobuf.tensorflow_server_pb2",
         "psrt.core.example.example_pb2", "psrt.core.example.feature_pb2",
         "psrt.examples.tutorials.mnist.input_data", "psrt.io_gfile",
         "psrt.python.client.device_lib"]
MAX_LINES = 800


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(SRC).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> list[tuple[str, int, bool]]:
    """(imported psrt module, line, inside a function) for every import in ``module``."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    in_function: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            in_function.update(id(n) for n in ast.walk(node) if n is not node)
    out = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names]
        for t in targets:
            if t == "psrt._core" or not t.startswith("psrt"):
                continue
            r = _resolve(t)
            if r is not None and r != module:
                out.append((r, node.lineno, id(node) in in_function))
    return out


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def test_every_import_goes_to_the_same_layer_or_below():
    wrong = []
    for m in MODULES:
        mine = _layer(m)
        for target, line, _ in _imports(m):
            theirs = _layer(target)
            leaf = next((lf for lf in LEAVES if m == lf or m.startswith(lf + ".")), None)
            if leaf is not None and not target.startswith(leaf + "."):
                wrong.append(f"{m}:{line} imports {target} (a leaf imports nothing of psrt)")
            elif mine is not None and (theirs is None or theirs > mine):
                wrong.append(f"{m}:{line} ({LAYERS[mine]}) imports {target}")
    assert wrong == []


def test_no_import_cycle_counting_imports_in_functions():
    graph = {m: {t for t, _, _ in _imports(m)} for m in MODULES}
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError naming the cycle


def test_no_psrt_import_inside_a_function():
    inner = [f"{m}:{line} imports {t}" for m in MODULES for t, line, f in _imports(m) if f]
    assert inner == []


def test_no_module_over_800_lines():
    long = {m: n for m, p in MODULES.items()
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_only_the_runtime_layer_imports_the_core():
    users = []
    for m, p in MODULES.items():
        text = p.read_text()
        if "_core" in text and any(
                isinstance(n, ast.ImportFrom) and any(a.name == "_core" for a in n.names)
                or isinstance(n, ast.Import) and any(a.name == "psrt._core" for a in n.names)
                for n in ast.walk(ast.parse(text))):
            users.append(m)
    assert users and all(m.startswith("psrt.runtime.") for m in users), users


def test_the_compiled_conv_kernels_import_nothing_of_psrt_and_only_ops_import_them():
    # ops/_conv_kernels.pyx (Cython) is the one compiled module outside runtime/: the
    # worker-side loops of the convolution and pooling ops, with no ps in them.
    pyx = PKG / "ops" / "_conv_kernels.pyx"
    imports = [line for line in pyx.read_text().splitlines()
               if line.lstrip().startswith(("import ", "from ", "cimport "))]
    assert imports and not [line for line in imports if "psrt" in line or "_core" in line]
    users = []
    for m, p in MODULES.items():
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.ImportFrom):
                names = [n.module or ""] + [a.name for a in n.names]
            elif isinstance(n, ast.Import):
                names = [a.name for a in n.names]
            else:
                continue
            if any("_conv_kernels" in name for name in names):
                users.append(m)
    assert users and all(m.startswith("psrt.ops.") for m in users), users


@pytest.mark.parametrize("face", FACES)
def test_faces_export_with_all_and_leak_nothing(face):
    module = importlib.import_module(face)
    names = module.__all__
    assert names == sorted(set(names), key=names.index)  # no duplicates
    for name in names:
        assert not name.startswith("_") and hasattr(module, name), (face, name)
    leaked = {n for n in vars(module) if not n.startswith("_") and n not in names
              and not isinstance(getattr(module, n), type(pytest))}
    assert leaked == set(), (face, leaked)

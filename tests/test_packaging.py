"""Tests of what a pip install gives: the type marker, the license and the metadata of the
installed distribution, and the wheel-building configuration in pyproject.toml.

These run against the installed psrt (as every test here does), so they check the wheel's
contents, not only the source tree. Building wheels and sdists is not repeated here (it
takes minutes and a package index); see the README's "Packaging" section.
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_marks_psrt_typed():
    # PEP 561: without py.typed, mypy skips psrt ("missing library stubs or py.typed").
    assert (importlib.resources.files("psrt") / "py.typed").is_file()
    assert (importlib.resources.files("psrt") / "_core.pyi").is_file()


def test_license_is_apache_2_and_ships_in_the_wheel():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    dist = importlib.metadata.distribution("psrt")
    assert dist.metadata["License-Expression"] == "Apache-2.0"
    licenses = [f for f in dist.files or [] if f.name == "LICENSE"]
    assert licenses and licenses[0].read_text() == text


def test_installed_metadata_has_urls_and_classifiers():
    meta = importlib.metadata.metadata("psrt")
    classifiers = meta.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers
    assert "Operating System :: POSIX :: Linux" in classifiers
    requires_python = meta["Requires-Python"]
    for minor in range(10, 14):
        assert f"Programming Language :: Python :: 3.{minor}" in classifiers, requires_python
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Source", "Issues"} <= set(urls), urls


def test_cibuildwheel_builds_manylinux_2_28_for_x86_64_and_aarch64():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["cibuildwheel"]
    assert set(config["linux"]["archs"]) == {"x86_64", "aarch64"}
    assert config["linux"]["manylinux-x86_64-image"] == "manylinux_2_28"
    assert config["linux"]["manylinux-aarch64-image"] == "manylinux_2_28"
    assert config["build"].split() == ["cp310-*", "cp311-*", "cp312-*", "cp313-*"]
    # The test command names test files that exist and need only its test-requires.
    for word in config["test-command"].split():
        if word.startswith("{project}/"):
            assert (ROOT / word[len("{project}/"):]).is_file(), word


def test_lgpl_dependency_is_documented():
    readme = (ROOT / "README.md").read_text()
    assert "crc32c" in readme and "LGPL-2.1-or-later" in readme


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_mypy_reads_psrts_annotations(tmp_path):
    script = tmp_path / "uses_psrt.py"
    script.write_text(textwrap.dedent("""
        import psrt
        role = psrt.train.task_role_from_tf_config()
        index: str = role.task_index
    """))
    result = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", str(script)],
                            capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert 'Incompatible types in assignment (expression has type "int", variable has ' \
           'type "str")' in result.stdout, result.stdout + result.stderr
    assert "py.typed" not in result.stdout

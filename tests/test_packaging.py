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
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import psrt

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
# The distribution's name on PyPI ("psrt" there is another project); the import stays psrt.
DIST = "psrt-runtime"


def test_the_wheel_marks_psrt_typed():
    # PEP 561: without py.typed, mypy skips psrt ("missing library stubs or py.typed").
    assert (importlib.resources.files("psrt") / "py.typed").is_file()
    assert (importlib.resources.files("psrt") / "_core.pyi").is_file()


def test_the_distribution_is_psrt_runtime_and_imports_as_psrt():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DIST
    dist = importlib.metadata.distribution(DIST)
    assert dist.metadata["Name"] == DIST
    assert dist.version == psrt.__version__ == project["version"]
    assert (dist.read_text("top_level.txt") or "psrt").split() == ["psrt"]
    assert set(project["optional-dependencies"]) >= {"examples", "test"}
    assert project["scripts"]["psrt-launch"] == "psrt.launch:main"


# `pip install psrt` (any spelling of the old name, with or without extras or quotes)
# installs PubSubRT's connector: no tracked file may still tell anyone to run it.
_OLD_INSTALL = re.compile(r"""pip3? install\s+(?:-\S+\s+)*["']?psrt(?![-\w.])""")


def test_no_file_tells_anyone_to_pip_install_psrt():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode != 0:  # an unpacked sdist: every file it holds
        files = [p for p in ROOT.rglob("*") if p.is_file()]
    else:
        files = [ROOT / name for name in tracked.stdout.splitlines()]
    offenders = []
    for path in files:
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if _OLD_INSTALL.search(line) and path.name != "test_packaging.py":
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
    # The pattern itself: what it must and must not catch.
    for bad in ['pip install "psrt[examples]"', "pip install psrt", "pip3 install -U 'psrt'",
                "pip install psrt==0.1.0"]:
        assert _OLD_INSTALL.search(bad), bad
    for good in ['pip install "psrt-runtime[examples]"', "pip install psrt_runtime",
                 'pip install ".[examples]"', "pip install psrt-runtime"]:
        assert not _OLD_INSTALL.search(good), good


# What the documented commands leave in the repository's root when run from there: the
# sbatch script's log and checkpoint folder, linear_regression_supervisor.py's ./checkpoint/.
_RUN_OUTPUTS = ["psrt-mnist-4242.out", "psrt-mnist-4242/model.ckpt-2000", "checkpoint/checkpoint"]


def test_run_outputs_are_ignored_by_git_and_left_out_of_the_sdist():
    if subprocess.run(["git", "rev-parse"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.skip("not a git checkout (an unpacked sdist): .gitignore cannot be asked")
    checked = subprocess.run(["git", "check-ignore", "--no-index", *_RUN_OUTPUTS], cwd=ROOT,
                             capture_output=True, text=True)
    assert checked.stdout.split() == _RUN_OUTPUTS, checked
    # The same three patterns in sdist.exclude, and nothing tracked matches them.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    exclude = config["tool"]["scikit-build"]["sdist"]["exclude"]
    assert {"/psrt-mnist-*.out", "/psrt-mnist-*/", "/checkpoint/"} <= set(exclude), exclude
    sbatch = (ROOT / "deploy" / "slurm" / "mnist_dist.sbatch").read_text()
    assert "#SBATCH --output=psrt-mnist-%j.out" in sbatch
    assert "CHECKPOINT_DIR:-$PWD/psrt-mnist-$SLURM_JOB_ID" in sbatch
    tracked = subprocess.run(["git", "ls-files", "-i", "-c", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, text=True).stdout.split()
    assert tracked == [], tracked


def test_license_is_apache_2_and_ships_in_the_wheel():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    dist = importlib.metadata.distribution(DIST)
    assert dist.metadata["License-Expression"] == "Apache-2.0"
    licenses = [f for f in dist.files or [] if f.name == "LICENSE"]
    assert licenses and licenses[0].read_text() == text


def test_installed_metadata_has_urls_and_classifiers():
    meta = importlib.metadata.metadata(DIST)
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

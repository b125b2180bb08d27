"""examples/mnist_conv_layers.py under psrt-launch (2 ps + 2 workers, real processes): a TF1
conv net written with tf.layers (conv2d, max_pooling2d, dropout, dense), tf.losses and
tf.metrics trains asynchronously on the first 8,000 real MNIST test-set digits and reaches
>= 0.96 accuracy on the last 2,000, held out."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import psrt

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "mnist_conv_layers.py"
FILES = ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def _data_dir() -> Path | None:
    """``$PSRT_DATA_DIR/mnist``, else the first ``shared/data/mnist`` above the repository
    holding both files (the example's own default)."""
    dirs = [Path(os.environ["PSRT_DATA_DIR"]) / "mnist"] if os.environ.get("PSRT_DATA_DIR") \
        else []
    dirs += [p / "shared" / "data" / "mnist" for p in ROOT.parents]
    return next((d for d in dirs if all((d / f).is_file() for f in FILES)), None)


DATA = _data_dir()


@pytest.mark.skipif(DATA is None, reason=f"the real MNIST files {', '.join(FILES)} were not "
                    f"found in $PSRT_DATA_DIR/mnist or any shared/data/mnist above {ROOT}")
def test_conv_layers_example_reaches_096_on_held_out_digits():
    env = dict(os.environ)
    src = str(Path(psrt.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    env["OPENBLAS_NUM_THREADS"] = "1"   # four processes on a 2-core machine
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "psrt.launch", "--ps", "2", "--workers", "2",
                             str(EXAMPLE), "--data_dir", str(DATA), "--train_steps", "600"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=ROOT)
    try:
        out = proc.communicate(timeout=240)[0]
    except subprocess.TimeoutExpired:
        proc.terminate()   # the launcher stops every task it started
        out = proc.communicate(timeout=30)[0]
        raise AssertionError(f"psrt-launch still running after 240 s\n{out}") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, out
    # Both workers trained (asynchronously) up to the StopAtStepHook's global step 600.
    done = re.findall(r"Worker (\d): (\d+) local steps, last global step (\d+)", out)
    assert sorted(w for w, _, _ in done) == ["0", "1"], out
    assert all(int(n) > 50 for _, n, _ in done), out
    assert 600 <= max(int(g) for _, _, g in done) <= 602, out
    assert sum(int(n) for _, n, _ in done) >= 600, out
    accuracy = re.findall(r"Test accuracy: ([0-9.]+)", out)
    assert len(accuracy) == 1, out
    assert float(accuracy[0]) >= 0.96, f"accuracy {accuracy[0]} after {elapsed:.0f} s\n{out}"

"""TF1 names psrt does not implement raise an AttributeError naming them and what to use
instead (issue 13, item 10); every row of psrt._missing.MISSING is checked."""

from __future__ import annotations

import importlib

import pytest

import psrt
from psrt.framework import missing as _missing


@pytest.mark.parametrize("module,name", sorted(_missing.MISSING))
def test_every_missing_name_says_what_to_use(module, name):
    mod = importlib.import_module(module)
    if name in vars(mod):
        pytest.skip(f"{module}.{name} is implemented now: drop its row")
    with pytest.raises(AttributeError) as e:
        getattr(mod, name)
    msg = str(e.value)
    tf_name = "tf" + module[len("psrt"):] + "." + name
    assert msg.startswith(f"{module}.{name} ({tf_name} in TensorFlow 1.x) is not implemented "
                          f"by psrt: ")
    assert msg.endswith(_missing.MISSING[(module, name)])
    assert not hasattr(mod, name)  # hasattr stays False: it is an AttributeError


def test_examples_from_the_issue():
    with pytest.raises(AttributeError,
                       match=r"psrt.contrib.slim \(tf.contrib.slim in TensorFlow 1.x\) is "
                             r"not implemented by psrt: psrt.contrib has only"):
        psrt.contrib.slim  # noqa: B018
    assert not hasattr(psrt.contrib, "learn")
    with pytest.raises(AttributeError, match="Estimator"):
        psrt.estimator  # noqa: B018


def test_other_names_keep_the_plain_error():
    with pytest.raises(AttributeError, match="^module 'psrt' has no attribute 'nonesuch'$"):
        psrt.nonesuch  # noqa: B018
    with pytest.raises(AttributeError,
                       match="^module 'psrt.train' has no attribute 'nonesuch'$"):
        psrt.train.nonesuch  # noqa: B018
    assert psrt.Summary is not None  # the lazy name still resolves

"""numpy reference of the initializers a ps task runs (csrc/initializers.cc, docs/protocol.md
"Initializers"), written from the document: element j of the whole variable draws
uniform(j, k) = (mix(key ^ (64 j + k)) >> 11) / 2^53 with key = mix(seed + golden), and
mix = splitmix64's finalizer."""

from __future__ import annotations

import numpy as np

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
M1, M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def mix(z: np.ndarray) -> np.ndarray:
    z = z ^ (z >> np.uint64(30))
    z = z * M1
    z = z ^ (z >> np.uint64(27))
    z = z * M2
    return z ^ (z >> np.uint64(31))


def uniform(seed: int, j: np.ndarray, k: int) -> np.ndarray:
    with np.errstate(over="ignore"):
        key = mix(np.array([seed], np.uint64) + GOLDEN)[0]
        c = j.astype(np.uint64) * np.uint64(64) + np.uint64(k)
        return (mix(key ^ c) >> np.uint64(11)).astype(np.float64) / 9007199254740992.0


def normal(seed: int, j: np.ndarray, t: int) -> np.ndarray:
    u1, u2 = uniform(seed, j, 2 * t), uniform(seed, j, 2 * t + 1)
    return np.sqrt(-2.0 * np.log(1.0 - u1)) * np.cos(2 * np.pi * u2)


def truncated_normal(seed: int, j: np.ndarray) -> np.ndarray:
    out = np.zeros(j.shape)
    todo = np.ones(j.shape, bool)
    for t in range(32):
        z = normal(seed, j, t)
        take = todo & (np.abs(z) <= 2.0)
        out[take] = z[take]
        todo &= ~take
    return out


def fans(shape) -> tuple[float, float]:
    """TF's _compute_fans (init_ops.py)."""
    if len(shape) == 0:
        return 1.0, 1.0
    if len(shape) == 1:
        return float(shape[0]), float(shape[0])
    if len(shape) == 2:
        return float(shape[0]), float(shape[1])
    receptive = float(np.prod(shape[:-2]))
    return shape[-2] * receptive, shape[-1] * receptive


def initial_value(spec: dict, shape, dtype, offset: int = 0, full_shape=None) -> np.ndarray:
    """The value a ps task computes for a part of `shape` at element `offset` of the whole."""
    n = int(np.prod(shape)) if len(shape) else 1
    j = np.arange(offset, offset + n, dtype=np.uint64)
    kind, a, b, seed = spec["kind"], spec.get("a", 0.0), spec.get("b", 0.0), spec.get("seed", 0)
    if kind == "zeros":
        v = np.zeros(n)
    elif kind == "ones":
        v = np.ones(n)
    elif kind == "constant":
        v = np.full(n, a)
    elif kind == "random_uniform":
        v = a + (b - a) * uniform(seed, j, 0)
    elif kind == "random_normal":
        v = a + b * normal(seed, j, 0)
    elif kind == "truncated_normal":
        v = a + b * truncated_normal(seed, j)
    elif kind == "variance_scaling":
        fan_in, fan_out = fans(list(full_shape if full_shape is not None else shape))
        mode = spec.get("fan_mode", "fan_in")
        nfan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[mode]
        scale = a / max(1.0, nfan)
        dist = spec.get("distribution", "truncated_normal")
        if dist == "uniform":
            limit = np.sqrt(3.0 * scale)
            v = -limit + 2 * limit * uniform(seed, j, 0)
        elif dist == "untruncated_normal":
            v = np.sqrt(scale) * normal(seed, j, 0)
        else:
            v = np.sqrt(scale) / 0.87962566103423978 * truncated_normal(seed, j)
    else:
        raise ValueError(kind)
    return v.astype(dtype).reshape(shape)

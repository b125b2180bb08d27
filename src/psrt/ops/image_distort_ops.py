"""TF1's image distortions (tensorflow/python/ops/image_ops_impl.py, r1.15, and the
kernels adjust_contrast_op.cc, adjust_hue_op.cc, adjust_saturation_op.cc,
sample_distorted_bounding_box_op.cc, random_crop_op): ``adjust_brightness`` /
``adjust_contrast`` / ``adjust_hue`` / ``adjust_saturation``, their ``random_*`` forms,
``random_flip_left_right`` / ``random_flip_up_down``, ``random_crop`` and
``sample_distorted_bounding_box`` (the crops of TF's Inception preprocessing).

Random ops draw anew at every run from their own generator, seeded as TF's graph + op seeds
(psrt/framework/random_seed.py ``get_seed``): with a graph or op seed the sequence run after
run is the same for the same program; with neither it differs per process. psrt's generator
is numpy's (PCG64), so the draws are not TF's; their distributions are. No gradients (TF's
random distortions have none that TF1 input pipelines use).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.framework import errors as _errors
from psrt.framework import op_def_library as _lib
from psrt.framework.constant_op import constant
from psrt.framework.random_seed import get_seed
from psrt.framework.tensor import Tensor
from psrt.ops.image_ops import _convert

__all__ = ["adjust_brightness", "adjust_contrast", "adjust_hue", "adjust_saturation",
           "flip_left_right", "flip_up_down", "hsv_to_rgb", "random_brightness", "random_contrast", "random_crop",
           "random_flip_left_right", "random_flip_up_down", "random_hue",
           "random_saturation", "rgb_to_hsv", "sample_distorted_bounding_box"]


def _in(x: Any) -> Any:
    return x if _lib.is_graph_value(x) else constant(x)


def _rng(seed: Any, seed2: Any = None) -> np.random.Generator:
    if seed2 is not None and seed is not None:
        return np.random.default_rng([int(seed), int(seed2)])
    graph_seed, op_seed = get_seed(seed)
    return np.random.default_rng(None if op_seed is None else [graph_seed, op_seed])


def _no_grad(n: int) -> Any:
    return lambda dy: tuple(None for _ in range(n))


def _as_float(x: np.ndarray) -> np.ndarray:
    """TF's adjust_*: float16/float32 images as they are, others via convert_image_dtype."""
    return x if x.dtype in (np.float16, np.float32) else _convert(x, np.dtype(np.float32),
                                                                  False)


def _back(y: np.ndarray, dt: np.dtype) -> np.ndarray:
    return _convert(y, dt, True)


# ---- the colour kernels ----------------------------------------------------------------------


def rgb_hsv(rgb: np.ndarray) -> np.ndarray:
    """TF's rgb_to_hsv (adjust_hue_op.cc): h, s, v in [0, 1]."""
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    v = np.max(rgb, axis=-1)
    rng = v - np.min(rgb, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(v > 0, rng / v, 0)
        norm = 1.0 / (6.0 * rng)
        h = np.where(r == v, norm * (g - b),
                     np.where(g == v, norm * (b - r) + 2.0 / 6.0, norm * (r - g) + 4.0 / 6.0))
    h = np.where(rng <= 0, 0, h)
    h = np.where(h < 0, h + 1, h)
    return np.stack([h, s, v], axis=-1).astype(rgb.dtype)


def hsv_rgb(hsv: np.ndarray) -> np.ndarray:
    """TF's hsv_to_rgb (adjust_hue_op.cc): six sectors of the hue circle."""
    h, s, v = hsv[..., 0], hsv[..., 1], hsv[..., 2]
    c = s * v
    m = v - c
    dh = h * 6
    sector = np.floor(dh).astype(np.int64) % 6
    fmodu = np.mod(dh, 2.0)
    x = c * (1 - np.abs(fmodu - 1))
    z = np.zeros_like(c)
    table = [(c, x, z), (x, c, z), (z, c, x), (z, x, c), (x, z, c), (c, z, x)]
    out = np.zeros(hsv.shape, hsv.dtype)
    for k, (rr, gg, bb) in enumerate(table):
        sel = sector == k
        out[..., 0] = np.where(sel, rr, out[..., 0])
        out[..., 1] = np.where(sel, gg, out[..., 1])
        out[..., 2] = np.where(sel, bb, out[..., 2])
    return out + m[..., None]


def _check_rgb(x: np.ndarray, what: str) -> None:
    if x.ndim < 3 or x.shape[-1] != 3:
        raise _errors.InvalidArgumentError(
            None, None, f"{what}: input must have 3 channels (RGB) in the last dimension; got "
                        f"shape {list(x.shape)}")


def _hue(x: np.ndarray, delta: float) -> np.ndarray:
    _check_rgb(x, "adjust_hue")
    f = _as_float(x).astype(np.float32)
    hsv = rgb_hsv(f)
    h = np.mod(hsv[..., 0] + np.float32(delta), 1.0)
    hsv[..., 0] = np.where(h < 0, h + 1, h)
    return _back(hsv_rgb(hsv).astype(np.float32), x.dtype)


def _saturation(x: np.ndarray, factor: float) -> np.ndarray:
    _check_rgb(x, "adjust_saturation")
    f = _as_float(x).astype(np.float32)
    hsv = rgb_hsv(f)
    hsv[..., 1] = np.clip(hsv[..., 1] * np.float32(factor), 0, 1)
    return _back(hsv_rgb(hsv).astype(np.float32), x.dtype)


def _contrast(x: np.ndarray, factor: float) -> np.ndarray:
    f = _as_float(x)
    mean = f.mean(axis=(-3, -2), keepdims=True, dtype=np.float32).astype(f.dtype)
    y = (f - mean) * f.dtype.type(factor) + mean
    return _back(y, x.dtype)


def _brightness(x: np.ndarray, delta: float) -> np.ndarray:
    f = _as_float(x)
    return _back(f + f.dtype.type(delta), x.dtype)


_KERNELS = {"hue": _hue, "saturation": _saturation, "contrast": _contrast,
            "brightness": _brightness}


def _adjust_kernel(needs: Any, x: Any, amount: Any, kind: str) -> Any:
    return _KERNELS[kind](np.asarray(x), float(np.asarray(amount))), _no_grad(2)


def _adjust(op: str, kind: str, image: Any, amount: Any) -> Tensor:
    x = _in(image)
    return _lib.apply_op(op, None, [x, amount], _adjust_kernel, _lib.static_dtype(x),
                         _lib.static_shape(x), kind=kind)


def adjust_brightness(image: Any, delta: Any) -> Tensor:
    """``image + delta``, as ``tf.image.adjust_brightness`` (integer images through float
    and back, saturating)."""
    return _adjust("adjust_brightness", "brightness", image, delta)


def adjust_contrast(images: Any, contrast_factor: Any) -> Tensor:
    """``(x - mean) * contrast_factor + mean`` per image and channel (mean over height and
    width), as ``tf.image.adjust_contrast``."""
    return _adjust("adjust_contrast", "contrast", images, contrast_factor)


def adjust_hue(image: Any, delta: Any, name: str | None = None) -> Tensor:
    """Rotates the hue of an RGB image by ``delta`` (in [-1, 1], a fraction of the circle),
    as ``tf.image.adjust_hue`` (TF's RGB <-> HSV kernel)."""
    return _adjust(name or "adjust_hue", "hue", image, delta)


def adjust_saturation(image: Any, saturation_factor: Any, name: str | None = None
                      ) -> Tensor:
    """Multiplies the HSV saturation of an RGB image by ``saturation_factor`` (clipped to
    [0, 1]), as ``tf.image.adjust_saturation``."""
    return _adjust(name or "adjust_saturation", "saturation", image, saturation_factor)


class _RandomAdjust:
    """The kernel of a random_* colour op: draws its amount uniformly at every run."""

    __slots__ = ("rng", "kind", "lo", "hi")

    def __init__(self, seed: Any, kind: str, lo: float, hi: float) -> None:
        self.rng = _rng(seed)
        self.kind, self.lo, self.hi = kind, lo, hi

    def __call__(self, needs: Any, x: Any) -> Any:
        amount = self.rng.uniform(self.lo, self.hi)
        return _KERNELS[self.kind](np.asarray(x), amount), _no_grad(1)


def _random_adjust(op: str, kind: str, image: Any, lo: float, hi: float, seed: Any) -> Tensor:
    x = _in(image)
    return _lib.apply_op(op, None, [x], _RandomAdjust(seed, kind, lo, hi),
                         _lib.static_dtype(x), _lib.static_shape(x))


def _check_range(lower: float, upper: float) -> None:
    if upper <= lower:
        raise ValueError(f"upper must be > lower; got lower={lower}, upper={upper}")
    if lower < 0:
        raise ValueError(f"lower must be non-negative; got {lower}")


def random_brightness(image: Any, max_delta: float, seed: int | None = None) -> Tensor:
    """``adjust_brightness`` by a delta drawn uniformly from [-max_delta, max_delta) at each
    run, as ``tf.image.random_brightness``.

    Raises:
      ValueError: ``max_delta`` negative ("max_delta must be non-negative.").
    """
    if max_delta < 0:
        raise ValueError(f"max_delta must be non-negative; got {max_delta}")
    return _random_adjust("random_brightness", "brightness", image, -max_delta, max_delta,
                          seed)


def random_contrast(image: Any, lower: float, upper: float, seed: int | None = None
                    ) -> Tensor:
    """``adjust_contrast`` by a factor drawn uniformly from [lower, upper) at each run, as
    ``tf.image.random_contrast``.

    Raises:
      ValueError: ``upper <= lower`` or ``lower < 0`` (TF's checks).
    """
    _check_range(lower, upper)
    return _random_adjust("random_contrast", "contrast", image, lower, upper, seed)


def random_hue(image: Any, max_delta: float, seed: int | None = None) -> Tensor:
    """``adjust_hue`` by a delta drawn uniformly from [-max_delta, max_delta), as
    ``tf.image.random_hue``.

    Raises:
      ValueError: ``max_delta`` above 0.5 or negative (TF's checks).
    """
    if max_delta > 0.5:
        raise ValueError(f"max_delta must be <= 0.5; got {max_delta}")
    if max_delta < 0:
        raise ValueError(f"max_delta must be non-negative; got {max_delta}")
    return _random_adjust("random_hue", "hue", image, -max_delta, max_delta, seed)


def random_saturation(image: Any, lower: float, upper: float, seed: int | None = None
                      ) -> Tensor:
    """``adjust_saturation`` by a factor drawn uniformly from [lower, upper), as
    ``tf.image.random_saturation``.

    Raises:
      ValueError: ``upper <= lower`` or ``lower < 0``.
    """
    _check_range(lower, upper)
    return _random_adjust("random_saturation", "saturation", image, lower, upper, seed)


def rgb_to_hsv(images: Any, name: str | None = None) -> Tensor:
    """RGB floats in [0, 1] to HSV in [0, 1], as ``tf.image.rgb_to_hsv`` (last dim 3)."""
    x = _in(images)
    return _lib.apply_op("RGBToHSV", name, [x], lambda n, v: (rgb_hsv(np.asarray(v)),
                                                              _no_grad(1)),
                         _lib.static_dtype(x), _lib.static_shape(x))


def hsv_to_rgb(images: Any, name: str | None = None) -> Tensor:
    """HSV in [0, 1] to RGB floats, as ``tf.image.hsv_to_rgb``."""
    x = _in(images)
    return _lib.apply_op("HSVToRGB", name, [x], lambda n, v: (hsv_rgb(np.asarray(v)),
                                                              _no_grad(1)),
                         _lib.static_dtype(x), _lib.static_shape(x))


# ---- flips and crops -------------------------------------------------------------------------


def _flip(needs: Any, x: Any, axis: int) -> Any:
    arr = np.asarray(x)
    a = arr.ndim - 4 + axis if arr.ndim == 4 else axis - 1
    return np.ascontiguousarray(np.flip(arr, a)), \
        lambda dy: (np.ascontiguousarray(np.flip(np.asarray(dy), a)),)


def flip_left_right(image: Any) -> Tensor:
    """Each image mirrored left-right (the width axis of a 3-D or 4-D image), as
    ``tf.image.flip_left_right``. Differentiable."""
    x = _in(image)
    return _lib.apply_op("flip_left_right", None, [x], _flip, _lib.static_dtype(x),
                         _lib.static_shape(x), axis=2)


def flip_up_down(image: Any) -> Tensor:
    """Each image upside down (the height axis), as ``tf.image.flip_up_down``.
    Differentiable."""
    x = _in(image)
    return _lib.apply_op("flip_up_down", None, [x], _flip, _lib.static_dtype(x),
                         _lib.static_shape(x), axis=1)


class _Flip:
    __slots__ = ("rng", "axis")

    def __init__(self, seed: Any, axis: int) -> None:
        self.rng = _rng(seed)
        self.axis = axis

    def __call__(self, needs: Any, x: Any) -> Any:
        arr = np.asarray(x)
        if arr.ndim == 3:
            out = np.flip(arr, self.axis) if self.rng.uniform() < 0.5 else arr
        else:   # a batch: each image flips on its own draw (TF r1.15's 4-D path)
            flips = self.rng.uniform(size=arr.shape[0]) < 0.5
            out = np.where(flips[:, None, None, None], np.flip(arr, self.axis + 1), arr)
        return np.ascontiguousarray(out), _no_grad(1)


def _random_flip(op: str, image: Any, seed: Any, axis: int) -> Tensor:
    x = _in(image)
    nd = _lib.static_shape(x).ndims
    if nd is not None and nd not in (3, 4):
        raise ValueError(f"'image' must be either 3 or 4 dimensions; got rank {nd}")
    return _lib.apply_op(op, None, [x], _Flip(seed, axis), _lib.static_dtype(x),
                         _lib.static_shape(x))


def random_flip_left_right(image: Any, seed: int | None = None) -> Tensor:
    """Mirrors ``image`` left-right with probability 1/2 at each run (each image of a 4-D
    batch on its own draw), as ``tf.image.random_flip_left_right``."""
    return _random_flip("random_flip_left_right", image, seed, 1)


def random_flip_up_down(image: Any, seed: int | None = None) -> Tensor:
    """Flips ``image`` upside down with probability 1/2 at each run, as
    ``tf.image.random_flip_up_down``."""
    return _random_flip("random_flip_up_down", image, seed, 0)


class _Crop:
    __slots__ = ("rng",)

    def __init__(self, seed: Any) -> None:
        self.rng = _rng(seed)

    def __call__(self, needs: Any, x: Any, size: Any) -> Any:
        arr = np.asarray(x)
        sz = [int(s) for s in np.asarray(size).reshape(-1)]
        if len(sz) != arr.ndim or any(s > d or s < 0 for s, d in zip(sz, arr.shape)):
            raise _errors.InvalidArgumentError(
                None, None, f"Need value.shape >= size, got shape {list(arr.shape)} and size "
                            f"{sz}")
        offset = [int(self.rng.integers(0, d - s + 1)) for s, d in zip(sz, arr.shape)]
        sl = tuple(slice(o, o + s) for o, s in zip(offset, sz))
        return arr[sl].copy(), _no_grad(2)


def random_crop(value: Any, size: Any, seed: int | None = None, name: str | None = None
                ) -> Tensor:
    """A slice of ``size`` at a uniformly random offset, drawn at each run, as
    ``tf.random_crop`` / ``tf.image.random_crop``.

    Raises:
      InvalidArgumentError (at run): a ``size`` larger than ``value`` ("Need value.shape >=
        size"), as TF.
    """
    x = _in(value)
    dims = _lib.constant_value(size)
    shape = None if dims is None else [int(d) for d in np.asarray(dims).reshape(-1)]
    return _lib.apply_op("random_crop", name, [x, size], _Crop(seed), _lib.static_dtype(x),
                         shape)


class _SampleBox:
    """sample_distorted_bounding_box_op.cc: up to ``max_attempts`` random crops of an
    aspect ratio and area in range, the first covering ``min_object_covered`` of a box."""

    __slots__ = ("rng", "min_covered", "aspect", "area", "attempts", "use_image")

    def __init__(self, seed: Any, seed2: Any, min_covered: float, aspect: list[float],
                 area: list[float], attempts: int, use_image: bool) -> None:
        self.rng = _rng(seed, seed2)
        self.min_covered, self.aspect, self.area = min_covered, aspect, area
        self.attempts, self.use_image = attempts, use_image

    def _crop(self, w: int, h: int, min_area: float, max_area: float, ratio: float
              ) -> tuple[int, int, int, int] | None:
        height = int(np.rint(np.sqrt(min_area / ratio)))
        max_height = int(np.rint(np.sqrt(max_area / ratio)))
        if np.rint(max_height * ratio) > w:
            max_height = int((w + 0.5 - 1e-7) / ratio)
        max_height = min(max_height, h)
        height = min(height, max_height)
        if height < max_height:
            height += int(self.rng.integers(0, max_height - height + 1))
        width = int(np.rint(height * ratio))
        area = float(width * height)
        if area < min_area:
            height += 1
            width = int(np.rint(height * ratio))
            area = float(width * height)
        if area > max_area:
            height -= 1
            width = int(np.rint(height * ratio))
            area = float(width * height)
        if (area < min_area or area > max_area or width > w or height > h or width <= 0
                or height <= 0):
            return None
        y = int(self.rng.integers(0, h - height)) if height < h else 0
        x = int(self.rng.integers(0, w - width)) if width < w else 0
        return x, y, x + width, y + height

    def __call__(self, image_size: Any, boxes: Any, min_covered: Any) -> list[np.ndarray]:
        size = [int(v) for v in np.asarray(image_size).reshape(-1)]
        if len(size) != 3:
            raise _errors.InvalidArgumentError(
                None, None, f"image_size must be 1-dimensional with 3 elements "
                            f"[height, width, channels]; got {size}")
        h, w = size[0], size[1]
        bx = np.asarray(boxes, np.float32).reshape(-1, 4)
        rects = [(int(b[1] * w), int(b[0] * h), int(b[3] * w), int(b[2] * h)) for b in bx
                 if 0 <= b[0] <= b[2] <= 1 and 0 <= b[1] <= b[3] <= 1]
        if not rects:
            if not self.use_image:
                raise _errors.InvalidArgumentError(
                    None, None, "No bounding boxes provided as input. One must enable "
                    "use_image_if_no_bounding_boxes if you wish to not provide any bounding "
                    "boxes.")
            rects = [(0, 0, w, h)]
        covered = float(np.asarray(min_covered))
        min_area, max_area = self.area[0] * w * h, self.area[1] * w * h
        crop = (0, 0, w, h)
        for _ in range(self.attempts):
            ratio = self.rng.uniform(self.aspect[0], self.aspect[1])
            c = self._crop(w, h, min_area, max_area, ratio)
            if c is not None and any(_coverage(c, r) >= covered for r in rects):
                crop = c
                break
        x0, y0, x1, y1 = crop
        begin = np.asarray([y0, x0, 0], np.int32)
        csize = np.asarray([y1 - y0, x1 - x0, -1], np.int32)
        box = np.asarray([[[y0 / h, x0 / w, y1 / h, x1 / w]]], np.float32)
        return [begin, csize, box]


def _coverage(crop: tuple[int, int, int, int], box: tuple[int, int, int, int]) -> float:
    area = (box[2] - box[0]) * (box[3] - box[1])
    if area <= 0:
        return 0.0
    ix = max(0, min(crop[2], box[2]) - max(crop[0], box[0]))
    iy = max(0, min(crop[3], box[3]) - max(crop[1], box[1]))
    return ix * iy / area


def sample_distorted_bounding_box(image_size: Any, bounding_boxes: Any,
                                  seed: int | None = None, seed2: int | None = None,
                                  min_object_covered: float = 0.1,
                                  aspect_ratio_range: Any = None, area_range: Any = None,
                                  max_attempts: int | None = None,
                                  use_image_if_no_bounding_boxes: bool | None = None,
                                  name: str | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """A random crop of an image for data augmentation, as
    ``tf.image.sample_distorted_bounding_box`` (TF's Inception preprocessing): up to
    ``max_attempts`` (100) crops with an aspect ratio in ``aspect_ratio_range`` ([0.75,
    1.33]) and an area in ``area_range`` ([0.05, 1.0]) of the image, the first that covers
    at least ``min_object_covered`` of one of ``bounding_boxes``; the whole image when none
    does.

    Args:
      image_size: ``[height, width, channels]`` (int).
      bounding_boxes: float32 ``[batch, N, 4]`` boxes ``[y_min, x_min, y_max, x_max]`` in
        [0, 1]; may be empty with ``use_image_if_no_bounding_boxes=True``.
      seed, seed2: as TF's (graph + op seed when only ``seed`` is given).

    Returns:
      ``(begin, size, bboxes)``: int32 ``[y, x, 0]`` and ``[h, w, -1]`` for ``tf.slice``,
      and float32 ``[1, 1, 4]``, the crop as a box (for ``draw_bounding_boxes``); the three
      from the same draw.

    Raises:
      ValueError: ranges that are not 2 increasing positive values.
      InvalidArgumentError (at run): no boxes without ``use_image_if_no_bounding_boxes``.
    """
    aspect = [0.75, 1.33] if aspect_ratio_range is None else [float(v) for v in
                                                              aspect_ratio_range]
    area = [0.05, 1.0] if area_range is None else [float(v) for v in area_range]
    for what, r in (("aspect_ratio_range", aspect), ("area_range", area)):
        if len(r) != 2 or r[0] <= 0 or r[1] < r[0]:
            raise ValueError(f"{what} must be 2 positive increasing values; got {r}")
    if area[1] > 1:
        raise ValueError(f"area_range must be within (0, 1]; got {area}")
    kernel = _SampleBox(seed, seed2, float(min_object_covered), aspect, area,
                        100 if max_attempts is None else int(max_attempts),
                        bool(use_image_if_no_bounding_boxes))
    outs = _lib.apply_op_outputs(
        "SampleDistortedBoundingBoxV2", name,
        [_in(image_size), _in(bounding_boxes), min_object_covered], kernel,
        [np.int32, np.int32, np.float32], [[3], [3], [1, 1, 4]])
    return outs[0], outs[1], outs[2]

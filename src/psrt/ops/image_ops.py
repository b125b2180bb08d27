"""TF1's ``tf.image`` (tensorflow/python/ops/image_ops_impl.py, r1.15) as graph ops over
numpy: the codecs (``decode_jpeg``, ``decode_png``, ``decode_image``, ``encode_png``,
``encode_jpeg``; Pillow behind them, the ``image`` extra), ``convert_image_dtype``,
``resize_images`` / ``resize_bilinear`` / ``resize_nearest_neighbor``, ``central_crop``,
``per_image_standardization`` and ``draw_bounding_boxes``. The random distortions and
``sample_distorted_bounding_box`` are in ``image_distort_ops.py``.

Images are ``[height, width, channels]`` (or a batch ``[batch, height, width, channels]``)
arrays; floats are in [0, 1] as TF's convention. Gradients as TF's: ``resize_bilinear``,
``per_image_standardization`` and float-to-float ``convert_image_dtype`` carry theirs; the
codecs, nearest-neighbour resizing and ``draw_bounding_boxes`` have none (as TF's).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from psrt.framework import errors as _errors
from psrt.framework import op_def_library as _lib
from psrt.framework.constant_op import constant
from psrt.framework.tensor import Tensor
from psrt.ops.parsing_ops import _in as _string_in
from psrt.ops.parsing_ops import as_bytes

__all__ = ["ResizeMethod", "central_crop", "convert_image_dtype", "crop_to_bounding_box",
           "decode_image", "pad_to_bounding_box", "resize_image_with_crop_or_pad",
           "decode_jpeg", "decode_png", "draw_bounding_boxes", "encode_jpeg", "encode_png",
           "per_image_standardization", "resize_bilinear", "resize_images",
           "resize_nearest_neighbor"]


def _in(x: Any) -> Any:
    return x if _lib.is_graph_value(x) else constant(x)


def _pil() -> Any:
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("psrt's image codecs need Pillow: pip install 'psrt-runtime[image]' "
                          "(or pip install Pillow)") from None
    return Image


def _no_grad(*n: Any) -> Any:
    return lambda dy: tuple(None for _ in n)


# ---- codecs ----------------------------------------------------------------------------------


def _kind_of(data: bytes) -> str:
    if data[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if data[:3] == b"GIF":
        return "gif"
    if data[:2] == b"BM":
        return "bmp"
    return "unknown"


def _check_format(data: bytes) -> None:
    """decode_jpeg and decode_png take JPEG, PNG and (non-animated) GIF data alike, as TF
    r1.15's DecodeImageOp (decode_image_op.cc), which decodes by the data's first bytes."""
    if _kind_of(data) not in ("jpeg", "png", "gif"):
        raise _errors.InvalidArgumentError(
            None, None, f"Expected image (JPEG, PNG, or GIF), got unknown format starting "
                        f"with {data[:16]!r}")


def _open_image(data: bytes, what: str) -> Any:
    Image = _pil()
    try:
        img = Image.open(io.BytesIO(data))
        img.load()
    except Exception as e:  # noqa: BLE001 (Pillow raises many kinds)
        raise _errors.InvalidArgumentError(
            None, None, f"Invalid {what} data or crop window, data size {len(data)}: {e}"
        ) from None
    return img


_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}


def _to_channels(img: Any, channels: int, what: str) -> np.ndarray:
    """``img`` as a uint8 (or uint16 for 16-bit PNG) [H, W, C] array."""
    if channels == 0:
        if img.mode in ("I;16", "I;16B", "I;16L", "I"):
            return np.asarray(img, dtype=np.uint16)[..., None]
        mode = {"1": "L", "L": "L", "P": "RGBA" if "transparency" in img.info else "RGB",
                "LA": "LA", "RGB": "RGB", "RGBA": "RGBA", "CMYK": "RGB", "YCbCr": "RGB",
                "PA": "RGBA"}.get(img.mode, "RGB")
    elif channels in _MODES:
        mode = _MODES[channels]
    else:
        raise _errors.InvalidArgumentError(
            None, None, f"channels must be 0, 1, 3 or 4 for {what}; got {channels}")
    arr = np.asarray(img.convert(mode), dtype=np.uint8)
    return arr[..., None] if arr.ndim == 2 else arr


def _decode(needs: Any, contents: Any, what: str, channels: int, dtype: Any) -> Any:
    data = as_bytes(np.asarray(contents, dtype=object).item())
    _check_format(data)
    arr = _to_channels(_open_image(data, what.upper()), channels, f"decode_{what}")
    if dtype != arr.dtype:
        if arr.dtype == np.uint8 and dtype == np.uint16:
            arr = arr.astype(np.uint16) * np.uint16(257)  # TF: 8-bit PNG read as 16-bit
        elif arr.dtype == np.uint16 and dtype == np.uint8:
            arr = (arr >> 8).astype(np.uint8)
    return arr, _no_grad(contents)


def decode_jpeg(contents: Any, channels: int = 0, ratio: int = 1,
                fancy_upscaling: bool = True, try_recover_truncated: bool = False,
                acceptable_fraction: float = 1, dct_method: str = "",
                name: str | None = None) -> Tensor:
    """Decodes a JPEG image to a uint8 tensor ``[height, width, channels]``, as
    ``tf.image.decode_jpeg`` (PNG and GIF data decode too, as TF r1.15's). Pillow's libjpeg
    decodes with the accurate integer IDCT, TF's default is the fast one: pixels may differ
    by a few units (on average under one).

    Args:
      contents: a scalar string, the JPEG bytes.
      channels: 0 (as in the file), 1 (grayscale) or 3 (RGB).
      ratio: downscaling by 1, 2, 4 or 8 during decoding (libjpeg's DCT scaling).
      fancy_upscaling, try_recover_truncated, acceptable_fraction, dct_method: accepted
        for TF's signature.
      name: the op name (default ``"DecodeJpeg"``).

    Raises:
      ValueError: ``channels`` or ``ratio`` not one of the valid choices.
      ImportError: Pillow is not installed.
      InvalidArgumentError (at run): data that is not an image.
    """
    if channels not in (0, 1, 3):
        raise ValueError(f"channels must be 0, 1 or 3 for decode_jpeg; got {channels}")
    if ratio not in (1, 2, 4, 8):
        raise ValueError(f"ratio must be 1, 2, 4 or 8; got {ratio}")
    _pil()
    c = _string_in(contents)
    return _lib.apply_op("DecodeJpeg", name, [c], _decode_jpeg_kernel, np.uint8,
                         [None, None, channels or None], channels=int(channels),
                         ratio=int(ratio))


def _decode_jpeg_kernel(needs: Any, contents: Any, channels: int, ratio: int) -> Any:
    data = as_bytes(np.asarray(contents, dtype=object).item())
    _check_format(data)
    img = _open_image(data, "JPEG")
    if ratio != 1:
        w, h = img.size
        img = img.reduce(ratio) if img.format != "JPEG" else _jpeg_draft(data, ratio, w, h)
    return _to_channels(img, channels, "decode_jpeg"), _no_grad(contents)


def _jpeg_draft(data: bytes, ratio: int, w: int, h: int) -> Any:
    Image = _pil()
    img = Image.open(io.BytesIO(data))
    img.draft(img.mode, (-(-w // ratio), -(-h // ratio)))
    img.load()
    return img


def decode_png(contents: Any, channels: int = 0, dtype: Any = np.uint8,
               name: str | None = None) -> Tensor:
    """Decodes a PNG image to a ``dtype`` (uint8 or uint16) tensor ``[height, width,
    channels]``, as ``tf.image.decode_png`` (lossless: the same pixels as TF's).

    Args:
      contents: a scalar string, the PNG bytes.
      channels: 0 (as in the file), 1, 3 or 4 (RGBA).
      dtype: uint8 (default) or uint16 (8-bit files are scaled by 257, as TF's).
      name: the op name (default ``"DecodePng"``).

    Raises:
      ValueError: a bad ``channels`` or ``dtype``. ImportError: no Pillow.
      InvalidArgumentError (at run): data that is not a PNG.
    """
    if channels not in (0, 1, 3, 4):
        raise ValueError(f"channels must be 0, 1, 3 or 4 for decode_png; got {channels}")
    dt = _lib.np_dtype(dtype)
    if dt not in (np.uint8, np.uint16):
        raise ValueError(f"dtype must be uint8 or uint16 for decode_png; got {dt.name}")
    _pil()
    c = _string_in(contents)
    return _lib.apply_op("DecodePng", name, [c], _decode, dt, [None, None, channels or None],
                         what="png", channels=int(channels), dtype=dt)


def _decode_any(needs: Any, contents: Any, channels: int, dtype: np.dtype,
                expand_animations: bool) -> Any:
    data = as_bytes(np.asarray(contents, dtype=object).item())
    kind = _kind_of(data)
    if kind == "unknown":
        raise _errors.InvalidArgumentError(
            None, None, "Unknown image file format. One of JPEG, PNG, GIF, BMP required.")
    img = _open_image(data, kind.upper())
    if kind == "gif":
        frames = []
        for i in range(getattr(img, "n_frames", 1)):
            img.seek(i)
            frames.append(_to_channels(img, 3, "decode_gif"))
        arr = np.stack(frames)
        if not expand_animations:
            arr = arr[0]
    else:
        arr = _to_channels(img, channels, f"decode_{kind}")
    return _convert(arr, dtype, False), _no_grad(contents)


def decode_image(contents: Any, channels: int | None = None, dtype: Any = np.uint8,
                 name: str | None = None, expand_animations: bool = True) -> Tensor:
    """Decodes a BMP, GIF, JPEG or PNG image by its first bytes, as
    ``tf.image.decode_image``: ``[height, width, channels]`` (a GIF: ``[frames, height,
    width, 3]``, its first frame only with ``expand_animations=False``), converted to
    ``dtype`` with :func:`convert_image_dtype`.

    Raises:
      ValueError: a bad ``channels``. InvalidArgumentError (at run): "Unknown image file
      format. One of JPEG, PNG, GIF, BMP required." as TF.
    """
    ch = 0 if channels is None else int(channels)
    if ch not in (0, 1, 3, 4):
        raise ValueError(f"channels must be in (None, 0, 1, 3, 4); got {channels}")
    _pil()
    dt = _lib.np_dtype(dtype)
    c = _string_in(contents)
    return _lib.apply_op("DecodeImage", name, [c], _decode_any, dt, None, channels=ch,
                         dtype=dt, expand_animations=bool(expand_animations))


def _encode(needs: Any, image: Any, fmt: str, quality: int, compression: int) -> Any:
    Image = _pil()
    arr = np.asarray(image)
    if arr.ndim != 3 or arr.shape[2] not in (1, 2, 3, 4):
        raise _errors.InvalidArgumentError(
            None, None, f"image must be 3-dimensional [height, width, channels] with 1-4 "
                        f"channels; got shape {list(arr.shape)}")
    mode = _MODES[arr.shape[2]]
    pic = Image.fromarray(arr[..., 0] if arr.shape[2] == 1 else arr, mode)
    buf = io.BytesIO()
    if fmt == "PNG":
        pic.save(buf, "PNG", compress_level=9 if compression < 0 else compression)
    else:
        pic.save(buf, "JPEG", quality=quality)
    return np.asarray(buf.getvalue(), dtype=object), _no_grad(image)


def encode_png(image: Any, compression: int = -1, name: str | None = None) -> Tensor:
    """A uint8 ``[height, width, channels]`` image as PNG bytes (a scalar string), as
    ``tf.image.encode_png``. ``compression`` -1 (default) or 0..9."""
    x = _in(image)
    return _lib.apply_op("EncodePng", name, [x], _encode, object, [], fmt="PNG", quality=0,
                         compression=int(compression))


def encode_jpeg(image: Any, format: str = "", quality: int = 95, name: str | None = None,
                **unused: Any) -> Tensor:
    """A uint8 ``[height, width, channels]`` image as JPEG bytes, as
    ``tf.image.encode_jpeg`` (``quality`` 0..100)."""
    x = _in(image)
    return _lib.apply_op("EncodeJpeg", name, [x], _encode, object, [], fmt="JPEG",
                         quality=int(quality), compression=-1)


# ---- convert_image_dtype ---------------------------------------------------------------------


def _is_int(dt: np.dtype) -> bool:
    return dt.kind in "iu"


def _convert(x: np.ndarray, dt: np.dtype, saturate: bool) -> np.ndarray:
    """TF's convert_image_dtype on arrays (image_ops_impl.py): ints scale by powers of two
    (dividing with floor), int -> float multiplies by 1 / max, float -> int multiplies by
    max + 0.5 and truncates (saturating first when asked)."""
    src = x.dtype
    if src == dt:
        return x
    if _is_int(src) and _is_int(dt):
        smax, dmax = int(np.iinfo(src).max), int(np.iinfo(dt).max)
        if smax > dmax:
            scale = (smax + 1) // (dmax + 1)
            return (x // scale).astype(dt) if not saturate else \
                np.clip(x // scale, np.iinfo(dt).min, dmax).astype(dt)
        scale = (dmax + 1) // (smax + 1)
        return x.astype(dt) * dt.type(scale)
    if not _is_int(src) and not _is_int(dt):
        return x.astype(dt)
    if _is_int(src):
        return x.astype(dt) * dt.type(1.0 / np.iinfo(src).max)
    scaled = x * src.type(np.iinfo(dt).max + 0.5)
    if saturate:
        scaled = np.clip(scaled, np.iinfo(dt).min, np.iinfo(dt).max)
    with np.errstate(invalid="ignore"):
        return scaled.astype(dt)


def _convert_kernel(needs: Any, x: Any, dtype: np.dtype, saturate: bool) -> Any:
    arr = np.asarray(x)
    y = _convert(arr, dtype, saturate)
    floats = arr.dtype.kind == "f" and dtype.kind == "f"
    return y, (lambda dy: (np.asarray(dy, arr.dtype),)) if floats else _no_grad(x)


def convert_image_dtype(image: Any, dtype: Any, saturate: bool = False,
                        name: str | None = None) -> Tensor:
    """``image`` converted to ``dtype``, rescaling values as ``tf.image.convert_image_dtype``:
    floats are in [0, 1), integers in [0, MAX]; uint8 -> float32 is ``x / 255``, float32 ->
    uint8 is ``trunc(x * 255.5)``, integer -> integer shifts by the difference of widths.

    Args:
      image: an image (any shape) of an integer or float dtype.
      dtype: the output dtype.
      saturate: clip before casting float -> int (TF's ``saturate_cast``).
      name: the op name.

    Returns:
      A Tensor of ``dtype`` and ``image``'s shape; ``image`` itself when the dtypes agree.
      Differentiable float -> float (a cast), as TF; no gradient through integers.

    Raises:
      AttributeError: a dtype that is not an image type (TF's "dtype must be either
        floating point or integer").
    """
    x = _in(image)
    dt = _lib.np_dtype(dtype)
    src = _lib.static_dtype(x)
    if dt.kind not in "iuf" or (src is not None and np.dtype(src).kind not in "iuf"):
        raise AttributeError(f"dtype must be either floating point or integer; got "
                             f"{dt.name} (image {src})")
    if src is not None and np.dtype(src) == dt:
        return x
    return _lib.apply_op("convert_image", name, [x], _convert_kernel, dt,
                         _lib.static_shape(x), dtype=dt, saturate=bool(saturate))


# ---- resizing --------------------------------------------------------------------------------


class ResizeMethod:
    """``tf.image.ResizeMethod`` of TF1: BILINEAR 0, NEAREST_NEIGHBOR 1, BICUBIC 2, AREA 3."""

    BILINEAR = 0
    NEAREST_NEIGHBOR = 1
    BICUBIC = 2
    AREA = 3


def _axis_weights(n_in: int, n_out: int, align_corners: bool, half_pixel: bool) -> Any:
    """TF's interpolation weights (resize_bilinear_op.cc ``compute_interpolation_weights``,
    in float32 as TF): the source coordinate of output i is ``i * scale`` (legacy) or
    ``(i + 0.5) * scale - 0.5`` (half-pixel centres), ``scale = in / out`` (``(in - 1) /
    (out - 1)`` with align_corners); lower ``max(floor, 0)``, upper ``min(ceil, in - 1)``
    and the weight of the upper one."""
    if align_corners and n_out > 1:
        scale = np.float32(n_in - 1) / np.float32(n_out - 1)
    else:
        scale = np.float32(n_in) / np.float32(n_out)
    i = np.arange(n_out, dtype=np.float32)
    src = ((i + np.float32(0.5)) * scale - np.float32(0.5)) if half_pixel else i * scale
    lo = np.floor(src)
    lo_i = np.clip(lo.astype(np.int64), 0, n_in - 1)
    hi_i = np.clip(np.ceil(src).astype(np.int64), 0, n_in - 1)
    return lo_i, hi_i, (src - lo).astype(np.float32)


def _resize_bilinear(needs: Any, images: Any, size: Any, align_corners: bool,
                     half_pixel_centers: bool) -> Any:
    x = np.asarray(images)
    if x.ndim != 4:
        raise _errors.InvalidArgumentError(
            None, None, f"input must be 4-dimensional [batch, height, width, channels]; got "
                        f"{list(x.shape)}")
    oh, ow = (int(v) for v in np.asarray(size).reshape(-1))
    if oh <= 0 or ow <= 0:
        raise _errors.InvalidArgumentError(
            None, None, f"output dimensions must be positive; got {[oh, ow]}")
    b, h, w, c = x.shape
    y0, y1, ly = _axis_weights(h, oh, align_corners, half_pixel_centers)
    x0, x1, lx = _axis_weights(w, ow, align_corners, half_pixel_centers)
    xf = x.astype(np.float32)
    fx = lx[None, None, :, None]
    tl, tr = xf[:, y0][:, :, x0], xf[:, y0][:, :, x1]
    bl, br = xf[:, y1][:, :, x0], xf[:, y1][:, :, x1]
    top = tl + (tr - tl) * fx          # TF's compute_lerp order, in float32
    bottom = bl + (br - bl) * fx
    out = top + (bottom - top) * ly[None, :, None, None]

    def grad(dy: Any) -> Any:
        if x.dtype.kind != "f":
            return None, None
        g = np.zeros((b, h, w, c), np.float64)
        dy = np.asarray(dy, np.float64)
        wy = [(y0, 1 - ly), (y1, ly)]
        wx = [(x0, 1 - lx), (x1, lx)]
        for iy, fy in wy:
            for ix, fx in wx:
                contrib = dy * fy[None, :, None, None] * fx[None, None, :, None]
                rows = np.repeat(iy, ow)
                cols = np.tile(ix, oh)
                np.add.at(g, (slice(None), rows, cols),
                          contrib.reshape(b, oh * ow, c))
        return g.astype(x.dtype), None

    return out, grad


def _resize_nearest(needs: Any, images: Any, size: Any, align_corners: bool,
                    half_pixel_centers: bool) -> Any:
    x = np.asarray(images)
    oh, ow = (int(v) for v in np.asarray(size).reshape(-1))
    b, h, w, c = x.shape

    def index(n_in: int, n_out: int) -> np.ndarray:
        # resize_nearest_neighbor_op.cc, in float32: roundf (halves away from zero) with
        # align_corners, floorf otherwise
        scale = (np.float32(n_in - 1) / np.float32(n_out - 1) if align_corners and n_out > 1
                 else np.float32(n_in) / np.float32(n_out))
        i = np.arange(n_out, dtype=np.float32)
        src = (i + np.float32(0.5)) * scale if half_pixel_centers else i * scale
        src = np.floor(src + np.float32(0.5)) if align_corners else np.floor(src)
        return np.minimum(src.astype(np.int64), n_in - 1)

    return x[:, index(h, oh)][:, :, index(w, ow)], _no_grad(images, size)


def _batched(images: Any, what: str) -> tuple[Any, bool]:
    x = _in(images)
    s = _lib.static_shape(x)
    if s.ndims is not None and s.ndims not in (3, 4):
        raise ValueError(f"'images' must have either 3 or 4 dimensions; got shape {s} "
                         f"({what})")
    return x, s.ndims == 3


def _expand(x: Any) -> Any:
    return _lib.apply_op("ExpandDims", None, [x], lambda n, v: (np.asarray(v)[None],
                         lambda dy: (np.asarray(dy)[0],)), _lib.static_dtype(x),
                         [1] + _lib.static_shape(x).as_list())


def _squeeze(x: Any) -> Any:
    return _lib.apply_op("Squeeze", None, [x], lambda n, v: (np.asarray(v)[0],
                         lambda dy: (np.asarray(dy)[None],)), _lib.static_dtype(x),
                         _lib.static_shape(x).as_list()[1:])


def _resize(op: str, kernel: Any, images: Any, size: Any, align_corners: bool,
            half_pixel_centers: bool, name: str | None, dtype: Any) -> Tensor:
    x, single = _batched(images, op)
    if single:
        x = _expand(x)
    dims = _lib.constant_value(size)
    s = _lib.static_shape(x).as_list()
    out_hw = [None, None] if dims is None else [int(d) for d in np.asarray(dims).reshape(-1)]
    dt = _lib.static_dtype(x) if dtype is None else dtype
    y = _lib.apply_op(op, name, [x, size], kernel, dt, [s[0]] + out_hw + [s[3]],
                      align_corners=bool(align_corners),
                      half_pixel_centers=bool(half_pixel_centers))
    return _squeeze(y) if single else y


def resize_bilinear(images: Any, size: Any, align_corners: bool = False,
                    name: str | None = None, half_pixel_centers: bool = False) -> Tensor:
    """Bilinear resize of a 4-D ``images`` [batch, h, w, c] to ``size`` [new_h, new_w], as
    ``tf.image.resize_bilinear`` of TF r1.15: float32 output; by default TF1's legacy
    mapping (source = ``i * in / out``, no half-pixel centres), ``align_corners`` maps the
    corner pixels onto each other, ``half_pixel_centers`` is TF 2's mapping. Differentiable
    in ``images`` (float input)."""
    return _resize("ResizeBilinear", _resize_bilinear, images, size, align_corners,
                   half_pixel_centers, name, np.float32)


def resize_nearest_neighbor(images: Any, size: Any, align_corners: bool = False,
                            name: str | None = None, half_pixel_centers: bool = False
                            ) -> Tensor:
    """Nearest-neighbour resize, as ``tf.image.resize_nearest_neighbor`` (r1.15's legacy
    mapping: source ``floor(i * in / out)``; the input dtype is kept). No gradient."""
    return _resize("ResizeNearestNeighbor", _resize_nearest, images, size, align_corners,
                   half_pixel_centers, name, None)


def resize_images(images: Any, size: Any, method: int = ResizeMethod.BILINEAR,
                  align_corners: bool = False, preserve_aspect_ratio: bool = False,
                  name: str | None = None) -> Tensor:
    """Resizes ``images`` (3-D or 4-D) to ``size`` [new_height, new_width], as TF1's
    ``tf.image.resize_images``: ``BILINEAR`` (float32 out) or ``NEAREST_NEIGHBOR`` (dtype
    kept). A static size equal to the input's returns ``images`` as it is (TF1's shortcut).

    Raises:
      ValueError: images not 3-D/4-D, a size that is not 2 positive ints, or a method
        psrt does not have (BICUBIC, AREA), naming the ones it has.
    """
    if method not in (ResizeMethod.BILINEAR, ResizeMethod.NEAREST_NEIGHBOR):
        raise ValueError(f"resize method {method} is not supported by psrt; use "
                         f"ResizeMethod.BILINEAR (0) or ResizeMethod.NEAREST_NEIGHBOR (1)")
    x, _ = _batched(images, "resize_images")
    dims = _lib.constant_value(size)
    s = _lib.static_shape(x).as_list()
    if dims is not None:
        hw = [int(d) for d in np.asarray(dims).reshape(-1)]
        if len(hw) != 2 or min(hw) <= 0:
            raise ValueError(f"'size' must be a 1-D Tensor of 2 positive elements: "
                             f"new_height, new_width; got {hw}")
        if preserve_aspect_ratio and s[-3] and s[-2]:
            scale = min(hw[0] / s[-3], hw[1] / s[-2])
            hw = [int(round(s[-3] * scale)), int(round(s[-2] * scale))]
            size = hw
        if s[-3] == hw[0] and s[-2] == hw[1]:
            return x
    if method == ResizeMethod.BILINEAR:
        return resize_bilinear(x, size, align_corners=align_corners, name=name)
    return resize_nearest_neighbor(x, size, align_corners=align_corners, name=name)


# ---- crops and per-image arithmetic ----------------------------------------------------------


def _central_crop(needs: Any, x: Any, fraction: float) -> Any:
    arr = np.asarray(x)
    h, w = arr.shape[-3], arr.shape[-2]
    top = int((h - h * fraction) / 2)
    left = int((w - w * fraction) / 2)
    out = arr[..., top:h - top, left:w - left, :]

    def grad(dy: Any) -> Any:
        g = np.zeros_like(arr, dtype=np.asarray(dy).dtype)
        g[..., top:h - top, left:w - left, :] = dy
        return (g,)

    return out, grad


def central_crop(image: Any, central_fraction: float) -> Tensor:
    """The central ``central_fraction`` of each image (3-D or 4-D), as
    ``tf.image.central_crop``: ``top = int((h - h * fraction) / 2)`` rows (and columns)
    removed on each side (image_ops_impl.py).

    Raises:
      ValueError: ``central_fraction`` not in (0, 1], or an image not 3-D/4-D.
    """
    if central_fraction <= 0.0 or central_fraction > 1.0:
        raise ValueError(f"central_fraction must be within (0, 1]; got {central_fraction}")
    x, _ = _batched(image, "central_crop")
    if central_fraction == 1.0:
        return x
    s = _lib.static_shape(x).as_list()
    out = list(s)
    f = float(central_fraction)
    for k in (-3, -2):
        if s[k] is not None:
            out[k] = s[k] - 2 * int((s[k] - s[k] * f) / 2)
    return _lib.apply_op("central_crop", None, [x], _central_crop, _lib.static_dtype(x), out,
                         fraction=f)


def _crop_or_pad(needs: Any, x: Any, crop: tuple[int, int, int, int],
                 pad: tuple[int, int, int, int], what: str) -> Any:
    """Crops the window ``crop`` (top, left, height, width; height/width -1: up to
    ``target - offset`` of a pad) of each image, then pads it with zeros into ``pad``
    (top, left, target height, target width; -1: no padding)."""
    arr = np.asarray(x)
    h, w = arr.shape[-3], arr.shape[-2]
    top, left, ch, cw = crop
    ch = h - top if ch < 0 else ch
    cw = w - left if cw < 0 else cw
    if top + ch > h or left + cw > w:
        raise _errors.InvalidArgumentError(
            None, None, f"{what}: height must be >= target + offset and width must be >= "
                        f"target + offset; image {h}x{w}, window {ch}x{cw} at ({top}, {left})")
    ptop, pleft, th, tw = pad
    th, tw = (ch if th < 0 else th), (cw if tw < 0 else tw)
    if ptop + ch > th or pleft + cw > tw:
        raise _errors.InvalidArgumentError(
            None, None, f"{what}: height must be <= target - offset and width must be <= "
                        f"target - offset; image {ch}x{cw}, target {th}x{tw} at "
                        f"({ptop}, {pleft})")
    out = np.zeros(arr.shape[:-3] + (th, tw, arr.shape[-1]), arr.dtype)
    out[..., ptop:ptop + ch, pleft:pleft + cw, :] = arr[..., top:top + ch, left:left + cw, :]

    def grad(dy: Any) -> Any:
        g = np.zeros(arr.shape, np.asarray(dy).dtype)
        g[..., top:top + ch, left:left + cw, :] = \
            np.asarray(dy)[..., ptop:ptop + ch, pleft:pleft + cw, :]
        return (g,)

    return out, grad


def _window_op(op: str, image: Any, crop: tuple[int, int, int, int],
               pad: tuple[int, int, int, int], out_hw: list[int | None]) -> Tensor:
    x, _ = _batched(image, op)
    s = _lib.static_shape(x).as_list()
    return _lib.apply_op(op, None, [x], _crop_or_pad, _lib.static_dtype(x),
                         s[:-3] + out_hw + s[-1:], crop=crop, pad=pad, what=op)


def _nonneg(**kw: int) -> None:
    for k, v in kw.items():
        if int(v) < 0:
            raise ValueError(f"{k} must be >= 0; got {v}")


def crop_to_bounding_box(image: Any, offset_height: int, offset_width: int,
                         target_height: int, target_width: int) -> Tensor:
    """The window ``[offset_height : offset_height + target_height, offset_width :
    offset_width + target_width]`` of each image (3-D or 4-D), as
    ``tf.image.crop_to_bounding_box``. Differentiable.

    Raises:
      ValueError: a negative offset or a target not positive (TF's checks).
      InvalidArgumentError (at run): a window outside the image.
    """
    _nonneg(offset_height=offset_height, offset_width=offset_width)
    if int(target_height) <= 0 or int(target_width) <= 0:
        raise ValueError(f"target_width and target_height must be > 0; got "
                         f"{target_height}, {target_width}")
    th, tw = int(target_height), int(target_width)
    return _window_op("crop_to_bounding_box", image,
                      (int(offset_height), int(offset_width), th, tw), (0, 0, -1, -1),
                      [th, tw])


def pad_to_bounding_box(image: Any, offset_height: int, offset_width: int,
                        target_height: int, target_width: int) -> Tensor:
    """Each image placed at (``offset_height``, ``offset_width``) in a zero image of
    ``target_height`` x ``target_width``, as ``tf.image.pad_to_bounding_box``.
    Differentiable.

    Raises:
      ValueError: a negative offset. InvalidArgumentError (at run): an image that does not
      fit.
    """
    _nonneg(offset_height=offset_height, offset_width=offset_width)
    th, tw = int(target_height), int(target_width)
    return _window_op("pad_to_bounding_box", image, (0, 0, -1, -1),
                      (int(offset_height), int(offset_width), th, tw), [th, tw])


def _crop_pad_kernel(needs: Any, x: Any, th: int, tw: int) -> Any:
    arr = np.asarray(x)
    h, w = arr.shape[-3], arr.shape[-2]
    crop = (max(-(th - h) // 2, 0), max(-(tw - w) // 2, 0), min(th, h), min(tw, w))
    pad = (max((th - h) // 2, 0), max((tw - w) // 2, 0), th, tw)
    return _crop_or_pad(needs, arr, crop, pad, "resize_image_with_crop_or_pad")


def resize_image_with_crop_or_pad(image: Any, target_height: int, target_width: int
                                  ) -> Tensor:
    """Centrally crops or zero-pads each image to ``target_height`` x ``target_width``, as
    ``tf.image.resize_image_with_crop_or_pad`` (image_ops_impl.py: crop offset
    ``max(-diff // 2, 0)``, pad offset ``max(diff // 2, 0)``; CIFAR-10's evaluation input).
    Differentiable.

    Raises:
      ValueError: a target not positive.
    """
    th, tw = int(target_height), int(target_width)
    if th <= 0 or tw <= 0:
        raise ValueError(f"target_height and target_width must be > 0; got {th}, {tw}")
    x, _ = _batched(image, "resize_image_with_crop_or_pad")
    s = _lib.static_shape(x).as_list()
    return _lib.apply_op("resize_image_with_crop_or_pad", None, [x], _crop_pad_kernel,
                         _lib.static_dtype(x), s[:-3] + [th, tw] + s[-1:], th=th, tw=tw)


def _standardize(needs: Any, x: Any) -> Any:
    arr = np.asarray(x).astype(np.float32)
    axes = (-1, -2, -3)
    n = arr.shape[-1] * arr.shape[-2] * arr.shape[-3]
    mean = arr.mean(axis=axes, keepdims=True)
    std = arr.std(axis=axes, keepdims=True)
    floor = np.float32(1.0 / np.sqrt(n))
    adj = np.maximum(std, floor)
    y = (arr - mean) / adj

    def grad(dy: Any) -> Any:
        if np.asarray(x).dtype.kind != "f":
            return (None,)
        d = np.asarray(dy, np.float64)
        yy = y.astype(np.float64)
        g = d - d.mean(axis=axes, keepdims=True)
        g = np.where(std > floor, g - yy * (d * yy).mean(axis=axes, keepdims=True), g)
        return ((g / adj).astype(np.asarray(x).dtype),)

    return y, grad


def per_image_standardization(image: Any) -> Tensor:
    """``(x - mean) / max(stddev, 1 / sqrt(num_elements))`` per image, as
    ``tf.image.per_image_standardization`` (image_ops_impl.py): float32 output, mean and
    standard deviation over height, width and channels of each image (3-D or 4-D).
    Differentiable in float images."""
    x, _ = _batched(image, "per_image_standardization")
    return _lib.apply_op("per_image_standardization", None, [x], _standardize, np.float32,
                         _lib.static_shape(x))


# TF's draw_bounding_box_op.cc colour table (RGBA).
_COLORS = np.array([[1, 1, 0, 1], [0, 0, 1, 1], [1, 0, 0, 1], [0, 1, 0, 1],
                    [0.5, 0, 0.5, 1], [0.5, 0.5, 0, 1], [0.5, 0, 0, 1], [0, 0, 0.5, 1],
                    [0, 1, 1, 1], [1, 0, 1, 1]], np.float32)


def _draw_boxes(needs: Any, images: Any, boxes: Any, colors: Any) -> Any:
    img = np.array(images, copy=True)
    bx = np.asarray(boxes, np.float32)
    if img.ndim != 4 or bx.ndim != 3 or bx.shape[-1] != 4 or bx.shape[0] != img.shape[0]:
        raise _errors.InvalidArgumentError(
            None, None, f"images must be [batch, height, width, depth] and boxes [batch, "
                        f"num_boxes, 4]; got {list(img.shape)} and {list(bx.shape)}")
    _, h, w, depth = img.shape
    table = _COLORS if colors is None else np.asarray(colors, np.float32).reshape(-1, 4)
    if depth == 1:
        table = np.ones((1, 4), np.float32)
    for b in range(img.shape[0]):
        for k in range(bx.shape[1]):
            color = table[k % len(table)][:depth]
            ymin, xmin, ymax, xmax = bx[b, k]
            r0, c0 = int(ymin * (h - 1)), int(xmin * (w - 1))
            r1, c1 = int(ymax * (h - 1)), int(xmax * (w - 1))
            if r0 > r1 or c0 > c1 or r0 >= h or r1 < 0 or c0 >= w or c1 < 0:
                continue
            rc0, rc1 = max(r0, 0), min(r1, h - 1)
            cc0, cc1 = max(c0, 0), min(c1, w - 1)
            for r in (r0, r1):
                if 0 <= r < h:
                    img[b, r, cc0:cc1 + 1] = color
            for c in (c0, c1):
                if 0 <= c < w:
                    img[b, rc0:rc1 + 1, c] = color
    return img, _no_grad(images, boxes, colors)


def draw_bounding_boxes(images: Any, boxes: Any, name: str | None = None,
                        colors: Any = None) -> Tensor:
    """Draws the outline of each box on each image, as ``tf.image.draw_bounding_boxes``
    (TF's kernel: corners at ``int(ymin * (height - 1))`` ..., one-pixel lines, colours
    cycling through TF's table: yellow, blue, red, lime, ...; white for one channel).

    Args:
      images: float32 ``[batch, height, width, depth]``.
      boxes: float32 ``[batch, num_boxes, 4]`` of ``[y_min, x_min, y_max, x_max]`` in
        [0, 1] of the image.
      name: the op name.
      colors: optional ``[n, 4]`` RGBA colours to cycle through instead.

    Returns:
      ``images`` with the boxes drawn, same dtype and shape. No gradient (TF has none).
    """
    x = _in(images)
    b = _in(boxes)
    return _lib.apply_op("DrawBoundingBoxes", name, [x, b, colors], _draw_boxes,
                         _lib.static_dtype(x), _lib.static_shape(x))

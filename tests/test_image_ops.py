"""psrt.image (psrt/ops/image_ops.py, image_distort_ops.py) against TensorFlow's own outputs:
tests/data/tf_image_ops.npz was written by tests/data/make_image_fixture.py with TF
(tf.compat.v1 for r1.15's behaviour: resize_bilinear's legacy mapping by default). Cases
from tensorflow/python/ops/image_ops_test.py where TF has them; the kernels cited beside
each test (tensorflow/core/kernels/*.cc)."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest

import psrt as tf
from psrt import image
from tests.test_math_ops import sess  # noqa: F401  (fixture)

PIL = pytest.importorskip("PIL.Image")
DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests",
                    "data")


def check_grad32(sess, build, shape, seed=0):  # noqa: F811
    """psrt.gradients of sum(build(x) * w) against central differences. The ops compute in
    float32 as TF's (their output is float32 whatever the input), so the differences use a
    step of 1e-3 on float64 inputs and a float32-sized tolerance."""
    rng = np.random.default_rng(seed)
    x0 = rng.normal(size=shape)
    ph = tf.placeholder(tf.float64, [None] + list(shape[1:]))
    y = build(ph)
    w = rng.normal(size=[d if d is not None else shape[0] for d in y.shape.as_list()])
    loss = tf.reduce_sum(tf.cast(y, tf.float64) * w)
    (g,) = sess.run(tf.gradients(loss, [ph]), {ph: x0})
    num = np.zeros_like(x0)
    for i in np.ndindex(x0.shape):
        xp, xm = x0.copy(), x0.copy()
        xp[i] += 1e-3
        xm[i] -= 1e-3
        num[i] = (sess.run(loss, {ph: xp}) - sess.run(loss, {ph: xm})) / 2e-3
    np.testing.assert_allclose(g, num, rtol=2e-3, atol=2e-3)


@pytest.fixture(scope="module")
def ref():
    with np.load(os.path.join(DATA, "tf_image_ops.npz")) as z:
        return {k: z[k] for k in z.files}


@pytest.mark.parametrize("kind,kw", [("legacy", {}), ("align", {"align_corners": True}),
                                     ("half", {"half_pixel_centers": True})])
def test_resize_bilinear_and_nearest_match_tf(sess, ref, kind, kw):  # noqa: F811
    # resize_bilinear_op.cc / resize_nearest_neighbor_op.cc, r1.15 default: legacy mapping
    batch = ref["img"][None]
    up = image.resize_bilinear(batch, [9, 11], **kw)
    assert up.dtype == np.float32 and up.shape.as_list() == [1, 9, 11, 3]
    np.testing.assert_allclose(sess.run(up), ref[f"bilinear_up_{kind}"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(sess.run(image.resize_bilinear(batch, [3, 4], **kw)),
                               ref[f"bilinear_down_{kind}"], rtol=0, atol=1e-6)
    np.testing.assert_array_equal(
        sess.run(image.resize_nearest_neighbor(batch, [9, 4], **kw)), ref[f"nearest_{kind}"])


def test_resize_images_and_uint8(sess, ref):  # noqa: F811
    np.testing.assert_allclose(sess.run(image.resize_bilinear(ref["u8"][None], [8, 5])),
                               ref["bilinear_u8"], atol=1e-4)
    r = image.resize_images(ref["u8"], [3, 7])
    assert r.dtype == np.float32 and r.shape.as_list() == [3, 7, 3]
    np.testing.assert_allclose(sess.run(r), ref["resize_images_u8"], atol=1e-4)
    x = tf.constant(ref["img"])
    assert image.resize_images(x, [5, 7]) is x      # TF1: same static size, same tensor
    nn = image.resize_images(ref["u8"], [12, 8], image.ResizeMethod.NEAREST_NEIGHBOR)
    assert nn.dtype == np.uint8
    np.testing.assert_array_equal(sess.run(nn), np.repeat(np.repeat(ref["u8"], 2, 0), 2, 1))
    with pytest.raises(ValueError, match="BICUBIC|not supported"):
        image.resize_images(ref["u8"], [3, 3], image.ResizeMethod.BICUBIC)
    with pytest.raises(ValueError, match="3 or 4 dimensions"):
        image.resize_images(np.zeros((2, 2)), [3, 3])


def test_resize_bilinear_gradient(sess):  # noqa: F811
    check_grad32(sess, lambda v: image.resize_bilinear(v, [5, 3]), (1, 3, 4, 2))
    check_grad32(sess, lambda v: image.resize_bilinear(v, [2, 7], align_corners=True),
                 (2, 4, 3, 1))
    check_grad32(sess, lambda v: image.resize_bilinear(v, [3, 2], half_pixel_centers=True),
                 (1, 5, 4, 1))


def test_convert_image_dtype_matches_tf(sess, ref):  # noqa: F811
    # image_ops_impl.py convert_image_dtype
    u8, img = ref["u8"], ref["img"]
    np.testing.assert_allclose(sess.run(image.convert_image_dtype(u8, tf.float32)),
                               ref["u8_to_float"], rtol=1e-7)
    np.testing.assert_array_equal(sess.run(image.convert_image_dtype(img, tf.uint8)),
                                  ref["float_to_u8"])
    np.testing.assert_array_equal(sess.run(image.convert_image_dtype(
        img * 1.5 - 0.2, tf.uint8, saturate=True)), ref["float_to_u8_sat"])
    i32 = image.convert_image_dtype(u8, tf.int32)
    np.testing.assert_array_equal(sess.run(i32), ref["u8_to_int32"])
    np.testing.assert_array_equal(sess.run(image.convert_image_dtype(
        ref["u8_to_int32"] + 12345, tf.uint8)), ref["int32_to_u8"])
    # image_ops_test.py ConvertImageTest: identity when the dtype agrees
    x = tf.constant(img)
    assert image.convert_image_dtype(x, tf.float32) is x
    check_grad32(sess, lambda v: image.convert_image_dtype(v, tf.float32), (2, 3))


@pytest.mark.parametrize("fn,arg,key,src", [
    (image.adjust_contrast, 1.7, "contrast", "img"),
    (image.adjust_contrast, 0.6, "contrast_u8", "u8"),
    (image.adjust_brightness, -0.3, "brightness", "img"),
    (image.adjust_brightness, 0.2, "brightness_u8", "u8"),
    (image.adjust_hue, 0.3, "hue", "img"),
    (image.adjust_hue, -0.45, "hue_neg", "img"),
    (image.adjust_hue, 0.1, "hue_u8", "u8"),
    (image.adjust_saturation, 1.8, "saturation", "img"),
    (image.adjust_saturation, 0.3, "saturation_low", "img"),
])
def test_color_adjustments_match_tf(sess, ref, fn, arg, key, src):  # noqa: F811
    # adjust_contrast_op.cc, adjust_hue_op.cc, adjust_saturation_op.cc
    got = sess.run(fn(ref[src], arg))
    assert got.dtype == ref[key].dtype
    if got.dtype == np.uint8:
        assert np.abs(got.astype(int) - ref[key].astype(int)).max() <= 1
    else:
        np.testing.assert_allclose(got, ref[key], atol=2e-6)


def test_rgb_to_hsv_and_back(sess, ref):  # noqa: F811
    hsv = sess.run(image.rgb_to_hsv(ref["img"]))
    np.testing.assert_allclose(hsv, ref["hsv"], atol=1e-6)
    np.testing.assert_allclose(sess.run(image.hsv_to_rgb(hsv)), ref["img"], atol=1e-6)


def test_per_image_standardization_matches_tf(sess, ref):  # noqa: F811
    # image_ops_impl.py per_image_standardization: stddev floored at 1/sqrt(N)
    np.testing.assert_allclose(sess.run(image.per_image_standardization(ref["img"])),
                               ref["standardized"], atol=1e-5)
    np.testing.assert_allclose(sess.run(image.per_image_standardization(ref["u8"])),
                               ref["standardized_u8"], atol=1e-5)
    np.testing.assert_array_equal(sess.run(image.per_image_standardization(
        np.full((2, 3, 1), 5.0, np.float32))), ref["standardized_const"])
    check_grad32(sess, image.per_image_standardization, (2, 2, 3))
    check_grad32(sess, image.per_image_standardization, (2, 3, 2, 2))


def test_central_crop_matches_tf(sess, ref):  # noqa: F811
    c = image.central_crop(ref["img"], 0.5)
    assert c.shape.as_list() == list(ref["central_crop_05"].shape)
    np.testing.assert_array_equal(sess.run(c), ref["central_crop_05"])
    np.testing.assert_array_equal(sess.run(image.central_crop(ref["u8"], 0.33)),
                                  ref["central_crop_033"])
    with pytest.raises(ValueError, match=r"central_fraction must be within \(0, 1\]"):
        image.central_crop(ref["img"], 0.0)


def test_draw_bounding_boxes_matches_tf(sess, ref):  # noqa: F811
    # draw_bounding_box_op.cc: the colour table, clipping, int(y * (h - 1)) corners
    got = sess.run(image.draw_bounding_boxes(np.zeros((1, 10, 12, 3), np.float32),
                                             ref["boxes"]))
    np.testing.assert_array_equal(got, ref["drawn"])
    got = sess.run(image.draw_bounding_boxes(np.zeros((1, 10, 12, 1), np.float32),
                                             ref["boxes"]))
    np.testing.assert_array_equal(got, ref["drawn_gray"])


def test_decode_png_of_tfs_png(sess, ref):  # noqa: F811
    # decode_image_op.cc: PNG is lossless, TF's bytes decode to its pixels exactly
    png = ref["png_rgb"].tobytes()
    d = image.decode_png(png)
    assert d.dtype == np.uint8 and d.shape.as_list() == [None, None, None]
    np.testing.assert_array_equal(sess.run(d), ref["u8"])
    np.testing.assert_array_equal(sess.run(image.decode_png(ref["png_gray"].tobytes())),
                                  ref["u8"][..., :1])
    rgba = sess.run(image.decode_png(png, channels=4))
    assert rgba.shape == (6, 4, 4) and (rgba[..., 3] == 255).all()
    np.testing.assert_array_equal(sess.run(image.decode_png(png, dtype=tf.uint16)),
                                  ref["u8"].astype(np.uint16) * 257)
    np.testing.assert_array_equal(sess.run(image.decode_image(png)), ref["u8"])
    np.testing.assert_array_equal(sess.run(image.decode_png(image.encode_png(ref["u8"]))),
                                  ref["u8"])
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"Expected image \(JPEG, PNG, or GIF\), got unknown format"):
        sess.run(image.decode_png(b"not a png"))
    # decode_image_op.cc: decode_jpeg and decode_png decode by the data's magic bytes
    np.testing.assert_array_equal(sess.run(image.decode_jpeg(png)), ref["u8"])
    with pytest.raises(tf.errors.InvalidArgumentError, match="Unknown image file format"):
        sess.run(image.decode_image(b"not an image"))


def test_decode_jpeg_of_tfs_jpeg(sess, ref):  # noqa: F811
    # TF decodes with libjpeg's fast integer IDCT by default (dct_method ""), Pillow with
    # the accurate one: pixels agree within a few units, on average within one
    jpeg = ref["jpeg"].tobytes()
    got = sess.run(image.decode_jpeg(jpeg))
    assert got.shape == ref["jpeg_decoded"].shape and got.dtype == np.uint8
    diff = np.abs(got.astype(int) - ref["jpeg_decoded"].astype(int))
    assert diff.max() <= 8 and diff.mean() < 1.5
    gray = sess.run(image.decode_jpeg(jpeg, channels=1))
    diff = np.abs(gray.astype(int) - ref["jpeg_decoded_gray"].astype(int))
    assert gray.shape[2] == 1 and diff.max() <= 8 and diff.mean() < 1.5
    half = sess.run(image.decode_jpeg(jpeg, ratio=2))
    assert half.shape == (12, 8, 3)
    as_float = sess.run(image.decode_image(jpeg, dtype=tf.float32))
    np.testing.assert_allclose(as_float, got / 255.0, atol=2 / 255 + 1e-6)
    with pytest.raises(ValueError, match="channels"):
        image.decode_jpeg(jpeg, channels=2)


def test_decode_gif_frames(sess):  # noqa: F811
    frames = [PIL.new("RGB", (3, 2), c) for c in ((255, 0, 0), (0, 0, 255))]
    buf = io.BytesIO()
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:])
    got = sess.run(image.decode_image(buf.getvalue()))
    assert got.shape == (2, 2, 3, 3)
    assert got[0, 0, 0].tolist() == [255, 0, 0] and got[1, 0, 0].tolist() == [0, 0, 255]


def test_random_ops_seeded_as_tf(sess):  # noqa: F811
    # framework/random_seed.py: graph seed + op seed give the same draws in a new graph
    x = np.arange(2 * 6 * 5 * 3, dtype=np.float32).reshape(2, 6, 5, 3) / 200.0

    def build():
        tf.reset_default_graph()
        tf.set_random_seed(42)
        return [image.random_flip_left_right(x), image.random_brightness(x, 0.2),
                image.random_contrast(x, 0.5, 1.5), image.random_hue(x, 0.2),
                image.random_saturation(x, 0.5, 1.5), tf.random_crop(x, [1, 3, 3, 3])]

    with tf.Session("") as s:
        first = [s.run(build()) for _ in range(3)]
    with tf.Session("") as s:
        again = [s.run(build()) for _ in range(3)]
    for a, b in zip(first, again):
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)
    tf.reset_default_graph()
    flip = image.random_flip_left_right(x[0], seed=3)
    crop = image.random_crop(x[0], [2, 2, 3], seed=3)
    with tf.Session("") as s:
        flips = [s.run(flip) for _ in range(40)]
        crops = [s.run(crop) for _ in range(40)]
    n_flipped = sum((f == x[0][:, ::-1]).all() for f in flips)
    assert 5 < n_flipped < 35 and all((f == x[0]).all() or (f == x[0][:, ::-1]).all()
                                      for f in flips)
    assert len({c.tobytes() for c in crops}) > 3
    flat = x[0].reshape(-1, 3)
    for c in crops:   # every crop is a contiguous window of the image
        i, j = np.argwhere((x[0] == c[0, 0]).all(axis=-1))[0]
        np.testing.assert_array_equal(x[0][i:i + 2, j:j + 2], c)
    assert flat.shape[0] == 30


def test_random_op_argument_checks():
    # image_ops_impl.py: TF's ValueErrors
    with pytest.raises(ValueError, match="max_delta must be non-negative"):
        image.random_brightness(np.zeros((2, 2, 3)), -1)
    with pytest.raises(ValueError, match="upper must be > lower"):
        image.random_contrast(np.zeros((2, 2, 3)), 1.0, 0.5)
    with pytest.raises(ValueError, match="lower must be non-negative"):
        image.random_saturation(np.zeros((2, 2, 3)), -0.5, 0.5)
    with pytest.raises(ValueError, match=r"max_delta must be <= 0.5"):
        image.random_hue(np.zeros((2, 2, 3)), 0.6)


def test_random_crop_too_big(sess):  # noqa: F811
    with pytest.raises(tf.errors.InvalidArgumentError, match="Need value.shape >= size"):
        sess.run(tf.random_crop(np.zeros((2, 2)), [3, 1]))


def test_sample_distorted_bounding_box(sess):  # noqa: F811
    # sample_distorted_bounding_box_op.cc; image_ops_test.py SelectDistortedCropBoxTest:
    # the crop covers min_object_covered of the box, its area and aspect ratio in range
    h, w = 40, 50
    box = np.array([[[0.1, 0.2, 0.6, 0.9]]], np.float32)
    tf.set_random_seed(1)
    begin, size, bboxes = image.sample_distorted_bounding_box(
        [h, w, 3], box, min_object_covered=0.3, aspect_ratio_range=[0.5, 2.0],
        area_range=[0.1, 1.0], max_attempts=100)
    assert begin.shape.as_list() == [3] and bboxes.shape.as_list() == [1, 1, 4]
    by, bx, by1, bx1 = int(0.1 * h), int(0.2 * w), int(0.6 * h), int(0.9 * w)
    seen = set()
    for _ in range(30):
        b, s, bb = sess.run([begin, size, bboxes])
        y, x, ch, cw = b[0], b[1], s[0], s[1]
        assert b[2] == 0 and s[2] == -1
        assert 0 <= y and y + ch <= h and 0 <= x and x + cw <= w
        assert 0.1 * h * w <= ch * cw <= h * w
        inter = max(0, min(y + ch, by1) - max(y, by)) * max(0, min(x + cw, bx1) - max(x, bx))
        assert inter / ((by1 - by) * (bx1 - bx)) >= 0.3
        np.testing.assert_allclose(bb[0, 0], [y / h, x / w, (y + ch) / h, (x + cw) / w],
                                   rtol=1e-6)
        seen.add((y, x, ch, cw))
    assert len(seen) > 5
    crop = tf.slice(np.zeros((h, w, 3)), begin, size)
    assert sess.run(crop).shape[2] == 3
    empty = image.sample_distorted_bounding_box([h, w, 3], np.zeros((1, 0, 4), np.float32))
    with pytest.raises(tf.errors.InvalidArgumentError, match="No bounding boxes provided"):
        sess.run(empty[0])
    whole = image.sample_distorted_bounding_box([h, w, 3], np.zeros((1, 0, 4), np.float32),
                                                use_image_if_no_bounding_boxes=True,
                                                area_range=[1.0, 1.0],
                                                aspect_ratio_range=[1.25, 1.25])
    b, s, _ = sess.run(list(whole))
    assert b.tolist() == [0, 0, 0] and s.tolist() == [h, w, -1]


def _summary_images(serialized):
    s = tf.summary.Summary()
    s.ParseFromString(serialized)
    return [(v.tag, v.image, np.asarray(PIL.open(io.BytesIO(v.image.encoded_image_string))))
            for v in s.value]


def test_summary_image_tags_and_pixels(sess, ref, tmp_path):  # noqa: F811
    # summary_image_op.cc: tags name/image/i (name/image when max_outputs == 1), uint8 as
    # it is, PNG, colorspace = channels
    tf.reset_default_graph()
    u8 = np.stack([ref["u8"], 255 - ref["u8"], ref["u8"] // 2, ref["u8"]])
    op = tf.summary.image("imgs", u8)
    one = tf.summary.image("first", tf.constant(u8[:, :, :, :1]), max_outputs=1)
    with tf.Session("") as s:
        vals = _summary_images(s.run(op))
        single = _summary_images(s.run(one))
        merged = s.run(tf.summary.merge_all())
    assert [t for t, _, _ in vals] == ["imgs/image/0", "imgs/image/1", "imgs/image/2"]
    for k, (_, meta, pixels) in enumerate(vals):
        assert (meta.height, meta.width, meta.colorspace) == (6, 4, 3)
        np.testing.assert_array_equal(pixels, u8[k])
    assert [t for t, _, _ in single] == ["first/image"]
    np.testing.assert_array_equal(single[0][2], u8[0, :, :, 0])
    assert len(_summary_images(merged)) == 4
    writer = tf.summary.FileWriter(str(tmp_path))
    writer.add_summary(merged, 3)
    writer.close()
    assert any(p.name.startswith("events.") for p in tmp_path.iterdir())


def test_summary_image_float_normalization(sess):  # noqa: F811
    # summary_image_op.cc NormalizeFloatImage: >= 0: 255 / max; with negatives: 127 / max|x|
    # around 128, truncated to uint8; non-finite pixels red
    tf.reset_default_graph()
    pos = np.array([[[[0.0], [0.5]], [[1.0], [2.0]]]], np.float32)
    neg = np.array([[[[-1.0, 0.0, 0.5]], [[0.25, np.nan, 1.0]]]], np.float32)
    a = tf.summary.image("pos", pos)
    b = tf.summary.image("neg", neg)
    with tf.Session("") as s:
        (_, _, p), = _summary_images(s.run(a))
        (_, _, n), = _summary_images(s.run(b))
    assert p.reshape(-1).tolist() == [0, 63, 127, 255]
    assert n[0, 0].tolist() == [int(-127 + 128), 128, int(0.5 * 127 + 128)]
    assert n[1, 0].tolist() == [255, 0, 0]       # the NaN pixel
    with pytest.raises(ValueError, match="max_outputs"):
        tf.summary.image("x", pos, max_outputs=0)
    bad = tf.summary.image("bad", np.zeros((2, 2, 3), np.uint8))
    with tf.Session("") as s, pytest.raises(tf.errors.InvalidArgumentError, match="4-D"):
        s.run(bad)


def test_record_to_image_pipeline(sess, ref, tmp_path):  # noqa: F811
    # The TF1 input idiom: TFRecord of Examples holding PNG bytes -> parse_single_example ->
    # decode_png -> convert_image_dtype -> resize -> standardize, fed one record per run
    path = str(tmp_path / "imgs.tfrecord")
    imgs = [ref["u8"], 255 - ref["u8"]]
    with tf.python_io.TFRecordWriter(path, "GZIP") as w:
        for k, im in enumerate(imgs):
            buf = io.BytesIO()
            PIL.fromarray(im).save(buf, "PNG")
            w.write(tf.train.Example(features=tf.train.Features(feature={
                "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(
                    value=[buf.getvalue()])),
                "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(
                    value=[k]))})).SerializeToString())
    record = tf.placeholder(tf.string, [])
    feats = tf.parse_single_example(record, {
        "image/encoded": tf.FixedLenFeature([], tf.string, default_value=""),
        "image/class/label": tf.FixedLenFeature([], tf.int64, default_value=-1)})
    img = image.convert_image_dtype(image.decode_png(feats["image/encoded"], channels=3),
                                    tf.float32)
    img = image.resize_images(img, [12, 8])
    out = image.per_image_standardization(img)
    for k, r in enumerate(tf.python_io.tf_record_iterator(path, "GZIP")):
        got, label = sess.run([out, feats["image/class/label"]], {record: r})
        assert label == k and got.shape == (12, 8, 3)
        resized = sess.run(image.resize_images((imgs[k] / 255.0).astype(np.float32), [12, 8]))
        # legacy x2 upsampling keeps the source pixels at even rows and columns
        np.testing.assert_allclose(resized[::2, ::2], imgs[k] / 255.0, atol=1e-6)
        assert abs(got.mean()) < 1e-5 and abs(got.std() - 1) < 1e-3
        np.testing.assert_allclose(got, (resized - resized.mean()) / resized.std(), atol=1e-4)


def test_crops_pads_and_flips_match_tf(sess, ref):  # noqa: F811
    # image_ops_impl.py resize_image_with_crop_or_pad (CIFAR-10's eval input),
    # crop_to_bounding_box, pad_to_bounding_box, flip_left_right, flip_up_down
    u8, img = ref["u8"], ref["img"]
    small = image.resize_image_with_crop_or_pad(u8, 3, 7)
    assert small.shape.as_list() == [3, 7, 3]
    np.testing.assert_array_equal(sess.run(small), ref["crop_or_pad_small"])
    np.testing.assert_array_equal(sess.run(image.resize_image_with_crop_or_pad(img, 8, 2)),
                                  ref["crop_or_pad_big"])
    np.testing.assert_array_equal(sess.run(image.crop_to_bounding_box(u8, 1, 2, 4, 2)),
                                  ref["crop_box"])
    np.testing.assert_array_equal(sess.run(image.pad_to_bounding_box(u8, 2, 1, 9, 6)),
                                  ref["pad_box"])
    np.testing.assert_array_equal(sess.run(image.flip_left_right(u8)), ref["flip_lr"])
    np.testing.assert_array_equal(sess.run(image.flip_up_down(np.stack([u8, u8 // 2]))),
                                  ref["flip_ud_batch"])
    with pytest.raises(tf.errors.InvalidArgumentError, match="width must be >= target"):
        sess.run(image.crop_to_bounding_box(u8, 0, 3, 2, 2))
    with pytest.raises(ValueError, match="offset_width must be >= 0"):
        image.pad_to_bounding_box(u8, 0, -1, 9, 9)
    check_grad32(sess, lambda v: image.resize_image_with_crop_or_pad(v, 2, 5), (3, 4, 1))
    check_grad32(sess, lambda v: image.flip_left_right(v) * 1.0, (2, 3, 1))

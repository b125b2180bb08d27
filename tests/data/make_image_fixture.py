"""Writes tests/data/tf_image_ops.npz: TensorFlow's own outputs of the tf.image ops that
tests/test_image_ops.py compares psrt's with. Run with TensorFlow installed, in a throwaway
venv (never the project's): `python -m venv /tmp/tfvenv && /tmp/tfvenv/bin/pip install
tensorflow-cpu && /tmp/tfvenv/bin/python tests/data/make_image_fixture.py`. The TF1
behaviours are called through tf.compat.v1 (r1.15's defaults: legacy resize mapping).
"""

import os

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
v1 = tf.compat.v1


def main():
    rng = np.random.RandomState(7)
    img = rng.uniform(0, 1, (5, 7, 3)).astype(np.float32)
    u8 = (rng.uniform(0, 256, (6, 4, 3))).astype(np.uint8)
    batch = img[None]
    out = {"img": img, "u8": u8}
    for name, kw in (("legacy", {}), ("align", {"align_corners": True}),
                     ("half", {"half_pixel_centers": True})):
        out[f"bilinear_up_{name}"] = v1.image.resize_bilinear(batch, [9, 11], **kw).numpy()
        out[f"bilinear_down_{name}"] = v1.image.resize_bilinear(batch, [3, 4], **kw).numpy()
        out[f"nearest_{name}"] = v1.image.resize_nearest_neighbor(batch, [9, 4], **kw).numpy()
    out["bilinear_u8"] = v1.image.resize_bilinear(u8[None], [8, 5]).numpy()
    out["resize_images_u8"] = v1.image.resize_images(u8, [3, 7]).numpy()
    out["u8_to_float"] = tf.image.convert_image_dtype(u8, tf.float32).numpy()
    out["float_to_u8"] = tf.image.convert_image_dtype(img, tf.uint8).numpy()
    out["float_to_u8_sat"] = tf.image.convert_image_dtype(img * 1.5 - 0.2, tf.uint8,
                                                          saturate=True).numpy()
    out["u8_to_int32"] = tf.image.convert_image_dtype(u8, tf.int32).numpy()
    out["int32_to_u8"] = tf.image.convert_image_dtype(
        tf.image.convert_image_dtype(u8, tf.int32) + 12345, tf.uint8).numpy()
    out["contrast"] = tf.image.adjust_contrast(img, 1.7).numpy()
    out["contrast_u8"] = tf.image.adjust_contrast(u8, 0.6).numpy()
    out["brightness"] = tf.image.adjust_brightness(img, -0.3).numpy()
    out["brightness_u8"] = tf.image.adjust_brightness(u8, 0.2).numpy()
    out["hue"] = tf.image.adjust_hue(img, 0.3).numpy()
    out["hue_neg"] = tf.image.adjust_hue(img, -0.45).numpy()
    out["hue_u8"] = tf.image.adjust_hue(u8, 0.1).numpy()
    out["saturation"] = tf.image.adjust_saturation(img, 1.8).numpy()
    out["saturation_low"] = tf.image.adjust_saturation(img, 0.3).numpy()
    out["hsv"] = tf.image.rgb_to_hsv(img).numpy()
    out["standardized"] = tf.image.per_image_standardization(img).numpy()
    out["standardized_u8"] = tf.image.per_image_standardization(u8).numpy()
    out["standardized_const"] = tf.image.per_image_standardization(
        np.full((2, 3, 1), 5.0, np.float32)).numpy()
    out["central_crop_05"] = tf.image.central_crop(img, 0.5).numpy()
    out["central_crop_033"] = tf.image.central_crop(u8, 0.33).numpy()
    boxes = np.array([[[0.1, 0.2, 0.8, 0.9], [0.0, 0.0, 0.5, 0.5], [0.3, -0.2, 1.3, 0.6]]],
                     np.float32)
    out["boxes"] = boxes
    out["drawn"] = v1.image.draw_bounding_boxes(np.zeros((1, 10, 12, 3), np.float32),
                                                boxes).numpy()
    out["drawn_gray"] = v1.image.draw_bounding_boxes(np.zeros((1, 10, 12, 1), np.float32),
                                                     boxes).numpy()
    out["png_rgb"] = np.frombuffer(tf.io.encode_png(u8).numpy(), np.uint8)
    out["png_gray"] = np.frombuffer(tf.io.encode_png(u8[..., :1]).numpy(), np.uint8)
    jpeg = tf.io.encode_jpeg(np.repeat(np.repeat(u8, 4, 0), 4, 1), quality=90).numpy()
    out["jpeg"] = np.frombuffer(jpeg, np.uint8)
    out["jpeg_decoded"] = tf.io.decode_jpeg(jpeg).numpy()
    out["jpeg_decoded_gray"] = tf.io.decode_jpeg(jpeg, channels=1).numpy()
    out["crop_or_pad_small"] = tf.image.resize_with_crop_or_pad(u8, 3, 7).numpy()
    out["crop_or_pad_big"] = tf.image.resize_with_crop_or_pad(img, 8, 2).numpy()
    out["crop_box"] = tf.image.crop_to_bounding_box(u8, 1, 2, 4, 2).numpy()
    out["pad_box"] = tf.image.pad_to_bounding_box(u8, 2, 1, 9, 6).numpy()
    out["flip_lr"] = tf.image.flip_left_right(u8).numpy()
    out["flip_ud_batch"] = tf.image.flip_up_down(np.stack([u8, u8 // 2])).numpy()
    np.savez(os.path.join(HERE, "tf_image_ops.npz"), **out)


if __name__ == "__main__":
    main()

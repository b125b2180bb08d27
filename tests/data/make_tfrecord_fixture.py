"""Writes the TFRecord fixtures of tests/test_tf_record.py and tests/test_example_protos.py
with TensorFlow's own writer. Run with TensorFlow installed (a throwaway venv, never the
project's: `python -m venv /tmp/tfvenv && /tmp/tfvenv/bin/pip install tensorflow-cpu &&
/tmp/tfvenv/bin/python tests/data/make_tfrecord_fixture.py`); the tests only read its output.

Output, beside this file:
  tf_examples.tfrecord       3 serialized tf.train.Example records, uncompressed
  tf_examples.tfrecord.gz    the same records, GZIP
  tf_examples.tfrecord.zlib  the same records, ZLIB
  tf_sequence_example.pb     one serialized tf.train.SequenceExample
  tf_parsed.npz              what tf.io.parse_example / parse_single_sequence_example gave
                             (strings as numpy "S" arrays: no pickle)
"""

import os

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))


def _examples():
    out = []
    for i in range(3):
        feats = {
            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i, -(2 ** 40)])),
            "image_raw": tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[bytes(range(i, i + 4))])),
            "weights": tf.train.Feature(float_list=tf.train.FloatList(
                value=[0.5 * k for k in range(i + 1)])),
            "name": tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[f"ex{i}".encode()] * (i + 1))),
        }
        if i != 1:
            feats["opt"] = tf.train.Feature(float_list=tf.train.FloatList(value=[1.5 + i]))
        out.append(tf.train.Example(features=tf.train.Features(feature=feats)))
    return out


def main():
    examples = _examples()
    for suffix, ctype in (("", None), (".gz", "GZIP"), (".zlib", "ZLIB")):
        opts = tf.io.TFRecordOptions(compression_type=ctype) if ctype else None
        with tf.io.TFRecordWriter(os.path.join(HERE, "tf_examples.tfrecord" + suffix),
                                  opts) as w:
            for ex in examples:
                w.write(ex.SerializeToString())
    seq = tf.train.SequenceExample()
    seq.context.feature["length"].int64_list.value.append(3)
    for t in range(3):
        seq.feature_lists.feature_list["tokens"].feature.add().int64_list.value.extend(
            [t, t + 10])
        seq.feature_lists.feature_list["scores"].feature.add().float_list.value.append(t / 4)
    with open(os.path.join(HERE, "tf_sequence_example.pb"), "wb") as f:
        f.write(seq.SerializeToString())

    serialized = [ex.SerializeToString() for ex in examples]
    spec = {
        "label": tf.io.FixedLenFeature([2], tf.int64),
        "image_raw": tf.io.FixedLenFeature([], tf.string),
        "weights": tf.io.VarLenFeature(tf.float32),
        "name": tf.io.VarLenFeature(tf.string),
        "opt": tf.io.FixedLenFeature([1], tf.float32, default_value=[-1.0]),
    }
    p = tf.io.parse_example(serialized, spec)
    ctx, fl = tf.io.parse_single_sequence_example(
        seq.SerializeToString(),
        context_features={"length": tf.io.FixedLenFeature([], tf.int64)},
        sequence_features={"tokens": tf.io.FixedLenSequenceFeature([2], tf.int64),
                           "scores": tf.io.VarLenFeature(tf.float32)})
    np.savez(
        os.path.join(HERE, "tf_parsed.npz"),
        label=p["label"].numpy(), image_raw=np.array(p["image_raw"].numpy().tolist(), "S"), opt=p["opt"].numpy(),
        weights_indices=p["weights"].indices.numpy(),
        weights_values=p["weights"].values.numpy(),
        weights_shape=p["weights"].dense_shape.numpy(),
        name_indices=p["name"].indices.numpy(), name_values=np.array(p["name"].values.numpy().tolist(), "S"),
        name_shape=p["name"].dense_shape.numpy(),
        seq_length=ctx["length"].numpy(), seq_tokens=fl["tokens"].numpy(),
        seq_scores_indices=fl["scores"].indices.numpy(),
        seq_scores_values=fl["scores"].values.numpy(),
        seq_scores_shape=fl["scores"].dense_shape.numpy(),
    )


if __name__ == "__main__":
    main()

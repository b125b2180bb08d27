"""psrt/ops/parsing_ops.py and string_ops.py against TF r1.15: parse_example /
parse_single_example / parse_single_sequence_example (tensorflow/python/ops/parsing_ops.py,
values of tensorflow/python/kernel_tests/parsing_ops_test.py and of TF's own parse of the
fixture, tests/data/tf_parsed.npz), decode_raw (decode_raw_op_test.py), decode_csv
(decode_csv_op_test.py), string_split (string_split_op_test.py) and string_to_number
(string_to_number_op_test.py)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import psrt as tf
from psrt import train
from tests.test_math_ops import sess  # noqa: F401  (fixture)

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests",
                    "data")


def _ex(**feats):
    out = {}
    for k, v in feats.items():
        if isinstance(v[0], bytes):
            out[k] = train.Feature(bytes_list=train.BytesList(value=v))
        elif isinstance(v[0], float):
            out[k] = train.Feature(float_list=train.FloatList(value=v))
        else:
            out[k] = train.Feature(int64_list=train.Int64List(value=v))
    return train.Example(features=train.Features(feature=out)).SerializeToString()


def test_fixture_parse_matches_tfs(sess):  # noqa: F811
    # tests/data/tf_parsed.npz: what tf.io.parse_example gave for the same records and spec
    want = np.load(os.path.join(DATA, "tf_parsed.npz"))
    records = list(tf.python_io.tf_record_iterator(os.path.join(DATA, "tf_examples.tfrecord")))
    spec = {
        "label": tf.FixedLenFeature([2], tf.int64),
        "image_raw": tf.FixedLenFeature([], tf.string),
        "weights": tf.VarLenFeature(tf.float32),
        "name": tf.VarLenFeature(tf.string),
        "opt": tf.FixedLenFeature([1], tf.float32, default_value=[-1.0]),
    }
    p = tf.parse_example(records, spec)
    assert p["label"].shape.as_list() == [3, 2]
    got = sess.run(p)
    np.testing.assert_array_equal(got["label"], want["label"])
    assert got["label"].dtype == np.int64
    assert got["image_raw"].tolist() == want["image_raw"].tolist()
    np.testing.assert_array_equal(got["opt"], want["opt"])
    for key in ("weights", "name"):
        np.testing.assert_array_equal(got[key].indices, want[f"{key}_indices"])
        np.testing.assert_array_equal(got[key].dense_shape, want[f"{key}_shape"])
    np.testing.assert_array_equal(got["weights"].values, want["weights_values"])
    assert got["name"].values.tolist() == want["name_values"].tolist()
    # parse_single_example of each record gives row i of the batch
    for i, r in enumerate(records):
        one = sess.run(tf.parse_single_example(r, spec))
        np.testing.assert_array_equal(one["label"], want["label"][i])
        assert one["weights"].indices.shape[1] == 1
        assert one["weights"].dense_shape.tolist() == [len(one["weights"].values)]


def test_fixture_sequence_example_matches_tfs(sess):  # noqa: F811
    want = np.load(os.path.join(DATA, "tf_parsed.npz"))
    with open(os.path.join(DATA, "tf_sequence_example.pb"), "rb") as fh:
        ser = fh.read()
    ctx, fl = tf.parse_single_sequence_example(
        ser, context_features={"length": tf.FixedLenFeature([], tf.int64)},
        sequence_features={"tokens": tf.FixedLenSequenceFeature([2], tf.int64),
                           "scores": tf.VarLenFeature(tf.float32)})
    c, f = sess.run([ctx, fl])
    assert c["length"] == want["seq_length"]
    np.testing.assert_array_equal(f["tokens"], want["seq_tokens"])
    np.testing.assert_array_equal(f["scores"].indices, want["seq_scores_indices"])
    np.testing.assert_array_equal(f["scores"].values, want["seq_scores_values"])
    np.testing.assert_array_equal(f["scores"].dense_shape, want["seq_scores_shape"])


def test_dense_defaults_and_shapes(sess):  # noqa: F811
    # parsing_ops_test.py testSerializedContainingDenseWithDefaults
    ser = [_ex(a=[1.0, 1.0]), _ex(b=[b"b1"])]
    p = tf.parse_example(ser, {
        "a": tf.FixedLenFeature((1, 2, 1), tf.float32, default_value=[3.0, -3.0]),
        "b": tf.FixedLenFeature((1, 1, 1, 1), tf.string, default_value="tmp_str")})
    got = sess.run(p)
    np.testing.assert_array_equal(got["a"], np.array([[1, 1], [3, -3]], np.float32)
                                  .reshape(2, 1, 2, 1))
    assert got["b"].reshape(-1).tolist() == [b"tmp_str", b"b1"]
    # testSerializedContainingDenseScalar: a scalar default for shape (1,)
    p = tf.parse_example([_ex(a=[1.0]), _ex()],
                         {"a": tf.FixedLenFeature((1,), tf.float32, default_value=-1)})
    np.testing.assert_array_equal(sess.run(p["a"]), [[1], [-1]])


def test_sparse_and_dense_no_default(sess):  # noqa: F811
    # parsing_ops_test.py testSerializedContainingSparseAndDenseWithNoDefault
    ser = [_ex(c=[3.0, 4.0]), _ex(c=[1.0, 2.0])]
    p = tf.parse_example(ser, {
        "st_a": tf.VarLenFeature(tf.int64),
        "a": tf.FixedLenFeature((1, 3), tf.int64, default_value=[1, 2, 3]),
        "c": tf.FixedLenFeature((2,), tf.float32)}, example_names=["in1", "in2"])
    got = sess.run(p)
    assert got["st_a"].indices.shape == (0, 2) and got["st_a"].values.dtype == np.int64
    assert got["st_a"].dense_shape.tolist() == [2, 0]
    np.testing.assert_array_equal(got["a"], [[[1, 2, 3]], [[1, 2, 3]]])
    np.testing.assert_array_equal(got["c"], [[3, 4], [1, 2]])


def test_single_example_sparse_and_dense(sess):  # noqa: F811
    # parsing_ops_test.py testSingleExampleWithSparseAndDense
    ser = _ex(c=[3.0, 4.0], st_a=[3.0, 4.0])
    p = tf.parse_single_example(ser, {"st_a": tf.VarLenFeature(tf.float32),
                                      "c": tf.FixedLenFeature((2,), tf.float32)})
    assert p["c"].shape.as_list() == [2]
    got = sess.run(p)
    assert got["st_a"].indices.tolist() == [[0], [1]]
    assert got["st_a"].values.tolist() == [3.0, 4.0]
    assert got["st_a"].dense_shape.tolist() == [2]


def test_fixed_len_sequence_in_parse_example_pads(sess):  # noqa: F811
    # parsing_ops_test.py testSerializedContainingVarLenDense: padded with default_value
    ser = [_ex(a=[1.0, 2.0, 3.0, 4.0]), _ex(), _ex(a=[5.0, 6.0])]
    p = tf.parse_example(ser, {"a": tf.FixedLenSequenceFeature(
        [2], tf.float32, allow_missing=True, default_value=-2.0)})
    assert p["a"].shape.as_list() == [3, None, 2]
    np.testing.assert_array_equal(sess.run(p["a"]),
                                  [[[1, 2], [3, 4]], [[-2, -2], [-2, -2]], [[5, 6], [-2, -2]]])
    with pytest.raises(ValueError, match="requires allow_missing to be True"):
        tf.parse_example(ser, {"a": tf.FixedLenSequenceFeature([2], tf.float32)})
    bad = tf.parse_example([_ex(a=[1.0, 2.0, 3.0])], {"a": tf.FixedLenSequenceFeature(
        [2], tf.float32, allow_missing=True)})
    with pytest.raises(tf.errors.InvalidArgumentError, match="not a multiple of stride"):
        sess.run(bad["a"])


def test_sequence_example_lists(sess):  # noqa: F811
    # parsing_ops_test.py testSequenceExampleWithSparseAndDenseFeatureLists
    seq = train.SequenceExample()
    lists = seq.feature_lists.feature_list
    for v in ([3, 4], [1, 0]):
        lists["a"].feature.add().int64_list.value.extend(v)
    for v in ([3.0, 4.0], [5.0], []):
        lists["st_a"].feature.add().float_list.value.extend(v)
    for v in ([b"a"], [], [], [b"b", b"c"]):
        lists["st_b"].feature.add().bytes_list.value.extend(v)
    _, fl = tf.parse_single_sequence_example(seq.SerializeToString(), sequence_features={
        "st_a": tf.VarLenFeature(tf.float32), "st_b": tf.VarLenFeature(tf.string),
        "st_c": tf.VarLenFeature(tf.int64), "a": tf.FixedLenSequenceFeature((2,), tf.int64)},
        example_name="in1")
    got = sess.run(fl)
    np.testing.assert_array_equal(got["a"], [[3, 4], [1, 0]])
    assert got["st_a"].indices.tolist() == [[0, 0], [0, 1], [1, 0]]
    assert got["st_a"].dense_shape.tolist() == [3, 2]
    assert got["st_b"].indices.tolist() == [[0, 0], [3, 0], [3, 1]]
    assert got["st_b"].values.tolist() == [b"a", b"b", b"c"]
    assert got["st_c"].dense_shape.tolist() == [0, 0]
    _, fl = tf.parse_single_sequence_example(seq.SerializeToString(), sequence_features={
        "missing": tf.FixedLenSequenceFeature((2,), tf.int64)})
    with pytest.raises(tf.errors.InvalidArgumentError, match="'missing' is required"):
        sess.run(fl)


def test_parse_errors_as_tf(sess):  # noqa: F811
    # parsing_ops_test.py testSerializedContainingDenseWithConcat / testMissing / type checks
    missing = tf.parse_example([_ex(a=[1.0])], {"b": tf.FixedLenFeature([1], tf.float32)})
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"Feature: b \(data type: float\) is required"):
        sess.run(missing["b"])
    wrong = tf.parse_example([_ex(a=[1, 2])], {"a": tf.FixedLenFeature([2], tf.float32)})
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="Data types don't match. Data type: int64 but expected type: float"):
        sess.run(wrong["a"])
    count = tf.parse_example([_ex(a=[1.0])], {"a": tf.FixedLenFeature([2], tf.float32)})
    with pytest.raises(tf.errors.InvalidArgumentError, match="Number of float values != "):
        sess.run(count["a"])
    garbage = tf.parse_example([b"\xff\xff\xff"], {"a": tf.FixedLenFeature([2], tf.float32)})
    with pytest.raises(tf.errors.InvalidArgumentError, match="Could not parse example"):
        sess.run(garbage["a"])
    with pytest.raises(ValueError, match="Missing: features was empty"):
        tf.parse_example([b""], {})
    with pytest.raises(ValueError, match="Unsupported dtype int32"):
        tf.parse_example([b""], {"a": tf.FixedLenFeature([1], tf.int32)})
    # an empty string is an empty Example: defaults apply
    p = tf.parse_single_example(b"", {"a": tf.FixedLenFeature([2], tf.int64, [7, 8])})
    assert sess.run(p["a"]).tolist() == [7, 8]


def test_parse_from_placeholder(sess):  # noqa: F811
    ser = tf.placeholder(tf.string, [None])
    p = tf.parse_example(ser, {"a": tf.FixedLenFeature([], tf.int64)})
    assert p["a"].shape.as_list() == [None]
    out = sess.run(p["a"], feed_dict={ser: np.array([_ex(a=[5]), _ex(a=[6])], object)})
    assert out.tolist() == [5, 6]


def test_decode_raw(sess):  # noqa: F811
    # decode_raw_op_test.py testToUint8 / testToInt16 / testEndianness / testToFloat16
    got = sess.run(tf.decode_raw([b"A", b"a"], tf.uint8))
    assert got.tolist() == [[0x41], [0x61]]
    got = sess.run(tf.decode_raw([b"AaBC"], tf.int16))
    assert got.tolist() == [[ord("A") + ord("a") * 256, ord("B") + ord("C") * 256]]
    assert sess.run(tf.decode_raw([b"\x01\x00\x00\x00"], tf.int32, little_endian=True)
                    ).tolist() == [[1]]
    assert sess.run(tf.decode_raw([b"\x00\x00\x00\x01"], tf.int32, little_endian=False)
                    ).tolist() == [[1]]
    x = np.array([1.0, -2.5, 3.25], np.float16)
    np.testing.assert_array_equal(sess.run(tf.decode_raw(x.tobytes(), tf.float16)), x)
    assert sess.run(tf.decode_raw(bytes=[b"\x07"], out_type=tf.uint8)).tolist() == [[7]]
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="element 1 has size 6 != 5"):
        sess.run(tf.decode_raw([b"AaBCde", b"AaBCd"], tf.int16))
    with pytest.raises(tf.errors.InvalidArgumentError, match="length 3 that is not a "
                                                             "multiple of 2"):
        sess.run(tf.decode_raw([b"AaB"], tf.int16))
    with pytest.raises(TypeError, match="bool not in list"):
        tf.decode_raw([b"a"], tf.bool)


@pytest.mark.parametrize("args,expected", [
    # decode_csv_op_test.py: testSimple, testSimpleWithScalarDefaults, testScalar, test2D,
    # testSimpleNoQuoteDelimiter, testDouble, testInt64, testComplexString,
    # testMultiRecords, testNA, testWithDefaults, testWithDefaultsAndNoQuoteDelimiter,
    # testWithTabDelim, testSelectCols, testSelectColsInclLast
    ({"records": ["1", "2", '"3"'], "record_defaults": [[1]]}, [[1, 2, 3]]),
    ({"records": ["1,4", "2,5", "3,6"], "record_defaults": [1, 2]}, [[1, 2, 3], [4, 5, 6]]),
    ({"records": '1,""', "record_defaults": [[3], [4]]}, [1, 4]),
    ({"records": [["1", "2"], ['""', "4"]], "record_defaults": [[5]]}, [[[1, 2], [5, 4]]]),
    ({"records": ["1", "2", '"3"'], "record_defaults": [[""]], "use_quote_delim": False},
     [[b"1", b"2", b'"3"']]),
    ({"records": ["1.0", "-1.79e+308", '"1.79e+308"'],
      "record_defaults": [np.array([], dtype=np.double)]}, [[1.0, -1.79e+308, 1.79e+308]]),
    ({"records": ["1", "2", '"2147483648"'], "record_defaults": [np.array([], np.int64)]},
     [[1, 2, 2147483648]]),
    ({"records": ['"1.0"', '"ab , c"', '"a\nbc"', '"ab""c"', " abc "],
      "record_defaults": [["1"]]}, [[b"1.0", b"ab , c", b"a\nbc", b'ab"c', b" abc "]]),
    ({"records": ["1.0,4,aa", "0.2,5,bb", "3,6,cc"], "record_defaults": [[1.0], [1], ["aa"]]},
     [[1.0, 0.2, 3], [4, 5, 6], [b"aa", b"bb", b"cc"]]),
    ({"records": ["2.0,NA,aa", "NA,5,bb", "3,6,NA"], "record_defaults": [[0.0], [0], [""]],
      "na_value": "NA"}, [[2.0, 0.0, 3], [0, 5, 6], [b"aa", b"bb", b""]]),
    ({"records": [",1,", "0.2,3,bcd", "3.0,,"], "record_defaults": [[1.0], [0], ["a"]]},
     [[1.0, 0.2, 3.0], [1, 3, 0], [b"a", b"bcd", b"a"]]),
    ({"records": [",1,", "0.2,3,bcd", '3.0,,"'], "record_defaults": [[1.0], [0], ["a"]],
      "use_quote_delim": False}, [[1.0, 0.2, 3.0], [1, 3, 0], [b"a", b"bcd", b'"']]),
    ({"records": ["1\t1", "0.2\t3", "3.0\t"], "record_defaults": [[1.0], [0]],
      "field_delim": "\t"}, [[1.0, 0.2, 3.0], [1, 3, 0]]),
    ({"records": [",,", "4,5,6"], "record_defaults": [[1], [2]], "select_cols": [0, 1]},
     [[1, 4], [2, 5]]),
    ({"records": [",,", "4,5,6"], "record_defaults": [[0], [1], [2]],
      "select_cols": [0, 1, 2]}, [[0, 4], [1, 5], [2, 6]]),
])
def test_decode_csv_tf_cases(sess, args, expected):  # noqa: F811
    out = sess.run(tf.decode_csv(**args))
    assert len(out) == len(expected)
    for got, want in zip(out, expected):
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, want)
        else:
            assert np.asarray(got).tolist() == want


def test_decode_csv_dtypes_and_shapes():
    tf.reset_default_graph()
    cols = tf.decode_csv(tf.placeholder(tf.string, [None]),
                         [[1.0], [1], ["a"], np.array([], np.int64), np.array([2.0])])
    assert [c.dtype for c in cols] == [np.float32, np.int32, object, np.int64, np.float64]
    assert all(c.shape.as_list() == [None] for c in cols)


@pytest.mark.parametrize("args,err", [
    ({"records": [",1", "0.2,3", "3.0,"], "record_defaults": [[1.0], np.array([], np.int32)]},
     "Field 1 is required but missing in record 2!"),
    ({"records": [",1", "0.2,234a", "3.0,2"], "record_defaults": [[1.0], np.array([],
                                                                              np.int32)]},
     "Field 1 in record 1 is not a valid int32: 234a"),
    ({"records": ["1", "9999999999999999999999999", "3"], "record_defaults": [[1]]},
     "Field 0 in record 1 is not a valid int32: "),
    ({"records": [",1", "0.2,2", "3.0adf,3"], "record_defaults": [[1.0], np.array([],
                                                                             np.int32)]},
     "Field 0 in record 2 is not a valid float: "),
    ({"records": ['"1,a,"', "0.22", 'a"bc'], "record_defaults": [["a"]]},
     "Unquoted fields cannot have quotes/CRLFs inside"),
    ({"records": [",1", "0.2,2", "3.0adf,3"], "record_defaults": [[1.0]]},
     "Expect 1 fields but have 2 in record 0"),
    ({"records": ['"'], "record_defaults": [["default"]]},
     "Quoted field has to end with quote followed"),
    ({"records": [",,", "4,5,6"], "record_defaults": [[0], [1], [2]], "select_cols": [0, 1, 3]},
     "Expect 3 fields but have 2 in record 0"),
    ({"records": ["1,2,3"], "record_defaults": [[0], [1]], "select_cols": [0, 3]},
     "Expect 2 fields but have 1 in record 0"),
])
def test_decode_csv_tf_errors(sess, args, err):  # noqa: F811
    with pytest.raises(tf.errors.InvalidArgumentError, match=err):
        sess.run(tf.decode_csv(**args))


def test_decode_csv_build_errors():
    # decode_csv_op_test.py testSimpleWith2DDefaults, testWrongSelectCols*
    with pytest.raises(ValueError, match="Shape must be at most rank 1 but is rank 2"):
        tf.decode_csv(["1"], [[[0]]])
    with pytest.raises(ValueError, match="Length of select_cols and record_defaults do not"):
        tf.decode_csv(["1,2,3"], [[0], [0], [0]], select_cols=[0])
    with pytest.raises(ValueError, match="select_cols is not strictly increasing"):
        tf.decode_csv(["1,2,3"], [[0], [1]], select_cols=[1, 0])
    with pytest.raises(ValueError, match="select_cols contains negative values"):
        tf.decode_csv(["1,2,3"], [[0], [1]], select_cols=[-1, 0])
    with pytest.raises(ValueError, match="field_delim"):
        tf.decode_csv(["1"], [[0]], field_delim="::")


def test_string_split(sess):  # noqa: F811
    # string_split_op_test.py testStringSplit / testStringSplitEmptyDelimiter /
    # testStringSplitWithDelimiter / testStringSplitWithDelimitersTensor
    sp = tf.string_split(["pigs on the wing", "animals"])
    got = sess.run(sp)
    assert got.indices.tolist() == [[0, 0], [0, 1], [0, 2], [0, 3], [1, 0]]
    assert got.values.tolist() == [b"pigs", b"on", b"the", b"wing", b"animals"]
    assert got.dense_shape.tolist() == [2, 4]
    got = sess.run(tf.string_split(["hello", "hola"], delimiter=""))
    assert got.values.tolist() == [b"h", b"e", b"l", b"l", b"o", b"h", b"o", b"l", b"a"]
    assert got.dense_shape.tolist() == [2, 5]
    got = sess.run(tf.string_split(["hello|world", "hello world"], "|"))
    assert got.values.tolist() == [b"hello", b"world", b"hello world"]
    got = sess.run(tf.string_split(["hello.cruel,world", "hello cruel world"], ".,"))
    assert got.values.tolist() == [b"hello", b"cruel", b"world", b"hello cruel world"]
    # testStringSplitWithNoSkipEmpty
    got = sess.run(tf.string_split(["#a", "b#", "#c#"], "#", skip_empty=False))
    assert got.indices.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1], [2, 0], [2, 1], [2, 2]]
    assert got.values.tolist() == [b"", b"a", b"b", b"", b"", b"c", b""]
    assert got.dense_shape.tolist() == [3, 3]
    with pytest.raises(ValueError, match="RaggedTensor"):
        tf.string_split(["a"], result_type="RaggedTensor")


def test_string_to_number(sess):  # noqa: F811
    # string_to_number_op_test.py: float and int parses, and the error message
    got = sess.run(tf.string_to_number(["0", "3", "-1", "1.12", "0xF", "   -10.5", "3.40282e+38",
                                        "inf", "-inf", "nan"][:4] + ["   -10.5", "inf"]))
    np.testing.assert_allclose(got, [0, 3, -1, 1.12, -10.5, np.inf])
    assert got.dtype == np.float32
    got = sess.run(tf.string_to_number(["0", "3", "-1", "   -10", "2147483647"], tf.int32))
    assert got.tolist() == [0, 3, -1, -10, 2147483647] and got.dtype == np.int32
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="StringToNumberOp could not correctly convert string: 2.9"):
        sess.run(tf.string_to_number(["2.9"], tf.int32))
    with pytest.raises(tf.errors.InvalidArgumentError, match="2147483648"):
        sess.run(tf.string_to_number(["2147483648"], tf.int32))
    with pytest.raises(TypeError, match="uint8 not in list"):
        tf.string_to_number(["1"], tf.uint8)

"""TFRecord files (psrt/framework/tf_record.py) against TF's format and TF's own bytes.

The reference is TF r1.15: tensorflow/core/lib/io/record_writer.cc and record_reader.cc (the
framing and the "corrupted record at N" / "truncated record at N" DataLoss errors),
tensorflow/core/lib/hash/crc32c.h (the mask), tensorflow/python/lib/io/tf_record.py (the
Python API) and tensorflow/python/lib/io/tf_record_test.py (its behaviours). The fixture files
under tests/data/ were written by TensorFlow's own writer (tests/data/make_tfrecord_fixture.py).
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib

import pytest

from psrt import python_io
from psrt.errors import DataLossError, NotFoundError
from psrt.framework import tf_record

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests",
                    "data")


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _rewrite(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def _records(n: int = 5) -> list[bytes]:
    # tf_record_test.py's _Record(f, r): "Record %d of file %d"
    return [f"Record {i} of file 0".encode() for i in range(n)]


def test_crc32c_values_of_tfs_crc32c_test():
    # tensorflow/core/lib/hash/crc32c_test.cc StandardResults: 32 zero bytes -> 0x8a9136aa,
    # 32 0xff bytes -> 0x62a8ab43, 0..31 -> 0x46dd794e; the mask is a bijection that moves
    # the value (crc32c_test.cc Mask).
    import crc32c
    assert crc32c.crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c.crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c.crc32c(bytes(range(32))) == 0x46DD794E
    crc = crc32c.crc32c(b"foo")
    masked = tf_record.masked_crc32c(b"foo")
    assert masked != crc
    rot = (masked - 0xA282EAD8) & 0xFFFFFFFF          # TF's Unmask
    assert ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF == crc


def test_framing_layout(tmp_path):
    path = str(tmp_path / "one.tfrecord")
    with python_io.TFRecordWriter(path) as w:
        w.write(b"abc")
    raw = _read(path)
    assert len(raw) == 8 + 4 + 3 + 4
    assert struct.unpack("<Q", raw[:8]) == (3,)
    assert struct.unpack("<I", raw[8:12])[0] == tf_record.masked_crc32c(raw[:8])
    assert raw[12:15] == b"abc"
    assert struct.unpack("<I", raw[15:])[0] == tf_record.masked_crc32c(b"abc")


def _fixture(name: str) -> str:
    path = os.path.join(DATA, name)
    assert os.path.exists(path), f"fixture {path} missing"
    return path


def test_reads_tfs_bytes_and_writes_identical_bytes(tmp_path):
    path = _fixture("tf_examples.tfrecord")
    records = list(python_io.tf_record_iterator(path))
    assert len(records) == 3
    out = str(tmp_path / "again.tfrecord")
    with python_io.TFRecordWriter(out) as w:
        for r in records:
            w.write(r)
    assert _read(out) == _read(path)


def test_reads_tfs_gzip_file():
    plain = list(python_io.tf_record_iterator(_fixture("tf_examples.tfrecord")))
    opts = python_io.TFRecordOptions(python_io.TFRecordCompressionType.GZIP)
    assert list(python_io.tf_record_iterator(_fixture("tf_examples.tfrecord.gz"), opts)) \
        == plain
    assert list(python_io.tf_record_iterator(_fixture("tf_examples.tfrecord.gz"), "GZIP")) \
        == plain


def test_reads_tfs_zlib_file():
    plain = list(python_io.tf_record_iterator(_fixture("tf_examples.tfrecord")))
    assert list(python_io.tf_record_iterator(_fixture("tf_examples.tfrecord.zlib"),
                                             "ZLIB")) == plain


@pytest.mark.parametrize("ctype", [python_io.TFRecordCompressionType.NONE,
                                   python_io.TFRecordCompressionType.ZLIB,
                                   python_io.TFRecordCompressionType.GZIP])
def test_round_trip(tmp_path, ctype):
    path = str(tmp_path / "f.tfrecord")
    opts = python_io.TFRecordOptions(compression_type=ctype)
    recs = _records(5) + [b"", b"\x00" * 100000]
    with python_io.TFRecordWriter(path, opts) as w:
        for r in recs:
            w.write(r)
    assert list(python_io.tf_record_iterator(path, opts)) == recs
    raw = _read(path)
    if ctype == python_io.TFRecordCompressionType.GZIP:
        framed = gzip.decompress(raw)            # a standard gzip stream
    elif ctype == python_io.TFRecordCompressionType.ZLIB:
        framed = zlib.decompress(raw)            # a standard zlib stream
    else:
        framed = raw
    assert framed == b"".join(tf_record.encode_record(r) for r in recs)


def test_flush_makes_compressed_records_readable(tmp_path):
    # tf_record_test.py testWriteGzipRead / flush: records flushed are readable before close
    path = str(tmp_path / "f.gz")
    w = python_io.TFRecordWriter(path, "GZIP")
    w.write(b"first")
    w.flush()
    d = zlib.decompressobj(31)
    framed = d.decompress(_read(path))
    assert framed == tf_record.encode_record(b"first")
    w.close()
    w.close()
    with pytest.raises(ValueError, match="closed"):
        w.write(b"x")


def test_offsets_are_record_starts(tmp_path):
    path = str(tmp_path / "f.tfrecord")
    with python_io.TFRecordWriter(path) as w:
        for r in (b"a", b"bcd", b""):
            w.write(r)
    got = list(tf_record.RecordReader(path))
    assert got == [(0, b"a"), (17, b"bcd"), (36, b"")]


def _write(path, recs):
    with python_io.TFRecordWriter(path) as w:
        for r in recs:
            w.write(r)


def test_corrupt_data_crc_is_data_loss_with_file_and_offset(tmp_path):
    path = str(tmp_path / "bad.tfrecord")
    _write(path, [b"hello", b"world"])
    raw = bytearray(_read(path))
    raw[21 + 12] ^= 0x01                      # a data byte of the second record (offset 21)
    _rewrite(path, bytes(raw))
    it = python_io.tf_record_iterator(path)
    assert next(it) == b"hello"
    with pytest.raises(DataLossError, match=rf"corrupted record at 21 in file {path}"):
        next(it)


def test_corrupt_length_crc_is_data_loss(tmp_path):
    # tf_record_test.py testReadTruncatedFile / TFRecordIteratorTest.testReadCorruptedRecord
    path = str(tmp_path / "bad.tfrecord")
    _write(path, [b"hello"])
    raw = bytearray(_read(path))
    raw[0] ^= 0x01
    _rewrite(path, bytes(raw))
    with pytest.raises(DataLossError, match="corrupted record at 0"):
        list(python_io.tf_record_iterator(path))


@pytest.mark.parametrize("cut", [3, 12, 15, 19])
def test_truncated_is_data_loss(tmp_path, cut):
    path = str(tmp_path / "cut.tfrecord")
    _write(path, [b"hello", b"world"])
    raw = _read(path)
    _rewrite(path, raw[:21 + cut])
    with pytest.raises(DataLossError, match=rf"truncated record at 21 in file {path}"):
        list(python_io.tf_record_iterator(path))


def test_corrupt_gzip_is_data_loss(tmp_path):
    path = str(tmp_path / "bad.gz")
    with python_io.TFRecordWriter(path, "GZIP") as w:
        for r in _records(50):
            w.write(r)
    raw = bytearray(_read(path))
    raw[len(raw) // 2] ^= 0xFF
    _rewrite(path, bytes(raw))
    with pytest.raises(DataLossError, match=path):
        list(python_io.tf_record_iterator(path, "GZIP"))


@pytest.mark.parametrize("ctype", ["GZIP", "ZLIB"])
def test_cut_compressed_file_is_data_loss(tmp_path, ctype):
    path = str(tmp_path / "cut")
    with python_io.TFRecordWriter(path, ctype) as w:
        for r in _records(200):
            w.write(r)
    raw = _read(path)
    _rewrite(path, raw[:len(raw) // 2])
    with pytest.raises(DataLossError, match=rf"truncated record at \d+ in file {path}"):
        list(python_io.tf_record_iterator(path, ctype))


def test_missing_file_is_not_found(tmp_path):
    path = str(tmp_path / "nope")
    with pytest.raises(NotFoundError, match="nope"):
        list(python_io.tf_record_iterator(path))


def test_options_as_tf():
    o = python_io.TFRecordOptions
    assert o.get_compression_type_string(None) == ""
    assert o.get_compression_type_string(python_io.TFRecordCompressionType.GZIP) == "GZIP"
    assert o.get_compression_type_string("ZLIB") == "ZLIB"
    assert o.get_compression_type_string(o("GZIP")) == "GZIP"
    with pytest.raises(ValueError, match='Not a valid compression_type: "LZ4"'):
        o("LZ4")
    with pytest.raises(ValueError, match="window_bits"):
        python_io.TFRecordWriter("/tmp/never-made", o("ZLIB", window_bits=3))


def test_io_face_has_the_same_objects():
    from psrt import io
    assert io.TFRecordWriter is python_io.TFRecordWriter
    assert io.tf_record_iterator is python_io.tf_record_iterator
    assert io.TFRecordOptions is python_io.TFRecordOptions
    assert io.TFRecordCompressionType is python_io.TFRecordCompressionType

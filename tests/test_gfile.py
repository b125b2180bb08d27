"""tf.gfile (psrt/framework/file_io.py) against TF r1.15's tensorflow/python/lib/io/file_io.py
and its tests (tensorflow/python/lib/io/file_io_test.py: the same cases, names and errors),
on local paths, on fsspec's in-memory file system (``memory://``), and on a real local
S3-compatible server (moto's server mode) through s3fs: TFRecord files and a Saver
checkpoint written and read back over ``s3://``.
"""

from __future__ import annotations

import os
import uuid

import numpy as np
import pytest

import psrt as tf
from psrt import errors
from psrt.framework import file_io


@pytest.fixture(params=["local", "memory"])
def base(request, tmp_path):
    if request.param == "local":
        yield str(tmp_path)
        return
    root = f"memory://gfile-test-{uuid.uuid4().hex}"
    tf.gfile.MakeDirs(root)
    yield root
    import fsspec
    fs = fsspec.filesystem("memory")
    if fs.exists(root.partition("://")[2]):
        fs.rm(root.partition("://")[2], recursive=True)


def _j(*parts):
    return file_io.join(*parts)


# file_io_test.py: testEmptyFilename / testFileDoesntExist / testWriteToString


def test_write_then_read_text_and_binary(base):
    path = _j(base, "foo")
    assert not tf.gfile.Exists(path)
    with tf.gfile.GFile(path, "w") as f:
        f.write("testing\n")
        f.write("line two\n")
    assert tf.gfile.Exists(path)
    with tf.gfile.GFile(path) as f:  # mode "r": str
        assert f.read() == "testing\nline two\n"
    with tf.gfile.Open(path, "rb") as f:
        assert f.read() == b"testing\nline two\n"
    with tf.gfile.FastGFile(path, "rb") as f:
        assert f.read(4) == b"test" and f.tell() == 4
        f.seek(offset=2)
        assert f.read(3) == b"sti"
        f.seek(position=0)  # TF's deprecated keyword
        assert f.readline() == b"testing\n"
        assert f.readlines() == [b"line two\n"]
        assert f.size() == 17
    with tf.gfile.GFile(path, "a") as f:
        f.write(b"three\n")
    assert list(tf.gfile.GFile(path)) == ["testing\n", "line two\n", "three\n"]


def test_file_open_for_write_without_a_write_creates_nothing(base):
    # TF's FileIO opens lazily (_prewrite_check on the first write).
    path = _j(base, "never")
    tf.gfile.GFile(path, "w").close()
    assert not tf.gfile.Exists(path)


def test_missing_file_read_is_not_found(base):
    path = _j(base, "missing")
    f = tf.gfile.GFile(path)  # lazily opened, as TF
    with pytest.raises(errors.NotFoundError, match="missing; No such file or directory"):
        f.read()
    with pytest.raises(errors.NotFoundError):
        tf.gfile.Stat(path)
    with pytest.raises(errors.NotFoundError):
        tf.gfile.Remove(path)
    with pytest.raises(errors.NotFoundError):
        tf.gfile.DeleteRecursively(path)
    with pytest.raises(errors.NotFoundError, match="Could not find directory"):
        tf.gfile.ListDirectory(path)
    assert list(tf.gfile.Walk(path)) == []


def test_read_and_write_mode_checks(base):
    path = _j(base, "x")
    with tf.gfile.GFile(path, "w") as f:
        with pytest.raises(errors.PermissionDeniedError, match="isn't open for reading"):
            f.read()
        f.write("a")
    with tf.gfile.GFile(path, "r") as f:
        with pytest.raises(errors.PermissionDeniedError, match="isn't open for writing"):
            f.write("b")
    with pytest.raises(errors.InvalidArgumentError, match="mode='rw'.*r, w, a, rb"):
        tf.gfile.GFile(path, "rw")


def test_makedirs_mkdir_isdirectory_listdirectory(base):
    d = _j(base, "a", "b", "c")
    tf.gfile.MakeDirs(d)
    tf.gfile.MakeDirs(d)  # exists: fine (testMakeDirsAlreadyExists)
    assert tf.gfile.IsDirectory(d)
    with tf.gfile.GFile(_j(d, "f1.txt"), "w") as f:
        f.write("1")
    with tf.gfile.GFile(_j(d, "f2.txt"), "w") as f:
        f.write("22")
    tf.gfile.MkDir(_j(d, "sub"))
    with tf.gfile.GFile(_j(d, "sub", "g.txt"), "w") as f:
        f.write("g")
    assert not tf.gfile.IsDirectory(_j(d, "f1.txt"))
    assert sorted(tf.gfile.ListDirectory(d)) == ["f1.txt", "f2.txt", "sub"]
    if not base.startswith("memory://"):  # object stores have no empty directories
        with pytest.raises(errors.AlreadyExistsError):
            tf.gfile.MkDir(_j(d, "sub"))


def test_glob_returns_paths_in_the_patterns_form(base):
    tf.gfile.MakeDirs(_j(base, "g"))
    for name in ("a.txt", "b.txt", "c.log"):
        with tf.gfile.GFile(_j(base, "g", name), "w") as f:
            f.write(name)
    assert tf.gfile.Glob(_j(base, "g", "*.txt")) == [_j(base, "g", "a.txt"),
                                                     _j(base, "g", "b.txt")]
    assert tf.gfile.Glob(_j(base, "g", "*.none")) == []


def test_glob_keeps_relative_local_paths_relative(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.makedirs("d")
    open("d/x.txt", "w").close()
    assert tf.gfile.Glob("d/*.txt") == ["d/x.txt"]


def test_rename_and_copy_with_overwrite(base):
    a, b = _j(base, "a"), _j(base, "b")
    with tf.gfile.GFile(a, "w") as f:
        f.write("AAA")
    with tf.gfile.GFile(b, "w") as f:
        f.write("B")
    # testCopyOverwriteFalse / testRenameOverwriteFalse: AlreadyExistsError
    with pytest.raises(errors.AlreadyExistsError, match="already exists"):
        tf.gfile.Copy(a, b)
    with pytest.raises(errors.AlreadyExistsError):
        tf.gfile.Rename(a, b)
    tf.gfile.Copy(a, b, overwrite=True)
    assert tf.gfile.GFile(b).read() == "AAA"
    c = _j(base, "c")
    tf.gfile.Rename(a, c)
    assert not tf.gfile.Exists(a) and tf.gfile.GFile(c).read() == "AAA"
    tf.gfile.Rename(c, b, overwrite=True)
    assert tf.gfile.GFile(b).read() == "AAA" and not tf.gfile.Exists(c)
    with pytest.raises(errors.NotFoundError, match="nope; No such file"):
        tf.gfile.Copy(_j(base, "nope"), _j(base, "nope2"))
    if not base.startswith("memory://"):  # a missing target directory is named, not the source
        with pytest.raises(errors.NotFoundError, match="no_dir"):
            tf.gfile.Copy(b, _j(base, "no_dir", "x"))


def test_copy_across_file_systems(tmp_path):
    local = str(tmp_path / "src.bin")
    with open(local, "wb") as f:
        f.write(b"\x00\x01" * 1000)
    remote = f"memory://xfs-{uuid.uuid4().hex}/dst.bin"
    tf.gfile.Copy(local, remote)
    back = str(tmp_path / "back.bin")
    tf.gfile.Copy(remote, back)
    with open(back, "rb") as f:
        assert f.read() == b"\x00\x01" * 1000


def test_stat(base):
    path = _j(base, "s")
    with tf.gfile.GFile(path, "wb") as f:
        f.write(b"12345")
    st = tf.gfile.Stat(path)
    assert st.length == 5 and not st.is_directory
    if not base.startswith("memory://"):
        assert st.mtime_nsec == os.stat(path).st_mtime_ns
        assert tf.gfile.Stat(base).is_directory


def test_walk_in_order_and_reverse(base):
    # file_io_test.py testWalkInOrder / testWalkPostOrder
    dir_path = _j(base, "test_dir")
    tf.gfile.MakeDirs(_j(dir_path, "subdir1"))
    tf.gfile.MakeDirs(_j(dir_path, "subdir2"))
    for p in (_j(dir_path, "file1.txt"), _j(dir_path, "subdir1", "file2.txt"),
              _j(dir_path, "subdir2", "file3.txt")):
        with tf.gfile.GFile(p, "w") as f:
            f.write("x")
    walked = list(tf.gfile.Walk(dir_path, in_order=True))
    assert walked == [(dir_path, ["subdir1", "subdir2"], ["file1.txt"]),
                      (_j(dir_path, "subdir1"), [], ["file2.txt"]),
                      (_j(dir_path, "subdir2"), [], ["file3.txt"])]
    assert list(tf.gfile.Walk(dir_path, in_order=False)) == [walked[1], walked[2], walked[0]]
    tf.gfile.DeleteRecursively(dir_path)
    assert not tf.gfile.Exists(dir_path)


def test_tf_record_files_go_through_gfile(base):
    path = _j(base, "data.tfrecord")
    with tf.python_io.TFRecordWriter(path) as w:
        for i in range(5):
            w.write(b"record %d" % i)
    assert list(tf.python_io.tf_record_iterator(path)) == [b"record %d" % i for i in range(5)]
    opts = tf.python_io.TFRecordOptions(tf.python_io.TFRecordCompressionType.GZIP)
    with tf.python_io.TFRecordWriter(path + ".gz", opts) as w:
        w.write(b"zipped")
    assert list(tf.python_io.tf_record_iterator(path + ".gz", opts)) == [b"zipped"]
    with pytest.raises(errors.NotFoundError):
        list(tf.python_io.tf_record_iterator(_j(base, "none.tfrecord")))


def test_unknown_scheme_is_unimplemented():
    with pytest.raises(errors.UnimplementedError, match="nosuchfs"):
        tf.gfile.Exists("nosuchfs://bucket/x")


def test_bad_path_type_is_named():
    with pytest.raises(errors.InvalidArgumentError, match="got int: 3"):
        tf.gfile.Exists(3)


# ---- s3:// on a real local S3-compatible server (moto's server mode) ---------------------

@pytest.fixture(scope="module")
def s3_bucket():
    """An S3 endpoint of moto's ThreadedMotoServer on an OS-assigned port and a bucket on
    it, reached through s3fs as any s3:// URL is: ``s3://<bucket>``."""
    moto_server = pytest.importorskip(
        "moto.server", reason="moto[server] is not installed (pip install psrt-runtime[s3-test])")
    s3fs = pytest.importorskip("s3fs", reason="s3fs is not installed (s3:// needs it)")
    import fsspec.config

    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    saved_env = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                                "AWS_DEFAULT_REGION")}
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                      AWS_DEFAULT_REGION="us-east-1")
    saved_conf = fsspec.config.conf.get("s3")
    fsspec.config.conf["s3"] = {"endpoint_url": f"http://{host}:{port}", "key": "testing",
                                "secret": "testing"}
    s3fs.S3FileSystem.clear_instance_cache()
    bucket = f"psrt-{uuid.uuid4().hex[:12]}"
    tf.gfile.MakeDirs(f"s3://{bucket}")  # s3fs: makedirs of a bucket creates it
    try:
        yield f"s3://{bucket}"
    finally:
        # The cached event writers of s3 logdirs (CheckpointSaverHook's) upload at close:
        # close them while the server is up.
        tf.summary.FileWriterCache.clear()
        s3fs.S3FileSystem.clear_instance_cache()
        if saved_conf is None:
            fsspec.config.conf.pop("s3", None)
        else:
            fsspec.config.conf["s3"] = saved_conf
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


def test_s3_gfile_basics(s3_bucket):
    path = f"{s3_bucket}/dir/hello.txt"
    with tf.gfile.GFile(path, "w") as f:
        f.write("hello s3\n")
    assert tf.gfile.Exists(path) and tf.gfile.IsDirectory(f"{s3_bucket}/dir")
    assert tf.gfile.GFile(path).read() == "hello s3\n"
    st = tf.gfile.Stat(path)
    assert st.length == 9 and not st.is_directory and st.mtime_nsec > 0
    assert tf.gfile.ListDirectory(f"{s3_bucket}/dir") == ["hello.txt"]
    assert tf.gfile.Glob(f"{s3_bucket}/dir/*.txt") == [path]
    tf.gfile.Copy(path, f"{s3_bucket}/dir/copy.txt")
    with pytest.raises(errors.AlreadyExistsError):
        tf.gfile.Rename(path, f"{s3_bucket}/dir/copy.txt")
    tf.gfile.Rename(path, f"{s3_bucket}/dir/moved.txt")
    assert sorted(tf.gfile.ListDirectory(f"{s3_bucket}/dir")) == ["copy.txt", "moved.txt"]
    with pytest.raises(errors.NotFoundError):
        tf.gfile.GFile(f"{s3_bucket}/dir/none").read()
    tf.gfile.DeleteRecursively(f"{s3_bucket}/dir")
    assert not tf.gfile.Exists(f"{s3_bucket}/dir/copy.txt")


def test_s3_tf_record_file_round_trip(s3_bucket):
    # TFRecord framing (tensorflow/core/lib/io/record_writer.cc) over s3://: the bytes of the
    # object are those of a local file written with the same records.
    records = [b"", b"a", b"x" * 70000] + [b"record %d" % i for i in range(10)]
    url = f"{s3_bucket}/data/train.tfrecord"
    with tf.python_io.TFRecordWriter(url) as w:
        for r in records:
            w.write(r)
    assert list(tf.python_io.tf_record_iterator(url)) == records
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        local = os.path.join(d, "train.tfrecord")
        with tf.python_io.TFRecordWriter(local) as w:
            for r in records:
                w.write(r)
        with open(local, "rb") as f:
            assert tf.gfile.GFile(url, "rb").read() == f.read()


def test_s3_saver_checkpoint_round_trip(s3_bucket, tmp_path):
    tf.reset_default_graph()
    server = tf.train.Server.create_local_server()
    try:
        w = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="w")
        step = tf.train.get_or_create_global_step()
        saver = tf.train.Saver(max_to_keep=2)
        ckpt_dir = f"{s3_bucket}/ckpt"
        with tf.Session(server.target) as sess:
            sess.run(tf.global_variables_initializer())
            paths = []
            for i in (1, 2, 3):
                sess.run(w.assign(np.full((2, 3), float(i), np.float32)))
                paths.append(saver.save(sess, f"{ckpt_dir}/model.ckpt", global_step=i))
            assert paths == [f"{ckpt_dir}/model.ckpt-{i}" for i in (1, 2, 3)]
            # the checkpoint state file on s3 and max_to_keep's deletion there
            assert tf.train.latest_checkpoint(ckpt_dir) == paths[-1]
            state = tf.train.get_checkpoint_state(ckpt_dir)
            assert list(state.all_model_checkpoint_paths) == paths[1:]
            assert not tf.gfile.Exists(paths[0])
            assert sorted(tf.gfile.ListDirectory(ckpt_dir)) == [
                "checkpoint", "model.ckpt-2", "model.ckpt-3"]
            sess.run(w.assign(np.zeros((2, 3), np.float32)))
            saver.restore(sess, tf.train.latest_checkpoint(ckpt_dir))
            np.testing.assert_array_equal(sess.run(w), np.full((2, 3), 3.0, np.float32))
            saver.restore(sess, paths[1])
            np.testing.assert_array_equal(sess.run(w), np.full((2, 3), 2.0, np.float32))
        reader = tf.train.load_checkpoint(ckpt_dir)
        np.testing.assert_array_equal(reader.get_tensor("w"), np.full((2, 3), 3.0))
    finally:
        server.stop()
        tf.reset_default_graph()


def test_s3_file_writer_uploads_its_event_file(s3_bucket):
    from tensorboardX.proto import event_pb2
    logdir = f"{s3_bucket}/logs"
    writer = tf.summary.FileWriter(logdir)
    writer.add_summary(tf.Summary(value=[tf.Summary.Value(tag="loss", simple_value=0.5)]), 3)
    writer.flush()
    names = tf.gfile.ListDirectory(logdir)
    assert len(names) == 1 and names[0].startswith("events.out.tfevents.")
    writer.add_summary(tf.Summary(value=[tf.Summary.Value(tag="loss", simple_value=0.25)]), 4)
    writer.close()
    # An event file is TFRecord-framed Event protos: read it back from s3 as records.
    events = [event_pb2.Event.FromString(r)
              for r in tf.python_io.tf_record_iterator(f"{logdir}/{names[0]}")]
    assert events[0].file_version == "brain.Event:2"
    values = [(e.step, v.tag, v.simple_value) for e in events for v in e.summary.value]
    assert values == [(3, "loss", 0.5), (4, "loss", 0.25)]


def test_s3_monitored_training_session_checkpoints_and_resumes(s3_bucket):
    # TF1's MonitoredTrainingSession(checkpoint_dir=...) with the directory on S3: the chief
    # saves there (CheckpointSaverHook, at the end too) and a new session resumes from it.
    ckpt_dir = f"{s3_bucket}/mts"
    server = tf.train.Server.create_local_server()
    try:
        def run(last_step):
            tf.reset_default_graph()
            w = tf.Variable(np.zeros(2, np.float32), name="w")
            step = tf.train.get_or_create_global_step()
            loss = tf.reduce_sum(tf.square(w - tf.constant([1.0, 3.0])))
            train = tf.train.GradientDescentOptimizer(0.25).minimize(loss, global_step=step)
            seen = []
            with tf.train.MonitoredTrainingSession(
                    master=server.target, is_chief=True, checkpoint_dir=ckpt_dir,
                    save_summaries_steps=None, save_summaries_secs=None,
                    hooks=[tf.train.StopAtStepHook(last_step=last_step)]) as sess:
                seen.append(int(sess.run(step)))
                while not sess.should_stop():
                    sess.run(train)
            return seen[0]

        first = run(3)
        assert first == 0
        assert tf.train.latest_checkpoint(ckpt_dir) == f"{ckpt_dir}/model.ckpt-3"
        resumed = run(5)
        assert resumed == 3  # restored from s3
        assert tf.train.latest_checkpoint(ckpt_dir) == f"{ckpt_dir}/model.ckpt-5"
        np.testing.assert_allclose(
            tf.train.load_variable(ckpt_dir, "w"),
            np.array([1.0, 3.0], np.float32) * (1 - 2.0 ** -5), rtol=1e-6)
    finally:
        server.stop()
        tf.reset_default_graph()


def test_tf_io_gfile_v2_names(base):
    # tf.io.gfile (file_io.py's *_v2 functions): the same operations, TF's v2 names.
    g = tf.io.gfile
    d = _j(base, "v2", "sub")
    g.makedirs(d)
    assert g.isdir(d) and g.exists(d)
    with g.GFile(_j(d, "a.txt"), "w") as f:
        f.write("A")
    g.copy(_j(d, "a.txt"), _j(d, "b.txt"))
    with pytest.raises(errors.AlreadyExistsError):
        g.rename(_j(d, "a.txt"), _j(d, "b.txt"))
    g.rename(_j(d, "a.txt"), _j(d, "c.txt"), overwrite=True)
    assert sorted(g.listdir(d)) == ["b.txt", "c.txt"]
    assert g.glob(_j(d, "*.txt")) == [_j(d, "b.txt"), _j(d, "c.txt")]
    assert g.stat(_j(d, "b.txt")).length == 1
    assert list(g.walk(_j(base, "v2"))) == [(_j(base, "v2"), ["sub"], []),
                                            (d, [], ["b.txt", "c.txt"])]
    g.remove(_j(d, "b.txt"))
    g.rmtree(_j(base, "v2"))
    assert not g.exists(_j(base, "v2"))
    if not base.startswith("memory://"):
        g.mkdir(_j(base, "m"))
        with pytest.raises(errors.AlreadyExistsError):
            g.mkdir(_j(base, "m"))

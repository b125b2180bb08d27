"""tf.compat.v1 and the TF1 import paths scripts use (``tensorflow.python.training.server_lib``,
``tensorflow.core.protobuf.config_pb2``, ``tensorflow.examples.tutorials.mnist.input_data``,
...), as real modules under ``psrt``; ``tf.train.ServerDef`` / ``ClusterDef`` / ``JobDef``
as protobuf messages with the field numbers of TF r1.15's
tensorflow/core/protobuf/tensorflow_server.proto and cluster.proto; tf.compat's string
helpers (tensorflow/python/util/compat.py)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import psrt as tf
from psrt import errors

SRC = str(Path(tf.__file__).resolve().parents[1])


def test_compat_v1_is_the_whole_namespace():
    import psrt.compat.v1 as v1
    assert tf.compat.v1 is v1
    assert set(tf.__all__) <= set(dir(v1))
    for name in ("train", "placeholder", "Session", "app", "flags", "logging", "gfile",
                 "global_variables_initializer", "ConfigProto", "nn", "errors"):
        assert getattr(v1, name) is getattr(tf, name), name
    assert v1.train.Saver is tf.train.Saver and v1.train.queue_runner.QueueRunner is \
        tf.train.QueueRunner


def test_tf1_script_on_compat_v1_in_a_fresh_interpreter(tmp_path):
    # `import tensorflow.compat.v1 as tf; tf.disable_v2_behavior()`-style scripts, minus the
    # disable call: the namespace works as psrt's.
    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent('''
        import numpy as np
        import psrt.compat.v1 as tf
        from psrt.python.training import server_lib
        server = server_lib.Server.create_local_server()
        x = tf.placeholder(tf.float32, [None, 2])
        w = tf.Variable(np.ones((2, 1), np.float32), name="w")
        y = tf.matmul(x, w)
        with tf.Session(server.target) as sess:
            sess.run(tf.global_variables_initializer())
            print(sess.run(y, {x: [[1.0, 2.0]]}).tolist())
        server.stop()
    '''))
    env = dict(os.environ, PSRT_LOG_LEVEL="WARNING")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH")) if p)
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[[3.0]]"


@pytest.mark.parametrize("module, names", [
    ("psrt.python.training.server_lib", {"Server": tf.train.Server,
                                         "ClusterSpec": tf.train.ClusterSpec}),
    ("psrt.python.training.moving_averages",
     {"ExponentialMovingAverage": tf.train.ExponentialMovingAverage}),
    ("psrt.python.training.queue_runner", {"QueueRunner": tf.train.QueueRunner,
                                           "start_queue_runners": tf.train.start_queue_runners}),
    ("psrt.python.training.saver", {"Saver": tf.train.Saver}),
    ("psrt.python.framework.ops", {"Graph": tf.Graph, "get_default_graph": tf.get_default_graph,
                                   "GraphKeys": tf.GraphKeys, "Tensor": tf.Tensor,
                                   "name_scope": tf.name_scope, "device": tf.device}),
    ("psrt.python.framework.dtypes", {"float32": tf.float32, "as_dtype": tf.as_dtype}),
    ("psrt.python.framework.errors", {"NotFoundError": errors.NotFoundError,
                                      "OpError": errors.OpError}),
    ("psrt.python.platform.flags", {"FLAGS": tf.flags.FLAGS,
                                    "DEFINE_string": tf.flags.DEFINE_string}),
    ("psrt.python.platform.app", {"run": tf.app.run}),
    ("psrt.python.platform.tf_logging", {"info": tf.logging.info, "INFO": 20}),
    ("psrt.python.platform.gfile", {"GFile": tf.gfile.GFile, "Exists": tf.gfile.Exists}),
    ("psrt.core.protobuf.config_pb2", {"ConfigProto": tf.ConfigProto,
                                       "RunOptions": tf.RunOptions}),
    ("psrt.core.protobuf.tensorflow_server_pb2", {"ServerDef": tf.train.ServerDef}),
    ("psrt.core.protobuf.cluster_pb2", {"ClusterDef": tf.train.ClusterDef,
                                        "JobDef": tf.train.JobDef}),
    ("psrt.core.example.example_pb2", {"Example": tf.train.Example}),
    ("psrt.core.example.feature_pb2", {"Feature": tf.train.Feature}),
    ("psrt.train.queue_runner", {"QueueRunner": tf.train.QueueRunner,
                                 "add_queue_runner": tf.train.add_queue_runner}),
])
def test_tf1_import_paths_are_real_modules(module, names):
    mod = importlib.import_module(module)
    for name, value in names.items():
        assert getattr(mod, name) is value or getattr(mod, name) == value, (module, name)
    assert set(names) <= set(mod.__all__)
    for name in mod.__all__:
        assert hasattr(mod, name), (module, name)


def test_from_imports_as_scripts_write_them():
    from psrt.core.protobuf import config_pb2, tensorflow_server_pb2
    from psrt.python.framework import ops
    from psrt.python.training import moving_averages, server_lib
    assert config_pb2.ConfigProto is tf.ConfigProto
    assert tensorflow_server_pb2.ServerDef is tf.train.ServerDef
    assert ops.get_default_graph() is tf.get_default_graph()
    assert server_lib.Server is tf.train.Server
    assert moving_averages.ExponentialMovingAverage is tf.train.ExponentialMovingAverage


def _server_def():
    # The launcher idiom of TF1 (e.g. tensorflow/tools/dist_test/server/grpc_tensorflow_server.py)
    from psrt.core.protobuf import tensorflow_server_pb2
    server_def = tensorflow_server_pb2.ServerDef(protocol="grpc")
    job = server_def.cluster.job.add()
    job.name = "ps"
    job.tasks[0] = "127.0.0.1:0"
    job = server_def.cluster.job.add()
    job.name = "worker"
    job.tasks[0] = "127.0.0.1:2223"
    job.tasks[1] = "127.0.0.1:2224"
    server_def.job_name = "ps"
    server_def.task_index = 0
    return server_def


def test_server_def_is_a_protobuf_with_tfs_field_numbers():
    sd = _server_def()
    # Field numbers of tensorflow_server.proto (cluster=1, job_name=2, task_index=3,
    # protocol=5) and cluster.proto (job=1; JobDef name=1, tasks=2 map<int32,string>):
    # the serialized bytes, hand-assembled.
    def ld(tag, payload):
        return bytes([tag, len(payload)]) + payload
    def entry(k, v):
        return ld(0x12, bytes([0x08, k]) + ld(0x12, v))
    ps = ld(0x0A, ld(0x0A, b"ps") + entry(0, b"127.0.0.1:0"))
    worker = ld(0x0A, ld(0x0A, b"worker") + entry(0, b"127.0.0.1:2223")
                + entry(1, b"127.0.0.1:2224"))
    expected = ld(0x0A, ps + worker) + ld(0x12, b"ps") + ld(0x2A, b"grpc")
    # (map entries may be written in any order, so the bytes are compared parsed)
    back = tf.train.ServerDef.FromString(expected)
    assert back == sd and back.cluster.job[1].tasks[1] == "127.0.0.1:2224"
    assert tf.train.ServerDef.FromString(sd.SerializeToString()) == sd
    one = tf.train.JobDef(name="ps")
    one.tasks[0] = "127.0.0.1:0"
    assert one.SerializeToString() == ld(0x0A, b"ps") + entry(0, b"127.0.0.1:0")
    assert [f.number for f in tf.train.ServerDef.DESCRIPTOR.fields] == [1, 2, 3, 5, 6]


def test_cluster_spec_and_server_take_the_protos():
    sd = _server_def()
    spec = tf.train.ClusterSpec(sd.cluster)
    assert spec.as_dict() == {"ps": ["127.0.0.1:0"],
                              "worker": ["127.0.0.1:2223", "127.0.0.1:2224"]}
    assert spec.as_cluster_def() == sd.cluster
    sparse = tf.train.ClusterSpec({"ps": {2: "h:1"}}).as_cluster_def()
    assert dict(sparse.job[0].tasks) == {2: "h:1"}
    server = tf.train.Server(sd)  # job_name, task_index from the ServerDef (TF's)
    try:
        assert (server.job_name, server.task_index) == ("ps", 0)
        assert server.port > 0
    finally:
        server.stop()
    with pytest.raises(ValueError, match="Task index 5 is not in job 'worker'"):
        tf.train.Server(sd, job_name="worker", task_index=5, start=False)


def test_compat_string_helpers():
    assert tf.compat.as_bytes("héllo") == "héllo".encode()
    assert tf.compat.as_bytes(bytearray(b"ab")) == b"ab"
    assert tf.compat.as_text(b"h\xc3\xa9") == "hé" and tf.compat.as_str("x") == "x"
    assert tf.compat.as_str_any(3) == "3" and tf.compat.as_str_any(b"b") == "b"
    assert tf.compat.path_to_str(Path("/a/b")) == "/a/b"
    with pytest.raises(TypeError, match="Expected binary or unicode string, got 3"):
        tf.compat.as_bytes(3)


def test_mnist_input_data_reads_the_default_source():
    from psrt.examples.tutorials.mnist import input_data
    data = input_data.read_data_sets(None, one_hot=True)
    assert data.train.images.shape[1] == 784 and data.train.images.dtype == np.float32
    assert data.train.labels.shape[1] == 10
    assert data.test.num_examples == 1000


def test_device_lib_lists_one_cpu_and_no_gpu():
    # The GPU-counting idiom of TF1 scripts (tensorflow/python/client/device_lib.py).
    from psrt.python.client import device_lib
    devices = device_lib.list_local_devices()
    assert [(d.name, d.device_type) for d in devices] == [("/device:CPU:0", "CPU")]
    assert [d.name for d in devices if d.device_type == "GPU"] == []
    assert devices[0].memory_limit > 0

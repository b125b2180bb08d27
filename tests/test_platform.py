"""tf.app.run, tf.flags / tf.app.flags and tf.logging (psrt/platform/app.py, flags.py,
tf_logging.py), checked against TF r1.15's tensorflow/python/platform/app.py, flags.py and
tf_logging.py.

Flags are process-wide (absl's one FLAGS registry) and ``tf.app.run`` exits the process, so
the flag and app cases run a tiny TF1-style script in a fresh interpreter, as a user runs it:
``python script.py --ps_hosts=... --job_name=worker``.
"""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import psrt as tf
from psrt.platform import tf_logging

SRC = str(Path(tf.__file__).resolve().parents[1])

# A TF1 PS script's head (tensorflow/tools/dist_test/python/mnist_replica.py's flags), with
# `import tensorflow as tf` replaced.
_SCRIPT = textwrap.dedent('''
    import sys
    import psrt as tf

    flags = tf.app.flags
    flags.DEFINE_string("ps_hosts", "localhost:2222", "Comma-separated ps hosts")
    flags.DEFINE_string("worker_hosts", "localhost:2223", "Comma-separated worker hosts")
    flags.DEFINE_string("job_name", None, "job name: worker or ps")
    flags.DEFINE_integer("task_index", 0, "Worker task index")
    flags.DEFINE_float("learning_rate", 0.01, "Learning rate")
    flags.DEFINE_boolean("sync_replicas", False, "Use SyncReplicasOptimizer")
    flags.DEFINE_bool("verbose", False, "Say more")
    flags.DEFINE_list("layers", ["32", "16"], "Layer sizes")
    flags.DEFINE_enum("optimizer", "sgd", ["sgd", "adam"], "Optimizer")
    flags.DEFINE_multi_string("tag", [], "Tags (repeatable)")
    FLAGS = flags.FLAGS

    def main(argv):
        print("argv=%r" % (argv[1:],))
        print("ps_hosts=%r" % (FLAGS.ps_hosts.split(","),))
        print("worker_hosts=%r" % (FLAGS.worker_hosts,))
        print("job_name=%r task_index=%r" % (FLAGS.job_name, FLAGS.task_index))
        print("learning_rate=%r sync=%r verbose=%r" % (FLAGS.learning_rate,
                                                       FLAGS.sync_replicas, FLAGS.verbose))
        print("layers=%r optimizer=%r tag=%r" % (FLAGS.layers, FLAGS.optimizer, FLAGS.tag))
        return int(FLAGS.task_index) * 10
''')


def _run(tmp_path: Path, body: str, *args: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.py"
    script.write_text(body)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH")) if p)
    env["PSRT_LOG_LEVEL"] = "WARNING"
    return subprocess.run([sys.executable, str(script), *args], env=env, capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)


def test_app_run_parses_flags_and_calls_main_with_the_rest(tmp_path):
    result = _run(tmp_path, _SCRIPT + "tf.app.run()\n",
                  "--ps_hosts=h1:2222,h2:2222", "--job_name=worker", "--task_index", "1",
                  "--learning_rate=0.5", "--sync_replicas", "--noverbose",
                  "--layers=64,8", "--optimizer=adam", "--tag=a", "--tag=b", "pos1")
    # main's return value is the exit status: sys.exit(main(argv)) (TF's app.run)
    assert result.returncode == 10, result.stderr
    assert result.stdout.splitlines() == [
        "argv=['pos1']",
        "ps_hosts=['h1:2222', 'h2:2222']",
        "worker_hosts='localhost:2223'",
        "job_name='worker' task_index=1",
        "learning_rate=0.5 sync=True verbose=False",
        "layers=['64', '8'] optimizer='adam' tag=['a', 'b']",
    ]


def test_app_run_passes_unknown_flags_to_main(tmp_path):
    # TF's app.run parses with known_only=True: unknown flags stay in main's argv, in order.
    result = _run(tmp_path, _SCRIPT + "tf.app.run()\n",
                  "--job_name=ps", "--unknown_flag=3", "extra", "--other")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "argv=['--unknown_flag=3', 'extra', '--other']"
    assert "job_name='ps'" in result.stdout


def test_app_run_main_none_uses_main_of_the_main_module_and_defaults(tmp_path):
    result = _run(tmp_path, _SCRIPT + "tf.app.run(main=None)\n")
    assert result.returncode == 0, result.stderr
    assert "job_name=None task_index=0" in result.stdout
    assert "layers=['32', '16'] optimizer='sgd' tag=[]" in result.stdout


def test_app_run_explicit_argv_and_main(tmp_path):
    body = _SCRIPT + textwrap.dedent('''
        def other(argv):
            print("other", argv, FLAGS.job_name)
        tf.app.run(main=other, argv=["prog", "--job_name=chief", "rest"])
    ''')
    result = _run(tmp_path, body, "--job_name=ignored")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "other ['prog', 'rest'] chief"


def test_a_bad_flag_value_exits_with_absl_usage_error(tmp_path):
    result = _run(tmp_path, _SCRIPT + "tf.app.run()\n", "--task_index=two")
    assert result.returncode == 1
    assert "task_index" in result.stderr and "two" in result.stderr
    result = _run(tmp_path, _SCRIPT + "tf.app.run()\n", "--optimizer=rmsprop")
    assert result.returncode == 1
    assert "rmsprop" in result.stderr and "sgd" in result.stderr


def test_flags_parse_sys_argv_on_first_read_without_app_run(tmp_path):
    # TF's _FlagValuesWrapper.__getattr__: an unparsed FLAGS parses sys.argv when read.
    body = _SCRIPT + textwrap.dedent('''
        assert not FLAGS.is_parsed()
        print("job_name=%s task_index=%d" % (FLAGS.job_name, FLAGS.task_index))
        assert FLAGS.is_parsed()
    ''')
    result = _run(tmp_path, body, "--job_name=worker", "--task_index=3")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "job_name=worker task_index=3"


def test_implicit_parse_refuses_an_unknown_flag(tmp_path):
    # The implicit parse is a full one (wrapped(sys.argv)): absl's UnrecognizedFlagError.
    body = _SCRIPT + textwrap.dedent('''
        try:
            FLAGS.job_name
        except tf.flags.UnrecognizedFlagError as e:
            print("refused:", e)
    ''')
    result = _run(tmp_path, body, "--bogus=1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("refused:") and "bogus" in result.stdout


def test_old_keyword_names_are_accepted_with_a_warning(tmp_path):
    # TF's _RENAMED_ARGUMENTS: flag_name/default_value/docstring -> name/default/help.
    body = textwrap.dedent('''
        import psrt as tf
        tf.flags.DEFINE_string(flag_name="data_dir", default_value="/tmp/d", docstring="d")
        tf.flags.DEFINE_integer(flag_name="steps", default_value=7, docstring="s")
        print(tf.flags.FLAGS.data_dir, tf.flags.FLAGS.steps)
    ''')
    result = _run(tmp_path, body)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "/tmp/d 7"
    assert "Use of the keyword argument names (flag_name, default_value, docstring) is " \
           "deprecated" in result.stderr


def test_flags_are_absls_and_app_flags_is_flags():
    from absl import flags as absl_flags
    assert tf.app.flags is tf.flags
    assert tf.flags.FLAGS.__dict__["__wrapped"] is absl_flags.FLAGS
    assert tf.flags.DEFINE_bool is tf.flags.DEFINE_boolean
    assert tf.flags.DEFINE_enum is absl_flags.DEFINE_enum


def test_help_lists_the_scripts_flags(tmp_path):
    # --help prints the usage and exits with status 1 (absl's, and TF's own _HelpFlag before)
    result = _run(tmp_path, _SCRIPT + "tf.app.run()\n", "--help")
    assert result.returncode == 1
    assert "--ps_hosts" in result.stdout and "Comma-separated ps hosts" in result.stdout


# tf.logging (tf_logging.py r1.15)

def test_levels_are_tfs():
    assert (tf.logging.DEBUG, tf.logging.INFO, tf.logging.WARN, tf.logging.ERROR,
            tf.logging.FATAL) == (10, 20, 30, 40, 50)


@pytest.fixture
def tf_logger():
    logger = logging.getLogger("tensorflow")
    level = logger.level
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s:%(name)s:%(message)s:%(filename)s"))
    logger.addHandler(handler)
    tf.logging.get_logger()
    yield logger, stream
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_set_and_get_verbosity(tf_logger):
    logger, stream = tf_logger
    assert tf.logging.get_logger() is logger
    tf.logging.set_verbosity(tf.logging.INFO)
    assert tf.logging.get_verbosity() == 20 and logger.level == 20
    tf.logging.debug("hidden %d", 1)
    tf.logging.info("shown %d", 2)
    tf.logging.warn("w")
    tf.logging.warning("w2")
    tf.logging.error("e")
    tf.logging.fatal("f")  # logs, does not exit
    tf.logging.set_verbosity("DEBUG")
    tf.logging.debug("now %s", "shown")
    tf.logging.vlog(25, "v%d", 25)
    tf.logging.log(tf.logging.ERROR, "l")
    assert stream.getvalue().splitlines() == [
        "INFO:tensorflow:shown 2:test_platform.py",
        "WARNING:tensorflow:w:test_platform.py",
        "WARNING:tensorflow:w2:test_platform.py",
        "ERROR:tensorflow:e:test_platform.py",
        "CRITICAL:tensorflow:f:test_platform.py",
        "DEBUG:tensorflow:now shown:test_platform.py",
        "Level 25:tensorflow:v25:test_platform.py",
        "ERROR:tensorflow:l:test_platform.py",
    ]
    with pytest.raises(ValueError, match="'chatty'.*DEBUG, INFO, WARN, ERROR, FATAL"):
        tf.logging.set_verbosity("chatty")


def test_log_every_n_first_n_and_if_count_per_call_site(tf_logger):
    logger, stream = tf_logger
    tf.logging.set_verbosity(tf.logging.INFO)
    for i in range(7):
        tf.logging.log_every_n(tf.logging.INFO, "every %d", 3, i)  # i = 0, 3, 6
        tf.logging.log_first_n(tf.logging.INFO, "first %d", 2, i)  # i = 0, 1
    for i in range(2):  # a second call site has its own count
        tf.logging.log_every_n(tf.logging.INFO, "other %d", 3, i)
    tf.logging.log_if(tf.logging.INFO, "if %s", True, "yes")
    tf.logging.log_if(tf.logging.INFO, "if %s", False, "no")
    msgs = [line.split(":")[2] for line in stream.getvalue().splitlines()]
    assert msgs == ["every 0", "first 0", "first 1", "every 3", "every 6", "other 0", "if yes"]
    with pytest.raises(ValueError, match="n >= 1, got 0"):
        tf.logging.log_every_n(tf.logging.INFO, "x", 0)


def test_default_verbosity_is_warn_and_default_handler_writes_tf1_format(tmp_path):
    # No logging set-up: the "tensorflow" logger gets a stderr handler with BASIC_FORMAT and
    # no level (effective WARN from the root), as TF1's get_logger.
    body = textwrap.dedent('''
        import psrt as tf
        print(tf.logging.get_verbosity())
        tf.logging.info("not shown")
        tf.logging.warn("careful %s", "now")
        tf.logging.set_verbosity(tf.logging.INFO)
        tf.logging.info("step %d", 5)
    ''')
    result = _run(tmp_path, body)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "30"
    assert result.stderr.splitlines() == ["WARNING:tensorflow:careful now",
                                          "INFO:tensorflow:step 5"]


def test_an_application_configured_first_gets_records_once(tmp_path):
    body = textwrap.dedent('''
        import logging, sys
        logging.basicConfig(stream=sys.stdout, format="app|%(name)s|%(message)s")
        import psrt as tf
        tf.logging.warning("once")
    ''')
    result = _run(tmp_path, body)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["app|tensorflow|once"]
    assert "once" not in result.stderr


def test_tf_logging_is_not_the_psrt_logger():
    assert tf_logging.LOGGER_NAME == "tensorflow"
    assert tf.logging.get_logger() is not logging.getLogger("psrt")


# A TF1 between-graph PS script, flags to training, as TF1's distributed docs write it
# (https://github.com/tensorflow/docs/blob/r1.15/site/en/deploy/distributed.md, "Putting it
# all together"), `import tensorflow as tf` replaced: a real ps and worker process.
_PS_SCRIPT = textwrap.dedent('''
    import numpy as np
    import psrt as tf

    FLAGS = tf.app.flags.FLAGS
    tf.app.flags.DEFINE_string("ps_hosts", "", "Comma-separated list of hostname:port pairs")
    tf.app.flags.DEFINE_string("worker_hosts", "", "Comma-separated list of hostname:port")
    tf.app.flags.DEFINE_string("job_name", "", "One of 'ps', 'worker'")
    tf.app.flags.DEFINE_integer("task_index", 0, "Index of task within the job")
    tf.app.flags.DEFINE_integer("steps", 5, "Training steps")

    def main(_):
        tf.logging.set_verbosity(tf.logging.INFO)
        cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","),
                                        "worker": FLAGS.worker_hosts.split(",")})
        server = tf.train.Server(cluster, job_name=FLAGS.job_name,
                                 task_index=FLAGS.task_index)
        if FLAGS.job_name == "ps":
            print("ps ready", flush=True)
            server.join()
            return
        with tf.device(tf.train.replica_device_setter(
                worker_device="/job:worker/task:%d" % FLAGS.task_index, cluster=cluster)):
            w = tf.Variable(np.zeros(2, np.float32), name="w")
            global_step = tf.train.get_or_create_global_step()
            loss = tf.reduce_sum(tf.square(w - tf.constant([1.0, -2.0])))
            train_op = tf.train.GradientDescentOptimizer(0.25).minimize(
                loss, global_step=global_step)
        hooks = [tf.train.StopAtStepHook(last_step=FLAGS.steps)]
        with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True,
                                               hooks=hooks) as sess:
            while not sess.should_stop():
                _, step = sess.run([train_op, global_step])
                tf.logging.log_every_n(tf.logging.INFO, "step %d", 2, step)
            print("w=%s" % np.round(sess.run(w), 6).tolist(), flush=True)

    if __name__ == "__main__":
        tf.app.run()
''')


def test_a_tf1_ps_script_trains_from_its_command_line(tmp_path):
    from _cluster import free_ports, read_line, reap

    script = tmp_path / "trainer.py"
    script.write_text(_PS_SCRIPT)
    ps_port, worker_port = free_ports(2)
    env = dict(os.environ, PSRT_LOG_LEVEL="WARNING")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH")) if p)
    common = [f"--ps_hosts=127.0.0.1:{ps_port}", f"--worker_hosts=127.0.0.1:{worker_port}"]
    ps = subprocess.Popen([sys.executable, str(script), *common, "--job_name=ps",
                           "--task_index=0"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        read_line(ps, "ps ready")
        worker = subprocess.run([sys.executable, str(script), *common, "--job_name=worker",
                                 "--task_index=0", "--steps=6"], capture_output=True,
                                text=True, env=env, timeout=120)
        assert worker.returncode == 0, worker.stderr
        # w -> w - 0.25 * 2 (w - t) = (w + t) / 2 each step: after 6 steps t * (1 - 2**-6)
        assert worker.stdout.strip() == "w=%s" % np.round(
            np.array([1.0, -2.0], np.float32) * (1 - 2.0 ** -6), 6).tolist()
        # absl.app.run (tf.app.run) puts absl's handler on the root logger before main, so
        # tf.logging's records come out in absl's glog format, naming the script's line;
        # log_every_n(..., 2) logs steps 1, 3, 5.
        logged = [line.partition("] ")[2] for line in worker.stderr.splitlines()
                  if line.startswith("I") and " trainer.py:" in line]
        assert logged == ["step 1", "step 3", "step 5"], worker.stderr
    finally:
        reap(ps)


def test_a_script_may_define_log_dir_when_it_does_not_call_app_run(tmp_path):
    # absl.app (so absl.logging and its --log_dir) is imported by tf.app.run only: `import
    # psrt` leaves the flag name free (mnist_softmax_sync.py's port defines --log_dir).
    body = textwrap.dedent('''
        import sys
        import psrt as tf
        assert "absl.logging" not in sys.modules
        tf.flags.DEFINE_string("log_dir", "/tmp/default", "log directory")
        print(tf.flags.FLAGS.log_dir)
    ''')
    result = _run(tmp_path, body, "--log_dir=/tmp/mine")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "/tmp/mine"

# psrt port of the example trainer program of TensorFlow's "Distributed TensorFlow" how-to:
#   origin:  https://github.com/tensorflow/tensorflow  (tensorflow/tensorflow)
#   path:    tensorflow/docs_src/deploy/distributed.md, "Putting it all together: example
#            trainer program"
#   commit:  0389c940204d988a6d2c30aa9fc64fd9aabe336b
# Style: between-graph replication and asynchronous training: argparse flags,
# tf.contrib.framework.get_or_create_global_step, Adagrad, a StopAtStepHook, a
# MonitoredTrainingSession with a checkpoint_dir, and a loop that runs the train op with no
# feed_dict (the model reads its input inside the graph).
#
# What changed, and only this (the port was written from reading the original):
# * imports: psrt for tensorflow; tf.contrib.framework.get_or_create_global_step is
#   psrt.train's (TF 1.x's own later name); tf.app.run(main=main, argv=...) is the call to
#   main it makes (psrt has no tf.app);
# * the model, which the how-to leaves as "Build model... loss = ...": logistic regression
#   on 10 features, reading its batches inside the graph (a py_func input producer, as TF1
#   scripts use queue-fed readers), with psrt.nn ops;
# * two flags so that a test can bound and place the run: --last_step (the how-to's
#   1000000 stays the default) and --checkpoint_dir (default the how-to's /tmp/train_logs).

import argparse
import sys

import numpy as np

import psrt

FLAGS = None

NUM_FEATURES = 10
BATCH_SIZE = 100
# The problem the model learns: labels are 1 where x . TRUE_W > 0.5 (plus noise).
TRUE_W = np.linspace(-1.0, 1.0, NUM_FEATURES).astype(np.float32)


def make_batch(rng):
  """A batch of (features float32 [BATCH_SIZE, 10], labels float32 [BATCH_SIZE, 1])."""
  x = rng.normal(size=(BATCH_SIZE, NUM_FEATURES)).astype(np.float32)
  noise = rng.normal(scale=0.1, size=BATCH_SIZE)
  y = ((x @ TRUE_W + noise) > 0.5).astype(np.float32)[:, None]
  return x, y


def main(_):
  ps_hosts = FLAGS.ps_hosts.split(",")
  worker_hosts = FLAGS.worker_hosts.split(",")

  # Create a cluster from the parameter server and worker hosts.
  cluster = psrt.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})

  # Create and start a server for the local task.
  server = psrt.train.Server(cluster,
                             job_name=FLAGS.job_name,
                             task_index=FLAGS.task_index)

  if FLAGS.job_name == "ps":
    server.join()
  elif FLAGS.job_name == "worker":

    # Assigns ops to the local worker by default.
    with psrt.device(psrt.train.replica_device_setter(
        worker_device="/job:worker/task:%d" % FLAGS.task_index,
        cluster=cluster)):

      # Build model...
      rng = np.random.RandomState(FLAGS.task_index)
      features, labels = psrt.py_func(lambda: make_batch(rng), [],
                                      [psrt.float32, psrt.float32], name="input_producer")
      weights = psrt.get_variable("weights", [NUM_FEATURES, 1],
                                  initializer=psrt.zeros_initializer())
      bias = psrt.get_variable("bias", [1], initializer=psrt.zeros_initializer())
      logits = psrt.nn.xw_plus_b(features, weights, bias)
      loss = psrt.reduce_mean(psrt.nn.sigmoid_cross_entropy_with_logits(
          labels=labels, logits=logits))
      global_step = psrt.train.get_or_create_global_step()

      train_op = psrt.train.AdagradOptimizer(0.01).minimize(
          loss, global_step=global_step)

    # The StopAtStepHook handles stopping after running given steps.
    hooks=[psrt.train.StopAtStepHook(last_step=FLAGS.last_step)]

    # The MonitoredTrainingSession takes care of session initialization,
    # restoring from a checkpoint, saving to a checkpoint, and closing when done
    # or an error occurs.
    with psrt.train.MonitoredTrainingSession(master=server.target,
                                             is_chief=(FLAGS.task_index == 0),
                                             checkpoint_dir=FLAGS.checkpoint_dir,
                                             hooks=hooks) as mon_sess:
      while not mon_sess.should_stop():
        # Run a training step asynchronously.
        # See `tf.train.SyncReplicasOptimizer` for additional details on how to
        # perform *synchronous* training.
        # mon_sess.run handles AbortedError in case of preempted PS.
        mon_sess.run(train_op)


if __name__ == "__main__":
  parser = argparse.ArgumentParser()
  parser.register("type", "bool", lambda v: v.lower() == "true")
  # Flags for defining the tf.train.ClusterSpec
  parser.add_argument(
      "--ps_hosts",
      type=str,
      default="",
      help="Comma-separated list of hostname:port pairs"
  )
  parser.add_argument(
      "--worker_hosts",
      type=str,
      default="",
      help="Comma-separated list of hostname:port pairs"
  )
  parser.add_argument(
      "--job_name",
      type=str,
      default="",
      help="One of 'ps', 'worker'"
  )
  # Flags for defining the tf.train.Server
  parser.add_argument(
      "--task_index",
      type=int,
      default=0,
      help="Index of task within the job"
  )
  parser.add_argument("--last_step", type=int, default=1000000,
                      help="Global step at which the StopAtStepHook stops training")
  parser.add_argument("--checkpoint_dir", type=str, default="/tmp/train_logs",
                      help="The MonitoredTrainingSession's checkpoint directory")
  FLAGS, unparsed = parser.parse_known_args()
  main([sys.argv[0]] + unparsed)

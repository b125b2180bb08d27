# -*- coding: utf-8 -*-
# psrt port of a community distributed linear-regression trainer:
#   origin:  https://github.com/wucng/Tensorflow
#   path:    tf_Distributed/py_script/distribute.py
#   commit:  654eb7b6e8d9cf77b7f2f2ea5100d38b6032fd94
# Style: y = weight * x + biase fitted to y = 2x + 10 + noise drawn in the training loop;
# tf.get_variable with random_normal_initializer, compute_gradients + apply_gradients (not
# minimize), a named global step, tf.train.Saver and a summary, tf.train.Supervisor with
# prepare_or_wait_for_session saving a checkpoint every 5 s into ./checkpoint/, and, with
# --issync=1, SyncReplicasOptimizer with its init tokens op and chief queue runner.
#
# What changed, and only this (the port was written from reading the original):
# * imports: psrt for tensorflow, absl's flags and app for tf.app.flags and tf.app.run;
# * the model: tf.multiply(input, weight) + biase and tf.square(label - pred) as tensor
#   operators (the square is ** 2);
# * the TF version: SyncReplicasOptimizer's replica_id argument, which TF 1.0 removed (its
#   sync mode fails on any TF 1.x), is dropped.
# The Chinese comments of the original are translated.

import numpy as np
from absl import app
from absl import flags

import psrt

# -------------------- change with the model ----------------------------
# Define parameters
FLAGS = flags.FLAGS
flags.DEFINE_float('learning_rate', 0.001, 'Initial learning rate.')
flags.DEFINE_integer('steps_to_validate', 1000,
                     'Steps to validate and print loss')
# ------------------------------------------------------------------------

# For distributed
flags.DEFINE_string("ps_hosts", "",
                    "Comma-separated list of hostname:port pairs")
flags.DEFINE_string("worker_hosts", "",
                    "Comma-separated list of hostname:port pairs")
flags.DEFINE_string("job_name", "", "One of 'ps', 'worker'")
flags.DEFINE_integer("task_index", 0, "Index of task within the job")
flags.DEFINE_integer("issync", 0, "Distributed mode: 1 synchronous, 0 asynchronous")


def main(_):
    # Hyperparameters
    learning_rate = FLAGS.learning_rate
    steps_to_validate = FLAGS.steps_to_validate

    ps_hosts = FLAGS.ps_hosts.split(",")
    worker_hosts = FLAGS.worker_hosts.split(",")
    cluster = psrt.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
    server = psrt.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)

    issync = FLAGS.issync
    if FLAGS.job_name == "ps":
        server.join()
    elif FLAGS.job_name == "worker":
        with psrt.device(psrt.train.replica_device_setter(
                worker_device="/job:worker/task:%d" % FLAGS.task_index,
                cluster=cluster)):
            global_step = psrt.Variable(0, name='global_step', trainable=False)

            # ------------------ this part can be replaced by your own model ----------------#
            input = psrt.placeholder(psrt.float32)
            label = psrt.placeholder(psrt.float32)

            weight = psrt.get_variable("weight", [1], psrt.float32, initializer=psrt.random_normal_initializer())
            biase = psrt.get_variable("biase", [1], psrt.float32, initializer=psrt.random_normal_initializer())
            pred = input * weight + biase

            loss_value = loss(label, pred)
            optimizer = psrt.train.GradientDescentOptimizer(learning_rate)

            grads_and_vars = optimizer.compute_gradients(loss_value)
            # -----------------------------------------------------------------#
            if issync == 1:
                # Synchronous mode: compute and apply the gradients
                rep_op = psrt.train.SyncReplicasOptimizer(optimizer,
                                                          replicas_to_aggregate=len(
                                                              worker_hosts),
                                                          total_num_replicas=len(
                                                              worker_hosts),
                                                          use_locking=True)
                train_op = rep_op.apply_gradients(grads_and_vars,
                                                  global_step=global_step)
                init_token_op = rep_op.get_init_tokens_op()
                chief_queue_runner = rep_op.get_chief_queue_runner()
            else:
                # Asynchronous mode: compute and apply the gradients
                train_op = optimizer.apply_gradients(grads_and_vars,
                                                     global_step=global_step)

            init_op = psrt.global_variables_initializer()

            saver = psrt.train.Saver()
            psrt.summary.scalar('cost', loss_value)
            summary_op = psrt.summary.merge_all()

        sv = psrt.train.Supervisor(is_chief=(FLAGS.task_index == 0),
                                   logdir="./checkpoint/",  # where the model is saved
                                   init_op=init_op,  # variable initialization
                                   summary_op=None,
                                   saver=saver,
                                   global_step=global_step,
                                   save_model_secs=5)  # save every 5 s

        with sv.prepare_or_wait_for_session(server.target) as sess:
            # In synchronous mode
            if FLAGS.task_index == 0 and issync == 1:
                sv.start_queue_runners(sess, [chief_queue_runner])
                sess.run(init_token_op)
            # ------------------- change with the model --------------------------
            step = 0
            while step < 10000:
                train_x = np.random.randn(1)
                train_y = 2 * train_x + np.random.randn(1) * 0.33 + 10
                _, loss_v, step = sess.run([train_op, loss_value, global_step],
                                           feed_dict={input: train_x, label: train_y})
                if step % steps_to_validate == 0:
                    w, b = sess.run([weight, biase])
                    print("step: %d, weight: %f, biase: %f, loss: %f" % (step, w[0], b[0], loss_v[0]))
            # --------------------------------------------------------------
        sv.stop()


def loss(label, pred):
    return (label - pred) ** 2


if __name__ == "__main__":
    app.run(main)

"""Distributed MNIST in the older ``tf.train.Supervisor`` style, on psrt.

The same job as ``mnist_dist.py`` (same flags, model and data), written the way TF1's
``mnist_replica.py`` was before ``MonitoredTrainingSession``: a ``Supervisor`` whose chief
initializes the variables (or restores them from ``--checkpoint_dir``) while the other
workers wait, and a training loop that checks ``sv.should_stop()`` and the global step.

``--sync_replicas`` trains synchronously, with ``mnist_replica.py``'s code for it: the
optimizer is wrapped in ``SyncReplicasOptimizer`` (``--replicas_to_aggregate``, default all
workers), the Supervisor gets the optimizer's ``local_init_op`` (``chief_init_op`` on the
chief) and ``ready_for_local_init_op``, and the chief runs ``get_init_tokens_op()`` and
starts ``get_chief_queue_runner()``. psrt needs none of these (the ps tasks aggregate the
gradients; see ``SyncReplicasOptimizer``): they do nothing, so TF code keeps them
unchanged. Every worker stops once the global step reaches ``--train_steps``; with backup
workers (``--replicas_to_aggregate`` < workers) a worker whose step can no longer complete
because the others finished gets OutOfRangeError, which ends its training loop. A step
waits at most ``--sync_timeout_secs`` (``psrt.ConfigProto(sync_timeout_secs=...)``) for
the other replicas, then fails with DeadlineExceededError instead of hanging.

    psrt-launch --ps 2 --workers 2 examples/mnist_supervisor.py
    psrt-launch --ps 2 --workers 2 examples/mnist_supervisor.py --sync_replicas
    psrt-launch --ps 2 --workers 3 examples/mnist_supervisor.py --sync_replicas \\
        --replicas_to_aggregate 2
"""

from __future__ import annotations

import logging
import os
import sys
import time

import psrt
from psrt.datasets import mnist as input_data

# The flags and the numpy model are mnist_dist.py's (this script's directory is on sys.path).
from mnist_dist import accuracy, build_model, parse_args

logger = logging.getLogger("mnist_supervisor")


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(levelname)s:%(name)s:%(message)s")
    args = parse_args(argv)
    cluster = args.cluster
    num_workers = cluster.num_tasks("worker")

    server = psrt.train.Server(cluster, job_name=args.job_name, task_index=args.task_index)
    if args.job_name == "ps":
        server.join()
        return 0

    is_chief = (args.task_index == 0)
    if is_chief and args.checkpoint_dir:
        os.makedirs(args.checkpoint_dir, exist_ok=True)
    mnist = input_data.read_data_sets(args.data_dir, one_hot=True,
                                      seed=args.seed + args.task_index)

    # The device setter places the variables on the ps tasks, round-robin.
    with psrt.device(psrt.train.replica_device_setter(
            worker_device="/job:worker/task:%d" % args.task_index, cluster=cluster)):
        global_step = psrt.train.get_or_create_global_step()
        variables, loss_fn = build_model(args.hidden_units, seed=args.seed)

        opt = psrt.train.AdagradOptimizer(args.learning_rate)
        if args.sync_replicas:
            if args.replicas_to_aggregate is None:
                replicas_to_aggregate = num_workers
            else:
                replicas_to_aggregate = args.replicas_to_aggregate
            opt = psrt.train.SyncReplicasOptimizer(
                opt, replicas_to_aggregate=replicas_to_aggregate,
                total_num_replicas=num_workers, name="mnist_sync_replicas")
            logger.info("Worker %d: SyncReplicasOptimizer: each step averages the gradients "
                        "of %d of the %d workers", args.task_index, replicas_to_aggregate,
                        num_workers)
        train_op = opt.minimize(loss_fn, global_step=global_step, var_list=variables)

        if args.sync_replicas:
            # TF's per-session initialization of the sync optimizer (its local step; on the
            # chief, the token queue too), run once the global variables are initialized.
            local_init_op = opt.local_step_init_op
            if is_chief:
                local_init_op = opt.chief_init_op
            ready_for_local_init_op = opt.ready_for_local_init_op

            # The chief's queue runner and initial tokens of TF's sync mode (no-ops in psrt:
            # the ps tasks aggregate the gradients themselves).
            chief_queue_runner = opt.get_chief_queue_runner()
            sync_init_op = opt.get_init_tokens_op()

        init_op = psrt.global_variables_initializer()

    if args.sync_replicas:
        sv = psrt.train.Supervisor(is_chief=is_chief,
                                   logdir=args.checkpoint_dir,
                                   init_op=init_op,
                                   local_init_op=local_init_op,
                                   ready_for_local_init_op=ready_for_local_init_op,
                                   recovery_wait_secs=1,
                                   global_step=global_step,
                                   save_model_secs=600)
    else:
        sv = psrt.train.Supervisor(is_chief=is_chief,
                                   logdir=args.checkpoint_dir,
                                   init_op=init_op,
                                   recovery_wait_secs=1,
                                   global_step=global_step,
                                   save_model_secs=600)

    # sync_timeout_secs bounds a synchronous step's wait for the other replicas.
    config = psrt.ConfigProto(sync_timeout_secs=args.sync_timeout_secs)

    # The chief worker (task_index==0) session will prepare the session, while the
    # remaining workers will wait for the preparation to complete.
    if is_chief:
        logger.info("Worker %d: Initializing session...", args.task_index)
    else:
        logger.info("Worker %d: Waiting for session to be initialized...", args.task_index)

    with sv.managed_session(server.target, config=config) as sess:
        logger.info("Worker %d: Session initialization complete.", args.task_index)

        if args.sync_replicas and is_chief:
            # Chief worker will start the chief queue runner and call the init op.
            sess.run(sync_init_op)
            sv.start_queue_runners(sess, [chief_queue_runner])

        # Perform training
        time_begin = time.time()
        local_step = 0
        step = first_step = sess.run(global_step)
        try:
            while not sv.should_stop() and step < args.train_steps:
                # Training feed
                batch_xs, batch_ys = mnist.train.next_batch(args.batch_size)
                train_feed = {"images": batch_xs, "labels": batch_ys}
                loss_value, step = sess.run([train_op, global_step], feed_dict=train_feed)
                local_step += 1
                if local_step % 100 == 0:
                    logger.info("Worker %d: training step %d done (global step: %d), "
                                "loss = %.4f", args.task_index, local_step, step, loss_value)
        except psrt.errors.OutOfRangeError as e:
            # Sync mode: the other workers reached --train_steps and finished, and too few
            # are left to complete this worker's step (a backup worker's last step).
            logger.info("Worker %d: training ended by the other workers: %s",
                        args.task_index, e.message)
            step = sess.run(global_step)

        time_end = time.time()
        training_time = time_end - time_begin
        print("Worker %d: training elapsed time: %f s, %d local steps, %.1f global steps/sec"
              % (args.task_index, training_time, local_step,
                 (step - first_step) / training_time if training_time > 0 else 0.0))

        if is_chief:
            params = sess.run(variables)
            print("Test accuracy: %.4f" % accuracy(params, mnist.test.images,
                                                   mnist.test.labels))
    sv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

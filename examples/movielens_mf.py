"""Matrix factorization on MovieLens 100K with parameter servers, the TF1 way, on psrt.

The model predicts a rating as ``mu + b_u + b_i + <p_u, q_i>``: the training set's mean
rating, a bias per user and per movie, and the dot product of a user and a movie embedding.
The four tables are TF1 partitioned variables (``get_variable(..., partitioner=
fixed_size_partitioner(num_ps))``), so each ps task holds a slice of every table; a step
looks up the rows of its batch's ids with ``psrt.nn.embedding_lookup`` (ids fed through
placeholders, TF's default ``'mod'`` partition strategy) and pushes row-sparse Adagrad
updates (``IndexedSlices``) to the slices that own them: no step moves a whole table.

The loss of a batch is TF1's ``tf.reduce_sum(tf.square(prediction - rating))`` plus
``l2 * tf.nn.l2_loss`` of the looked-up embedding rows (L2 applied per occurrence, as a
regularizer on the lookups' output is in TF), with hand-written gradients given to psrt by
``psrt.custom_gradient`` (TF's ``tf.custom_gradient``). The same model trained by
:func:`train_numpy` in one process (numpy gather, duplicate-id sum, Adagrad) is the
reference of ``tests/test_recsys_examples.py`` and ``benchmarks/test_bench_embedding.py``.

Data: the 100,000 ratings, split 90/10 into train and test with
``numpy.random.default_rng(seed).permutation`` (the first 10 % of the permutation is the
test set). ``--data_dir`` is a directory holding GroupLens' ``u.data`` (tab-separated
``user item rating timestamp``, from https://files.grouplens.org/datasets/movielens/
ml-100k.zip) or ``ratings.csv.gz``/``ratings.csv`` (``user_id,movie_id,rating,timestamp``
with a header); without it the example looks in ``$PSRT_DATA_DIR/movielens100k`` and in
``../shared/data/movielens100k`` beside the repository.

Run a local cluster (2 ps + 2 workers on free ports); the chief prints ``Test RMSE: 0.90..``::

    psrt-launch --ps 2 --workers 2 examples/movielens_mf.py

or one process per task, as in TF1::

    python movielens_mf.py --ps_hosts=h0:2222,h1:2222 --worker_hosts=h2:2222,h3:2222 \\
        --job_name=ps --task_index=0
"""

from __future__ import annotations

import argparse
import gzip
import logging
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

import psrt

logger = logging.getLogger("movielens_mf")

NUM_USERS = 943     # ids 1..943; row 0 is unused, as in TF's examples that index by id
NUM_ITEMS = 1682    # ids 1..1682
DOWNLOAD_URL = "https://files.grouplens.org/datasets/movielens/ml-100k.zip"


# ---- data ------------------------------------------------------------------------------------

def _default_data_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("PSRT_DATA_DIR"):
        dirs.append(Path(os.environ["PSRT_DATA_DIR"]) / "movielens100k")
    dirs.append(Path(__file__).resolve().parents[2] / "shared" / "data" / "movielens100k")
    return dirs


def load_ratings(data_dir: str | os.PathLike | None = None) -> np.ndarray:
    """Reads the MovieLens 100K ratings.

    Args:
        data_dir: A directory with ``u.data`` (GroupLens' file), ``ratings.csv.gz`` or
            ``ratings.csv``; None: the first of ``$PSRT_DATA_DIR/movielens100k`` and
            ``../shared/data/movielens100k`` (beside the repository) holding one.

    Returns:
        int64 array ``[100000, 3]``: user id (1..943), movie id (1..1682), rating (1..5).

    Raises:
        FileNotFoundError: no such file, naming every path looked at and where to get it.
        ValueError: a file whose ids or ratings are out of MovieLens 100K's ranges.
    """
    dirs = [Path(data_dir)] if data_dir is not None else _default_data_dirs()
    names = ("u.data", "ratings.csv.gz", "ratings.csv")
    for d in dirs:
        for name in names:
            path = d / name
            if not path.is_file():
                continue
            if name == "u.data":
                data = np.loadtxt(path, dtype=np.int64, delimiter="\t", usecols=(0, 1, 2))
            else:
                opener = gzip.open if name.endswith(".gz") else open
                with opener(path, "rt") as f:
                    data = np.loadtxt(f, dtype=np.int64, delimiter=",", skiprows=1,
                                      usecols=(0, 1, 2))
            data = data.reshape(-1, 3)
            bad = ((data[:, 0] < 1) | (data[:, 0] > NUM_USERS) | (data[:, 1] < 1) |
                   (data[:, 1] > NUM_ITEMS) | (data[:, 2] < 1) | (data[:, 2] > 5))
            if bad.any():
                row = data[np.flatnonzero(bad)[0]]
                raise ValueError(f"{path}: rating {row.tolist()} is outside MovieLens 100K's "
                                 f"users 1..{NUM_USERS}, movies 1..{NUM_ITEMS}, ratings 1..5")
            return data
    looked = ", ".join(str(d / n) for d in dirs for n in names)
    raise FileNotFoundError(
        f"MovieLens 100K ratings not found; looked for {looked}. Download {DOWNLOAD_URL}, "
        f"unzip it and pass --data_dir=<dir>/ml-100k (the directory holding u.data)")


def split(ratings: np.ndarray, seed: int = 0,
          test_fraction: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """The fixed train/test split: ``default_rng(seed).permutation``, the first
    ``int(n * test_fraction)`` rows of it are the test set.

    Returns:
        ``(train, test)``: int64 arrays ``[n_train, 3]`` and ``[n_test, 3]``.
    """
    perm = np.random.default_rng(seed).permutation(len(ratings))
    n_test = int(len(ratings) * test_fraction)
    return ratings[perm[n_test:]], ratings[perm[:n_test]]


# ---- the model: numpy forward and backward on the looked-up rows -------------------------------

def predict(user_rows, item_rows, user_bias, item_bias, mu):
    """Predicted ratings ``mu + b_u + b_i + <p_u, q_i>``.

    Args:
        user_rows, item_rows: float32 ``[batch, dim]``, the looked-up embedding rows.
        user_bias, item_bias: float32 ``[batch]``, the looked-up biases.
        mu: The global mean rating (float).

    Returns:
        float32 ``[batch]``.
    """
    return (np.float32(mu) + user_bias + item_bias +
            np.einsum("ij,ij->i", user_rows, item_rows)).astype(np.float32, copy=False)


def loss_and_row_grads(user_rows, item_rows, user_bias, item_bias, ratings, mu, l2):
    """The batch's loss and its gradient with respect to each looked-up input.

    ``loss = sum((pred - rating)^2) + l2 * (l2_loss(user_rows) + l2_loss(item_rows))``,
    with TF's ``l2_loss(t) = sum(t^2) / 2``.

    Returns:
        ``(loss, (d_user_rows, d_item_rows, d_user_bias, d_item_bias))``: a float and
        float32 arrays shaped as the inputs.
    """
    err = predict(user_rows, item_rows, user_bias, item_bias, mu) - ratings
    loss = float(np.dot(err, err)) + 0.5 * l2 * (float(np.vdot(user_rows, user_rows)) +
                                                  float(np.vdot(item_rows, item_rows)))
    g = (2.0 * err).astype(np.float32)
    l2 = np.float32(l2)
    d_user = g[:, None] * item_rows + l2 * user_rows
    d_item = g[:, None] * user_rows + l2 * item_rows
    return loss, (d_user, d_item, g, g)


def build_model(num_ps, dim, init_stddev, mu, l2, seed=0):
    """The variables, placeholders and loss of the model, under the caller's device scope.

    Returns:
        A dict: ``user_ids``, ``item_ids``, ``ratings`` (placeholders), ``tables`` (the four
        partitioned variables), ``loss`` (the batch loss tensor) and ``sse`` (the batch's
        summed squared error, for evaluation).
    """
    partitioner = psrt.fixed_size_partitioner(num_ps)
    emb_init = psrt.random_normal_initializer(stddev=init_stddev, seed=seed)
    user_emb = psrt.get_variable("user_embeddings", [NUM_USERS + 1, dim], psrt.float32,
                                 initializer=emb_init, partitioner=partitioner)
    item_emb = psrt.get_variable("item_embeddings", [NUM_ITEMS + 1, dim], psrt.float32,
                                 initializer=psrt.random_normal_initializer(
                                     stddev=init_stddev, seed=seed + 1),
                                 partitioner=partitioner)
    user_bias = psrt.get_variable("user_bias", [NUM_USERS + 1], psrt.float32,
                                  initializer=psrt.zeros_initializer(), partitioner=partitioner)
    item_bias = psrt.get_variable("item_bias", [NUM_ITEMS + 1], psrt.float32,
                                  initializer=psrt.zeros_initializer(), partitioner=partitioner)

    user_ids = psrt.placeholder(psrt.int64, [None], name="user_ids")
    item_ids = psrt.placeholder(psrt.int64, [None], name="item_ids")
    ratings = psrt.placeholder(psrt.float32, [None], name="ratings")

    p_u = psrt.nn.embedding_lookup(user_emb, user_ids)
    q_i = psrt.nn.embedding_lookup(item_emb, item_ids)
    b_u = psrt.nn.embedding_lookup(user_bias, user_ids)
    b_i = psrt.nn.embedding_lookup(item_bias, item_ids)

    @psrt.custom_gradient
    def mf_loss(u_rows, i_rows, u_bias, i_bias, r):
        loss, grads = loss_and_row_grads(u_rows, i_rows, u_bias, i_bias, r, mu, l2)

        def grad(dy):
            dy = np.float32(dy)
            return tuple(dy * g for g in grads) + (None,)
        return np.float32(loss), grad

    @psrt.function
    def sum_squared_error(u_rows, i_rows, u_bias, i_bias, r):
        err = predict(u_rows, i_rows, u_bias, i_bias, mu) - r
        return np.float64(np.dot(err, err))

    loss = mf_loss(p_u, q_i, b_u, b_i, ratings)
    sse = sum_squared_error(p_u, q_i, b_u, b_i, ratings)
    return {"user_ids": user_ids, "item_ids": item_ids, "ratings": ratings,
            "tables": [user_emb, item_emb, user_bias, item_bias], "loss": loss, "sse": sse}


# ---- the single-process numpy reference -------------------------------------------------------

def _unique_sum(ids, grads):
    """Distinct ids (sorted) and the sum of the gradient rows of each (argsort + reduceat:
    the fastest numpy way, ../shared/ANCHORS.md)."""
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_ids[1:] != sorted_ids[:-1])))
    return sorted_ids[starts], np.add.reduceat(grads[order], starts, axis=0)


def adagrad_rows(table, accum, ids, grads, lr):
    """TF1's sparse Adagrad on the rows ``ids`` of ``table`` in place: duplicate ids summed,
    then ``accum += g^2; table -= lr * g / sqrt(accum)``."""
    rows, g = _unique_sum(ids, grads)
    acc = accum[rows] + g * g
    accum[rows] = acc
    table[rows] -= np.float32(lr) * g / np.sqrt(acc)


def init_tables(dim, init_stddev, seed=0):
    """The four tables, initialized in one process as the psrt job's initializers do (any
    Gaussian draw: the reference needs the distribution, not the same numbers)."""
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((NUM_USERS + 1, dim)) * init_stddev).astype(np.float32),
            (rng.standard_normal((NUM_ITEMS + 1, dim)) * init_stddev).astype(np.float32),
            np.zeros(NUM_USERS + 1, np.float32), np.zeros(NUM_ITEMS + 1, np.float32)]


def train_numpy(train, steps, batch_size=1024, dim=32, learning_rate=0.1, l2=0.2,
                init_stddev=0.1, seed=0, initial_accumulator_value=0.1):
    """The same model trained in one process with numpy: gather, loss and row gradients,
    duplicate-id sum and Adagrad per table.

    Returns:
        ``(tables, seconds)``: the four trained tables and the training loop's wall time.
    """
    tables = init_tables(dim, init_stddev, seed)
    accums = [np.full_like(t, initial_accumulator_value) for t in tables]
    mu = float(train[:, 2].mean())
    rng = np.random.default_rng(seed + 1000)
    users, items = train[:, 0], train[:, 1]
    r = train[:, 2].astype(np.float32)
    t0 = time.perf_counter()
    for _ in range(steps):
        b = rng.integers(0, len(train), batch_size)
        uu, ii = users[b], items[b]
        _, grads = loss_and_row_grads(tables[0][uu], tables[1][ii], tables[2][uu],
                                      tables[3][ii], r[b], mu, l2)
        for table, accum, ids, g in zip(tables, accums, (uu, ii, uu, ii), grads):
            adagrad_rows(table, accum, ids, g, learning_rate)
    return tables, time.perf_counter() - t0


def rmse(tables, data, mu):
    """Root mean squared error of the tables' predictions on ``data`` (``[n, 3]``)."""
    u, i = data[:, 0], data[:, 1]
    err = predict(tables[0][u], tables[1][i], tables[2][u], tables[3][i], mu) - data[:, 2]
    return float(np.sqrt(np.mean(np.square(err, dtype=np.float64))))


# ---- the job -------------------------------------------------------------------------------

def parse_args(argv=None):
    """The classic TF1 cluster flags and the model's hyper-parameters."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ps_hosts", default=None,
                        help="Comma-separated list of hostname:port pairs")
    parser.add_argument("--worker_hosts", default=None,
                        help="Comma-separated list of hostname:port pairs")
    parser.add_argument("--job_name", default=None, choices=["ps", "worker"],
                        help="One of 'ps', 'worker' (default: from TF_CONFIG)")
    parser.add_argument("--task_index", type=int, default=None,
                        help="Index of task within the job (default: from TF_CONFIG)")
    parser.add_argument("--data_dir", default=None,
                        help="Directory holding u.data or ratings.csv.gz (default: "
                             "$PSRT_DATA_DIR/movielens100k, ../shared/data/movielens100k)")
    parser.add_argument("--train_epochs", type=float, default=10.0,
                        help="Passes over the training set, counted in global steps of "
                             "--batch_size ratings")
    parser.add_argument("--train_steps", type=int, default=None,
                        help="Global steps to train (overrides --train_epochs)")
    parser.add_argument("--batch_size", type=int, default=1024, help="Ratings per step")
    parser.add_argument("--embedding_dim", type=int, default=32, help="Embedding width")
    parser.add_argument("--learning_rate", type=float, default=0.1, help="Adagrad rate")
    parser.add_argument("--l2", type=float, default=0.2,
                        help="Weight of l2_loss of the looked-up embedding rows")
    parser.add_argument("--init_stddev", type=float, default=0.1,
                        help="Standard deviation of the embeddings' initial values")
    parser.add_argument("--seed", type=int, default=0,
                        help="Seed of the train/test split and the initial values (worker i "
                             "draws its batches with seed + 1000 + i)")
    args = parser.parse_args(argv)
    for name in ("batch_size", "embedding_dim"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.train_steps is not None and args.train_steps < 1:
        parser.error(f"--train_steps must be >= 1, got {args.train_steps}")
    if args.train_epochs <= 0:
        parser.error(f"--train_epochs must be > 0, got {args.train_epochs}")
    for name in ("learning_rate", "init_stddev"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name} must be > 0, got {getattr(args, name)}")
    if args.l2 < 0:
        parser.error(f"--l2 must be >= 0, got {args.l2}")
    if args.job_name is None:
        role = psrt.train.task_role_from_tf_config()
        if not role.cluster:
            parser.error("no --job_name and no TF_CONFIG: pass --ps_hosts, --worker_hosts, "
                         "--job_name and --task_index, or start the job with psrt-launch")
        role = role.chief_as_first_worker()
        if role.job_name not in ("ps", "worker"):
            parser.error(f"TF_CONFIG: this example runs 'chief', 'ps' and 'worker' tasks; "
                         f"got task type {role.job_name!r}")
        args.cluster = role.cluster
        args.job_name, args.task_index = role.job_name, role.task_index
    else:
        if args.ps_hosts is None or args.worker_hosts is None or args.task_index is None:
            parser.error("--job_name needs --ps_hosts, --worker_hosts and --task_index")
        args.cluster = psrt.train.ClusterSpec({"ps": args.ps_hosts.split(","),
                                               "worker": args.worker_hosts.split(",")})
    return args


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(levelname)s:%(name)s:%(message)s")
    args = parse_args(argv)
    cluster = args.cluster
    server = psrt.train.Server(cluster, job_name=args.job_name, task_index=args.task_index)
    if args.job_name == "ps":
        server.join()
        return 0

    is_chief = args.task_index == 0
    train, test = split(load_ratings(args.data_dir), seed=args.seed)
    mu = float(train[:, 2].mean())
    steps = args.train_steps or math.ceil(args.train_epochs * len(train) / args.batch_size)
    logger.info("Worker %d: %d training and %d test ratings, mean %.4f; %d global steps",
                args.task_index, len(train), len(test), mu, steps)

    with psrt.device(psrt.train.replica_device_setter(
            worker_device="/job:worker/task:%d" % args.task_index, cluster=cluster)):
        global_step = psrt.train.get_or_create_global_step()
        model = build_model(cluster.num_tasks("ps"), args.embedding_dim, args.init_stddev,
                            mu, args.l2, seed=args.seed)
        train_op = psrt.train.AdagradOptimizer(args.learning_rate).minimize(
            model["loss"], global_step=global_step)

    test_feed = {model["user_ids"]: test[:, 0], model["item_ids"]: test[:, 1],
                 model["ratings"]: test[:, 2].astype(np.float32)}
    # The chief evaluates the test set when its session ends (lookups of the test ids only).
    final_sse = psrt.train.FinalOpsHook(model["sse"], test_feed)
    hooks = [psrt.train.StopAtStepHook(last_step=steps)]

    rng = np.random.default_rng(args.seed + 1000 + args.task_index)
    ratings = train[:, 2].astype(np.float32)
    with psrt.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief,
                                             hooks=hooks,
                                             chief_only_hooks=[final_sse]) as mon_sess:
        local_step = 0
        step = first_step = None
        time_begin = time_end = time.time()
        while not mon_sess.should_stop():
            b = rng.integers(0, len(train), args.batch_size)
            feed = {model["user_ids"]: train[b, 0], model["item_ids"]: train[b, 1],
                    model["ratings"]: ratings[b]}
            loss_value, step = mon_sess.run([train_op, global_step], feed_dict=feed)
            local_step += 1
            time_end = time.time()
            if first_step is None:  # time from the end of the first step: no start-up
                first_step, time_begin = step, time_end
            if local_step % 200 == 0:
                logger.info("Worker %d: local step %d (global step %d), loss per rating %.4f",
                            args.task_index, local_step, step,
                            float(loss_value) / args.batch_size)
    elapsed = time_end - time_begin
    global_steps = (step - first_step) if first_step is not None else 0
    print("Worker %d: training elapsed time: %f s, %d local steps, %.1f global steps/sec"
          % (args.task_index, elapsed, local_step, global_steps / elapsed if elapsed > 0 else 0.0))
    if is_chief:
        print("Test RMSE: %.4f" % math.sqrt(float(final_sse.final_ops_values) / len(test)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

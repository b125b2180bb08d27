"""The cluster and this pod's role in a Kubernetes JobSet (``jobset.x-k8s.io/v1alpha2``).

A JobSet (kubernetes-sigs/jobset, which Kubeflow Trainer v2 builds on) runs each of its
``replicatedJobs`` as ``replicas`` Indexed Jobs named ``<jobset>-<replicatedJob>-<jobIndex>``;
a Job's pods get the hostname ``<job name>-<completion index>`` and, with
``spec.network.enableDNSHostnames`` (JobSet's default), the subdomain of a headless Service
named ``spec.network.subdomain`` (default: the JobSet's name). So every pod of the set is
reachable, from the start and from any pod of the namespace, at::

    <jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>

:func:`task_role_from_jobset` computes a :class:`~psrt.distribute.tf_config.TaskRole` from
that scheme: one psrt job per replicated job (``ps``, ``worker``, optionally ``chief``),
task ``jobIndex * podsPerJob + podIndex``. JobSet puts its indices in labels and
annotations of the pod, which the pod reads through the downward API; the Job controller
sets ``JOB_COMPLETION_INDEX`` itself. The counts of the *other* replicated jobs are in no
pod's metadata, so the manifest states the layout once, in ``PSRT_JOBSET_REPLICATED_JOBS``
(deploy/kubernetes/jobset.yaml shows all of it).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from psrt.distribute.cluster_spec import ClusterSpec
from psrt.distribute.tf_config import _WORKER, TaskRole, _role_in

__all__ = [
    "JOBSET_ENV",
    "parse_replicated_jobs",
    "task_role_from_jobset",
]

# Environment variable -> the pod field a manifest sets it from (downward API), or the
# component that sets it.
JOBSET_ENV = {
    "JOBSET_NAME": "metadata.annotations['jobset.sigs.k8s.io/jobset-name']",
    "REPLICATED_JOB_NAME": "metadata.annotations['jobset.sigs.k8s.io/replicatedjob-name']",
    "JOB_INDEX": "metadata.annotations['jobset.sigs.k8s.io/job-index']",
    "JOB_COMPLETION_INDEX": "set by the Job controller in every pod of an Indexed Job",
    "REPLICATED_JOB_REPLICAS":
        "metadata.annotations['jobset.sigs.k8s.io/replicatedjob-replicas'] (optional check)",
}
"""The variables :func:`task_role_from_jobset` reads and where a JobSet pod gets each."""

REPLICATED_JOBS_ENV = "PSRT_JOBSET_REPLICATED_JOBS"
PORT_ENV = "PSRT_JOBSET_PORT"
SUBDOMAIN_ENV = "PSRT_JOBSET_SUBDOMAIN"
DEFAULT_PORT = 2222

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_COUNT = re.compile(r"([1-9][0-9]*)(?:x([1-9][0-9]*))?\Z")
_FORMAT = "'NAME=REPLICAS' or 'NAME=REPLICASxPODS', comma-separated (e.g. 'ps=2,worker=3')"


def parse_replicated_jobs(
        replicated_jobs: str | Mapping[str, int | tuple[int, int]],
) -> dict[str, tuple[int, int]]:
    """The replicated jobs of a JobSet as ``{name: (replicas, pods per Job)}``.

    Args:
        replicated_jobs: ``"ps=2,worker=3"`` (two Jobs of one pod each for ``ps``, three
            for ``worker``) or ``"ps=1x2"`` (one Job of two pods: ``parallelism`` and
            ``completions`` 2), in the order the cluster lists its jobs; or a mapping of the
            same, each value ``replicas`` (int) or ``(replicas, pods)``.

    Returns:
        A dict, in the given order, of name to ``(replicas, pods)``, both >= 1.

    Raises:
        ValueError: a name that is no DNS label (JobSet's rule for replicated job names), a
            name given twice, or a count that is not a whole number >= 1; the message quotes
            the text and the expected format.
    """
    items: list[tuple[str, object]]
    if isinstance(replicated_jobs, str):
        items = []
        for part in replicated_jobs.split(","):
            name, sep, count = part.strip().partition("=")
            if not sep:
                raise ValueError(f"replicated jobs {replicated_jobs!r}: item {part!r} has no "
                                 f"'='; expected {_FORMAT}")
            items.append((name.strip(), count.strip()))
    elif isinstance(replicated_jobs, Mapping):
        items = list(replicated_jobs.items())
    else:
        raise TypeError(f"replicated_jobs must be a str or a mapping; got "
                        f"{type(replicated_jobs).__name__} {replicated_jobs!r}")
    out: dict[str, tuple[int, int]] = {}
    for name, count in items:
        if not isinstance(name, str) or not _DNS_LABEL.match(name):
            raise ValueError(f"replicated job name {name!r} is not a DNS label (lower-case "
                             f"letters, digits and '-'); expected {_FORMAT}")
        if name in out:
            raise ValueError(f"replicated job {name!r} is given twice in {replicated_jobs!r}")
        out[name] = _parse_count(name, count)
    if not out:
        raise ValueError(f"no replicated jobs in {replicated_jobs!r}; expected {_FORMAT}")
    return out


def _parse_count(name: str, count: object) -> tuple[int, int]:
    if isinstance(count, str):
        m = _COUNT.match(count)
        if m is None:
            raise ValueError(f"replicated job {name!r}: count {count!r} is not REPLICAS or "
                             f"REPLICASxPODS with whole numbers >= 1; expected {_FORMAT}")
        return int(m.group(1)), int(m.group(2) or 1)
    pair = count if isinstance(count, tuple) else (count, 1)
    if (len(pair) != 2 or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1
                                  for n in pair)):
        raise ValueError(f"replicated job {name!r}: count {count!r} must be replicas (int "
                         f">= 1) or (replicas, pods), both ints >= 1")
    return int(pair[0]), int(pair[1])


def _index(environ: Mapping[str, str], var: str, hostname: str | None, position: int) -> int:
    """A pod index from ``var``, else from its place in the pod's hostname."""
    text = environ.get(var)
    if text is None and hostname is not None:
        parts = hostname.rsplit("-", 2)
        text = parts[position] if len(parts) == 3 else None
    if text is None:
        raise ValueError(f"{var} is not set: give the container env {var} from "
                         f"{JOBSET_ENV[var]}")
    if not text.isdigit():
        raise ValueError(f"{var}={text!r} is not a whole number >= 0")
    return int(text)


def task_role_from_jobset(
        replicated_jobs: str | Mapping[str, int | tuple[int, int]] | None = None, *,
        port: int | None = None, subdomain: str | None = None,
        environ: Mapping[str, str] | None = None) -> TaskRole:
    """Returns this pod's :class:`TaskRole` in the JobSet it runs in.

    The JobSet counterpart of :func:`~psrt.distribute.tf_config.task_role_from_tf_config`
    (what Kubeflow's TFJob gives a pod in ``TF_CONFIG``, computed here from JobSet's own
    scheme). Each replicated job is a psrt job of ``replicas * pods`` tasks; task ``i`` of
    job ``name`` is pod ``i % pods`` of Job ``i // pods``, at
    ``<JOBSET_NAME>-<name>-<i // pods>-<i % pods>.<subdomain>:<port>``. This pod is task
    ``JOB_INDEX * pods + JOB_COMPLETION_INDEX`` of job ``REPLICATED_JOB_NAME``. The chief
    follows TF's rule: the ``chief`` task when a replicated job has that name, else worker 0.

    Without ``JOBSET_NAME`` in the environment (not a JobSet pod) this is local mode, as
    ``task_role_from_tf_config`` without ``TF_CONFIG``: worker 0, chief, empty cluster.

    Args:
        replicated_jobs: The JobSet's replicated jobs in cluster order, as
            :func:`parse_replicated_jobs` takes them (``"ps=2,worker=3"``,
            ``{"ps": 2, "worker": (1, 3)}``); default: ``$PSRT_JOBSET_REPLICATED_JOBS``.
            They must match the manifest's ``replicas`` and ``parallelism``.
        port: The port every task serves on (int, 1-65535); default
            ``$PSRT_JOBSET_PORT``, else 2222.
        subdomain: The headless Service of the set (``spec.network.subdomain``); default
            ``$PSRT_JOBSET_SUBDOMAIN``, else the JobSet's name, as JobSet's own default.
        environ: The environment to read; default ``os.environ``. Read: ``JOBSET_NAME``,
            ``REPLICATED_JOB_NAME``, ``JOB_INDEX``, ``JOB_COMPLETION_INDEX`` (see
            :data:`JOBSET_ENV`; where the two indices are unset they are read from the
            pod's ``HOSTNAME``, ``<jobset>-<name>-<jobIndex>-<podIndex>``), and
            ``REPLICATED_JOB_REPLICAS`` when set, as a check.

    Returns:
        A :class:`TaskRole` whose ``cluster`` names every pod of the set.

    Raises:
        ValueError: a variable is missing (naming the downward-API field to set it from) or
            not a number; this pod's replicated job is not among ``replicated_jobs`` (the
            message lists them); an index is past its count; ``REPLICATED_JOB_REPLICAS``
            disagrees with ``replicated_jobs``; a bad port or layout.

    Example::

        # in every pod of deploy/kubernetes/jobset.yaml (PSRT_JOBSET_REPLICATED_JOBS=ps=2,worker=2)
        role = psrt.train.task_role_from_jobset()
        role.cluster.task_address("ps", 1)       # 'psrt-mnist-ps-1-0.psrt-mnist:2222'
        server = psrt.train.Server(role.cluster, job_name=role.job_name,
                                   task_index=role.task_index)
    """
    env = os.environ if environ is None else environ
    jobset = env.get("JOBSET_NAME", "").strip()
    if not jobset:
        return TaskRole(job_name=_WORKER, task_index=0, is_chief=True, cluster=ClusterSpec({}))
    if replicated_jobs is None:
        replicated_jobs = env.get(REPLICATED_JOBS_ENV, "").strip()
        if not replicated_jobs:
            raise ValueError(
                f"JOBSET_NAME={jobset!r} is set but the JobSet's layout is not: set "
                f"{REPLICATED_JOBS_ENV} (e.g. 'ps=2,worker=2', matching the manifest's "
                f"replicatedJobs) or pass replicated_jobs=")
    layout = parse_replicated_jobs(replicated_jobs)
    if port is None:
        text = env.get(PORT_ENV, "").strip()
        if text and not text.isdigit():
            raise ValueError(f"{PORT_ENV}={text!r} is not a port number (1-65535)")
        port = int(text) if text else DEFAULT_PORT
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"port {port!r} is not a port number (1-65535)")
    if subdomain is None:
        subdomain = env.get(SUBDOMAIN_ENV, "").strip() or jobset

    name = env.get("REPLICATED_JOB_NAME", "").strip()
    if not name:
        raise ValueError(f"REPLICATED_JOB_NAME is not set: give the container env "
                         f"REPLICATED_JOB_NAME from {JOBSET_ENV['REPLICATED_JOB_NAME']}")
    if name not in layout:
        raise ValueError(f"this pod's replicated job {name!r} (REPLICATED_JOB_NAME) is not in "
                         f"the layout {replicated_jobs!r}; its replicated jobs are "
                         f"{list(layout)}")
    replicas, pods = layout[name]
    hostname = env.get("HOSTNAME")
    prefix = f"{jobset}-{name}-"
    ours = hostname is not None and hostname.startswith(prefix)
    job_index = _index(env, "JOB_INDEX", hostname if ours else None, 1)
    pod_index = _index(env, "JOB_COMPLETION_INDEX", hostname if ours else None, 2)
    if job_index >= replicas:
        raise ValueError(f"JOB_INDEX={job_index} is past the {replicas} replicas of replicated "
                         f"job {name!r} in {replicated_jobs!r}")
    if pod_index >= pods:
        raise ValueError(f"JOB_COMPLETION_INDEX={pod_index} is past the {pods} pods per Job of "
                         f"replicated job {name!r} in {replicated_jobs!r}")
    stated = env.get("REPLICATED_JOB_REPLICAS", "").strip()
    if stated and stated != str(replicas):
        raise ValueError(f"REPLICATED_JOB_REPLICAS={stated} (the manifest's replicas of "
                         f"{name!r}) but the layout {replicated_jobs!r} says {replicas}")
    cluster = ClusterSpec({
        job: [f"{jobset}-{job}-{i // p}-{i % p}.{subdomain}:{port}" for i in range(r * p)]
        for job, (r, p) in layout.items()})
    return _role_in(cluster, name, job_index * pods + pod_index)

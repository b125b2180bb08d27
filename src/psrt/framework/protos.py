"""TF1's option messages that scripts build and pass along: ``RunOptions`` and
``RunMetadata`` (taken by ``Session.run`` and ``MonitoredSession.run``), ``GPUOptions`` (for
``ConfigProto(gpu_options=...)``) and ``ServerDef``. psrt has no tracing and no GPUs, so
they carry their fields and change nothing; building a ``GPUOptions`` or ``ServerDef`` logs
that at DEBUG. Field names and defaults are those of TF's ``config.proto`` and
``tensorflow_server.proto``.
"""

from __future__ import annotations

import logging
from typing import Any

_logger = logging.getLogger("psrt")


class _Message:
    """Keyword fields with defaults, printable, compared by value (as a proto message)."""

    _FIELDS: dict[str, Any] = {}

    def __init__(self, **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - set(self._FIELDS))
        if unknown:
            raise ValueError(f"Protocol message {type(self).__name__} has no field(s) "
                             f"{', '.join(unknown)}; fields: {', '.join(self._FIELDS)}")
        for k, default in self._FIELDS.items():
            setattr(self, k, kwargs.get(k, default))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    __hash__ = None  # type: ignore[assignment]  # mutable, as a proto message

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items()
                           if v != self._FIELDS[k])
        return f"{type(self).__name__}({fields})"


class RunOptions(_Message):
    """``tf.RunOptions``: accepted by ``run(options=...)``; psrt does not trace, so
    ``trace_level`` changes nothing. ``timeout_in_ms`` is not applied either: use
    ``ConfigProto(operation_timeout_in_ms=...)``."""

    NO_TRACE, SOFTWARE_TRACE, HARDWARE_TRACE, FULL_TRACE = 0, 1, 2, 3
    _FIELDS = {"trace_level": 0, "timeout_in_ms": 0, "inter_op_thread_pool": 0,
               "output_partition_graphs": False, "debug_options": None,
               "report_tensor_allocations_upon_oom": False, "experimental": None}

    class TraceLevel:
        """TF's ``RunOptions.TraceLevel`` enum values."""

        NO_TRACE, SOFTWARE_TRACE, HARDWARE_TRACE, FULL_TRACE = 0, 1, 2, 3


class RunMetadata(_Message):
    """``tf.RunMetadata``: accepted by ``run(run_metadata=...)``; stays empty (psrt records
    no step stats or partition graphs)."""

    _FIELDS = {"step_stats": None, "cost_graph": None, "partition_graphs": (),
               "function_graphs": ()}


class GPUOptions(_Message):
    """``tf.GPUOptions``: accepted (e.g. in ``ConfigProto(gpu_options=...)``) and ignored:
    psrt computes on the CPU with numpy."""

    _FIELDS = {"per_process_gpu_memory_fraction": 0.0, "allow_growth": False,
               "allocator_type": "", "deferred_deletion_bytes": 0, "visible_device_list": "",
               "polling_active_delay_usecs": 0, "polling_inactive_delay_msecs": 0,
               "force_gpu_compatible": False, "experimental": None}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _logger.debug("GPUOptions%s ignored: psrt has no GPU devices", kwargs or "()")


class ServerDef(_Message):
    """``tf.train.ServerDef``: accepted and ignored. Start a server from its fields with
    ``psrt.train.Server(sd.cluster, job_name=sd.job_name, task_index=sd.task_index)``."""

    _FIELDS = {"cluster": None, "job_name": "", "task_index": 0,
               "default_session_config": None, "protocol": "", "port": 0,
               "cluster_device_filters": None}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _logger.debug("ServerDef(job_name=%r, task_index=%r) ignored: pass its cluster, job "
                      "and task to psrt.train.Server", self.job_name, self.task_index)

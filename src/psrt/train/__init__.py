"""The ``tf.train`` namespace: re-exports only (docs/architecture.md)."""

from psrt.framework import missing as _missing
from psrt.train import queue_runner
from psrt.checkpoint.checkpoint_management import (
    checkpoint_exists,
    get_checkpoint_state,
    latest_checkpoint,
    update_checkpoint_state,
)
from psrt.checkpoint.checkpoint_reader import list_variables, load_checkpoint, load_variable
from psrt.checkpoint.saver import Saver
from psrt.distribute.cluster_spec import ClusterSpec
from psrt.distribute.device_setter import (
    GreedyLoadBalancingStrategy,
    byte_size_load_fn,
    replica_device_setter,
)
from psrt.distribute.jobset import task_role_from_jobset
from psrt.distribute.slurm import SlurmClusterResolver, task_role_from_slurm
from psrt.distribute.tf_config import (
    TaskRole,
    cluster_spec_from_tf_config,
    task_role_from_tf_config,
)
from psrt.framework.example_protos import (
    BytesList,
    Example,
    Feature,
    FeatureList,
    FeatureLists,
    Features,
    FloatList,
    Int64List,
    SequenceExample,
)
from psrt.framework.server_protos import ClusterDef, JobDef, ServerDef
from psrt.runtime.server import Server
from psrt.training.adadelta import AdadeltaOptimizer
from psrt.training.adagrad import AdagradOptimizer
from psrt.training.adagrad_da import AdagradDAOptimizer
from psrt.training.adam import AdamOptimizer
from psrt.training.basic_session_run_hooks import (
    FeedFnHook,
    FinalOpsHook,
    GlobalStepWaiterHook,
    LoggingTensorHook,
    NanLossDuringTrainingError,
    NanTensorHook,
    SecondOrStepTimer,
    StepCounterHook,
    StopAtStepHook,
)
from psrt.training.coordinator import Coordinator
from psrt.training.ftrl import FtrlOptimizer
from psrt.training.gradient_descent import GradientDescentOptimizer
from psrt.training.input import (
    batch,
    batch_join,
    input_producer,
    limit_epochs,
    match_filenames_once,
    range_input_producer,
    shuffle_batch,
    shuffle_batch_join,
    slice_input_producer,
    string_input_producer,
)
from psrt.training.learning_rate_decay import (
    cosine_decay,
    exponential_decay,
    inverse_time_decay,
    natural_exp_decay,
    piecewise_constant,
    polynomial_decay,
)
from psrt.training.momentum import MomentumOptimizer
from psrt.training.monitored_session import (
    ChiefSessionCreator,
    MonitoredSession,
    MonitoredTrainingSession,
    Scaffold,
    SessionCreator,
    SingularMonitoredSession,
    WorkerSessionCreator,
)
from psrt.training.moving_averages import ExponentialMovingAverage
from psrt.training.optimizer import Optimizer
from psrt.training.proximal_adagrad import ProximalAdagradOptimizer
from psrt.training.proximal_gradient_descent import ProximalGradientDescentOptimizer
from psrt.training.queue_runner import (
    FIFOQueue,
    QueueRunner,
    add_queue_runner,
    start_queue_runners,
)
from psrt.training.rmsprop import RMSPropOptimizer
from psrt.training.saver_hooks import (
    CheckpointSaverHook,
    CheckpointSaverListener,
    SummarySaverHook,
)
from psrt.training.session_manager import SessionManager
from psrt.training.session_run_hook import (
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)
from psrt.training.supervisor import Supervisor
from psrt.training.sync_replicas_optimizer import SyncReplicasOptimizer
from psrt.training.training_util import (
    assert_global_step,
    create_global_step,
    get_global_step,
    get_or_create_global_step,
    global_step,
)

__getattr__ = _missing.module_getattr("psrt.train")  # TF1 names psrt lacks: what instead


__all__ = [
    "AdadeltaOptimizer",
    "AdagradDAOptimizer",
    "AdagradOptimizer",
    "AdamOptimizer",
    "BytesList",
    "CheckpointSaverHook",
    "CheckpointSaverListener",
    "ChiefSessionCreator",
    "ClusterDef",
    "ClusterSpec",
    "Coordinator",
    "Example",
    "ExponentialMovingAverage",
    "FIFOQueue",
    "Feature",
    "FeatureList",
    "FeatureLists",
    "Features",
    "FeedFnHook",
    "FinalOpsHook",
    "FloatList",
    "FtrlOptimizer",
    "GlobalStepWaiterHook",
    "GradientDescentOptimizer",
    "GreedyLoadBalancingStrategy",
    "Int64List",
    "JobDef",
    "LoggingTensorHook",
    "MomentumOptimizer",
    "MonitoredSession",
    "MonitoredTrainingSession",
    "NanLossDuringTrainingError",
    "NanTensorHook",
    "Optimizer",
    "ProximalAdagradOptimizer",
    "ProximalGradientDescentOptimizer",
    "QueueRunner",
    "RMSPropOptimizer",
    "Saver",
    "Scaffold",
    "SecondOrStepTimer",
    "SequenceExample",
    "Server",
    "ServerDef",
    "SessionCreator",
    "SessionManager",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunHook",
    "SessionRunValues",
    "SingularMonitoredSession",
    "SlurmClusterResolver",
    "StepCounterHook",
    "StopAtStepHook",
    "SummarySaverHook",
    "Supervisor",
    "SyncReplicasOptimizer",
    "TaskRole",
    "WorkerSessionCreator",
    "add_queue_runner",
    "assert_global_step",
    "batch",
    "batch_join",
    "byte_size_load_fn",
    "checkpoint_exists",
    "cluster_spec_from_tf_config",
    "cosine_decay",
    "create_global_step",
    "exponential_decay",
    "get_checkpoint_state",
    "get_global_step",
    "get_or_create_global_step",
    "global_step",
    "input_producer",
    "inverse_time_decay",
    "latest_checkpoint",
    "limit_epochs",
    "list_variables",
    "load_checkpoint",
    "load_variable",
    "match_filenames_once",
    "natural_exp_decay",
    "piecewise_constant",
    "polynomial_decay",
    "queue_runner",
    "range_input_producer",
    "replica_device_setter",
    "shuffle_batch",
    "shuffle_batch_join",
    "slice_input_producer",
    "start_queue_runners",
    "string_input_producer",
    "task_role_from_jobset",
    "task_role_from_slurm",
    "task_role_from_tf_config",
    "update_checkpoint_state",
]

"""The ``tf.train`` namespace: re-exports only."""

from psrt.distribute.cluster_spec import ClusterSpec
from psrt.distribute.slurm import SlurmClusterResolver, task_role_from_slurm
from psrt.distribute.tf_config import (
    TaskRole,
    cluster_spec_from_tf_config,
    task_role_from_tf_config,
)
from psrt.training.basic_session_run_hooks import (
    CheckpointSaverHook,
    CheckpointSaverListener,
    FeedFnHook,
    FinalOpsHook,
    GlobalStepWaiterHook,
    LoggingTensorHook,
    NanLossDuringTrainingError,
    NanTensorHook,
    SecondOrStepTimer,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    StepCounterHook,
    StopAtStepHook,
    SummarySaverHook,
)
from psrt.checkpoint.saver import Saver
from psrt.checkpoint.checkpoint_management import (
    checkpoint_exists,
    get_checkpoint_state,
    latest_checkpoint,
    update_checkpoint_state,
)
from psrt.checkpoint.checkpoint_reader import list_variables, load_checkpoint, load_variable
from psrt.training.monitored_session import (
    ChiefSessionCreator,
    MonitoredSession,
    MonitoredTrainingSession,
    Scaffold,
    SessionCreator,
    SessionManager,
    SingularMonitoredSession,
    Supervisor,
    WorkerSessionCreator,
)
from psrt.training.optimizer import (
    AdagradOptimizer,
    AdamOptimizer,
    GradientDescentOptimizer,
    MomentumOptimizer,
    Optimizer,
    SyncReplicasOptimizer,
)
from psrt.distribute.device_setter import (
    GreedyLoadBalancingStrategy,
    byte_size_load_fn,
    replica_device_setter,
)
from psrt.training.coordinator import Coordinator
from psrt.framework.protos import ServerDef
from psrt.training.queue_runner import FIFOQueue, QueueRunner, add_queue_runner, start_queue_runners
from psrt.runtime.server import Server
from psrt.ops.variables import (
    assert_global_step,
    create_global_step,
    get_global_step,
    get_or_create_global_step,
    global_step,
)

# -- TF1's other optimizers, learning-rate schedules, moving averages (issue 13 item 4, "opt")
from psrt.training.optimizer import (
    AdadeltaOptimizer,
    AdagradDAOptimizer,
    FtrlOptimizer,
    ProximalAdagradOptimizer,
    ProximalGradientDescentOptimizer,
    RMSPropOptimizer,
)
from psrt.training.learning_rate_decay import (
    cosine_decay,
    exponential_decay,
    inverse_time_decay,
    natural_exp_decay,
    piecewise_constant,
    polynomial_decay,
)
from psrt.training.moving_averages import ExponentialMovingAverage
# -- end "opt"

from psrt.framework import missing as _missing

__all__ = [n for n in dir() if not n.startswith("_")]

__getattr__ = _missing.module_getattr("psrt.train")  # TF1 names psrt lacks: what instead

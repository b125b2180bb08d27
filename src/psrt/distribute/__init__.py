"""psrt.distribute: the cluster a job runs on (ClusterSpec, TF_CONFIG, SLURM) and where
variables go (replica_device_setter).

Internal layer: import public names from the faces (``psrt``, ``psrt.train``, ...)."""

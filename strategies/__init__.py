"""tf.distribute strategies by name. The names live here (no TensorFlow import, so input can be
validated before TF starts); build one with `strategies.factory.get_strategy(name, ...)`.

`tpu` is a name like the others but not in COMPARED: it runs only where a TPU answers (this
toolkit's machines have none), so the comparison never plans it.
"""
STRATEGIES = ("one_device", "mirrored", "central_storage", "multi_worker_mirrored",
              "parameter_server", "model_parallel", "hybrid", "tpu")
# What experiments.compare may run against the single-device baseline.
COMPARED = ("mirrored", "central_storage", "multi_worker_mirrored", "parameter_server")
# One process feeding --num_replicas local replicas (GPUs, or the CPU split into logical devices).
LOCAL_REPLICAS = ("mirrored", "central_storage")
MULTI_WORKER = ("multi_worker_mirrored", "parameter_server", "hybrid")
# The model split into --num_stages pipeline stages on local devices (models/stages.py,
# experiments/gpipe.py): one process (model_parallel), or inside every MWMS worker (hybrid).
PIPELINED = ("model_parallel", "hybrid")
COLLECTIVES = ("auto", "ring")


def replicas_in_sync(name, num_replicas, num_workers):
    """Replicas that share one global batch, known before TensorFlow starts (for validation).

    PSS is asynchronous: each worker takes its own steps, so a step's batch is one worker's."""
    if name in LOCAL_REPLICAS:
        return num_replicas
    if name in ("multi_worker_mirrored", "hybrid"):
        return num_workers
    return 1


def all_reduce_workers(name):
    """True for the strategies whose workers all-reduce in lockstep under MWMS (a chief plus
    workers, collective checkpoints): multi_worker_mirrored, and hybrid, which is MWMS with a
    pipeline inside each worker."""
    return name in ("multi_worker_mirrored", "hybrid")

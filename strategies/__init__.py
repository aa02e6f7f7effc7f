"""tf.distribute strategies by name. The names live here (no TensorFlow import, so input can be
validated before TF starts); build one with `strategies.factory.get_strategy(name, ...)`.

`tpu` is a name like the others but not in COMPARED: it runs only where a TPU answers (this
toolkit's machines have none), so the comparison never plans it.
"""
STRATEGIES = ("one_device", "mirrored", "central_storage", "multi_worker_mirrored",
              "parameter_server", "tpu")
# What experiments.compare may run against the single-device baseline.
COMPARED = ("mirrored", "central_storage", "multi_worker_mirrored", "parameter_server")
# One process feeding --num_replicas local replicas (GPUs, or the CPU split into logical devices).
LOCAL_REPLICAS = ("mirrored", "central_storage")
MULTI_WORKER = ("multi_worker_mirrored", "parameter_server")
COLLECTIVES = ("auto", "ring")


def replicas_in_sync(name, num_replicas, num_workers):
    """Replicas that share one global batch, known before TensorFlow starts (for validation).

    PSS is asynchronous: each worker takes its own steps, so a step's batch is one worker's."""
    if name in LOCAL_REPLICAS:
        return num_replicas
    if name == "multi_worker_mirrored":
        return num_workers
    return 1

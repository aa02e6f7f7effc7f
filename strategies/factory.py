"""One factory for every strategy the toolkit compares, with explicit branches.

Call it before any other TensorFlow op: MultiWorkerMirroredStrategy must configure collectives at
program start (tensorflow#34568), and splitting the CPU into logical devices for MirroredStrategy
is only possible before the runtime initializes.

On a host without GPUs `mirrored` splits the CPU into logical devices: right for a laptop, wrong
for a cloud job that pays for GPUs. A job that asked for accelerators says so (`require_gpus`,
from `--require_gpus`, which experiments/jobspec.py puts on every GPU pool's command) and
`check_gpus` refuses to run without them instead of falling back.
"""
import tensorflow as tf

from strategies import COLLECTIVES, STRATEGIES


class MissingGPUs(RuntimeError):
    """The job asked for GPUs TensorFlow does not see (one line, for the user)."""


def check_gpus(required):
    """Raises MissingGPUs when `required` > 0 and TensorFlow sees fewer GPUs than that."""
    if required <= 0:
        return
    seen = len(tf.config.list_physical_devices("GPU"))
    if seen < required:
        raise MissingGPUs(
            f"--require_gpus={required}: the job asked for {required} GPU(s) but TensorFlow sees "
            f"{seen or 'none'}; refusing to train on the CPU (GPU image: docker build --build-arg "
            f"VARIANT=gpu; the machine needs GPUs and their driver)")


def _local_devices(num_replicas):
    """Device names for `num_replicas` local replicas: GPUs when there are enough of them,
    otherwise the CPU split into that many logical devices."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        if num_replicas > len(gpus):
            raise ValueError(f"--num_replicas={num_replicas} but only {len(gpus)} GPUs are visible")
        return [f"/gpu:{i}" for i in range(num_replicas)]
    cpu = tf.config.list_physical_devices("CPU")[0]
    if num_replicas > 1:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(num_replicas)])
    return [f"/cpu:{i}" for i in range(num_replicas)]


def _partitioner(ps_shards):
    if ps_shards <= 1:
        return None
    return tf.distribute.experimental.partitioners.FixedShardsPartitioner(num_shards=ps_shards)


def get_strategy(name, num_replicas=1, cluster_resolver=None, collective="auto", ps_shards=0):
    """Returns the tf.distribute.Strategy called `name`.

    num_replicas: local replicas for `mirrored` (GPUs, or logical CPU devices on a CPU host).
    cluster_resolver: for the multi-worker strategies; defaults to reading TF_CONFIG.
    collective: `auto` or `ring` all-reduce for multi_worker_mirrored.
    ps_shards: split each large variable across this many parameter servers (>1 to enable).
    """
    if name == "one_device":
        device = "/gpu:0" if tf.config.list_physical_devices("GPU") else "/cpu:0"
        return tf.distribute.OneDeviceStrategy(device)
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices=_local_devices(num_replicas))
    if name == "multi_worker_mirrored":
        if collective not in COLLECTIVES:
            raise ValueError(f"unknown collective {collective!r}; valid: {', '.join(COLLECTIVES)}")
        implementation = (tf.distribute.experimental.CommunicationImplementation.RING
                          if collective == "ring"
                          else tf.distribute.experimental.CommunicationImplementation.AUTO)
        return tf.distribute.MultiWorkerMirroredStrategy(
            cluster_resolver=cluster_resolver,
            communication_options=tf.distribute.experimental.CommunicationOptions(
                implementation=implementation))
    if name == "parameter_server":
        resolver = cluster_resolver or tf.distribute.cluster_resolver.TFConfigClusterResolver()
        return tf.distribute.ParameterServerStrategy(
            resolver, variable_partitioner=_partitioner(ps_shards))
    raise ValueError(f"unknown strategy {name!r}; valid strategies: {', '.join(STRATEGIES)}")


"""One factory for every strategy the toolkit compares, with explicit branches.

Call it before any other TensorFlow op: MultiWorkerMirroredStrategy must configure collectives at
program start (tensorflow#34568), and splitting the CPU into logical devices for MirroredStrategy
is only possible before the runtime initializes.

On a host without GPUs `mirrored` splits the CPU into logical devices: right for a laptop, wrong
for a cloud job that pays for GPUs. A job that asked for accelerators says so (`require_gpus`,
from `--require_gpus`, which experiments/cloud/jobspec.py puts on every GPU pool's command) and
`check_gpus` refuses to run without them instead of falling back.

`tpu` connects to a TPU through TPUClusterResolver: `tpu` names it (a Cloud TPU name, a
grpc://HOST:8470 address, or `local` on a TPU VM); empty lets the resolver look it up as TF
documents (KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS, TPU_NAME, then TPU_CONFIG). Connecting to an address
nobody answers blocks (grpc://127.0.0.1:1 does not return), so the whole
connection runs under a deadline and every failure becomes one TPUUnavailable line.
"""
import threading

import tensorflow as tf

from strategies import COLLECTIVES, CROSS_DEVICE_OPS, GPU_ONLY, STRATEGIES


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


def _needs_gpus(flag, value, instead):
    """MissingGPUs when `value` runs between GPUs only and TensorFlow sees none."""
    if value in GPU_ONLY and not tf.config.list_physical_devices("GPU"):
        raise MissingGPUs(f"--{flag}={value} sums the gradients between GPUs and TensorFlow "
                          f"sees none here; use --{flag}={instead} (or auto) on a CPU")


def _cross_device_ops(name):
    """mirrored's cross-device ops for --cross_device_ops (None: TF's choice)."""
    if name not in CROSS_DEVICE_OPS:
        raise ValueError(f"unknown cross_device_ops {name!r}; valid: "
                         f"{', '.join(CROSS_DEVICE_OPS)}")
    _needs_gpus("cross_device_ops", name, "reduce_to_one")
    return {"auto": None, "reduce_to_one": tf.distribute.ReductionToOneDevice(),
            "hierarchical_copy": tf.distribute.HierarchicalCopyAllReduce(),
            "nccl": tf.distribute.NcclAllReduce()}[name]


class TPUUnavailable(RuntimeError):
    """--strategy=tpu found no TPU that answers (one line, for the user)."""


def _tpu_resolver(tpu, timeout_s):
    """A TPUClusterResolver whose TPU system is initialized, or TPUUnavailable within
    `timeout_s` seconds. The connection runs in a daemon thread: a TPU address that accepts
    nothing, or a metadata server that never answers, leaves the thread blocked and the caller
    free to exit."""
    where = f"--tpu={tpu}" if tpu else "no --tpu, no TPU_NAME/TPU_CONFIG"
    done = {}

    def connect():
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or None)
            if tpu != "local":  # a TPU VM's own chips need no remote cluster
                tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
            done["resolver"] = resolver
        except Exception as e:  # noqa: BLE001 - ValueError, URLError, NotFoundError: no TPU
            done["error"] = e

    thread = threading.Thread(target=connect, name="tpu-connect", daemon=True)
    thread.start()
    thread.join(timeout_s)
    hint = ("give --tpu=NAME, --tpu=grpc://HOST:8470 or --tpu=local (a TPU VM), or set TPU_NAME; "
            "without a TPU use another --strategy")
    if thread.is_alive():
        raise TPUUnavailable(f"--strategy=tpu: no TPU answered within {timeout_s:g} s ({where}); "
                             f"{hint}")
    if "error" in done:
        e = done["error"]
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:200].rstrip(".")
        raise TPUUnavailable(f"--strategy=tpu: no TPU reachable ({where}): {reason}; {hint}")
    return done["resolver"]


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


def stage_devices(model_devices):
    """Names of the `model_devices` devices a model is spread over (pipeline stages x tensor
    shards): GPUs when there are enough, otherwise the CPU's logical devices (get_strategy split
    it). Partial names: inside an MWMS worker's replica they keep the worker's job and task."""
    gpus = tf.config.list_physical_devices("GPU")
    kind = "GPU" if len(gpus) >= model_devices else "CPU"
    return [f"/device:{kind}:{i}" for i in range(model_devices)]


def _split_for_stages(model_devices):
    """Before the runtime starts: `model_devices` devices for the model's stages and shards (the
    CPU split into logical devices on a host without that many GPUs)."""
    if len(tf.config.list_physical_devices("GPU")) < model_devices:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(model_devices)])


def _partitioner(ps_shards):
    if ps_shards <= 1:
        return None
    return tf.distribute.experimental.partitioners.FixedShardsPartitioner(num_shards=ps_shards)


def get_strategy(name, num_replicas=1, cluster_resolver=None, collective="auto", ps_shards=0,
                 tpu="", tpu_timeout_s=180.0, model_devices=1, bytes_per_pack=0,
                 cross_device_ops="auto"):
    """Returns the tf.distribute.Strategy called `name`.

    num_replicas: local replicas for `mirrored` and `central_storage` (GPUs, or logical CPU
    devices on a CPU host).
    cluster_resolver: for the multi-worker strategies; defaults to reading TF_CONFIG.
    collective: `auto`, `ring` or `nccl` (GPUs only) all-reduce for multi_worker_mirrored.
    cross_device_ops: mirrored's reduction: `auto` (TF's choice), `reduce_to_one`, or between
    GPUs `hierarchical_copy` or `nccl`. GPU-only choices raise MissingGPUs without GPUs.
    bytes_per_pack: multi_worker_mirrored's all-reduce in packs of about this many bytes, each
    started when its gradients are ready (TF reverses the list: the last layers' gradients,
    ready first, go first); 0: one pack.
    ps_shards: split each large variable across this many parameter servers (>1 to enable).
    tpu, tpu_timeout_s: for `tpu`, the TPU's name or address and how long connecting may take;
    raises TPUUnavailable when no TPU answers.
    """
    if name == "one_device":
        device = "/gpu:0" if tf.config.list_physical_devices("GPU") else "/cpu:0"
        return tf.distribute.OneDeviceStrategy(device)
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices=_local_devices(num_replicas),
                                              cross_device_ops=_cross_device_ops(
                                                  cross_device_ops))
    if name == "central_storage":
        # Variables on one device (TF's default: the CPU when there are several compute
        # devices), each step's compute on every local replica; gradients are reduced onto the
        # variables' device instead of all-reduced between the replicas.
        return tf.distribute.experimental.CentralStorageStrategy(
            compute_devices=_local_devices(num_replicas))
    if name == "model_parallel":
        # No tf.distribute strategy splits a model: one replica on the default strategy, whose
        # step places each stage on its own device (experiments/engine/gpipe.py).
        _split_for_stages(model_devices)
        return tf.distribute.get_strategy()
    if name in ("multi_worker_mirrored", "hybrid"):
        if name == "hybrid":  # MWMS whose replica (one per worker) runs the stage pipeline
            _split_for_stages(model_devices)
            if tf.config.list_physical_devices("GPU"):
                # MWMS makes every local GPU a replica; a hybrid worker's GPUs are its stages'.
                # MWMS counts the GPUs its resolver reports: one, the replica's (not run here).
                resolver = cluster_resolver or \
                    tf.distribute.cluster_resolver.TFConfigClusterResolver()
                cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
                    resolver.cluster_spec(), task_type=resolver.task_type,
                    task_id=resolver.task_id, rpc_layer=resolver.rpc_layer or "grpc",
                    num_accelerators={"GPU": 1})
        if collective not in COLLECTIVES:
            raise ValueError(f"unknown collective {collective!r}; valid: {', '.join(COLLECTIVES)}")
        _needs_gpus("collective", collective, "ring")
        implementation = {
            "ring": tf.distribute.experimental.CommunicationImplementation.RING,
            "nccl": tf.distribute.experimental.CommunicationImplementation.NCCL,
            "auto": tf.distribute.experimental.CommunicationImplementation.AUTO}[collective]
        return tf.distribute.MultiWorkerMirroredStrategy(
            cluster_resolver=cluster_resolver,
            communication_options=tf.distribute.experimental.CommunicationOptions(
                implementation=implementation, bytes_per_pack=bytes_per_pack))
    if name == "parameter_server":
        resolver = cluster_resolver or tf.distribute.cluster_resolver.TFConfigClusterResolver()
        return tf.distribute.ParameterServerStrategy(
            resolver, variable_partitioner=_partitioner(ps_shards))
    if name == "tpu":
        return tf.distribute.TPUStrategy(_tpu_resolver(tpu, tpu_timeout_s))
    raise ValueError(f"unknown strategy {name!r}; valid strategies: {', '.join(STRATEGIES)}")


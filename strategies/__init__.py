"""tf.distribute strategies by name. The names live here (no TensorFlow import, so input can be
validated before TF starts); build one with `strategies.factory.get_strategy(name, ...)`.

`tpu` is a name like the others but not in COMPARED: it runs only where a TPU answers (this
toolkit's machines have none), so the comparison never plans it.
"""
import dataclasses

@dataclasses.dataclass(frozen=True)
class Kind:
    """What the rest of the toolkit needs to know of a strategy, besides how to build it
    (strategies/factory.py): how the report names and colours it, and how it runs."""
    short: str  # tick labels ("MWMS")
    label: str  # legends ("MWMS (workers)")
    color: str  # matplotlib colour: the same strategy has the same colour in every plot
    compared: bool = False  # experiments.compare may run it against the single-device baseline
    local_replicas: bool = False  # one process feeding --num_replicas local replicas
    multi_worker: bool = False  # a cluster of processes (TF_CONFIG; local clusters launched)
    all_reduce: bool = False  # workers all-reduce in lockstep (MWMS: a chief plus workers)
    pipelined: bool = False  # the model split into --num_stages stages (experiments/engine/gpipe.py)
    # A coordinator (the chief) dispatches steps to workers that only serve, and parameter
    # servers hold the variables: a cluster of chief + workers + ps, asynchronous steps, one
    # dataset per worker made by the coordinator (experiments/engine/build.py).
    parameter_servers: bool = False
    # Variables on one device apart from the replicas': input goes through the distributed
    # dataset even for one replica, so each batch lands on its replica's compute device.
    central_variables: bool = False
    single_device: bool = False  # one replica on one device: what every speedup is against
    accelerator: str = ""  # the device it needs ("tpu": TPU cores, refused where none answers)


# The one registry: a new strategy is an entry here and a branch in factory.get_strategy; the
# engine, the launcher, the cloud specs and the report ask its Kind, never its name.
REGISTRY = {
    "one_device": Kind("1 device", "one device", "tab:gray", single_device=True),
    "mirrored": Kind("mirrored", "Mirrored (replicas)", "tab:green", compared=True,
                     local_replicas=True),
    "central_storage": Kind("central", "CentralStorage (replicas)", "tab:purple", compared=True,
                            local_replicas=True, central_variables=True),
    "multi_worker_mirrored": Kind("MWMS", "MWMS (workers)", "tab:blue", compared=True,
                                  multi_worker=True, all_reduce=True),
    "parameter_server": Kind("PSS", "PSS (workers)", "tab:orange", compared=True,
                             multi_worker=True, parameter_servers=True),
    "model_parallel": Kind("pipeline", "model parallel (stages)", "tab:red", pipelined=True),
    "hybrid": Kind("hybrid", "hybrid (MWMS x stages)", "tab:brown", multi_worker=True,
                   all_reduce=True, pipelined=True),
    "tpu": Kind("TPU", "TPUStrategy", "tab:olive", accelerator="tpu"),
}

# What kind() answers for a name that is no strategy (the comparison's plain-loop floor cell):
# one process, nothing distributed.
_PLAIN = Kind("", "", "tab:gray")


def kind(name):
    """The Kind of strategy `name`; a plain single process for any other name."""
    return REGISTRY.get(name, _PLAIN)


STRATEGIES = tuple(REGISTRY)
# The single-device baseline every comparison measures the others against.
BASELINE = next(n for n, k in REGISTRY.items() if k.single_device)
# What experiments.compare may run against the single-device baseline.
COMPARED = tuple(n for n, k in REGISTRY.items() if k.compared)
LOCAL_REPLICAS = tuple(n for n, k in REGISTRY.items() if k.local_replicas)
MULTI_WORKER = tuple(n for n, k in REGISTRY.items() if k.multi_worker)
PIPELINED = tuple(n for n, k in REGISTRY.items() if k.pipelined)
PARAMETER_SERVERS = tuple(n for n, k in REGISTRY.items() if k.parameter_servers)
# Workers that all-reduce in lockstep (MWMS, hybrid); one process's replicas mirrored across its
# devices (not central_storage, whose variables live apart from the replicas); and where
# --compression's exchanges run: replicas that all-reduce their gradients in a replica context.
ALL_REDUCE = tuple(n for n, k in REGISTRY.items() if k.all_reduce)
MIRRORED = tuple(n for n, k in REGISTRY.items() if k.local_replicas and not k.central_variables)
COMPRESSIBLE = tuple(n for n in REGISTRY if n in ALL_REDUCE or n in MIRRORED)
# How the replicas' gradients are summed: MWMS's collective implementation, and mirrored's
# cross-device ops. NCCL and the hierarchical copy run between GPUs only (refused on a CPU host
# in one line, strategies/factory.py); on a CPU, auto is ring for MWMS and reduce_to_one for
# mirrored.
COLLECTIVES = ("auto", "ring", "nccl")
CROSS_DEVICE_OPS = ("auto", "reduce_to_one", "hierarchical_copy", "nccl")
GPU_ONLY = ("nccl", "hierarchical_copy")


def replicas_in_sync(name, num_replicas, num_workers):
    """Replicas that share one global batch, known before TensorFlow starts (for validation).

    PSS is asynchronous: each worker takes its own steps, so a step's batch is one worker's."""
    if name in LOCAL_REPLICAS:
        return num_replicas
    if all_reduce_workers(name):
        return num_workers
    return 1


def all_reduce_workers(name):
    """True for the strategies whose workers all-reduce in lockstep under MWMS (a chief plus
    workers, collective checkpoints): multi_worker_mirrored, and hybrid, which is MWMS with a
    pipeline inside each worker."""
    return kind(name).all_reduce


def data_parallel_workers(name):
    """True for the strategies the cost model projects to other clusters: whole replicas per
    worker that all-reduce (MWMS) or share parameter servers (PSS); not pipelines (hybrid),
    local replicas or single devices."""
    k = kind(name)
    return k.multi_worker and not k.pipelined


def floor_comparable(name):
    """True for a single process whose step is the plain TF loop's at N=1 (one replica, or
    mirrored / MWMS with one): not PSS (a coordinator and a ps besides), not central variables,
    not pipelines."""
    k = kind(name)
    return (k.single_device or k.local_replicas or k.all_reduce) and not (
        k.central_variables or k.pipelined or k.parameter_servers)


def needs_cluster(name, num_workers):
    """True when `name` with `num_workers` workers runs as a cluster of processes: parameter
    servers always (a coordinator, workers, ps), all-reduce workers from two on (one MWMS
    worker runs like a single process)."""
    k = kind(name)
    return k.multi_worker and (k.parameter_servers or num_workers > 1)

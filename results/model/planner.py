"""The planner: every data-parallel configuration the toolkit can run on a cluster, predicted
through the one cost model (results/model/cost_model.py) from a workload profile, filtered by memory
per device and ranked (experiments/plan.py prints it; results/report/plan.py writes it; a
configuration as a run's settings and commands: experiments/config/planned_run.py).

    python -m experiments.plan --profile=docs/examples/profile_resnet50_v100.json \
        --cluster=docs/examples/cluster_8x8_v100_25g.json

Configurations: one device; MWMS on N devices; PSS on N workers with K parameter servers; each
with gradient accumulation A (A micro-batches per update: compute x A, one synchronization) and
the gradient sync dtype (float32, or bfloat16: half the bytes). N runs over powers of two up to
the cluster's devices (and all of them), laid out host by host (a host's devices first). MWMS
also under each gradient compression the profile measured (its `reducers`: int8, topk,
powersgd), marked as a change (lossy: check the accuracy), and with ZeRO-1 on hosts of one
device each (float32: 1/N of the optimizer state per device, the same updates; it wins a tie
with plain MWMS only when plain MWMS does not fit).
Models split over a host's devices: model_parallel over S = 2, 4, ... stages (where the
profile says what crosses a stage boundary, boundary_activation_bytes) with M micro-batches,
each stage's transformer blocks split over T devices (where the profile says what the split
all-reduces, tensor_reduced_bytes; S = 1 is tensor parallelism alone), S x T within a host; and
hybrid, one such split per host on 2, 4, ... hosts (equal stages: the profile has no per-layer
times; the split layers carry all of the compute). With more micro-batches than stages, each
pipeline under both schedules: GPipe and 1F1B take the same time, 1F1B holds fewer
micro-batches' activations (GPipe wins the tie: it ran faster on the ViT, docs/parallelism.md;
1F1B is chosen where only it fits).
"""
import dataclasses

from results.model import cost_model, specs
from strategies import BASELINE, MIRRORED, REGISTRY, kind

SYNC_DTYPES = ("float32", "bfloat16")
ACCUMULATION = (1, 2, 4)
PS_COUNTS = (1, 2, 4, 8)
MICROBATCHES = (1, 4, 8)


@dataclasses.dataclass(frozen=True)
class Config:
    strategy: str
    workers: int  # devices training (replicas)
    hosts: int
    devices_per_host: int
    num_ps: int = 0
    accumulation: int = 1
    sync_dtype: str = "float32"
    stages: int = 1  # pipelines: devices per pipeline (one host's)
    microbatches: int = 1
    compression: str = "none"  # --compression (all-reduce only; the profile's reducers)
    zero: int = 0  # --zero (MWMS only: the optimizer state sharded over its workers)
    tensor_parallel: int = 1  # pipelines: each stage's blocks split over this many devices
    schedule: str = "gpipe"  # pipelines: --pipeline_schedule

    @property
    def model_devices(self):
        """Devices one replica's model spans: stages x tensor shards (1 unless pipelined)."""
        return self.stages * self.tensor_parallel

    @property
    def replicas(self):
        """Replicas whose batches make one update: a PSS step is one worker's; an all-reduce
        step is every replica's together, a pipeline's replica its S x T devices."""
        if kind(self.strategy).parameter_servers:
            return 1
        return max(1, self.workers // self.model_devices)

    @property
    def name(self):
        strategy = tasks(self)[0]
        parts = [REGISTRY[strategy].short]
        if not kind(strategy).single_device:
            parts.append(f"N={self.workers}" + (f" ({self.hosts}x{self.devices_per_host})"
                                                if self.hosts > 1 and self.devices_per_host > 1
                                                else ""))
        if kind(self.strategy).parameter_servers:
            parts.append(f"ps={self.num_ps}")
        if kind(self.strategy).pipelined:
            parts.append(f"S={self.stages} M={self.microbatches}" +
                         (f" T={self.tensor_parallel}" if self.tensor_parallel > 1 else "") +
                         (" 1F1B" if self.schedule == "1f1b" else ""))
        if self.accumulation > 1:
            parts.append(f"accum={self.accumulation}")
        if self.sync_dtype != "float32":
            parts.append(self.sync_dtype)
        if self.compression != "none":
            parts.append(self.compression)
        if self.zero:
            parts.append(f"ZeRO-{self.zero}")
        return " ".join(parts)


@dataclasses.dataclass
class Planned:
    config: Config
    prediction: cost_model.Prediction
    global_batch: int  # examples per update
    dropped: str = ""  # why it cannot run ("" when it can)
    changes: str = ""  # what it trains differently from the profile ("" when nothing)


def accumulated(profile, k):
    """The profile of a step of k micro-batches of the profile's batch: compute x k, the same
    synchronization once; activations stay a micro-batch's (they run one after another)."""
    if k == 1:
        return profile
    return dataclasses.replace(profile, batch=profile.batch * k, compute_s=profile.compute_s * k)


def _layout(n, cluster):
    """(hosts, devices per host) of n devices, a host's devices first; None when n devices do
    not fill whole hosts (n > d and not a multiple of d)."""
    d = cluster.devices_per_host
    if n <= d:
        return 1, n
    return (n // d, d) if n % d == 0 else None


def device_counts(cluster):
    total, n, out = cluster.workers, 2, []
    while n < total:
        out.append(n)
        n *= 2
    return [*out, total] if total > 1 else []


def sync_dtypes(profile):
    """The sync dtypes the profile has bytes for: float32 and bfloat16 (cast from float32), and
    whatever it was measured in."""
    return [d for d in dict.fromkeys((*SYNC_DTYPES, *profile.gradient_bytes))
            if _has_bytes(profile, d)]


def configurations(profile, cluster):
    """Every Config this planner predicts on `cluster` (see the module doc)."""
    dtypes = sync_dtypes(profile)
    out = [Config(BASELINE, 1, 1, 1, accumulation=a) for a in ACCUMULATION]
    out += pipelines(profile, cluster, dtypes)
    for strategy in cost_model.STRATEGIES:
        for n in device_counts(cluster):
            if kind(strategy).parameter_servers:
                # A PSS worker is one device on a host of its own (TF's PSS worker trains one
                # replica; a platform's worker pool gives each replica its own machine).
                if n > cluster.hosts:
                    continue
                hosts, per_host = n, 1
                ps_counts = [k for k in PS_COUNTS if k <= n]  # more ps than workers idle
            elif _layout(n, cluster) is None:
                continue
            else:
                (hosts, per_host), ps_counts = _layout(n, cluster), [0]
            for a in ACCUMULATION:
                for dtype in dtypes:
                    out += [Config(strategy, n, hosts, per_host, k, a, dtype) for k in ps_counts]
                if not kind(strategy).parameter_servers:  # measured at the profile's dtype
                    out += [Config(strategy, n, hosts, per_host, 0, a, dtypes[0], compression=f)
                            for f in profile.reducers]
                # ZeRO's worker holds one replica (zero.py): hosts of one device each
                if strategy in cost_model.ZERO_STRATEGIES and "float32" in dtypes and \
                        per_host == 1:
                    out += [Config(strategy, n, hosts, per_host, 0, a, zero=1)]
    return out


def splits(profile, cluster):
    """(S stages, T shards) of a model split over one host's devices: S = 1, 2, 4, ... (2 and
    up where the profile says what crosses a boundary) x T = 1 or a divisor the profile's
    split layers allow, S x T >= 2 devices of a host."""
    shards = [1] + [t for t in profile.tensor_shards if profile.tensor_reduced_bytes]
    stages, s = [], 1
    while s <= cluster.devices_per_host:
        if s == 1 or profile.boundary_activation_bytes:
            stages.append(s)
        s *= 2
    return [(s, t) for s in stages for t in shards if 2 <= s * t <= cluster.devices_per_host]


def pipelines(profile, cluster, dtypes):
    """model_parallel over S stages x T shards of one host's devices (M micro-batches dividing
    the batch; M = 1 without a second stage), and hybrid: one such split on each of 2, 4, ...
    hosts."""
    out = []
    single, across = [n for n in cost_model.PIPELINES if not kind(n).all_reduce], \
        [n for n in cost_model.PIPELINES if kind(n).all_reduce]
    for s, t in splits(profile, cluster):
        for m in MICROBATCHES if s > 1 else (1,):
            if profile.batch % m:
                continue
            # 1F1B holds fewer micro-batches than GPipe only when there are more than stages
            for order in ("gpipe", "1f1b") if m > s else ("gpipe",):
                out += [Config(name, s * t, 1, s * t, stages=s, microbatches=m,
                               tensor_parallel=t, schedule=order) for name in single]
                for hosts in device_counts(dataclasses.replace(cluster, devices_per_host=1)):
                    out += [Config(name, hosts * s * t, hosts, s * t, sync_dtype=dtype,
                                   stages=s, microbatches=m, tensor_parallel=t, schedule=order)
                            for name in across for dtype in dtypes]
    return out


def _has_bytes(profile, dtype):
    try:
        profile.gradient(dtype)
        return True
    except specs.SpecError:
        return False


def predict(profile, cluster, config):
    """Planned: the cost model's prediction for `config` on its part of `cluster`."""
    # a configuration on fewer hosts than the cluster's leaves the straggler's host out
    part = dataclasses.replace(cluster, hosts=config.hosts,
                               devices_per_host=config.devices_per_host,
                               num_ps=max(1, config.num_ps), ps_local_aggregation=False,
                               straggler_s=cluster.straggler_s
                               if config.hosts >= cluster.hosts else 0.0)
    p = accumulated(profile, config.accumulation)
    if kind(config.strategy).single_device:
        compute = cost_model.one_process_compute(p, cluster)
        step, rate = compute, p.batch / compute
        if part.straggler_s:
            step, rate = cost_model.straggled(step, rate, 1, p.batch, config.strategy, part)
        memory = cost_model.memory_per_device(p, config.strategy)
        prediction = cost_model.Prediction(
            config.strategy, 1, step, compute, 0.0, 0.0, rate, compute / step,
            compute / step, 0.0, memory, cost_model.fits_memory(memory, cluster),
            "a straggler" if part.straggler_s else "", part.straggler_s)
    else:
        prediction = cost_model.predict(p, part, config.strategy, config.sync_dtype,
                                        stages=config.stages, microbatches=config.microbatches,
                                        compression=config.compression, zero=config.zero,
                                        tensor_parallel=config.tensor_parallel,
                                        schedule_name=config.schedule)
    dropped = "" if prediction.fits_memory else (
        f"needs {prediction.memory_per_device_bytes / 1e6:.0f} MB per device, over the "
        f"{cluster.memory_per_device_mb:g} MB cap")
    return Planned(config, prediction, p.batch * config.replicas, dropped,
                   _changes(config, sync_dtypes(profile)[0]))


def plan(profile, cluster):
    """[Planned], those that fit first, fastest first; then those dropped, with why.
    SpecError for a profile with gradient bytes in no sync dtype the cost model knows."""
    if not sync_dtypes(profile):
        raise specs.SpecError(f"profile {profile.model!r} has gradient bytes for "
                              f"{', '.join(profile.gradient_bytes)}: none of "
                              f"{', '.join(specs.SYNC_DTYPES)}")
    planned = [predict(profile, cluster, c) for c in configurations(profile, cluster)]
    fits = sorted((p for p in planned if not p.dropped),
                  key=lambda p: (-p.prediction.examples_per_sec, p.config.workers,
                                 p.config.accumulation, p.config.sync_dtype != "float32",
                                 p.config.num_ps, p.config.zero,
                                 # a tie: GPipe (see the module doc); 1F1B where only
                                 # it fits
                                 p.config.schedule != "gpipe"))
    return fits + [p for p in planned if p.dropped]


def tasks(config):
    """(strategy to run, workers, local replicas per worker, devices per worker) of `config`:
    all-reduce over hosts is one MWMS worker per host whose devices are its local replicas, on
    one host MirroredStrategy's replicas (the same ring); a PSS worker is one device on a host
    of its own; a pipeline's worker holds its S stages x T shards."""
    if kind(config.strategy).pipelined:
        return config.strategy, config.hosts, 1, config.model_devices
    if kind(config.strategy).parameter_servers or kind(config.strategy).single_device:
        return config.strategy, config.workers, 1, 1
    if config.hosts == 1:
        return MIRRORED[0], 1, config.workers, config.workers
    return config.strategy, config.hosts, config.devices_per_host, config.devices_per_host


def best(planned):
    """The fastest Planned that fits and trains what the profile trained (no accumulation, no
    16-bit rounding); None when none fits."""
    return next((p for p in planned if not p.dropped and not p.changes), None)


def machines(config, cluster):
    """Hosts a configuration occupies: its workers' hosts, and parameter servers on hosts of
    their own (ps_placement own_hosts) besides."""
    own = kind(config.strategy).parameter_servers and cluster.ps_placement == "own_hosts"
    return config.hosts + (config.num_ps if own else 0)


def _changes(config, profile_dtype):
    """What a configuration changes besides speed (the plan marks it; accuracy to check)."""
    out = []
    if config.accumulation > 1:
        out.append(f"{config.accumulation}x the examples per update")
    if config.sync_dtype != profile_dtype:
        out.append(f"gradients rounded to {config.sync_dtype}")
    if config.compression != "none":
        out.append(f"gradients compressed ({config.compression}, error feedback)")
    return "; ".join(out)

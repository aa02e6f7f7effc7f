"""The planner: every data-parallel configuration the toolkit can run on a cluster, predicted
through the one cost model (results/cost_model.py) from a workload profile, filtered by memory
per device and ranked (experiments/plan.py prints and writes it).

    python -m experiments.plan --profile=docs/examples/profile_resnet50_v100.json \
        --cluster=docs/examples/cluster_8x8_v100_25g.json

Configurations: one device; MWMS on N devices; PSS on N workers with K parameter servers; each
with gradient accumulation A (A micro-batches per update: compute x A, one synchronization) and
the gradient sync dtype (float32, or bfloat16: half the bytes). N runs over powers of two up to
the cluster's devices (and all of them), laid out host by host (a host's devices first).
Pipelines, where the profile says what crosses a stage boundary (boundary_activation_bytes):
model_parallel over S = 2, 4, ... devices of a host with M micro-batches, and hybrid, one such
pipeline per host on 2, 4, ... hosts (equal stages: the profile has no per-layer times).
"""
import dataclasses

from results import cost_model
from results.records import write_text_atomic
from results.tables import csv_text, markdown_table
from strategies import BASELINE, REGISTRY, kind

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
            parts.append(f"S={self.stages} M={self.microbatches}")
        if self.accumulation > 1:
            parts.append(f"accum={self.accumulation}")
        if self.sync_dtype != "float32":
            parts.append(self.sync_dtype)
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
    if profile.boundary_activation_bytes:
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
    return out


def pipelines(profile, cluster, dtypes):
    """model_parallel over S = 2, 4, ... devices of one host (M micro-batches dividing the
    batch), and hybrid: one such pipeline on each of 2, 4, ... hosts."""
    out = []
    s = 2
    single, across = [n for n in cost_model.PIPELINES if not kind(n).all_reduce], \
        [n for n in cost_model.PIPELINES if kind(n).all_reduce]
    while s <= cluster.devices_per_host:
        for m in MICROBATCHES:
            if profile.batch % m:
                continue
            out += [Config(name, s, 1, s, stages=s, microbatches=m) for name in single]
            for hosts in device_counts(dataclasses.replace(cluster, devices_per_host=1)):
                out += [Config(name, hosts * s, hosts, s, sync_dtype=dtype, stages=s,
                               microbatches=m) for name in across for dtype in dtypes]
        s *= 2
    return out


def _has_bytes(profile, dtype):
    try:
        profile.gradient(dtype)
        return True
    except cost_model.SpecError:
        return False


def predict(profile, cluster, config):
    """Planned: the cost model's prediction for `config` on its part of `cluster`."""
    part = dataclasses.replace(cluster, hosts=config.hosts,
                               devices_per_host=config.devices_per_host,
                               num_ps=max(1, config.num_ps), ps_local_aggregation=False)
    p = accumulated(profile, config.accumulation)
    if kind(config.strategy).single_device:
        step = p.compute_s / cluster.device_speedup
        memory = cost_model.memory_per_device(p, config.strategy)
        prediction = cost_model.Prediction(
            config.strategy, 1, step, step, 0.0, 0.0, p.batch / step, 1.0, 1.0, 0.0, memory,
            cost_model.fits_memory(memory, cluster))
    else:
        prediction = cost_model.predict(p, part, config.strategy, config.sync_dtype,
                                        stages=config.stages, microbatches=config.microbatches)
    dropped = "" if prediction.fits_memory else (
        f"needs {prediction.memory_per_device_bytes / 1e6:.0f} MB per device, over the "
        f"{cluster.memory_per_device_mb:g} MB cap")
    # A PSS step is one worker's batch; an all-reduce step is every replica's together (a
    # pipeline's replica is its S devices).
    replicas = 1 if kind(config.strategy).parameter_servers else \
        config.workers // config.stages
    return Planned(config, prediction, p.batch * replicas, dropped,
                   _changes(config, sync_dtypes(profile)[0]))


def plan(profile, cluster):
    """[Planned], those that fit first, fastest first; then those dropped, with why.
    SpecError for a profile with gradient bytes in no sync dtype the cost model knows."""
    if not sync_dtypes(profile):
        raise cost_model.SpecError(f"profile {profile.model!r} has gradient bytes for "
                                   f"{', '.join(profile.gradient_bytes)}: none of "
                                   f"{', '.join(cost_model.SYNC_DTYPES)}")
    planned = [predict(profile, cluster, c) for c in configurations(profile, cluster)]
    fits = sorted((p for p in planned if not p.dropped),
                  key=lambda p: (-p.prediction.examples_per_sec, p.config.workers,
                                 p.config.accumulation, p.config.sync_dtype != "float32",
                                 p.config.num_ps))
    return fits + [p for p in planned if p.dropped]


def tasks(config):
    """(strategy to run, workers, local replicas per worker, devices per worker) of `config`:
    all-reduce over hosts is one MWMS worker per host whose devices are its local replicas, on
    one host MirroredStrategy's replicas (the same ring); a PSS worker is one device on a host
    of its own; a pipeline's worker holds its S stages."""
    if kind(config.strategy).pipelined:
        return config.strategy, config.hosts, 1, config.stages
    if kind(config.strategy).parameter_servers or kind(config.strategy).single_device:
        return config.strategy, config.workers, 1, 1
    if config.hosts == 1:
        mirrored = next(n for n, k in REGISTRY.items() if k.local_replicas and
                        not k.central_variables)
        return mirrored, 1, config.workers, config.workers
    return config.strategy, config.hosts, config.devices_per_host, config.devices_per_host


def best(planned):
    """The fastest Planned that fits and trains what the profile trained (no accumulation, no
    16-bit rounding); None when none fits."""
    return next((p for p in planned if not p.dropped and not p.changes), None)


@dataclasses.dataclass(frozen=True)
class Workload:
    """What the printed commands train: the model (a toolkit model or MODULE:FUNCTION), its
    dataset ("": the run's default) and the profile's batch per replica per step."""
    model: str
    batch: int
    dataset: str = ""


# experiments.run's settings a configuration decides, and their values when it does not say
# (RunConfig's defaults): what --strategy=auto replaces, whatever the command line said.
TOPOLOGY = {"strategy": None, "num_replicas": 1, "num_workers": 1, "num_ps": 0}
TRAINING = {"num_stages": 1, "microbatches": 1, "accumulation_steps": 1,
            "gradient_sync_dtype": "float32"}


def settings(config):
    """{RunConfig field: value} of `config`: every key of TOPOLOGY and TRAINING (see `tasks`)."""
    strategy, workers, replicas, _ = tasks(config)
    k = kind(strategy)
    out = {**TOPOLOGY, **TRAINING, "strategy": strategy}
    if k.local_replicas:
        out["num_replicas"] = replicas
    if k.multi_worker:
        out["num_workers"] = workers
    if k.parameter_servers:
        out["num_ps"] = config.num_ps
    if k.pipelined:
        out.update(num_stages=config.stages, microbatches=config.microbatches)
    out.update(accumulation_steps=config.accumulation, gradient_sync_dtype=config.sync_dtype)
    return out


def _flags(values, keys):
    """--key=value for each key whose value is not the run's default."""
    defaults = {**TOPOLOGY, **TRAINING}
    return [f"--{key}={values[key]}" for key in keys if values[key] != defaults[key]]


def run_flags(config, workload):
    """The experiments.run flags of `config`: under the platform's TF_CONFIG on each task of a
    cluster (a local cluster when none is set)."""
    values = settings(config)
    return _flags(values, TOPOLOGY) + _workload_flags(workload) + _flags(values, TRAINING)


def _workload_flags(workload):
    flags = [f"--model={workload.model}"]
    if workload.dataset:
        flags.append(f"--dataset={workload.dataset}")
    return flags + [f"--batch_size_per_replica={workload.batch}"]


def machines(config, cluster):
    """Hosts a configuration occupies: its workers' hosts, and parameter servers on hosts of
    their own (ps_placement own_hosts) besides."""
    own = kind(config.strategy).parameter_servers and cluster.ps_placement == "own_hosts"
    return config.hosts + (config.num_ps if own else 0)


COLUMNS = ("rank", "configuration", "strategy", "workers", "hosts", "devices_per_host", "num_ps",
           "machines",
           "accumulation", "sync_dtype", "global_batch", "examples_per_sec", "step_time_s",
           "compute_s", "overhead_s", "communication_s", "communication_share", "efficiency",
           "memory_per_device_mb", "fits_memory", "dropped")


def rows(planned, cluster):
    out = []
    for i, p in enumerate(planned, 1):
        c, pr = p.config, p.prediction
        out.append(dict(
            rank=i if not p.dropped else "", configuration=c.name, strategy=tasks(c)[0],
            workers=c.workers, hosts=c.hosts, devices_per_host=c.devices_per_host,
            num_ps=c.num_ps, machines=machines(c, cluster), accumulation=c.accumulation,
            sync_dtype=c.sync_dtype,
            global_batch=p.global_batch, examples_per_sec=pr.examples_per_sec,
            step_time_s=pr.step_s, compute_s=pr.compute_s, overhead_s=pr.overhead_s,
            communication_s=pr.communication_s, communication_share=pr.communication_share,
            efficiency=pr.efficiency, memory_per_device_mb=pr.memory_per_device_bytes / 1e6,
            fits_memory=pr.fits_memory, dropped=p.dropped))
    return out


def _changes(config, profile_dtype):
    """What a configuration changes besides speed (the plan marks it; accuracy to check)."""
    out = []
    if config.accumulation > 1:
        out.append(f"{config.accumulation}x the examples per update")
    if config.sync_dtype != profile_dtype:
        out.append(f"gradients rounded to {config.sync_dtype}")
    return "; ".join(out)


def markdown(planned, profile, cluster, workload, dtype_note=""):
    """plan.md: the target, the ranked table, the dropped configurations and why, the best's
    commands."""
    fits = [p for p in planned if not p.dropped]
    dropped = [p for p in planned if p.dropped]
    cap = f", {cluster.memory_per_device_mb:g} MB per device" if cluster.memory_per_device_mb \
        else ", memory per device not limited"
    lines = ["# Plan", "",
             f"Target: {cluster.name + ': ' if cluster.name else ''}{cluster.hosts} host(s) x "
             f"{cluster.devices_per_host} device(s), {cluster.inter_host_gbps:g} Gbit/s between "
             f"hosts, {cluster.intra_host_gbps:g} Gbit/s within one, devices "
             f"{cluster.device_speedup:g}x the profile's{cap}.",
             f"Workload: {profile.model}, {profile.batch} examples per replica per step, compute "
             f"{profile.compute_s * 1e3:.2f} ms on {profile.device or 'its device'}, gradients "
             f"{profile.gradient(sync_dtypes(profile)[0]) / 1e6:.2f} MB "
             f"({sync_dtypes(profile)[0]}, {profile.gradient_kind})"
             + (f"; {dtype_note}" if dtype_note else "") + ".", "",
             f"{len(planned)} configurations predicted through results/cost_model.py; "
             f"{len(fits)} fit, {len(dropped)} dropped (memory). Ranked by predicted examples/s; "
             "machines counts the workers' hosts and parameter servers on hosts of their own; "
             "the last column says what a configuration changes besides speed (check its "
             "accuracy before you rely on it).", ""]
    table = []
    for i, p in enumerate(fits[:25], 1):
        pr = p.prediction
        table.append([str(i), p.config.name, str(machines(p.config, cluster)),
                      str(p.global_batch), f"{pr.examples_per_sec:.0f}",
                      f"{pr.step_s * 1e3:.2f}", f"{pr.communication_share * 100:.0f}%",
                      f"{pr.efficiency * 100:.0f}%",
                      f"{pr.memory_per_device_bytes / 1e6:.0f}", p.changes or "–"])
    lines.append(markdown_table(["rank", "configuration", "machines", "global batch",
                                 "examples/s", "step ms",
                                 "communication share", "efficiency", "memory / device MB",
                                 "changes"], table))
    if len(fits) > 25:
        lines += ["", f"({len(fits) - 25} more in plan.csv)"]
    best_per_n = {}
    for p in fits:
        best_per_n.setdefault(p.config.workers, p)
    lines += ["", "Best at each device count: " + "; ".join(
        f"{n}: {p.config.name} ({p.prediction.examples_per_sec:.0f} ex/s)"
        for n, p in sorted(best_per_n.items())) + "."]
    if dropped:
        lines += ["", "Dropped:", ""] + [f"- {p.config.name}: {p.dropped}" for p in dropped[:20]]
        if len(dropped) > 20:
            lines.append(f"- ... {len(dropped) - 20} more (plan.csv)")
    chosen = best(planned)
    if chosen is not None:
        rate = chosen.prediction.examples_per_sec
        faster = [p for p in fits if p.changes and p.prediction.examples_per_sec > rate]
        lines += ["", f"## Best: {chosen.config.name}", "",
                  "The fastest configuration that trains what the profile trained (its batch "
                  "per update, its gradient sync dtype)."
                  + (f" Faster if your optimization allows it: {faster[0].config.name} "
                     f"({faster[0].prediction.examples_per_sec / rate:.2f}x; "
                     f"{faster[0].changes})." if faster else ""), "",
                  "Each task of the cluster (under the platform's TF_CONFIG; without one, a "
                  "local cluster):", "", "```",
                  "python -m experiments.run " + " ".join(run_flags(chosen.config, workload)),
                  "```", "", "On Vertex AI (or `--format=tfjob` for Kubeflow); give your image, "
                  "accelerator (on CPU machines, drop the accelerator flags) and output bucket:",
                  "", "```", vertex_command(chosen.config, workload), "```"]
    lines += ["", "Assumptions: those of the cost model (docs/scaling_model.md): synchronization "
              "overlaps compute only by the profile's measured overlap, links are full duplex "
              "and uncontended but for the fan-in stated, every worker is equally fast, "
              "pipeline stages are equal."]
    if not profile.boundary_activation_bytes:
        lines.append("Not planned: pipelines (model_parallel, hybrid): the profile does not say "
                     "what crosses a stage boundary (boundary_activation_bytes).")
    return "\n".join(lines) + "\n"


def vertex_command(config, workload):
    """The experiments.vertex command of `config` (see `tasks` for what a task holds)."""
    values = settings(config)
    return ("python -m experiments.vertex " + " ".join(_flags(values, TOPOLOGY)) +
            f" --accelerator_type=YOUR_GPU --accelerator_count={tasks(config)[3]} "
            "--image_uri=IMAGE --base_output_dir=gs://BUCKET/plan -- " +
            " ".join(_workload_flags(workload) + _flags(values, TRAINING)))


def summary(planned, runners_up=3):
    """What a run chosen by the plan records (experiments.run --strategy=auto): the choice, the
    next configurations and their predictions."""
    def one(p):
        return {"configuration": p.config.name, "settings": settings(p.config),
                "devices_per_task": tasks(p.config)[3],
                "predicted_examples_per_sec": p.prediction.examples_per_sec,
                "predicted_step_s": p.prediction.step_s,
                "predicted_communication_share": p.prediction.communication_share,
                "changes": p.changes}
    chosen = best(planned)
    others = [p for p in planned if not p.dropped and not p.changes and p is not chosen]
    return {"chosen": one(chosen), "runners_up": [one(p) for p in others[:runners_up]],
            "configurations": len(planned),
            "dropped": sum(1 for p in planned if p.dropped)}


def plot(planned, cluster, path, top=20):
    """plan.png: predicted examples/s of the best configurations (colour: strategy), and memory
    per device against the cap."""
    from results.plots import plt, save  # matplotlib, only when drawing

    fits = [p for p in planned if not p.dropped][:top]
    shown = fits + [p for p in planned if p.dropped][:max(0, top - len(fits)) or 5]
    fig, (tput, mem) = plt.subplots(1, 2, figsize=(14, 0.32 * len(shown) + 1.8))
    labels = [p.config.name for p in shown]
    colors = [REGISTRY[p.config.strategy].color for p in shown]
    y = range(len(shown))
    tput.barh(y, [p.prediction.examples_per_sec if not p.dropped else 0 for p in shown],
              color=colors)
    tput.set_yticks(y, labels, fontsize=7)
    tput.invert_yaxis()
    tput.set_xlabel("predicted examples/s")
    tput.set_title("Predicted throughput (best first; dropped configurations: no bar)")
    for strategy in dict.fromkeys(p.config.strategy for p in shown):
        tput.bar(0, 0, color=REGISTRY[strategy].color, label=REGISTRY[strategy].label)
    tput.legend(fontsize=7, loc="lower right")
    mem.barh(y, [p.prediction.memory_per_device_bytes / 1e6 for p in shown],
             color=["tab:red" if p.dropped else "tab:gray" for p in shown],
             label="memory per device (red: over the cap)")
    if cluster.memory_per_device_mb:
        mem.axvline(cluster.memory_per_device_mb, color="black", linestyle="--",
                    label=f"cap {cluster.memory_per_device_mb:g} MB")
    mem.set_yticks(y, [""] * len(shown))
    mem.invert_yaxis()
    mem.set_xlabel("memory per device (MB)")
    mem.set_title("Memory per device against the cap")
    mem.legend(fontsize=7, loc="lower right")
    return save(fig, path)


def write(planned, profile, cluster, workload, out_dir, dtype_note=""):
    """plan.md, plan.csv and plan.png in out_dir (atomically); returns their paths."""
    import os

    os.makedirs(out_dir, exist_ok=True)
    path = lambda name: os.path.join(out_dir, name)  # noqa: E731
    return [write_text_atomic(path("plan.md"), markdown(planned, profile, cluster, workload,
                                                        dtype_note)),
            write_text_atomic(path("plan.csv"), csv_text(rows(planned, cluster), COLUMNS)),
            plot(planned, cluster, path("plan.png"))]

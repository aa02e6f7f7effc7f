"""The plan of a comparison: which cells run, in which order, with which flags, and which
recorded runs already count as done (resuming).

    plan(PRESETS["default"]) -> [(run_name, [module, flags...]), ...]
"""
import os

from experiments.comparison.presets import (ADAPTIVE_CLUSTER, ADAPTIVE_SCHEDULES,
                                            ADAPTIVE_STRAGGLERS, DEFAULT_ADAPTIVE_SCHEDULES,
                                            DEFAULT_ADAPTIVE_STRAGGLER, EXPERIMENT_NAMES,
                                            THIS_HOST_CLUSTER)
from results.records.cells import COLLECTIVES_CELL, is_collectives_run
from strategies import ALL_REDUCE, kind
from tf_config.cores import placement

# The reducers experiment's strategy: whole replicas per worker that all-reduce (MWMS)
REDUCERS_STRATEGY = next(n for n in ALL_REDUCE if not kind(n).pipelined)
PACKS = "packs:"  # a reducers form: the plain all-reduce in packs of BYTES (--bytes_per_pack)
ZERO = "zero:"  # a reducers form: ZeRO at STAGE (--zero)


def reducer_flag(form):
    """The experiments.run flag of a reducers form (packs:BYTES, zero:STAGE, a compression)."""
    for prefix, flag in ((PACKS, "bytes_per_pack"), (ZERO, "zero")):
        if form.startswith(prefix):
            return f"--{flag}={form[len(prefix):]}"
    return f"--compression={form}"


# A collectives cell's (the network experiment's calibration) training per worker and epoch,
# before its probe: a few steps (32 at the default 64 per replica), over --epochs.
COLLECTIVES_EXAMPLES = 2048
# The network experiment's all-reduce calibration runs at this multiple of its fastest shaped
# bandwidth: a rate none of its predicted runs has, where the transfer and the all-reduce's own
# cost on the loopback are still of comparable size for the models it was chosen for.
OVERLAP_CALIBRATION = 2


def strategy_flags(strategy, n, num_ps, threads, available=None):
    """Every strategy at N gets `threads` per worker (N workers = N x threads cores of work);
    with `available` cores known, the cell's cluster placed on them as every local cluster the
    toolkit starts is (tf_config.cores.placement): workers that fit get cores of their own."""
    strategy_kind = kind(strategy)
    if strategy_kind.local_replicas:  # one process feeding N replicas: the cores of N workers
        return [f"--strategy={strategy}", f"--num_replicas={n}", f"--threads={n * threads}"]
    where = placement(strategy, n, num_ps, threads, available or 0)
    pin = ["--pin_workers"] if where.pinned else []
    if not strategy_kind.parameter_servers:  # all-reduce workers (one worker runs in-process)
        return [f"--strategy={strategy}", f"--num_workers={n}", f"--threads={threads}",
                f"--threads_per_worker={threads}", *pin]
    return [f"--strategy={strategy}", f"--num_workers={n}", f"--num_ps={num_ps}",
            f"--threads_per_worker={threads}", *pin]


def _parallelism_cells(threads, batch, available=None):
    """One device, data parallel, model parallel (S=2, M=1 and 4) and hybrid at one global batch
    (2 x batch) on the same 2 x threads cores; stages balanced by measured time (the GPipe
    bubble formula assumes equal stages); workers pinned where they fit `available` cores, as
    every local cluster (strategy_flags). (name, flags, cores) each."""
    same = [f"--global_batch_size={2 * batch}"]
    pipe = ["--num_stages=2", "--stage_cost=time"]
    return [
        ("parallel-one_device", ["--strategy=one_device", f"--threads={2 * threads}", *same]),
        ("parallel-mwms-n2", [*strategy_flags("multi_worker_mirrored", 2, 0, threads, available),
                              *same]),
        ("parallel-model_parallel-s2-m1", ["--strategy=model_parallel", *pipe,
                                           "--microbatches=1", f"--threads={2 * threads}",
                                           *same]),
        ("parallel-model_parallel-s2-m4", ["--strategy=model_parallel", *pipe,
                                           "--microbatches=4", f"--threads={2 * threads}",
                                           *same]),
        ("parallel-hybrid-n2-s2-m4", ["--strategy=hybrid", "--num_workers=2", *pipe,
                                      "--microbatches=4", f"--threads={threads}",
                                      f"--threads_per_worker={threads}", *same]),
    ]


def _transformer_cells(threads, batch, available=None):
    """The parallelism table's cells for a transformer (results/report/parallelism.py), at one
    global batch (2 x batch) on the same 2 x threads cores: one device, data parallel (MWMS N=2), a
    pipeline (S=2, M=4, stages balanced by measured time) under GPipe and 1F1B, tensor parallel
    (T=2), data x tensor (hybrid N=2 x T=2) and the planner's choice for this machine as one host of
    2 devices (a profile measured here first, cached in the results directory)."""
    same = [f"--global_batch_size={2 * batch}"]
    pipe = ["--strategy=model_parallel", "--num_stages=2", "--stage_cost=time",
            "--microbatches=4", f"--threads={2 * threads}"]
    # the cells both experiments have are the same runs, under the same names (plan() keeps one)
    shared = {name: flags for name, flags in _parallelism_cells(threads, batch, available)}
    return [
        ("parallel-one_device", shared["parallel-one_device"]),
        ("parallel-mwms-n2", shared["parallel-mwms-n2"]),
        ("parallel-model_parallel-s2-m4", shared["parallel-model_parallel-s2-m4"]),
        ("parallel-model_parallel-s2-m4-1f1b", [*pipe, "--pipeline_schedule=1f1b", *same]),
        ("parallel-tensor-t2", ["--strategy=model_parallel", "--tensor_parallel=2",
                                f"--threads={2 * threads}", *same]),
        ("parallel-hybrid-n2-t2", ["--strategy=hybrid", "--num_workers=2", "--tensor_parallel=2",
                                   f"--threads={threads}", f"--threads_per_worker={threads}",
                                   *same]),
        ("parallel-auto", ["--strategy=auto", f"--plan_cluster={THIS_HOST_CLUSTER}", *same]),
    ]


def _adaptive_cells(threads, batch, schedules, straggler, available=None):
    """The seed's Table I: one device, data parallel (MWMS N=2; PSS N=2 with 1 ps, a worker's
    step the whole global batch), model parallel (S=2, M=4),
    hybrid (N=2 x S=2) and --adapt, at one global batch (2 x batch), in a steady and a changing
    scenario (schedules: their --emulate_bandwidth_schedule), and in a straggler one (the
    steady network, the last worker slowed by `straggler`, its --straggler_schedule). The
    single-process cells have no network to shape and no second host to slow: they run once
    and stand in all. MWMS and PSS pinned where they fit `available` cores, as --adapt's own
    segments are (tf_config.cores.placement)."""
    same = [f"--global_batch_size={2 * batch}"]
    pipe = ["--num_stages=2", "--stage_cost=time", "--microbatches=4"]
    out = [("adaptive-one_device", ["--strategy=one_device", f"--threads={2 * threads}", *same]),
           ("adaptive-model_parallel-s2-m4", ["--strategy=model_parallel", *pipe,
                                              f"--threads={2 * threads}", *same])]
    scenarios = [("steady", schedules[0], []), ("changing", schedules[1], []),
                 ("straggler", schedules[0], [f"--straggler_schedule={straggler}"])]
    for scenario, schedule, slow in scenarios:
        net = [f"--emulate_bandwidth_schedule={schedule}", *slow]
        out += [
            (f"adaptive-{scenario}-mwms-n2",
             [*strategy_flags("multi_worker_mirrored", 2, 0, threads, available), *same, *net]),
            (f"adaptive-{scenario}-pss-n2",
             [*strategy_flags("parameter_server", 2, 1, threads, available), *same, *net]),
            (f"adaptive-{scenario}-hybrid-n2-s2-m4",
             ["--strategy=hybrid", "--num_workers=2", *pipe, f"--threads={threads}",
              f"--threads_per_worker={threads}", *same, *net]),
            # the planner's choice from a profile measured here (cached in the results
            # directory), switching as the network says; its threads are the chosen
            # configuration's defaults (a worker a core, one device all of them)
            (f"adaptive-{scenario}-auto",
             ["--strategy=auto", "--adapt", f"--plan_cluster={ADAPTIVE_CLUSTER}", *same, *net])]
    return out


def _pinned(run_flags, cores, available):
    """--pin_cores for a cell that should use `cores` cores (0: all of them)."""
    return [*run_flags, f"--pin_cores={min(cores or available, available)}"]


RUN, FLOOR, SHARING = "experiments.run", "experiments.comparison.floor", \
    "experiments.comparison.sharing"
# The order a model's experiments run in (each one's cells: the _Cells method of its name)
_RUN_ORDER = ("scaling", "straggler", "network", "reducers", "parallelism", "transformers",
              "adaptive")
assert sorted(_RUN_ORDER) == sorted(EXPERIMENT_NAMES)


class _Cells:
    """The cells of one model under `config`, experiment by experiment: (name, module, flags,
    cores the cell should use: 0 = all). A cluster's cell is placed on the cores it gets
    (cores): all `available` ones, or under pin_cores N x threads (one PSS worker held there
    leaves its ps and chief no core, and is not called pinned)."""

    def __init__(self, config, model, available):
        self.config, self.model, self.available = config, model, available
        self.threads = config.threads_per_worker
        self.shaped_at = config.bandwidths_of(model)
        self.clusters = [s for s in config.strategies if not kind(s).local_replicas]

    def cores(self, n):
        return min(n * self.threads or self.available, self.available) \
            if self.config.pin_cores else self.available

    def workers(self, strategy, n):
        return strategy_flags(strategy, n, self.config.num_ps, self.threads, self.cores(n))

    def scaling(self):
        threads, config = self.threads, self.config
        cells = [("engine_floor", FLOOR, [f"--threads={threads}"], threads),
                 ("engine_floor_all", FLOOR, ["--threads=0"], 0)] if config.floors else []
        cells += [("baseline", RUN, ["--strategy=one_device", f"--threads={threads}"], threads),
                  ("hardware_reference", RUN, ["--strategy=one_device", "--threads=0"], 0)]
        for n in config.workers:
            if config.floors and n >= 2 and threads and self.clusters:
                # Before the N-worker clusters: N plain loops at once, the machine's limit for N
                # workers (the report's row; placed as N all-reduce workers are: loop k on
                # worker k's cores)
                loops = placement("multi_worker_mirrored", n, 0, threads, self.cores(n))
                pin = ["--pin_loops"] if loops.pinned else []
                cells.append(("engine_floor_shared", SHARING,
                              [f"--threads={threads}", f"--processes={n}", *pin], n * threads))
            cells += [(f"{s}-n{n}", RUN, self.workers(s, n), n * threads)
                      for s in config.strategies]
        return cells

    def straggler(self):
        n = self.config.straggler_workers
        return [(f"straggler-{s}-n{n}-d{d}", RUN, self.workers(s, n) + (
            [f"--straggler_task=worker:{n - 1}", f"--straggler_delay_ms={d}"] if d else []),
            n * self.threads) for s in self.clusters for d in self.config.straggler_delays]

    def network(self):
        # N=1 and the real loopback (b=0) give the model its t_comp and t_sync; the shaped N=2
        # runs are what it must predict (results/report/network.py).
        cells, threads, shaped_at = [], self.threads, self.shaped_at
        for s in self.clusters:
            cells.append((f"network-{s}-n1", RUN, self.workers(s, 1), threads))
            for b in shaped_at:
                shaped = [f"--emulate_bandwidth_gbps={b:g}"] if b else []
                cells.append((f"network-{s}-n2-b{b:g}", RUN, self.workers(s, 2) + shaped,
                              2 * threads))
            if kind(s).all_reduce and any(shaped_at):
                # How much of the all-reduce's own loopback cost hides behind the shaped
                # transfer: its probe under a bandwidth none of the predicted runs has
                # (results/report/network.py, hidden_share), a collectives cell.
                b = OVERLAP_CALIBRATION * max(shaped_at)
                cells.append((f"{COLLECTIVES_CELL}{s}-n2-b{b:g}", RUN,
                              [*self.workers(s, 2), f"--emulate_bandwidth_gbps={b:g}",
                               f"--train_examples={COLLECTIVES_EXAMPLES * 2}",
                               "--eval_examples=256"], 2 * threads))
        return cells

    def reducers(self):
        # MWMS N=2, plain and each reducer, on the real loopback (b=0: what the reducers table
        # predicts from) and under each shaped bandwidth
        return [(f"reducers-{form.replace(':', '')}-n2-b{b:g}", RUN,
                 self.workers(REDUCERS_STRATEGY, 2) +
                 ([f"--emulate_bandwidth_gbps={b:g}"] if b else []) + [reducer_flag(form)],
                 2 * self.threads)
                for b in self.shaped_at for form in ("none", *self.config.reducers)]

    def parallelism(self):
        return [(name, RUN, extra, 2 * self.threads) for name, extra in _parallelism_cells(
            self.threads, self.config.batch_size_per_replica, self.cores(2))]

    def transformers(self):
        return [(name, RUN, extra, 2 * self.threads) for name, extra in _transformer_cells(
            self.threads, self.config.batch_size_per_replica, self.cores(2))]

    def adaptive(self):
        return [(name, RUN, extra, 2 * self.threads) for name, extra in _adaptive_cells(
            self.threads, self.config.batch_size_per_replica,
            ADAPTIVE_SCHEDULES.get(self.model, DEFAULT_ADAPTIVE_SCHEDULES),
            ADAPTIVE_STRAGGLERS.get(self.model, DEFAULT_ADAPTIVE_STRAGGLER), self.cores(2))]


def plan(config, available_cores=None):
    """[(run_name, [module, flags...])] of Comparison `config` in execution order: every cell
    of its experiments for each model and size, at each K (config.accumulation_steps; K=1 keeps
    the names without a K, so older results directories resume; the plain-loop floors run at
    K=1 only) and repeat. Every worker (and the baseline) gets config.threads_per_worker
    threads; under config.pin_cores each cell is held to the cores its workers get.
    available_cores: the cores this machine gives (None: this process's)."""
    available = available_cores or len(os.sched_getaffinity(0))
    runs = []
    for model in config.models:
        of = _Cells(config, model, available)
        cells = []
        for experiment in _RUN_ORDER:  # whatever order the command line named them in
            if experiment in config.experiments:
                made = {cell[0] for cell in cells}  # cells two experiments share run once
                cells += [c for c in getattr(of, experiment)() if c[0] not in made]
        data = [f"--dataset={config.dataset_of(model)}"]
        for size in config.train_examples_of(model):
            for k in config.accumulation_steps:
                for repeat in range(config.repeats):
                    for cell, module, extra, cores in cells:
                        if k != 1 and (module in (FLOOR, SHARING) or cell.startswith(
                                (COLLECTIVES_CELL, "adaptive-"))):
                            # calibrations: K=1 only (no step in them); --adapt holds one
                            # global batch with K=1, and its table compares at it
                            continue
                        name = f"{cell}/{model}/{size}/" + (f"k{k}/" if k != 1 else "") + \
                            f"r{repeat}"
                        extra = _pinned(extra, cores, available) if config.pin_cores else extra
                        extra = [*extra, f"--accumulation_steps={k}"] if k != 1 else extra
                        runs.append((name, [module, f"--model={model}", f"--train_examples={size}",
                                            *data, *extra]))
    return runs


# Per-run cost beyond the epochs (start-up, tracing, evaluation, probe), as a share of the
# calibration run's own overhead: a local cluster starts several processes.
_CLUSTER_STARTUP_FACTOR = 1.5
SIZE_QUANTUM = 1024  # the default global batches (64 x N, N <= 2) x 8 steps per call


def calibrated_size(budget_s, runs, epochs, rate, overhead_s, largest):
    """Examples per epoch so that `runs` runs of `epochs` epochs fit in `budget_s`, each run
    costing `overhead_s` plus its epochs at `rate` examples/s (the plain loop at 1 thread: the
    slowest any cell computes). Rounded down to SIZE_QUANTUM, within [SIZE_QUANTUM, largest]."""
    per_epoch_s = (budget_s - runs * overhead_s * _CLUSTER_STARTUP_FACTOR) / (runs * epochs)
    size = int(per_epoch_s * rate) // SIZE_QUANTUM * SIZE_QUANTUM
    return max(SIZE_QUANTUM, min(largest, size))


def size_started(records, model):
    """The examples per epoch the comparison in `records` started with for `model` (the latest
    record's), or None."""
    sizes = [r["config"]["train_examples"] for r in records if r["model"] == model and
             not is_collectives_run(r)]  # their own token size
    return sizes[-1] if sizes else None


def same_run(record, name, run_flags):
    """A cell counts as done only if recorded under its name with every flag it would be run
    with (threads, pinning, epochs, batch, ...), not just the same name."""
    if record.get("run_name") != name:
        return False
    # The same TensorFlow settings too: a record from before they were set (or under another
    # TF_ENABLE_ONEDNN_OPTS) ran other CPU kernels, and its figures are not this run's.
    if (record.get("environment") or {}).get("onednn_opts", "unrecorded") != \
            os.environ.get("TF_ENABLE_ONEDNN_OPTS"):
        return False
    config = record.get("config") or {}
    wanted = {}
    for flag in run_flags:  # a flag given twice counts as absl reads it: the last one
        key, eq, value = flag[2:].partition("=")
        if not eq:  # a boolean flag: --pin_workers, --nocomm_probe
            key, value = (key[2:], False) if key.startswith("no") and key not in config else \
                (key, True)
        wanted[key] = value
    for key, value in wanted.items():
        recorded = config.get(key)
        if key == "emulate_bandwidth_gbps":  # a launch setting: the record's network says it
            recorded = (record.get("network") or {}).get("emulated_gbps")
        if key == "emulate_bandwidth_schedule":  # the network's, or --adapt's journal's
            recorded = (record.get("network") or {}).get("schedule") or \
                (record.get("adapt") or {}).get("schedule")
        if key == "straggler_schedule" and not recorded:  # --adapt's, if a last segment of
            # one process ran without it
            recorded = (record.get("adapt") or {}).get("straggler_schedule")
        if key == "strategy" and value == "auto" and config.get("plan"):
            recorded = "auto"  # the record names what the planner chose
        if isinstance(recorded, float):  # "--straggler_delay_ms=50" was recorded as 50.0
            recorded, value = recorded, float(value)
        if recorded is None or str(recorded) != str(value):
            return False
    return True

"""The workload profile of a comparison's setting, measured from its records: what one replica's
step computes and moves (specs.WorkloadProfile), the input of every prediction
(results/model/scaling_model.py, results/report/network.py, experiments.recommend and its --profile
files).

How each field is fitted (what it means: specs.py, `python -m results.model.specs`; written as
profile-<model>-<examples>-b<batch>-k<K>-<dtype>.json):
  compute_s    the median of the 1-thread baseline's step and the 1-thread all-reduce (MWMS) N=1
               steps minus their probe (a PSS N=1 worker shares its step with its ps and chief);
               without a baseline, the MWMS (else PSS) N=1 step minus its probe, and the notes
               say so
  overhead_s   per strategy: its N=1 step minus compute_s and its own probe; when that is
               negative, overhead 0 and
  overlap      the share of its probe the N=1 step hid (communication x (1 - overlap), hiding
               never more than the step's compute: cost_model.predict); an N=1 step no longer
               than the compute alone gives 1, an upper bound (the notes say so)
  sync_floor_s PSS: its N=1 runs' probe
  batch        the record's step batch (micro-batch x --accumulation_steps) over its replicas
  bytes        from the records' communication probe (the PSS pull in the variables' dtype),
               optimizer state from the optimizer's slots, activations from memory_per_device
  cpu_s_per_example, ps_cpu_s_per_step, ps_threads  from the N=1 runs' CPU figures (every task;
               the ps's where cores_by_task has them)
  sharing      from the sharing calibrations (experiments/comparison/sharing.py)
  reducers     from any setting's compressed runs of the same model, batch and dtype (reducers_of)
"""
import collections

from results.model import cost_model, specs
from results.records import metrics, step_stamps
from results.records.cells import SETTING_KEYS, reducer_of, setting_of
from strategies import BASELINE, kind


def step_time_of(record):
    return metrics.per_worker_step_time(
        metrics.steady_state(record["epochs"])["epoch_time_s"]["median"],
        record["steps_per_epoch"], record["strategy"], record["num_workers"])


def probe_of(record):
    return ((record.get("communication") or {}).get("probe_s") or {}).get("median")


def _stamped_sync_s(record):
    """The median over workers of the in-step timeline's `sync_s` (gradients ready to update
    done) in the epoch the report's timeline section shows; None without stamps."""
    per_worker = (step_stamps.epoch_breakdown(record) or {}).get("per_worker") or {}
    return metrics.median([w.get("sync_s") for w in per_worker.values()])


def step_batch_of(record):
    """Examples one replica trains per step: micro-batch x accumulation steps (a PSS worker's
    step is one replica's)."""
    return record["global_batch_size"] // max(1, record.get("num_replicas_in_sync") or 1)


def measured_cell(runs):
    """(per-worker step time, probe, examples/s) of one cell's runs, with the summary's own
    estimator (metrics.pooled_steady): the report states one "measured" per cell."""
    time_s, rate = metrics.pooled_steady(runs)
    first = runs[0]
    step = metrics.per_worker_step_time(time_s["median"], first["steps_per_epoch"],
                                        first["strategy"], first["num_workers"])
    return step, metrics.spread([probe_of(r) for r in runs])["median"], rate["median"]


def sync_dtype_of(setting):
    """The setting's --gradient_sync_dtype (records from before the flag: float32)."""
    return setting[SETTING_KEYS.index("gradient_sync_dtype")] or "float32"


def _compute_step(record):
    """A 1-worker run's step without the synchronization its probe measured (0 if unprobed)."""
    return max(0.0, step_time_of(record) - (probe_of(record) or 0.0))


# Which phase of the sharing calibration a local cluster's processes resemble. Both wait on
# another process every step: MWMS workers on each other (the all-reduce), a PSS worker on the ps
# (its pull and push). With every core busy, each such hand-off waits for a core as well; the
# lockstep phase measures that. (The free phase, independent loops, is the report's "machine's
# limit" row.)
SHARING_PHASE = "lockstep"


def slowdown_of(sharing, n=2):
    """(factor, phase, calibrations): how much slower this machine runs a 1-worker step when an
    N-worker cluster's processes share its cores, from the sharing calibrations of the setting
    with K = N processes (the median when repeated); None without one."""
    phase = SHARING_PHASE
    values = [(s.get("slowdown") or {}).get(phase) for s in sharing or []
              if s.get("processes") == n]
    values = [v for v in values if v]
    if not values:
        return None
    return metrics.spread(values)["median"], phase, len(values)


def busy_cores_of(sharing, n):
    """Cores that K = n processes handing off to each other every step keep busy on this machine:
    K x the lockstep phase's cores per process in the sharing calibrations with K = n (the
    median when repeated); None without one. A cluster's processes wait on each other (MWMS
    workers on the all-reduce, a PSS worker on its ps), and while one waits its core may find
    nothing to run, so the cluster keeps fewer cores busy than the machine has, even with more
    processes than cores."""
    values = [n * ((s.get("cores_per_process") or {}).get("lockstep") or 0)
              for s in sharing or [] if s.get("processes") == n]
    values = [v for v in values if v > 0]
    return metrics.spread(values)["median"] if values else None


def sharing_figures(sharing):
    """The profile's `sharing`: {"K": {"slowdown", "busy_cores"}} for each K calibrated."""
    out = {}
    for n in sorted({s.get("processes") for s in sharing or [] if s.get("processes")}):
        slowdown = slowdown_of(sharing, n)
        if slowdown:
            out[str(n)] = {"slowdown": slowdown[0], "busy_cores": busy_cores_of(sharing, n)}
    return out


def cores_of(records):
    """The cores the runs of `records` had (the fewest recorded: usable, else the machine's);
    0 where none says."""
    cores = [(r.get("environment") or {}).get("usable_cpus") or
             (r.get("environment") or {}).get("cpu_count") for r in records]
    return min([c for c in cores if c], default=0)


def cpu_per_example(records):
    """CPU seconds per example over all of a run's tasks (the median of `records`); None
    without CPU figures."""
    rates = [(r.get("cpu") or {}).get("examples_per_cpu_second") for r in records
             if (r.get("cpu") or {}).get("scope") == "all tasks"]
    rate = metrics.median([v for v in rates if v])
    return 1 / rate if rate else None


def ps_cpu_of(records):
    """(ps CPU seconds per worker step over all the runs' ps tasks, the threads each ps had):
    the median over the PSS runs whose record has each task's cores, of the thread count most
    of them ran with (the figure belongs to its threads); (0, 0) without one."""
    usable = collections.defaultdict(list)  # threads -> ps CPU per step of each run
    for r in records:
        cpu = r.get("cpu") or {}
        by_task = cpu.get("cores_by_task") or {}
        ps = sum(c for task, c in by_task.items() if task.startswith("ps:"))
        if not ps or cpu.get("scope") != "all tasks" or not cpu.get("wall_s"):
            continue
        examples_per_s = cpu["examples_per_cpu_second"] * cpu["seconds"] / cpu["wall_s"]
        usable[r.get("threads_per_task") or 0].append(ps / examples_per_s * step_batch_of(r))
    if not usable:
        return 0.0, 0
    # the most runs, and of as many, the fewest threads
    threads, per_step = max(usable.items(), key=lambda item: (len(item[1]), -item[0]))
    return metrics.median(per_step), threads


def profile_of(setting, baseline, own_n1, runs, sharing=None):
    """(WorkloadProfile, notes) of one setting. baseline: its 1-thread baseline records;
    own_n1: {strategy: its N=1 records}; runs: the setting's probed multi-worker records;
    sharing: the setting's sharing calibrations (engine floor records' `sharing`)."""
    notes = []
    # Every run that computes one replica's step on one core and waits for no peer: the
    # 1-thread baseline and the 1-thread all-reduce runs at N=1 (their probe taken out): one
    # run's step moves from run to run on a shared VM, and every prediction scales with this
    # figure (docs/benchmarks.md, "The one-core compute from every one-core run").
    one_core = [r for s, rs in own_n1.items() if s in cost_model.STRATEGIES and kind(s).all_reduce
                for r in rs if r.get("threads_per_task") == 1] if baseline else []
    compute = metrics.median([step_time_of(r) for r in baseline] +
                             [_compute_step(r) for r in one_core])
    if compute:
        notes.append("compute from the 1-thread baseline's step (one core, every strategy alike)"
                     if not one_core else
                     f"compute from the one-core steps of the 1-thread baseline and the "
                     f"all-reduce N=1 runs less their probe ({len(baseline) + len(one_core)} "
                     f"runs, the median; every strategy alike)")
    else:
        for strategy in cost_model.STRATEGIES:
            compute = metrics.median([_compute_step(r) for r in own_n1.get(strategy, [])])
            if compute:
                notes.append(f"compute from {strategy} N=1 minus its probe: no 1-thread baseline "
                             f"in this setting")
                break
    if not compute:
        return None, notes
    overhead, overlap, floor = {}, {}, {}
    for strategy, own in own_n1.items():
        value = metrics.median([step_time_of(r) - compute - (probe_of(r) or 0.0) for r in own])
        probe = metrics.median([probe_of(r) or 0.0 for r in own]) or 0.0
        if value is not None and value < 0 and probe:
            # Its step hid part of the synchronization the probe timed alone: the share hidden
            # is the overlap (PSS: the ps and chief serve on other cores while the worker
            # computes); the projections hide the same share.
            overlap[strategy] = min(1.0, -value / probe)
            notes.append(f"{strategy} N=1 stepped {-value * 1e3:.2f} ms faster than the 1-thread "
                         f"compute plus its probe: {overlap[strategy]:.0%} of its "
                         f"synchronization overlaps compute, overhead 0")
            if -value >= probe:
                # No longer than the compute alone: all of the probe looks hidden, as it would
                # also look if the worker computed faster than the one-core runs (more than its
                # core), which the step time cannot tell apart; the step's own stamps show
                # what it did not hide.
                exposed = metrics.median([_stamped_sync_s(r) for r in own])
                notes.append(f"{strategy} N=1 stepped {(-value - probe) * 1e3:.2f} ms faster "
                             f"than the 1-thread compute alone: a worker that computed faster "
                             f"than the one-core runs would look the same, so its overlap is an "
                             f"upper bound" +
                             (f"; its in-step timeline shows {exposed * 1e3:.2f} ms of the "
                              f"step after its gradients were ready (the probe: "
                              f"{probe * 1e3:.2f} ms)" if exposed is not None else ""))
        elif value is not None and value < 0:
            notes.append(f"{strategy} N=1 stepped {-value * 1e3:.2f} ms faster than the 1-thread "
                         f"compute (no probe to overlap): overhead 0")
        overhead[strategy] = max(0.0, value or 0.0)
        if kind(strategy).parameter_servers and probe:
            floor[strategy] = probe
    comm = next(r["communication"] for r in runs)
    kinds = comm.get("gradient_kinds") or {}
    dtype = sync_dtype_of(setting)
    size = specs.SYNC_DTYPES.get(dtype, 4)
    parameters = (comm.get("dense_gradient_bytes") or comm["gradient_bytes"]) * 4 // size
    pulls = [r["communication"].get("pull_bytes") for r in runs
             if r["communication"].get("pull_bytes")]
    optimizer = (runs[0].get("config") or {}).get("optimizer", "momentum")
    first = runs[0]
    # what a pipeline of this model would move per example and boundary (the records' two-stage
    # cut, experiments/engine/record.py): the planner plans pipelines only with it
    boundary = metrics.median([r.get("boundary_activation_bytes") for r in [
        *baseline, *runs, *(x for rs in own_n1.values() for x in rs)]])
    split = next((r["tensor_split"] for r in [*baseline, *runs] if r.get("tensor_split")), None)
    # the ps's own work, from the N=1 runs: one worker, so nothing waits in the ps's queue
    pss_n1 = [r for s, rs in own_n1.items() if kind(s).parameter_servers for r in rs]
    ps_cpu = ps_cpu_of(pss_n1)
    if pss_n1:
        notes.append(f"the PSS N=1 runs' ps used {ps_cpu[0] * 1e3:.2f} ms of CPU per worker "
                     f"step with {ps_cpu[1]} thread(s): PSS's bound from its parameter servers"
                     if ps_cpu[0] else
                     "the PSS N=1 records give no ps CPU (cores per task): PSS is not bounded "
                     "by its parameter servers' work")
    profile = specs.WorkloadProfile(
        model=setting[SETTING_KEYS.index("model")], batch=step_batch_of(first),
        compute_s=compute, gradient_bytes={dtype: comm["gradient_bytes"]},
        gradient_kind="sparse" if kinds.get("indexed_slices") else "dense",
        sparse_gradient_bytes=int(comm.get("sparse_gradient_bytes") or 0),
        sparse_tensors=int(kinds.get("indexed_slices") or 0),
        # variables are pulled in their own dtype; measured where a PSS run probed it
        pull_bytes=pulls[0] if pulls else parameters, parameter_bytes=parameters,
        optimizer_state_bytes=parameters * specs.OPTIMIZER_SLOTS.get(optimizer, 0),
        activation_bytes=_activations(runs, parameters, optimizer), overhead_s=overhead,
        tensors=max(1, sum(kinds.values())), overlap=overlap, sync_floor_s=floor,
        boundary_activation_bytes=int(boundary or 0),
        stage_weight_shares=next((r["stage_weight_shares"] for r in [*baseline, *runs]
                                  if r.get("stage_weight_shares")), {}),
        # what a tensor-parallel split of its blocks would all-reduce (models/tensor_parallel.py)
        tensor_reduced_bytes=(split or {}).get("reduced_bytes_per_example", 0),
        tensor_reductions=(split or {}).get("reductions", 0),
        tensor_shards=(split or {}).get("shards", []),
        cpu_s_per_example={strategy: cost for strategy, cost in (
            [(BASELINE, cpu_per_example(baseline))] +
            [(s, cpu_per_example(rs)) for s, rs in sorted(own_n1.items())]) if cost},
        sharing=sharing_figures(sharing),
        ps_cpu_s_per_step=ps_cpu[0], ps_threads=ps_cpu[1],
        device=f"{(first.get('environment') or {}).get('cpu_model') or 'this machine'}, "
              f"1 thread", source=", ".join(sorted({r["run_id"] for r in [
                  *baseline, *one_core, *runs]}))[:200])
    return profile, notes


def reducers_of(records):
    """{(model, batch per replica, sync dtype): {form: the profile's reducer entry}} from every
    compressed run (--compression: int8, topk, powersgd) of any setting: a reducer's payload,
    exchange, compute and state depend on the model's gradients and batch, not on how many
    examples or epochs a comparison ran. compress_s: the median over the runs."""
    found = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in records:
        c = r.get("compression") or {}
        if c.get("method") not in ("int8", "topk", "powersgd") or c.get("payload_bytes") is None \
                or (r.get("communication") or {}).get("sparse_gradient_bytes"):
            # bf16 is a sync dtype (the planner's own); records from before the payload was
            # recorded have none; with IndexedSlices the payload is the dense part only, and a
            # profile keeps no dense/sparse split to add the rows to
            continue
        setting = setting_of(r)
        key = (setting[SETTING_KEYS.index("model")],
               setting[SETTING_KEYS.index("batch_size_per_replica")], sync_dtype_of(setting))
        found[key][reducer_of(r)].append(c)
    return {key: {form: {"payload_bytes": cs[0]["payload_bytes"],
                         "exchange": cs[0]["exchange"],
                         "compress_s": metrics.median([c.get("compress_s") for c in cs]),
                         "state_bytes": cs[0].get("state_bytes_per_replica") or 0}
                  for form, cs in forms.items()}
            for key, forms in found.items()}


def reducer_key(setting):
    """reducers_of's key of a setting."""
    return (setting[SETTING_KEYS.index("model")],
            setting[SETTING_KEYS.index("batch_size_per_replica")], sync_dtype_of(setting))


def _activations(runs, parameters, optimizer):
    """A replica's activation bytes: its memory_per_device estimate (parameters, gradients,
    optimizer slots and activations) less the rest; 0 when the records have none."""
    for r in runs:
        device = (r.get("memory_per_device") or [None])[0]
        if isinstance(device, dict) and device.get("bytes"):
            rest = parameters * (2 + specs.OPTIMIZER_SLOTS.get(optimizer, 0))
            return max(0, int(device["bytes"] - rest))
    return 0

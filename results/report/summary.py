"""Records -> one summary row per configuration: a setting (results/records/cells.py: the requested
flags), a role, a strategy, its N and the threads per task. Repeats of exactly that pool into
one row's medians; anything else that differs (epochs, batch, optimizer, ...) is another row.

N is the number of workers for multi-worker strategies, local replicas for `mirrored` and
`central_storage`, 1 for a single device. Comparisons within a setting (docs/records.md,
"summary.csv columns"):
  T1      the baseline: `one_device` with 1 thread per task, one worker's share of this machine.
  T_ref   the fastest single process measured (any of engine floor, baseline, all-cores
          reference, one_device, mirrored and central_storage at any N, MWMS at N=1): the
          machine's ceiling without distribution. `reference_row` names it.
  floor   the plain TF loop (engine_floor) at the row's threads per task: what the toolkit's
          own engine costs, for the rows that do the same single-process work.
Times are compared per example (epoch time / examples trained per epoch): a rounded epoch on 8
replicas trains fewer examples than on one device, and its shorter epoch is not a speedup.
"""
import collections

from results.records import metrics
from strategies import floor_comparable
from results.records.cells import (BASELINE_RUN, ENGINE_FLOOR, REFERENCE_RUN, SETTING_KEYS,
                                   is_collectives_run, is_machine_limit, is_network_run,
                                   is_parallelism_run, is_reducer_run, is_straggler_run, label,
                                   role_of, setting_of, setting_of_row, single_process, sort_key,
                                   workers_of)

COLUMNS = (
    "role", "strategy", "n", *SETTING_KEYS, "threads_per_task", "pinned", "examples_per_epoch",
    "batch_per_replica_used", "global_batch_used", "runs", "epoch_time_s", "epoch_time_min_s",
    "epoch_time_max_s", "examples_per_sec", "speedup", "scaling_percent", "efficiency",
    "speedup_vs_reference", "reference_row", "vs_engine_floor", "final_eval_accuracy",
    "final_eval_loss", "accuracy_delta", "loss_delta", "time_to_target_s",
    "target_reached_runs", "step_time_s", "communication_fraction", "cores_used",
    "examples_per_cpu_second", "cpu_scope", "cores_by_task", "achieved_gflops",
    "share_of_peak",
)
_ROLE_ORDER = {ENGINE_FLOOR: 0, BASELINE_RUN: 1, REFERENCE_RUN: 2, "strategy": 3}


def seconds_per_example(row):
    """Steady epoch time per example trained: what speedups compare (None when unknown)."""
    if not row["epoch_time_s"] or not row["examples_per_epoch"]:
        return None
    return row["epoch_time_s"] / row["examples_per_epoch"]


def epoch_per_example(row, which):
    """The row's fastest ("min") or slowest ("max") steady epoch, per example trained."""
    time_s = row[f"epoch_time_{which}_s"]
    return time_s / row["examples_per_epoch"] if time_s and row["examples_per_epoch"] else None


def beyond_spread(faster, slower):
    """Whether `faster`'s slowest steady epoch still beats `slower`'s fastest, per example
    trained: a margin the epochs' own spread (over every repeat) cannot explain."""
    high, low = epoch_per_example(faster, "max"), epoch_per_example(slower, "min")
    return bool(high and low and high < low)


def tied(best, rows):
    """The rows other than `best` it does not beat beyond the epochs' spread: any of them could
    be the fastest."""
    return [r for r in rows if r is not best and not beyond_spread(best, r)]


def _cpu(runs):
    """Median cores used and examples per CPU second over the runs that measured them, and the
    scope(s) of the measurement (a partial one counts this process only)."""
    cpus = [r.get("cpu") or {} for r in runs]
    scopes = sorted({c["scope"] for c in cpus if c.get("scope")})
    by_task = [c["cores_by_task"] for c in cpus if c.get("cores_by_task")]
    tasks = sorted({t for b in by_task for t in b})
    return {"cores_used": metrics.median([c.get("cores_used") for c in cpus]),
            "examples_per_cpu_second": metrics.median([c.get("examples_per_cpu_second")
                                                       for c in cpus]),
            "cpu_scope": " / ".join(scopes) or None,
            # "chief:0=0.28 ps:0=0.26 worker:0=0.63": one CSV cell, medians over the runs
            "cores_by_task": " ".join(f"{t}={metrics.median([b.get(t) for b in by_task]):.2f}"
                                      for t in tasks) or None}


def _compute(runs):
    """Median achieved GFLOP/s and share of the measured matmul peak (the record's `compute`,
    experiments/measure/flops.py); None without it."""
    computes = [r.get("compute") or {} for r in runs]
    achieved = metrics.median([c.get("achieved_flops_per_sec") for c in computes])
    return {"achieved_gflops": achieved / 1e9 if achieved else None,
            "share_of_peak": metrics.median([c.get("share_of_peak") for c in computes])}


def pinned(runs):
    """'yes' when every run's workers (or the calibration's loops) had cores of their own
    (--pin_workers, --pin_loops), 'no' when none did, 'mixed' when the runs pooled differ (a
    results directory resumed across the change: its figures mix two placements)."""
    said = {bool((r.get("config") or {}).get("pin_workers") or
                 (r.get("config") or {}).get("pin_loops")) for r in runs}
    return "mixed" if len(said) > 1 else ("yes" if said == {True} else "no")


def _row(role, strategy, n, setting, threads, runs, target_accuracy):
    time_s, rate = metrics.pooled_steady(runs)
    examples = metrics.median([r["train_examples"] for r in runs])
    steps = metrics.median([r.get("steps_per_epoch") for r in runs]) or examples // metrics.median(
        [r["global_batch_size"] for r in runs])
    reached = [t for t in (metrics.time_to_accuracy(r["epochs"], target_accuracy)
                           for r in runs) if t is not None] if target_accuracy else []
    return {
        "role": role, "strategy": strategy, "n": n, **dict(zip(SETTING_KEYS, setting)),
        "threads_per_task": threads, "pinned": pinned(runs), "examples_per_epoch": examples,
        "batch_per_replica_used": metrics.median([r["batch_size_per_replica"] for r in runs]),
        "global_batch_used": metrics.median([r["global_batch_size"] for r in runs]),
        "runs": len(runs), "epoch_time_s": time_s["median"], "epoch_time_min_s": time_s["min"],
        "epoch_time_max_s": time_s["max"], "examples_per_sec": rate["median"],
        "final_eval_accuracy": metrics.median([r["final_eval_accuracy"] for r in runs]),
        "final_eval_loss": metrics.median([r["final_eval_loss"] for r in runs]),
        # over the runs that reached the target only: never read without target_reached_runs
        "time_to_target_s": metrics.median(reached),
        "target_reached_runs": len(reached) if target_accuracy else None,
        "step_time_s": metrics.per_worker_step_time(time_s["median"], max(1, steps or 0),
                                                    strategy, n),
        "communication_fraction": metrics.median([r.get("communication_fraction") for r in runs]),
        **_cpu(runs),
        # the record's `compute` (experiments/measure/flops.py): training FLOPs x examples/s
        **_compute(runs),
    }


def groups(rows):
    """Rows by setting (a tuple in SETTING_KEYS order), in sorted order: one table / plot panel
    per setting."""
    out = collections.defaultdict(list)
    for r in rows:
        out[setting_of_row(r)].append(r)
    return dict(sorted(out.items(), key=lambda item: sort_key(item[0])))


def reference_of(group):
    """The fastest single-process row of a setting's rows (None when there is none)."""
    candidates = [r for r in group if single_process(r["strategy"], r["n"])
                  and seconds_per_example(r)]
    return min(candidates, key=seconds_per_example, default=None)


def baseline_of(group):
    """The setting's baseline row (the 1-thread one when there are several), or None."""
    return min((r for r in group if r["role"] == BASELINE_RUN and seconds_per_example(r)),
               key=lambda r: r["threads_per_task"] != 1, default=None)


def _compare(group):
    """Fills the columns that compare a row with its setting's baseline, reference and floor."""
    base = baseline_of(group)
    ref = reference_of(group)
    floors = {r["threads_per_task"]: r for r in group
              if r["role"] == ENGINE_FLOOR and r["n"] == 1 and seconds_per_example(r)}
    for row in group:
        t1, tn, n = (seconds_per_example(base) if base else None), seconds_per_example(row), \
            row["n"]
        ok = t1 and tn
        row["speedup"] = metrics.speedup(t1, tn) if ok else None
        row["scaling_percent"] = metrics.scaling_percent(t1, tn, n) if ok else None
        row["efficiency"] = metrics.efficiency(t1, tn, n) if ok else None
        row["speedup_vs_reference"] = metrics.speedup(seconds_per_example(ref), tn) \
            if ref and tn else None
        row["reference_row"] = label(ref) if ref else None
        floor = floors.get(row["threads_per_task"])
        comparable = row["role"] in (BASELINE_RUN, REFERENCE_RUN) or (
            row["role"] == "strategy" and row["n"] == 1 and floor_comparable(row["strategy"]))
        row["vs_engine_floor"] = metrics.speedup(seconds_per_example(floor), tn) \
            if floor and comparable and tn else None
        row["accuracy_delta"] = row["final_eval_accuracy"] - base["final_eval_accuracy"] \
            if base else None
        row["loss_delta"] = row["final_eval_loss"] - base["final_eval_loss"] if base else None
        if is_machine_limit(row):  # timing rounds of K loops: no training curve, no one step
            row.update(accuracy_delta=None, loss_delta=None, time_to_target_s=None,
                       target_reached_runs=None, step_time_s=None)


def summarize(records, target_accuracy=None):
    """Returns a list of row dicts with COLUMNS, ordered by setting, role (engine floor first),
    strategy, N. Straggler-experiment runs (even at delay 0) are left out: straggler.py; so are
    runs on an emulated network: network.py, and pipelines and the parallelism preset's runs:
    parallelism.py."""
    cells = collections.defaultdict(list)
    for r in records:
        if not is_straggler_run(r) and not is_network_run(r) and not is_parallelism_run(r) \
                and not is_collectives_run(r) and not is_reducer_run(r):
            cells[(role_of(r), r["strategy"], workers_of(r), setting_of(r),
                   r.get("threads_per_task"))].append(r)
    rows = [_row(*key, runs, target_accuracy) for key, runs in cells.items()]
    out = []
    for group in groups(rows).values():
        _compare(group)
        group.sort(key=lambda r: (_ROLE_ORDER[r["role"]], r["strategy"], r["n"],
                                  r["threads_per_task"] or 0))
        out += [{c: row[c] for c in COLUMNS} for row in group]
    return out

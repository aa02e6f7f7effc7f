"""Records -> one summary row per configuration (strategy, N, model, dataset, size, batch).

N is the number of workers for multi-worker strategies, local replicas for `mirrored`, 1 for the
single device. Baselines (see README, "Summary columns"):
  T1      the `one_device` run with 1 thread per task: one worker's share of this machine.
  T_ref   the hardware reference: `one_device` using every core (run_name "hardware_reference").
Scaling figures use T1; `speedup_vs_reference` compares with the whole machine in one process.
"""
import collections

from results import metrics

REFERENCE_RUN = "hardware_reference"
BASELINE_RUN = "baseline"

COLUMNS = (
    "strategy", "n", "model", "dataset", "train_examples", "batch_size_per_replica",
    "global_batch_size", "threads_per_task", "runs", "epoch_time_s", "epoch_time_min_s",
    "epoch_time_max_s", "examples_per_sec", "speedup", "scaling_percent", "efficiency",
    "speedup_vs_reference", "final_eval_accuracy", "final_eval_loss", "accuracy_delta",
    "loss_delta", "time_to_target_s", "step_time_s", "communication_fraction", "role",
)


def workers_of(record):
    if record["strategy"] == "mirrored":
        return record["num_replicas_in_sync"]
    if record["strategy"] in ("multi_worker_mirrored", "parameter_server"):
        return record["num_workers"]
    return 1


def delay_of(record):
    """The straggler delay injected into a record's run, in ms per step (0: none)."""
    return float((record.get("straggler") or {}).get("delay_ms") or 0.0)


def role_of(record):
    name = record.get("run_name") or ""
    if name.startswith(REFERENCE_RUN):
        return REFERENCE_RUN
    if name.startswith(BASELINE_RUN) or record["strategy"] == "one_device":
        return BASELINE_RUN
    return "strategy"


def _cell(record):
    return (role_of(record), record["strategy"], workers_of(record), record["model"],
            record["dataset"], record["train_examples"], record["batch_size_per_replica"])


def _steady_times(records):
    """Steady-state epoch times pooled over every repeat (first epoch of each run left out)."""
    times, rates = [], []
    for r in records:
        kept = metrics.steady_epochs(r["epochs"])
        times += [e["time_s"] for e in kept]
        rates += [e["examples_per_sec"] for e in kept]
    return metrics.spread(times), metrics.spread(rates)


def _median(values):
    return metrics.spread(values)["median"]


def groups(rows):
    """Summary rows by comparison setting: (model, dataset, size, per-replica batch) -> rows,
    in sorted order. One table / plot panel per setting."""
    out = collections.defaultdict(list)
    for r in rows:
        out[(r["model"], r["dataset"], r["train_examples"], r["batch_size_per_replica"])].append(r)
    return dict(sorted(out.items()))


def summarize(records, target_accuracy=None):
    """Returns a list of row dicts with COLUMNS, ordered by model, size, strategy, N. Runs with
    an injected straggler are left out (results/straggler.py has them)."""
    cells = collections.defaultdict(list)
    for r in records:
        if not delay_of(r):
            cells[_cell(r)].append(r)
    rows = []
    for (role, strategy, n, model, dataset, size, batch), runs in cells.items():
        time_s, rate = _steady_times(runs)
        tta = [metrics.time_to_accuracy(r["epochs"], target_accuracy) for r in runs] \
            if target_accuracy else []
        rows.append({
            "role": role, "strategy": strategy, "n": n, "model": model, "dataset": dataset,
            "train_examples": size, "batch_size_per_replica": batch,
            "global_batch_size": runs[0]["global_batch_size"],
            "threads_per_task": runs[0].get("threads_per_task"), "runs": len(runs),
            "epoch_time_s": time_s["median"], "epoch_time_min_s": time_s["min"],
            "epoch_time_max_s": time_s["max"], "examples_per_sec": rate["median"],
            "final_eval_accuracy": _median([r["final_eval_accuracy"] for r in runs]),
            "final_eval_loss": _median([r["final_eval_loss"] for r in runs]),
            "time_to_target_s": _median([t for t in tta if t is not None]) if tta else None,
            "step_time_s": metrics.per_worker_step_time(
                time_s["median"], max(1, runs[0].get("steps_per_epoch") or size // runs[0][
                    "global_batch_size"]), strategy, n),
            "communication_fraction": _median([r.get("communication_fraction")
                                               for r in runs]),
        })
    index = {(r["role"], r["model"], r["dataset"], r["train_examples"],
              r["batch_size_per_replica"]): r for r in rows if r["role"] != "strategy"}
    for row in rows:
        key = (row["model"], row["dataset"], row["train_examples"], row["batch_size_per_replica"])
        base, ref = index.get((BASELINE_RUN, *key)), index.get((REFERENCE_RUN, *key))
        t1, tn, n = (base or {}).get("epoch_time_s"), row["epoch_time_s"], row["n"]
        ok = t1 and tn
        row["speedup"] = metrics.speedup(t1, tn) if ok else None
        row["scaling_percent"] = metrics.scaling_percent(t1, tn, n) if ok else None
        row["efficiency"] = metrics.efficiency(t1, tn, n) if ok else None
        row["speedup_vs_reference"] = (metrics.speedup(ref["epoch_time_s"], tn)
                                       if ref and tn else None)
        row["accuracy_delta"] = (row["final_eval_accuracy"] - base["final_eval_accuracy"]
                                 if base else None)
        row["loss_delta"] = row["final_eval_loss"] - base["final_eval_loss"] if base else None
    order = {"baseline": 0, "hardware_reference": 1, "strategy": 2}
    rows.sort(key=lambda r: (r["model"], r["dataset"], r["train_examples"], order[r["role"]],
                             r["strategy"], r["n"]))
    return [{c: row[c] for c in COLUMNS} for row in rows]

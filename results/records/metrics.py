"""Figures derived from timings: steady state, speedup, scaling %, efficiency.

Definitions (same total work per epoch, T = steady-state epoch time):
  speedup    S_N = T_1 / T_N
  scaling %  = T_1 / (N * T_N) * 100
  efficiency E_N = S_N / N       (scaling % / 100)
"""
import statistics

from strategies import kind


def spread(values):
    """Median with min/max and count; None values are dropped."""
    values = [v for v in values if v is not None]
    if not values:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def median(values):
    """The median of the values that are not None (None when there are none)."""
    return spread(values)["median"]


def steady_epochs(epochs):
    """The epochs that count for steady state: not the ones that traced the step function (the
    first of each process: `includes_tracing`, or else the first epoch), unless nothing is left."""
    if any("includes_tracing" in e for e in epochs):
        kept = [e for e in epochs if not e.get("includes_tracing")]
    else:
        kept = epochs[1:]
    return kept or epochs


def steady_state(epochs):
    """Steady-state figures from per-epoch dicts (see `steady_epochs`)."""
    kept = steady_epochs(epochs)
    return {
        "epoch_time_s": spread([e["time_s"] for e in kept]),
        "examples_per_sec": spread([e["examples_per_sec"] for e in kept]),
        "epochs_used": [e["epoch"] for e in kept],
        "includes_first_epoch": kept is epochs or epochs[0] in kept,
    }


def pooled_steady(records):
    """(epoch time spread, examples/s spread) of the steady epochs of every run pooled: the one
    estimator of a cell's "measured" figures, in the summary table and the models alike."""
    times, rates = [], []
    for r in records:
        kept = steady_epochs(r["epochs"])
        times += [e["time_s"] for e in kept]
        rates += [e["examples_per_sec"] for e in kept]
    return spread(times), spread(rates)


def per_worker_step_time(epoch_time_s, steps_per_epoch, strategy, num_workers):
    """Seconds one worker spends on a step. PSS workers step concurrently, so a worker's step
    takes epoch time x workers / steps; the other strategies step in lockstep (epoch / steps).
    None when the epoch time or step count is unknown."""
    if not epoch_time_s or not steps_per_epoch:
        return None
    concurrent = num_workers if kind(strategy).parameter_servers else 1
    return epoch_time_s * concurrent / steps_per_epoch


def speedup(t1, tn):
    return t1 / tn


def scaling_percent(t1, tn, n):
    return t1 / (n * tn) * 100.0


def efficiency(t1, tn, n):
    return speedup(t1, tn) / n


def time_to_accuracy(epochs, target):
    """Cumulative training seconds until eval accuracy first reaches `target`, else None."""
    total = 0.0
    for e in epochs:
        total += e["time_s"]
        acc = e.get("eval_accuracy")
        if acc is not None and acc == acc and acc >= target:
            return total
    return None

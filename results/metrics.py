"""Figures derived from timings: steady state, speedup, scaling %, efficiency.

Definitions (same total work per epoch, T = steady-state epoch time):
  speedup    S_N = T_1 / T_N
  scaling %  = T_1 / (N * T_N) * 100
  efficiency E_N = S_N / N       (scaling % / 100)
"""
import statistics


def spread(values):
    """Median with min/max and count; None values are dropped."""
    values = [v for v in values if v is not None]
    if not values:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def steady_state(epochs):
    """Steady-state figures from per-epoch dicts. The first epoch includes tf.function tracing
    and input caching, so it is left out whenever there is more than one epoch."""
    kept = epochs[1:] if len(epochs) > 1 else epochs
    return {
        "epoch_time_s": spread([e["time_s"] for e in kept]),
        "examples_per_sec": spread([e["examples_per_sec"] for e in kept]),
        "epochs_used": [e["epoch"] for e in kept],
        "includes_first_epoch": len(epochs) <= 1,
    }


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

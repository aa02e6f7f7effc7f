"""The step stamps of a record (experiments/engine/step_clock.py takes them inside every
worker's training step; the record keeps each epoch's summary as `timeline`): per worker,
compute, waiting for the last peer and the synchronization (breakdown), who arrived last and
by how much (straggler_line, clear_straggler). The report draws them: results/report/timeline.py.

Per step and worker three stamps: t0 its input is ready, t1 its gradients are ready (forward and
backward done; under PSS the variables' pull is inside), t2 its update is done (the all-reduce
and the optimizer's update). Under all-reduce the workers meet every step: a worker whose
gradients are ready at t1 waits until the last peer's are (max t1), and the synchronization
proper takes t2 - max t1. Under PSS t2 is the start of the same worker's next step (a read after
the update would pull every variable again): t2 - t1 holds its push, the next pull and the
coordinator's dispatch. No PSS worker waits for another: a straggler is one whose steps take
longer than the others'.
Clocks: each task's own (tf.timestamp); tasks on one machine share it, tasks on several hosts
differ by their clocks' offset (NTP: usually below a millisecond), which moves "waiting" between
workers.
"""
import statistics


def _median(values):
    return statistics.median(values) if values else None


def breakdown(stamps, lockstep):
    """{worker: {compute_s, wait_s, sync_s, step_s, steps, last_share, late_s}} (medians over
    steps; wait_s, last_share and late_s under lockstep only: the share of steps whose
    gradients this worker had ready last, and by how much it was late in those steps: its t1
    minus the next latest worker's). stamps: {worker: [(t0, t1, t2), ...]}; under lockstep, row
    i of every worker is the same step."""
    out = {}
    workers = sorted(stamps)
    for w in workers:
        rows = stamps[w]
        out[w] = {"compute_s": _median([t1 - t0 for t0, t1, _ in rows]),
                  "sync_s": _median([t2 - t1 for _, t1, t2 in rows]),
                  "step_s": _median([t2 - t0 for t0, _, t2 in rows]),
                  "steps": len(rows), "wait_s": None, "last_share": None, "late_s": None}
    if not lockstep or len(workers) < 2:
        return out
    steps = min(len(stamps[w]) for w in workers)
    waits = {w: [] for w in workers}
    syncs = {w: [] for w in workers}
    last = {w: [] for w in workers}
    for i in range(steps):
        ready = {w: stamps[w][i][1] for w in workers}
        latest = max(ready.values())
        order = sorted(workers, key=lambda w: ready[w])
        if ready[order[-1]] > ready[order[-2]]:  # a tie makes no one last
            last[order[-1]].append(ready[order[-1]] - ready[order[-2]])
        for w in workers:
            waits[w].append(latest - ready[w])
            syncs[w].append(stamps[w][i][2] - latest)
    for w in workers:
        out[w].update(wait_s=_median(waits[w]), sync_s=_median(syncs[w]),
                      last_share=len(last[w]) / steps if steps else None,
                      late_s=_median(last[w]))
    return out


def straggler_line(parts, lockstep):
    """One line naming the straggler: under lockstep the worker last most often ('worker:1 last
    in 83% of steps, median 12.0 ms late'), under PSS the one with the slowest median step
    against the others' median; None with fewer than 2 workers."""
    if len(parts) < 2:
        return None
    if lockstep:
        w = max(parts, key=lambda k: parts[k]["last_share"] or 0.0)
        p = parts[w]
        return (f"{w} last in {p['last_share'] * 100:.0f}% of steps, median "
                f"{(p['late_s'] or 0.0) * 1e3:.1f} ms late")
    w = max(parts, key=lambda k: parts[k]["step_s"] or 0.0)
    others = _median([p["step_s"] for k, p in parts.items() if k != w])
    ratio = parts[w]["step_s"] / others if others else float("inf")
    return (f"{w} slowest: median step {parts[w]['step_s'] * 1e3:.1f} ms, {ratio:.2f}x the "
            f"others' median ({others * 1e3:.1f} ms)")


# When a worker counts as the straggler: last in at least this share of the steps (lockstep), or
# its median step this many times the others' (PSS). Below, the order of arrival is noise: two
# equal workers on shared cores take turns being last.
CLEAR_LAST_SHARE = 0.7
CLEAR_STEP_RATIO = 1.2


def clear_straggler(parts, lockstep):
    """The worker that clearly holds the others back (see CLEAR_*), or None."""
    if len(parts) < 2:
        return None
    if lockstep:
        w = max(parts, key=lambda k: parts[k]["last_share"] or 0.0)
        return w if (parts[w]["last_share"] or 0.0) >= CLEAR_LAST_SHARE else None
    w = max(parts, key=lambda k: parts[k]["step_s"] or 0.0)
    others = _median([p["step_s"] for k, p in parts.items() if k != w])
    return w if others and parts[w]["step_s"] >= CLEAR_STEP_RATIO * others else None


def epoch_breakdown(record):
    """The record's per-worker breakdown of its last epoch (steady: the first traces)."""
    epochs = [e for e in record.get("epochs") or [] if e.get("timeline")]
    return epochs[-1]["timeline"] if epochs else None

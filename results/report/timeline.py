"""Where a multi-worker step's time goes, from timestamps taken inside every worker's training
step (experiments/engine/step_clock.py): per worker, compute, waiting for the last peer and the
synchronization; who arrived last and by how much (straggler attribution); a Chrome-trace /
Perfetto JSON and a PNG of a few steady steps.

    python -m experiments.run --strategy=multi_worker_mirrored --num_workers=2 --model=cnn
    (the record's `timeline`; a comparison's report draws timeline-*.png and writes
    timeline-*.json: open it at https://ui.perfetto.dev or chrome://tracing)

The stamps, and their per-worker summary in the record: results/records/step_stamps.py.
"""
import json
import re

from results.records.step_stamps import (CLEAR_LAST_SHARE, CLEAR_STEP_RATIO, clear_straggler,
                                         epoch_breakdown)

COMPUTE, WAIT, SYNC = "compute", "waiting for peers", "synchronization and update"
FORWARD, BACKWARD = "stage forward", "stage backward"  # a pipeline stage's blocks
COLORS = {COMPUTE: "tab:blue", WAIT: "lightgray", SYNC: "tab:orange", FORWARD: "tab:green",
          BACKWARD: "tab:purple"}


def trace_events(stamps, lockstep, extra=(), blocks=None, microbatches=None):
    """Chrome-trace events (the JSON of chrome://tracing and ui.perfetto.dev): one track (pid)
    per worker, a complete event per phase of each step; a pipeline's `blocks` ({worker: per
    step [start, end] of each stage's 2 x `microbatches` blocks, experiments/engine/gpipe.py})
    add a thread per stage under its worker; `extra`: events of the run's own (checkpoints,
    restarts, evaluations) as {name, worker, start_s, end_s}."""
    events = []
    workers = sorted(stamps)
    t_origin = min([rows[0][0] for rows in stamps.values() if rows] +
                   [e["start_s"] for e in extra])
    steps = min(len(stamps[w]) for w in workers) if lockstep else None

    def event(name, worker, start, end, step=None, tid=0, **args):
        events.append({"name": name, "ph": "X", "pid": workers.index(worker) if worker in
                       workers else len(workers), "tid": tid, "ts": (start - t_origin) * 1e6,
                       "dur": max(0.0, end - start) * 1e6,
                       "args": {**({} if step is None else {"step": step}), **args}})

    for pid, w in enumerate(workers):
        events.append({"name": "process_name", "ph": "M", "pid": pid,
                       "args": {"name": w}})
        for i, (t0, t1, t2) in enumerate(stamps[w]):
            event(COMPUTE, w, t0, t1, i)
            if lockstep and i < steps:
                latest = max(stamps[k][i][1] for k in workers)
                event(WAIT, w, t1, latest, i)
                event(SYNC, w, latest, t2, i)
            else:
                event(SYNC, w, t1, t2, i)
        for i, flat in enumerate((blocks or {}).get(w) or []):
            per_stage = 4 * microbatches  # 2M blocks of (start, end)
            for stage in range(len(flat) // per_stage):
                if i == 0:
                    events.append({"name": "thread_name", "ph": "M", "pid": pid,
                                   "tid": stage + 1, "args": {"name": f"stage {stage}"}})
                for j in range(2 * microbatches):
                    start, end = flat[stage * per_stage + 2 * j: stage * per_stage + 2 * j + 2]
                    forward = j < microbatches
                    event(FORWARD if forward else BACKWARD, w, start, end, i, tid=stage + 1,
                          microbatch=j if forward else 2 * microbatches - 1 - j)
    if extra:
        events.append({"name": "process_name", "ph": "M", "pid": len(workers),
                       "args": {"name": "run (chief)"}})
    for e in extra:
        event(e["name"], e.get("worker"), e["start_s"], e["end_s"])
    return events


def run_events(record):
    """The run's own spans for its trace: each epoch's training and evaluation (the chief's wall
    clock), each checkpoint the chief saved and each restart of a lost task (from the loss
    until training went on)."""
    out = []
    for e in record.get("epochs") or []:
        if e.get("started_at") and e.get("eval_started_at") and e.get("ended_at"):
            out.append({"name": f"epoch {e['epoch']}: training", "start_s": e["started_at"],
                        "end_s": e["eval_started_at"]})
            out.append({"name": f"epoch {e['epoch']}: evaluation and its end",
                        "start_s": e["eval_started_at"], "end_s": e["ended_at"]})
    for c in record.get("checkpoint_saves") or []:
        out.append({"name": f"checkpoint after step {c['step']}", "start_s": c["at_time"],
                    "end_s": c["at_time"] + c["s"]})
    for r in record.get("restarts") or []:
        if r.get("at_time"):
            out.append({"name": f"restart of {r['task']} ({r['action']})",
                        "start_s": r["at_time"],
                        "end_s": r["at_time"] + (r.get("recovery_s") or 0.0)})
    return out


def trace_json(stamps, lockstep, extra=(), blocks=None, microbatches=None):
    return json.dumps({"traceEvents": trace_events(stamps, lockstep, extra, blocks,
                                                   microbatches),
                       "displayTimeUnit": "ms"}) + "\n"


def plot(stamps, lockstep, path, title, blocks=None, microbatches=None):
    """A PNG of the stamped steps: a row per worker, a bar per phase (compute, waiting for the
    last peer, synchronization and update), a row per pipeline stage under its worker (forward
    and backward blocks), time in ms from the first step's start."""
    from results.report.plots import plt, save  # matplotlib, only when drawing

    workers = sorted(stamps)
    events = [e for e in trace_events(stamps, lockstep, (), blocks, microbatches)
              if e["ph"] == "X"]
    rows = sorted({(e["pid"], e["tid"]) for e in events})
    labels = [workers[pid] + (f" stage {tid - 1}" if tid else "") for pid, tid in rows]
    fig, ax = plt.subplots(figsize=(12, 0.6 * len(rows) + 1.6))
    for e in events:
        ax.barh(rows.index((e["pid"], e["tid"])), e["dur"] / 1e3, left=e["ts"] / 1e3,
                height=0.6, color=COLORS[e["name"]], edgecolor="white", linewidth=0.3)
    ax.set_yticks(range(len(rows)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("time since the first stamped step's start (ms)")
    ax.set_title(title)
    shown = {e["name"] for e in events}
    for name, color in COLORS.items():
        if name in shown:
            ax.barh(0, 0, color=color, label=name)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.2 / len(rows)),
              ncol=len(shown))  # below the axis: the bars fill it
    return save(fig, path)


def _blocks(record):
    """A pipeline's stage blocks in the record's trace, or None."""
    return ((record.get("timeline") or {}).get("stage_blocks")) or None


def _chosen(records):
    """Multi-worker or pipelined records with timestamps, first repeat only (a comparison's r0,
    or a run outside one)."""
    from results.records.cells import repeat_of, workers_of

    out = []
    for r in records:
        if (workers_of(r) >= 2 or _blocks(r)) and epoch_breakdown(r) and \
                repeat_of(r) in (None, "r0"):
            out.append(r)
    return out


def _probe_ms(record):
    """The communication probe's median synchronization (timed apart from training, after it),
    in ms: the in-step figures' cross-check."""
    probe = (record.get("communication") or {}).get("probe_s") or {}
    return f"{probe['median'] * 1e3:.2f}" if probe.get("n") else "–"


def _cell(record):
    """The comparison cell of a record ('straggler-multi_worker_mirrored-n2-d50'), or for a run
    outside a comparison its strategy, N and run id."""
    from results.records.cells import workers_of

    name = (record.get("run_name") or "").split("/")[0]
    return name or f"{record['strategy']}-n{workers_of(record)}-{record.get('run_id', '')[-6:]}"


def _name(record):
    raw = f"timeline-{record['model']}-{record.get('train_examples', '')}-{_cell(record)}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", raw)


def section(records, path):
    """The report's "Where the time goes" part: per worker of each multi-worker run (first
    repeat), the last epoch's medians and who arrived last; a PNG and a trace JSON of the first
    stamped steps for each N=2 run and each straggler run. None without timestamps."""
    from results.records.cells import delay_of, setting_of, setting_title, sort_key, workers_of
    from results.records.store import write_text_atomic
    from results.report.tables import Section, markdown_table

    chosen = sorted(_chosen(records), key=lambda r: (sort_key(setting_of(r)), r["strategy"],
                                                     workers_of(r), delay_of(r)))
    if not chosen:
        return None
    table, lines, plots, files = [], [], [], []
    for r in chosen:
        t = epoch_breakdown(r)
        where = (f"{setting_title(setting_of(r))}: {_cell(r)}"
                 + (f" ({r['straggler']['task']} slowed {delay_of(r):g} ms)" if delay_of(r)
                    else ""))
        for w, p in sorted(t["per_worker"].items()):
            ms = lambda v: f"{v * 1e3:.2f}" if v is not None else "–"  # noqa: E731
            table.append([where, w, ms(p["compute_s"]), ms(p["wait_s"]), ms(p["sync_s"]),
                          _probe_ms(r), f"{p['last_share'] * 100:.0f}%"
                          if p["last_share"] is not None else "–", ms(p["late_s"])])
        if clear_straggler(t["per_worker"], t["lockstep"]):
            lines.append(f"- {where}: {t['straggler']}.")
        trace = (r.get("timeline") or {}).get("stamps")
        if trace and (workers_of(r) == 2 or delay_of(r) or _blocks(r)):
            lockstep, blocks = t["lockstep"], _blocks(r)
            micro = r["timeline"].get("microbatches")
            shown = 4 if blocks else 12  # a pipeline's steps have 4M blocks a stage
            first = {k: v[:shown] for k, v in trace.items()}
            plots.append(plot(first, lockstep, path(_name(r) + ".png"),
                              f"{_cell(r)} ({r['model']}): {shown} steps of the last epoch",
                              {k: v[:shown] for k, v in (blocks or {}).items()}, micro))
            files.append(write_text_atomic(path(_name(r) + ".json"), trace_json(
                trace, lockstep, run_events(r), blocks, micro)))
    text = ["## Where the time goes (timestamps inside every step)", "",
            "Each worker stamps its steps: input ready (t0), gradients ready (t1), update done "
            "(t2; under PSS the start of its next step). Compute = t1 - t0; under all-reduce a "
            "worker then waits for the last peer's gradients (max t1 - t1) and the "
            "synchronization and update take t2 - max t1; 'last' = the share of steps whose "
            "gradients this worker had ready last, 'late' = by how much, median (results/records/"
            "step_stamps.py). Medians over the last epoch's steps, first repeat of each cell. "
            "'probe ms': the communication probe's median synchronization of the same "
            "gradients, timed apart after training (the cross-check: in the step the "
            "synchronization also holds the optimizer's update and shares the cores with the "
            "other workers' compute). A pipeline's trace and PNG have a row per stage (its "
            "forward and backward blocks). The trace files (timeline-*.json) open at "
            "https://ui.perfetto.dev.", "",
            markdown_table(["run", "worker", "compute ms", "waiting for peers ms",
                            "synchronization and update ms", "probe ms", "last", "late ms"],
                           table)]
    text += ["", "Who holds the others back (a worker last in at least "
             f"{CLEAR_LAST_SHARE:.0%} of the steps; under PSS, steps at least "
             f"{CLEAR_STEP_RATIO:g}x the others'):", ""]
    text += lines or ["- nobody: in every run the order of arrival looks like noise."]
    return Section("\n".join(text), plots=plots, files=files)

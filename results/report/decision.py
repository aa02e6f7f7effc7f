"""The report's answer, first: per setting, a decision of at most six lines and one compact
table, computed from the summary rows, the in-step timeline of the runs and the projections. The
same lines end `experiments.compare`'s terminal output.

    decision.lines(group, records, projected)   # ["Use mirrored N=2: ... examples/s, ...", ...]
    decision.table(group, records)              # markdown: strategy, N, examples/s, ...

One baseline everywhere: `vs one device` is the row's examples/s over one device at one worker's
threads (the baseline, T1); `vs best` over the fastest run of the setting.
"""
import statistics

from results.records.cells import (BASELINE_RUN, REFERENCE_RUN, is_network_run,
                                   is_reducer_run, is_straggler_run, role_of, setting_of,
                                   setting_of_row, workers_of)
from results.records.step_stamps import epoch_breakdown
from results.report.summary import baseline_of, beyond_spread, reference_of
from results.report.tables import markdown_table
from strategies import kind

MAX_LINE = 160  # characters: the terminal's decision lines fit a wide terminal unwrapped
# Projections quoted in the decision: the largest N at most this (where a user's first cluster is)
QUOTED_N = 8


def _cores(row):
    threads = row.get("threads_per_task") or 1
    return f"{threads} core{'s' * (threads != 1)}"


def _name(row):
    if row["role"] == BASELINE_RUN:
        return f"one device ({_cores(row)})"
    if row["role"] == REFERENCE_RUN:
        return "one device (all cores)"
    k = kind(row["strategy"])
    if row["n"] > 1:
        return f"{k.short} N={row['n']}"
    return f"{k.short}, 1 {'replica' if k.local_replicas else 'worker'}"


def _rate(value):
    return f"{value:,.0f}"


def candidates(group):
    """The rows a user chooses between: the baseline, the all-cores reference and every
    strategy's row (the engine floors and the machine's-limit row are references, not choices)."""
    return [r for r in group if r["examples_per_sec"] and (
        r["role"] in (BASELINE_RUN, REFERENCE_RUN) or r["role"] == "strategy")]


def step_parts(row, records):
    """(compute ms, waiting + synchronization ms, step ms) per worker step, the medians over
    the workers of the in-step timeline of the row's first repeat; for one device (nothing to
    synchronize, no stamps) its whole step; None otherwise."""
    if row["role"] in (BASELINE_RUN, REFERENCE_RUN) and row.get("batch_per_replica_used"):
        step = row["batch_per_replica_used"] / row["examples_per_sec"] * 1e3
        return step, 0.0, step
    for r in records:
        if role_of(r) != "strategy" or r["strategy"] != row["strategy"] or \
                workers_of(r) != row["n"] or setting_of(r) != setting_of_row(row) or \
                is_straggler_run(r) or is_network_run(r) or is_reducer_run(r):
            continue  # the row's own runs, not an experiment's slowed or shaped ones
        timeline = epoch_breakdown(r)
        parts = list(((timeline or {}).get("per_worker") or {}).values())
        if not parts or any(p.get("compute_s") is None for p in parts):
            continue
        compute = statistics.median(p["compute_s"] for p in parts) * 1e3
        sync = statistics.median((p.get("wait_s") or 0) + (p.get("sync_s") or 0)
                                 for p in parts) * 1e3
        step = statistics.median(p.get("step_s") or 0 for p in parts) * 1e3
        return compute, sync, step or compute + sync
    return None


def _why(row, base_parts, parts):
    """Why a multi-process row is slower than the best, from its step: synchronization, and
    compute slower than one device's (sharing the machine's cores)."""
    if parts is None:
        return ""
    compute, sync, step = parts
    out = f"{sync:.1f} of {step:.0f} ms a step is synchronization"
    if base_parts is not None and base_parts[0] and compute > base_parts[0] * 1.05:
        out += f", its workers compute {compute / base_parts[0]:.2f}x slower than one device"
    return out


def lines(group, records, projected=(), width=MAX_LINE):
    """The decision: what to use and why, in at most six lines of at most `width` characters.
    `projected`: the projection rows of this setting (results/report/projections.py)."""
    rows = candidates(group)
    base = baseline_of(group)
    if rows and base is None:  # runs made by hand (a GPU host, a platform's job): no baseline
        best = max(rows, key=lambda r: r["examples_per_sec"])
        return [_fit(f"Fastest measured: {_name(best)}, {_rate(best['examples_per_sec'])} "
                     f"examples/s. No one-device baseline among these runs: "
                     f"`python -m experiments.compare` runs one beside each strategy.", width)]
    if not rows:
        return []
    best = max(rows, key=lambda r: r["examples_per_sec"])
    ref = reference_of(group)
    out = []
    vs = f"{best['examples_per_sec'] / base['examples_per_sec']:.2f}x one device on " \
        f"{_cores(base)}"
    if ref is not None and ref is not best and best["role"] != BASELINE_RUN:
        vs += f", {best['examples_per_sec'] / ref['examples_per_sec']:.2f}x on all cores"
    clear = all(beyond_spread(best, r) for r in rows if r is not best)
    out.append(f"Use {_name(best)}: {_rate(best['examples_per_sec'])} examples/s, {vs}"
               + ("." if clear else " (within the epochs' spread of the next)."))
    base_parts = step_parts(base, records)
    # the other strategies at their largest N: how far behind, and why
    largest = {}
    for r in rows:
        # the others: the best's own strategy at another N says nothing new
        if r["role"] == "strategy" and r["strategy"] != best["strategy"] and \
                kind(r["strategy"]).compared:
            if r["n"] >= largest.get(r["strategy"], {"n": 0})["n"]:
                largest[r["strategy"]] = r
    for r in sorted(largest.values(), key=lambda r: -r["examples_per_sec"]):
        if len(out) >= 4:
            break
        why = _why(r, base_parts, step_parts(r, records)) if r["n"] > 1 else ""
        out.append(f"{_name(r)}: {r['examples_per_sec'] / best['examples_per_sec']:.2f}x the best"
                   + (f"; {why}" if why else "") + ".")
    deltas = [r["accuracy_delta"] for r in rows if r.get("accuracy_delta") is not None]
    if deltas:
        worst = max(abs(d) for d in deltas) * 100
        out.append(f"Accuracy: every run within {worst:.1f} points of one device's "
                   f"({base['final_eval_accuracy']:.3f}).")
    projection = _projection(projected)
    if projection:
        out.append(projection)
    return [_fit(line, width) for line in out[:6]]


def _projection(projected):
    """One line: each multi-worker strategy's projected efficiency at the largest N up to
    QUOTED_N on the stated network."""
    parts = []
    for strategy in sorted({r["strategy"] for r in projected}):
        pts = [r for r in projected if r["strategy"] == strategy and r["kind"] == "projected"
               and 2 <= r["n"] <= QUOTED_N]
        if pts:
            p = max(pts, key=lambda r: r["n"])
            parts.append(f"{kind(strategy).short} {p['efficiency'] * 100:.0f}% efficient at "
                         f"N={p['n']} ({_rate(p['examples_per_sec'])} ex/s)")
    if not parts:
        return ""
    return "Projected, one worker per host on the stated network: " + "; ".join(parts) + "."


def _fit(line, width=MAX_LINE):
    return line if len(line) <= width else line[:width - 1] + "…"


def table(group, records):
    """The compact table: strategy, N, examples/s (min–max over steady epochs), vs one device,
    vs best, compute and synchronization ms per step, eval accuracy."""
    rows = sorted(candidates(group), key=lambda r: -r["examples_per_sec"])
    base = baseline_of(group)  # runs made by hand may have none
    if not rows:
        return ""
    best = rows[0]
    cells = []
    for r in rows:
        spread = ""
        if r["epoch_time_min_s"] and r["epoch_time_max_s"] and r["epoch_time_s"]:
            lo = r["examples_per_sec"] * r["epoch_time_s"] / r["epoch_time_max_s"]
            hi = r["examples_per_sec"] * r["epoch_time_s"] / r["epoch_time_min_s"]
            spread = f" ({_rate(lo)}–{_rate(hi)})"
        parts = step_parts(r, records)
        cells.append([_name(r), f"{_rate(r['examples_per_sec'])}{spread}",
                      f"{r['examples_per_sec'] / base['examples_per_sec']:.2f}x" if base else "–",
                      f"{r['examples_per_sec'] / best['examples_per_sec']:.2f}x",
                      f"{parts[0]:.1f}" if parts else "–",
                      f"{parts[1]:.1f}" if parts else "–",
                      f"{r['final_eval_accuracy']:.3f}" if r["final_eval_accuracy"] else "–"])
    return markdown_table(["run", "examples/s (epochs' range)", "vs one device", "vs best",
                           "compute ms", "sync ms", "eval acc"], cells)

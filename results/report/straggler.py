"""The straggler experiment, from records: how each multi-worker strategy copes when one worker
is slowed by D ms per step (`--straggler_task`, `--straggler_delay_ms`).

    python -m experiments.compare --experiments=straggler --straggler_delays=0,25,50,100

A synchronous strategy (MWMS) waits for its slowest worker at every all-reduce, so its throughput
follows the straggler; a parameter-server cluster hands steps to whichever worker is free, so the
straggler simply runs fewer of them (`steps_by_worker` in the record).
"""
import collections

from results.records import metrics
from results.report import plots
from results.records.cells import (SETTING_KEYS, delay_of, is_network_run, is_reducer_run,
                                   setting_of, sort_key, workers_of)
from results.report.tables import experiment_section, fmt, markdown_table
from strategies import REGISTRY, kind

COLUMNS = (*SETTING_KEYS, "strategy", "n", "straggler_task", "delay_ms", "runs",
           "examples_per_sec", "relative_throughput", "straggler_step_share")
_KEY = len(SETTING_KEYS) + 2  # setting, strategy, N


def _setting(row):
    """(setting..., strategy, N): the rows one 'throughput kept' line shares."""
    return tuple(row[c] for c in COLUMNS[:_KEY])


def _straggler_share(record):
    """Fraction of a PSS run's steps that the straggler ran (None when not recorded)."""
    steps, task = record.get("steps_by_worker"), (record.get("straggler") or {}).get("task")
    if not steps or not task:
        return None
    return steps.get(task, 0) / sum(steps.values())


def rows(records):
    """One row per (setting, strategy, N, delay) of every (setting, strategy, N) that has at
    least one straggler run; delay 0 rows are the same setting without a straggler."""
    cells = collections.defaultdict(list)
    for r in records:
        # a straggler that changes over the run (--straggler_schedule) has no one delay
        if kind(r["strategy"]).multi_worker and not kind(r["strategy"]).pipelined and \
                not is_network_run(r) and not is_reducer_run(r) and \
                not (r.get("straggler") or {}).get("schedule"):
            setting = (*setting_of(r), r["strategy"], workers_of(r))
            cells[setting, delay_of(r)].append(r)
    slowed = {setting for setting, delay in cells if delay > 0}
    out = []
    for (setting, delay), runs in cells.items():
        if setting not in slowed:
            continue
        rate = metrics.spread([e["examples_per_sec"] for r in runs
                               for e in metrics.steady_epochs(r["epochs"])])["median"]
        shares = [s for s in map(_straggler_share, runs) if s is not None]
        out.append(dict(zip(COLUMNS, (*setting, (runs[0].get("straggler") or {}).get("task", ""),
                                      delay, len(runs), rate, None,
                                      metrics.spread(shares)["median"]))))
    undisturbed = {_setting(r): r["examples_per_sec"] for r in out if r["delay_ms"] == 0}
    for r in out:
        base = undisturbed.get(_setting(r))
        r["relative_throughput"] = r["examples_per_sec"] / base if base and r[
            "examples_per_sec"] else None
    out.sort(key=lambda r: sort_key(_setting(r)) + (r["delay_ms"],))
    return out


def findings(straggler_rows):
    """One sentence per (setting, strategy, N) at its largest delay."""
    worst = {}
    for r in straggler_rows:
        key = _setting(r)
        if r["relative_throughput"] is not None and r["delay_ms"] >= worst.get(
                key, {"delay_ms": -1})["delay_ms"]:
            worst[key] = r
    out = []
    for _, r in sorted(worst.items(), key=lambda item: sort_key(item[0])):
        if r["delay_ms"] == 0:
            continue
        model, size, strategy, n = r["model"], r["train_examples"], r["strategy"], r["n"]
        share = (f"; the straggler ran {r['straggler_step_share'] * 100:.0f}% of the steps "
                 f"(fair share {100 / n:.0f}%)" if r["straggler_step_share"] is not None else "")
        out.append(f"- {model}, {size} examples, {strategy} N={n}: with {r['straggler_task']} "
                   f"slowed by {r['delay_ms']:g} ms/step it keeps "
                   f"{r['relative_throughput'] * 100:.0f}% of its undisturbed throughput{share}.")
    return out


def markdown(straggler_rows):
    """The report's "Straggler experiment" section: the table, then one line per strategy."""
    head = ("model", "examples", "strategy", "N", "slowed task", "delay ms/step", "examples/s",
            "throughput kept", "straggler's share of steps")
    cells = []
    for r in straggler_rows:
        kept, share = r["relative_throughput"], r["straggler_step_share"]
        cells.append([r["model"], str(r["train_examples"]), r["strategy"], str(r["n"]),
                      r["straggler_task"] or "–", fmt(r["delay_ms"]),
                      fmt(r["examples_per_sec"], 4),
                      f"{kept * 100:.0f}%" if kept is not None else "–",
                      f"{share * 100:.0f}%" if share is not None else "–"])
    return "\n".join(["## Straggler experiment", "",
                      "One worker's input pipeline sleeps the given time before each batch "
                      "(`--straggler_task`, `--straggler_delay_ms`). Throughput kept is relative "
                      "to the same setting without a straggler.", "", markdown_table(head, cells),
                      "", *findings(straggler_rows)])


def plot(rows, path):
    """Throughput kept vs the straggler's delay (left) and, for PSS, the share of steps the
    straggler ran (right): synchronous strategies follow the straggler, PSS routes around it."""
    lines = collections.defaultdict(list)
    for r in rows:
        lines[(tuple(r[k] for k in SETTING_KEYS), r["strategy"], r["n"])].append(r)
    fig, (kept, share) = plots.plt.subplots(1, 2, figsize=(12, 4.2))
    for (setting, strategy, n), group in sorted(lines.items(), key=lambda item: (
            sort_key(item[0][0]), item[0][1:])):
        model, size = group[0]["model"], group[0]["train_examples"]
        label = f"{plots.short(strategy)} N={n} ({model}, {size} ex.)"
        pts = [(r["delay_ms"], r["relative_throughput"] * 100) for r in group
               if r["relative_throughput"] is not None]
        color = REGISTRY[strategy].color  # the same strategy has the same colour in both panels
        if pts:
            kept.plot(*zip(*pts), "o-", color=color, label=label)
        pts = [(r["delay_ms"], r["straggler_step_share"] * 100) for r in group
               if r["straggler_step_share"] is not None]
        if pts:
            share.plot(*zip(*pts), "o-", color=color, label=label)
            share.axhline(100 / n, color="k", ls="--", lw=1)
    kept.axhline(100, color="k", ls="--", lw=1, label="undisturbed")
    kept.set(title="Throughput with one slow worker", xlabel="straggler delay (ms per step)",
             ylabel="throughput kept (% of delay 0)")
    share.set(title="PSS: steps run by the straggler (dashed: fair share)",
              xlabel="straggler delay (ms per step)", ylabel="share of steps (%)")
    kept.set_ylim(bottom=0)
    share.set_ylim(0, 100)
    kept.legend(fontsize=8)
    if share.lines:
        share.legend(fontsize=8)
    return plots.save(fig, path)


def section(records, path):
    """The straggler experiment's part of the report, its plot and CSV; None without one."""
    slow = rows(records)
    if not slow:
        return None
    return experiment_section(path, "straggler", markdown(slow), lambda png: plot(slow, png),
                              slow, COLUMNS)

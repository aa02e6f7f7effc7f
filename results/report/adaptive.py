"""The adaptive experiment (`python -m experiments.compare --preset=adaptive`): the seed's
Table I on this machine. Per model, in a steady scenario, a changing one (the emulated network
slows mid-run) and a straggler one (the last worker slows mid-run): one device, data parallel
(MWMS, PSS), model parallel, hybrid and --adapt (the planner's choice, switching when the
network or a straggler moves it: experiments/adaptive/), all at one global batch.

A row per configuration:
  training time    the epochs' own time (no evaluation), plus for --adapt the gaps between its
                   segments (the old one's exit, the new one's launch and restore): what a user
                   waits for beyond the others' epochs
  examples/s       the examples trained over that time
  accuracy         final eval accuracy, and its difference from one device's in points
  memory           peak per device (experiments/measure/memory.py; estimated on a CPU), the
                   largest of every configuration an --adapt run went through
  communication    the share of the step spent waiting for and synchronizing with peers, from
                   the in-step timeline (its synchronization stamp closes after the update:
                   one device's 1-2% is that update alone), weighted by epoch time; blank where
                   nothing was timed (a lone pipeline's device-to-device copies)
The single-process configurations have no network to slow and no second host: one run stands
in every scenario.
"""
import collections
import itertools
import statistics

from results.records.cells import ADAPTIVE_PREFIX, workers_of
from results.report import plots
from results.report.tables import Section, experiment_section, fmt, markdown_table
from strategies import REGISTRY, kind

SCENARIOS = ("steady", "changing", "straggler")
LABELS = {"one_device": "single device", "mwms-n2": "data parallel (MWMS N=2)",
          "pss-n2": "data parallel (PSS N=2, 1 ps)",
          "model_parallel-s2-m4": "model parallel (S=2, M=4)",
          "hybrid-n2-s2-m4": "hybrid (N=2 x S=2, M=4)", "auto": "adaptive (--adapt)"}
COLUMNS = ("model", "scenario", "configuration", "strategy", "training_time_s",
           "examples_per_sec", "final_eval_accuracy", "accuracy_delta_points",
           "peak_memory_per_device_mb", "communication_share", "switches", "schedule",
           "straggler_schedule")


def cell_of(record):
    """(scenario or None for both, the configuration's key in LABELS)."""
    cell = record["run_name"].split("/")[0][len(ADAPTIVE_PREFIX):]
    scenario, _, rest = cell.partition("-")
    return (scenario, rest) if scenario in SCENARIOS else (None, cell)


def gaps_s(record):
    """Seconds between an --adapt run's segments: from the switch request to the next epoch's
    start (exit, relaunch, restore)."""
    epochs = {e["epoch"]: e for e in record["epochs"]}
    out = 0.0
    for switch in (record.get("adapt") or {}).get("switches", []):
        after = epochs.get(switch["after_epoch"] + 1)
        if after is not None and after.get("started_at"):
            out += after["started_at"] - switch["requested_at"]
    return out


def communication_share(record):
    """Waiting plus synchronizing over the step, per epoch from the in-step timeline (median over
    workers), weighted by epoch time; single-process epochs count 0; None when nothing was
    timed for a configuration that communicates (a lone pipeline's copies)."""
    total = weighted = 0.0
    timed = False
    for e in record["epochs"]:
        workers = ((e.get("timeline") or {}).get("per_worker") or {}).values()
        shares = [(w.get("wait_s") or 0.0) + (w.get("sync_s") or 0.0) for w in workers
                  if w.get("step_s")]
        if shares:
            timed = True
            steps = [w["step_s"] for w in workers if w.get("step_s")]
            weighted += e["time_s"] * min(1.0, statistics.median(shares) /
                                          statistics.median(steps))
        total += e["time_s"]
    if not timed and kind(record["strategy"]).pipelined:
        return None
    return weighted / total if total else None


def peak_memory_mb(record):
    sizes = [d["bytes"] for d in record.get("memory_per_device") or [] if isinstance(d, dict)]
    sizes += [s.get("memory_per_device_bytes") or 0
              for s in (record.get("adapt") or {}).get("switches", [])]
    return max(sizes) / 1e6 if sizes else None


def _row(record, scenario):
    _, key = cell_of(record)
    time_s = sum(e["time_s"] for e in record["epochs"]) + gaps_s(record)
    examples = record["steps_per_epoch"] * record["global_batch_size"] * len(record["epochs"])
    adapt = record.get("adapt") or {}
    return {"model": record["model"], "scenario": scenario,
            "configuration": LABELS.get(key, key), "strategy": record["strategy"],
            "training_time_s": time_s, "examples_per_sec": examples / time_s,
            "final_eval_accuracy": record["final_eval_accuracy"], "accuracy_delta_points": None,
            "peak_memory_per_device_mb": peak_memory_mb(record),
            "communication_share": communication_share(record),
            "switches": " ; ".join(f"after epoch {s['after_epoch']}: "
                                   f"{s['verdict'].get('to')}" for s in adapt.get("switches", []))
            if adapt else None,
            "schedule": (record.get("network") or {}).get("schedule") or adapt.get("schedule"),
            "straggler_schedule": (record.get("straggler") or {}).get("schedule") or
            adapt.get("straggler_schedule") or None,
            "_record": record}


def rows(records):
    """Rows by (model, scenario), each scenario with the single-process rows too, in LABELS'
    order; the latest record of a cell counts."""
    latest = {}
    for r in records:  # the preset's cells (a --adapt run of one's own has no such name)
        if (r.get("run_name") or "").startswith(ADAPTIVE_PREFIX):
            latest[(r["model"], r["run_name"].split("/")[0])] = r
    out = []
    for model in dict.fromkeys(m for m, _ in latest):
        mine = [r for (m, _), r in latest.items() if m == model]
        for scenario in SCENARIOS:
            group = [_row(r, scenario) for r in mine if cell_of(r)[0] in (None, scenario)]
            if not any(cell_of(r["_record"])[0] == scenario for r in group):
                continue
            order = list(LABELS.values())
            group.sort(key=lambda r: order.index(r["configuration"])
                       if r["configuration"] in order else len(order))
            single = next((r for r in group if r["configuration"] == LABELS["one_device"]), None)
            for r in group:
                if single is not None:
                    r["accuracy_delta_points"] = 100 * (r["final_eval_accuracy"] -
                                                        single["final_eval_accuracy"])
            out += group
    return out


def _versus(ours, theirs):
    """'28.4 s vs 73.3 s: 61.2% less time' (or more)."""
    a, b = ours["training_time_s"], theirs["training_time_s"]
    return f"{a:.1f} s vs {b:.1f} s: {abs(1 - a / b):.1%} {'less' if a <= b else 'more'} time"


def checks(group):
    """The issue's three claims for one (model, scenario) group, as sentences."""
    adaptive = next((r for r in group if r["configuration"] == LABELS["auto"]), None)
    static = [r for r in group if r is not adaptive]
    if adaptive is None or not static:
        return []
    best = min(static, key=lambda r: r["training_time_s"])
    out = []
    initial = (adaptive["_record"].get("adapt") or {}).get("initial") or {}
    start = next((r for r in static if r["strategy"] == initial.get("strategy") and
                  workers_of(r["_record"]) == initial.get("workers") and
                  (r["_record"].get("num_ps") or 0) == initial.get("num_ps", 0) and
                  not kind(r["strategy"]).pipelined), None)
    if start is not None:
        out.append(f"against the configuration the plan chose at the start "
                   f"({start['configuration']}): {_versus(adaptive, start)}")
    out.append(f"against the best static configuration here ({best['configuration']}): "
               f"{_versus(adaptive, best)}")
    if adaptive["accuracy_delta_points"] is not None:
        out.append(f"final accuracy {adaptive['final_eval_accuracy']:.4f}, "
                   f"{adaptive['accuracy_delta_points']:+.2f} points from one device's")
    return out


def markdown(adaptive_rows):
    parts = ["## Adaptive: the seed's Table I on this machine", "",
             "One global batch for all; training time is the epochs' own plus --adapt's gaps "
             "between segments (results/report/adaptive.py). Communication: waiting and "
             "synchronizing "
             "over the step, from the in-step timeline."]
    groups = collections.defaultdict(list)
    for r in adaptive_rows:
        groups[(r["model"], r["scenario"])].append(r)
    for (model, scenario), group in groups.items():
        schedule = next((r["schedule"] for r in group if r["schedule"]), None)
        slow = next((r["straggler_schedule"] for r in group if r["straggler_schedule"]), None)
        title = f"{model}, {scenario} network ({schedule or 'unshaped'}: epoch:Gbit/s)" if \
            not slow else (f"{model}, a straggler ({slow}: epoch:ms added to the last worker's "
                           f"steps; network {schedule or 'unshaped'})")
        parts += ["", f"### {title}",
                  "", markdown_table(
                      ["configuration", "training time (s)", "examples/s", "final accuracy",
                       "Δ accuracy (points)", "peak memory/device (MB)", "communication",
                       "switches"],
                      [[r["configuration"], fmt(r["training_time_s"]), fmt(r["examples_per_sec"]),
                        fmt(r["final_eval_accuracy"]), fmt(r["accuracy_delta_points"]),
                        fmt(r["peak_memory_per_device_mb"]),
                        "" if r["communication_share"] is None else
                        f"{r['communication_share']:.0%}", r["switches"] or ""]
                       for r in group])]
        parts += [""] + [f"- {line}" for line in checks(group)]
    return "\n".join(parts)


def plot(adaptive_rows, path):
    """Training time per configuration, a panel per model (rows) and scenario (columns)."""
    models = list(dict.fromkeys(r["model"] for r in adaptive_rows))
    scenarios = [s for s in SCENARIOS if any(r["scenario"] == s for r in adaptive_rows)]
    fig, axes = plots.plt.subplots(len(models), len(scenarios),
                                   figsize=(4.2 * len(scenarios), 3.8 * len(models)),
                                   squeeze=False)  # a row per model, a column per scenario
    for (i, model), (j, scenario) in itertools.product(enumerate(models), enumerate(scenarios)):
        ax = axes[i][j]
        group = [r for r in adaptive_rows if (r["model"], r["scenario"]) == (model, scenario)]
        if not group:  # a model without this scenario's runs
            ax.axis("off")
            continue
        names = [r["configuration"].replace(" (", "\n(") for r in group]
        bars = ax.bar(range(len(group)), [r["training_time_s"] for r in group],
                      color=[REGISTRY[r["strategy"]].color for r in group])
        for bar, r in zip(bars, group):
            if r["configuration"] == LABELS["auto"]:
                bar.set_hatch("//")
        ax.set_xticks(range(len(group)), names, fontsize=6, rotation=30, ha="right")
        ax.set_ylabel("training time (s)")
        ax.set_title(f"{model}, {scenario}" + ("" if scenario == "straggler" else " network"),
                     fontsize=9)
    fig.tight_layout()
    return plots.save(fig, path)


def section(records, path):
    """The adaptive experiment's part of the report, its plot and CSV; None without one. A
    --adapt run outside the preset (no cell name) is only counted: its epochs ran under several
    configurations, which no other table can hold."""
    found = rows(records)
    alone = [r for r in records if r.get("adapt") and
             not (r.get("run_name") or "").startswith(ADAPTIVE_PREFIX)]
    note = (f"\n\n{len(alone)} --adapt run(s) outside the preset are in no table: their "
            f"records' `adapt` and epochs say what they ran") if alone else ""
    if not found:
        return Section("## Adaptive" + note.replace("\n\n", "\n\n", 1)) if alone else None
    return experiment_section(path, "adaptive", markdown(found) + note,
                              lambda png: plot(found, png),
                              [{k: v for k, v in r.items() if k != "_record"} for r in found],
                              COLUMNS)


"""Builds a comparison's outputs from its records alone: summary.csv, report.md, PNG plots.

    python -m experiments.report --results_dir=runs/compare
"""
import csv
import io
import os

from results import plots, scaling_model, straggler
from results.records import load_records, write_text_atomic
from results.summary import COLUMNS, groups, summarize


def _fmt(value, digits=3):
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def _csv(rows, columns):
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def _table(rows):
    head = ("strategy", "N", "threads/task", "epoch time s (min–max)", "examples/s", "speedup",
            "scaling %", "vs all-cores ref", "eval acc", "Δ acc vs baseline")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        name = r["strategy"] + (" (all cores)" if r["role"] == "hardware_reference" else "")
        lines.append("| " + " | ".join([
            name, str(r["n"]), _fmt(r["threads_per_task"]),
            f"{_fmt(r['epoch_time_s'])} ({_fmt(r['epoch_time_min_s'])}–"
            f"{_fmt(r['epoch_time_max_s'])})", _fmt(r["examples_per_sec"], 4),
            _fmt(r["speedup"]), _fmt(r["scaling_percent"]), _fmt(r["speedup_vs_reference"]),
            _fmt(r["final_eval_accuracy"]), _fmt(r["accuracy_delta"], 2)]) + " |")
    return "\n".join(lines)


def findings(rows):
    """Plain-language statements that follow from the numbers (nothing else)."""
    out = []
    for (model, dataset, size, batch), group in groups(rows).items():
        strat = [r for r in group if r["role"] == "strategy" and r["epoch_time_s"]]
        if not strat:
            continue
        best = max(strat, key=lambda r: r["examples_per_sec"])
        where = f"{model} on {dataset}, {size} examples, {batch} per replica"
        out.append(f"- **{where}**: fastest distributed setup is {best['strategy']} with "
                   f"N={best['n']} ({best['examples_per_sec']:.0f} examples/s"
                   + (f", {best['speedup']:.2f}x the 1-thread single device" if best["speedup"]
                      else "") + ").")
        ref = next((r for r in group if r["role"] == "hardware_reference"), None)
        if ref and ref["epoch_time_s"]:
            beat = [r for r in strat if r["epoch_time_s"] < ref["epoch_time_s"]]
            out.append(f"  - One process using all cores runs at {ref['examples_per_sec']:.0f} "
                       f"examples/s; " + (f"{len(beat)} distributed setup(s) beat it." if beat
                                          else "no distributed setup beats it: on one machine "
                                          "the workers share the same cores, so distribution "
                                          "only adds communication."))
        slower = [r for r in strat if r["speedup"] is not None and r["speedup"] < 1]
        for r in slower:
            out.append(f"  - {r['strategy']} N={r['n']} is slower than one device "
                       f"({r['speedup']:.2f}x): per-step synchronization (gradient all-reduce "
                       f"or parameter-server push/pull) costs more than the compute it splits.")
        for strategy in ("mirrored", "multi_worker_mirrored", "parameter_server"):
            pts = sorted(((r["n"], r) for r in strat if r["strategy"] == strategy),
                         key=lambda p: p[0])
            for (n0, a), (n1, b) in zip(pts, pts[1:]):
                if b["examples_per_sec"] <= a["examples_per_sec"] * 1.05:
                    out.append(f"  - {strategy}: going from N={n0} to N={n1} gains "
                               f"{(b['examples_per_sec'] / a['examples_per_sec'] - 1) * 100:+.0f}% "
                               f"throughput: adding workers stops paying here.")
        worst = min((r for r in strat if r["accuracy_delta"] is not None),
                    key=lambda r: r["accuracy_delta"], default=None)
        if worst is not None and worst["accuracy_delta"] < 0:
            out.append(f"  - Accuracy: the largest drop vs the baseline is "
                       f"{worst['accuracy_delta'] * 100:+.1f} points ({worst['strategy']} "
                       f"N={worst['n']}, global batch {worst['global_batch_size']}).")
    return "\n".join(out) or "- Not enough runs for findings (a baseline and a strategy needed)."


def _straggler_table(rows):
    head = ("model", "examples", "strategy", "N", "slowed task", "delay ms/step", "examples/s",
            "throughput kept", "straggler's share of steps")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        kept = r["relative_throughput"]
        share = r["straggler_step_share"]
        lines.append("| " + " | ".join([
            r["model"], str(r["train_examples"]), r["strategy"], str(r["n"]),
            r["straggler_task"] or "–", _fmt(r["delay_ms"]), _fmt(r["examples_per_sec"], 4),
            f"{kept * 100:.0f}%" if kept is not None else "–",
            f"{share * 100:.0f}%" if share is not None else "–"]) + " |")
    return "\n".join(lines)


def markdown(rows, problems, plot_files, target_accuracy, straggler_rows=(), model_section=""):
    parts = ["# Strategy comparison", "",
             "Rebuilt from the records by `python -m experiments.report`. Epoch time is the "
             "median over steady-state epochs (first epoch of every run excluded: tracing) and "
             "repeats. Speedup = T1/TN, scaling % = T1/(N·TN)·100 and efficiency = speedup/N, "
             "with T1 the single device at 1 thread (one worker's share of this machine); "
             "'vs all-cores ref' = T_ref/TN against one process using every core.", ""]
    for (model, dataset, size, batch), group in groups(rows).items():
        parts += [f"## {model}, {dataset}, {size} training examples, {batch} per replica", "",
                  _table(group), ""]
    if target_accuracy:
        parts += [f"Time to {target_accuracy:.0%} eval accuracy (s): " + ", ".join(
            f"{r['strategy']} N={r['n']}: {_fmt(r['time_to_target_s'])}" for r in rows), ""]
    if straggler_rows:
        parts += ["## Straggler experiment", "",
                  "One worker's input pipeline sleeps the given time before each batch "
                  "(`--straggler_task`, `--straggler_delay_ms`). Throughput kept is relative to "
                  "the same setting without a straggler.", "", _straggler_table(straggler_rows),
                  "", *straggler.findings(straggler_rows), ""]
    if model_section:
        parts += [model_section, ""]
    parts += ["## Findings", "", findings(rows), "", "## Plots", ""]
    parts += [f"![{os.path.basename(p)}]({os.path.basename(p)})" for p in plot_files]
    if problems:
        parts += ["", "## Skipped records", ""] + [f"- `{n}`: {why}" for n, why in problems]
    return "\n".join(parts) + "\n"


def build(results_dir, target_accuracy=None, network=scaling_model.Network()):
    """Writes summary.csv, report.md and plots into results_dir. Returns (paths, problems,
    notes): notes are lines worth printing (the scaling model's 2-worker validation)."""
    records, problems = load_records(results_dir)
    if not records:
        raise ValueError(f"no readable records under {os.path.join(results_dir, 'records')}")
    rows = summarize(records, target_accuracy)
    j = lambda name: os.path.join(results_dir, name)  # noqa: E731
    files = [plots.epoch_time(rows, j("epoch_time.png")),
             *plots.scaling(rows, j("throughput_vs_workers.png"),
                            j("efficiency_vs_workers.png")).values(),
             plots.curves(records, j("curves.png"))]
    if len({r["train_examples"] for r in rows}) > 1:
        files.append(plots.size_sweep(rows, j("size_sweep.png")))
    if any(r["communication_fraction"] is not None for r in rows):
        files.append(plots.step_breakdown(rows, j("step_breakdown.png")))
    paths = [write_text_atomic(j("summary.csv"), _csv(rows, COLUMNS))]
    fits = scaling_model.fit(records)
    section = ""
    if fits:
        projected = scaling_model.projection_rows(fits, network)
        files.append(plots.projection(projected, j("projection.png")))
        paths.append(write_text_atomic(j("projection.csv"),
                                       _csv(projected, scaling_model.COLUMNS)))
        section = scaling_model.markdown(fits, projected, network)
    slow = straggler.rows(records)
    if slow:
        files.append(plots.straggler(slow, j("straggler.png")))
        paths.append(write_text_atomic(j("straggler.csv"), _csv(slow, straggler.COLUMNS)))
    paths.append(write_text_atomic(j("report.md"), markdown(rows, problems, files,
                                                            target_accuracy, slow, section)))
    return paths + files, problems, scaling_model.validation_lines(fits)

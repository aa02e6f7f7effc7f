"""Builds a comparison's outputs from its records alone: summary.csv, report.md, PNG plots (and,
with two or more models, zoo.csv and zoo.png: which strategy wins per model, results/zoo.py).

    python -m experiments.report --results_dir=runs/compare
"""
import csv
import io
import os

from results import network as network_experiment
from results import parallelism, plots, scaling_model, straggler, zoo
from results.cells import label, setting_details, setting_title
from results.findings import findings, overhead_sentence
from results.records import load_records, write_text_atomic
from results.summary import COLUMNS, groups, reference_of, summarize


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


def _target(r):
    """Time to target with how many runs reached it: the median is over those runs only."""
    if r["target_reached_runs"] is None:
        return "–"
    return f"{_fmt(r['time_to_target_s'])} ({r['target_reached_runs']}/{r['runs']})"


def _table(rows, target_accuracy=None):
    head = ["strategy", "N", "threads/task", "epoch time s (min–max)", "examples/s", "speedup",
            "scaling %", "vs fastest 1-process", "vs plain TF loop", "cores used", "eval acc",
            "Δ acc vs baseline"]
    if target_accuracy:
        head.append(f"s to {target_accuracy:.0%} acc (runs reached)")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [label(r) if r["role"] != "strategy" else r["strategy"], str(r["n"]),
                 _fmt(r["threads_per_task"]),
                 f"{_fmt(r['epoch_time_s'])} ({_fmt(r['epoch_time_min_s'])}–"
                 f"{_fmt(r['epoch_time_max_s'])})", _fmt(r["examples_per_sec"], 4),
                 _fmt(r["speedup"]), _fmt(r["scaling_percent"]), _fmt(r["speedup_vs_reference"]),
                 _fmt(r["vs_engine_floor"]), _fmt(r["cores_used"], 2),
                 _fmt(r["final_eval_accuracy"]), _fmt(r["accuracy_delta"], 2)]
        if target_accuracy:
            cells.append(_target(r))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cores_by_task(group):
    """Where a local cluster's cores went, task by task (the cpu record's cores_by_task)."""
    parts = [f"{label(r) if r['role'] != 'strategy' else r['strategy']} N={r['n']}: "
             f"{r['cores_by_task'].replace('=', ' ')}"
             for r in group if r["cores_by_task"] and " " in r["cores_by_task"]]
    return ("Cores used by task (local clusters): " + "; ".join(parts) + ".") if parts else ""


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


def markdown(rows, problems, plot_files, target_accuracy, straggler_rows=(), model_section="",
             network_section="", zoo_section="", parallelism_section=""):
    if rows:
        intro = ("Rebuilt from the records by `python -m experiments.report`. Epoch time is the "
                 "median over steady-state epochs (first epoch of every run excluded: tracing) "
                 "and repeats. Speedup = T1/TN, scaling % = T1/(N·TN)·100 and efficiency = "
                 "speedup/N, with T1 the baseline: the single device at one worker's threads "
                 "(its share of this machine); "
                 "'vs fastest 1-process' = T_ref/TN against the fastest single process measured "
                 "in the setting (named under each table); 'vs plain TF loop' = the row's "
                 "throughput over a plain TF loop's (engine_floor) at the same threads per task. "
                 "Times are per example trained (epochs are rounded to whole global batches)."
                 + (f" Time to {target_accuracy:.0%} eval accuracy is the median over the runs "
                    "that reached it, with how many did." if target_accuracy else ""))
    else:  # only experiments with tables of their own (e.g. the parallelism preset)
        intro = ("Rebuilt from the records by `python -m experiments.report`; epoch times are "
                 "medians over steady-state epochs (the first epoch of every run, which traces, "
                 "excluded) and repeats.")
    parts = ["# Strategy comparison", "", intro, ""]
    if zoo_section:  # several models: the answer per model first
        parts += [zoo_section, ""]
    for setting, group in groups(rows).items():
        ref = reference_of(group)
        notes = [f"Fastest single process (the reference): {label(ref)}." if ref else
                 "No single-process run: no reference.", overhead_sentence(group),
                 _cores_by_task(group)]
        parts += [f"## {setting_title(setting)}", "", setting_details(setting), "",
                  _table(group, target_accuracy), "", " ".join(n for n in notes if n), ""]
    if straggler_rows:
        parts += ["## Straggler experiment", "",
                  "One worker's input pipeline sleeps the given time before each batch "
                  "(`--straggler_task`, `--straggler_delay_ms`). Throughput kept is relative to "
                  "the same setting without a straggler.", "", _straggler_table(straggler_rows),
                  "", *straggler.findings(straggler_rows), ""]
    if model_section:
        parts += [model_section, ""]
    if network_section:
        parts += [network_section, ""]
    if parallelism_section:
        parts += [parallelism_section, ""]
    if rows:
        parts += ["## Findings", "", findings(rows), ""]
    parts += ["## Plots", ""]
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
    files = []
    if rows:  # none when every record belongs to an experiment of its own (e.g. parallelism)
        files += [plots.epoch_time(rows, j("epoch_time.png")),
                  *plots.scaling(rows, j("throughput_vs_workers.png"),
                                 j("efficiency_vs_workers.png")).values()]
    files.append(plots.curves(records, j("curves.png")))
    if len({r["train_examples"] for r in rows if r["role"] == "strategy"}) > 1:
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
    across = zoo.rows(rows, records)
    if across:
        files.append(plots.zoo(across, j("zoo.png")))
        paths.append(write_text_atomic(j("zoo.csv"), _csv(zoo.csv_rows(across), zoo.COLUMNS)))
    slow = straggler.rows(records)
    if slow:
        files.append(plots.straggler(slow, j("straggler.png")))
        paths.append(write_text_atomic(j("straggler.csv"), _csv(slow, straggler.COLUMNS)))
    fitted = network_experiment.models(records)
    shaped = network_experiment.rows(records)
    network_section = ""
    if shaped:
        files.append(plots.network(shaped, fitted, j("network.png")))
        paths.append(write_text_atomic(j("network.csv"), _csv(shaped,
                                                              network_experiment.COLUMNS)))
        network_section = network_experiment.markdown(shaped, fitted)
    parallel = parallelism.rows(records)
    if parallel:
        files.append(plots.parallelism(parallel, j("parallelism.png")))
        paths.append(write_text_atomic(j("parallelism.csv"), _csv(
            [{**r, "stage_busy_shares": " + ".join(f"{b:.3f}" for b in r["stage_busy_shares"])
              if r["stage_busy_shares"] else None} for r in parallel], parallelism.COLUMNS)))
    paths.append(write_text_atomic(j("report.md"), markdown(
        rows, problems, files, target_accuracy, slow, section, network_section,
        zoo.markdown(across) if across else "",
        parallelism.markdown(parallel) if parallel else "")))
    return paths + files, problems, scaling_model.validation_lines(fits)

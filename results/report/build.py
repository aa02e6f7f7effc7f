"""Builds a comparison's outputs from its records alone: summary.csv, report.md, PNG plots (and,
with two or more models, zoo.csv and zoo.png: which strategy wins per model, results/report/zoo.py).

    python -m experiments.report --results_dir=runs/compare
"""
import os

from results.model import scaling_model
from results.report import network as network_experiment
from results.report import (adaptive, hparams, parallelism, plots, projections, reducers, straggler,
                            timeline, zoo)
from results.records.cells import (is_adaptive_run, is_collectives_run, label, setting_details,
                                   setting_title)
from results.records.store import load_records, write_text_atomic
from results.report.findings import findings, overhead_sentence
from results.report.summary import COLUMNS, groups, reference_of, summarize
from results.report.tables import csv_text, fmt, markdown_table


def _target(r):
    """Time to target with how many runs reached it: the median is over those runs only."""
    if r["target_reached_runs"] is None:
        return "–"
    return f"{fmt(r['time_to_target_s'])} ({r['target_reached_runs']}/{r['runs']})"


def _compute(r):
    """Achieved training GFLOP/s and its share of the matmul peak (experiments/measure/flops.py):
    low with little communication is slow kernels or input, not the strategy."""
    if r.get("achieved_gflops") is None:
        return "–"
    share = f" ({r['share_of_peak'] * 100:.0f}%)" if r.get("share_of_peak") is not None else ""
    return f"{r['achieved_gflops']:.1f}{share}"


def _placement(row):
    """' pinned' after the threads of workers that had cores of their own (--pin_workers)."""
    return {"yes": " pinned", "mixed": " (pinned in some runs)"}.get(row.get("pinned"), "")


def _table(rows, target_accuracy=None):
    head = ["strategy", "N", "threads/task", "epoch time s (min–max)", "examples/s", "speedup",
            "scaling %", "vs fastest 1-process", "vs plain TF loop", "cores used",
            "GFLOP/s (of peak)", "eval acc", "Δ acc vs baseline"]
    if target_accuracy:
        head.append(f"s to {target_accuracy:.0%} acc (runs reached)")
    cells = []
    for r in rows:
        cells.append([label(r) if r["role"] != "strategy" else r["strategy"], str(r["n"]),
                      fmt(r["threads_per_task"]) + _placement(r),
                      f"{fmt(r['epoch_time_s'])} ({fmt(r['epoch_time_min_s'])}–"
                      f"{fmt(r['epoch_time_max_s'])})", fmt(r["examples_per_sec"], 4),
                      fmt(r["speedup"]), fmt(r["scaling_percent"]),
                      fmt(r["speedup_vs_reference"]), fmt(r["vs_engine_floor"]),
                      fmt(r["cores_used"], 2), _compute(r), fmt(r["final_eval_accuracy"]),
                      fmt(r["accuracy_delta"], 2)] + ([_target(r)] if target_accuracy else []))
    return markdown_table(head, cells)


def _cores_by_task(group):
    """Where a local cluster's cores went, task by task (the cpu record's cores_by_task)."""
    parts = [f"{label(r) if r['role'] != 'strategy' else r['strategy']} N={r['n']}: "
             f"{r['cores_by_task'].replace('=', ' ')}"
             for r in group if r["cores_by_task"] and " " in r["cores_by_task"]]
    return ("Cores used by task (local clusters): " + "; ".join(parts) + ".") if parts else ""


def markdown(rows, problems, plot_files, target_accuracy, sections=()):
    """report.md: the intro, the sections marked first (the zoo's answer per model; the host
    checks when they saw cores taken away), a table per setting, every other section in order,
    the findings, the plots."""
    if rows:
        intro = ("Rebuilt from the records by `python -m experiments.report`. Epoch time is the "
                 "median over steady-state epochs (first epoch of every run excluded: tracing) "
                 "and repeats. Speedup = T1/TN, scaling % = T1/(N·TN)·100 and efficiency = "
                 "speedup/N, with T1 the baseline: the single device at one worker's threads "
                 "(its share of this machine); "
                 "'vs fastest 1-process' = T_ref/TN against the fastest single process measured "
                 "in the setting (named under each table); 'vs plain TF loop' = the row's "
                 "throughput over a plain TF loop's (engine_floor) at the same threads per task; "
                 "GFLOP/s = 3 x the model's forward FLOPs per example x examples/s, against a "
                 "matmul's FLOP/s on the processes that trained at once (its peak). "
                 "'pinned': each of the N workers had cores of its own (--pin_workers: N >= 2 "
                 "workers where they fit this machine's cores, one PSS worker where a core is "
                 "left; the chief and ps on the cores they leave, if any). "
                 "Times are per example trained (epochs are rounded to whole global batches)."
                 + (f" Time to {target_accuracy:.0%} eval accuracy is the median over the runs "
                    "that reached it, with how many did." if target_accuracy else ""))
    else:  # only experiments with tables of their own (e.g. the parallelism preset)
        intro = ("Rebuilt from the records by `python -m experiments.report`; epoch times are "
                 "medians over steady-state epochs (the first epoch of every run, which traces, "
                 "excluded) and repeats.")
    parts = ["# Strategy comparison", "", intro, ""]
    parts += [p for section in sections if section.first for p in (section.markdown, "")]
    for setting, group in groups(rows).items():
        ref = reference_of(group)
        notes = [f"Fastest single process (the reference): {label(ref)}." if ref else
                 "No single-process run: no reference.", overhead_sentence(group),
                 _cores_by_task(group)]
        parts += [f"## {setting_title(setting)}", "", setting_details(setting), "",
                  _table(group, target_accuracy), "", " ".join(n for n in notes if n), ""]
    parts += [p for section in sections if not section.first for p in (section.markdown, "")]
    if rows:
        parts += ["## Findings", "", findings(rows), ""]
    parts += ["## Plots", ""]
    parts += [f"![{os.path.basename(p)}]({os.path.basename(p)})" for p in plot_files]
    if problems:
        parts += ["", "## Skipped records", ""] + [f"- `{n}`: {why}" for n, why in problems]
    return "\n".join(parts) + "\n"


def build(results_dir, target_accuracy=None, network=scaling_model.Network()):
    """Writes summary.csv, report.md and plots into results_dir. Returns (paths, problems,
    notes): lines worth printing as they are (the scaling model's predictions of this machine's
    runs, and where the HParams trials went)."""
    records, problems = load_records(results_dir)
    if not records:
        raise ValueError(f"no readable records under {os.path.join(results_dir, 'records')}")
    # The collectives cells calibrate synchronization and nothing else: the scaling model's, and
    # the network experiment's shaped all-reduce; no row, curve, straggler, zoo or parallelism
    # figure is made from them.
    sweeps = [r for r in records if is_collectives_run(r)]
    # The adaptive experiment's runs are its table's alone (several configurations and
    # networks in one record): in no other row, fit or figure.
    adaptive_runs = [r for r in records if is_adaptive_run(r)]
    records = [r for r in records if not is_collectives_run(r) and not is_adaptive_run(r)]
    rows = summarize(records, target_accuracy)
    path = lambda name: os.path.join(results_dir, name)  # noqa: E731
    files = []
    if rows:  # none when every record belongs to an experiment of its own (e.g. parallelism)
        files += [plots.epoch_time(rows, path("epoch_time.png")),
                  *plots.scaling(rows, path("throughput_vs_workers.png"),
                                 path("efficiency_vs_workers.png")).values()]
    files.append(plots.curves(records, path("curves.png")))
    if len({r["train_examples"] for r in rows if r["role"] == "strategy"}) > 1:
        files.append(plots.size_sweep(rows, path("size_sweep.png")))
    if any(r["communication_fraction"] is not None for r in rows):
        files.append(plots.step_breakdown(rows, path("step_breakdown.png")))
    paths = [write_text_atomic(path("summary.csv"), csv_text(rows, COLUMNS))]
    # the HParams tab (results/report/hparams.py); a gs:// report has none, and says so in its notes
    trials = hparams.write(rows, path("tensorboard"))
    fits = scaling_model.fit(records + sweeps)
    # Each experiment's part of the report, in the report's order: a new table is a module
    # with a section() and a line here.
    sections = [s for s in (zoo.section(rows, records, path), straggler.section(records, path),
                            timeline.section(records, path),
                            projections.section(fits, network, path),
                            network_experiment.section(records + sweeps, path),
                            reducers.section(records, path),
                            parallelism.section(records, path),
                            adaptive.section(adaptive_runs, path))
                if s is not None]
    for section in sections:
        files += section.plots
        paths += section.files
    paths.append(write_text_atomic(path("report.md"), markdown(
        rows, problems, files, target_accuracy, sections)))
    notes = [f"wrote {trials[1]} HParams trials in {trials[0]} (tensorboard --logdir "
             f"{path('tensorboard')})" if trials else
             "no HParams trials: no summary rows, or a gs:// results directory (they are "
             "written for a local one only)"]
    return paths + files, problems, notes


def build_and_say(results_dir, target_accuracy, network):
    """`build`, then what it skipped, the scaling model's lines and the files it wrote, on
    stdout: what `experiments.report` and `experiments.compare` print."""
    paths, problems, notes = build(results_dir, target_accuracy, network)
    for name, why in problems:
        print(f"skipped record {name}: {why}")
    for line in notes:
        print(line)
    for p in paths:
        print(f"wrote {p}")

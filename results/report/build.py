"""Builds a comparison's outputs from its records alone: summary.csv, report.md, PNG plots (and,
with two or more models, zoo.csv and zoo.png: which strategy wins per model, results/report/zoo.py).

    python -m experiments.report --results_dir=runs/compare
"""
import os

from results.model import scaling_model
from results.report import network as network_experiment
from results.report import (adaptive, decision, hparams, parallelism, plots, projections,
                            reducers, straggler, timeline, zoo)
from results.records.cells import (is_adaptive_run, is_collectives_run, label, setting_details,
                                   setting_of_row, setting_title)
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
    """Achieved training GFLOP/s (experiments/measure/flops.py): low with little communication
    is slow kernels or input, not the strategy. No share of a peak: the processes that train at
    once differ from row to row, and a share of each row's own peak would mean something else
    in every row (summary.csv keeps share_of_peak)."""
    if r.get("achieved_gflops") is None:
        return "–"
    return f"{r['achieved_gflops']:.1f}"


def _placement(row):
    """' pinned' after the threads of workers that had cores of their own (--pin_workers)."""
    return {"yes": " pinned", "mixed": " (pinned in some runs)"}.get(row.get("pinned"), "")


def _table(rows, target_accuracy=None):
    head = ["strategy", "N", "threads/task", "epoch time s (min–max)", "examples/s", "speedup",
            "scaling %", "vs fastest 1-process", "vs plain TF loop", "cores used",
            "GFLOP/s", "eval acc", "Δ acc vs baseline"]
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


_DEFINITIONS = (
    "Rebuilt from the records by `python -m experiments.report`. Examples/s and epoch times are "
    "medians over the steady epochs (the first epoch of every run traces and is left out) and "
    "repeats; the range is the slowest and fastest steady epoch. One baseline: T1, one device "
    "on one core (the 1-thread baseline). Speedup = T1/TN; scaling % = T1/(N·TN)·100; "
    "efficiency = speedup/N. 'vs fastest 1-process' = T_ref/TN, T_ref the fastest single process "
    "measured in the setting; 'vs plain TF loop': the row's throughput over a plain TF loop's "
    "(engine_floor) at the same threads per task. GFLOP/s = 3 x the model's forward FLOPs per "
    "example x examples/s. 'pinned': each worker had cores of its own (--pin_workers). Compute "
    "and sync ms: medians over the workers of the in-step timeline (compute = input ready to "
    "gradients ready; sync = waiting for peers plus the synchronization and update).")


def _answer(group, records, projected, plot_files, assumption):
    """A setting's answer: the decision, the compact table, the throughput plot and, when
    projected, the projections with their assumptions in one line."""
    said = decision.lines(group, records, projected)
    parts = [*(f"- {line}" for line in said), ""] if said else []
    compact = decision.table(group, records)
    if compact:
        parts += [compact, ""]
    plot = next((p for p in plot_files if os.path.basename(p).startswith("throughput")), None)
    if plot:
        parts += [f"![throughput]({os.path.basename(plot)})", ""]
    if projected:
        parts += [projections.compact(projected), "", assumption, ""]
    return parts


def markdown(rows, problems, plot_files, target_accuracy, sections=(), records=(),
             projected=(), assumption=""):
    """report.md: per setting the answer first (decision, compact table, throughput plot),
    the sections marked first (the zoo's answer per model), then the appendix: definitions,
    the full table per setting, every other section, the findings and the plots."""
    parts = ["# Strategy comparison", ""]
    parts += [p for section in sections if section.first for p in (section.markdown, "")]
    settings = groups(rows)
    for setting, group in settings.items():
        if len(settings) > 1:
            parts += [f"## {setting_title(setting)}", ""]
        else:
            parts += [f"{setting_title(setting)}.", ""]
        parts += _answer(group, records, [r for r in projected if _same(r, setting)],
                         plot_files, assumption)
    if rows:
        parts += ["## Appendix", "", _DEFINITIONS + (
            f" Time to {target_accuracy:.0%} eval accuracy is the median over the runs that "
            "reached it, with how many did." if target_accuracy else ""), ""]
        for setting, group in settings.items():
            ref = reference_of(group)
            notes = [f"Fastest single process (the reference): {label(ref)}." if ref else
                     "No single-process run: no reference.", overhead_sentence(group),
                     _cores_by_task(group)]
            parts += [f"### All runs: {setting_title(setting)}", "", setting_details(setting),
                      "", _table(group, target_accuracy), "",
                      " ".join(n for n in notes if n), ""]
    else:  # only experiments with tables of their own (the parallelism preset, ...)
        parts += ["Rebuilt from the records by `python -m experiments.report`; epoch times are "
                  "medians over steady-state epochs (the first epoch of every run, which "
                  "traces, left out) and repeats.", ""]
    # the rest under the appendix's heading when there is one, at the top level when not
    level = "###" if rows else "##"
    parts += [_demote(p) if rows else p for section in sections if not section.first
              for p in (section.markdown, "")]
    if rows:
        parts += [f"{level} Findings", "", findings(rows), ""]
    parts += [f"{level} Plots", ""]
    parts += [f"![{os.path.basename(p)}]({os.path.basename(p)})" for p in plot_files]
    if problems:
        parts += ["", f"{level} Skipped records", ""] + [f"- `{n}`: {why}" for n, why in problems]
    return "\n".join(parts) + "\n"


def _same(projection_row, setting):
    return setting_of_row(projection_row) == tuple(setting)


def _demote(text):
    """A section's headings one level down: in the appendix they sit under its heading."""
    return "\n".join("#" + line if line.startswith("## ") else line
                     for line in text.split("\n"))


def build(results_dir, target_accuracy=None, network=scaling_model.Network()):
    """Writes summary.csv, report.md and plots into results_dir. Returns (paths, problems,
    notes): lines worth printing as they are (where the HParams trials went, and each
    setting's decision)."""
    records, problems = load_records(results_dir)
    if not records:
        raise ValueError(f"no readable records under {os.path.join(results_dir, 'records')}")
    # The collectives cells calibrate the network experiment's shaped all-reduce and nothing
    # else: no row, curve, straggler, zoo or parallelism figure is made from them.
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
    projected = projections.projection_rows(fits, network)
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
        rows, problems, files, target_accuracy, sections, records, projected,
        projections.assumption_line(network))))
    notes = [f"wrote {trials[1]} HParams trials in {trials[0]} (tensorboard --logdir "
             f"{path('tensorboard')})" if trials else
             "no HParams trials: no summary rows, or a gs:// results directory (they are "
             "written for a local one only)"]
    for setting, group in groups(rows).items():
        said = decision.lines(group, records, [r for r in projected if _same(r, setting)],
                              width=decision.MAX_LINE - 2)  # indented by 2 on the terminal
        if said:
            notes += ["", f"{setting_title(setting)}:", *(f"  {line}" for line in said)]
    return paths + files, problems, notes


def build_and_say(results_dir, target_accuracy, network):
    """`build`, then what it skipped, where the HParams went, the decision and the files it
    wrote (report.md first), on stdout: what `experiments.report` and `experiments.compare`
    print."""
    paths, problems, notes = build(results_dir, target_accuracy, network)
    for name, why in problems:
        print(f"skipped record {name}: {why}")
    for line in notes:
        print(line)
    report = next((p for p in paths if p.endswith("report.md")), None)
    print(f"\nwrote {len(paths)} files in {results_dir}" + (f"; read {report}" if report else ""))

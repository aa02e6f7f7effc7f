"""Data, model and hybrid parallelism side by side: one device, data parallel (MWMS), the model
split into S pipeline stages with M micro-batches (model_parallel), and both (hybrid), per model
(`python -m experiments.compare --preset=parallelism`; any record of a pipelined strategy, or of
a comparison cell named `parallel-...`, lands here and not in the scaling tables).

A row per configuration of a model's setting: steady epoch time and throughput (medians over
repeats), throughput against the setting's one-device row, final eval accuracy, peak memory per
device (the largest device's: experiments/measure/memory.py, measured on GPUs, estimated from tensor
sizes on a CPU), the communication share of a step (gradient all-reduce and activations between
stages, each timed alone by the record's probes) and, for pipelines, the bubble measured next to
the GPipe formula for equal stages and for the split's measured stage times.
"""
import collections
import textwrap

from results.records import metrics
from results.records.cells import SETTING_KEYS, is_parallelism_run, setting_of, sort_key
from results.report import plots
from results.report.tables import experiment_section, markdown_table
from strategies import BASELINE, REGISTRY, kind

COLUMNS = ("model", "dataset", "train_examples", "global_batch_size", "configuration",
           "strategy", "workers", "num_stages", "microbatches", "pipeline_schedule",
           "tensor_parallel", "devices", "runs",
           "epoch_time_s", "epoch_time_min_s", "epoch_time_max_s", "examples_per_sec",
           "vs_one_device", "final_eval_accuracy", "peak_memory_per_device_mb",
           "peak_memory_kind", "communication_share", "activation_mb_per_step",
           "bubble_measured", "bubble_formula", "bubble_formula_unequal_stages",
           "stage_busy_shares")
_ORDER = {name: i for i, name in enumerate(REGISTRY)}  # the registry's order


def configuration(record):
    """'model parallel S=2 M=4', 'tensor parallel T=2', 'data parallel (MWMS) N=2', 'hybrid
    N=2 x S=2 M=4', 'planner's choice: ...', ..., with what else the run was given: a
    straggler, an emulated network."""
    name = _configuration(record)
    straggler = record.get("straggler") or {}
    if straggler.get("task"):
        name += f", {straggler['task']} " + (
            f"+{straggler['delay_ms']:g} ms/step" if straggler.get("delay_ms") else
            f"slowed {straggler.get('schedule')} (epoch:ms/step)")
    network = record.get("network") or {}
    if network.get("emulated_gbps"):
        name += f", {network['emulated_gbps']:g} Gbit/s"
    return name


def _configuration(record):
    name = _topology(record)
    if (record.get("config") or {}).get("plan"):  # --strategy=auto chose it
        return f"planner's choice: {name}"
    return name


def _split(record):
    """'S=2 M=4', 'S=2 M=8 1F1B x T=2', 'T=2' (one stage): how a pipelined run split its model."""
    pipe = record.get("pipeline") or {}
    shards = (record.get("tensor_parallel") or {}).get("shards")
    stages = f"S={pipe.get('num_stages')} M={pipe.get('microbatches')}" + \
        (" 1F1B" if pipe.get("schedule") == "1f1b" else "")
    if shards and pipe.get("num_stages") == 1:
        return f"T={shards}"
    return stages + (f" x T={shards}" if shards else "")


def _topology(record):
    s, n = record["strategy"], record.get("num_workers") or 1
    pipe = record.get("pipeline") or {}
    k = kind(s)
    if k.pipelined and k.all_reduce:
        return f"hybrid N={n} x {_split(record)}"
    if k.pipelined:
        return ("tensor parallel " if pipe.get("num_stages") == 1 else "model parallel ") + \
            _split(record)
    if k.single_device:
        return "one device"
    if k.all_reduce:
        return f"data parallel ({k.short}) N={n}"
    if k.local_replicas:
        return f"data parallel ({s}) N={record['num_replicas_in_sync']}"
    return f"{s} N={n}"


def _devices(record):
    """Devices computing: a split model's per process (its stages x shards) times the workers;
    else the replicas (one process's local replicas, or a worker each)."""
    if kind(record["strategy"]).pipelined:
        return max(1, len(record.get("memory_per_device") or [])) * \
            (record.get("num_workers") or 1)
    return max(record.get("num_replicas_in_sync") or 1, record.get("num_workers") or 1)


def _row(setting, config, runs):
    first = runs[0]
    s = dict(zip(SETTING_KEYS, setting))
    times = metrics.spread([t for r in runs for t in _steady(r, "time_s")])
    rates = metrics.spread([t for r in runs for t in _steady(r, "examples_per_sec")])
    memory = [max((d["bytes"] for d in r.get("memory_per_device") or []
                   if d["bytes"] is not None), default=None) for r in runs]
    kinds = sorted({d["kind"] for r in runs for d in r.get("memory_per_device") or []})
    pipes = [r.get("pipeline") or {} for r in runs]
    bubble = [p.get("bubble") or {} for p in pipes]
    comm = [r.get("communication") or {} for r in runs]
    # one stage (tensor parallelism alone) has no pipeline bubble to speak of
    bubble = [b if p.get("num_stages", 0) > 1 else {} for b, p in zip(bubble, pipes)]
    busy = [[st.get("busy_share") for st in p.get("stages", [])] for p in pipes
            if p.get("num_stages", 0) > 1]
    return {
        "model": s["model"], "dataset": s["dataset"], "train_examples": s["train_examples"],
        "global_batch_size": first["global_batch_size"], "configuration": config,
        "strategy": first["strategy"], "workers": first.get("num_workers") or 1,
        "num_stages": (first.get("pipeline") or {}).get("num_stages"),
        "microbatches": (first.get("pipeline") or {}).get("microbatches"),
        "pipeline_schedule": (first.get("pipeline") or {}).get("schedule"),
        "tensor_parallel": (first.get("tensor_parallel") or {}).get("shards"),
        "devices": _devices(first), "runs": len(runs),
        "epoch_time_s": times["median"], "epoch_time_min_s": times["min"],
        "epoch_time_max_s": times["max"], "examples_per_sec": rates["median"],
        "vs_one_device": None,
        "final_eval_accuracy": metrics.spread([r["final_eval_accuracy"] for r in runs])["median"],
        "peak_memory_per_device_mb": _mb(metrics.spread(memory)["median"]),
        "peak_memory_kind": " / ".join(kinds) or None,
        "communication_share": metrics.spread([r.get("communication_fraction")
                                               for r in runs])["median"],
        "activation_mb_per_step": _mb(metrics.spread([c.get("activation_bytes")
                                                      for c in comm])["median"]),
        "bubble_measured": metrics.spread([b.get("measured") for b in bubble])["median"],
        "bubble_formula": metrics.spread([b.get("formula") for b in bubble])["median"],
        "bubble_formula_unequal_stages": metrics.spread(
            [b.get("formula_unequal_stages") for b in bubble])["median"],
        "stage_busy_shares": ([metrics.spread(list(v))["median"] for v in zip(*busy)]
                              if busy else None),
    }


def _steady(record, key):
    return [e[key] for e in metrics.steady_epochs(record["epochs"]) if e.get(key) is not None]


def _mb(value):
    return None if value is None else value / 1e6


def rows(records):
    """One row per (setting, configuration), one device first, then by strategy."""
    cells = collections.defaultdict(list)
    for r in records:
        if is_parallelism_run(r):
            cells[(setting_of(r), configuration(r))].append(r)
    out = [_row(setting, config, runs) for (setting, config), runs in cells.items()]
    by_setting = collections.defaultdict(list)
    for (setting, _), row in zip(cells, out):
        by_setting[setting].append(row)
    ordered = []
    for setting in sorted(by_setting, key=sort_key):
        group = sorted(by_setting[setting], key=lambda r: (_ORDER.get(r["strategy"], 9),
                                                           r["configuration"]))
        one = next((r for r in group if r["strategy"] == BASELINE
                    and r["examples_per_sec"]), None)
        for r in group:
            if one and r["examples_per_sec"]:
                r["vs_one_device"] = r["examples_per_sec"] / one["examples_per_sec"]
        ordered += group
    return ordered


def _f(value, fmt):
    return "–" if value is None else format(value, fmt)


def markdown(parallel_rows):
    """The report's "Data, model and hybrid parallelism" section: a table and what it shows."""
    head = ["model (data, examples, global batch)", "configuration", "devices",
            "epoch time s (min–max)", "examples/s", "vs one device", "eval acc",
            "peak memory / device MB", "communication share", "bubble measured (formula; "
            "for these stages)", "stage busy shares"]
    lines = ["## Data, model and hybrid parallelism", "",
             "Each configuration on the same model, data and global batch. Peak memory per "
             "device: the largest device's (a GPU's allocator peak; on a CPU an estimate from "
             "tensor sizes: parameters, gradients, optimizer slots and the activations held "
             "until backward). Communication share: gradient all-reduce plus activations "
             "between stages, each timed alone after training, over the step time. Bubble: the "
             "pipeline's idle share measured with timestamps inside the step, next to GPipe's "
             "(S-1)/(M+S-1) and the same formula for this split's unequal stage times; stage "
             "busy shares: each stage's working share of the pipeline's span (they sum to "
             "more than 1 where the stages worked at the same time).", ""]
    cells = []
    for r in parallel_rows:
        bubble = "–" if r["bubble_measured"] is None else (
            f"{r['bubble_measured']:.2f} ({_f(r['bubble_formula'], '.2f')}; "
            f"{_f(r['bubble_formula_unequal_stages'], '.2f')})")
        busy = "–" if not r["stage_busy_shares"] else " + ".join(
            _f(b, ".2f") for b in r["stage_busy_shares"])
        memory = _f(r["peak_memory_per_device_mb"], ".1f") + (
            "*" if (r["peak_memory_kind"] or "").startswith("estimate") else "")
        cells.append([
            f"{r['model']} ({r['dataset']}, {r['train_examples']}, {r['global_batch_size']})",
            r["configuration"], str(r["devices"]),
            f"{_f(r['epoch_time_s'], '.3g')} ({_f(r['epoch_time_min_s'], '.3g')}–"
            f"{_f(r['epoch_time_max_s'], '.3g')})", _f(r["examples_per_sec"], ".0f"),
            _f(r["vs_one_device"], ".2f") + ("x" if r["vs_one_device"] else ""),
            _f(r["final_eval_accuracy"], ".3f"), memory,
            _f(r["communication_share"] and r["communication_share"] * 100, ".1f") +
            ("%" if r["communication_share"] is not None else ""), bubble, busy])
    lines += [markdown_table(head, cells), "",
              "\\* estimated from tensor sizes (CPU devices share one process's memory).",
              "", *findings(parallel_rows)]
    return "\n".join(lines)


def _bubble_sentence(row):
    """How a pipeline's measured bubble compares with the formulas: as predicted, explained by
    the split's unequal stages, smaller (stages overlapping more than the schedule counts), or
    stages that never overlapped (a bubble of (S-1)/S at M > 1)."""
    measured, equal = row["bubble_measured"], row["bubble_formula"]
    unequal, stages = row["bubble_formula_unequal_stages"], row["num_stages"] or 1
    if measured is None or equal is None:
        return ""
    text = f"{row['configuration']}: bubble {measured:.2f} measured, {equal:.2f} by GPipe's " \
           f"formula"
    if unequal is not None and abs(unequal - equal) > 0.02:
        text += f", {unequal:.2f} for this split's unequal stage times"
    if (row["microbatches"] or 1) > 1 and measured >= 0.9 * (stages - 1) / stages:
        return text + ("; the stages did not overlap (a bubble of (S-1)/S whatever M), as when "
                       "they share one thread pool (docs/parallelism.md).")
    # The unequal-stage formula is the schedule of this very split: the one to compare with.
    schedule = unequal if unequal is not None else equal
    if abs(measured - schedule) <= 0.03:
        return text + (": the split's imbalance explains the difference."
                       if abs(schedule - equal) > 0.02 else " (as predicted).")
    if measured < schedule:
        return text + (": less idle than the schedule counts: a stage's backward can start as "
                       "soon as its output's gradient is ready, while the next stage still "
                       "computes its weights' gradients, and a block's busy time includes any "
                       "wait for a core.")
    return text + ": more idle than the schedule explains (threads shared with other work, "\
        "e.g. a second worker on the same cores)."


def findings(parallel_rows):
    """Sentences on what the table shows: the fastest configuration per model, memory per
    device under the split, and whether the pipeline's stages overlapped."""
    out = []
    for model in dict.fromkeys(r["model"] for r in parallel_rows):
        group = [r for r in parallel_rows if r["model"] == model and r["examples_per_sec"]]
        if not group:
            continue
        best = max(group, key=lambda r: r["examples_per_sec"])
        one = next((r for r in group if r["strategy"] == BASELINE), None)
        text = f"- {model}: fastest is {best['configuration']} ({best['examples_per_sec']:.0f} " \
               f"examples/s"
        text += f", {best['vs_one_device']:.2f}x one device)." if best["vs_one_device"] else ")."
        split = [r for r in group if kind(r["strategy"]).pipelined
                 and not kind(r["strategy"]).all_reduce
                 and r["peak_memory_per_device_mb"]]
        if one and one["peak_memory_per_device_mb"] and split:
            least = min(split, key=lambda r: r["peak_memory_per_device_mb"])
            text += (f" Splitting it ({least['configuration']}) needs "
                     f"{least['peak_memory_per_device_mb']:.1f} MB on its largest device "
                     f"against {one['peak_memory_per_device_mb']:.1f} MB on one device.")
        out.append(text)
        out += [f"  - {sentence.strip()}" for sentence in map(_bubble_sentence, group)
                if sentence]
    return out


def plot(parallel_rows, path):
    """Per model (results/report/parallelism.py): throughput relative to one device and peak memory
    per device of each configuration, side by side; a pipeline's measured bubble written on its
    bar."""
    models = list(dict.fromkeys(r["model"] for r in parallel_rows))
    fig, axes = plots.plt.subplots(len(models), 2, figsize=(13, 4 * len(models)), squeeze=False)
    for (speed, memory), model in zip(axes, models):
        group = [r for r in parallel_rows if r["model"] == model]
        names = ["\n".join(textwrap.wrap(r["configuration"], 15)) for r in group]
        x = range(len(group))
        bars = speed.bar(x, [r["vs_one_device"] or 0 for r in group],
                         color=[REGISTRY[r["strategy"]].color for r in group])
        for bar, r in zip(bars, group):
            if r["bubble_measured"] is not None:
                speed.text(bar.get_x() + bar.get_width() / 2, bar.get_height(),
                           f"bubble {r['bubble_measured']:.2f}\n(GPipe {r['bubble_formula']:.2f})",
                           ha="center", va="bottom", fontsize=7)
        speed.axhline(1.0, color="k", ls=":", lw=1, label="one device")
        speed.set_xticks(x, names, fontsize=7)
        speed.set_ylabel("throughput / one device")
        speed.set_title(f"{model}: examples/s relative to one device", fontsize=9)
        speed.set_ylim(top=speed.get_ylim()[1] * 1.2)
        speed.legend(fontsize=7, loc="upper right")
        memory.bar(x, [r["peak_memory_per_device_mb"] or 0 for r in group],
                   color=[REGISTRY[r["strategy"]].color for r in group])
        memory.set_xticks(x, names, fontsize=7)
        estimated = any((r["peak_memory_kind"] or "").startswith("estimate") for r in group)
        memory.set_ylabel("MB on the largest device" + (" (estimate)" if estimated else ""))
        memory.set_title(f"{model}: peak memory per device", fontsize=9)
    fig.tight_layout()
    return plots.save(fig, path)


def section(records, path):
    """The parallelism experiment's part of the report, its plot and CSV; None without one."""
    parallel = rows(records)
    if not parallel:
        return None
    csv_rows = [{**r, "stage_busy_shares": " + ".join(f"{b:.3f}" for b in r["stage_busy_shares"])
                 if r["stage_busy_shares"] else None} for r in parallel]
    return experiment_section(path, "parallelism", markdown(parallel),
                              lambda png: plot(parallel, png), csv_rows, COLUMNS)

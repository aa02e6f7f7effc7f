"""PNG plots of a comparison, from summary rows and records: the comparison-wide figures, and
the helpers every experiment's own figure uses (its module draws it: zoo, straggler, network,
parallelism). Every figure has a title, axis labels with units and a legend; files are written
atomically."""
import collections

import matplotlib

matplotlib.use("Agg")  # headless: CI, containers, Vertex
import matplotlib.pyplot as plt  # noqa: E402

from results.records.store import write_atomic  # noqa: E402
from results.records.cells import (ENGINE_FLOOR, ENGINE_FLOOR_RUNS, REFERENCE_RUN, SETTING_KEYS,
                                   is_machine_limit,
                                   reducer_of, role_of, setting_of, sort_key, workers_of)
from results.report.summary import groups as _groups, reference_of  # noqa: E402
from strategies import COMPARED, REGISTRY  # noqa: E402

def short(strategy):
    """A strategy's tick label (strategies.REGISTRY); the engine floor is no strategy."""
    return "TF loop" if strategy == ENGINE_FLOOR else REGISTRY[strategy].short


def _tick(row):
    """A bar's label: strategy, N and, for single-device rows, which one."""
    tag = {REFERENCE_RUN: "\n(all cores)", ENGINE_FLOOR: f"\n({row['threads_per_task']} thr.)"}
    return f"{short(row['strategy'])}\nN={row['n']}" + tag.get(row["role"], "")


def title(setting):
    s = dict(zip(SETTING_KEYS, setting))
    batch = f"global batch {s['global_batch_size']}" if s["global_batch_size"] else \
        f"{s['batch_size_per_replica']}/replica"
    return f"{s['model']}, {s['dataset']}, {s['train_examples']} examples, {batch}"


def save(fig, path):
    write_atomic(path, lambda f: fig.savefig(f, format="png", dpi=110, bbox_inches="tight"))
    plt.close(fig)
    return path


def bandwidth_axis(shaped):
    """(grid of bandwidths for a model's line, x of the real loopback) of an axis over the
    emulated bandwidths `shaped` (Gbit/s): a log range around them, the real loopback drawn at
    its right edge (finish it with real_loopback)."""
    shaped = shaped or [1.0]
    low, high = min(shaped) / 2, max(shaped) * 4
    return [low * (high / low) ** (i / 100) for i in range(101)], high


def real_loopback(ax, x):
    """Marks the real loopback at x on a bandwidth axis; log scale, throughput from 0."""
    ax.axvline(x, color="0.6", ls=":", lw=1)
    ax.annotate("real\nloopback", (x, 0), xytext=(-4, 4), textcoords="offset points",
                ha="right", fontsize=8, color="0.4")
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)


def epoch_time(rows, path):
    groups = _groups(rows)
    width = max(6.0, 0.9 * max(len(g) for g in groups.values()))
    fig, axes = plt.subplots(1, len(groups), figsize=(width * len(groups), 4.2), squeeze=False)
    for ax, (setting, group) in zip(axes[0], groups.items()):
        labels = [_tick(r) for r in group]
        med = [r["epoch_time_s"] for r in group]
        err = [[m - r["epoch_time_min_s"] for m, r in zip(med, group)],
               [r["epoch_time_max_s"] - m for m, r in zip(med, group)]]
        colors = ["tab:gray" if r["role"] != "strategy" else "tab:blue" for r in group]
        ax.bar(range(len(group)), med, yerr=err, capsize=4, color=colors,
               label="median epoch time (bars: min-max)")
        ax.set_xticks(range(len(group)), labels, fontsize=8)
        ax.set_ylabel("steady-state epoch time (s)")
        ax.set_title(f"Epoch time: {title(setting)}")
        ax.legend(fontsize=8)
    return save(fig, path)


def scaling(rows, throughput_path, efficiency_path):
    """Throughput vs N against the ideal line (N x the baseline's throughput), and efficiency."""
    figs = {}
    groups = _groups(rows)
    for kind, path in (("throughput", throughput_path), ("efficiency", efficiency_path)):
        fig, axes = plt.subplots(1, len(groups), figsize=(6 * len(groups), 4.2), squeeze=False)
        for ax, (setting, group) in zip(axes[0], groups.items()):
            base = next((r for r in group if r["role"] == "baseline"), None)
            ref = reference_of(group)
            ns = sorted({r["n"] for r in group if r["role"] == "strategy"} | {1})
            for strategy in COMPARED:
                pts = sorted(((r["n"], r) for r in group
                          if r["strategy"] == strategy and r["role"] == "strategy"),
                         key=lambda p: p[0])
                if not pts:
                    continue
                ys = [r["examples_per_sec"] if kind == "throughput" else
                      (r["efficiency"] or 0) * 100 for _, r in pts]
                ax.plot([n for n, _ in pts], ys, "o-", color=REGISTRY[strategy].color,
                        label=REGISTRY[strategy].label)
            if kind == "throughput" and base:
                ax.plot(ns, [base["examples_per_sec"] * n for n in ns], "k--",
                        label="ideal: N x one device (the baseline)")
                if ref:
                    ax.axhline(ref["examples_per_sec"], color="tab:red", ls=":",
                               label=f"fastest single process: {ref['reference_row']}")
                # N plain loops at once (the sharing calibration): what N workers could reach
                limits = [r for r in group if is_machine_limit(r)]
                if limits:
                    ax.plot([r["n"] for r in limits], [r["examples_per_sec"] for r in limits],
                            "k*", markersize=11, label="machine's limit: N plain TF loops at once")
                ax.set_ylabel("throughput (examples/s)")
            if kind == "efficiency":
                ax.axhline(100, color="k", ls="--", label="ideal (100 %)")
                ax.set_ylabel("efficiency (%): speedup over one device on 1 core / N")
                ax.set_ylim(0, max(110, ax.get_ylim()[1]))
            ax.set_xticks(ns)
            ax.set_xlabel("workers / replicas (N)")
            ax.set_title(f"{kind.capitalize()} vs N: {title(setting)}", fontsize=10)
            if kind == "throughput":
                ax.set_ylim(bottom=0)
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        figs[kind] = save(fig, path)
    return figs


def _curve_label(r, n, role):
    """A curve's name inside its strategy's panel: N, and which single process it is."""
    threads = r.get("threads_per_task")
    if role_of(r) in ENGINE_FLOOR_RUNS or r["strategy"] == ENGINE_FLOOR:
        return f"N={n}, {threads} thread{'s' * (threads != 1)}"
    return f"N={n}" + (" (all cores)" if role == REFERENCE_RUN else "") + (
        f", {reducer_of(r)}" if reducer_of(r) != "none" else "")


def curves(records, path):
    """Eval accuracy (top) and train loss (bottom) per epoch, a column per strategy (small
    multiples: each panel holds a few lines, its legend under it), first repeat of each run;
    a column per model and strategy when the records hold several models."""
    panels = collections.defaultdict(list)  # (model, strategy) -> [(label, record)]
    seen = set()
    for r in records:
        key = (r["strategy"], workers_of(r), role_of(r), r.get("threads_per_task"),
               setting_of(r), reducer_of(r))
        if key in seen or r.get("sharing"):  # the sharing calibration's "epochs" are rounds
            continue
        seen.add(key)
        panels[r["model"], r["strategy"]].append((_curve_label(r, key[1], key[2]), r))
    models = {m for m, _ in panels}
    order = sorted(panels, key=lambda k: (k[0], list(REGISTRY).index(k[1])
                                          if k[1] in REGISTRY else -1))
    fig, axes = plt.subplots(2, max(1, len(order)), figsize=(3.4 * max(1, len(order)), 6.4),
                             squeeze=False, sharey="row")
    for col, key in enumerate(order):
        acc, loss = axes[0][col], axes[1][col]
        for label, r in panels[key]:
            epochs = [e["epoch"] for e in r["epochs"]]
            # eval / train figures may be null in a valid record: plotted as gaps
            acc.plot(epochs, [e["eval_accuracy"] * 100 if e["eval_accuracy"] is not None
                              else float("nan") for e in r["epochs"]], "o-", label=label)
            loss.plot(epochs, [e["train_loss"] if e["train_loss"] is not None
                               else float("nan") for e in r["epochs"]], "o-", label=label)
        name = "TF loop" if key[1] == ENGINE_FLOOR else REGISTRY[key[1]].short \
            if key[1] in REGISTRY else key[1]
        acc.set_title(f"{key[0]}: {name}" if len(models) > 1 else name, fontsize=10)
        loss.set_xlabel("epoch")
        loss.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.25), frameon=False)
    axes[0][0].set_ylabel("eval accuracy (%)")
    axes[1][0].set_ylabel("train loss (cross-entropy)")
    fig.suptitle("Eval accuracy and train loss per epoch, by strategy")
    return save(fig, path)


def size_sweep(rows, path):
    """Epoch time, speedup and efficiency vs dataset size, one line per (strategy, N)."""
    lines = collections.defaultdict(list)
    for r in rows:
        if r["role"] == "strategy":
            # one line per setting except its size
            rest = tuple(r[k] for k in SETTING_KEYS if k != "train_examples")
            lines[(r["model"], r["strategy"], r["n"], r["batch_size_per_replica"], rest)].append(r)
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    for (model, strategy, n, batch, _), group in sorted(lines.items(), key=lambda item: (
            sort_key(item[0][4]), item[0][:4])):
        group.sort(key=lambda r: r["train_examples"])
        xs = [r["train_examples"] for r in group]
        label = f"{model} {strategy} N={n} ({batch}/replica)"
        axes[0].plot(xs, [r["epoch_time_s"] for r in group], "o-", label=label)
        axes[1].plot(xs, [r["speedup"] or 0 for r in group], "o-", label=label)
        axes[2].plot(xs, [(r["efficiency"] or 0) * 100 for r in group], "o-", label=label)
    for ax, (title, unit) in zip(axes, (("Epoch time", "epoch time (s)"),
                                        ("Speedup vs one device", "speedup (x)"),
                                        ("Parallel efficiency", "efficiency (%)"))):
        ax.set(title=f"{title} vs dataset size", xlabel="training examples per epoch",
               ylabel=unit)
        ax.set_xscale("log")
        ax.legend(fontsize=7)
    return save(fig, path)


def step_breakdown(rows, path):
    """Per-worker step time split into compute and gradient synchronization (the communication
    probe's share), one stacked bar per strategy and N, one panel per setting."""
    groups = {k: [r for r in g if r["communication_fraction"] is not None and r["step_time_s"]]
              for k, g in _groups(rows).items()}
    groups = {k: g for k, g in groups.items() if g}
    fig, axes = plt.subplots(1, max(1, len(groups)), figsize=(6.5 * max(1, len(groups)), 4.2),
                             squeeze=False)
    for ax, (setting, group) in zip(axes[0], groups.items()):
        labels = [_tick(r) for r in group]
        step_ms = [r["step_time_s"] * 1e3 for r in group]
        comm = [s * r["communication_fraction"] for s, r in zip(step_ms, group)]
        compute = [s - c for s, c in zip(step_ms, comm)]
        x = range(len(group))
        ax.bar(x, compute, color="tab:blue", label="compute and the rest")
        ax.bar(x, comm, bottom=compute, color="tab:red", label="gradient synchronization (probe)")
        for i, r in enumerate(group):
            ax.text(i, step_ms[i], f"{r['communication_fraction'] * 100:.0f}%", ha="center",
                    va="bottom", fontsize=8)
        ax.set_xticks(list(x), labels, fontsize=8)
        ax.set_ylabel("per-worker step time (ms)")
        ax.set_title(f"Where a step goes: {title(setting)}")
        ax.legend(fontsize=8)
    return save(fig, path)


def projection(rows, path):
    """Projected throughput vs N (lines) with the measured points, and projected efficiency."""
    lines = collections.defaultdict(lambda: {"projected": [], "measured": []})
    for r in rows:
        lines[(tuple(r[k] for k in SETTING_KEYS), r["strategy"])][r["kind"]].append(r)
    fig, (tput, eff) = plt.subplots(1, 2, figsize=(12, 4.4))
    for (setting, strategy), kinds in sorted(lines.items(), key=lambda item: (
            sort_key(item[0][0]), item[0][1])):
        model, size = kinds["projected"][0]["model"], kinds["projected"][0]["train_examples"]
        color = REGISTRY[strategy].color
        label = f"{short(strategy)} ({model}, {size} ex.)"
        proj = sorted(kinds["projected"], key=lambda r: r["n"])
        tput.plot([r["n"] for r in proj], [r["examples_per_sec"] for r in proj], "-",
                  color=color, label=f"{label}: projected")
        eff.plot([r["n"] for r in proj], [r["efficiency"] * 100 for r in proj], "-", color=color,
                 label=f"{label}: projected")
        meas = kinds["measured"]
        if meas:
            tput.plot([r["n"] for r in meas], [r["examples_per_sec"] for r in meas], "o",
                      color=color, ms=8, label=f"{label}: measured")
            eff.plot([r["n"] for r in meas], [r["efficiency"] * 100 for r in meas], "o",
                     color=color, ms=8, label=f"{label}: measured")
        ideal = [r for r in proj if r["n"] == 1]
        if ideal:
            ns = [r["n"] for r in proj]
            tput.plot(ns, [ideal[0]["examples_per_sec"] / ideal[0]["speedup"] * n for n in ns],
                      ":", color=color, lw=1, label=f"{label}: ideal, N x one device")
    for ax in (tput, eff):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("workers (N)")
    tput.set_yscale("log")
    tput.set(title="Throughput: projected (lines), measured (dots)", ylabel="examples/s")
    eff.axhline(100, color="k", ls=":", lw=1)
    eff.set(title="Efficiency: speedup over one device / N", ylabel="efficiency (%)")
    eff.set_ylim(0, max(110, eff.get_ylim()[1]))  # above 100%: flagged, not hidden
    # one legend for both panels: a colour per strategy (and setting), a style per kind of line
    from matplotlib.lines import Line2D

    handles = {h.get_label().split(": ")[0]: Line2D([], [], color=h.get_color(), lw=2)
               for h in tput.get_lines() if ": " in h.get_label()}
    handles.update({"projected": Line2D([], [], color="k"),
                    "measured here": Line2D([], [], color="k", marker="o", ls=""),
                    "ideal: N x one device (100%)": Line2D([], [], color="k", ls=":")})
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=len(handles),
               fontsize=8, frameon=False, bbox_to_anchor=(0.5, -0.06))
    return save(fig, path)

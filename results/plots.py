"""PNG plots of a comparison, from summary rows and records. Every figure has a title, axis
labels with units and a legend; files are written atomically."""
import collections

import matplotlib

matplotlib.use("Agg")  # headless: CI, containers, Vertex
import matplotlib.pyplot as plt  # noqa: E402

from results.records import write_atomic  # noqa: E402
from results.summary import groups as _groups, workers_of  # noqa: E402

_SHORT = {"one_device": "1 device", "mirrored": "mirrored", "multi_worker_mirrored": "MWMS",
          "parameter_server": "PSS"}
_LABELS = {"one_device": "one device", "mirrored": "Mirrored (replicas)",
           "multi_worker_mirrored": "MWMS (workers)", "parameter_server": "PSS (workers)"}

_STRATEGY_COLORS = {"mirrored": "tab:green", "multi_worker_mirrored": "tab:blue",
                    "parameter_server": "tab:orange"}


def _save(fig, path):
    write_atomic(path, lambda f: fig.savefig(f, format="png", dpi=110, bbox_inches="tight"))
    plt.close(fig)
    return path


def epoch_time(rows, path):
    groups = _groups(rows)
    width = max(6.0, 0.9 * max(len(g) for g in groups.values()))
    fig, axes = plt.subplots(1, len(groups), figsize=(width * len(groups), 4.2), squeeze=False)
    for ax, ((model, dataset, size, batch), group) in zip(axes[0], groups.items()):
        labels = [f"{_SHORT[r['strategy']]}\nN={r['n']}"
                  + ("\n(all cores)" if r["role"] == "hardware_reference" else "") for r in group]
        med = [r["epoch_time_s"] for r in group]
        err = [[m - r["epoch_time_min_s"] for m, r in zip(med, group)],
               [r["epoch_time_max_s"] - m for m, r in zip(med, group)]]
        colors = ["tab:gray" if r["role"] != "strategy" else "tab:blue" for r in group]
        ax.bar(range(len(group)), med, yerr=err, capsize=4, color=colors,
               label="median epoch time (bars: min-max)")
        ax.set_xticks(range(len(group)), labels, fontsize=8)
        ax.set_ylabel("steady-state epoch time (s)")
        ax.set_title(f"Epoch time: {model}, {dataset}, {size} examples, {batch}/replica")
        ax.legend(fontsize=8)
    return _save(fig, path)


def scaling(rows, throughput_path, efficiency_path):
    """Throughput vs N against the ideal line (N x one-worker throughput), and efficiency."""
    figs = {}
    groups = _groups(rows)
    for kind, path in (("throughput", throughput_path), ("efficiency", efficiency_path)):
        fig, axes = plt.subplots(1, len(groups), figsize=(6 * len(groups), 4.2), squeeze=False)
        for ax, ((model, dataset, size, batch), group) in zip(axes[0], groups.items()):
            base = next((r for r in group if r["role"] == "baseline"), None)
            ref = next((r for r in group if r["role"] == "hardware_reference"), None)
            ns = sorted({r["n"] for r in group if r["role"] == "strategy"} | {1})
            for strategy in ("mirrored", "multi_worker_mirrored", "parameter_server"):
                pts = sorted(((r["n"], r) for r in group
                          if r["strategy"] == strategy and r["role"] == "strategy"),
                         key=lambda p: p[0])
                if not pts:
                    continue
                ys = [r["examples_per_sec"] if kind == "throughput" else
                      (r["efficiency"] or 0) * 100 for _, r in pts]
                ax.plot([n for n, _ in pts], ys, "o-", label=_LABELS[strategy])
            if kind == "throughput" and base:
                ax.plot(ns, [base["examples_per_sec"] * n for n in ns], "k--",
                        label="ideal: N x one worker (1 thread)")
                if ref:
                    ax.axhline(ref["examples_per_sec"], color="tab:red", ls=":",
                               label="hardware reference (1 process, all cores)")
                ax.set_ylabel("throughput (examples/s)")
            if kind == "efficiency":
                ax.axhline(100, color="k", ls="--", label="ideal (100 %)")
                ax.set_ylabel("parallel efficiency (%) vs 1 worker")
            ax.set_xticks(ns)
            ax.set_xlabel("workers / replicas (N)")
            ax.set_title(f"{kind.capitalize()} vs N: {model}, {size} examples, {batch}/replica")
            ax.legend(fontsize=8)
        figs[kind] = _save(fig, path)
    return figs


def curves(records, path):
    """Eval accuracy and train loss per epoch, one line per (strategy, N) (first repeat)."""
    fig, (acc, loss) = plt.subplots(1, 2, figsize=(12, 4.2))
    seen = set()
    for r in records:
        key = (r["strategy"], workers_of(r), r.get("run_name", "").split("/")[0], r["model"],
               r["train_examples"])
        if key in seen:
            continue
        seen.add(key)
        label = f"{r['model']} {r['strategy']} N={key[1]}" + (
            " (all cores)" if key[2] == "hardware_reference" else "")
        epochs = [e["epoch"] for e in r["epochs"]]
        acc.plot(epochs, [e["eval_accuracy"] * 100 for e in r["epochs"]], "o-", label=label)
        loss.plot(epochs, [e["train_loss"] for e in r["epochs"]], "o-", label=label)
    acc.set(title="Eval accuracy per epoch", xlabel="epoch", ylabel="eval accuracy (%)")
    loss.set(title="Train loss per epoch", xlabel="epoch", ylabel="train loss (cross-entropy)")
    acc.legend(fontsize=7)
    loss.legend(fontsize=7)
    return _save(fig, path)


def size_sweep(rows, path):
    """Epoch time, speedup and efficiency vs dataset size, one line per (strategy, N)."""
    lines = collections.defaultdict(list)
    for r in rows:
        if r["role"] == "strategy":
            lines[(r["model"], r["strategy"], r["n"], r["batch_size_per_replica"])].append(r)
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    for (model, strategy, n, batch), group in sorted(lines.items()):
        group.sort(key=lambda r: r["train_examples"])
        xs = [r["train_examples"] for r in group]
        label = f"{model} {strategy} N={n} ({batch}/replica)"
        axes[0].plot(xs, [r["epoch_time_s"] for r in group], "o-", label=label)
        axes[1].plot(xs, [r["speedup"] or 0 for r in group], "o-", label=label)
        axes[2].plot(xs, [(r["efficiency"] or 0) * 100 for r in group], "o-", label=label)
    for ax, (title, unit) in zip(axes, (("Epoch time", "epoch time (s)"),
                                        ("Speedup vs 1 worker", "speedup (x)"),
                                        ("Parallel efficiency", "efficiency (%)"))):
        ax.set(title=f"{title} vs dataset size", xlabel="training examples per epoch",
               ylabel=unit)
        ax.set_xscale("log")
        ax.legend(fontsize=7)
    return _save(fig, path)


def straggler(rows, path):
    """Throughput kept vs the straggler's delay (left) and, for PSS, the share of steps the
    straggler ran (right): synchronous strategies follow the straggler, PSS routes around it."""
    lines = collections.defaultdict(list)
    for r in rows:
        lines[(r["model"], r["train_examples"], r["strategy"], r["n"])].append(r)
    fig, (kept, share) = plt.subplots(1, 2, figsize=(12, 4.2))
    for (model, size, strategy, n), group in sorted(lines.items()):
        label = f"{_SHORT[strategy]} N={n} ({model}, {size} ex.)"
        pts = [(r["delay_ms"], r["relative_throughput"] * 100) for r in group
               if r["relative_throughput"] is not None]
        color = _STRATEGY_COLORS[strategy]  # the same strategy has the same colour in both panels
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
    return _save(fig, path)

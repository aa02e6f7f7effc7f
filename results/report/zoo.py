"""Across models: per model, which strategy wins and by how much, the gradient bytes a step
sends and each strategy's communication share (`python -m experiments.compare --preset=zoo`;
any comparison with two or more models gets it).

A row per model (its setting: the model with its dataset, examples and batch). Its strategies'
rows (every N measured) are ranked by throughput; the winner is the fastest, "by how much" its
throughput over the runner-up's, tied with every strategy whose fastest steady epoch the
winner's slowest does not beat (over every repeat: the margin is within this machine's
epoch-to-epoch movement, the rule of the "superlinear" flag; pooling more repeats widens that
range, so only a margin larger than the machine's movement is called a win), and "vs 1
process" its throughput over the fastest one-device run of the model (in the zoo preset: one
device using every core). Mirrored is a strategy here,
so it is ranked, not used as the reference (results/report/summary.py's reference may be it).
Gradient bytes come from the records' communication probe: what one replica sends per step (an
embedding's IndexedSlices: its rows) next to the same gradients dense.
"""
import collections

from results.records import metrics
from results.records.cells import label, setting_of
from results.report import plots
from results.report.summary import beyond_spread, groups, seconds_per_example, tied
from results.report.tables import experiment_section, markdown_table
from strategies import BASELINE, REGISTRY

COLUMNS = ("model", "dataset", "train_examples", "winner", "winner_examples_per_sec",
           "margin_over_runner_up", "runner_up", "tied_with", "winner_vs_single_process",
           "beats_single_process", "reference_row",
           "gradient_mb", "dense_gradient_mb", "strategies")


def _gradient_mb(records):
    """{setting: (sent MB, dense MB)}: medians over the setting's records with a probe."""
    sent, dense = collections.defaultdict(list), collections.defaultdict(list)
    for r in records:
        comm = r.get("communication") or {}
        if comm.get("gradient_bytes") is not None:
            sent[setting_of(r)].append(comm["gradient_bytes"] / 1e6)
            dense[setting_of(r)].append(comm.get("dense_gradient_bytes",
                                                 comm["gradient_bytes"]) / 1e6)
    return {k: (metrics.spread(v)["median"], metrics.spread(dense[k])["median"])
            for k, v in sent.items()}


def name(row):
    return f"{REGISTRY[row['strategy']].short} N={row['n']}"


def rows(summary_rows, records):
    """One row per setting that has strategy rows; [] with fewer than two models."""
    settings = groups(summary_rows)
    if len({s[0] for s in settings}) < 2:
        return []
    grads = _gradient_mb(records)
    out = []
    for setting, group in settings.items():
        ranked = sorted((r for r in group if r["role"] == "strategy" and seconds_per_example(r)),
                        key=seconds_per_example)
        if not ranked:
            continue
        win = ranked[0]
        ref = min((r for r in group if r["strategy"] == BASELINE and seconds_per_example(r)),
                  key=seconds_per_example, default=None)
        second = ranked[1] if len(ranked) > 1 else None
        sent, dense = grads.get(setting, (None, None))
        out.append({
            "model": win["model"], "dataset": win["dataset"],
            "train_examples": win["train_examples"], "winner": name(win),
            "winner_examples_per_sec": win["examples_per_sec"],
            "margin_over_runner_up": seconds_per_example(second) / seconds_per_example(win)
            if second else None,
            "runner_up": name(second) if second else None,
            "tied_with": [name(r) for r in tied(win, ranked)],
            "winner_vs_single_process": seconds_per_example(ref) / seconds_per_example(win)
            if ref else None,
            # faster than one process beyond the spread (None: no such row)
            "beats_single_process": beyond_spread(win, ref) if ref else None,
            "reference_row": label(ref) if ref else None,
            "gradient_mb": sent, "dense_gradient_mb": dense,
            # per strategy: (name, strategy, examples/s, throughput / reference, comm. share)
            "strategies": [(name(r), r["strategy"], r["examples_per_sec"],
                            seconds_per_example(ref) / seconds_per_example(r) if ref else None,
                            r["communication_fraction"]) for r in ranked],
        })
    return out


def csv_rows(zoo_rows):
    """The rows for zoo.csv: each strategy's figures as one readable cell."""
    return [{**r, "tied_with": "; ".join(r["tied_with"]), "strategies": "; ".join(
        f"{n}: {eps:.1f}/s, {_x(vs)} vs 1 process, communication {_pct(comm)}"
        for n, _, eps, vs, comm in r["strategies"])} for r in zoo_rows]


def _pct(value):
    return "–" if value is None else f"{value * 100:.0f}%"


def _x(value):
    return "–" if value is None else f"{value:.2f}x"


def _margin(row):
    """The 'by how much' cell: the margin over the runner-up, and the ties within the spread."""
    if not row["runner_up"]:
        return "–"
    cell = f"{_x(row['margin_over_runner_up'])} over {row['runner_up']}"
    if row["tied_with"] == [row["runner_up"]]:
        return cell + " (a tie: within the epochs' spread)"
    if row["tied_with"]:
        return cell + f" (tied with {', '.join(row['tied_with'])}: within the epochs' spread)"
    return cell


def markdown(zoo_rows):
    """The report's "Across models" section: one table, then where the answer flips."""
    head = ["model (data, examples)", "gradients sent / step (dense)", "winner", "by how much",
            "winner vs 1 process", "each strategy: examples/s, vs 1 process, communication share"]
    lines = ["## Across models: which strategy wins", "",
             "Per model, strategies ranked by steady throughput. 'By how much' = the winner's "
             "throughput over the runner-up's; 'vs 1 process' = over the fastest one-device run "
             "of that model (in the zoo preset: every core); communication share = the "
             "communication probe's synchronization time over the per-worker step time (an "
             "upper bound: it does not overlap compute). Gradients sent: one replica's per "
             "step (sparse IndexedSlices count their rows), dense size in brackets.", ""]
    cells = []
    for r in zoo_rows:
        grads = "–" if r["gradient_mb"] is None else \
            f"{r['gradient_mb']:.2f} MB ({r['dense_gradient_mb']:.1f} MB)"
        each = "; ".join(f"{n}: {eps:.0f}/s, {_x(vs)}, {_pct(comm)}"
                         for n, _, eps, vs, comm in r["strategies"])
        cells.append([
            f"{r['model']} ({r['dataset']}, {r['train_examples']})", grads, r["winner"],
            _margin(r),
            _x(r["winner_vs_single_process"]), each])
    lines += [markdown_table(head, cells), "", flips(zoo_rows)]
    return "\n".join(lines)


def plot(zoo_rows, path):
    """Per model (results/report/zoo.py), each strategy's throughput relative to one process on
    every core, its communication share hatched inside the bar, the winner's margin written above
    it."""
    strategies = sorted({s[1] for r in zoo_rows for s in r["strategies"]},
                        key=list(REGISTRY).index)
    width = 0.8 / max(1, len(strategies))
    fig, ax = plots.plt.subplots(figsize=(max(6.5, 2.6 * len(zoo_rows)), 4.6))
    for i, r in enumerate(zoo_rows):
        for name, strategy, _, vs, comm in r["strategies"]:
            if vs is None:
                continue
            x = i + (strategies.index(strategy) - (len(strategies) - 1) / 2) * width
            first = i == 0 or not any(s[1] == strategy for s in zoo_rows[0]["strategies"])
            ax.bar(x, vs, width * 0.95, color=REGISTRY[strategy].color,
                   label=f"{REGISTRY[strategy].label}, N={name.split('N=')[-1]}" if first else None)
            if comm:
                ax.bar(x, vs * comm, width * 0.95, color="none", edgecolor="black", hatch="//",
                       lw=0, label="communication share (probe)" if i == 0 and
                       strategy == strategies[0] else None)
            if name == r["winner"]:
                margin = r["margin_over_runner_up"]
                said = "ties" if r["tied_with"] else \
                    "wins" + (f" by\n{margin:.2f}x" if margin else "")
                ax.text(x, vs, said, ha="center",
                        va="bottom", fontsize=8, fontweight="bold")
    ticks = [f"{r['model']}\n{r['gradient_mb']:.2f} MB sent/step" if r["gradient_mb"] is not None
             else r["model"] for r in zoo_rows]
    ax.set_xticks(range(len(zoo_rows)), ticks, fontsize=9)
    ax.axhline(1.0, color="k", ls=":", lw=1, label="one process, every core")
    ax.set_ylabel("throughput / one process on every core")
    ax.set_title("Which strategy wins, per model (bars: examples/s relative to one process)")
    ax.set_ylim(top=ax.get_ylim()[1] * 1.15)
    handles, labels = ax.get_legend_handles_labels()  # strategies first, in their fixed order
    order = sorted(range(len(labels)), key=lambda i: (labels[i][0] == labels[i][0].lower(),
                                                      labels[i]))
    ax.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=8,
              loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return plots.save(fig, path)


def section(summary_rows, records, path):
    """The zoo's part of the report (two or more models), its plot and CSV; None otherwise.
    `path(name)`: where a file of the results directory goes."""
    across = rows(summary_rows, records)
    if not across:
        return None
    return experiment_section(path, "zoo", markdown(across), lambda png: plot(across, png),
                              csv_rows(across), COLUMNS, first=True)


def flips(zoo_rows):
    """One sentence: the winners per model, and whether the answer changes with the model; a
    tied model could be won by any strategy it is tied with, so the answer flips only where no
    one strategy could win every model."""
    if not zoo_rows:
        return ""
    could_win = {r["model"]: [r["winner"]] + r["tied_with"] for r in zoo_rows}
    said = ", ".join(f"{m}: {w[0]}" + (f" tied with {' and '.join(w[1:])}" if w[1:] else "")
                     for m, w in could_win.items())
    losing = [r["model"] for r in zoo_rows
              if r["winner_vs_single_process"] is not None and r["winner_vs_single_process"] < 1]
    unclear = [r["model"] for r in zoo_rows
               if r["winner_vs_single_process"] is not None and r["winner_vs_single_process"] >= 1
               and not r["beats_single_process"]]
    tail = (f" No strategy beat one process on every core for {', '.join(losing)}: on this "
            f"machine distributing it does not pay." if losing else "") + \
        (f" For {', '.join(unclear)} the winner's margin over one process is within the epochs' "
         f"spread." if unclear else "")
    everywhere = set.intersection(*(set(w) for w in could_win.values()))
    if not everywhere:
        return f"The answer flips with the model: {said}.{tail}"
    if all(len(w) == 1 for w in could_win.values()):
        return f"The same strategy wins for every model ({said}).{tail}"
    return (f"Within the epochs' spread, {' or '.join(sorted(everywhere))} could win for every "
            f"model ({said}): the answer does not flip beyond this machine's epoch-to-epoch "
            f"movement."
            f"{tail}")

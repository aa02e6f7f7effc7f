"""The reducers experiment, from records: MWMS at N=2, plain and under each gradient compression
(--compression: int8, topk:RATIO, powersgd:RANK; experiments/engine/compressed_sync.py), on the
real loopback and under emulated bandwidths; throughput, bytes, memory, accuracy against plain,
and the bandwidth below which each reducer pays off, predicted and checked.

    python -m experiments.compare --preset=reducers          # cnn, wide_mlp, embedding
    python -m experiments.compare --experiments=reducers --models=cnn --bandwidths=0.1,1,0

The prediction, fixed before the shaped runs it predicts:
- Fitted on: each form's run on the real loopback (B = 0): its step s0 (global batch over its
  examples/s), which holds its compute, its compression and its exchange on loopback.
- Predicted: the same form under a shaper of B Gbit/s shared by every link (tf_config/netshape):
  s(B) = s0 + the cost model's shared-medium time for the step's bytes (results/model/cost_model.py:
  all-reduce of the plain gradient 2(N-1)G; a reducer's payload all-gathered, N(N-1)C, or
  all-reduced, 2(N-1)C; an embedding's rows all-gathered as they are in both), in series.
- Crossover: the B where a reducer's predicted step equals plain's; below it the reducer is
  faster. The shaped runs check both the throughputs and on which side of it each run falls.
"""
import collections
import math

from results.model import cost_model, specs
from results.records import metrics
from results.report import plots
from results.records.cells import (SETTING_KEYS, bandwidth_of, is_reducer_run, reducer_of,
                                   setting_of, setting_title, sort_key, workers_of)
from results.report.tables import errors_line, experiment_section, markdown_table
from strategies.compression import sent_per_replica

PLAIN = "none"
COLUMNS = (*SETTING_KEYS, "compression", "n", "bandwidth_gbps", "runs", "examples_per_sec",
           "predicted_examples_per_sec", "error", "vs_plain", "sent_mb_per_step",
           "plain_mb_per_step", "compress_ms", "state_mb", "optimizer_state_mb",
           "final_eval_accuracy",
           "accuracy_delta", "note")


class Fit:
    """One form's step on the real loopback and what its step sends (one setting, N)."""

    def __init__(self, form, n, batch, step_s, payload, how, sparse):
        self.form, self.n, self.batch, self.step_s = form, n, batch, step_s
        self.payload, self.how, self.sparse = payload, how, sparse

    def wire_s(self, gbps):
        """The shared shaper's seconds for one step's bytes (0: the real loopback)."""
        if not gbps:
            return 0.0
        cluster = specs.ClusterSpec(hosts=self.n, inter_host_gbps=gbps, shared_medium=True)
        reducer = {"payload_bytes": self.payload, "exchange": self.how}
        return cost_model.reducer_s(reducer, cluster) + (
            cost_model.allreduce_s(self.sparse, cluster, "sparse") if self.sparse else 0.0)

    def rate(self, gbps):
        return self.n * self.batch / (self.step_s + self.wire_s(gbps))


def _bytes(record, plain=False):
    """(payload bytes, exchange, sparse bytes) of one replica's step in this record (plain: what
    it would be without compression: its dense gradients all-reduced). The IndexedSlices'
    rows (sparse_gradient_bytes) go as they are either way."""
    comm = record.get("communication") or {}
    sparse = comm.get("sparse_gradient_bytes") or 0
    dense = (comm.get("gradient_bytes") or 0) - sparse
    c = record.get("compression") or record.get("zero")
    if c and c.get("payload_bytes") is not None and not plain:
        # ZeRO densifies IndexedSlices: its payload is every parameter, nothing sparse beside
        return c["payload_bytes"], c["exchange"], 0 if record.get("zero") else sparse
    return dense, "reduce", sparse


def _sent(record, n, plain=False):
    """Bytes one replica sends per step (its sparse rows all-gathered as they are)."""
    payload, how, sparse = _bytes(record, plain)
    return sent_per_replica(payload, n, how) + sent_per_replica(sparse, n, "gather")


def _cells(records):
    out = collections.defaultdict(list)
    for r in records:
        if is_reducer_run(r):
            out[(setting_of(r), reducer_of(r), workers_of(r), bandwidth_of(r))].append(r)
    return out


def fits(records):
    """{(setting, form, N): Fit} from the real-loopback runs."""
    out = {}
    for (setting, form, n, gbps), runs in _cells(records).items():
        rate = metrics.pooled_steady(runs)[1]["median"]
        if gbps or not rate:
            continue
        batch = runs[0]["global_batch_size"] // n
        payload, how, sparse = _bytes(runs[0])
        out[(setting, form, n)] = Fit(form, n, batch, n * batch / rate, payload, how, sparse)
    return out


def crossover(plain, reducer):
    """(bandwidth in Gbit/s, side): `reducer` is predicted faster than `plain` "below" or
    "above" that bandwidth, or (None, "always") / (None, "never"). Its step is s0 + w/B (w: its
    bytes' seconds at 1 Gbit/s): faster where s0_r - s0_p < (w_p - w_r) / B."""
    slower = reducer.step_s - plain.step_s  # on the real loopback
    saved = plain.wire_s(1.0) - reducer.wire_s(1.0)  # seconds at 1 Gbit/s
    if slower <= 0 and saved >= 0:
        return None, "always"
    if slower >= 0 and saved <= 0:
        return None, "never"
    return saved / slower, "below" if slower > 0 else "above"


def pays_off(crossing, gbps):
    """Whether the reducer is predicted faster at `gbps` (crossover's answer)."""
    b, side = crossing
    return side == "always" or (side == "below" and gbps < b) or (side == "above" and gbps > b)


def rows(records):
    fitted = fits(records)
    cells = _cells(records)
    out = []
    for (setting, form, n, gbps), runs in cells.items():
        measured = metrics.pooled_steady(runs)[1]["median"]
        fit = fitted.get((setting, form, n))
        plain_runs = cells.get((setting, PLAIN, n, gbps))
        plain = metrics.pooled_steady(plain_runs)[1]["median"] if plain_runs else None
        predicted = fit.rate(gbps) if fit else None
        c = [r.get("compression") or {} for r in runs]
        plain_acc = metrics.median([r["final_eval_accuracy"] for r in plain_runs or []])
        accuracy = metrics.median([r["final_eval_accuracy"] for r in runs])
        mb = lambda v: v / 1e6 if v is not None else None  # noqa: E731
        compress_s = metrics.median([x.get("compress_s") for x in c])
        out.append(dict(zip(COLUMNS, (
            *setting, form, n, gbps, len(runs), measured, predicted,
            (predicted - measured) / measured if predicted and measured and gbps else None,
            measured / plain if measured and plain else None, mb(_sent(runs[0], n)),
            mb(_sent(runs[0], n, plain=True)), compress_s * 1e3 if compress_s else None,
            mb(metrics.median([x.get("state_bytes_per_replica") for x in c])),
            mb(metrics.median([(r.get("zero") or {}).get("optimizer_state_bytes_per_worker")
                               for r in runs])), accuracy,
            accuracy - plain_acc if accuracy is not None and plain_acc is not None else None,
            "" if gbps else "fit point (real loopback)"))))
    out.sort(key=lambda r: sort_key(tuple(r[k] for k in SETTING_KEYS)) + (
        r["compression"] != PLAIN, r["compression"], r["bandwidth_gbps"] or math.inf))
    return out


def _crossovers(records, table):
    """[(setting, form, predicted B*, what the shaped runs say)]."""
    fitted = fits(records)
    out = []
    for (setting, form, n), fit in sorted(fitted.items(), key=lambda kv: (sort_key(kv[0][0]),
                                                                          kv[0][1])):
        plain = fitted.get((setting, PLAIN, n))
        if form == PLAIN or plain is None:
            continue
        crossing = crossover(plain, fit)
        checks = []
        for r in table:
            if (tuple(r[k] for k in SETTING_KEYS), r["compression"], r["n"]) == (setting, form, n) \
                    and r["bandwidth_gbps"] and r["vs_plain"] is not None:
                ran = r["vs_plain"] > 1
                checks.append((r["bandwidth_gbps"], ran, pays_off(crossing, r["bandwidth_gbps"])
                               == ran))
        out.append((setting, form, crossing, checks))
    return out


def _said(crossing):
    b, side = crossing
    return {"always": "pays off at every bandwidth", "never": "pays off at none"}.get(
        side, f"pays off {side} {b:.3g} Gbit/s" if b is not None else "")


def markdown(table, crossings):
    head = ("model", "compression", "emulated Gbit/s", "measured ex/s", "predicted ex/s", "error",
            "vs plain", "sent MB/step", "plain MB/step", "compress ms", "state MB",
            "optimizer MB", "accuracy", "Δ accuracy")
    f = lambda v, fmt: format(v, fmt) if v is not None else "–"  # noqa: E731
    cells = [[r["model"], r["compression"],
              f"{r['bandwidth_gbps']:g}" if r["bandwidth_gbps"] else "real loopback",
              f(r["examples_per_sec"], ".0f"), f(r["predicted_examples_per_sec"], ".0f"),
              (f"{r['error'] * 100:+.1f}%" if r["error"] is not None else "–")
              + (f" ({r['note']})" if r["note"] else ""),
              f(r["vs_plain"], ".2f") + ("x" if r["vs_plain"] is not None else ""),
              f(r["sent_mb_per_step"], ".3f"), f(r["plain_mb_per_step"], ".3f"),
              f(r["compress_ms"], ".2f"), f(r["state_mb"], ".2f"),
              f(r["optimizer_state_mb"], ".2f"), f(r["final_eval_accuracy"], ".3f"),
              f"{r['accuracy_delta']:+.3f}" if r["accuracy_delta"] is not None else "–"]
             for r in table]
    lines = ["## Reducers: gradient compression against plain MWMS", "",
             "MWMS at N=2, plain (none) and with each --compression (packs:BYTES: the plain "
             "all-reduce in packs; zero:1: ZeRO-1's sharded optimizer, whose 'optimizer MB' is "
             "the optimizer state one worker keeps), on the real loopback and "
             "with the cluster's loopback shaped to B Gbit/s shared by every link. 'sent': bytes "
             "one replica sends per step (ring algorithms; strategies/compression.py), 'state': "
             "its error-feedback residuals (and PowerSGD's Q), 'compress': the compression's "
             "own compute per step, timed apart after training. Predicted from each form's "
             "real-loopback run plus the cost model's shared-medium time for its bytes "
             "(results/report/reducers.py); 'vs plain': measured examples/s over plain's at "
             "the same "
             "bandwidth; Δ accuracy: against plain at the same bandwidth.", "",
             markdown_table(head, cells), ""]
    line = errors_line([r["error"] for r in table])
    if line:
        lines += [line, ""]
    lines.append("Where each reducer pays off against plain (predicted from the real-loopback "
                 "runs; the shaped runs: faster or slower than plain at the same bandwidth, and "
                 "whether that is what the prediction said):")
    lines.append("")
    for setting, form, crossing, checks in crossings:
        said = "; ".join(f"at {g:g}: {'faster' if ran else 'slower'}"
                         f"{'' if ok else ' (against the prediction)'}" for g, ran, ok in checks)
        lines.append(f"- {setting_title(setting)}, {form}: {_said(crossing)}" +
                     (f" — measured {said}" if said else ""))
    return "\n".join(lines)


def plot(records, table, path):
    """Throughput against emulated bandwidth (log axis) per setting: each form's measured dots
    and predicted line; the real loopback at the right edge."""
    fitted = fits(records)
    settings = sorted({tuple(r[k] for k in SETTING_KEYS) for r in table}, key=sort_key)
    fig, axes = plots.plt.subplots(1, len(settings), figsize=(6.5 * len(settings), 4.5),
                                   squeeze=False)
    colors = dict(zip(sorted({r["compression"] for r in table}, key=lambda f: (f != PLAIN, f)),
                      ("black", "tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")))
    for ax, setting in zip(axes[0], settings):
        group = [r for r in table if tuple(r[k] for k in SETTING_KEYS) == setting]
        grid, high = plots.bandwidth_axis([r["bandwidth_gbps"] for r in group
                                           if r["bandwidth_gbps"]])
        for form in colors:
            pts = [(r["bandwidth_gbps"] or high, r["examples_per_sec"]) for r in group
                   if r["compression"] == form]
            if not pts:
                continue
            fit = fitted.get((setting, form, group[0]["n"]))
            if fit is not None:
                ax.plot(grid, [fit.rate(b) for b in grid], "-", color=colors[form], lw=1)
            ax.plot(*zip(*pts), "o", color=colors[form], label=form)
        plots.real_loopback(ax, high)
        ax.set_xlabel("emulated bandwidth (Gbit/s, shared by every link)")
        ax.set_ylabel("examples/s (N=2)")
        ax.set_title(f"{setting_title(setting)}\ndots measured, lines predicted", fontsize=9)
        ax.legend(fontsize=8)
    return plots.save(fig, path)


def section(records, path):
    """The report's reducers part, reducers.csv and reducers.png; None without its cells."""
    table = rows(records)
    if not table:
        return None
    crossings = _crossovers(records, table)
    return experiment_section(path, "reducers", markdown(table, crossings),
                              lambda png: plot(records, table, png), table, COLUMNS)

"""The network experiment, from records: MWMS and PSS at N=2 under emulated bandwidths
(`--emulate_bandwidth_gbps`, tf_config/netshape.py), measured against the cost model.

    python -m experiments.compare --experiments=network --models=cnn --bandwidths=0.02,0.1,0.5,0

The shaper is one token bucket on the private namespace's loopback, so its rate B is shared by
every link: results/model/cost_model.py's shared medium (all-reduce 2(N-1)·G/B per step for a dense
gradient; an embedding's sparse rows G_rows all-gathered, N(N-1)·G_rows/B, beside its dense
rest's 2(N-1)·G_rest/B; a PSS worker pushes G and pulls P, (G+P)/B per step, and the cluster is
bounded by B). In series with it, p0:
the same synchronization's probe on the real loopback (its copies, RPCs and dispatch), less the
share of the smaller of the two that an all-reduce runs beside the other (hidden_share: measured
by the experiment's shaped collectives cell, at a bandwidth none of its predicted runs has;
paying the whole sum overstated the step: docs/scaling_model.md). The rest
comes from the same experiment's unshaped runs (B = 0 rows, the real loopback): the workload
profile (workload_profile.profile_of: compute and overhead from the N=1 runs), and this machine's
local term at N=2, the unshaped N=2 step beyond compute, overhead and p0 (its cores shared by the
cluster's processes, and waiting): fitted on that row (the fit point, not a check) and used for
this machine's shaped runs only; `experiments.recommend` never carries it to another cluster.
Every prediction is capped by the machine's cores x the N=1 run's examples per CPU-second. The
probe's bytes over its time give the shaper's delivered rate: the calibration column.
"""
import collections
import math

from results.model import cost_model
from results.records import metrics
from results.report import plots
from results.records.cells import (SETTING_KEYS, bandwidth_of, is_collectives_run, is_reducer_run,
                                   is_straggler_run, setting_of, sort_key, unsized, workers_of)
from results.model.workload_profile import (cores_of, probe_of, profile_of, step_time_of,
                                            sync_dtype_of)
from results.report.tables import errors_line, experiment_section, markdown_table
from strategies import REGISTRY, kind

COLUMNS = (*SETTING_KEYS, "strategy", "n", "bandwidth_gbps", "runs", "examples_per_sec",
           "predicted_examples_per_sec", "error", "probe_s", "predicted_comm_s",
           "delivered_gbps", "hidden_share", "note")
_STRATEGIES = cost_model.STRATEGIES


class Model:
    """This machine's N=2 runs of one (setting, strategy) under a shared shaper of B Gbit/s:
    cost_model.predict on this machine's cluster (cost_model.this_machine, the profile's CPU
    figures capping it at `cores`) with the measured local and loopback terms (cost_model.Here)."""

    def __init__(self, strategy, profile, dtype, local_s, loopback_s, cores=0, num_ps=1):
        self.strategy, self.profile, self.dtype = strategy, profile, dtype
        self.local_s, self.loopback_s, self.cores = local_s, loopback_s, cores
        self.num_ps = num_ps
        self.hidden = 0.0  # hidden_share: measured for all-reduce, else in series
        self.calibrations = []  # [(Gbit/s, its probe s)]: what hidden came from

    @property
    def batch(self):
        return self.profile.batch

    @property
    def gradient_bytes(self):
        return self.profile.gradient(self.dtype)

    def wire_bytes(self, n):
        """Bytes one step puts through the shared shaper (see the module docstring)."""
        return cost_model.bytes_moved(self.profile, self.strategy, n, self.dtype,
                                      shared_medium=True)

    def _predicted(self, n, gbps, loopback_s=None, hidden=None):
        # No overlap with compute: this machine's local term was fitted with the whole loopback
        # probe in series (models()); of the loopback cost and the shaped transfer, the
        # measured share `hidden` of the smaller runs beside the other.
        loopback = self.loopback_s if loopback_s is None else loopback_s
        hidden = self.hidden if hidden is None else hidden
        return cost_model.predict(self.profile, cost_model.this_machine(n, self.cores, gbps,
                                                                         self.num_ps),
                                  self.strategy, self.dtype, overlap=0.0,
                                  here=cost_model.Here(sync_s=loopback, local_s=self.local_s,
                                                       sync_hidden=hidden))

    def wire_s(self, n, gbps):
        """The shaper's time for one step's bytes alone (no loopback cost)."""
        return self._predicted(n, gbps, loopback_s=0.0).communication_s

    def comm_s(self, n, gbps):
        """The shaper's time for the step's bytes plus what the same synchronization costs on
        the real loopback (its copies, RPCs and dispatch), less the hidden share of the
        smaller of the two."""
        return self._predicted(n, gbps).communication_s

    def rate(self, n, gbps=0.0, loopback_s=None):
        """Examples/s at N under a shaper of gbps (0: the real loopback, the fit point);
        loopback_s: another loopback probe than the N=2 fit's (a real-loopback row's own)."""
        return self._predicted(n, gbps, loopback_s).examples_per_sec


def _delayed(record):
    """A run with emulated latency (netem): the model has no latency term, so such runs are
    neither fit points nor checks (and their bandwidth may read 0, like the real loopback's)."""
    return bool((record.get("network") or {}).get("latency_ms"))


def _rate(runs):
    return metrics.pooled_steady(runs)[1]["median"]  # the summary's estimator


def hidden_share(model, calibrations, n=2):
    """The share h of the smaller of the shaped transfer w and the loopback probe p0 that runs
    beside the other, from probes under a shaper (calibrations: [(Gbit/s, probe s)]): each
    (w + p0 - probe) / min(w, p0), their median, within [0, 1]. A ring all-reduce copies and
    reduces one chunk while the next is on the wire, the same in its probe as in training.
    Measured for all-reduce only: PSS's shaped training steps took the whole in-series sum
    while its probe took less (docs/scaling_model.md)."""
    shares = []
    for gbps, probe in calibrations:
        wire, p0 = model.wire_s(n, gbps), model.loopback_s
        if min(wire, p0) > 0:
            shares.append((wire + p0 - probe) / min(wire, p0))
    return min(1.0, max(0.0, metrics.median(shares))) if shares else 0.0


def _calibrations(records):
    """{(setting without its size, strategy): [(Gbit/s, probe s)]} of the shaped collectives
    cells at N=2 (the network experiment's all-reduce calibration, experiments/comparison/
    plan.py OVERLAP_CALIBRATION)."""
    out = collections.defaultdict(list)
    for r in records:
        if is_collectives_run(r) and bandwidth_of(r) and workers_of(r) == 2 and probe_of(r) \
                and kind(r["strategy"]).all_reduce and not _delayed(r):
            out[(unsized(setting_of(r)), r["strategy"])].append((bandwidth_of(r), probe_of(r)))
    return out


def models(records, shaped_only=True):
    """{(setting, strategy): Model} from each setting's unshaped N=1 and N=2 runs, for every
    setting with at least one shaped run (shaped_only=False: every setting that has both), with
    the all-reduce's hidden share from its shaped calibration where the experiment ran one."""
    calibrations = _calibrations(records)
    records = [r for r in records if not is_collectives_run(r)]
    by = collections.defaultdict(list)
    for r in records:
        if r["strategy"] in _STRATEGIES and not is_straggler_run(r) and not is_reducer_run(r) \
                and r.get("communication") and not _delayed(r):
            by[(setting_of(r), r["strategy"], workers_of(r), bandwidth_of(r))].append(r)
    wanted = {(s, strategy) for (s, strategy, _, b) in by if b or not shaped_only}
    out = {}
    for setting in {s for s, _ in wanted}:
        own = {strategy: by[(setting, strategy, 1, 0.0)] for strategy in _STRATEGIES
               if by.get((setting, strategy, 1, 0.0))}
        unshaped = [r for strategy in _STRATEGIES for r in by.get((setting, strategy, 2, 0.0), [])]
        if not own or not unshaped:
            continue
        profile, _ = profile_of(setting, [], own, unshaped)
        if profile is None:
            continue
        dtype = sync_dtype_of(setting)
        for strategy in _STRATEGIES:
            one, two = own.get(strategy), by.get((setting, strategy, 2, 0.0))
            if (setting, strategy) not in wanted or not one or not two:
                continue
            loopback = metrics.median([probe_of(r) for r in two]) or 0.0
            local = metrics.median([step_time_of(r) - profile.compute_s -
                             profile.overhead_s.get(strategy, 0.0) - (probe_of(r) or 0.0)
                             for r in two])
            model = Model(strategy, profile, dtype, max(0.0, local or 0.0), loopback,
                          cores_of(two), two[0].get("num_ps") or 1)
            measured = calibrations.get((unsized(setting), strategy))
            if measured:
                model.hidden, model.calibrations = hidden_share(model, measured), measured
            out[(setting, strategy)] = model
    return out


def rows(records, fitted=None):
    """One row per (setting, strategy, N, bandwidth) of the settings with shaped runs (fitted:
    models(records), when the caller has it)."""
    fitted = models(records) if fitted is None else fitted
    cells = collections.defaultdict(list)
    for r in records:
        key = (setting_of(r), r["strategy"])
        if key in fitted and not is_collectives_run(r) and not is_straggler_run(r) and \
                not is_reducer_run(r) and r.get("communication") and workers_of(r) >= 2 and \
                not _delayed(r):
            cells[(*key, workers_of(r), bandwidth_of(r))].append(r)
    out = []
    for (setting, strategy, n, gbps), runs in cells.items():
        model = fitted[(setting, strategy)]
        probe = metrics.median([probe_of(r) for r in runs])
        measured = _rate(runs)
        if gbps:
            predicted, comm = model.rate(n, gbps), model.comm_s(n, gbps)
            delivered = model.wire_bytes(n) * 8 / probe / 1e9 if probe else None
            note = ""
        else:  # the real loopback: the point the model's local term was fitted to
            comm, predicted = probe, model.rate(n, loopback_s=probe)
            delivered = None
            note = "fit point (real loopback)" if n == 2 else "real loopback"
        out.append(dict(zip(COLUMNS, (*setting, strategy, n, gbps, len(runs), measured,
                                      predicted, (predicted - measured) / measured
                                      if measured else None, probe, comm, delivered,
                                      model.hidden, note))))
    # Real loopback last: it is the fastest network.
    out.sort(key=lambda r: sort_key(tuple(r[k] for k in SETTING_KEYS)) + (
        r["strategy"], r["n"], r["bandwidth_gbps"] or math.inf))
    return out


def crossover(fitted, setting, n=2, low=1e-3, high=100.0):
    """The lowest bandwidth (Gbit/s) in [low, high] where the predicted MWMS and PSS
    throughputs cross, or None. The grid finds the bracket; bisection finds the point, so the
    report's figure and the plot's line (whose grid spans other bounds) agree: the PSS line
    bends sharply where its shared-link bound gives way, and interpolating across that bend
    would give one crossing two figures."""
    mwms, pss = fitted.get((setting, _STRATEGIES[0])), fitted.get((setting, _STRATEGIES[1]))
    if mwms is None or pss is None:
        return None
    diff = lambda b: mwms.rate(n, b) - pss.rate(n, b)  # noqa: E731
    grid = [low * (high / low) ** (i / 400) for i in range(401)]
    diffs = [diff(b) for b in grid]  # each grid point once
    for (b0, d0), (b1, d1) in zip(zip(grid, diffs), zip(grid[1:], diffs[1:])):
        if d0 == 0:
            return b0
        if d0 * d1 < 0:
            for _ in range(60):  # on the log scale, as the grid: far below any figure printed
                mid = math.sqrt(b0 * b1)
                if diff(mid) * d0 > 0:
                    b0 = mid
                else:
                    b1 = mid
            return math.sqrt(b0 * b1)
    return None


TIE = 0.01  # lines within 1% of each other past where they meet: a tie, not a crossing


def gap_above(fitted, setting, b, n=2, high=100.0):
    """The largest relative gap between the predicted MWMS and PSS rates from `b` to `high`
    Gbit/s: a PSS line that meets MWMS's at its bend and then runs along it has crossed in
    sign only."""
    mwms, pss = fitted[(setting, _STRATEGIES[0])], fitted[(setting, _STRATEGIES[1])]
    grid = [b * (high / b) ** (i / 200) for i in range(201)] if b < high else [b]
    return max(abs(mwms.rate(n, x) - pss.rate(n, x)) / max(mwms.rate(n, x), pss.rate(n, x))
               for x in grid)


def crossing(fitted, setting, low=1e-3, high=100.0):
    """(bandwidth, gap above it up to `high`) where the model's lines cross or meet (a tie
    when the gap is under TIE), or None: the report's line and the plot decide alike."""
    b = crossover(fitted, setting, low=low, high=high)
    return (b, gap_above(fitted, setting, b, high=high)) if b else None


def crossing_line(fitted, setting):
    """The report's line on where the model's MWMS and PSS lines cross, meet, or neither."""
    model = dict(zip(SETTING_KEYS, setting))["model"]
    found = crossing(fitted, setting)
    if not found:
        return (f"- {model}: the model's MWMS and PSS lines do not cross between 1 Mbit/s and "
                f"100 Gbit/s (N=2).")
    b, gap = found
    if gap < TIE:
        return (f"- {model}: the model's MWMS and PSS lines meet at {b:.3g} Gbit/s and stay "
                f"within {gap * 100:.2g}% of each other up to 100 Gbit/s: a predicted tie "
                f"there, not a crossing (N=2, shared link).")
    return (f"- {model}: the model's MWMS and PSS lines cross at {b:.3g} Gbit/s (N=2, shared "
            f"link).")


def markdown(network_rows, fitted):
    head = ("model", "strategy", "N", "emulated Gbit/s", "measured ex/s", "predicted ex/s",
            "error", "probe ms", "model comm ms", "shaper delivered Gbit/s")
    lines = ["## Network experiment", "",
             "MWMS and PSS at N=2 with the cluster's loopback shaped to B Gbit/s, shared by every "
             "link (`--emulate_bandwidth_gbps`, tc tbf). Predicted from the unshaped runs "
             "(the workload profile, and this machine's local term fitted on the unshaped N=2 "
             "row) plus the cost model's shared medium: MWMS 2(N-1)·G·8/B per step for a dense "
             "gradient (an embedding's sparse rows, all-gathered: N(N-1)·G_rows·8/B, beside its "
             "dense rest's 2(N-1)·G_rest·8/B), PSS (G+P)·8/B per worker step (push G, pull "
             "P) and the cluster bounded by B (results/report/network.py, "
             "results/model/cost_model.py), in series with p0, the same "
             "synchronization's probe on the real loopback, but for the share of the smaller "
             "of the two that an all-reduce runs beside the other, measured by its probe "
             "under a shaper none of the predicted runs has (the lines below). "
             "'Delivered' is the probe's bytes over its time: the shaper's real rate.", ""]
    ms = lambda s: f"{s * 1e3:.1f}" if s is not None else "–"  # noqa: E731
    cells = []
    for r in network_rows:
        cells.append([
            r["model"], r["strategy"], str(r["n"]),
            f"{r['bandwidth_gbps']:g}" if r["bandwidth_gbps"] else "real loopback",
            f"{r['examples_per_sec']:.0f}", f"{r['predicted_examples_per_sec']:.0f}",
            (f"{r['error'] * 100:+.1f}%" if r["error"] is not None else "–")
            + (f" ({r['note']})" if r["note"] else ""),
            ms(r["probe_s"]), ms(r["predicted_comm_s"]),
            f"{r['delivered_gbps']:.3f}" if r["delivered_gbps"] else "–"])
    lines.append(markdown_table(head, cells))
    line = errors_line([r["error"] for r in network_rows if r["bandwidth_gbps"]])
    if line:
        lines += ["", line]
    for (setting, strategy), model in sorted(fitted.items(), key=lambda kv: (
            sort_key(kv[0][0]), kv[0][1])):
        name = dict(zip(SETTING_KEYS, setting))["model"]
        if model.calibrations:
            probes = "; ".join(
                f"at {gbps:g} Gbit/s {probe * 1e3:.1f} ms against "
                f"{(model.wire_s(2, gbps) + model.loopback_s) * 1e3:.1f} in series"
                for gbps, probe in sorted(model.calibrations))
            lines.append(
                f"- {name}, {strategy}: {model.hidden:.2f} of the smaller of the shaped "
                f"transfer and p0 ({model.loopback_s * 1e3:.1f} ms) runs beside the other, "
                f"from its probe" + (f"s (the median share of {len(model.calibrations)})"
                                     if len(model.calibrations) > 1 else "") +
                f" under a shaper: {probes}.")
        elif kind(strategy).all_reduce:
            lines.append(f"- {name}, {strategy}: no shaped calibration cell among these records "
                         f"(the network experiment runs one per all-reduce strategy, at K=1): "
                         f"the shaped transfer and p0 are paid in series.")
    for setting in sorted({k[0] for k in fitted}, key=sort_key):
        lines.append(crossing_line(fitted, setting))
    return "\n".join(lines)


def plot(rows, fitted, path):
    """Throughput vs emulated bandwidth (log axis), per setting and strategy: measured dots, the
    model's line, the real loopback as a dot at the right, and where the model's lines cross."""
    settings = sorted({tuple(r[k] for k in SETTING_KEYS) for r in rows}, key=sort_key)
    fig, axes = plots.plt.subplots(1, len(settings), figsize=(6.5 * len(settings), 4.5),
                                   squeeze=False)
    for ax, setting in zip(axes[0], settings):
        group = [r for r in rows if tuple(r[k] for k in SETTING_KEYS) == setting]
        grid, real_x = plots.bandwidth_axis([r["bandwidth_gbps"] for r in group
                                             if r["bandwidth_gbps"]])
        for strategy in sorted({r["strategy"] for r in group}):
            color = REGISTRY[strategy].color
            model = fitted.get((setting, strategy))
            n = max(r["n"] for r in group if r["strategy"] == strategy)
            if model is not None:
                ax.plot(grid, [model.rate(n, b) for b in grid], "-", color=color,
                        label=f"{plots.short(strategy)} N={n} model")
            pts = [(r["bandwidth_gbps"] or real_x, r["examples_per_sec"]) for r in group
                   if r["strategy"] == strategy]
            ax.plot(*zip(*pts), "o", color=color,
                    label=f"{plots.short(strategy)} N={n} measured")
        found = crossing(fitted, setting, low=grid[0], high=grid[-1])
        if found:
            b, gap = found
            ax.axvline(b, color="k", ls="--", lw=1, label=f"lines meet at {b:.3g} Gbit/s, tie "
                       f"above" if gap < TIE else f"crossover {b:.3g} Gbit/s")
        plots.real_loopback(ax, real_x)
        ax.set(title=plots.title(setting),
               xlabel="emulated bandwidth, all links together (Gbit/s)", ylabel="examples/s")
        ax.legend(fontsize=8)
    fig.suptitle("Throughput vs network bandwidth (tc tbf on the cluster's loopback)")
    return plots.save(fig, path)


def section(records, path):
    """The network experiment's part of the report, its plot and CSV; None without shaped runs."""
    fitted = models(records)
    shaped = rows(records, fitted)
    if not shaped:
        return None
    return experiment_section(path, "network", markdown(shaped, fitted),
                              lambda png: plot(shaped, fitted, png), shaped, COLUMNS)

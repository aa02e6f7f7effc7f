"""The network experiment, from records: MWMS and PSS at N=2 under emulated bandwidths
(`--emulate_bandwidth_gbps`, tf_config/netshape.py), measured against the scaling model.

    python -m experiments.compare --experiments=network --models=cnn --bandwidths=0.02,0.1,0.5,0

The shaper is one token bucket on the private namespace's loopback, so its rate B is shared by
every link (tf_config/netshape.py). The cost model under it, with M = gradient bytes and p0 the
same synchronization's probe on the real loopback (its copies, RPCs and dispatch, paid in series
with the shaper):
  ring all-reduce (MWMS, N workers): every worker sends 2(N-1)/N·M, all at once, through the one
    shaper: c = 2(N-1)·M·8/B + p0 per step
  parameter server (PSS): a worker's step pushes M and pulls M: c = 2M·8/B + p0 per worker step;
    N workers step concurrently and share the shaper, so the cluster is also bounded by the
    shaper alone: rate <= b·B/(8·2M)
The model's other terms come from the same experiment's unshaped runs (B = 0 rows, the real
loopback): t_comp = the strategy's N=1 step minus its probe, t_sync = the unshaped N=2 step minus
t_comp and its probe (clamped >= 0; that row is the fit point, not a check); every prediction is
capped by the machine's cores x the N=1 run's examples per CPU-second (scaling_model). The
probe's bytes over its time give the shaper's delivered rate: the calibration column.
"""
import collections
import math

from results import metrics, plots
from results.cells import (SETTING_KEYS, bandwidth_of, is_straggler_run, setting_of, sort_key,
                           workers_of)
from results.records import write_text_atomic
from results.scaling_model import cpu_cap, probe_of, step_time_of
from results.tables import Section, csv_text, markdown_table

COLUMNS = (*SETTING_KEYS, "strategy", "n", "bandwidth_gbps", "runs", "examples_per_sec",
           "predicted_examples_per_sec", "error", "probe_s", "predicted_comm_s",
           "delivered_gbps", "note")
_STRATEGIES = ("multi_worker_mirrored", "parameter_server")


def wire_bytes(strategy, gradient_bytes, n):
    """Bytes one step puts through the shared shaper (see the module docstring)."""
    if strategy == "parameter_server":
        return 2 * gradient_bytes
    return 2 * (n - 1) * gradient_bytes


class Model:
    """The cost model of one (setting, strategy) under a shared shaper of B Gbit/s."""

    def __init__(self, strategy, batch, gradient_bytes, t_comp, t_sync, cap=None,
                 loopback_s=0.0):
        self.strategy, self.batch, self.gradient_bytes = strategy, batch, gradient_bytes
        self.t_comp, self.t_sync, self.cap = t_comp, t_sync, cap
        self.loopback_s = loopback_s  # the unshaped N=2 probe: loopback and fixed overhead

    def comm_s(self, n, gbps):
        """The shaper's time for the step's bytes, in series with what the same
        synchronization costs on the real loopback (its copies, RPCs and dispatch)."""
        return wire_bytes(self.strategy, self.gradient_bytes, n) * 8 / (gbps * 1e9) + \
            self.loopback_s

    def rate(self, n, gbps):
        rate = n * self.batch / (self.t_comp + self.t_sync + self.comm_s(n, gbps))
        if self.strategy == "parameter_server":  # every worker's pushes and pulls share B
            rate = min(rate, self.batch * gbps * 1e9 / 8 / wire_bytes(
                self.strategy, self.gradient_bytes, n))
        return min(rate, self.cap) if self.cap else rate


def _delayed(record):
    """A run with emulated latency (netem): the model has no latency term, so such runs are
    neither fit points nor checks (and their bandwidth may read 0, like the real loopback's)."""
    return bool((record.get("network") or {}).get("latency_ms"))


def _median(values):
    values = [v for v in values if v is not None]
    return metrics.spread(values)["median"] if values else None


def _rate(runs):
    return _median([metrics.steady_state(r["epochs"])["examples_per_sec"]["median"]
                    for r in runs])


def models(records, shaped_only=True):
    """{(setting, strategy): Model} from each setting's unshaped N=1 and N=2 runs, for every
    setting with at least one shaped run (shaped_only=False: every setting that has both)."""
    by = collections.defaultdict(list)
    for r in records:
        if r["strategy"] in _STRATEGIES and not is_straggler_run(r) and r.get("communication") \
                and not _delayed(r):
            by[(setting_of(r), r["strategy"], workers_of(r), bandwidth_of(r))].append(r)
    wanted = {(s, strategy) for (s, strategy, _, b) in by if b or not shaped_only}
    out = {}
    for setting, strategy in wanted:
        one, two = by.get((setting, strategy, 1, 0.0)), by.get((setting, strategy, 2, 0.0))
        if not one or not two:
            continue
        t_comp = _median([max(0.0, step_time_of(r) - (probe_of(r) or 0.0)) for r in one])
        t_sync = max(0.0, _median([step_time_of(r) - t_comp - (probe_of(r) or 0.0)
                                   for r in two]))
        cap = cpu_cap(one, two)
        out[(setting, strategy)] = Model(strategy, one[0]["batch_size_per_replica"],
                                         two[0]["communication"]["gradient_bytes"], t_comp,
                                         t_sync, cap[0] if cap else None,
                                         _median([probe_of(r) for r in two]) or 0.0)
    return out


def rows(records):
    """One row per (setting, strategy, N, bandwidth) of the settings with shaped runs."""
    fitted = models(records)
    cells = collections.defaultdict(list)
    for r in records:
        key = (setting_of(r), r["strategy"])
        if key in fitted and not is_straggler_run(r) and r.get("communication") and \
                workers_of(r) >= 2 and not _delayed(r):
            cells[(*key, workers_of(r), bandwidth_of(r))].append(r)
    out = []
    for (setting, strategy, n, gbps), runs in cells.items():
        model = fitted[(setting, strategy)]
        probe = _median([probe_of(r) for r in runs])
        measured = _rate(runs)
        if gbps:
            predicted, comm = model.rate(n, gbps), model.comm_s(n, gbps)
            delivered = wire_bytes(strategy, model.gradient_bytes, n) * 8 / probe / 1e9 \
                if probe else None
            note = ""
        else:  # the real loopback: the point the model's t_sync was fitted to
            comm = probe
            step = model.t_comp + model.t_sync + (probe or 0.0)
            predicted = min(n * model.batch / step, model.cap or math.inf)
            delivered, note = None, "fit point (real loopback)"
        out.append(dict(zip(COLUMNS, (*setting, strategy, n, gbps, len(runs), measured,
                                      predicted, (predicted - measured) / measured
                                      if measured else None, probe, comm, delivered, note))))
    # Real loopback last: it is the fastest network.
    out.sort(key=lambda r: sort_key(tuple(r[k] for k in SETTING_KEYS)) + (
        r["strategy"], r["n"], r["bandwidth_gbps"] or math.inf))
    return out


def crossover(fitted, setting, n=2, low=1e-3, high=100.0):
    """The bandwidth (Gbit/s) where the predicted MWMS and PSS throughputs cross, or None."""
    mwms, pss = fitted.get((setting, _STRATEGIES[0])), fitted.get((setting, _STRATEGIES[1]))
    if mwms is None or pss is None:
        return None
    grid = [low * (high / low) ** (i / 400) for i in range(401)]
    diff = [mwms.rate(n, b) - pss.rate(n, b) for b in grid]
    for (b0, d0), (b1, d1) in zip(zip(grid, diff), zip(grid[1:], diff[1:])):
        if d0 == 0 or d0 * d1 < 0:
            return b0 if d0 == 0 else b0 + (b1 - b0) * d0 / (d0 - d1)
    return None


def markdown(network_rows, fitted):
    head = ("model", "strategy", "N", "emulated Gbit/s", "measured ex/s", "predicted ex/s",
            "error", "probe ms", "model comm ms", "shaper delivered Gbit/s")
    lines = ["## Network experiment", "",
             "MWMS and PSS at N=2 with the cluster's loopback shaped to B Gbit/s, shared by every "
             "link (`--emulate_bandwidth_gbps`, tc tbf). Predicted from the unshaped runs' "
             "t_comp and t_sync plus the shared-shaper cost model: MWMS 2(N-1)·M·8/B per step, "
             "PSS 2M·8/B per worker step and the cluster bounded by B (results/network.py). "
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
    checked = [abs(r["error"]) for r in network_rows if r["bandwidth_gbps"] and r["error"]
               is not None]
    if checked:
        lines += ["", f"Largest error over the shaped points: {max(checked) * 100:.1f}% "
                      f"({sum(e <= 0.2 for e in checked)}/{len(checked)} within ±20%)."]
    for setting in sorted({k[0] for k in fitted}, key=sort_key):
        b = crossover(fitted, setting)
        model = dict(zip(SETTING_KEYS, setting))["model"]
        lines.append(f"- {model}: " + (f"the model's MWMS and PSS lines cross at {b:.3g} Gbit/s "
                                       f"(N=2, shared link)." if b else
                                       "the model's MWMS and PSS lines do not cross between "
                                       "1 Mbit/s and 100 Gbit/s (N=2)."))
    return "\n".join(lines)


def section(records, path):
    """The network experiment's part of the report, its plot and CSV; None without shaped runs."""
    shaped = rows(records)
    if not shaped:
        return None
    fitted = models(records)
    return Section(markdown(shaped, fitted), plots=[plots.network(shaped, fitted,
                                                                  path("network.png"))],
                   files=[write_text_atomic(path("network.csv"), csv_text(shaped, COLUMNS))])

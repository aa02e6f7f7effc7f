"""A scaling model fitted to the measured runs, and projections to clusters we do not have.

Per-step time of one worker at N workers (per-replica batch b fixed, so an epoch of E examples
has S_N = E / (N b) steps):

    t_N = t_comp + c(N) + t_sync          epoch:  T_N = T_comp / N + T_comm(N) + T_sync(N)
                                           with T_comp = S_1 t_comp, T_comm = S_N c(N), T_sync = S_N t_sync

  t_comp   compute of one step: the strategy's own 1-worker step (its N=1 run of the same
           setting) minus the synchronization its probe measured there (MWMS N=1: none; PSS N=1:
           the push/pull to its ps); the 1-thread baseline's step only when the strategy has no
           N=1 run, and the fit's notes say so
  c(N)     gradient synchronization, from a standard cost model on a stated network
           (bandwidth B, latency a) with M = gradient bytes:
             ring all-reduce (MWMS):   2 (N-1)/N * M/B + 2 (N-1) a
             K parameter servers:      2 M/B * max(1, N/K) + 2 a   (each ps link carries N/K
                                       workers' pulls and pushes of its 1/K of the variables)
  t_sync   everything else a distributed step pays (dispatch, stragglers, waiting), fitted as the
           mean residual of the measured runs once compute and the measured probe are removed,
           clamped to >= 0 (a negative residual means t_comp is too slow for these runs: noted).

Validation: the 2-worker throughput predicted from the 1-worker run plus the communication probe
measured in that 2-worker run (t_comp + probe, no fitted term) against the measurement. A local
cluster's processes share this machine's cores and wait on each other every step (MWMS workers
for the all-reduce, a PSS worker for the ps), so there t_comp is multiplied by the slowdown two
plain TF loops in lockstep showed sharing them (experiments/comparison/sharing.py), and the prediction
is capped by what the cores deliver at the N=1 run's examples per CPU-second (workers, ps and
chief alike) over the same slowdown; the projections to other clusters use neither.
Assumptions (stated in the report): every worker has its own cores (no sharing), synchronization
does not overlap compute, the network is full duplex and uncontended, per-replica batch fixed
(settings with a fixed --global_batch_size are not fitted). An efficiency above 100% (a measured
run stepping faster than t_comp) is not physical: such rows carry a note, never a bare number.
"""
import collections
import dataclasses

from results import metrics
from results.records import write_text_atomic
from results.tables import Section, csv_text, markdown_table
from results.cells import (BASELINE_RUN, ENGINE_FLOOR, SETTING_KEYS, is_network_run,
                           is_straggler_run, role_of, setting_of, sort_key, workers_of)

PROJECT_NS = (1, 2, 4, 8, 16, 32, 64)
COST_MODEL = {"multi_worker_mirrored": "ring all-reduce", "parameter_server": "K parameter servers"}
COLUMNS = (*SETTING_KEYS, "strategy", "n", "kind", "step_time_s", "compute_s",
           "communication_s", "sync_s", "examples_per_sec", "speedup", "efficiency", "note")
_KEY = len(SETTING_KEYS) + 3  # setting, strategy, N, kind
UNPHYSICAL = "above 100%: not physical, see the scaling model's notes on t_comp"


@dataclasses.dataclass(frozen=True)
class Network:
    bandwidth_gbps: float = 10.0  # per link, each direction
    latency_us: float = 50.0  # per message

    @property
    def bytes_per_s(self):
        return self.bandwidth_gbps * 1e9 / 8

    @property
    def latency_s(self):
        return self.latency_us * 1e-6


def ring_allreduce_s(gradient_bytes, n, net):
    if n <= 1:
        return 0.0
    return 2 * (n - 1) / n * gradient_bytes / net.bytes_per_s + 2 * (n - 1) * net.latency_s


def parameter_server_s(gradient_bytes, n, num_ps, net):
    return 2 * gradient_bytes / net.bytes_per_s * max(1.0, n / max(num_ps, 1)) + \
        2 * net.latency_s


def step_time_of(record):
    return metrics.per_worker_step_time(
        metrics.steady_state(record["epochs"])["epoch_time_s"]["median"],
        record["steps_per_epoch"], record["strategy"], record["num_workers"])


def probe_of(record):
    return ((record.get("communication") or {}).get("probe_s") or {}).get("median")


@dataclasses.dataclass
class Fit:
    setting: tuple  # in SETTING_KEYS order
    strategy: str
    batch: int  # per-replica (= per-worker) batch the runs trained
    num_ps: int
    gradient_bytes: int
    t_comp: float
    t_sync: float
    measured: dict  # n -> (step time, probe seconds, examples/s)
    prediction_n2: tuple = None  # (predicted examples/s, measured examples/s, relative error)
    own_cores_n2: float = None  # the N=2 prediction before this machine's sharing slowdown
    slowdown: tuple = None  # (factor, phase, calibrations) applied to t_comp at N=2 here
    notes: list = dataclasses.field(default_factory=list)  # where t_comp came from, clamps

    @property
    def model(self):
        return self.setting[SETTING_KEYS.index("model")]

    @property
    def train_examples(self):
        return self.setting[SETTING_KEYS.index("train_examples")]

    def comm(self, n, net):
        if self.strategy == "parameter_server":
            return parameter_server_s(self.gradient_bytes, n, self.num_ps, net)
        return ring_allreduce_s(self.gradient_bytes, n, net)

    def loopback_gbps(self):
        """Bandwidth implied by the N=2 probe: the bytes the cost model moves / probe time."""
        probe = self.measured[2][1]
        moved = 2 * self.gradient_bytes if self.strategy == "parameter_server" else \
            self.gradient_bytes  # ring at N=2: 2 (N-1)/N M = M
        return moved * 8 / probe / 1e9

    def project(self, n, net):
        batch = self.batch
        comm = self.comm(n, net)  # a ring of one moves nothing; a PSS worker still pulls/pushes
        sync = self.t_sync if n > 1 or self.strategy == "parameter_server" else 0.0
        step = self.t_comp + comm + sync
        rate = n * batch / step
        speedup = rate / (batch / self.t_comp)
        return {"step_time_s": step, "compute_s": self.t_comp, "communication_s": comm,
                "sync_s": sync, "examples_per_sec": rate, "speedup": speedup,
                "efficiency": speedup / n}


def _compute_step(record):
    """A 1-worker run's step without the synchronization its probe measured (0 if unprobed)."""
    return max(0.0, step_time_of(record) - (probe_of(record) or 0.0))


def _t_comp(own, baseline, strategy, worker_threads):
    """(t_comp, notes): the strategy's own N=1 compute step, else the 1-thread baseline's."""
    t_comp = metrics.spread([_compute_step(r) for r in own or []])["median"]
    if own and not t_comp and baseline:
        # Its probe took as long as its whole step (a small model behind a ps): no compute
        # left to read from it; the baseline's step is the better estimate, and is named.
        return metrics.spread(baseline)["median"], [
            f"t_comp from the 1-thread baseline: {strategy} N=1's probe is as long as its step"]
    if own:
        threads = {r.get("threads_per_task") for r in own}
        notes = [f"t_comp from {strategy} N=1 ({len(own)} run(s)) minus its probe"]
        if threads != worker_threads:
            notes.append(f"its N=1 run had {'/'.join(map(str, sorted(threads, key=str)))} "
                         f"thread(s) per task, the N>=2 workers "
                         f"{'/'.join(map(str, sorted(worker_threads, key=str)))}")
        if not all(probe_of(r) is not None for r in own):
            notes.append("its N=1 run has no probe: its synchronization stays in t_comp")
        return t_comp, notes
    if baseline:
        return metrics.spread(baseline)["median"], [
            f"t_comp from the 1-thread baseline: no {strategy} N=1 run in this setting"]
    return None, []


def cpu_cap(own_n1, runs_n2):
    """(examples/s, cores, examples per CPU-second): what the machine's cores can deliver at the
    N=1 run's CPU cost per example; None without CPU figures. The 2-worker runs of a local
    cluster share this machine's cores, so a cluster whose every task (PSS: ps and chief too)
    wants more cores than exist runs no faster than that, whatever the network."""
    per_cpu = [((r.get("cpu") or {}).get("examples_per_cpu_second"), (r.get("cpu") or {}).get(
        "scope")) for r in own_n1 or []]
    per_cpu = [v for v, scope in per_cpu if v and scope == "all tasks"]
    cores = [(r.get("environment") or {}).get("usable_cpus") or (r.get("environment") or {}).get(
        "cpu_count") for r in runs_n2]
    cores = [c for c in cores if c]
    if not per_cpu or not cores:
        return None
    e1 = metrics.spread(per_cpu)["median"]
    return min(cores) * e1, min(cores), e1


# Which phase of the sharing calibration a local cluster's processes resemble. Both wait on
# another process every step: MWMS workers on each other (the all-reduce), a PSS worker on the ps
# (its pull and push). With every core busy, each such hand-off waits for a core as well; the
# lockstep phase measures that. (The free phase, independent loops, is the report's "machine's
# limit" row.)
SHARING_PHASE = {"multi_worker_mirrored": "lockstep", "parameter_server": "lockstep"}


def slowdown_of(sharing, strategy):
    """(factor, phase, calibrations): how much slower this machine runs a 1-worker step when the
    2-worker cluster's processes share its cores, from the sharing calibrations of the setting
    (experiments.comparison.sharing; the median when repeated); None without one."""
    phase = SHARING_PHASE[strategy]
    values = [(s.get("slowdown") or {}).get(phase) for s in sharing or []
              if s.get("processes") == 2]
    values = [v for v in values if v]
    if not values:
        return None
    return metrics.spread(values)["median"], phase, len(values)


def _compute_at(t_comp, n, slowdown):
    """A measured run's compute per step: t_comp, slowed at N=2 by the sharing calibration."""
    return t_comp * slowdown[0] if slowdown is not None and n == 2 else t_comp


def fit(records):
    """One Fit per (setting, multi-worker strategy) with a probed run at N >= 2 and a t_comp
    (see `_t_comp`). Straggler runs and settings with a fixed global batch are left out."""
    baselines = collections.defaultdict(list)
    own_n1 = collections.defaultdict(list)
    runs = collections.defaultdict(lambda: collections.defaultdict(list))
    sharing = collections.defaultdict(list)
    for r in records:
        if r.get("sharing") and role_of(r) == ENGINE_FLOOR:
            sharing[setting_of(r)].append(r["sharing"])
            continue
        setting = setting_of(r)
        if is_straggler_run(r) or is_network_run(r) or not r.get("steps_per_epoch") or \
                setting[SETTING_KEYS.index("global_batch_size")]:
            continue
        if role_of(r) == BASELINE_RUN and r.get("threads_per_task") == 1:
            baselines[setting].append(step_time_of(r))
        elif r["strategy"] in COST_MODEL and workers_of(r) == 1:
            own_n1[(setting, r["strategy"])].append(r)
        elif r["strategy"] in COST_MODEL and r.get("communication") and workers_of(r) >= 2:
            runs[(setting, r["strategy"])][workers_of(r)].append(r)
    fits = []
    for (setting, strategy), by_n in sorted(runs.items(), key=lambda item: (
            sort_key(item[0][0]), item[0][1])):
        all_runs = [r for rs in by_n.values() for r in rs]
        t_comp, notes = _t_comp(own_n1.get((setting, strategy)), baselines.get(setting),
                                strategy, {r.get("threads_per_task") for r in all_runs})
        if not t_comp:
            continue
        measured = {}
        for n, rs in sorted(by_n.items()):
            step = metrics.spread([step_time_of(r) for r in rs])["median"]
            probe = metrics.spread([probe_of(r) for r in rs])["median"]
            rate = metrics.spread([metrics.steady_state(r["epochs"])["examples_per_sec"]["median"]
                                   for r in rs])["median"]
            measured[n] = (step, probe, rate)
        slowdown = slowdown_of(sharing.get(setting), strategy)
        # The 2-worker runs' compute ran slower on these shared cores by the calibration's
        # slowdown: that is this machine's, not synchronization, and stays out of t_sync (which
        # the projections to other clusters carry).
        residual = sum(step - _compute_at(t_comp, n, slowdown) - probe
                       for n, (step, probe, _) in measured.items()) / len(measured)
        if residual < 0:
            notes.append(f"t_sync fitted {residual * 1e3:.2f} ms, clamped to 0: the measured "
                         f"runs step faster than t_comp + probe, so t_comp is too slow for them")
        first = all_runs[0]
        f = Fit(setting, strategy, first["batch_size_per_replica"], first.get("num_ps") or 1,
                first["communication"]["gradient_bytes"], t_comp, max(0.0, residual), measured,
                notes=notes)
        if 2 in measured:
            step, probe, rate = measured[2]
            f.own_cores_n2 = 2 * f.batch / (t_comp + probe)  # workers with cores of their own
            predicted = f.own_cores_n2
            if slowdown is not None:
                # This machine's 2-worker cluster shares its cores: its workers' compute runs as
                # much slower as two plain loops sharing them ran in the calibration.
                f.slowdown = slowdown
                predicted = 2 * f.batch / (t_comp * slowdown[0] + probe)
                notes.append(f"N=2 prediction on this machine: t_comp x {slowdown[0]:.2f}, the "
                             f"slowdown of two plain TF loops run {slowdown[1]} here "
                             f"(sharing calibration, {slowdown[2]} run(s)); with cores of their "
                             f"own {f.own_cores_n2:.0f} examples/s")
            else:
                notes.append("no sharing calibration in this setting: the N=2 prediction "
                             "assumes each worker computes as fast as one process alone")
            cap = cpu_cap(own_n1.get((setting, strategy)), by_n[2])
            # Cores shared by processes that wait on each other every step do 1/slowdown of the
            # work they do for one process alone: the cap counts that too.
            factor = slowdown[0] if slowdown is not None else 1.0
            if cap is not None and cap[0] / factor < predicted:
                predicted = cap[0] / factor
                notes.append(f"N=2 prediction capped by this machine's CPU: {cap[1]} cores x the "
                             f"N=1 run's {cap[2]:.0f} examples per CPU-second"
                             + (f" / {factor:.2f} (the same slowdown)" if factor != 1.0 else "")
                             + " (its tasks, ps and chief included, need more cores than there "
                             "are)")
            f.prediction_n2 = (predicted, rate, (predicted - rate) / rate)
        fits.append(f)
    return fits


def _flag(row):
    """The row with its `note`: an efficiency above 100% is never shown bare."""
    row["note"] = UNPHYSICAL if row["efficiency"] > 1 + 1e-9 else ""
    return row


def projection_rows(fits, net, ns=PROJECT_NS):
    rows = []
    for f in fits:
        one_worker = f.batch / f.t_comp  # examples/s of one worker at t_comp
        for n in ns:
            rows.append(_flag(dict(zip(COLUMNS[:_KEY], (*f.setting, f.strategy, n, "projected")),
                                   **f.project(n, net))))
        for n, (step, probe, rate) in f.measured.items():
            compute = _compute_at(f.t_comp, n, f.slowdown)
            rows.append(_flag(dict(zip(COLUMNS[:_KEY], (*f.setting, f.strategy, n, "measured")),
                                   step_time_s=step, compute_s=compute, communication_s=probe,
                                   sync_s=step - compute - probe, examples_per_sec=rate,
                                   speedup=rate / one_worker,
                                   efficiency=rate / one_worker / n)))
    return rows


def validation_lines(fits):
    out = []
    for f in fits:
        if f.prediction_n2:
            predicted, measured, error = f.prediction_n2
            out.append(f"{f.model} {f.strategy} N=2: predicted {predicted:.0f} examples/s "
                       f"from the 1-worker run + probe, measured {measured:.0f} "
                       f"(error {error * 100:+.1f}%); {'; '.join(f.notes)}")
    return out


def _ms(seconds):
    return f"{seconds * 1e3:.2f}"


def markdown(fits, rows, net):
    """The report's 'Scaling model' section."""
    parts = ["## Scaling model and projections", "",
             "Per-worker step time t_N = t_comp + c(N) + t_sync, i.e. epoch time "
             "T_N = T_comp/N + T_comm(N) + T_sync(N) (per-replica batch fixed; settings with a "
             "fixed global batch are not fitted). t_comp: the strategy's own N=1 step minus the "
             "synchronization its probe measured (the 1-thread baseline's step when there is no "
             "N=1 run: see the notes); c(N): ring all-reduce 2(N-1)/N·M/B + 2(N-1)·a "
             "(MWMS) or K parameter servers 2M/B·max(1, N/K) + 2a (PSS); t_sync: mean residual of "
             "the measured runs after compute (at N=2 on this machine: t_comp x the sharing "
             "calibration's lockstep slowdown, when there is one) and the measured communication "
             "probe, clamped to >= 0. "
             f"Projected network: B = {net.bandwidth_gbps:g} Gbit/s per link, "
             f"a = {net.latency_us:g} µs per message (`--network_gbps`, `--network_latency_us`).",
             "",
             "Assumptions: each worker has its own cores (on this machine the workers share "
             "them), synchronization does not overlap compute, links are full duplex and "
             "uncontended, every worker is equally fast, the per-replica batch stays fixed.", "",
             "The projection uses the stated network, not this machine's loopback: at N=2 its "
             "line need not meet the measured point. 'loopback Gbit/s' is the bandwidth the "
             "probe implies here (bytes the cost model moves at N=2 / probe time).", "",
             ]
    cells = []
    for f in fits:
        probe2 = f.measured.get(2, (None, None, None))[1]
        pred = f.prediction_n2
        cells.append([
            f.model, str(f.train_examples), f.strategy, f"{f.gradient_bytes / 1e6:.2f}",
            _ms(f.t_comp), _ms(probe2) if probe2 is not None else "–",
            f"{f.loopback_gbps():.2f}" if probe2 else "–", _ms(f.t_sync),
            f"{pred[0]:.0f}" if pred else "–", f"{pred[1]:.0f}" if pred else "–",
            f"{pred[2] * 100:+.1f}%" if pred else "–"])
    parts.append(markdown_table(["model", "examples", "strategy", "M (MB)", "t_comp ms",
                                 "probe at N=2 ms", "loopback Gbit/s", "t_sync ms",
                                 "predicted N=2 ex/s", "measured N=2 ex/s", "error"], cells))
    parts += ["", "Notes:", ""] + [f"- {f.model}, {f.train_examples} examples, {f.strategy}: "
                                   f"{'; '.join(f.notes)}." for f in fits if f.notes]
    parts += [f"- {r['model']}, {r['train_examples']} examples, {r['strategy']} N={r['n']} "
              f"({r['kind']}): efficiency {r['efficiency'] * 100:.0f}% vs t_comp, {r['note']}."
              for r in rows if r["note"]]
    projected = [[r["model"], str(r["train_examples"]), r["strategy"], str(r["n"]),
                  f"{r['examples_per_sec']:.0f}", f"{r['speedup']:.2f}",
                  f"{r['efficiency'] * 100:.0f}%" + (f" ({r['note']})" if r["note"] else ""),
                  f"{r['communication_s'] / r['step_time_s'] * 100:.0f}%"]
                 for r in rows if r["kind"] == "projected" and r["n"] >= 4]
    parts += ["", markdown_table(["model", "examples", "strategy", "N", "projected ex/s",
                                  "speedup vs 1 worker", "efficiency", "comm share of step"],
                                 projected)]
    return "\n".join(parts)


def section(fits, net, path):
    """The scaling model's part of the report: its projection plot and CSV; None unfitted."""
    if not fits:
        return None
    from results import plots  # matplotlib, only when there is something to draw

    projected = projection_rows(fits, net)
    return Section(markdown(fits, projected, net),
                   plots=[plots.projection(projected, path("projection.png"))],
                   files=[write_text_atomic(path("projection.csv"), csv_text(projected,
                                                                             COLUMNS))])

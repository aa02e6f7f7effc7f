"""The scaling model of a comparison: its workload profile fitted from the measured runs, the
runs of this machine predicted from it, and projections to clusters we do not have, all through
the one cost model (results/cost_model.py).

The profile (per setting, cost_model.WorkloadProfile; written as
profile-<model>-<examples>-b<batch>-k<K>-<dtype>.json):
  compute_s    one replica's step at its batch with one core: the 1-thread baseline's step (every
               strategy alike); without a baseline, the MWMS (else PSS) N=1 step minus its
               probe, and the notes say so
  overhead_s   per strategy: its N=1 step minus compute_s and its own probe (its dispatch and
               input path with no peer to wait for); when that is negative, overhead 0 and
  overlap      the share of its probe the N=1 step hid behind compute (PSS: the ps and chief
               serve on other cores while the worker computes); communication x (1 - overlap)
  tensors      gradient tensors per step
  batch        examples per replica per step: the record's step batch (micro-batch x
               --accumulation_steps) over its replicas in sync
  bytes        gradient bytes per sync dtype and kind, the PSS pull (variables in their own
               dtype), parameters, optimizer state and activations, from the records

This machine's runs at N >= 2 (the validation): N x batch / (compute_s x s_N + overhead +
sync_N x (1 - overlap)) with sync_N = alpha_N + per_tensor_N x (tensors - 1) + beta_N x bytes from the sweep of message sizes that the comparison's
collectives cell ran with N processes before the N-worker runs (`--comm_sweep`; bytes: the
gradient for all-reduce, (push + pull) / 2 for PSS, whose sweep pulls and pushes each size);
without a sweep, the probe measured in the predicted runs themselves, and the notes call that
prediction in-sample; s_N the slowdown of N plain TF
loops sharing these cores in lockstep (experiments/comparison/sharing.py at K = N; without one
the notes say that the prediction assumes cores of their own), capped by what the cores deliver at
the N=1 run's examples per CPU-second, over s_N while the workers do not outnumber the cores
(their waits leave cores idle; with more workers than cores none idles). Nothing in it is
fitted to the runs it predicts: what the prediction does not explain is shown as the error, never
folded into a term that the projections would carry.

Projections: cost_model.predict for N workers on a stated network (--network_gbps,
--network_latency_us): one host per worker. This machine's sharing never reaches them.
"""
import collections
import dataclasses

from strategies import kind

from results import cost_model, metrics
from results.records import write_text_atomic
from results.tables import Section, csv_text, markdown_table
from results.cells import (BASELINE_RUN, ENGINE_FLOOR, SETTING_KEYS, is_collectives_run,
                           is_network_run, is_straggler_run, role_of, setting_of, sort_key,
                           workers_of)

PROJECT_NS = (1, 2, 4, 8, 16, 32, 64)
COLUMNS = (*SETTING_KEYS, "strategy", "n", "kind", "step_time_s", "compute_s",
           "communication_s", "overhead_s", "examples_per_sec", "speedup", "efficiency", "note")
_KEY = len(SETTING_KEYS) + 3  # setting, strategy, N, kind
UNPHYSICAL = "above 100%: not physical, see the scaling model's notes on compute"


@dataclasses.dataclass(frozen=True)
class Network:
    bandwidth_gbps: float = 10.0  # per link, each direction
    latency_us: float = 50.0  # per message


def step_time_of(record):
    return metrics.per_worker_step_time(
        metrics.steady_state(record["epochs"])["epoch_time_s"]["median"],
        record["steps_per_epoch"], record["strategy"], record["num_workers"])


def probe_of(record):
    return ((record.get("communication") or {}).get("probe_s") or {}).get("median")


def step_batch_of(record):
    """Examples one replica trains per step: micro-batch x accumulation steps (a PSS worker's
    step is one replica's)."""
    return record["global_batch_size"] // max(1, record.get("num_replicas_in_sync") or 1)


def measured_cell(runs):
    """(per-worker step time, probe, examples/s) of one cell's runs, with the summary's own
    estimator (metrics.pooled_steady): the report states one "measured" per cell."""
    time_s, rate = metrics.pooled_steady(runs)
    first = runs[0]
    step = metrics.per_worker_step_time(time_s["median"], first["steps_per_epoch"],
                                        first["strategy"], first["num_workers"])
    return step, metrics.spread([probe_of(r) for r in runs])["median"], rate["median"]


@dataclasses.dataclass
class Fit:
    setting: tuple  # in SETTING_KEYS order
    strategy: str
    profile: cost_model.WorkloadProfile
    num_ps: int
    measured: dict  # n -> (per-worker step time, probe seconds, examples/s)
    predictions: dict = dataclasses.field(default_factory=dict)  # n -> (predicted, measured, error)
    own_cores: dict = dataclasses.field(default_factory=dict)  # n -> prediction without sharing
    slowdowns: dict = dataclasses.field(default_factory=dict)  # n -> (factor, phase, runs)
    sync: dict = dataclasses.field(default_factory=dict)  # n -> (seconds, source)
    sync_fits: dict = dataclasses.field(default_factory=dict)  # n -> LatencyBandwidth (sweep)
    notes: list = dataclasses.field(default_factory=list)

    @property
    def model(self):
        return self.setting[SETTING_KEYS.index("model")]

    @property
    def train_examples(self):
        return self.setting[SETTING_KEYS.index("train_examples")]

    @property
    def batch(self):
        return self.profile.batch

    @property
    def t_comp(self):
        return self.profile.compute_s

    @property
    def overhead(self):
        return self.profile.overhead_s.get(self.strategy, 0.0)

    @property
    def gradient_bytes(self):
        return self.profile.gradient(self.dtype)

    @property
    def dtype(self):
        return sync_dtype_of(self.setting)

    @property
    def prediction_n2(self):
        return self.predictions.get(2)

    def cluster(self, n, net):
        """N workers, one per host, on the stated network."""
        return cost_model.ClusterSpec(hosts=n, inter_host_gbps=net.bandwidth_gbps,
                                      inter_host_latency_us=net.latency_us, num_ps=self.num_ps)

    def project(self, n, net):
        p = cost_model.predict(self.profile, self.cluster(n, net), self.strategy, self.dtype)
        return {"step_time_s": p.step_s, "compute_s": p.compute_s,
                "communication_s": p.communication_s, "overhead_s": p.overhead_s,
                "examples_per_sec": p.examples_per_sec, "speedup": p.speedup,
                "efficiency": p.efficiency}

    def loopback_gbps(self, n=2):
        """Bandwidth the probe at N implies here: the bytes the cost model moves / probe time."""
        probe = self.measured[n][1]
        moved = cost_model.bytes_moved(self.profile, self.strategy, n, self.dtype)
        return moved * 8 / probe / 1e9 if probe else None


def cpu_cap(own_n1, runs_n):
    """(examples/s, cores, examples per CPU-second): what the machine's cores can deliver at the
    N=1 run's CPU cost per example; None without CPU figures. A local cluster's runs share this
    machine's cores, so a cluster whose every task (PSS: ps and chief too) wants more cores than
    exist runs no faster than that, whatever the network."""
    per_cpu = [((r.get("cpu") or {}).get("examples_per_cpu_second"), (r.get("cpu") or {}).get(
        "scope")) for r in own_n1 or []]
    per_cpu = [v for v, scope in per_cpu if v and scope == "all tasks"]
    cores = [(r.get("environment") or {}).get("usable_cpus") or (r.get("environment") or {}).get(
        "cpu_count") for r in runs_n]
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
SHARING_PHASE = "lockstep"


def sweep_fit(sweeps, strategy, n):
    """cost_model.LatencyBandwidth of the collectives cells' sweeps of `strategy` with `n`
    processes (the median time per size over repeats); None without one."""
    by_size, by_count = collections.defaultdict(list), collections.defaultdict(list)
    for points in sweeps.get((strategy, n), []):
        for p in points:
            tensors = p.get("tensors", 1)
            if tensors > 1 or p["bytes"] == cost_model.SWEEP_SPLIT_BYTES:
                by_count[tensors].append(p["probe_s"]["median"])
            if tensors == 1:
                by_size[p["bytes"]].append(p["probe_s"]["median"])
    if len(by_size) < 2:
        return None
    return cost_model.fit_latency_bandwidth(
        [(b, metrics.median(ts)) for b, ts in by_size.items()],
        [(k, metrics.median(ts)) for k, ts in by_count.items()])


def sync_bytes(profile, strategy, dtype):
    """The message size whose sweep time stands for one step's synchronization: the gradient
    (all-reduce packs a step's gradients into one message), or for PSS, whose sweep pulls and
    pushes each size, the mean of what a step pushes and pulls."""
    gradient = profile.gradient(dtype)
    if kind(strategy).parameter_servers:
        return (gradient + profile.pull_bytes) / 2
    return gradient


def slowdown_of(sharing, strategy, n=2):
    """(factor, phase, calibrations): how much slower this machine runs a 1-worker step when an
    N-worker cluster's processes share its cores, from the sharing calibrations of the setting
    with K = N processes (the median when repeated); None without one."""
    phase = SHARING_PHASE
    values = [(s.get("slowdown") or {}).get(phase) for s in sharing or []
              if s.get("processes") == n]
    values = [v for v in values if v]
    if not values:
        return None
    return metrics.spread(values)["median"], phase, len(values)


def sync_dtype_of(setting):
    """The setting's --gradient_sync_dtype (records from before the flag: float32)."""
    return setting[SETTING_KEYS.index("gradient_sync_dtype")] or "float32"


def _compute_step(record):
    """A 1-worker run's step without the synchronization its probe measured (0 if unprobed)."""
    return max(0.0, step_time_of(record) - (probe_of(record) or 0.0))


def profile_of(setting, baseline, own_n1, runs):
    """(WorkloadProfile, notes) of one setting. baseline: its 1-thread baseline records;
    own_n1: {strategy: its N=1 records}; runs: the setting's probed multi-worker records."""
    notes = []
    compute = metrics.median([step_time_of(r) for r in baseline])
    if compute:
        notes.append("compute from the 1-thread baseline's step (one core, every strategy alike)")
    else:
        for strategy in cost_model.STRATEGIES:
            compute = metrics.median([_compute_step(r) for r in own_n1.get(strategy, [])])
            if compute:
                notes.append(f"compute from {strategy} N=1 minus its probe: no 1-thread baseline "
                             f"in this setting")
                break
    if not compute:
        return None, notes
    overhead, overlap = {}, {}
    for strategy, own in own_n1.items():
        value = metrics.median([step_time_of(r) - compute - (probe_of(r) or 0.0) for r in own])
        probe = metrics.median([probe_of(r) or 0.0 for r in own]) or 0.0
        if value is not None and value < 0 and probe:
            # Its step hid part of the synchronization the probe timed alone: the share hidden
            # is the overlap (PSS: the ps and chief serve on other cores while the worker
            # computes); the projections hide the same share.
            overlap[strategy] = min(1.0, -value / probe)
            notes.append(f"{strategy} N=1 stepped {-value * 1e3:.2f} ms faster than the 1-thread "
                         f"compute plus its probe: {overlap[strategy]:.0%} of its "
                         f"synchronization overlaps compute, overhead 0")
        elif value is not None and value < 0:
            notes.append(f"{strategy} N=1 stepped {-value * 1e3:.2f} ms faster than the 1-thread "
                         f"compute (no probe to overlap): overhead 0")
        overhead[strategy] = max(0.0, value or 0.0)
    comm = next(r["communication"] for r in runs)
    kinds = comm.get("gradient_kinds") or {}
    dtype = sync_dtype_of(setting)
    size = cost_model.SYNC_DTYPES.get(dtype, 4)
    parameters = (comm.get("dense_gradient_bytes") or comm["gradient_bytes"]) * 4 // size
    pulls = [r["communication"].get("pull_bytes") for r in runs
             if r["communication"].get("pull_bytes")]
    optimizer = (runs[0].get("config") or {}).get("optimizer", "momentum")
    first = runs[0]
    profile = cost_model.WorkloadProfile(
        model=setting[SETTING_KEYS.index("model")], batch=step_batch_of(first),
        compute_s=compute, gradient_bytes={dtype: comm["gradient_bytes"]},
        gradient_kind="sparse" if kinds.get("indexed_slices") else "dense",
        # variables are pulled in their own dtype; measured where a PSS run probed it
        pull_bytes=pulls[0] if pulls else parameters, parameter_bytes=parameters,
        optimizer_state_bytes=parameters * cost_model.OPTIMIZER_SLOTS.get(optimizer, 0),
        activation_bytes=_activations(runs, parameters, optimizer), overhead_s=overhead,
        tensors=max(1, sum(kinds.values())), overlap=overlap,
        device=f"{(first.get('environment') or {}).get('cpu_model') or 'this machine'}, "
              f"1 thread", source=", ".join(sorted({r["run_id"] for r in [
                  *baseline, *runs]}))[:200])
    return profile, notes


def _activations(runs, parameters, optimizer):
    """A replica's activation bytes: its memory_per_device estimate (parameters, gradients,
    optimizer slots and activations) less the rest; 0 when the records have none."""
    for r in runs:
        device = (r.get("memory_per_device") or [None])[0]
        if isinstance(device, dict) and device.get("bytes"):
            rest = parameters * (2 + cost_model.OPTIMIZER_SLOTS.get(optimizer, 0))
            return max(0, int(device["bytes"] - rest))
    return 0


def fit(records):
    """One Fit per (setting, multi-worker strategy) with a probed run at N >= 2 and a profile
    (see `profile_of`). Straggler and network runs and settings with a fixed global batch are
    left out."""
    baselines = collections.defaultdict(list)
    own_n1 = collections.defaultdict(lambda: collections.defaultdict(list))
    runs = collections.defaultdict(lambda: collections.defaultdict(list))
    sharing = collections.defaultdict(list)
    sweeps = collections.defaultdict(list)  # (strategy, N) -> [sweep points]: any setting
    for r in records:
        if is_collectives_run(r):
            if (r.get("communication") or {}).get("sweep"):
                sweeps[r["strategy"], workers_of(r)].append(r["communication"]["sweep"])
            continue
        if r.get("sharing") and role_of(r) == ENGINE_FLOOR:
            sharing[setting_of(r)].append(r["sharing"])
            continue
        setting = setting_of(r)
        if is_straggler_run(r) or is_network_run(r) or not r.get("steps_per_epoch") or \
                setting[SETTING_KEYS.index("global_batch_size")]:
            continue
        if role_of(r) == BASELINE_RUN and r.get("threads_per_task") == 1:
            baselines[setting].append(r)
        elif r["strategy"] in cost_model.STRATEGIES and workers_of(r) == 1:
            own_n1[setting][r["strategy"]].append(r)
        elif r["strategy"] in cost_model.STRATEGIES and r.get("communication") and \
                workers_of(r) >= 2:
            runs[setting][r["strategy"]].append(r)
    fits = []
    for setting in sorted(runs, key=sort_key):
        probed = [r for rs in runs[setting].values() for r in rs]
        profile, profile_notes = profile_of(setting, baselines.get(setting, []),
                                            own_n1.get(setting, {}), probed)
        if profile is None:
            continue
        for strategy, rs in sorted(runs[setting].items()):
            by_n = collections.defaultdict(list)
            for r in rs:
                by_n[workers_of(r)].append(r)
            f = Fit(setting, strategy, profile, rs[0].get("num_ps") or 1,
                    {n: measured_cell(by_n[n]) for n in sorted(by_n)},
                    notes=list(profile_notes))
            _predict_local(f, by_n, own_n1.get(setting, {}).get(strategy),
                           sharing.get(setting), sweeps)
            fits.append(f)
    return fits


def _predict_local(f, by_n, own, sharing, sweeps=None):
    """Fills f.predictions: this machine's run at each measured N from the profile, the
    synchronization at N (the sweep at K = N, else the runs' own probe) and the sharing
    calibration at K = N (see the module doc)."""
    for n, (step, probe, rate) in f.measured.items():
        lb = sweep_fit(sweeps or {}, f.strategy, n)
        if lb is not None:
            sync = lb.seconds(sync_bytes(f.profile, f.strategy, f.dtype), f.profile.tensors)
            f.sync[n], f.sync_fits[n] = (sync, "sweep"), lb
            f.notes.append(f"N={n} synchronization {sync * 1e3:.2f} ms from the sweep with {n} "
                           f"processes (alpha {lb.alpha_s * 1e6:.0f} us, 1/beta "
                           f"{lb.gbps:.2f} Gbit/s, {lb.per_tensor_s * 1e6:.0f} us per tensor "
                           f"x {f.profile.tensors - 1} more; the runs' own probe: "
                           f"{(probe or 0.0) * 1e3:.2f} ms)")
        else:
            sync = probe or 0.0
            f.sync[n] = (sync, "probe")
            f.notes.append(f"N={n} synchronization from the predicted runs' own probe (no sweep "
                           f"with {n} processes): in-sample")
        sync *= 1.0 - f.profile.overlap.get(f.strategy, 0.0)  # the share N=1 hid
        own_cores = n * f.batch / (f.t_comp + f.overhead + sync)
        f.own_cores[n] = own_cores
        slowdown = slowdown_of(sharing, f.strategy, n)
        factor = slowdown[0] if slowdown else 1.0
        predicted = n * f.batch / (f.t_comp * factor + f.overhead + sync)
        if slowdown:
            f.slowdowns[n] = slowdown
            f.notes.append(f"N={n} on this machine: compute x {factor:.2f}, the slowdown of {n} "
                           f"plain TF loops run {slowdown[1]} here ({slowdown[2]} calibration(s)); "
                           f"with cores of their own {own_cores:.0f} examples/s")
        else:
            f.notes.append(f"N={n}: no sharing calibration with {n} processes: the prediction "
                           f"assumes each worker computes as fast as one process alone")
        cap = cpu_cap(own, by_n[n])
        # Processes that wait on each other leave cores idle only while no other worker can run
        # on them: with more busy workers than cores a waiting worker yields its core, and the
        # cores deliver their whole share (the slowdown then is time-slicing, already in the
        # cores' figure: dividing by it again would count the sharing twice).
        threads = max((r.get("threads_per_task") or 1) for r in by_n[n])
        idle = factor if cap is not None and n * threads <= cap[1] else 1.0
        if cap is not None and cap[0] / idle < predicted:
            predicted = cap[0] / idle
            f.notes.append(f"N={n} prediction capped by this machine's CPU: {cap[1]} cores x the "
                           f"N=1 run's {cap[2]:.0f} examples per CPU-second"
                           + (f" / {idle:.2f} (the same slowdown)" if idle != 1.0 else
                              " (more workers than cores: no core idles)" if factor != 1.0
                              else "")
                           + " (its tasks, ps and chief included, need more cores than there "
                             "are)")
        f.predictions[n] = (predicted, rate, (predicted - rate) / rate)


def _flag(row):
    """The row with its `note`: an efficiency above 100% is never shown bare."""
    row["note"] = UNPHYSICAL if row["efficiency"] > 1 + 1e-9 else ""
    return row


def projection_rows(fits, net, ns=PROJECT_NS):
    """Projected rows (the cost model on the stated network) and this machine's measured ones
    (compute as it ran here: x the sharing slowdown at N; overhead: the rest of the step)."""
    rows = []
    for f in fits:
        one_worker = f.batch / (f.t_comp + f.overhead)  # one worker alone, at compute + overhead
        for n in ns:
            rows.append(_flag(dict(zip(COLUMNS[:_KEY], (*f.setting, f.strategy, n, "projected")),
                                   **f.project(n, net))))
        for n, (step, probe, rate) in f.measured.items():
            compute = f.t_comp * f.slowdowns.get(n, (1.0,))[0]
            rows.append(_flag(dict(zip(COLUMNS[:_KEY], (*f.setting, f.strategy, n, "measured")),
                                   step_time_s=step, compute_s=compute, communication_s=probe,
                                   overhead_s=step - compute - probe, examples_per_sec=rate,
                                   speedup=rate / one_worker,
                                   efficiency=rate / one_worker / n)))
    return rows


def validation_lines(fits):
    out = []
    for f in fits:
        for n, (predicted, measured, error) in sorted(f.predictions.items()):
            out.append(f"{f.model} {f.strategy} N={n}: predicted {predicted:.0f} examples/s "
                       f"from the profile + the {f.sync.get(n, (0, 'probe'))[1]} at N, "
                       f"measured {measured:.0f} "
                       f"(error {error * 100:+.1f}%); {'; '.join(f.notes)}")
    return out


def profiles(fits):
    """{file name: WorkloadProfile} of the fitted settings (one per setting)."""
    out = {}
    for f in fits:
        s = dict(zip(SETTING_KEYS, f.setting))
        name = "-".join(str(v) for v in (
            "profile", f.model.replace(":", "_").replace("/", "_"), f.train_examples,
            f"b{s['batch_size_per_replica']}", f"k{s['accumulation_steps'] or 1}", f.dtype))
        out[f"{name}.json"] = f.profile
    return out


def _ms(seconds):
    return f"{seconds * 1e3:.2f}"


def markdown(fits, rows, net):
    """The report's 'Scaling model' section."""
    parts = ["## Scaling model and projections", "",
             "One cost model (results/cost_model.py) on a workload profile measured here "
             "(profile-*.json beside this report). Per-worker step t = compute / speedup + "
             "overhead + communication: compute, the 1-thread baseline's step (every strategy "
             "alike); overhead, a strategy's N=1 step minus compute and its own probe; "
             "communication, ring all-reduce 2(N-1)/N·G/B + 2(N-1)·a within and across hosts "
             "(MWMS; sparse gradients all-gathered) or push G and pull P with a ps link serving "
             "N/K workers, (G+P)/B·max(1, N/K) + 2a (PSS), less the share a strategy's N=1 run "
             "hid behind compute (its overlap). Nothing is fitted to the runs it "
             "predicts: this machine's N-worker runs are predicted from the profile, the "
             "latency-bandwidth fit of the collectives sweep with N processes (without one: the "
             "runs' own probe, marked in-sample) and the sharing calibration with N processes, "
             "and what that does not explain is the error. "
             f"Projected network: B = {net.bandwidth_gbps:g} Gbit/s per link, "
             f"a = {net.latency_us:g} µs per message (`--network_gbps`, `--network_latency_us`); "
             "this machine's sharing never reaches a projection.", "",
             "Assumptions: each projected worker has its own host, synchronization overlaps "
             "compute only by the measured overlap, links are full duplex and uncontended, every worker is equally "
             "fast, the per-replica batch stays fixed.", "",
             ]
    cells = []
    for f in fits:
        for n, (predicted, measured, error) in sorted(f.predictions.items()):
            probe = f.measured[n][1]
            loop = f.loopback_gbps(n)
            cells.append([
                f.model, str(f.train_examples), f.strategy, str(n),
                f"{f.gradient_bytes / 1e6:.2f}", _ms(f.t_comp), _ms(f.overhead),
                f"{f.slowdowns[n][0]:.2f}" if n in f.slowdowns else "–",
                _ms(probe) if probe is not None else "–",
                f"{_ms(f.sync[n][0])} ({f.sync[n][1]})" if n in f.sync else "–",
                f"{loop:.2f}" if loop else "–",
                f"{predicted:.0f}", f"{measured:.0f}",
                f"{error * 100:+.1f}%" + (" (in-sample)" if f.sync.get(n, (0, "probe"))[1]
                                          == "probe" else "")])
    parts.append(markdown_table(["model", "examples", "strategy", "N", "G (MB)", "compute ms",
                                 "overhead ms", "sharing slowdown", "probe at N ms",
                                 "sync used ms (from)", "loopback Gbit/s", "predicted ex/s",
                                 "measured ex/s", "error"], cells))
    sweeps = {(f.strategy, n): lb for f in fits for n, lb in f.sync_fits.items()}
    if sweeps:
        parts += ["", "Latency and bandwidth of this machine's synchronization, fitted to the "
                      "collectives sweeps (t = alpha + per tensor x (tensors - 1) + bytes / "
                      "bandwidth; residuals: fit vs measured per message size, 4 KiB to 16 MiB):",
                  "", markdown_table(
                      ["strategy", "N", "alpha ms", "per tensor µs", "bandwidth Gbit/s",
                       "residuals"],
                      [[s, str(n), _ms(lb.alpha_s), f"{lb.per_tensor_s * 1e6:.0f}",
                        f"{lb.gbps:.2f}", " ".join(f"{round(r * 100):+d}%" for r in lb.residuals)]
                       for (s, n), lb in sorted(sweeps.items())])]
    parts += ["", "Notes:", ""] + [f"- {f.model}, {f.train_examples} examples, {f.strategy}: "
                                   f"{'; '.join(f.notes)}." for f in fits if f.notes]
    parts += [f"- {r['model']}, {r['train_examples']} examples, {r['strategy']} N={r['n']} "
              f"({r['kind']}): efficiency {r['efficiency'] * 100:.0f}% vs one worker, "
              f"{r['note']}."
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
    files = [write_text_atomic(path("projection.csv"), csv_text(projected, COLUMNS))]
    files += [write_text_atomic(path(name), profile.to_json())
              for name, profile in profiles(fits).items()]
    return Section(markdown(fits, projected, net),
                   plots=[plots.projection(projected, path("projection.png"))], files=files)

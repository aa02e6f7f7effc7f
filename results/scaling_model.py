"""The scaling model of a comparison: the workload profile fitted from the measured runs
(results/workload_profile.py), this machine's runs predicted from it, all through the one cost
model (results/cost_model.py); the report's projections to clusters we do not have are
results/projections.py.

This machine's runs at N >= 2 (the validation) are cost_model.predict on this machine's cluster
(cost_model.this_machine: N workers sharing the runs' cores, machine_cores) with the
synchronization measured here in place of the links (cost_model.Here): N x batch / (compute_s x
s_N + overhead + sync_N x (1 - overlap)) (the hidden part never more than the compute) with sync_N = alpha_N + per_tensor_N x (tensors - 1) +
beta_N x bytes from the sweep of message sizes that the comparison's collectives cell ran with N
processes before the N-worker runs (`--comm_sweep`; bytes: the gradient for all-reduce,
(push + pull) / 2 for PSS, whose sweep pulls and pushes each size; a sparse gradient from the
sweep of its rows, and under all-reduce the dense rest from the dense sweep: sparse_sync);
without a sweep, the probe
measured in the predicted runs themselves, and the notes call that prediction in-sample; s_N the
profile's sharing slowdown at K = N (experiments/comparison/sharing.py; without one the notes say
that the prediction assumes cores of their own); and at most what the cores deliver: C_N x batch
/ (batch / e_1 + c_N), with C_N the cores that K = N processes handing off every step keep busy
(the same calibration's lockstep phase; all cores without one), e_1 the N=1 run's examples per
CPU-second (every task), c_N the CPU seconds one process spends in a synchronization with N
processes (the sweep's cpu_s; all-reduce only: a PSS N=1 run already pushes and pulls every
step). Beside a PSS prediction the notes give what its parameter servers served with N workers
pushing a step's update and nothing else (experiments/measure/ps_load.py, the median over the
setting's PSS collectives cells at K = N): a measurement, not in the model (as PSS's bound it
read 5 of 6 PSS cells within ±15% against the N=1 bound's 6 of 6 on fresh runs:
docs/benchmarks.md, v19). Nothing in it is
fitted to the runs it predicts: what the prediction does not explain is shown as the error, never
folded into a term that the projections would carry.

Projections: cost_model.predict for N workers on a stated network (--network_gbps,
--network_latency_us): one host per worker. This machine's sharing never reaches them.
"""
import collections
import dataclasses

from results import cost_model, latency_bandwidth, metrics, specs
from results.cells import (BASELINE_RUN, ENGINE_FLOOR, SETTING_KEYS, is_collectives_run,
                           is_network_run, is_reducer_run, is_straggler_run, role_of, setting_of,
                           sort_key, unsized, workers_of)
from results.workload_profile import (busy_cores_of, cores_of, measured_cell, profile_of,
                                     reducer_key, reducers_of, slowdown_of, sync_dtype_of)
from strategies import kind


@dataclasses.dataclass(frozen=True)
class Network:
    bandwidth_gbps: float = 10.0  # per link, each direction
    latency_us: float = 50.0  # per message


@dataclasses.dataclass
class Fit:
    setting: tuple  # in SETTING_KEYS order
    strategy: str
    profile: specs.WorkloadProfile
    num_ps: int
    measured: dict  # n >= 2 -> (per-worker step time, probe seconds, examples/s)
    # (step, probe, examples/s) of the strategy's own N=1 runs, which the profile took its
    # overhead and overlap from: what the projection to one worker is checked against
    measured_n1: tuple = None
    predictions: dict = dataclasses.field(default_factory=dict)  # n -> (predicted, measured, error)
    own_cores: dict = dataclasses.field(default_factory=dict)  # n -> prediction without sharing
    slowdowns: dict = dataclasses.field(default_factory=dict)  # n -> (factor, phase, runs)
    sync: dict = dataclasses.field(default_factory=dict)  # n -> (seconds, source)
    sync_fits: dict = dataclasses.field(default_factory=dict)  # n -> LatencyBandwidth (sweep)
    rows_fits: dict = dataclasses.field(default_factory=dict)  # n -> the sparse rows' sweep fit
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
        return specs.ClusterSpec(hosts=n, inter_host_gbps=net.bandwidth_gbps,
                                 inter_host_latency_us=net.latency_us, num_ps=self.num_ps)

    def project(self, n, net):
        p = cost_model.predict(self.profile, self.cluster(n, net), self.strategy, self.dtype)
        return {"step_time_s": p.step_s, "compute_s": p.compute_s,
                "communication_s": p.communication_s, "overhead_s": p.overhead_s,
                "examples_per_sec": p.examples_per_sec, "speedup": p.speedup,
                "efficiency": p.efficiency, "bound": p.bound}

    def loopback_gbps(self, n=2):
        """Bandwidth the probe at N implies here: the bytes the cost model moves / probe time."""
        probe = self.measured[n][1]
        moved = cost_model.bytes_moved(self.profile, self.strategy, n, self.dtype)
        return moved * 8 / probe / 1e9 if probe else None


def sweep_fit(sweeps, strategy, n, key="probe_s", kind="dense"):
    """latency_bandwidth.LatencyBandwidth of the collectives cells' sweeps of `strategy` with `n`
    processes (the median per size over repeats) of `key`: probe_s, the seconds of one
    synchronization, or cpu_s, the CPU seconds it costs one process; of dense tensors, or with
    kind="indexed_slices" of sparse rows (per tensor: 0, the split is swept dense only); None
    without one."""
    by_size, by_count = collections.defaultdict(list), collections.defaultdict(list)
    for points in sweeps.get((strategy, n), []):
        for p in points:
            if not p.get(key) or p.get("kind", "dense") != kind:
                continue
            tensors = p.get("tensors", 1)
            if kind == "dense" and (tensors > 1 or
                                    p["bytes"] == latency_bandwidth.SWEEP_SPLIT_BYTES):
                by_count[tensors].append(p[key]["median"])
            if tensors == 1:
                by_size[p["bytes"]].append(p[key]["median"])
    if len(by_size) < 2:
        return None
    return latency_bandwidth.fit_latency_bandwidth(
        [(b, metrics.median(ts)) for b, ts in by_size.items()],
        [(k, metrics.median(ts)) for k, ts in by_count.items()])


def sync_bytes(profile, strategy, dtype, n=2):
    """The message size whose sweep time stands for one step's synchronization with n workers:
    the gradient (all-reduce packs a step's gradients into one message); sparse rows, where
    no sweep of rows was taken, are all-gathered, (n-1) G to each worker where the swept ring
    all-reduce of S moves 2(n-1)/n S, so the all-reduce of n G / 2 (the gradient itself at
    n = 2: the bytes match, not the latency steps, n-1 for a gather against 2(n-1), nor the
    reduction the gather does not do); for PSS, whose sweep pulls and pushes each size, the
    mean of what a step pushes and pulls."""
    gradient = profile.gradient(dtype)
    if kind(strategy).parameter_servers:
        return (gradient + profile.pull_bytes) / 2
    if profile.gradient_kind == "sparse":
        return gradient * max(2, n) / 2
    return gradient


def sparse_sync(profile, strategy, dtype, rows, dense_fit):
    """(seconds, of them the rows', the dense rest's) of one step's synchronization of a sparse
    gradient from the sweeps with N processes: the rows at their own bytes from the rows' fit
    (each point's bytes are one replica's rows, so the fit at N is the all-gather at N; PSS: the
    mean of a step's push and pull); under all-reduce the dense tensors beside them are a pack
    of their own, the dense fit at their bytes and count, where the profile splits the
    gradient (sparse_gradient_bytes; else all of it rows)."""
    total = sync_bytes(profile, strategy, dtype)  # G (PSS: (G + P) / 2): the n=2 form
    split, rest = profile.sparse_split(dtype)
    rest_tensors = max(0, profile.tensors - max(1, profile.sparse_tensors))
    if not rest or kind(strategy).parameter_servers or dense_fit is None:
        # one collective (or, PSS, one function's RPCs): the others at the dense cost per tensor
        extra = (dense_fit.per_tensor_s if dense_fit else 0.0) * rest_tensors
        return rows.seconds(total) + extra, rows.seconds(total), extra
    sparse = rows.seconds(split)
    dense = dense_fit.seconds(rest, max(1, rest_tensors))
    return sparse + dense, sparse, dense


def fit(records):
    """One Fit per (setting, multi-worker strategy) with a probed run at N >= 2 and a profile
    (see `profile_of`). Straggler and network runs and settings with a fixed global batch are
    left out."""
    baselines = collections.defaultdict(list)
    own_n1 = collections.defaultdict(lambda: collections.defaultdict(list))
    runs = collections.defaultdict(lambda: collections.defaultdict(list))
    sharing = collections.defaultdict(list)
    sweeps = collections.defaultdict(list)  # (strategy, N) -> [sweep points]: any setting
    ps_loads = collections.defaultdict(list)  # (setting but its size, strategy, N) -> steps/s
    for r in records:
        if is_collectives_run(r):
            if is_network_run(r):  # a shaped calibration: results/network.py's
                continue
            comm = r.get("communication") or {}
            if comm.get("sweep"):
                sweeps[r["strategy"], workers_of(r)].append(comm["sweep"])
            if comm.get("ps_load"):  # the model's own update: its setting's (any size)
                ps_loads[unsized(setting_of(r)), r["strategy"], workers_of(r)].append(
                    comm["ps_load"]["steps_per_s"]["median"])
            continue
        if r.get("sharing") and role_of(r) == ENGINE_FLOOR:
            sharing[setting_of(r)].append(r["sharing"])
            continue
        setting = setting_of(r)
        if is_straggler_run(r) or is_network_run(r) or is_reducer_run(r) or \
                not r.get("steps_per_epoch") or \
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
    compressed = reducers_of(records)
    for setting in sorted(runs, key=sort_key):
        probed = [r for rs in runs[setting].values() for r in rs]
        profile, profile_notes = profile_of(setting, baselines.get(setting, []),
                                            own_n1.get(setting, {}), probed,
                                            sharing.get(setting))
        if profile is None:
            continue
        profile.reducers = compressed.get(reducer_key(setting), {})
        for strategy, rs in sorted(runs[setting].items()):
            by_n = collections.defaultdict(list)
            for r in rs:
                by_n[workers_of(r)].append(r)
            n1 = own_n1.get(setting, {}).get(strategy)
            f = Fit(setting, strategy, profile, rs[0].get("num_ps") or 1,
                    {n: measured_cell(by_n[n]) for n in sorted(by_n)},
                    measured_n1=measured_cell(n1) if n1 else None,
                    notes=list(profile_notes))
            _predict_local(f, by_n, sharing.get(setting), sweeps, ps_loads)
            fits.append(f)
    return fits


def _swept_sync(f, sweeps, n, key="probe_s"):
    """(seconds, the sparse rows' part, the dense part, the rows' fit, the dense fit) of one
    step's synchronization from the sweeps with n processes, of `key` (probe_s, or cpu_s: the
    CPU it costs one process): a sparse gradient from its rows' sweep (sparse_sync), else the
    dense sweep at sync_bytes; None without a sweep."""
    dense = sweep_fit(sweeps, f.strategy, n, key)
    rows = sweep_fit(sweeps, f.strategy, n, key, "indexed_slices") \
        if f.profile.gradient_kind == "sparse" else None
    if rows is not None:
        return (*sparse_sync(f.profile, f.strategy, f.dtype, rows, dense), rows, dense)
    if dense is None:
        return None
    seconds = dense.seconds(sync_bytes(f.profile, f.strategy, f.dtype, n), f.profile.tensors)
    return seconds, 0.0, seconds, None, dense


def _predict_local(f, by_n, sharing, sweeps=None, ps_loads=None):
    """Fills f.predictions: this machine's run at each measured N, through cost_model.predict on
    a cluster of N workers sharing the runs' cores, with the synchronization measured here at N
    (the sweep at K = N, else the runs' own probe) and its CPU (see the module doc); under PSS
    the notes give the ps's rate under load at K = N where measured."""
    for n, (step, probe, rate) in f.measured.items():
        swept = _swept_sync(f, sweeps or {}, n)
        if swept is not None and swept[3] is not None:  # a sparse gradient's rows swept
            sync, sparse, dense, rows, lb = swept
            f.sync[n], f.rows_fits[n] = (sync, "sweep"), rows
            if lb is not None:
                f.sync_fits[n] = lb
            f.notes.append(f"N={n} synchronization {sync * 1e3:.2f} ms from the sweeps with {n} "
                           f"processes: {sparse * 1e3:.2f} ms of sparse rows (alpha "
                           f"{rows.alpha_s * 1e6:.0f} us, 1/beta {rows.gbps:.2f} Gbit/s)"
                           + (f" and {dense * 1e3:.2f} ms for the dense rest" if dense else "")
                           + f"; the runs' own probe: {(probe or 0.0) * 1e3:.2f} ms")
        elif swept is not None:
            sync, lb = swept[0], swept[4]
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
        # The CPU one process spends in a synchronization with N processes (the sweep's cpu_s),
        # for all-reduce only: an N=1 MWMS run reduces nothing, a PSS N=1 run pushes and pulls.
        cpu = _swept_sync(f, sweeps or {}, n, "cpu_s") if kind(f.strategy).all_reduce else None
        sync_cpu = cpu[0] if cpu is not None else 0.0
        loads = (ps_loads or {}).get((unsized(f.setting), f.strategy, n), [])
        here = cost_model.Here(sync_s=sync, sync_cpu_s=sync_cpu)
        cores = cores_of(by_n[n])
        p = cost_model.predict(f.profile, cost_model.this_machine(n, cores, num_ps=f.num_ps),
                               f.strategy, f.dtype, here=here)
        f.own_cores[n] = cost_model.predict(f.profile, cost_model.this_machine(
            n, 0, num_ps=f.num_ps), f.strategy, f.dtype, here=here).examples_per_sec
        f.notes.extend(_local_notes(f, n, cores, p, sync_cpu, sharing, loads))
        f.predictions[n] = (p.examples_per_sec, rate, (p.examples_per_sec - rate) / rate)


def _local_notes(f, n, cores, p, sync_cpu, sharing, loads=()):
    """What the prediction of this machine's N-worker run took from the profile's sharing and
    CPU figures (cost_model.on_one_machine), in words; and beside it the ps's rate under load
    (`loads`: steps/s of each calibration at K = N)."""
    slowdown = slowdown_of(sharing, n)
    notes = []
    if not cores:
        notes.append(f"N={n}: the records give no core count: the prediction assumes each worker "
                     f"computes on cores of its own")
    elif slowdown:
        f.slowdowns[n] = slowdown
        notes.append(f"N={n} on this machine: compute x {slowdown[0]:.2f}, the slowdown of {n} "
                     f"plain TF loops run {slowdown[1]} here ({slowdown[2]} calibration(s)); "
                     f"with cores of their own {f.own_cores[n]:.0f} examples/s")
    else:
        notes.append(f"N={n}: no sharing calibration with {n} processes: the prediction "
                     f"assumes each worker computes as fast as one process alone")
    if loads:  # how near its ps's ceiling the measured run trained
        served = metrics.median(loads)
        notes.append(f"N={n}: with {n} workers pushing a step's update and nothing else, the "
                     f"parameter servers served {served:.1f} steps/s here "
                     f"({served * f.batch:.0f} examples/s; {len(loads)} "
                     f"calibration(s) at K={n}; measured beside the prediction, not in it)")
    if p.bound == cost_model.PS_BOUND:
        notes.append(f"N={n} prediction held by the parameter servers' CPU: {f.num_ps} ps of "
                     f"{f.profile.ps_threads or 1} thread(s) serve at most "
                     f"{p.examples_per_sec:.0f} examples/s "
                     f"({f.profile.ps_cpu_s_per_step * 1e3:.2f} ms of ps CPU per worker step "
                     f"at N=1)")
    if p.bound == "this machine's cores":
        busy = busy_cores_of(sharing, n)
        per_example = f.profile.cpu_s_per_example[f.strategy]
        step_cpu = f.batch * per_example + sync_cpu
        notes.append(
            f"N={n} prediction capped by this machine's CPU: {min(busy or cores, cores):.2f} "
            f"cores busy (" + (f"what {n} processes that hand off every step keep busy, from "
                               f"the sharing calibration at K={n}" if busy else
                               f"all {cores}: no sharing calibration with {n} processes")
            + f") / {step_cpu * 1e3:.2f} CPU-ms per worker step (the N=1 run's "
            f"{1 / per_example:.0f} examples per CPU-second"
            + (f", plus {sync_cpu * 1e3:.2f} ms of one process's CPU per "
               f"synchronization from the sweep with {n} processes" if sync_cpu else "")
            + "; every task, ps and chief included)")
    return notes

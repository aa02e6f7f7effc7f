"""The scaling model of a comparison: the workload profile fitted from the measured runs
(results/model/workload_profile.py) and, per multi-worker strategy, the runs measured at each N; the
report projects them to clusters we do not have through the one cost model
(results/model/cost_model.py; results/report/projections.py). Nothing is fitted to the N >= 2 runs:
they are shown beside the projections, never folded into a term the projections would carry.
"""
import collections
import dataclasses

from results.model import cost_model, specs
from results.records.cells import (BASELINE_RUN, ENGINE_FLOOR, SETTING_KEYS, is_collectives_run,
                                   is_network_run, is_reducer_run, is_straggler_run, role_of,
                                   setting_of, sort_key, workers_of)
from results.model.workload_profile import (measured_cell, profile_of, reducer_key, reducers_of,
                                            sync_dtype_of)


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


def fit(records):
    """One Fit per (setting, multi-worker strategy) with a probed run at N >= 2 and a profile
    (see `profile_of`). Straggler and network runs and settings with a fixed global batch are
    left out."""
    baselines = collections.defaultdict(list)
    own_n1 = collections.defaultdict(lambda: collections.defaultdict(list))
    runs = collections.defaultdict(lambda: collections.defaultdict(list))
    sharing = collections.defaultdict(list)
    for r in records:
        if is_collectives_run(r):  # calibrations, not runs of the setting
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
            fits.append(f)
    return fits

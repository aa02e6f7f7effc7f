"""A strategy recommendation for a target cluster (experiments/recommend.py): a workload profile
(measured from a comparison's records by results/model/workload_profile.profile_of, or written by
hand) on a cluster spec (from flags, or written by hand), through the one cost model
(results/model/cost_model.py). This machine's own sharing and waiting never enter it."""
import collections

from results.model import cost_model
from results.model.scaling_model import fit
from results.model.workload_profile import sync_dtype_of
from results.records.cells import SETTING_KEYS, setting_of, setting_title, sort_key
from strategies import REGISTRY, kind


def measured_profile(records, model_name=""):
    """(WorkloadProfile, sync dtype, 'where it came from') of the latest fitted setting of the
    records (one model; --model chooses among several). ValueError (one line) otherwise."""
    f, where = latest_fit(records, model_name)
    return f.profile, sync_dtype_of(f.setting), where


def latest_fit(records, model_name=""):
    """(scaling_model.Fit, 'where it came from') of the latest fitted setting of the records
    (see measured_profile)."""
    fits = fit(records)
    by_setting = collections.OrderedDict((f.setting, f) for f in fits)
    settings = sorted(by_setting, key=sort_key)
    if model_name:
        settings = [s for s in settings if dict(zip(SETTING_KEYS, s))["model"] == model_name]
    if not settings:
        raise ValueError("no setting with probed N >= 2 runs of a multi-worker strategy and a "
                         "1-thread baseline or N=1 run in these records"
                         + (f" for --model={model_name}" if model_name else "")
                         + "; run `python -m experiments.compare` first, or give --profile")
    names = sorted({dict(zip(SETTING_KEYS, s))["model"] for s in settings})
    if len(names) > 1:
        raise ValueError(f"several measured models ({', '.join(names)}); choose one with --model")
    # Several settings of one model (sizes, batches): the latest measured one, named below.
    latest = {setting_of(r): r["timestamp"] for r in sorted(records, key=lambda r: r["timestamp"])}
    setting = max(settings, key=lambda s: latest.get(s, ""))
    where = f"measured setting: {setting_title(setting)}" + (
        f" (the latest of {len(settings)} measured settings)" if len(settings) > 1 else "")
    return by_setting[setting], where


def emulated_gbps(strategy, n, gbps, speedup, num_ps):
    """The shared-shaper bandwidth at which this machine's N=2 run has the target's
    compute:communication ratio (communication X times slower, as compute is here)."""
    if kind(strategy).parameter_servers:
        # Target: (G+P)/B·max(1, n/K) per worker step. Here every worker's G+P shares the
        # shaper: n·(G+P)/B_e per round of n steps. Equal after X: B_e = n·B / (X·max(1, n/K)).
        return n * gbps / (speedup * max(1.0, n / num_ps))
    # Target: 2(n-1)/n·G/B per step; here 2(n-1)·G/B_e through the shaper: B_e = n·B/X.
    return n * gbps / speedup


def recommend(profile, cluster, dtype="float32", where=""):
    """The text `experiments.recommend` prints: each strategy's predicted step and throughput
    on `cluster`, best first, and why."""
    predictions = sorted((cost_model.predict(profile, cluster, s, dtype)
                          for s in cost_model.STRATEGIES), key=lambda p: -p.examples_per_sec)
    memory = f", {cluster.memory_per_device_mb:g} MB per device" \
        if cluster.memory_per_device_mb else ""
    topology = (f"{cluster.hosts} host(s) x {cluster.devices_per_host} device(s)"
                f" ({cluster.workers} workers), {cluster.inter_host_gbps:g} Gbit/s and "
                f"{cluster.inter_host_latency_us:g} µs between hosts"
                + (f", {cluster.intra_host_gbps:g} Gbit/s within one"
                   if cluster.devices_per_host > 1 else "")
                + f", devices {cluster.device_speedup:g}x the profile's, {cluster.num_ps} "
                  f"parameter server(s) ({cluster.ps_placement.replace('_', ' ')}){memory}")
    lines = [f"Target: {cluster.name + ': ' if cluster.name else ''}{topology}.",
             f"Workload: {profile.model}, {profile.batch} examples per replica per step, "
             f"compute {profile.compute_s * 1e3:.2f} ms on {profile.device or 'its device'}, "
             f"gradients {profile.gradient(dtype) / 1e6:.2f} MB ({dtype}, {profile.gradient_kind})"
             + (f"; {where}" if where else "") + ".", "",
             "| strategy | projected examples/s | step ms | compute ms | overhead ms | "
             "communication ms | communication share | efficiency | memory / device MB | "
             "held by |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for p in predictions:
        lines.append(f"| {REGISTRY[p.strategy].short} | {p.examples_per_sec:.0f} | "
                     f"{p.step_s * 1e3:.2f} | "
                     f"{p.compute_s * 1e3:.2f} | {p.overhead_s * 1e3:.2f} | "
                     f"{p.communication_s * 1e3:.2f} | {p.communication_share * 100:.0f}% | "
                     f"{p.efficiency * 100:.0f}% | {p.memory_per_device_bytes / 1e6:.1f}"
                     + ("" if p.fits_memory else " (does not fit)") + " | "
                     + (p.bound or "its step") + " |")
    best, other = predictions[0], predictions[1]
    why = ("less communication per step" if best.communication_s < other.communication_s else
           "less time besides communication (compute and per-step overhead)")
    lines += ["", f"Recommendation: {REGISTRY[best.strategy].short}, "
                  f"{best.examples_per_sec / other.examples_per_sec:.2f}x "
                  f"{REGISTRY[other.strategy].short}'s projected throughput ({why}: "
                  f"{best.communication_s * 1e3:.2f} ms vs {other.communication_s * 1e3:.2f} ms "
                  "of communication per step)."]
    lines += [f"{REGISTRY[p.strategy].short} is held at {p.examples_per_sec:.0f} examples/s by "
              f"{p.bound}" + (f" ({cluster.num_ps} ps of "
                              f"{cost_model.ps_cores(profile, cluster)} core(s) each, "
                              f"{profile.ps_cpu_s_per_step * 1e3:.2f} ms of ps CPU per worker "
                              f"step measured; more ps or ps cores raise it)"
                              if p.bound == cost_model.PS_BOUND else "") + "."
              for p in predictions if p.bound]
    if not best.fits_memory:
        lines.append(f"Warning: {REGISTRY[best.strategy].short} needs "
                     f"{best.memory_per_device_bytes / 1e6:.1f} MB per device, over the cap.")
    lines += ["", "Assumptions: synchronization overlaps compute only by the profile's measured "
              "overlap (measured where the ps and chief ran on other cores of the same "
              "machine, and assumed to carry to the target cluster) and never by more than "
              "the compute; links are full duplex "
              "and uncontended but for the fan-in stated; every worker is equally fast; the "
              "per-step overhead (host CPU) does not shrink with faster devices; the per-replica "
              "batch is the profile's."]
    if cluster.workers == 2 and cluster.hosts == 2:
        lines += ["", "Check it on this machine (same compute:communication ratio):"]
        for p in predictions:
            b = emulated_gbps(p.strategy, 2, cluster.inter_host_gbps, cluster.device_speedup,
                              cluster.num_ps)
            lines.append(f"  {REGISTRY[p.strategy].short}: python -m experiments.compare "
                         f"--experiments=network --models={profile.model} --bandwidths={b:.3g},0")
    return "\n".join(lines)

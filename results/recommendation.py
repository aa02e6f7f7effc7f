"""A strategy recommendation for a target cluster (experiments/recommend.py): the network
experiment's fitted terms (results/network.py) projected with the real-network cost model of
results/scaling_model.py, compute scaled by the target's accelerator speedup."""
from results.cells import SETTING_KEYS, setting_title, sort_key
from results.network import models
from results.scaling_model import Network, parameter_server_s, ring_allreduce_s

_NAMES = {"multi_worker_mirrored": "MWMS", "parameter_server": "PSS"}


def project(model, n, net, speedup, num_ps):
    """(examples/s, compute s, communication s, sync s) of one target worker's step."""
    compute = model.t_comp / speedup
    if model.strategy == "parameter_server":
        comm = parameter_server_s(model.gradient_bytes, n, num_ps, net)
    else:
        comm = ring_allreduce_s(model.gradient_bytes, n, net)
    step = compute + comm + model.t_sync
    return n * model.batch / step, compute, comm, model.t_sync


def emulated_gbps(strategy, n, gbps, speedup, num_ps):
    """The shared-shaper bandwidth at which this machine's N=2 run has the target's
    compute:communication ratio (communication X times slower, as compute is here)."""
    if strategy == "parameter_server":  # target 2M/B·max(1, n/K) per step; here 2M/B_e
        return gbps / speedup / max(1.0, n / num_ps)
    return gbps / speedup * 2 * (n - 1) / (2 * (n - 1) / n)  # target 2(n-1)/n·M/B; here 2(n-1)M/B_e


def recommend(records, workers, gbps, latency_us, speedup, num_ps, model_name=""):
    fitted = models(records, shaped_only=False)
    settings = sorted({s for s, _ in fitted}, key=sort_key)
    if model_name:
        settings = [s for s in settings if dict(zip(SETTING_KEYS, s))["model"] == model_name]
    if not settings:
        raise ValueError("no setting with N=1 and N=2 runs of a multi-worker strategy in these "
                         "records" + (f" for --model={model_name}" if model_name else "") +
                         "; run `python -m experiments.compare --experiments=network` first")
    if len(settings) > 1:
        names = sorted({dict(zip(SETTING_KEYS, s))["model"] for s in settings})
        raise ValueError(f"several measured settings ({', '.join(names)}); choose one with "
                         "--model")
    setting = settings[0]
    net = Network(gbps, latency_us)
    rows = {strategy: project(m, workers, net, speedup, num_ps)
            for (s, strategy), m in fitted.items() if s == setting}
    ranked = sorted(rows.items(), key=lambda item: -item[1][0])
    lines = [f"Target: {workers} workers, {gbps:g} Gbit/s per link, {latency_us:g} µs latency, "
             f"compute {speedup:g}x this machine's, {num_ps} parameter server(s).",
             f"Measured setting: {setting_title(setting)}.", "",
             "| strategy | projected examples/s | step ms | compute ms | communication ms | "
             "sync ms | communication share |", "|---|---|---|---|---|---|---|"]
    for strategy, (rate, compute, comm, sync) in ranked:
        step = compute + comm + sync
        lines.append(f"| {_NAMES[strategy]} | {rate:.0f} | {step * 1e3:.2f} | "
                     f"{compute * 1e3:.2f} | {comm * 1e3:.2f} | {sync * 1e3:.2f} | "
                     f"{comm / step * 100:.0f}% |")
    best, (best_rate, _, best_comm, _) = ranked[0]
    lines.append("")
    if len(ranked) > 1:
        other, (other_rate, _, other_comm, _) = ranked[1]
        why = ("less communication per step" if best_comm < other_comm else
               "less time besides communication (compute and synchronization overhead)")
        lines.append(f"Recommendation: {_NAMES[best]}, {best_rate / other_rate:.2f}x "
                     f"{_NAMES[other]}'s projected throughput ({why}: "
                     f"{best_comm * 1e3:.2f} ms vs {other_comm * 1e3:.2f} ms of "
                     "communication per step).")
    else:
        lines.append(f"Only {_NAMES[best]} was measured in this setting.")
    lines += ["", "Assumptions: every worker has its own full-duplex link and equal speed; "
              "synchronization does not overlap compute; t_sync (this machine's dispatch and "
              "waiting) does not shrink with faster accelerators; the per-replica batch is the "
              "measured one; gradients move in the measured dtype."]
    if workers == 2:
        lines += ["", "Check it on this machine (same compute:communication ratio):"]
        for strategy in rows:
            b = emulated_gbps(strategy, workers, gbps, speedup, num_ps)
            lines.append(f"  {_NAMES[strategy]}: python -m experiments.compare "
                         f"--experiments=network --models={dict(zip(SETTING_KEYS, setting))['model']} "
                         f"--bandwidths={b:.3g},0")
    return "\n".join(lines)

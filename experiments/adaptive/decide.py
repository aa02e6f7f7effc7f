"""The adaptive mode's decision after an epoch: has the run drifted from what the plan predicted
for its configuration, what does the drift say about the network or about a straggler (a
worker the others wait for), and is another configuration now faster by more than a switch
costs. Pure: no TensorFlow, no files (segment.py calls it in the chief; tests call it with
made-up epochs).

Every figure goes through the one cost model (results/model/planner.py over
results/model/cost_model.py), at the run's fixed global batch: a configuration of R replicas trains
R x (global / R), so the examples per update, the steps per epoch and the learning-rate schedule
never change with a switch. The prediction for a replica's batch b scales the profile's compute
linearly from its batch (the planner's own assumption for accumulation).
"""
import dataclasses
import statistics

from results.model import planner
from results.records import step_stamps

# A switch must win back this much more than its measured cost: a gain inside the model's
# error is no reason to restart a cluster.
MARGIN = 0.25
# Back to a configuration the run left only when the network moved this far since (x or /).
RETURN_FACTOR = 2.0
_GBPS_RANGE = (1e-4, 1e4)  # where the inference looks for the network's rate


def at_batch(profile, batch):
    """The profile at `batch` examples per replica per step: compute and activations scale
    linearly; what is synchronized does not change."""
    ratio = batch / profile.batch
    return dataclasses.replace(profile, batch=batch, compute_s=profile.compute_s * ratio,
                               activation_bytes=int(profile.activation_bytes * ratio))


def candidates(profile, cluster, global_batch):
    """The configurations a run may switch between: the planner's, without what trains
    differently (accumulation, 16-bit sync, compression) and with a whole replica batch; not
    ZeRO's, whose sharded checkpoints resume only under the same sharding, nor tensor
    parallelism's, whose checkpoints hold the weights in shards."""
    out, dtype = [], planner.sync_dtypes(profile)[0]
    for config in planner.configurations(profile, cluster):
        if config.accumulation != 1 or config.compression != "none" or config.zero or \
                config.tensor_parallel > 1 or \
                config.sync_dtype != dtype or \
                global_batch % config.replicas or \
                (config.microbatches > 1 and (global_batch // config.replicas) %
                 config.microbatches):
            continue
        out.append(config)
    return out


def predicted_rate(profile, cluster, config, global_batch):
    """Examples/s the cost model predicts for `config` at the run's global batch; None when it
    does not fit a device's memory."""
    p = planner.predict(at_batch(profile, global_batch // config.replicas), cluster, config)
    return None if p.dropped else p.prediction.examples_per_sec


def best(profile, cluster, global_batch, exclude=()):
    """(config, examples/s) of the fastest candidate not in `exclude`; None when none fits."""
    rated = [(c, predicted_rate(profile, cluster, c, global_batch))
             for c in candidates(profile, cluster, global_batch) if c not in exclude]
    rated = [(c, r) for c, r in rated if r is not None]
    return max(rated, key=lambda cr: (cr[1], -cr[0].workers)) if rated else None


def with_network(cluster, gbps):
    """The cluster with every link at `gbps`: the emulation shapes one loopback for all."""
    return dataclasses.replace(cluster, inter_host_gbps=gbps, intra_host_gbps=gbps)


def infer_gbps(profile, cluster, config, global_batch, rate):
    """The network rate at which the cost model predicts `rate` for `config` (bisection; the
    prediction rises with the rate). None when the configuration's prediction does not depend
    on the network, or `rate` is outside what any network would give."""
    def at(gbps):
        return predicted_rate(profile, with_network(cluster, gbps), config, global_batch)
    lo, hi = _GBPS_RANGE
    slow, fast = at(lo), at(hi)
    if slow is None or fast is None or fast - slow < 1e-6 * fast or not slow <= rate <= fast:
        return None
    for _ in range(60):
        mid = (lo * hi) ** 0.5
        if at(mid) < rate:
            lo = mid
        else:
            hi = mid
    return (lo * hi) ** 0.5


@dataclasses.dataclass(frozen=True)
class Straggler:
    worker: str
    extra_s: float  # what it added to each step over the reference epoch (see straggler_of)


def straggler_of(reference, last):
    """The Straggler the last epoch waited for, from the in-step timelines of the reference epoch
    and the last one; else None. In lockstep a slower network adds synchronization on every
    worker, a straggler adds waiting on the others for it: it is the worker that waited least,
    and what it adds per step is its peers' added wait (their median). Under PSS a slower
    network slows every worker's step, a straggler its own only: it is the worker whose median
    step grew the most while the others' grew by less than step_stamps.CLEAR_STEP_RATIO, and is
    now that ratio or more of theirs; it adds its step's growth beyond theirs."""
    def parts(epoch):
        return (epoch.get("timeline") or {}).get("per_worker") or {}
    lockstep = bool((last.get("timeline") or {}).get("lockstep"))
    before, after = parts(reference), parts(last)
    if len(after) < 2 or set(before) != set(after):
        return None
    if not lockstep:
        step = {w: ((before[w].get("step_s") or 0), (after[w].get("step_s") or 0)) for w in after}
        if not all(b > 0 and a > 0 for b, a in step.values()):
            return None
        slow = max(step, key=lambda w: step[w][1] - step[w][0])
        others = [w for w in after if w != slow]
        was, now = (statistics.median(step[w][i] for w in others) for i in (0, 1))
        grew = step[slow][1] - step[slow][0]
        if now >= step_stamps.CLEAR_STEP_RATIO * was or \
                step[slow][1] < step_stamps.CLEAR_STEP_RATIO * now or \
                grew < (step_stamps.CLEAR_STEP_RATIO - 1) * step[slow][0]:
            return None  # everyone slowed (the network), or it is not clearly behind, or it
            # was behind already (a straggler the cluster has)
        # on shared cores the others speed up while the straggler idles: not counted as less
        extra = grew - max(0.0, now - was)
        return Straggler(slow, extra) if extra > 0 else None
    waited = {w: (after[w].get("wait_s") or 0) - (before[w].get("wait_s") or 0) for w in after}
    synced = [(after[w].get("sync_s") or 0) - (before[w].get("sync_s") or 0) for w in after]
    waiter = max(waited, key=waited.get)
    if waited[waiter] <= max(0.0, sorted(synced)[len(synced) // 2]):
        return None
    # the one that waited least is the one the others waited for
    slow = min(waited, key=waited.get)
    return Straggler(slow, statistics.median(waited[w] for w in waited if w != slow))


@dataclasses.dataclass
class Verdict:
    action: str  # "watch" (too little measured yet), "stay" or "switch"
    why: str
    drift: float | None = None  # the last steady epoch's rate / the first's - 1
    inferred_gbps: float | None = None
    to: planner.Config | None = None
    current_rate: float | None = None  # measured: the last steady epoch's examples/s
    # predicted for `to`, x this configuration's measured/predicted ratio
    to_rate: float | None = None
    predicted_gain_s: float | None = None
    predicted_cost_s: float | None = None
    straggler: str | None = None  # the worker the others waited for
    # the straggler's seconds per step the cluster now has: one a switch found before (the
    # segment's cluster) plus what this epoch added; the next segment's cluster takes it
    straggler_s: float | None = None

    def to_json(self):
        out = dataclasses.asdict(self)
        out["to"] = self.to.name if self.to else None
        return out


def check(profile, cluster, current, global_batch, steady_rates, examples_left, cost_s,
          left=(), threshold=0.15, straggler=None):
    """The verdict after an epoch. steady_rates: examples/s of this configuration's steady
    epochs so far, oldest first (its first, tracing, epoch left out); examples_left: examples
    still to train; cost_s: what a switch costs (measured: this configuration's own start);
    left: [(config, inferred gbps when left, or None when left for a straggler)] of the
    configurations the run left; straggler: the Straggler the last epoch waited for
    (straggler_of), if any."""
    if len(steady_rates) < 2:
        return Verdict("watch", "fewer than 2 steady epochs in this configuration")
    reference, last = steady_rates[0], steady_rates[-1]
    drift = last / reference - 1
    if abs(drift) < threshold:
        return Verdict("stay", f"within {threshold:.0%} of its first steady epoch", drift)
    predicted = predicted_rate(profile, cluster, current, global_batch)
    if predicted is None:
        return Verdict("stay", f"drifted {drift:+.0%}, but the cost model has {current.name} "
                               f"over the memory cap: nothing to compare with", drift)
    bias = reference / predicted  # the model's error on this machine, taken as the same for all
    if straggler is not None:
        # the time it added is waiting for one worker rather than synchronizing: the network
        # stays as it was, and the cluster gains a straggler on the host that worker is on
        # (added to one it has: the reference epoch already waited for that)
        gbps, cause = cluster.inter_host_gbps, (f"{straggler.worker} adds "
                                                f"{straggler.extra_s * 1e3:.0f} ms a step")
        now = dataclasses.replace(cluster,
                                  straggler_s=cluster.straggler_s + straggler.extra_s)
    else:
        gbps = infer_gbps(profile, cluster, current, global_batch, last / bias)
        if gbps is None:
            return Verdict("stay", f"drifted {drift:+.0%}, but the cost model cannot tell the "
                                   f"network from {current.name}'s rate", drift)
        cause, now = f"the network ~{gbps:.3g} Gbit/s", with_network(cluster, gbps)
    marks = dict(straggler=straggler.worker, straggler_s=now.straggler_s) if straggler \
        else {}
    inferred = None if straggler else gbps
    # never back to a configuration left for a straggler (one that leaves its host out cannot
    # see it go), nor to one left at about this network
    banned = [c for c, when in left if when is None or max(when / gbps, gbps / when) <
              RETURN_FACTOR]
    choice = best(profile, now, global_batch, exclude=banned)
    if choice is None or choice[0] == current:
        return Verdict("stay", f"drifted {drift:+.0%} ({cause}): {current.name} is still the "
                               f"fastest", drift, inferred, **marks)
    to, rate = choice[0], choice[1] * bias
    gain = examples_left * (1 / last - 1 / rate)
    verdict = Verdict("switch", "", drift, inferred, to, last, rate, gain, cost_s, **marks)
    if gain <= cost_s * (1 + MARGIN):
        verdict.action, verdict.to = "stay", None
        verdict.why = (f"drifted {drift:+.0%} ({cause}): {to.name} would gain {gain:.1f} s, "
                       f"not more than the switch's {cost_s:.1f} s + {MARGIN:.0%}")
        return verdict
    verdict.why = (f"drifted {drift:+.0%} ({cause}): {to.name} is predicted at {rate:.0f} "
                   f"examples/s against {last:.0f} measured, {gain:.1f} s gained over the "
                   f"{examples_left} examples left for a {cost_s:.1f} s switch")
    return verdict


def config_json(config):
    return dataclasses.asdict(config)


def config_from(data):
    return planner.Config(**data)


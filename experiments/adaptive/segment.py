"""--adapt inside one configuration's run (a segment): after each epoch the chief checks the run
against the plan (decide.py); when a switch pays, every worker agrees, the epoch's checkpoint is
saved as always, the chief writes the request beside it and the segment ends without a record.
The supervisor (supervisor.py) then starts the next configuration from that checkpoint.

What the supervisor tells a segment comes in ADAPT_ENV (JSON): the checkpoint directory, the
profile and cluster files, the global batch, the configuration now running, those left before
(with the network when left; none when left for a straggler), the network and the straggler the
switches inferred, the threshold, and when this segment and the whole run started.
"""
import dataclasses
import json
import os
import statistics
import time

from experiments.adaptive import decide
from results.model import specs
from results.records.store import write_json_atomic

ADAPT_ENV = "TFDIST_ADAPT"
REQUEST = "adapt-request.json"  # the chief's switch request, read (and removed) by the supervisor
JOURNAL = "adapt.json"  # the supervisor's account of the run: segments and switches


def from_env(is_chief, multi_worker, examples_per_epoch):
    """The Adapter of this task when the run adapts (the supervisor set ADAPT_ENV), else None."""
    raw = os.environ.get(ADAPT_ENV)
    return Adapter(json.loads(raw), is_chief, multi_worker, examples_per_epoch) if raw else None


class Adapter:
    def __init__(self, env, is_chief, multi_worker, examples_per_epoch):
        self.env, self.is_chief, self.multi_worker = env, is_chief, multi_worker
        self.current = decide.config_from(env["current"])
        self.examples_per_epoch = examples_per_epoch
        self.verdict, self._agree_fn = None, None
        if is_chief:
            self.profile = specs.load_profile(env["profile"], "plan_profile")
            self.cluster = specs.load_cluster(env["cluster"], "plan_cluster")
            if env.get("network_gbps"):  # after a switch: the network that switch inferred,
                # not the spec's, is what this configuration's first epochs ran on
                self.cluster = decide.with_network(self.cluster, env["network_gbps"])
            if env.get("straggler_s"):  # and the straggler a switch found, if one did
                self.cluster = dataclasses.replace(self.cluster,
                                                   straggler_s=env["straggler_s"])

    def after_epoch(self, epochs, epochs_left, strategy):
        """Tags the epoch with its configuration; the chief's verdict goes into the epoch too.
        Returns whether every worker stops here for a switch (the caller saves the checkpoint
        first, then calls `request`)."""
        epochs[-1]["configuration"] = self.current.name
        verdict = None
        if self.is_chief:
            mine = [e for e in epochs if not e.get("resumed")]
            steady_epochs = [e for e in mine if not e.get("includes_tracing")]
            steady = [e["examples_per_sec"] for e in steady_epochs]
            verdict = decide.check(
                self.profile, self.cluster, self.current, self.env["global_batch"], steady,
                epochs_left * self.examples_per_epoch, start_cost(mine, self.env["started_at"]),
                left=[(decide.config_from(c), gbps) for c, gbps in self.env.get("left", [])],
                threshold=self.env["threshold"],
                straggler=decide.straggler_of(steady_epochs[0], steady_epochs[-1])
                if steady_epochs else None)
            epochs[-1]["adapt"] = verdict.to_json()
            self.verdict = verdict
        return self._agree(strategy, verdict is not None and verdict.action == "switch")

    def _agree(self, strategy, mine):
        """The chief's decision on every worker: MWMS workers sum it in one collective (the
        others add 0), so all stop after the same epoch or none does."""
        if not self.multi_worker:
            return mine
        import tensorflow as tf

        if self._agree_fn is None:  # traced once (eager collectives warn of their overhead)
            @tf.function
            def agree(flag):
                value = strategy.run(tf.identity, args=(flag,))
                return strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None)
            self._agree_fn = agree
        return float(self._agree_fn(tf.constant(1.0 if mine else 0.0))) > 0

    def request(self, after_epoch, memory_bytes):
        """The chief, after the epoch's checkpoint: the switch request for the supervisor, with
        memory_bytes() the peak memory per device of the configuration it leaves (the record has
        the last one's only; None when not estimated)."""
        if not self.is_chief:
            return
        memory_bytes = memory_bytes()
        write_json_atomic(os.path.join(self.env["checkpoint_dir"], REQUEST), {
            "after_epoch": after_epoch, "from": decide.config_json(self.current),
            "to": decide.config_json(self.verdict.to), "verdict": self.verdict.to_json(),
            "requested_at": time.time(), "memory_per_device_bytes": memory_bytes})
        print(f"adapt: after epoch {after_epoch}, switching {self.current.name} -> "
              f"{self.verdict.to.name}: {self.verdict.why}", flush=True)

    def record(self, epochs):
        """The record's `adapt`: the supervisor's journal, and for each switch what it cost and
        gained as measured (the epochs after it against the epoch that asked for it)."""
        path = os.path.join(self.env["checkpoint_dir"], JOURNAL)
        with open(path) as f:
            journal = json.load(f)
        for switch in journal["switches"]:
            switch["measured"] = measured_switch(epochs, switch)
        journal["wall_s"] = time.time() - self.env["run_started_at"]
        return journal


def start_cost(epochs, started_at):
    """What starting this configuration cost, measured on this segment: from its launch to its
    first epoch's start, plus the first epoch's excess over the steady ones (tracing). The
    estimate of what a switch costs."""
    if not epochs or epochs[0].get("started_at") is None:
        return 0.0
    return max(0.0, epochs[0]["started_at"] - started_at) + _tracing_excess(epochs)


def _tracing_excess(segment):
    """A segment's first epoch's time beyond its steady epochs' median (0 without any)."""
    steady = [e["time_s"] for e in segment[1:]]
    return max(0.0, segment[0]["time_s"] - statistics.median(steady)) if steady else 0.0


def measured_switch(epochs, switch):
    """{cost_s, rate_before, rate_after, gain_s} of a switch from the record's epochs, or None
    when the run ended before a steady epoch after it."""
    after = [e for e in epochs if e["epoch"] > switch["after_epoch"]]
    before = next((e for e in epochs if e["epoch"] == switch["after_epoch"]), None)
    if not after or before is None or after[0].get("started_at") is None:
        return None
    segment = [e for e in after if e.get("configuration") == after[0].get("configuration")]
    if len(segment) < 2:
        return None
    rate_after = statistics.median(e["examples_per_sec"] for e in segment[1:])
    examples = sum(e["examples_per_sec"] * e["time_s"] for e in segment)
    return {"cost_s": after[0]["started_at"] - switch["requested_at"] +
            _tracing_excess(segment),
            "rate_before": before["examples_per_sec"], "rate_after": rate_after,
            "gain_s": examples * (1 / before["examples_per_sec"] - 1 / rate_after)}

"""The communication probe: what one training step's gradient synchronization costs under the
run's own strategy, measured in isolation after training (no compute to hide behind).

    all-reduce strategies (mirrored, MWMS): a batch all-reduce, through the strategy's own
        cross-device ops, of tensors shaped like the model's trainable variables;
    parameter servers: a function scheduled on a worker that reads every variable from the ps
        (the pull before a step) and adds a gradient-shaped tensor to it (the push after it);
    one replica: nothing to synchronize (0).

The step time it is compared with is the per-worker (per-process) step time of the same run, so
`fraction` = probe / step time is the share of a step that synchronization would take if it did
not overlap with compute. Every MWMS worker must call `measure` (the all-reduce is collective).
"""
import time

import tensorflow as tf

from results import metrics

_WARMUP = 3
_REPEATS = 20


def gradient_bytes(variables, dtype=None):
    """Bytes one step synchronizes: every variable's size in `dtype` (default: its own)."""
    return sum(tf.TensorShape(v.shape).num_elements() * tf.as_dtype(dtype or v.dtype).size
               for v in variables)


def _timed(call, repeats):
    for _ in range(_WARMUP):  # traces, and lets the collective's first-use setup happen
        call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return metrics.spread(times)


def _allreduce_call(strategy, specs):
    @tf.function
    def allreduce():
        def replica_fn():
            grads = [tf.ones(shape, dtype) for shape, dtype in specs]
            reduced = tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, grads)
            # One element of each: keeps every reduction alive without a sum over all of it.
            return tf.add_n([tf.reshape(g, [-1])[0] for g in reduced])
        return strategy.run(replica_fn)

    def call():  # reading a replica's result waits for the whole all-reduce
        return float(strategy.experimental_local_results(allreduce())[0])
    return call


def _pushpull_call(coordinator, variables, dtype):
    @tf.function
    def pushpull(scale):
        pulled = [tf.reshape(tf.identity(v), [-1])[0] for v in variables]
        for v in variables:
            # The push is computed on the worker from a call argument, as a gradient is: a
            # constant (tf.zeros) could be folded by grappler, leaving only the pull. It travels
            # in the sync dtype and is cast back where v lives; scale is 0, so v is unchanged.
            push = tf.fill(tf.shape(v), tf.cast(scale, tf.as_dtype(dtype)))
            with tf.device(v.device):
                v.assign_add(tf.cast(push, v.dtype))
        return tf.add_n(pulled)

    def call():  # one step's pull and push, dispatch included, as a scheduled step pays them
        return coordinator.schedule(pushpull, args=(tf.constant(0.0),)).fetch()
    return call


def measure(strategy, variables, coordinator=None, repeats=_REPEATS, dtype="float32"):
    """Returns {method, gradient_bytes, probe_s: spread of seconds per synchronization}.
    dtype: what the gradients are synchronized in (--gradient_sync_dtype)."""
    specs = [(tf.TensorShape(v.shape), tf.as_dtype(dtype)) for v in variables]
    out = {"gradient_bytes": gradient_bytes(variables, dtype), "dtype": dtype}
    if coordinator is not None:
        return {**out, "method": "ps pull+push of every variable (scheduled on a worker)",
                "probe_s": _timed(_pushpull_call(coordinator, variables, dtype), repeats)}
    if strategy.num_replicas_in_sync == 1:
        return {**out, "method": "none (one replica)",
                "probe_s": {"median": 0.0, "min": 0.0, "max": 0.0, "n": 0}}
    return {**out, "method": "all-reduce of gradient-shaped tensors",
            "probe_s": _timed(_allreduce_call(strategy, specs), repeats)}


def fraction(probe, step_time_s):
    """Share of a per-worker step (results.metrics.per_worker_step_time) spent synchronizing."""
    if not step_time_s:
        return None
    return min(1.0, probe["probe_s"]["median"] / step_time_s)

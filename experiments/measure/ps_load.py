"""The parameter servers under load: how many worker steps' updates the run's ps serve per second
when every worker pushes them as fast as it can, and the ps's CPU and cores meanwhile. A PSS
collectives cell (`--comm_sweep`) runs it after training, before its probe and sweep, with the
run's N workers:

    python -m experiments.run --strategy=parameter_server --num_workers=3 --num_ps=1 \
        --threads_per_worker=1 --comm_sweep --train_examples=6144

Why: the cost model bounds PSS by its ps's work, the ps CPU seconds per worker step of the N=1
runs over the ps's one thread (results/cost_model.py, ps_served). On one machine that figure
misses both ways: a ps with workers queued at it used 1.11-1.21 cores (its gRPC threads beside
its one intra-op thread), and its CPU per step moved by a third between runs minutes apart
(docs/benchmarks.md, the embedding check on the fixed lookup). This measures the ps's rate at
K = N, as the sharing calibration measures compute at K = N, in a cell the predicted runs are
not. The report's notes give it beside each PSS prediction of this machine's runs; as the
model's bound it read worse than the N=1 runs' on fresh runs and was not kept (docs/benchmarks.md,
"The ps under load at K = N", v19): it serves 1.1-1.2x what PSS trains at.

What a step costs the ps here is what it costs in training: the step's pull (every dense
variable whole, a table's rows gathered from a read of it on the ps, as models/embedding.py's
lookup does), gradients of the step's kinds and shapes in its sync dtype made on the worker, and
the run's own optimizer applying them where the variables live (its slots on the ps), one
scheduled call of `steps_per_call` steps at a time, as training dispatches them. No forward or
backward pass: the workers only push, so the ps is what waits. It runs right after training,
before the communication probe: the probe's gathers and scatters put a table in TF's
copy-on-read mode for good, and a ps in that mode copies the table at every update (the first
version ran after the probe and read the embedding's ps 10-38% more CPU per step than its
training: docs/benchmarks.md, the ps under load). The gradients are zeros; the variables still
move (momentum and the like decay), so the weights' checksum is read before it and the cell's
record is no row of the summary.
"""
import time

import tensorflow as tf

from experiments.measure import comm_probe, cpu_usage
from results import metrics

_ROUNDS = 3
# Steps each worker is handed per round (in calls of steps_per_call): at N=2 ~0.6 s of ps work
# for the mlp (3 ms of ps CPU a step) to ~2 s for the embedding (15 ms), long against the 10 ms
# ticks the ps's CPU is read in
_STEPS_PER_WORKER = 96


def measure(strategy, coordinator, optimizer, variables, gradients, dtype, steps_per_call,
            workers, cpu):
    """{steps_per_s, ps_cpu_s_per_step, ps_cores: each the spread over the rounds, workers, steps
    per round, cores_by_task (every task's, the median over the rounds), method}. variables: the
    model's trainable (Keras) variables; gradients: the step's comm_probe.describe; dtype: the
    sync dtype; cpu: the chief's cpu_usage.CpuMeter (on a real cluster it sees the chief only:
    the ps figures read 0 there, the rate stands)."""
    kinds = comm_probe.kinds_of(variables, gradients)
    tensors = [v.value for v in variables]  # reads and gathers on the ps (not a Keras read)

    def replica_fn(scale):
        pulled = comm_probe.pull(tensors, kinds, from_read=True)
        grads = [comm_probe.distinct_fill(tf.shape(v), scale, i, tf.as_dtype(dtype))
                 if kind == "dense" else comm_probe.slices(v, rows, tf.as_dtype(dtype), scale, i)
                 for i, (v, (kind, rows)) in enumerate(zip(tensors, kinds))]
        with tf.control_dependencies([pulled]):  # a step pushes after its pull
            grads = [tf.IndexedSlices(tf.identity(g.values), g.indices, g.dense_shape)
                     if isinstance(g, tf.IndexedSlices) else tf.identity(g) for g in grads]
        optimizer.apply_gradients(zip(grads, variables))
        return pulled

    @tf.function
    def steps(scale, n):
        total = tf.constant(0.0)
        for _ in tf.range(n):
            total += strategy.reduce(tf.distribute.ReduceOp.SUM,
                                     strategy.run(replica_fn, args=(scale,)), axis=None)
        return total

    def load(calls):
        for _ in range(calls):
            coordinator.schedule(steps, args=(tf.constant(0.0), tf.constant(steps_per_call)))
        coordinator.join()

    load(workers)  # traces the function, and its first calls set it up on the workers
    calls = -(-_STEPS_PER_WORKER // steps_per_call) * workers
    rates, per_step, cores, tasks = [], [], [], {}
    for _ in range(_ROUNDS):
        before, start = cpu.reading(), time.perf_counter()
        load(calls)
        wall = time.perf_counter() - start
        used = cpu_usage.by_task(cpu.reading(), before)
        ps = sum(s for task, s in used.items() if task.startswith("ps:"))
        rates.append(calls * steps_per_call / wall)
        per_step.append(ps / (calls * steps_per_call))
        cores.append(ps / wall)
        for task, seconds in used.items():
            tasks.setdefault(task, []).append(seconds / wall)
    return {"method": f"{workers} worker(s) each pulling and pushing a step's variables and "
                      f"gradients, the run's optimizer applying them on the ps, "
                      f"{steps_per_call} step(s) per scheduled call, no compute",
            "workers": workers, "steps_per_round": calls * steps_per_call,
            "steps_per_s": metrics.spread(rates), "ps_cpu_s_per_step": metrics.spread(per_step),
            "ps_cores": metrics.spread(cores),
            "cores_by_task": {t: metrics.median(c) for t, c in sorted(tasks.items())}}

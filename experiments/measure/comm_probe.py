"""The communication probe: what one training step's gradient synchronization costs under the
run's own strategy, measured in isolation after training (no compute to hide behind).

    all-reduce strategies (mirrored, central_storage, MWMS): a batch all-reduce, through the
        strategy's own cross-device ops, of tensors shaped like the model's trainable variables;
    parameter servers: a function scheduled on a worker that reads every variable from the ps
        (the pull before a step) and adds a gradient-shaped tensor to it (the push after it);
    one replica: nothing to synchronize (0).

The step time it is compared with is the per-worker (per-process) step time of the same run, so
`fraction` = probe / step time is the share of a step that synchronization would take if it did
not overlap with compute. Every MWMS worker must call `measure` (the all-reduce is collective).

Sparse gradients. The probe synchronizes what the training step really produced: the trainer
describes each gradient when it traces its step (`describe`), dense or tf.IndexedSlices with its
row count, and the probe all-reduces (or pushes) tensors of exactly those kinds and shapes.
`gradient_bytes` is what one replica puts into the synchronization per step: a dense gradient's
size, an IndexedSlices' values plus indices (an embedding: the looked-up rows, not the table);
`dense_gradient_bytes` what the same gradients would be dense. Measured on TF 2.21 / Keras 3.15:
a gather from an embedding table gives IndexedSlices under every strategy, and the strategies keep
them sparse (mirrored and MWMS all-reduce them by gathering every replica's rows, recorded as
`synchronized_as`; a PSS worker pushes them to the ps, where the optimizer applies them: Keras's
momentum SGD densely, over the whole table).
Under PSS a step also pulls what it reads: dense variables whole, a row-reading embedding only its
rows (`pull_bytes`).
"""
import time

import tensorflow as tf

from results.records import metrics

_WARMUP = 3
_REPEATS = 20


def gradient_bytes(variables, dtype=None):
    """Bytes of dense gradients of `variables`: every variable's size in `dtype` (default: its
    own)."""
    return sum(tf.TensorShape(v.shape).num_elements() * tf.as_dtype(dtype or v.dtype).size
               for v in variables)


def describe(grads):
    """Called while the train step is traced: per gradient, ("dense", None) or
    ("indexed_slices", rows) with rows the static number of slices (None when unknown)."""
    out = []
    for g in grads:
        if isinstance(g, tf.IndexedSlices):
            rows = g.values.shape[0] if g.values.shape.rank else None
            out.append(("indexed_slices", rows))
        else:
            out.append(("dense", None))
    return out


def kinds_of(variables, gradients):
    """[(kind, rows)] per variable; dense when the step was not described (or rows unknown)."""
    if not gradients or len(gradients) != len(variables):
        return [("dense", None)] * len(variables)
    return [(k, r) if k == "dense" or r else ("dense", None) for k, r in gradients]


def _sparse_bytes(variable, rows, dtype, index_size=4):
    width = tf.TensorShape(variable.shape)[1:].num_elements()
    return rows * (width * tf.as_dtype(dtype).size + index_size)


def sizes(variables, gradients, dtype="float32"):
    """{gradient_bytes, dense_gradient_bytes, sparse_gradient_bytes, pull_bytes, gradient_kinds}
    of one step (see the module doc); dense_gradient_bytes: every variable as if its gradient
    were dense; sparse_gradient_bytes: the IndexedSlices' part of gradient_bytes (rows and
    indices); pull_bytes: what a PSS step reads from the ps (in the variables' own dtype)."""
    kinds = kinds_of(variables, gradients)
    sent = pull = sparse = 0
    for v, (kind, rows) in zip(variables, kinds):
        if kind == "dense":
            sent += gradient_bytes([v], dtype)
            pull += gradient_bytes([v])
        else:
            sparse += _sparse_bytes(v, rows, dtype)
            pull += _sparse_bytes(v, rows, v.dtype, index_size=0)
    count = {k: sum(1 for kind, _ in kinds if kind == k) for k in ("dense", "indexed_slices")}
    return {"gradient_bytes": sent + sparse,
            "dense_gradient_bytes": gradient_bytes(variables, dtype),
            "sparse_gradient_bytes": sparse, "pull_bytes": pull, "gradient_kinds": count}


def distinct_fill(shape, scale, i, dtype):
    """The i-th of a probe's tensors: `shape` filled with scale x (i + 1), made from a call
    argument as a gradient is (a constant could be folded away). Each is a tensor of its own:
    grappler merges identical fills of one shape, and then what consumes them alike, so a probe
    of several same-shaped tensors would time one transfer for all."""
    return tf.fill(shape, tf.cast(scale * float(i + 1), dtype))


def slices(variable, rows, dtype, value, i=0):
    """IndexedSlices shaped like an embedding step's gradient: `rows` rows spread over the table,
    with int32 indices as training's lookups have (models/embedding.py), the 4 bytes per row
    `_sparse_bytes` counts (int64 indices would move more than counted)."""
    table = tf.TensorShape(variable.shape)
    indices = tf.cast(tf.range(rows, dtype=tf.int64) * 7919 % table[0], tf.int32)
    return tf.IndexedSlices(distinct_fill([rows, *table[1:]], value, i, dtype), indices,
                            tf.constant(table.as_list(), tf.int64))


def timed(call, repeats, per_call=1, cpu=None):
    """Spread of seconds per synchronization (or whatever `call` does once), after a warm-up;
    a call that makes `per_call` of them is divided.
    cpu: a list that receives the spread of this process's CPU seconds (all its threads) per
    synchronization."""
    for _ in range(_WARMUP):  # traces, and lets the collective's first-use setup happen
        call()
    times, cpu_times = [], []
    for _ in range(repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        call()
        times.append((time.perf_counter() - start) / per_call)
        cpu_times.append((time.process_time() - cpu_start) / per_call)
    if cpu is not None:
        cpu.append(metrics.spread(cpu_times))
    return metrics.spread(times)


def _allreduce_call(strategy, variables, kinds, dtype, synchronized_as, steps):
    """One call of `steps` all-reduces, each waiting for the last (as training's steps do):
    training runs `steps_per_execution` steps per call, so a step pays its all-reduce but only a
    share of the dispatch. synchronized_as: filled at trace time with what the all-reduce
    returned per kind."""
    def replica_fn(scale):
        grads = [distinct_fill(v.shape, scale, i, dtype) if kind == "dense"
                 else slices(v, rows, dtype, scale, i)
                 for i, (v, (kind, rows)) in enumerate(zip(variables, kinds))]
        # The call Keras's optimizer makes with a step's gradients (ReplicaContext.all_reduce)
        reduced = tf.distribute.get_replica_context().all_reduce(
            tf.distribute.ReduceOp.SUM, grads)
        for (kind, _), out in zip(kinds, reduced):
            synchronized_as[kind] = "indexed_slices" if isinstance(
                out, tf.IndexedSlices) else "dense"
        # One element of each: keeps every reduction alive without a sum over all of it.
        return tf.cast(tf.add_n([tf.reshape(g.values if isinstance(g, tf.IndexedSlices) else g,
                                            [-1])[0] for g in reduced]), tf.float32)

    @tf.function
    def allreduce(n):
        total = tf.constant(0.0)
        for _ in tf.range(n):  # the next gradients are made from this sum: one after another
            out = strategy.run(replica_fn, args=(1.0 + 0.0 * total,))
            total = strategy.experimental_local_results(out)[0]
        return total

    def call():  # reading the result waits for the last all-reduce
        return float(allreduce(tf.constant(steps)))
    return call


def pull(variables, kinds, from_read=False):
    """A PSS step's pull, traced into a function a worker runs: every dense variable read whole,
    a table the rows a step reads (a lookup that gathers on the ps pulls its rows only:
    models/embedding.py). variables: tf.Variables. from_read: gather a table's rows from a read
    of it on its device, as models/embedding.py's lookup does; else from the variable
    (ResourceGather), which puts the table in TF's copy-on-read mode for the rest of the process
    (its every dense read and update then copies it first). Returns one float32 that depends on
    every read."""
    pulled = []
    for v, (kind, rows) in zip(variables, kinds):
        if kind == "dense":
            pulled.append(tf.cast(tf.reshape(tf.identity(v), [-1])[0], tf.float32))
            continue
        indices = slices(v, rows, v.dtype, 0.0).indices
        if from_read:
            with tf.device(v.device):
                rows_read = tf.gather(tf.convert_to_tensor(v), indices)
        else:
            rows_read = tf.gather(v, indices)
        pulled.append(tf.cast(tf.reshape(rows_read, [-1])[0], tf.float32))
    return tf.add_n(pulled)


def _pushpull(variables, kinds, dtype, scale):
    """One PSS step's traffic, traced into a function the worker runs: the step's pull and a
    gradient-sized push applied where each variable lives. Returns one float32 that depends on
    every pull."""
    pulled = pull(variables, kinds)
    for i, (v, (kind, rows)) in enumerate(zip(variables, kinds)):
        # The push is made on the worker, each variable's its own (distinct_fill), travels in
        # the sync dtype and is cast back where v lives; scale is 0, so v is unchanged.
        if kind == "dense":
            push = distinct_fill(tf.shape(v), scale, i, tf.as_dtype(dtype))
            with tf.device(v.device):
                v.assign_add(tf.cast(push, v.dtype))
        else:  # IndexedSlices: scattered into the table where it lives
            push = slices(v, rows, tf.as_dtype(dtype), scale, i)
            with tf.device(v.device):
                v.scatter_add(tf.IndexedSlices(tf.cast(push.values, v.dtype), push.indices,
                                               push.dense_shape))
    return pulled


def _pushpull_call(coordinator, variables, kinds, dtype, steps):
    """One scheduled call of `steps` pull+push rounds: training schedules `steps_per_execution`
    steps per call, so a step pays its pull and push but only a share of the dispatch."""
    @tf.function
    def rounds(scale, n):
        total = tf.constant(0.0)  # float32, whatever the variables' dtypes
        for _ in tf.range(n):  # each round reads what the last one wrote (resource order)
            total += _pushpull(variables, kinds, dtype, scale)
        return total

    def call():  # `steps` steps' pulls and pushes and one dispatch, as a scheduled call pays
        return coordinator.schedule(rounds, args=(tf.constant(0.0), tf.constant(steps))).fetch()
    return call


def measure(strategy, variables, coordinator=None, repeats=_REPEATS, dtype="float32",
            gradients=None, steps_per_call=1):
    """Returns {method, dtype, gradient_bytes, dense_gradient_bytes, gradient_kinds,
    synchronized_as, pull_bytes (PSS), probe_s: spread of seconds per synchronization}.
    dtype: what the gradients are synchronized in (--gradient_sync_dtype); gradients: the
    step's `describe` (None: every gradient dense); steps_per_call: the run's
    --steps_per_execution, the steps that share one dispatch in training (and in the probe)."""
    kinds = kinds_of(variables, gradients)
    out = {**sizes(variables, gradients, dtype), "dtype": dtype}
    pull = out.pop("pull_bytes")
    if coordinator is not None:
        return {**out, "pull_bytes": pull,
                "method": f"ps pull+push of every variable, {steps_per_call} per call scheduled "
                          f"on a worker (dispatch shared as in training)",
                "steps_per_call": steps_per_call,
                "synchronized_as": {k: "indexed_slices" if k == "indexed_slices" else "dense"
                                    for k, _ in kinds},
                "probe_s": timed(_pushpull_call(coordinator, variables, kinds, dtype,
                                                 steps_per_call), repeats, steps_per_call)}
    if strategy.num_replicas_in_sync == 1:
        return {**out, "method": "none (one replica)", "synchronized_as": {},
                "probe_s": {"median": 0.0, "min": 0.0, "max": 0.0, "n": 0}}
    synchronized_as = {}
    probe = timed(_allreduce_call(strategy, variables, kinds, dtype, synchronized_as,
                                   steps_per_call), repeats, steps_per_call)
    method = (f"all-reduce of gradient-shaped tensors, {steps_per_call} per call (dispatch "
              f"shared as in training)")
    if isinstance(strategy, tf.distribute.experimental.CentralStorageStrategy):
        # Its step reduces the gradients onto the variables' device and every replica reads the
        # variables back: the same bytes each way as this all-reduce, between local devices.
        method += " (central_storage: standing in for reduce-to-variables + read-back)"
    return {**out, "method": method, "steps_per_call": steps_per_call,
            "synchronized_as": synchronized_as, "probe_s": probe}


def fraction(probe, step_time_s):
    """Share of a per-worker step (results.records.metrics.per_worker_step_time) spent synchronizing
    gradients and, in a model split over devices, moving activations between its stages and
    summing its tensor-parallel shards."""
    if not step_time_s:
        return None
    seconds = probe["probe_s"]["median"]
    # a pipeline's boundary transfers (experiments/engine/gpipe.py) and tensor parallelism's
    # sums (experiments/measure/tensor_probe.py)
    for part in ("activation_probe_s", "tensor_probe_s"):
        if probe.get(part):
            seconds += probe[part]["median"]
    return min(1.0, seconds / step_time_s)

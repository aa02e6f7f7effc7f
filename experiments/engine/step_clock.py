"""Timestamps inside every replica's training step (the record's `timeline`, read by
results/records/step_stamps.py): t0 when the step's input is ready, t1 when its gradients are, t2
when its update is done (after the all-reduce; under PSS, where a read after the update would pull
every variable again, the start of the worker's next step stands for it).

    python -m experiments.run --strategy=multi_worker_mirrored --num_workers=2   # on by default
    python -m experiments.run ... --nostep_timeline                           # off

They are taken without chaining the step's ops: tf.function runs stateful ops that touch no
resource in program order (auto_control_deps.py chains them), so the stamps are ordered by their
own control dependencies only (experiments/engine/gpipe.py's `timestamp`). A stamp nothing waits
for may run late (the executor takes it up when a thread is free), so the forward waits for t0
and, except under PSS, the synchronization for t1: one cheap op each on the step's path. t2
waits for a read of every trained variable, which the automatic control dependencies order
after that variable's update. On a GPU the stamps time when the host issued the work, not when
its kernels ran (no data comes back to the host inside a step): the timeline is a CPU
measurement. A step hands its stamps out of the training function (a TensorArray over the chunk's
steps); MWMS workers all-gather them at the end of an epoch, outside its timed span, so the chief
holds every worker's.
"""
import numpy as np
import tensorflow as tf

from experiments.engine.gpipe import timestamp


def input_ready(inputs):
    """(t0, the inputs): t0 once the step's input is ready, and the inputs made to wait for it,
    so the forward cannot start before the stamp (a timestamp nothing waits for may run late:
    the executor takes it up when a thread is free)."""
    with tf.control_dependencies(tf.nest.flatten(inputs)):
        t0 = timestamp()
    with tf.control_dependencies([t0]):
        return t0, tf.nest.map_structure(tf.identity, inputs)


def gradients_ready(grads, gate=True, after=()):
    """(t1, the gradients): t1 once every gradient is computed (and the tensors `after`: a
    pipeline's block stamps, which nothing else orders before it); with `gate`, the gradients are
    made to wait for it, so the synchronization cannot start before the stamp. Without (PSS,
    whose per-variable pushes may start while the backward still runs, and MWMS's packs of
    --bytes_per_pack: gating would take that overlap away), t1 may be stamped a little late and
    "synchronization" is then what was left of it after the backward."""
    done = [g.values if isinstance(g, tf.IndexedSlices) else g for g in grads if g is not None]
    with tf.control_dependencies(done + list(after)):
        t1 = timestamp()
    if not gate:
        return t1, grads
    with tf.control_dependencies([t1]):
        return t1, [None if g is None else
                     tf.IndexedSlices(tf.identity(g.values), g.indices, g.dense_shape)
                     if isinstance(g, tf.IndexedSlices) else tf.identity(g) for g in grads]


def update_done(variables):
    """t2 after every variable's update: a read of each (a Keras variable's backing tf.Variable,
    read as a tensor) is ordered after its assignment by the automatic control dependencies."""
    reads = [tf.convert_to_tensor(getattr(v, "value", v)) for v in variables]
    with tf.control_dependencies(reads):
        return timestamp()


def epoch_stamps(strategy, num_workers, parameter_servers, chunks):
    """({replica name: [[t0, t1, t2], ...]}, lockstep, blocks) of one epoch's training calls.
    chunks: each call's [steps, local replicas, 4 + B] stamps (replica id, t0, t1, t2, then a
    pipeline's B block stamps, which `blocks` gives as {replica name: [[B values], ...]}, else
    {}); under PSS (worker name, [steps, 4]) per scheduled call. MWMS workers all-gather theirs (a collective: every
    worker calls this at the same point), so the chief holds every worker's. PSS: a step ends
    where the same worker's next one starts (its push, the next pull and the coordinator's
    dispatch in between); each worker's last step is dropped."""
    if parameter_servers:
        rows = {}
        for name, values in chunks:
            rows.setdefault(name, []).extend(np.asarray(values).reshape(-1, 4)[:, 1:].tolist())
        stamps = {}
        for name, r in rows.items():
            r.sort()
            if len(r) > 1:
                stamps[name] = [[a[0], a[1], b[0]] for a, b in zip(r, r[1:])]
        return stamps, False, {}
    local = tf.concat(chunks, 0)  # [steps, local replicas, 4]
    if num_workers > 1 and strategy.num_replicas_in_sync > local.shape[1]:
        ids = [int(v) for v in local[0, :, 0].numpy()]  # this worker's replicas, in order
        mine = strategy.experimental_distribute_values_from_function(
            lambda ctx: local[:, ids.index(ctx.replica_id_in_sync_group), :])
        rows = strategy.gather(mine, axis=0)
    else:
        rows = tf.reshape(local, [-1, local.shape[-1]])
    per = max(1, strategy.num_replicas_in_sync // max(1, num_workers))
    stamps, blocks = {}, {}
    for row in rows.numpy().tolist():
        replica = int(row[0])
        if num_workers > 1:
            name = f"worker:{replica // per}" + (f"/replica:{replica % per}" if per > 1 else "")
        else:
            name = f"replica:{replica}"
        stamps.setdefault(name, []).append(row[1:4])
        if len(row) > 4:
            blocks.setdefault(name, []).append(row[4:])
    return stamps, len(stamps) > 1, blocks

"""Timestamps inside every replica's training step (the record's `timeline`, read by
results/timeline.py): t0 when the step's input is ready, t1 when its gradients are, t2 when its
update is done (after the all-reduce; under PSS, where a read after the update would pull every
variable again, the start of the worker's next step stands for it).

    python -m experiments.run --strategy=multi_worker_mirrored --num_workers=2   # on by default
    python -m experiments.run ... --nostep_timeline                           # off

They are taken without serializing the step: tf.function runs stateful ops that touch no
resource in program order (auto_control_deps.py chains them), so t0 and t1 are ordered by their
control dependencies only (experiments/engine/gpipe.py's `_timestamp`); t2 waits for a read of
every trained variable, which the automatic control dependencies order after that variable's
update. A step hands its stamps out of the training function (a TensorArray over the chunk's
steps); MWMS workers all-gather them at the end of an epoch, outside its timed span, so the chief
holds every worker's.
"""
import numpy as np
import tensorflow as tf

from experiments.engine.gpipe import timestamp

STAMPS = 3  # t0, t1, t2


def input_ready(inputs):
    """(t0, the inputs): t0 once the step's input is ready, and the inputs made to wait for it,
    so the forward cannot start before the stamp (a timestamp nothing waits for may run late:
    the executor takes it up when a thread is free)."""
    with tf.control_dependencies(tf.nest.flatten(inputs)):
        t0 = timestamp()
    with tf.control_dependencies([t0]):
        return t0, tf.nest.map_structure(tf.identity, inputs)


def gradients_ready(grads):
    """(t1, the gradients): t1 once every gradient is computed, and the gradients made to wait
    for it, so the synchronization cannot start before the stamp."""
    done = [g.values if isinstance(g, tf.IndexedSlices) else g for g in grads if g is not None]
    with tf.control_dependencies(done):
        t1 = timestamp()
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


def stack(t0, t1, t2):
    return tf.stack([t0, t1, t2])


class Collector:
    """Per epoch, the stamps of this process's replicas, chunk by chunk: `add` each training
    call's output ([steps, replicas, 3], or PSS's [steps, 3] with a worker name), `epoch_stamps`
    at the end: {replica name: [[t0, t1, t2], ...]}."""

    def __init__(self, names):
        self.names = list(names)  # this process's replicas, in local order
        self._chunks = {}

    def reset(self):
        self._chunks = {}

    def add(self, values, name=None):
        array = np.asarray(values, dtype=np.float64)
        if name is not None:  # a PSS chunk: one worker's steps
            self._chunks.setdefault(name, []).extend(array.reshape(-1, STAMPS).tolist())
            return
        array = array.reshape(array.shape[0], -1, STAMPS)
        for i, n in enumerate(self.names):
            self._chunks.setdefault(n, []).extend(array[:, i, :].tolist())

    def epoch_stamps(self):
        return dict(self._chunks)

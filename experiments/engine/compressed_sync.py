"""Gradient compression with error feedback for the all-reduce strategies (--compression): each
replica compresses its own gradients, the replicas exchange the compressed forms, and every
replica rebuilds the same sum, in the same order, so the replicas' weights stay identical.

    python -m experiments.run --strategy=multi_worker_mirrored --num_workers=2 --compression=int8
    python -m experiments.run --strategy=mirrored --num_replicas=2 --compression=topk:0.01
    python -m experiments.run --strategy=multi_worker_mirrored --compression=powersgd:4

(--compression's forms and the bytes each sends: strategies/compression.py.)

- int8: each dense gradient scaled by its max |value| / 127 and rounded; the int8 values go
  packed four to an int32 (no TF collective takes int8) in one all-gather with the scales
  beside, and each replica sums the N dequantized copies. A worker sends (N-1) x 1 byte per
  value (ring all-gather) against 2(N-1)/N x 4 for a float32 ring all-reduce: 4x fewer at N=2,
  as many at N=8, more beyond.
- topk:RATIO: each dense gradient's largest RATIO of values by magnitude (at least one), as
  (value, index) pairs in one all-gather; the sum is scattered back into dense tensors.
- powersgd:RANK: each gradient of rank >= 2 as a matrix M (its first axis by the rest) sent as
  two rank-RANK factors: P = M Q all-reduced and orthonormalized, then Q = M^T P all-reduced;
  the sum is P Q^T. Q starts from one seed on every replica and carries over between steps (the
  warm start of Vogels et al., NeurIPS 2019). Vectors (biases) are all-reduced as they are.
- Error feedback (all three): what a replica's compressed gradient left out is added to its
  next step's gradient (a per-replica residual, float32 or the model's float dtype), so nothing
  is lost, only delayed. The residuals (and PowerSGD's Q) are not checkpointed: a resumed run
  starts them from zero and what they held is dropped.
- On GPUs, topk's scattered sum (unsorted_segment_sum) uses atomic adds: mirrored replicas could
  then differ in the last bits; on a CPU every replica sums in the same order.

IndexedSlices (an embedding's rows) are all-reduced as they are: they are sparse already.
The Keras optimizer all-reduces whatever it is handed inside a replica context
(keras/src/backend/tensorflow/optimizer.py `_all_reduce_sum_gradients`); the summed gradients
must not be summed again, so the Trainer hands them to an optimizer whose reduction is off
(`without_reduction`).
"""
import time

import numpy as np
import tensorflow as tf

from strategies.compression import as_matrix, sent_bytes, top_k


def without_reduction(optimizer):
    """The optimizer, its own all-reduce of the gradients turned off (they arrive summed)."""
    optimizer._all_reduce_sum_gradients = lambda grads_and_vars: list(grads_and_vars)
    return optimizer


def _dense(grads):
    return [i for i, g in enumerate(grads) if g is not None and not isinstance(g, tf.IndexedSlices)]


class Reducer:
    """Sums the replicas' gradients through a compressed exchange, inside a replica context
    (strategy.run). Its per-replica state (residuals; PowerSGD's Q) is made by `build`, in the
    strategy's scope from the trained variables, before the first step."""

    def __init__(self, spec, strategy):
        self.spec, self.strategy = spec, strategy
        self._residual, self._q = None, None
        self.dense_shapes = None  # the dense gradients' shapes, noted while tracing

    def build(self, variables, sparse=()):
        """The per-replica state, from the trained variables' shapes (in the strategy's scope:
        ON_READ, so each replica keeps and reads its own); none for the variables in `sparse`
        (ids of those whose gradients are IndexedSlices: an embedding's table)."""
        dense = [None if id(v) in sparse else v for v in variables]
        with self.strategy.scope():
            self._residual = [None if v is None else _local(tf.zeros(v.shape, v.dtype))
                              for v in dense]
            if self.spec.method == "powersgd":
                rng = np.random.default_rng(0)  # one seed: every replica's Q starts the same
                self._q = [None if v is None or as_matrix(v.shape) is None else _local(
                    tf.constant(rng.standard_normal((as_matrix(v.shape)[1],
                                                     self._rank(v.shape))), v.dtype))
                           for v in dense]

    def _rank(self, shape):
        rows, cols = as_matrix(shape)
        return max(1, min(self.spec.rank, rows, cols))

    def __call__(self, grads):
        """The replicas' summed gradients (IndexedSlices all-reduced as they are, and a dense
        gradient whose variable was built without a residual: taken for a table)."""
        ctx = tf.distribute.get_replica_context()
        out = list(grads)
        dense = [i for i in _dense(grads) if self._residual[i] is not None]
        self.dense_shapes = [tuple(grads[i].shape) for i in dense]
        plain = [i for i, g in enumerate(grads) if g is not None and i not in dense]
        if plain:
            for i, g in zip(plain, ctx.all_reduce(tf.distribute.ReduceOp.SUM,
                                                  [grads[i] for i in plain])):
                out[i] = g
        if not dense:
            return out
        acc = [grads[i] + self._residual[i] for i in dense]
        method = {"int8": self._int8, "topk": self._topk, "powersgd": self._powersgd}
        summed, sent = method[self.spec.method](ctx, dense, acc)
        for i, a, s, mine in zip(dense, acc, summed, sent):
            self._residual[i].assign(a - mine)  # error feedback: what this replica left out
            out[i] = s
        return out

    def _int8(self, ctx, dense, acc):
        sizes = [int(np.prod(a.shape)) for a in acc]
        offsets = np.cumsum([0] + sizes)
        # float32 scales on the wire, and this replica's own dequantization uses the same ones;
        # each tensor scaled by its own (broadcast, not repeated per value: repeating it costs
        # a copy of every value)
        scales = [tf.cast(tf.maximum(tf.reduce_max(tf.abs(a)), 1e-30) / 127.0, tf.float32)
                  for a in acc]
        qs = [tf.cast(tf.clip_by_value(tf.round(a / tf.cast(s, a.dtype)), -127, 127), tf.int8)
              for a, s in zip(acc, scales)]
        flat = tf.concat([tf.reshape(q, [-1]) for q in qs], 0)
        packed = tf.bitcast(tf.reshape(tf.pad(flat, [[0, (-sum(sizes)) % 4]]), [-1, 4]),
                            tf.int32)  # [m]
        all_q = ctx.all_gather(packed[None], axis=0)  # [N, m]
        all_scales = ctx.all_gather(tf.stack(scales)[None], axis=0)  # [N, T]
        values = tf.reshape(tf.bitcast(all_q, tf.int8), [tf.shape(all_q)[0], -1])
        total, mine = [], []
        for t, (a, q, s) in enumerate(zip(acc, qs, scales)):
            # a multiply, then a sum over the replicas in replica order: the same rounding on
            # every replica
            part = tf.cast(values[:, offsets[t]:offsets[t + 1]], a.dtype) * \
                tf.cast(all_scales[:, t:t + 1], a.dtype)
            total.append(tf.reshape(tf.reduce_sum(part, 0), a.shape))
            mine.append(tf.cast(q, a.dtype) * tf.cast(s, a.dtype))
        return total, mine

    def _topk(self, ctx, dense, acc):
        sizes = [int(np.prod(a.shape)) for a in acc]
        offsets = np.cumsum([0] + sizes[:-1])
        values, indices, mine = [], [], []
        for a, size, offset in zip(acc, sizes, offsets):
            flat = tf.reshape(a, [-1])
            _, idx = tf.math.top_k(tf.abs(flat), k=top_k(self.spec.ratio, size), sorted=False)
            v = tf.gather(flat, idx)
            values.append(v)
            indices.append(idx + int(offset))
            mine.append(tf.reshape(tf.scatter_nd(idx[:, None], v, [size]), a.shape))
        values, indices = tf.concat(values, 0), tf.concat(indices, 0)
        all_v = tf.reshape(ctx.all_gather(values[None], axis=0), [-1])
        all_i = tf.reshape(ctx.all_gather(indices[None], axis=0), [-1])
        total = tf.math.unsorted_segment_sum(all_v, all_i, sum(sizes))
        return _split(total, acc), mine

    def _powersgd(self, ctx, dense, acc):
        matrices = [j for j, i in enumerate(dense) if self._q[i] is not None]
        vectors = [j for j in range(len(dense)) if j not in matrices]
        summed, mine = [None] * len(acc), [None] * len(acc)
        if vectors:  # all-reduced as they are: nothing left out
            for j, s in zip(vectors, ctx.all_reduce(tf.distribute.ReduceOp.SUM,
                                                    [acc[j] for j in vectors])):
                summed[j], mine[j] = s, acc[j]
        if matrices:
            ms = [tf.reshape(acc[j], as_matrix(acc[j].shape)) for j in matrices]
            ps = ctx.all_reduce(tf.distribute.ReduceOp.SUM,
                                [m @ self._q[dense[j]] for j, m in zip(matrices, ms)])
            ps = [tf.linalg.qr(p)[0] for p in ps]  # orthonormal columns
            qs = ctx.all_reduce(tf.distribute.ReduceOp.SUM,
                                [tf.transpose(m) @ p for m, p in zip(ms, ps)])
            for j, m, p, q in zip(matrices, ms, ps, qs):
                self._q[dense[j]].assign(q)  # the next step's warm start
                summed[j] = tf.reshape(p @ tf.transpose(q), acc[j].shape)
                # this replica's share of that sum: its M projected on the common P
                mine[j] = tf.reshape(p @ (tf.transpose(p) @ m), acc[j].shape)
        return summed, mine


def summary(trainer, num_replicas, probe=True):
    """The record's `compression`: the form, the bytes a replica sends per step against a plain
    all-reduce, the per-replica state it keeps (residuals; PowerSGD's Q) and, with `probe`, its
    own compute per step (compute_seconds). None without compression."""
    spec = trainer.compression
    if spec.method == "none":
        return None
    variables = trainer.model.trainable_variables
    reducer = trainer.reducer
    shapes = reducer.dense_shapes if reducer is not None and reducer.dense_shapes is not None \
        else [tuple(v.shape) for v in variables]
    itemsize = tf.as_dtype(variables[0].dtype).size if variables else 4
    state = 0
    if reducer is not None:
        state = sum(int(np.prod(v.shape)) * tf.as_dtype(v.dtype).size
                    for v in reducer._residual + (reducer._q or []) if v is not None)
    if trainer.coordinator is not None:  # PSS (bf16 only): each push is cast, pulls are not
        values = sum(int(np.prod(s)) for s in shapes)
        sent = {"sent_bytes_per_step": 2.0 * values, "plain_bytes_per_step": 1.0 * itemsize *
                values}
    else:
        sent = sent_bytes(spec, shapes, num_replicas, itemsize)
    return {"method": spec.method, "ratio": spec.ratio or None, "rank": spec.rank or None,
            **sent,
            "state_bytes_per_replica": state,
            "compress_s": compute_seconds(spec, shapes, variables[0].dtype) if probe and
            variables else None,
            "how": "bytes: ring algorithms (strategies/compression.py); compress_s: median "
                   "seconds of one replica's compression and decompression of its gradients, "
                   "no exchange, after training"}


def _local(value):
    """A per-replica variable (each replica reads and assigns its own)."""
    return tf.Variable(value, trainable=False,
                       synchronization=tf.VariableSynchronization.ON_READ,
                       aggregation=tf.VariableAggregation.SUM)


def _split(flat, like):
    sizes = [int(np.prod(a.shape)) for a in like]
    return [tf.reshape(part, a.shape) for part, a in zip(tf.split(flat, sizes), like)]


def compute_seconds(spec, shapes, dtype=tf.float32, repeats=20):
    """The compression's own compute per step on this replica's gradients (no exchange: one
    replica's compressed form stands for the gathered ones), median seconds of `repeats` after a
    warm-up; None for bf16/none."""
    if not spec.reduces:
        return None
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        variables = [tf.Variable(tf.zeros(s, dtype)) for s in shapes]
    reducer = Reducer(spec, strategy)
    reducer.build(variables)
    grads = [tf.random.normal(s, dtype=dtype, seed=i) for i, s in enumerate(shapes)]
    step = tf.function(lambda: strategy.run(reducer, args=(grads,)))
    step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, step())
        times.append(time.perf_counter() - start)
    return float(np.median(times))

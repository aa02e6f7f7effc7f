"""ZeRO stage 1 under MWMS (--zero=1; Rajbhandari et al., SC'20): each of the N workers keeps
the optimizer state of 1/N of the parameters and updates only that part.

    python -m experiments.run --strategy=multi_worker_mirrored --num_workers=2 --zero=1 \
        --optimizer=adam

Per step, inside the replica context, on every worker:
1. its gradients, flattened into one vector padded to N x c values, are reduce-scattered: an
   all-to-all of the [N, c] rows (row i to rank i) and a sum of the N rows it receives.
   tf.distribute has no reduce-scatter and TF 2.21's CollectiveReduceScatterV2 has no CPU kernel
   (../shared/NOTES.md); all-to-all has one. A worker sends (N-1) c values, as a ring
   reduce-scatter would.
2. the Keras optimizer (built on this worker's c values only: Adam keeps 2c values, not 2 N c)
   updates its shard of the parameters, a float copy kept here;
3. the shards are all-gathered, and every worker assigns the whole parameters to the model.
Traffic: 2 (N-1) c values a step against a ring all-reduce's 2 (N-1)/N x N c: the same.

The shard a worker owns is the all-to-all's rank of its device, found once by an all-to-all of
the ranks themselves, so nothing assumes how TensorFlow orders the group.
The collectives use their own group key, far above MWMS's (which start at 1), and instance keys
taken while tracing, in the same order on every worker (another order would deadlock).

Checkpoints: the model and this worker's optimizer shard. Every worker writes its own shard to
<checkpoint_dir>/zero/rank<r>-of<N>/shard-<step> (that is the point of the sharding: no worker
has the whole state), all meet at a barrier, and only then is the model saved (the chief's
checkpoint, as always): a model checkpoint of step S means every rank's shard of S is there. A
resume restores each rank's shard of the model's step; another N, a checkpoint written without
--zero, or a missing shard is refused in one line before anything is restored.
IndexedSlices (an embedding's rows) are made dense: their values join the flat vector. A variable
with no gradient gets zeros: SGD, momentum and Adam then leave it and its slots at rest (they
start at zero), as Keras's apply does by skipping it.
Memory: a worker keeps 1/N of the slots plus its float copy of its 1/N of the parameters (the
variable its optimizer updates): momentum at N=2 saves nothing, Adam at N=2 an eighth of
parameters + gradients + slots. The flat exchange's full-size temporaries (the gradient vector,
the gathered parameters) come on top; docs/benchmarks.md has the host's peak.
"""
import itertools
import os

import keras
import numpy as np
import tensorflow as tf
from tensorflow.python.ops import collective_ops

from experiments.config import checkpoint_layout
from experiments.engine.checkpoints import KEEP  # the model checkpoints kept: as many shards

_GROUP_KEY = 4_000_000  # MWMS's group keys start at 1: far from them
_INSTANCE_KEYS = itertools.count(1)


class ZeroError(RuntimeError):
    """What --zero=1 cannot serve: a worker of several replicas, a model of several dtypes, a
    checkpoint sharded otherwise or incomplete (one line)."""


def _dense(g, v):
    if g is None:
        return tf.zeros_like(v.value if isinstance(v, keras.Variable) else v)
    return tf.convert_to_tensor(g)


class ShardedUpdate:
    """Replaces `optimizer.apply_gradients` inside `strategy.run` (MWMS, one replica a worker).
    `optimizer` must have been made outside the strategy's scope: its state is this worker's
    own, not mirrored."""

    def __init__(self, optimizer, strategy, variables):
        self.optimizer, self.strategy = optimizer, strategy
        self.variables = list(variables)
        self.n = strategy.num_replicas_in_sync
        local = len(strategy.extended.worker_devices)
        if local != 1:  # one shard and one rank per worker (a GPU host's MWMS worker has more)
            raise ZeroError(f"--zero=1 shards over workers of one replica each; this worker "
                            f"has {local} ({', '.join(strategy.extended.worker_devices)}): give "
                            f"each worker one device (CUDA_VISIBLE_DEVICES) or drop --zero")
        dtypes = sorted({tf.as_dtype(v.dtype).name for v in self.variables})
        if len(dtypes) != 1:  # one flat vector, one optimizer
            raise ZeroError(f"--zero=1 flattens the trained variables into one vector of one "
                            f"dtype; this model has {', '.join(dtypes)}: use one float dtype")
        self.sizes = [int(np.prod(v.shape)) for v in self.variables]
        self.total = sum(self.sizes)
        self.chunk = -(-self.total // self.n)  # c: the last shard is padded
        self.dtype = tf.as_dtype(self.variables[0].dtype)
        self.rank = self._my_rank()
        # this worker's float copy of its shard, the variable its optimizer updates
        self.shard = keras.Variable(self._my_slice(), dtype=self.dtype.name, trainable=False,
                                    name="zero_shard")
        optimizer.build([self.shard])
        self._barrier_fn = None

    def _collective(self, op, t):
        return op(t, group_size=self.n, group_key=_GROUP_KEY,
                  instance_key=next(_INSTANCE_KEYS))

    def _my_rank(self):
        """Row i of the all-to-all goes to rank i: sending i to everyone, each worker receives
        its own rank from all."""
        n = self.n

        @tf.function
        def probe():
            def fn():
                return self._collective(collective_ops.all_to_all_v2,
                                        tf.range(n, dtype=tf.int32))
            return self.strategy.run(fn)

        (ranks,) = self.strategy.experimental_local_results(probe())
        ranks = set(ranks.numpy().tolist())
        assert len(ranks) == 1, ranks
        return ranks.pop()

    def _flat(self, tensors):
        flat = tf.concat([tf.reshape(tf.cast(t, self.dtype), [-1]) for t in tensors], 0)
        return tf.pad(flat, [[0, self.n * self.chunk - self.total]])

    def _my_slice(self):
        flat = self._flat([v.numpy() for v in self.variables])
        return flat[self.rank * self.chunk:(self.rank + 1) * self.chunk]

    def resync(self):
        """The shard from the model's weights (after a restore wrote them)."""
        self.shard.assign(self._my_slice())

    def __call__(self, grads):
        """One update (replica context): reduce-scatter, this shard's step, all-gather."""
        flat = self._flat([_dense(g, v) for g, v in zip(grads, self.variables)])
        rows = self._collective(collective_ops.all_to_all_v2,
                                tf.reshape(flat, [self.n, self.chunk]))
        opt = self.optimizer
        opt.update_step(tf.reduce_sum(rows, 0), self.shard, opt.learning_rate)
        opt.iterations.assign_add(1)
        params = self._collective(collective_ops.all_gather_v2,
                                  tf.convert_to_tensor(self.shard))[:self.total]
        values = [tf.reshape(p, v.shape) for p, v in
                  zip(tf.split(params, self.sizes), self.variables)]
        if any(getattr(v, "constraint", None) is not None for v in self.variables):
            # as Keras's apply does after its update (a kernel constraint, say); the shard
            # takes the constrained values too, or the next update would start from others
            values = [v.constraint(x) if getattr(v, "constraint", None) is not None else x
                      for x, v in zip(values, self.variables)]
            self.shard.assign(self._flat(values)[self.rank * self.chunk:
                                                 (self.rank + 1) * self.chunk])
        tf.__internal__.distribute.interim.maybe_merge_call(
            _assign_all, self.strategy, list(zip(self.variables, values)))

    # -- checkpoints -------------------------------------------------------------------------

    def _dir(self, directory):
        return checkpoint_layout.rank_dir(directory, self.rank, self.n)

    def save(self, directory, step):
        """This worker's optimizer shard at `step` (every worker: the state is sharded), then a
        barrier: the caller saves the model after it, so a model checkpoint of step S means
        every rank's shard of S is written. Keeps the shards of the last KEEP steps (the model's
        CheckpointManager keeps as many); rank 0 drops shards of another N."""
        mine = self._dir(directory)
        tf.train.Checkpoint(optimizer=self.optimizer).write(os.path.join(mine, f"shard-{step}"))
        for old in _steps(mine)[:-KEEP]:
            for path in tf.io.gfile.glob(os.path.join(mine, f"shard-{old}.*")):
                tf.io.gfile.remove(path)
        if self.rank == 0:  # shards over another N (a reused directory): never resumable here
            for n in _shardings(directory):
                if n != self.n:
                    for stale in tf.io.gfile.glob(checkpoint_layout.rank_dir(directory, "*", n)):
                        tf.io.gfile.rmtree(stale)
        self._barrier()

    def _barrier(self):
        if self._barrier_fn is None:  # traced once: the same instance key on every worker
            self._barrier_fn = tf.function(lambda: self.strategy.run(
                lambda: self._collective(collective_ops.all_gather_v2, tf.ones([1]))))
        self._barrier_fn()

    def restore(self, directory, step):
        """This worker's shard saved at `step` (check_resumable found every rank's); the
        shard's weights from the restored model."""
        tf.train.Checkpoint(optimizer=self.optimizer).read(
            os.path.join(self._dir(directory), f"shard-{step}")).assert_consumed()
        self.resync()

    def summary(self):
        """The record's `zero`: the shard, the optimizer state this worker keeps against an
        unsharded optimizer's, and the bytes it sends per step against a ring all-reduce."""
        itemsize = self.dtype.size
        state = sum(int(np.prod(v.shape)) * tf.as_dtype(v.dtype).size
                    for v in self.optimizer.variables if v.shape.rank)  # slots, not scalars
        per_value = state / self.chunk
        n = self.n
        return {"stage": 1, "shards": n, "rank": self.rank, "values": self.total,
                "shard_values": self.chunk,
                "optimizer_state_bytes_per_worker": state,
                # what results/report/reducers.py models: a ring all-reduce's bytes of every value
                "payload_bytes": self.total * itemsize, "exchange": "reduce",
                "unsharded_optimizer_state_bytes": per_value * self.total,
                "sent_bytes_per_step": 2.0 * (n - 1) * self.chunk * itemsize,
                "plain_bytes_per_step": 2.0 * (n - 1) / n * self.total * itemsize,
                "how": "state: the optimizer's slot variables on this worker; bytes: all-to-all "
                       "(N-1) c values + ring all-gather (N-1) c values, against a ring "
                       "all-reduce's 2 (N-1)/N values"}


def _steps(shard_dir):
    """The steps whose shard is in `shard_dir`, oldest first."""
    found = tf.io.gfile.glob(os.path.join(shard_dir, "shard-*.index"))
    return sorted(int(os.path.basename(p)[len("shard-"):-len(".index")]) for p in found)


def _shardings(directory):
    """The numbers of workers the shards in `directory` were written over."""
    root = os.path.join(directory, checkpoint_layout.SHARD_DIR)
    return checkpoint_layout.shardings(tf.io.gfile.listdir(root) if tf.io.gfile.isdir(root)
                                       else [])


def check_resumable(directory, update, step):
    """Raises ZeroError (one line) when the checkpoint of `step` in `directory` holds its
    optimizer state otherwise than `update` (a ShardedUpdate, or None without --zero) keeps it,
    or a rank's shard of that step is missing: before anything is restored (the shapes would
    not match), on every worker alike (config/validation.py refused a local directory's
    sharding before the launch already)."""
    line = checkpoint_layout.zero_refusal(directory, _shardings(directory),
                                          update.n if update is not None else None)
    if line:
        raise ZeroError(line)
    if update is None:
        return
    missing = [r for r in range(update.n) if step not in _steps(
        checkpoint_layout.rank_dir(directory, r, update.n))]
    if missing:
        raise ZeroError(f"{directory}: the model of step {step} has no optimizer shard of rank "
                        f"{', '.join(map(str, missing))}; it cannot be resumed (start in another "
                        f"--checkpoint_dir)")


def _assign_all(distribution, pairs):
    """Keras's own path for updating mirrored variables from a replica context (keras/src/
    backend/tensorflow/optimizer.py _distributed_tf_update_step)."""
    for var, value in pairs:
        var = var.value if isinstance(var, keras.Variable) else var
        distribution.extended.update(var, lambda v, x: v.assign(x), args=(value,), group=False)

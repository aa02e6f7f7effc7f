"""The GPipe schedule: one training step's forward and backward of M micro-batches through S
pipeline stages on S devices (Huang et al. 2019), and what it costs.

    python -m experiments.run --strategy=model_parallel --num_stages=2 --microbatches=4
    python -m experiments.run --strategy=hybrid --num_workers=2 --num_stages=2 --microbatches=4

Stage s runs on device s (a GPU, or one of S logical CPU devices). Every micro-batch goes forward
through every stage, then every micro-batch goes backward, last stage first; each stage handles
its micro-batches one at a time (control dependencies chain the blocks of one device), so the
only overlap is the pipeline's: stage 1 works on micro-batch m while stage 0 works on m + 1.
Gradients are summed over the micro-batches and the optimizer applies them once per step. The loss
of each micro-batch is averaged over the step's whole batch, so the sum is the gradient of the full
batch: with plain SGD the weights equal one device's (tests/experiments/engine/test_gpipe.py).

The bubble is measured, not assumed: every block (a stage's forward or backward of one
micro-batch) takes tf.timestamp() when its inputs are ready and when its outputs are, inside the
step. A step's idle share is 1 - sum(busy) / (S x span), span = first forward start to last
backward end; the GPipe formula for S equal stages is (S - 1) / (M + S - 1).
"""

import tensorflow as tf

from experiments.measure import comm_probe, memory
from models.schedules import BACKWARD, FORWARD, in_flight, schedule
from results.records import metrics


def timestamp():
    """tf.timestamp() ordered by its control dependencies only. tf.function runs stateful ops
    that touch no resource in program order (auto_control_deps.py chains them), which would run
    the blocks one after another: measured here, a 2-stage x 4-micro-batch pipeline of equal
    blocks took 8 block times with chained timestamps and 5 (GPipe's M + S - 1) with these."""
    stamp = tf.timestamp()
    manager = getattr(tf.compat.v1.get_default_graph(), "experimental_acd_manager", None)
    if manager is not None:
        manager.run_independently(stamp.op)
    return stamp


def add_gradients(a, b):
    """a + b for one variable's gradients from two micro-batches (None: no gradient)."""
    if a is None or b is None:
        return a if b is None else b
    if isinstance(a, tf.IndexedSlices) and isinstance(b, tf.IndexedSlices):
        return tf.IndexedSlices(tf.concat([a.values, b.values], 0),
                                tf.concat([a.indices, b.indices], 0), a.dense_shape)
    return tf.convert_to_tensor(a) + tf.convert_to_tensor(b)


def _reads(kind, m, s, num_stages):
    """The blocks whose outputs block (kind, m, s) reads: a forward the previous stage's
    forward; a backward its own forward's tape and the next stage's backward."""
    if kind == FORWARD:
        return [(FORWARD, m, s - 1)] if s > 0 else []
    return [(FORWARD, m, s)] + ([(BACKWARD, m, s + 1)] if s < num_stages - 1 else [])


def bubble_formula(num_stages, microbatches):
    """GPipe's idle share of S equal stages and M micro-batches."""
    return (num_stages - 1) / (microbatches + num_stages - 1)


class Pipeline:
    """Computes one step's gradients through `stages` (models.stages.Stage) on `devices`.

    loss_fn: per-example loss of (labels, logits); global_batch: the examples the loss of the
    whole step is averaged over (a replica's micro-batch losses sum to its share of it).
    """

    def __init__(self, stages, devices, microbatches, loss_fn, global_batch, model_variables,
                 schedule="gpipe"):
        self.stages, self.devices, self.microbatches = stages, devices, microbatches
        self.schedule = schedule
        self.loss_fn, self.global_batch = loss_fn, global_batch
        self.model_variables = model_variables
        index = {id(v): i for i, v in enumerate(model_variables)}
        # Which of the model's trainable variables each stage trains (position in the model's
        # list: the optimizer applies gradients in that order).
        self.stage_variables = [[index[id(v)] for v in s.model.trainable_variables]
                                for s in stages]

    def _block(self, device, after, inputs, compute):
        """Runs compute() on `device` once `inputs` and `after` are done; returns its outputs
        and the block's (start, end) timestamps."""
        with tf.device(device):
            with tf.control_dependencies(after + inputs):
                start = timestamp()
            with tf.control_dependencies([start]):
                outputs = compute()
            # Every output's tensors (an IndexedSlices' too); a block with none (the backward
            # of a first stage without weights) ends when it starts.
            done = [t for t in tf.nest.flatten(outputs, expand_composites=True)
                    if t is not None] or [start]
            with tf.control_dependencies(done):
                end = timestamp()
        return outputs, start, end

    def __call__(self, images, labels):
        """(gradients aligned with model_variables, per-example losses, logits, busy seconds per
        stage, span seconds, blocks) of one step. blocks: [S, 2M, 2] float64 timestamps, each
        stage's blocks as (start, end) in one order whatever the schedule ran them in: its M
        forwards, then its M backwards from the last micro-batch (the trace's per-stage
        tracks)."""
        S, M = len(self.stages), self.microbatches
        xs, ys = tf.split(images, M), tf.split(labels, M)
        busy = [[] for _ in range(S)]
        blocks = [[None] * (2 * M) for _ in range(S)]
        starts, ends = [], []
        tapes = [[None] * S for _ in range(M)]
        outputs = {}  # (m, s) -> the forward's output (the last stage's: the loss)
        upstream = {}  # (m, s) -> the gradient stage s hands back for micro-batch m
        # The device's previous block: blocks run in order. A stage's first block also waits
        # for its weights to be readable (after the previous step's update): otherwise, in a
        # loop of steps, its start would be stamped while the last step still runs.
        last_end = [[tf.reduce_sum(tf.zeros(1)) if not s.model.weights else
                     tf.reduce_sum(tf.reshape(tf.convert_to_tensor(s.model.weights[0]), [-1])[:1])]
                    for s in self.stages]
        losses, logits = [None] * M, [None] * M
        grads = [None] * len(self.model_variables)

        def forward_block(m, s):
            stage, h = self.stages[s], xs[m] if s == 0 else outputs[(m, s - 1)]

            def forward():
                tape = tf.GradientTape()
                with tape:
                    if s > 0:
                        tape.watch(h)
                    out = stage.model(h, training=True)
                    if s == S - 1:
                        per_example = self.loss_fn(ys[m], out)
                        loss = tf.nn.compute_average_loss(
                            per_example, global_batch_size=self.global_batch)
                        losses[m], logits[m] = per_example, out
                        out = loss
                tapes[m][s] = (tape, h, out)
                return out
            outputs[(m, s)], start, end = self._block(self.devices[s], last_end[s], [h],
                                                       forward)
            starts.append(start)
            return start, end, m

        def backward_block(m, s):
            tape, h, out = tapes[m][s]
            variables = [self.model_variables[i] for i in self.stage_variables[s]]
            sources = variables + ([h] if s > 0 else [])
            given = upstream.get((m, s + 1))

            def backward():
                return tape.gradient(out, sources, output_gradients=given)
            result, start, end = self._block(self.devices[s], last_end[s],
                                             [] if given is None else [given], backward)
            ends.append(end)
            for i, g in zip(self.stage_variables[s], result[:len(variables)]):
                grads[i] = add_gradients(grads[i], g)  # an embedding's: IndexedSlices
            if s > 0:
                upstream[(m, s)] = result[-1]
            return start, end, 2 * M - 1 - m

        # Each stage's blocks are made in its schedule's order (control dependencies then run
        # them in that order on its device), a block once what it reads is made.
        order, done = schedule(self.schedule, S, M), set()
        position = [0] * S
        while any(position[s] < len(order[s]) for s in range(S)):
            made = False
            for s in range(S):
                while position[s] < len(order[s]):
                    kind, m = order[s][position[s]]
                    if not all(n in done for n in _reads(kind, m, s, S)):
                        break
                    start, end, slot = (forward_block if kind == FORWARD else
                                        backward_block)(m, s)
                    busy[s].append(end - start)
                    blocks[s][slot] = tf.stack([start, end])
                    last_end[s] = [end]
                    done.add((kind, m, s))
                    position[s] += 1
                    made = True
            if not made:
                raise ValueError(f"pipeline schedule {self.schedule!r} waits on itself")
        # Differences of float64 timestamps, then float32 (the accumulators' dtype).
        span = tf.cast(tf.reduce_max(tf.stack(ends)) - tf.reduce_min(tf.stack(starts)),
                       tf.float32)
        stage_busy = tf.cast(tf.stack([tf.add_n(b) for b in busy]), tf.float32)
        return (grads, tf.concat(losses, 0), tf.concat(logits, 0), stage_busy, span,
                tf.stack([tf.stack(b) for b in blocks]))


def bubble_unequal(busy_shares, microbatches):
    """The GPipe idle share for stages of unequal cost: stage s takes t_s per micro-batch (in
    proportion to its measured busy share), a step's span is sum(t) + (M - 1) x max(t) (the
    slowest stage paces the micro-batches after the first), busy is M x sum(t). Equals
    bubble_formula when every t_s is the same; the part of the measured bubble the split's
    imbalance explains."""
    if not busy_shares or max(busy_shares) <= 0:
        return None
    total, slowest, S, M = sum(busy_shares), max(busy_shares), len(busy_shares), microbatches
    return 1.0 - M * total / (S * (total + (M - 1) * slowest))


def activation_bytes(stages, micro_batch, microbatches):
    """Bytes crossing each stage boundary per step: forward activations and, backward, their
    gradients (same size), for every micro-batch."""
    out = []
    for stage in stages[:-1]:
        per_example = stage.output_bytes_per_example
        forward = None if per_example is None else per_example * micro_batch * microbatches
        out.append({"forward": forward, "backward": forward})
    return out


def total_activation_bytes(stages, micro_batch, microbatches):
    """Both directions of every boundary per step; None when a size is known only at run time."""
    sent = activation_bytes(stages, micro_batch, microbatches)
    if any(b["forward"] is None for b in sent):
        return None
    return sum(b["forward"] + b["backward"] for b in sent)


def transfer_probe(stages, devices, micro_batch, microbatches, repeats=20):
    """Seconds to move one step's boundary tensors between the stages' devices alone (each
    boundary's activation forward and its gradient back, for every micro-batch), as the spread of
    `repeats` timings. Between logical devices of one CPU the tensors stay in host memory. None
    for one stage (no boundary: tensor parallelism alone) and when a boundary's shape is known
    only at run time."""
    shapes = [(micro_batch, *s.output_shape) for s in stages[:-1]]
    if not shapes or any(d is None for shape in shapes for d in shape):
        return None

    @tf.function
    def transfer(scale):
        kept = []
        for b, shape in enumerate(shapes):
            for m in range(microbatches):
                with tf.device(devices[b]):
                    x = comm_probe.distinct_fill(shape, scale, m, tf.float32)
                with tf.device(devices[b + 1]):
                    back = tf.identity(x) * 2.0  # the next stage reads it; its gradient returns
                with tf.device(devices[b]):
                    kept.append(tf.reshape(tf.identity(back), [-1])[0])
        return tf.add_n(kept)

    return comm_probe.timed(lambda: float(transfer(tf.constant(1.0))), repeats)


def held_per_stage(schedule_name, num_stages, micro_batch, microbatches):
    """Examples whose activations each stage holds at its peak under the schedule."""
    return [micro_batch * in_flight(order)
            for order in schedule(schedule_name, num_stages, microbatches)]


def summary(stages, devices, micro_batch, microbatches, optimizer, stage_cost, epochs,
            schedule_name="gpipe"):
    """The record's `pipeline` section: per stage its device, layers, parameters, activations
    sent on, the micro-batches its schedule holds at once and its peak memory
    (experiments/measure/memory.py), and the bubble of the steady-state epochs measured next
    to the GPipe formula."""
    steady = metrics.steady_epochs(epochs)
    idle = [e["pipeline_idle_share"] for e in steady if e.get("pipeline_idle_share") is not None]
    busy = [e["stage_busy_share"] for e in steady if e.get("stage_busy_share")]
    sent = activation_bytes(stages, micro_batch, microbatches) + [None]
    held = held_per_stage(schedule_name, len(stages), micro_batch, microbatches)
    peaks = memory.per_device(stages, devices, held, optimizer)
    out = []
    for i, (stage, device) in enumerate(zip(stages, devices)):
        out.append({
            "stage": i, "device": device, "layers": len(stage.layers),
            "microbatches_held": held[i] // micro_batch,
            "first_layer": stage.layers[0], "last_layer": stage.layers[-1],
            "parameters": stage.parameters, "parameter_bytes": stage.parameter_bytes,
            "cost": stage.cost,
            "activation_bytes_sent_per_step": sent[i],
            "peak_memory_bytes": peaks[i]["bytes"], "peak_memory_kind": peaks[i]["kind"],
            "busy_share": (metrics.spread([b[i] for b in busy])["median"] if busy else None)})
    return {
        "num_stages": len(stages), "microbatches": microbatches, "micro_batch": micro_batch,
        "schedule": schedule_name,
        "balanced_by": stage_cost,  # each stage's `cost`: parameters, or seconds measured
        "stages": out,
        "activation_bytes_per_step": total_activation_bytes(stages, micro_batch, microbatches),
        "bubble": {"measured": metrics.spread(idle)["median"] if idle else None,
                   "measured_per_epoch": idle,
                   "formula": bubble_formula(len(stages), microbatches),
                   # the formula for this split's unequal stages, from their measured busy time
                   "formula_unequal_stages": bubble_unequal(
                       [s["busy_share"] for s in out] if busy else None, microbatches),
                   "how": "1 - sum(stage busy) / (S x span), tf.timestamp at each block's start "
                          "and end, over the steady-state epochs' steps"}}

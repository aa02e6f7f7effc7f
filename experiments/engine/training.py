"""The one training loop every strategy shares.

A `tf.function` train step runs the model through `strategy.run`; losses are averaged over the
*global* batch (tensorflow#45923) so gradients summed across replicas equal single-device ones.
Under ParameterServerStrategy the same step is scheduled on workers by a ClusterCoordinator.
Keras 3 `model.fit` is not used: it cannot run under MWMS (keras-team/keras#20585) or PSS
(keras-team/keras#18624).

Gradient accumulation (--accumulation_steps=K): a *step* is one optimizer update. Each replica
receives K x its per-replica batch, splits it into K micro-batches, runs them one after the
other and sums their gradients; then the step synchronizes once and applies once. The loss is
averaged over the step's K x global batch, so with plain SGD K micro-batches of B give the
weights one batch of K x B gives (tests/experiments/engine/test_training.py, and under MWMS in
tests/integration/test_clusters.py). A step's batch (`global_batch`, and the record's
global_batch_size) is K x the global batch; --lr_scaling scales with it. BatchNormalization sees
micro-batches, so a BN model is not equal to the large batch.
"""
import dataclasses
import sys
import time

import keras
import tensorflow as tf

from experiments.engine import build, compressed_sync, gpipe, step_clock, zero
from experiments.measure import comm_probe, cpu_usage, memory
from strategies import compression, kind
from tf_config import events


@dataclasses.dataclass
class EpochStats:
    epoch: int
    time_s: float  # wall time of the training steps only (no eval), first epoch includes tracing
    examples_per_sec: float
    train_loss: float
    train_accuracy: float
    eval_loss: float
    eval_accuracy: float
    eval_time_s: float
    learning_rate: float
    steps: int
    # Seconds of step checkpoints and profiler start/stop inside the epoch, kept out of time_s.
    hooks_time_s: float = 0.0
    # CPU seconds the run's processes used during time_s (see experiments/measure/cpu_usage.py).
    cpu_s: float | None = None
    # The same by task (chief:0, worker:1, ps:0, launcher; a single process: `process`).
    cpu_by_task_s: dict | None = None
    # model_parallel / hybrid: the pipeline's measured idle share over the epoch's steps, and
    # each stage's busy share of the pipeline's span (experiments/engine/gpipe.py).
    pipeline_idle_share: float | None = None
    stage_busy_share: list | None = None
    # Multi-worker runs: per worker, the medians of its steps' compute, waiting for the last peer
    # and synchronization (from timestamps inside the step, --step_timeline), and who was last
    # (results/records/step_stamps.py).
    timeline: dict | None = None
    # Wall clock (seconds since the epoch) of the epoch's start, of its evaluation's start and of
    # its end: the run's trace (results/report/timeline.py) places epochs and evaluations with them.
    started_at: float | None = None
    eval_started_at: float | None = None
    ended_at: float | None = None


TRACE_STEPS = 200  # steps of the last epoch the record keeps every stamp of (its trace)


def make_evaluate(model):
    """Returns evaluate(dataset) -> (mean loss, accuracy) of `model` over batched (x, y)."""
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    @tf.function
    def batch_sums(images, labels):
        logits = model(images, training=False)
        predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return (tf.reduce_sum(loss_fn(labels, logits)),
                tf.reduce_sum(tf.cast(predicted == labels, tf.float32)))

    def evaluate(dataset):
        loss, correct, count = 0.0, 0.0, 0
        for images, labels in dataset:
            batch_loss, batch_correct = batch_sums(images, labels)
            loss += float(batch_loss)
            correct += float(batch_correct)
            count += int(labels.shape[0])
        return loss / count, correct / count
    return evaluate


def weights_checksum(model):
    """Sum of |w| over every model weight: equal on every worker of a synchronous run."""
    return float(sum(float(tf.reduce_sum(tf.abs(v.value))) for v in model.weights))


def _sum_on_read(shape=()):
    """A per-replica accumulator summed across replicas (and workers) when read: metrics cost
    no communication per step."""
    return tf.Variable(tf.zeros(shape), trainable=False,
                       synchronization=tf.VariableSynchronization.ON_READ,
                       aggregation=tf.VariableAggregation.SUM)


def _all_layers(model):
    """Every layer of a model, nested models' too."""
    for layer in getattr(model, "layers", []):
        yield layer
        yield from _all_layers(layer)


class Trainer:
    """Trains a task's Workload (experiments/engine/build.py: model, stages, optimizer, input)
    under `strategy`, epoch by epoch.

    coordinator: a ClusterCoordinator for ParameterServerStrategy, else None.
    cpu: measures the CPU seconds of the run's processes around each epoch's timed span.
    is_chief: only the chief evaluates, shows progress and (in the caller) writes results.
    """

    def __init__(self, cfg, info, strategy, workload, coordinator=None, is_chief=True, cpu=None):
        self.cfg, self.info, self.strategy = cfg, info, strategy
        self.model, self.optimizer = workload.model, workload.optimizer
        self.stages, self.stage_devices = workload.stages, workload.stage_devices
        self.cpu = cpu  # a cpu_usage.CpuMeter (the chief's view of the run's processes) or None
        self.coordinator, self.is_chief = coordinator, is_chief
        batches = workload.batching
        self.replicas = batches.replicas
        self.per_replica_batch = batches.per_replica_batch  # one micro-batch of one replica
        self.accumulation = batches.accumulation
        self.global_batch = batches.global_batch  # examples per step (one update)
        self.steps_per_epoch = batches.steps_per_epoch
        self.examples_per_epoch = batches.examples_per_epoch
        self.learning_rate = workload.learning_rate
        with strategy.scope(), build.floatx(cfg.float_dtype):
            if coordinator is None:
                self.loss_sum, self.correct, self.seen = (_sum_on_read(), _sum_on_read(),
                                                          _sum_on_read())
            if self.stages is not None:  # the pipeline's timings, summed over steps
                self.stage_busy, self.pipeline_span = (_sum_on_read([cfg.num_stages]),
                                                       _sum_on_read())
            # A Keras loss casts the logits to its own dtype, floatx when it is made.
            self._loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                    reduction=None)
        # 16-bit sync is opt-in compression; "float32" (the default) means no cast, so a
        # float64 model's gradients stay float64. --compression=bf16 is the same cast.
        self.compression = compression.parse(cfg.compression)
        sync = "bfloat16" if self.compression.method == "bf16" else cfg.gradient_sync_dtype
        self._sync_dtype = None if sync == "float32" else tf.as_dtype(sync)
        # What a step synchronizes in, the cast's else the model's own (float64 too): the probes
        # after training time the same (experiments/engine/task.py).
        self.sync_dtype = (self._sync_dtype or tf.as_dtype(cfg.float_dtype)).name
        # The sync waits for t1 (all gradients) except where it may start earlier: PSS pushes
        # per variable, and packs (--bytes_per_pack) start as their gradients are ready.
        self._gate_sync = coordinator is None and not cfg.bytes_per_pack
        self.reducer = None
        if self.compression.reduces:  # the exchange sums the gradients: Keras must not again
            self.reducer = compressed_sync.Reducer(self.compression, strategy)
            # an embedding's table gets IndexedSlices, all-reduced as they are: no residual
            # (Keras's Embedding, and any layer that says so, like models/embedding.py's)
            tables = {id(v) for layer in _all_layers(self.model)
                      if isinstance(layer, keras.layers.Embedding) or
                      getattr(layer, "SPARSE_GRADIENTS", False)
                      for v in layer.trainable_variables}
            self.reducer.build(self.model.trainable_variables, tables)
            compressed_sync.without_reduction(self.optimizer)
        self.zero = None
        if cfg.zero:  # --zero=1: this worker updates its shard only (zero.py)
            self.zero = zero.ShardedUpdate(self.optimizer, strategy,
                                           self.model.trainable_variables)
        self.pipeline = None
        if self.stages is not None:
            self.pipeline = gpipe.Pipeline(self.stages, self.stage_devices, cfg.microbatches,
                                           self._loss, self.global_batch,
                                           self.model.trainable_variables,
                                           cfg.pipeline_schedule)
        self._iterator = iter(workload.train_data)
        self.global_step = 0
        self.steps_by_worker = {}  # PSS: which worker ran how many steps (stragglers run fewer)
        self.first_step_done_at = None  # wall clock (epoch s) when this process's first step ended
        self.gradients = None  # comm_probe.describe of the step's gradients, once traced
        self.allocator_peaks = {}  # {gpu:i or cpu_allocator: peak} over the training steps
        # tf.timestamp is a host op: a TPU's compiled step has none (XLA)
        self.step_timeline = cfg.step_timeline and kind(cfg.strategy).accelerator != "tpu"
        self.trace_stamps = None  # {replica: [[t0, t1, t2], ...]} of the last epoch's first steps
        self.trace_blocks = None  # pipelines: {replica: [[start, end] x S x 2M per step, ...]}
        self._pending = []  # PSS: (RemoteValue, global step at its end) not waited for yet
        self._train_steps = tf.function(self._steps)
        self._evaluate = make_evaluate(self.model)
        self._eval_data = workload.eval_data

    def _micro_step(self, images, labels):
        """One micro-batch's (gradients, per-example losses, logits); the loss is averaged over
        the whole step's batch, so a step's K micro-gradients sum to its gradient."""
        with tf.GradientTape() as tape:
            logits = self.model(images, training=True)
            per_example = self._loss(labels, logits)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=self.global_batch)
            if self.model.losses:  # added once per micro-batch: 1/K of it each time
                loss += tf.nn.scale_regularization_loss(
                    tf.add_n(self.model.losses)) / self.accumulation
        return tape.gradient(loss, self.model.trainable_variables), per_example, logits

    def _accumulated(self, images, labels):
        """K micro-batches run one after the other (each waits for the previous gradients, so
        their activations need not be held together; memory not measured here), gradients
        summed: dense ones added, IndexedSlices concatenated (an embedding's gradient stays its
        rows, K times as many)."""
        total, losses, all_logits = None, [], []
        for x, y in zip(tf.split(images, self.accumulation), tf.split(labels, self.accumulation)):
            previous = [] if total is None else [
                g.values if isinstance(g, tf.IndexedSlices) else g
                for g in total if g is not None]
            with tf.control_dependencies(previous):
                x = tf.identity(x)
            grads, per_example, logits = self._micro_step(x, y)
            losses.append(per_example)
            all_logits.append(logits)
            total = grads if total is None else [gpipe.add_gradients(a, b)
                                                 for a, b in zip(total, grads)]
        return total, tf.concat(losses, 0), tf.concat(all_logits, 0)

    def _step(self, iterator):
        def replica_step(images, labels):
            t0 = None
            if self.step_timeline:
                t0, (images, labels) = step_clock.input_ready((images, labels))
            blocks = None
            if self.pipeline is not None:
                grads, per_example, logits, busy, span, blocks = self.pipeline(images, labels)
                self.stage_busy.assign_add(busy)
                self.pipeline_span.assign_add(span)
            elif self.accumulation == 1:
                grads, per_example, logits = self._micro_step(images, labels)
            else:
                grads, per_example, logits = self._accumulated(images, labels)
            if self._sync_dtype is not None:
                # Keras all-reduces (or pushes to the ps) the gradients it is given and casts
                # them back to the variable's dtype in the update: casting here halves the
                # bytes every step synchronizes (gradient compression, opt-in).
                grads = [None if g is None else tf.cast(g, self._sync_dtype) for g in grads]
            # What the strategy is handed (dense or IndexedSlices, and how many rows), noted
            # while tracing: the communication probe synchronizes the same kinds and sizes.
            self.gradients = comm_probe.describe(grads)
            t1 = None
            if self.step_timeline:
                t1, grads = step_clock.gradients_ready(
                    grads, gate=self._gate_sync, after=[] if blocks is None else [blocks])
            if self.reducer is not None:
                grads = self.reducer(grads)
            if self.zero is not None:
                self.zero(grads)
            else:
                self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
            stamps = None
            if self.step_timeline:
                replica = tf.distribute.get_replica_context().replica_id_in_sync_group
                # PSS: a read after the update would pull every variable again from the ps; its
                # step ends where the worker's next one starts (see _timeline)
                t2 = t1 if self.coordinator is not None else step_clock.update_done(
                    self.model.trainable_variables)
                stamps = tf.stack([tf.cast(replica, tf.float64), t0, t1, t2])
                if blocks is not None:  # each stage's blocks: the trace's stage tracks
                    stamps = tf.concat([stamps, tf.reshape(blocks, [-1])], 0)
            predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
            sums = (tf.cast(tf.reduce_sum(per_example), tf.float32),  # float64 models too
                    tf.reduce_sum(tf.cast(predicted == labels, tf.float32)),
                    tf.cast(tf.shape(labels)[0], tf.float32))
            if self.coordinator is not None:
                return sums + ((stamps,) if stamps is not None else ())
            for var, value in zip((self.loss_sum, self.correct, self.seen), sums):
                var.assign_add(value)
            return stamps

        out = self.strategy.run(replica_step, args=next(iterator))
        if self.coordinator is not None:
            # PSS: each scheduled step hands its sums back as RemoteValues (the pattern of the
            # PSS tutorial); ON_READ accumulators hung the coordinator here. The worker's index
            # comes back too: the record counts the steps each worker ran. (A worker runs one
            # replica: reducing its stamps hands them back as they are.)
            worker = tf.distribute.coordinator.experimental_get_current_worker_index()
            return [self.strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
                    for v in out] + [tf.cast(worker, tf.float32)]
        if out is None:
            return None
        return tf.stack(self.strategy.experimental_local_results(out))  # [local replicas, 4]

    def _steps(self, iterator, n):
        """`n` (a tensor: one trace for every chunk size) training steps in one call; with the
        timeline, the steps' stamps ([n, local replicas, 4 + blocks]). Under PSS returns the
        chunk's (loss sum, correct, seen, worker index, steps[, stamps [n, 4]]) for the
        coordinator."""
        # Without the timeline the array stays empty and unwritten (`if` on a Python bool is
        # decided while tracing): autograph takes no loop variable that may start as None.
        stamps = tf.TensorArray(tf.float64, size=n if self.step_timeline else 0)
        totals = [tf.constant(0.0)] * 3
        worker = tf.constant(0.0)
        for i in tf.range(n):
            out = self._step(iterator)
            if self.coordinator is not None:
                totals = [t + v for t, v in zip(totals, out[:3])]
                worker = out[-1]
                out = out[3] if self.step_timeline else None
            if self.step_timeline:
                stamps = stamps.write(i, out)
        stacked = [stamps.stack()] if self.step_timeline else []
        if self.coordinator is None:
            return stacked[0] if stacked else None
        return totals + [worker, tf.cast(n, tf.float32)] + stacked

    def _timeline(self, chunks):
        """The epoch's stamps by replica (step_clock.epoch_stamps; MWMS workers all call this at the
        same point), summarized per replica (results/records/step_stamps.breakdown); keeps the first
        TRACE_STEPS steps' stamps for the trace. Outside the epoch's timed span."""
        from results.records import step_stamps

        stamps, lockstep, blocks = step_clock.epoch_stamps(
            self.strategy, self.cfg.num_workers, self.coordinator is not None, chunks)
        self.trace_stamps = {k: v[:TRACE_STEPS] for k, v in stamps.items()}
        self.trace_blocks = {k: v[:TRACE_STEPS] for k, v in blocks.items()} or None
        parts = step_stamps.breakdown(stamps, lockstep)
        return {"lockstep": lockstep, "per_worker": parts,
                "straggler": step_stamps.straggler_line(parts, lockstep)}

    def evaluate(self):
        return self._evaluate(self._eval_data)

    def weights_checksum(self):
        return weights_checksum(self.model)

    def _progbar(self):
        if not self.is_chief:
            return None
        return keras.utils.Progbar(self.steps_per_epoch, verbose=1 if sys.stdout.isatty() else 2,
                                   unit_name="step")

    def _hook(self, acts, call, hooks_cpu, *args, **kwargs):
        """Runs a checkpoint or profiler hook; returns its wall seconds. When it acts (saves,
        starts or stops a trace), the CPU seconds it cost every task are added to hooks_cpu:
        the CPU meter is read then only, so a step without a due hook pays nothing for it."""
        if acts and self.coordinator is not None:
            # PSS: the hook first waits for the scheduled steps; that CPU is training's.
            self._drain()
            self.coordinator.join()
        before = self.cpu.reading() if acts and self.cpu is not None else None
        if acts and self.is_chief:  # a save or a trace is not a step: the hang watchdog waits
            events.report_phase("checkpoint or trace")
        spent = call(*args, **kwargs)
        if acts and self.is_chief:
            events.report_phase(events.TRAIN_PHASE)
        if before is not None:
            for task, seconds in cpu_usage.by_task(self.cpu.reading(), before).items():
                hooks_cpu[task] = hooks_cpu.get(task, 0.0) + seconds
        return spent

    def _drain(self):
        """PSS: waits for the scheduled calls in order, the chief saying each one's end to a
        local launcher (its hang watchdog: scheduling runs ahead, so the step markers say
        nothing about progress)."""
        for value, global_step in self._pending:
            value.fetch()
            if self.is_chief:
                events.report_done(global_step)
        self._pending = []

    def _read_totals(self):
        """The epoch's loss sum, correct predictions and examples over every replica."""
        return [float(v.read_value()) for v in (self.loss_sum, self.correct, self.seen)]

    def train_epoch(self, epoch, first_step=0, checkpoints=None, profiler=None):
        """Trains steps first_step..steps_per_epoch-1 of `epoch` (first_step > 0: resuming inside
        the epoch). checkpoints: runs each step (MWMS preemption) and saves when due; profiler:
        starts/stops a trace at its steps."""
        if self.coordinator is None:
            for var in (self.loss_sum, self.correct, self.seen):
                var.assign(0.0)
        if self.pipeline is not None:
            self.stage_busy.assign(tf.zeros_like(self.stage_busy))
            self.pipeline_span.assign(0.0)
        remote, self._pending = [], []
        progbar = self._progbar()
        if progbar is not None:
            print(f"Epoch {epoch}/{self.cfg.epochs}", flush=True)
        # The allocator's peak afresh for this epoch's steps: not the model's building, nor the
        # last epoch's evaluation (the peak over the epochs is kept in allocator_peaks).
        memory.reset_peaks()
        cpu_start = self.cpu.reading() if self.cpu is not None else None
        if self.is_chief:  # the hang watchdog's clock runs again (from the second epoch on)
            events.report_phase(events.TRAIN_PHASE)
        started_at = time.time()
        start = time.perf_counter()
        step, hooks_s, hooks_cpu = first_step, 0.0, {}
        chunks = []  # the training calls' stamps (all-reduce and single-process strategies)
        while step < self.steps_per_epoch:
            # Several steps per call (--steps_per_execution) save the per-call dispatch; the
            # hooks below fire for the chunk that contains their step.
            k = min(self.cfg.steps_per_execution, self.steps_per_epoch - step)
            before, self.global_step, step = self.global_step, self.global_step + k, step + k
            if profiler is not None:
                hooks_s += self._hook(profiler.acts_before(before + 1, self.global_step),
                                      profiler.before_steps, hooks_cpu, before + 1,
                                      self.global_step)
            if self.is_chief and self.cfg.fail_task and \
                    before < self.cfg.fail_at_step <= self.global_step:
                # The local launcher reads this and kills (or preempts) the named task.
                events.request_fault(self.cfg.fail_mode, self.cfg.fail_task, self.cfg.fail_at_step)
            steps = tf.constant(k)
            if self.coordinator is not None:
                remote.append(self.coordinator.schedule(self._train_steps,
                                                        args=(self._iterator, steps)))
                self._pending.append((remote[-1], self.global_step))
            elif checkpoints is not None:
                chunks.append(checkpoints.run_step(self._train_steps, self._iterator, steps))
            else:
                chunks.append(self._train_steps(self._iterator, steps))
            if self.first_step_done_at is None:
                if remote:  # PSS: scheduling is asynchronous; wait for this one call once
                    self._drain()
                self.first_step_done_at = time.time()
            if self.is_chief:  # a local launcher's measure of progress (lost steps, recovery)
                events.report_step(self.global_step)
            # Checkpoints and the profiler are not training: their time is measured and taken
            # out of the epoch's time_s (docs/records.md: time_s covers the training steps only).
            if profiler is not None:
                hooks_s += self._hook(profiler.acts_after(before + 1, self.global_step),
                                      profiler.after_steps, hooks_cpu, before + 1,
                                      self.global_step)
            if checkpoints is not None:
                end = step == self.steps_per_epoch
                hooks_s += self._hook(checkpoints.saves_after(before, self.global_step, end),
                                      checkpoints.after_steps, hooks_cpu, before,
                                      self.global_step, epoch_end=end)
            if progbar is not None and progbar.verbose == 1:
                progbar.update(step)
        if self.coordinator is not None:
            self._drain()
            self.coordinator.join()
            fetched = [r.fetch() for r in remote]
            totals = [sum(float(v) for v in values) for values in zip(*(f[:3] for f in fetched))]
            for f in fetched:
                worker = f"worker:{int(f[3])}"
                self.steps_by_worker[worker] = self.steps_by_worker.get(worker, 0) + int(f[4])
            chunks = [(f"worker:{int(f[3])}", f[5]) for f in fetched] if self.step_timeline \
                else []
        else:
            # The end of the timed span: reading this process's own part of a sum waits for its
            # last step and moves nothing between processes. The sums themselves are read after
            # the clock stops: under MWMS each is a cross-worker all-reduce, bookkeeping rather
            # than training (docs/benchmarks.md, "The epoch's clock stopped after ...").
            for part in self.strategy.experimental_local_results(self.seen):
                part.read_value().numpy()
        elapsed = time.perf_counter() - start - hooks_s
        self.allocator_peaks = memory.peaks(self.allocator_peaks)  # before evaluation, probe
        by_task = cpu_usage.by_task(self.cpu.reading(), cpu_start) \
            if cpu_start is not None else None
        if by_task is not None:  # the hooks' CPU, like their wall time, is not training
            # (never below 0: a task lost during a hook may book the same seconds under
            # another name in the epoch's reading than in the hook's)
            by_task = {task: max(0.0, seconds - hooks_cpu.get(task, 0.0))
                       for task, seconds in by_task.items()}
        cpu_s = sum(by_task.values()) if by_task is not None else None
        if self.coordinator is None:  # still watched for a hang: a collective under MWMS
            totals = self._read_totals()
        if self.is_chief:  # evaluation and the epoch's end are not steps (the hang watchdog)
            events.report_phase("end of epoch")
        timeline = self._timeline(chunks) if self.step_timeline and chunks else None
        loss_sum, correct, seen = totals
        train_loss = loss_sum / max(seen, 1.0)
        train_accuracy = correct / max(seen, 1.0)
        eval_loss = eval_accuracy = float("nan")
        eval_start, eval_started_at = time.perf_counter(), time.time()
        if self.is_chief:
            eval_loss, eval_accuracy = self.evaluate()
        eval_time = time.perf_counter() - eval_start
        lr = float(self.optimizer.learning_rate.numpy() if hasattr(
            self.optimizer.learning_rate, "numpy") else self.optimizer.learning_rate)
        idle = busy_share = None
        if self.pipeline is not None:  # summed over replicas (hybrid: workers) and steps
            busy = self.stage_busy.read_value().numpy()
            span = float(self.pipeline_span.read_value())
            busy_share = [float(b) / span for b in busy] if span > 0 else None
            idle = 1.0 - sum(busy_share) / len(busy_share) if busy_share else None
        stats = EpochStats(epoch=epoch, time_s=elapsed, examples_per_sec=seen / elapsed,
                           train_loss=train_loss, train_accuracy=train_accuracy,
                           eval_loss=eval_loss, eval_accuracy=eval_accuracy,
                           eval_time_s=eval_time, learning_rate=lr,
                           steps=self.steps_per_epoch - first_step, hooks_time_s=hooks_s,
                           cpu_s=cpu_s, cpu_by_task_s=by_task, pipeline_idle_share=idle,
                           stage_busy_share=busy_share, timeline=timeline,
                           started_at=started_at, eval_started_at=eval_started_at,
                           ended_at=time.time())
        if progbar is not None:
            progbar.update(self.steps_per_epoch, values=[
                ("loss", train_loss), ("accuracy", train_accuracy), ("eval_loss", eval_loss),
                ("eval_accuracy", eval_accuracy), ("examples/s", stats.examples_per_sec)],
                finalize=True)
        return stats

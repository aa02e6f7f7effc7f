"""What a task builds before its first step and hands to the Trainer (experiments/engine/
training.py): the model, its pipeline stages where the strategy pipelines, the optimizer, the
batch arithmetic, and the input this worker trains and evaluates on; as TF Model Garden's
`Task.build_model` / `build_inputs` and flax's `create_train_state` do.

    workload = build(cfg, info, strategy, coordinator, is_chief)   # experiments/engine/task.py
    trainer = Trainer(cfg, info, strategy, workload, coordinator, is_chief, cpu)

Which input path and which stage placement a strategy gets is asked of its Kind
(strategies.kind), never of its name.
"""
import contextlib
import dataclasses
import math

import keras
import tensorflow as tf

from experiments.workload import inputs, user_data, user_model
from experiments.workload.datasets import FUNCTION
from experiments.workload.user_code import UserCodeError
from models import stages as model_stages
from models import tensor_parallel
from strategies import kind
from strategies.factory import stage_devices


class WarmupScaledLR(keras.optimizers.schedules.LearningRateSchedule):
    """`target` = base LR x replica scaling; ramps linearly from 0 over `warmup_steps`
    (Goyal et al. 2017: large global batches need the scaled rate, but not from step one)."""

    def __init__(self, target, warmup_steps):
        self.target = float(target)
        self.warmup_steps = int(warmup_steps)

    def __call__(self, step):
        if self.warmup_steps <= 0:
            return tf.constant(self.target, tf.float32)
        ramp = tf.minimum(1.0, tf.cast(step + 1, tf.float32) / float(self.warmup_steps))
        return self.target * ramp

    def get_config(self):
        return {"target": self.target, "warmup_steps": self.warmup_steps}


def learning_rate_for(cfg, global_batch):
    """The rate for a step of `global_batch` examples: --learning_rate was tuned for the single
    device's batch (--global_batch_size if held fixed, else --batch_size_per_replica), and
    --lr_scaling scales it with the batch, not with the replicas: under strong scaling every
    strategy trains on the baseline's batch and keeps the baseline's rate (Goyal et al. 2017)."""
    factor = global_batch / (cfg.global_batch_size or cfg.batch_size_per_replica)
    if cfg.lr_scaling == "linear":
        return cfg.learning_rate * factor
    if cfg.lr_scaling == "sqrt":
        return cfg.learning_rate * math.sqrt(factor)
    return cfg.learning_rate


def make_optimizer(name, schedule):
    if name == "sgd":
        return keras.optimizers.SGD(schedule)
    if name == "momentum":
        return keras.optimizers.SGD(schedule, momentum=0.9)
    if name == "adam":
        return keras.optimizers.Adam(schedule)
    raise ValueError(f"unknown optimizer {name!r}; valid: sgd, momentum, adam")


@contextlib.contextmanager
def floatx(dtype):
    """Keras's default float dtype while the model, its optimizer and loss are built:
    --float_dtype=float64 trains in double precision (the strategy-equivalence tests: their
    rounding is then ~1e-16 per operation whatever kernels the CPU picks)."""
    # Layers take their dtype from the global policy, which Keras fixes from floatx on first
    # use: both are set, and both restored.
    previous, policy = keras.config.floatx(), keras.config.dtype_policy()
    keras.config.set_floatx(dtype)
    keras.config.set_dtype_policy(dtype)
    try:
        yield
    finally:
        keras.config.set_floatx(previous)
        keras.config.set_dtype_policy(policy)


@dataclasses.dataclass(frozen=True)
class Batching:
    """A step's arithmetic. A step is one optimizer update: each replica runs `accumulation`
    micro-batches of `per_replica_batch` and the step synchronizes once (training.py)."""
    replicas: int  # replicas in sync
    per_replica_batch: int  # one micro-batch of one replica
    accumulation: int
    global_batch: int  # examples per step (one update): micro-batches x replicas x K
    steps_per_epoch: int

    @property
    def examples_per_epoch(self):
        return self.steps_per_epoch * self.global_batch


def batching(cfg, replicas):
    micro_batch = cfg.global_batch_size or cfg.batch_size_per_replica * replicas
    if micro_batch % replicas:
        raise ValueError(f"global batch {micro_batch} is not divisible by {replicas} replicas "
                         f"in sync")
    global_batch = micro_batch * cfg.accumulation_steps
    return Batching(replicas, micro_batch // replicas, cfg.accumulation_steps, global_batch,
                    cfg.train_examples // global_batch)


def build_model(cfg, info, strategy):
    """The run's model (a built-in, MODULE:FUNCTION or PATH.keras), built from --seed in the
    strategy's scope and in --float_dtype. UserCodeError (one line) for a user model that
    cannot be built."""
    def make(tensor_parallel=1):
        keras.utils.set_random_seed(cfg.seed)  # --seed covers initialization: reruns compare
        return user_model.build(cfg.model, info.feature_shape, info.num_classes,
                                batchnorm=cfg.batchnorm, sync_batchnorm=cfg.sync_batchnorm,
                                weights=cfg.model_weights, tensor_parallel=tensor_parallel)

    with strategy.scope(), floatx(cfg.float_dtype):
        model = make()
        if cfg.tensor_parallel > 1:  # the same weights, in shards (models/tensor_parallel.py)
            split = make(cfg.tensor_parallel)
            tensor_parallel.load_from(split, model)
            model = split
    return model


def split_stages(cfg, info, strategy, model, per_replica_batch):
    """(stages, their devices) of the model (models/stages.py), in the strategy's scope. Under a
    pipeline alone each stage's variables are re-created on its stage's device, before the
    optimizer builds its slots next to them (a tensor-parallel layer's shard t on the stage's
    t-th device); under all-reduce workers (hybrid) MWMS keeps every variable mirrored on the
    worker's one replica device, and the stages and shards place their compute only."""
    if model.losses:
        raise UserCodeError(f"--strategy={cfg.strategy}: model {cfg.model!r} adds losses of its "
                            f"own (model.losses, e.g. weight regularizers); the pipeline "
                            f"does not split them across stages: remove them or use another "
                            f"--strategy")
    micro = per_replica_batch // cfg.microbatches
    sample = None
    if cfg.stage_cost == "time":
        sample, _ = next(iter(inputs.examples(info, "train", micro, cfg.seed,
                                              cfg.data_dir or None).batch(micro)))
    wrap, agree = tf.function, None
    all_reduce = kind(cfg.strategy).all_reduce
    if all_reduce:  # mirrored variables are read in a replica context
        def wrap(fn):
            return tf.function(lambda *args: strategy.experimental_local_results(
                strategy.run(fn, args=args))[0])

        def agree(costs):  # every worker splits alike: the mean of their measured times
            @tf.function
            def total():  # comm_probe's pattern: the tensor made in the replica context
                return strategy.run(lambda: tf.distribute.get_replica_context().all_reduce(
                    tf.distribute.ReduceOp.SUM, tf.constant(costs, tf.float32)))
            summed = strategy.experimental_local_results(total())[0].numpy()
            return summed / strategy.num_replicas_in_sync
    shards = cfg.tensor_parallel
    everything = stage_devices(cfg.model_devices())
    devices = everything[::shards]  # each stage's first device: where its unsplit layers run
    for layer in tensor_parallel.split_layers(model):  # while --stage_cost=time times them
        layer.devices = everything[:shards]
    try:
        stages = model_stages.split(model, cfg.num_stages, cfg.stage_cost, sample, wrap, agree)
    except model_stages.StageError as e:
        raise UserCodeError(str(e)) from None
    for s, stage in enumerate(stages):
        placed = {}  # id(variable) -> its device: a split layer's shard t on the stage's t-th
        for layer in tensor_parallel.split_layers(stage.model):
            layer.devices = everything[s * shards:(s + 1) * shards]
            for device, variables in zip(layer.devices, layer.shard_variables()):
                placed.update({id(v): device for v in variables})
        if not all_reduce:  # no mirrored copy to keep
            for v in stage.model.weights:
                # Keras's own creation path (TF backend): a new tf.Variable holding the same
                # value, created under its device's scope.
                with tf.device(placed.get(id(v), devices[s])):
                    v._initialize(tf.identity(v.value))
    return stages, devices


def check_input(cfg, info, model, is_chief):
    """Before any step: the model maps two examples to (2, num_classes) logits (every task
    that built it), and a MODULE:FUNCTION dataset's labels are class ids (the chief, over
    the examples the run uses). UserCodeError: one line, exit 2 (experiments.engine.task)."""
    sample = inputs.examples(info, "train", 2, cfg.seed, cfg.data_dir or None).batch(2)
    features, _ = next(iter(sample))
    user_model.check_logits(model, cfg.model, features, info.num_classes)
    if is_chief and info.kind == FUNCTION:
        for split, count in (("train", cfg.train_examples), ("eval", cfg.eval_examples)):
            user_data.check_labels(inputs.examples(info, split, count, cfg.seed),
                                   info.source, split, info.num_classes)


def local_replicas(strategy):
    """Replicas this process feeds (1 for one device, MWMS with one device per worker)."""
    try:
        return len(strategy.extended.worker_devices)
    except RuntimeError:  # the default strategy (model_parallel) has no worker_devices: one
        return 1


def input_context(strategy):
    """This worker's input pipeline (one per worker, as distribute_datasets_from_function numbers
    them: the chief first, then the workers)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    spec = resolver.cluster_spec().as_dict() if resolver is not None else {}
    chiefs, workers = len(spec.get("chief", [])), len(spec.get("worker", []))
    if chiefs + workers <= 1:
        return tf.distribute.InputContext(1, 0, strategy.num_replicas_in_sync)
    pipeline_id = 0 if resolver.task_type == "chief" else chiefs + resolver.task_id
    return tf.distribute.InputContext(chiefs + workers, pipeline_id,
                                      strategy.num_replicas_in_sync)


def _straggler_delay_us(cfg, worker_index, batches, num_pipelines, start_step):
    """Per-step delay of the input pipeline of worker `worker_index` (an int, or a tensor on a
    PSS worker): --straggler_delay_ms on the straggler, nothing elsewhere; under
    --straggler_schedule a function of the pipeline's batch count, each batch at its epoch's
    delay. A step takes R / P batches of each of P pipelines (R replicas in sync); a PSS worker,
    which runs about 1/N of the steps while all are equally fast, counts N steps a batch: once
    it straggles it counts slower, so a PSS schedule's later changes land late
    (docs/reliability.md)."""
    straggler = cfg.straggler_worker()
    if straggler is None:
        return None
    mine = tf.cast(tf.equal(worker_index, straggler), tf.int64)
    if not cfg.straggler_schedule:
        return mine * int(cfg.straggler_delay_ms * 1000)
    schedule = cfg.straggler_delays()
    epochs = tf.constant([e for e, _ in schedule], tf.int64)
    delays = tf.constant([int(ms * 1000) for _, ms in schedule], tf.int64)
    # (steps, batches) of this pipeline that go together
    per = (max(1, cfg.num_workers), 1) if kind(cfg.strategy).parameter_servers else \
        (1, max(1, batches.replicas // num_pipelines))

    def at(batch_index):
        done = (start_step * per[1] + batch_index * per[0]) // (batches.steps_per_epoch * per[1])
        return mine * tf.gather(delays, tf.reduce_sum(tf.cast(epochs <= done, tf.int32)) - 1)
    return at


def worker_dataset(cfg, info, batches, num_pipelines, pipeline_id, start_step=0):
    """One worker's pipeline of per-replica batches: its own shard, in its own order, from
    where `start_step` finished steps left it (a step takes global_batch examples, 1/P of them
    from each of the P pipelines; PSS workers run steps in no fixed share: there, 1/N is where
    it resumes, not where it stopped).
    pipeline_id may be a tensor: `create_per_worker_dataset` traces the PSS dataset function
    once and runs that graph on every worker, so what must differ between PSS workers has to
    come from the worker index evaluated there, not from Python or the global seed."""
    # A replica's step takes its K micro-batches as one batch and splits it (training.py).
    return inputs.train_dataset(
        info, cfg.train_examples, batches.per_replica_batch * batches.accumulation, cfg.seed,
        cfg.data_dir or None, num_shards=num_pipelines, shard_index=pipeline_id,
        shuffle_seed=cfg.seed + pipeline_id,
        delay_us=_straggler_delay_us(cfg, pipeline_id, batches, num_pipelines, start_step),
        replicas_in_sync=batches.replicas,
        start_example=start_step * batches.global_batch // num_pipelines)


def pss_dataset(cfg, info, batches, worker_index, start_step=0):
    """A PSS worker's dataset, traced once by the coordinator with the worker index a tensor."""
    return worker_dataset(cfg, info, batches, max(1, cfg.num_workers),
                          tf.cast(worker_index, tf.int64), start_step)


def train_input(cfg, info, strategy, batches, coordinator=None, start_step=0):
    """What the train step iterates, from `start_step` finished steps on (a resumed run): per-
    worker datasets made by the coordinator (parameter servers), this worker's plain dataset
    (one local replica), or the strategy's distributed dataset (several local replicas, or
    central variables)."""
    if coordinator is not None:
        return coordinator.create_per_worker_dataset(lambda: pss_dataset(
            cfg, info, batches, tf.distribute.coordinator.experimental_get_current_worker_index(),
            start_step))
    if local_replicas(strategy) == 1 and not kind(cfg.strategy).central_variables:
        # One replica per process: feed strategy.run from this worker's plain tf.data
        # iterator. Iterating a strategy's distributed dataset ran the same step at half
        # speed on some CPUs (docs/strategies.md, "Engine overhead"); with one local replica
        # there is nothing for it to split, so the plain iterator gives the replica the same
        # batch.
        ctx = input_context(strategy)
        return worker_dataset(cfg, info, batches, ctx.num_input_pipelines, ctx.input_pipeline_id,
                              start_step)
    # Several local replicas (mirrored), and central_storage at any N: the distributed
    # dataset places each replica's batch on its compute device (CentralStorageStrategy's
    # documented input path; its variables live on another device than its replicas).
    return strategy.distribute_datasets_from_function(
        lambda ctx: worker_dataset(cfg, info, batches, ctx.num_input_pipelines,
                                   ctx.input_pipeline_id, start_step))


@dataclasses.dataclass
class Workload:
    """What the Trainer trains: built by `build`."""
    model: keras.Model
    batching: Batching
    optimizer: keras.optimizers.Optimizer
    train_data: object  # what `train_input` returned
    learning_rate: float  # the schedule's target (build.learning_rate_for the step's batch)
    eval_data: object = None  # batched (x, y) for the chief's evaluation, else None
    stages: list = None  # pipeline stages (models/stages.py), None unless pipelined
    stage_devices: list = None


def build(cfg, info, strategy, coordinator=None, is_chief=True, start_step=0):
    """The task's model, stages, optimizer and input (from `start_step` finished steps on), in
    the strategy's scope (the model from --seed). UserCodeError (one line) for user code that
    cannot be used."""
    model = build_model(cfg, info, strategy)
    batches = batching(cfg, strategy.num_replicas_in_sync)
    stages = devices = None
    warmup_steps = int(round(cfg.warmup_epochs * batches.steps_per_epoch))
    rate = learning_rate_for(cfg, batches.global_batch)
    with strategy.scope(), floatx(cfg.float_dtype):
        if kind(cfg.strategy).pipelined:
            stages, devices = split_stages(cfg, info, strategy, model, batches.per_replica_batch)
        if not cfg.zero:
            optimizer = make_optimizer(cfg.optimizer, WarmupScaledLR(rate, warmup_steps))
            # Create slot variables now, in scope: lazily created Adam slots break under
            # MirroredStrategy with 2 replicas ("You must feed a value for placeholder ...").
            optimizer.build(model.trainable_variables)
    if cfg.zero:  # outside the scope: this worker's own state, built on its shard (zero.py)
        optimizer = make_optimizer(cfg.optimizer, WarmupScaledLR(rate, warmup_steps))
    check_input(cfg, info, model, is_chief)
    return Workload(model, batches, optimizer, train_input(cfg, info, strategy, batches,
                                                           coordinator, start_step), rate,
                    inputs.eval_dataset(info, cfg.eval_examples, 512, cfg.seed,
                                        cfg.data_dir or None) if is_chief else None,
                    stages, devices)

"""The engine floor: the toolkit's model, data, optimizer and batch trained by the plainest TF loop
(default strategy, plain tf.data iterator, no strategy.run, no accumulators), in one process.

    python -m experiments.comparison.floor --model=cnn --epochs=4 --train_examples=16384 --threads=1
    python -m experiments.comparison.floor --model=cnn --threads=0 --run_name=engine_floor_all/x  # all cores

Takes the flags of `experiments.run` (a one_device run's) and writes an ordinary record with
strategy `engine_floor`, so `experiments.compare` puts it beside the baseline and the report
states the toolkit's overhead against it: what TensorFlow itself does with this step on this
machine, measured in the same comparison (docs/strategies.md, "Engine overhead").
"""
import dataclasses
import sys
import time

from experiments.engine import tf_settings  # noqa: E402

tf_settings.apply()  # the same TensorFlow settings as the toolkit's runs: only the loop differs

from absl import app, flags  # noqa: E402

from experiments.config import ConfigError, LaunchConfig, RunConfig, validate  # noqa: E402
from experiments.config import flags as config_flags  # noqa: E402
from experiments.config.cli import bad_input, parse_flags  # noqa: E402
from results.records.cells import ENGINE_FLOOR  # noqa: E402  (the strategy name its records carry)
from strategies import BASELINE  # noqa: E402

# experiments.run's flags (a one_device run's are the ones that apply), declared once in
# experiments/config/run_config.py; plain_loop_config refuses what a plain loop cannot do.
config_flags.define(RunConfig)
config_flags.define(LaunchConfig)
flags.adopt_module_key_flags(config_flags)


class PlainLoop:
    """The loop of a TensorFlow tutorial, timed per epoch like the toolkit's Trainer; it has the
    attributes `experiments.engine.record.build_record` reads to write a record."""

    def __init__(self, cfg):
        import keras
        import tensorflow as tf

        from experiments.measure import cpu_usage
        from experiments.workload import inputs
        from experiments.workload.inputs import dataset_info
        from experiments.engine.build import learning_rate_for, make_optimizer
        from experiments.engine.training import make_evaluate
        from experiments.workload.user_model import build

        self.cfg, self.tf = cfg, tf
        info = dataset_info(cfg.dataset)  # built-in, or your own (checked like experiments.run)
        self.global_batch = self.per_replica_batch = cfg.resolved_global_batch()
        self.steps_per_epoch = cfg.train_examples // self.global_batch
        self.examples_per_epoch = self.steps_per_epoch * self.global_batch
        self.learning_rate = learning_rate_for(cfg, self.global_batch)
        self.steps_by_worker, self.first_step_done_at = {}, None
        self.cpu = cpu_usage.CpuMeter(in_cluster=False)
        keras.utils.set_random_seed(cfg.seed)
        self.model = build(cfg.model, info.feature_shape, info.num_classes,
                           batchnorm=cfg.batchnorm, weights=cfg.model_weights)
        self.optimizer = make_optimizer(cfg.optimizer, self.learning_rate)
        self.optimizer.build(self.model.trainable_variables)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self._iterator = iter(inputs.train_dataset(info, cfg.train_examples, self.global_batch,
                                                     cfg.seed, cfg.data_dir or None,
                                                     shuffle_seed=cfg.seed))
        self._eval = inputs.eval_dataset(info, cfg.eval_examples, 512, cfg.seed,
                                           cfg.data_dir or None)

        @tf.function
        def train(iterator, n):
            loss_sum, correct = tf.constant(0.0), tf.constant(0.0)
            for _ in tf.range(n):
                images, labels = next(iterator)
                with tf.GradientTape() as tape:
                    logits = self.model(images, training=True)
                    loss = loss_fn(labels, logits)
                grads = tape.gradient(loss, self.model.trainable_variables)
                self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
                loss_sum += loss * tf.cast(tf.shape(labels)[0], tf.float32)
                correct += tf.reduce_sum(tf.cast(tf.argmax(logits, -1, output_type=tf.int32)
                                                 == labels, tf.float32))
            return loss_sum, correct

        self._train, self._evaluate = train, make_evaluate(self.model)

    def run_steps(self, n):
        """`n` training steps in one call; returns (loss sum, correct) as tensors (reading one
        waits for the steps)."""
        return self._train(self._iterator, self.tf.constant(n))

    def evaluate(self):
        """(eval loss, eval accuracy) of the model as it is."""
        return self._evaluate(self._eval)

    def train_epoch(self, epoch):
        from experiments.engine.training import EpochStats

        cpu_start = self.cpu.seconds()
        start = time.perf_counter()
        sums, step = [], 0
        while step < self.steps_per_epoch:
            k = min(self.cfg.steps_per_execution, self.steps_per_epoch - step)
            sums.append(self.run_steps(k))
            step += k
            if self.first_step_done_at is None:
                float(sums[0][0])
                self.first_step_done_at = time.time()
        loss_sum = sum(float(s[0]) for s in sums)  # reading waits for the last step
        elapsed = time.perf_counter() - start
        cpu_s = self.cpu.seconds() - cpu_start
        correct = sum(float(s[1]) for s in sums)
        eval_start = time.perf_counter()
        eval_loss, eval_accuracy = self.evaluate()
        seen = self.examples_per_epoch
        stats = EpochStats(epoch=epoch, time_s=elapsed, examples_per_sec=seen / elapsed,
                           train_loss=loss_sum / seen, train_accuracy=correct / seen,
                           eval_loss=eval_loss, eval_accuracy=eval_accuracy,
                           eval_time_s=time.perf_counter() - eval_start,
                           learning_rate=self.learning_rate, steps=self.steps_per_epoch,
                           cpu_s=cpu_s)
        print(f"Epoch {epoch}/{self.cfg.epochs}: {elapsed:.3f} s, {stats.examples_per_sec:.0f} "
              f"examples/s, loss {stats.train_loss:.4f}, eval accuracy {stats.eval_accuracy:.4f}",
              flush=True)
        return stats


def plain_loop_config(argv, what, fixed_threads=False):
    """The run flags as a checked one_device Config for plain loops (bad input: one line, exit
    2), this process pinned as --pin_cores asks. `what` names the loops in the error;
    fixed_threads: --threads=0 (all cores) is refused, each loop needing a fixed share."""
    if len(argv) > 1:
        bad_input(f"unexpected arguments {argv[1:]}; all options are --flags")
    cfg = config_flags.sizes_from_data(config_flags.read(RunConfig))
    tf_settings.show_startup_messages(config_flags.read(LaunchConfig).verbose)
    try:
        if cfg.strategy != BASELINE:
            raise ConfigError(f"--strategy={cfg.strategy}: {what}; use --strategy={BASELINE} "
                              f"(the default)")
        if fixed_threads and cfg.threads == 0:
            raise ConfigError("--threads=0: each loop needs a fixed share of the cores; use "
                              "--threads=1 (one core per loop)")
        validate(cfg)
    except ConfigError as e:
        bad_input(e)
    tf_settings.pin_cores(cfg.pin_cores)  # before TensorFlow is imported, as experiments.run does
    return cfg


def main(argv):
    cfg = plain_loop_config(argv, "the engine floor is one process, one device")
    from experiments.engine import record as run_record, task
    from experiments.engine.training import weights_checksum

    from experiments.workload.user_code import UserCodeError

    task.set_threads(cfg.threads)
    try:
        loop = PlainLoop(cfg)
    except UserCodeError as e:  # your model or data, found bad once TensorFlow runs it
        bad_input(e)
    epochs = [{**dataclasses.asdict(loop.train_epoch(e)), "includes_tracing": e == 1}
              for e in range(1, cfg.epochs + 1)]
    run_id = run_record.new_run_id(dataclasses.replace(cfg, strategy=ENGINE_FLOOR))
    record = run_record.build_record(cfg, None, loop, loop.tf.distribute.get_strategy(), run_id,
                               epochs, weights_checksum(loop.model), {})
    record["strategy"] = ENGINE_FLOOR
    run_record.write(cfg, record)
    sys.exit(0)


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)

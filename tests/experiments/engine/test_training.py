"""The training loop in-process, on one device with a tiny MLP: input path, PSS worker data, the
learning rate under weak and strong scaling, what an epoch's time contains, checkpoint windows."""
import dataclasses
import json
import time

import numpy as np
import pytest
import tensorflow as tf

from experiments.engine.checkpoints import Checkpoints
from experiments.config import RunConfig
from experiments.workload.datasets import get_info
from experiments.engine import build
from experiments.engine.build import learning_rate_for
from experiments.engine.training import Trainer
from tests.helpers import TOLERANCE_FLOAT64

CFG = RunConfig(model="mlp", epochs=2, train_examples=256, eval_examples=64,
                batch_size_per_replica=32, results_dir="/tmp/unused", comm_probe=False)


def _trainer(cfg=CFG, strategy=None):
    strategy = strategy or tf.distribute.OneDeviceStrategy("/cpu:0")
    info = get_info(cfg.dataset)
    return Trainer(cfg, info, strategy, build.build(cfg, info, strategy))


def test_single_replica_strategies_feed_the_plain_iterator():
    # Iterating a strategy's distributed dataset ran the same step at half speed on some CPUs;
    # with one local replica the engine must not take that path.
    for strategy in (tf.distribute.OneDeviceStrategy("/cpu:0"),
                     tf.distribute.MultiWorkerMirroredStrategy()):
        trainer = _trainer(strategy=strategy)
        assert isinstance(trainer._iterator, tf.data.Iterator)
        assert not isinstance(trainer._iterator, tf.distribute.DistributedIterator)
    stats = trainer.train_epoch(1)
    assert stats.steps == 8 and stats.train_loss > 0


def _examples(dataset, batches):
    it = iter(dataset)
    return [tuple(np.round(x.numpy().ravel()[:4], 5)) for _ in range(batches)
            for x in next(it)[0]]


def test_pss_workers_read_disjoint_shards_that_cover_the_split():
    # create_per_worker_dataset traces the dataset function once and runs that graph on every
    # worker: the worker index is a tensor inside it. Trace it the same way here.
    cfg = dataclasses.replace(CFG, strategy="parameter_server", num_workers=2, num_ps=1)
    info = get_info(cfg.dataset)
    batches = build.batching(cfg, 1)
    traced = tf.function(lambda i: build.pss_dataset(cfg, info, batches, i))
    per_batch, steps = cfg.batch_size_per_replica, cfg.train_examples // cfg.batch_size_per_replica
    shard = [set(_examples(traced(tf.constant(i)), steps // 2)) for i in (0, 1)]
    assert len(shard[0]) == len(shard[1]) == cfg.train_examples // 2
    assert not shard[0] & shard[1]  # no example trained twice per epoch
    whole = set(_examples(build.worker_dataset(cfg, info, batches, 1, 0), steps))
    assert shard[0] | shard[1] == whole and len(whole) == cfg.train_examples
    first = [_examples(traced(tf.constant(i)), 1) for i in (0, 1)]
    assert first[0] != first[1] and len(first[0]) == per_batch


@pytest.mark.parametrize("scaling", ["linear", "sqrt"])
def test_learning_rate_scales_with_the_global_batch_not_the_replicas(scaling):
    base = RunConfig(learning_rate=0.1, lr_scaling=scaling, batch_size_per_replica=64)
    factor = {"linear": 4.0, "sqrt": 2.0}[scaling]
    # Weak scaling: 4 replicas x 64 = 256 examples per step, 4x the baseline's batch.
    assert learning_rate_for(base, 256) == pytest.approx(0.1 * factor)
    assert learning_rate_for(base, 64) == pytest.approx(0.1)
    # Strong scaling: the global batch of 256 is the baseline's too: no change at any N.
    fixed = dataclasses.replace(base, global_batch_size=256, strategy="multi_worker_mirrored",
                                num_workers=4)
    assert learning_rate_for(fixed, 256) == pytest.approx(0.1)


class _SlowClock:
    """The `time` module as a module of the engine sees it, whose perf_counter runs `skipped`
    seconds ahead: a fake slow call adds to it instead of sleeping, so a bound that separates
    it from the steps' real milliseconds holds however busy the machine is."""

    def __init__(self):
        self.skipped = 0.0

    def perf_counter(self):
        return time.perf_counter() + self.skipped

    def __getattr__(self, name):
        return getattr(time, name)


_SLOW_S = 1000.0  # what each fake slow call costs on the engine's clock


def test_step_checkpoints_are_not_in_the_epoch_time(tmp_path, monkeypatch):
    from experiments.engine import checkpoints as checkpoints_module
    from experiments.engine import training

    clock = _SlowClock()
    for module in (training, checkpoints_module):
        monkeypatch.setattr(module, "time", clock)
    cfg = dataclasses.replace(CFG, checkpoint_dir=str(tmp_path), checkpoint_every_steps=2)
    trainer = _trainer(cfg)
    checkpoints = Checkpoints(str(tmp_path), trainer, True, "single", every_steps=2)
    real_save = checkpoints.manager.save

    def slow_save(*args, **kwargs):  # a slow file system
        clock.skipped += _SLOW_S
        return real_save(*args, **kwargs)

    monkeypatch.setattr(checkpoints.manager, "save", slow_save)
    trainer.train_epoch(1, checkpoints=checkpoints)  # traces
    stats = trainer.train_epoch(2, checkpoints=checkpoints)
    # 8 steps, a step checkpoint after steps 2, 4, 6 (not 8: the epoch's own save follows eval).
    assert 3 * _SLOW_S <= stats.hooks_time_s < 4 * _SLOW_S
    assert 0 < stats.time_s < _SLOW_S, stats  # the steps alone: none of the saves


def test_reading_the_epochs_sums_is_not_in_the_epoch_time(monkeypatch):
    # Under MWMS reading a sum is a cross-worker all-reduce per sum: bookkeeping after the
    # steps, which the epoch's time once included.
    from experiments.engine import training

    clock = _SlowClock()
    monkeypatch.setattr(training, "time", clock)
    trainer = _trainer()
    real_read = trainer._read_totals

    def slow_read():  # a slow all-reduce
        clock.skipped += _SLOW_S
        return real_read()

    monkeypatch.setattr(trainer, "_read_totals", slow_read)
    trainer.train_epoch(1)  # traces
    stats = trainer.train_epoch(2)
    assert 0 < stats.time_s < _SLOW_S, stats  # the steps alone: not the read
    assert stats.train_accuracy > 0 and stats.examples_per_sec == pytest.approx(256 / stats.time_s)


def test_kill_during_evaluation_after_a_step_checkpoint_resumes(tmp_path):
    # every_steps divides the epoch: a step checkpoint would fall on the epoch's last step, just
    # before the chief evaluates. A kill during that evaluation must leave a resumable directory.
    cfg = dataclasses.replace(CFG, checkpoint_dir=str(tmp_path), checkpoint_every_steps=4)
    trainer = _trainer(cfg)
    checkpoints = Checkpoints(str(tmp_path), trainer, True, "single", every_steps=4)
    epochs = [dataclasses.asdict(trainer.train_epoch(1, checkpoints=checkpoints))]
    checkpoints.save(epochs)
    trainer.train_epoch(2, checkpoints=checkpoints)  # ... killed here, before save(epochs)
    again = Checkpoints(str(tmp_path), _trainer(cfg), True, "single", every_steps=4)
    stats, steps = again.restore()
    with open(tmp_path / "epochs.json") as f:
        assert [e["epoch"] for e in json.load(f)] == [e["epoch"] for e in stats] == [1]
    assert steps in (8, 12)  # the end of epoch 1, or epoch 2's step checkpoint at step 4


def test_central_storage_feeds_its_distributed_dataset_even_with_one_replica():
    # Its variables live on the parameter device, apart from its replicas: it is fed like
    # mirrored with several replicas (the distributed dataset), never the plain iterator.
    cfg = dataclasses.replace(CFG, strategy="central_storage")
    trainer = _trainer(cfg, tf.distribute.experimental.CentralStorageStrategy(["/cpu:0"]))
    assert isinstance(trainer._iterator, tf.distribute.DistributedIterator)
    first, second = trainer.train_epoch(1), trainer.train_epoch(2)
    assert first.steps == second.steps == 8 and second.train_loss < first.train_loss


def _sgd_weights(**kw):
    # float64: the comparison's tolerance holds on any CPU (tests/helpers.py)
    cfg = dataclasses.replace(CFG, optimizer="sgd", learning_rate=0.1, float_dtype="float64",
                              **kw)
    trainer = _trainer(cfg)
    for epoch in (1, 2):
        stats = trainer.train_epoch(epoch)
    return [v.numpy() for v in trainer.model.weights], trainer, stats


def test_two_micro_batches_of_16_give_the_weights_of_one_batch_of_32():
    """Plain SGD in float64: accumulating K=2 micro-batches of 16 is one update on the 32
    examples that one batch of 32 trains on (same data, same order), up to rounding; K=1 at 16
    is not."""
    accumulated, trainer, stats = _sgd_weights(batch_size_per_replica=16, accumulation_steps=2)
    large, _, large_stats = _sgd_weights(batch_size_per_replica=32)
    small, _, _ = _sgd_weights(batch_size_per_replica=16)
    assert trainer.global_batch == 32 and trainer.per_replica_batch == 16
    assert trainer.steps_per_epoch == stats.steps == large_stats.steps == 256 // 32
    assert stats.train_loss == pytest.approx(large_stats.train_loss, rel=1e-5)
    assert all(a.dtype == np.float64 for a in accumulated)
    for a, b in zip(accumulated, large):
        np.testing.assert_allclose(a, b, rtol=0, atol=TOLERANCE_FLOAT64)
    # Twice the updates of half the batch: measurably elsewhere (the test can fail).
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(small, large)) > 1e-3


def test_accumulation_scales_the_step_batch_and_the_learning_rate_with_it():
    cfg = dataclasses.replace(CFG, accumulation_steps=4, lr_scaling="linear", learning_rate=0.01)
    assert cfg.step_batch() == 128 and cfg.steps_per_epoch() == 2
    assert learning_rate_for(cfg, cfg.step_batch()) == pytest.approx(0.04)


class _FakeMeter:
    """This process's CPU seconds, plus what the test adds (a save that burns 10 s of CPU)."""
    scope = "all tasks"

    def __init__(self):
        self.extra = 0.0

    def reading(self):
        return {1: ("process", time.process_time() + self.extra)}


def test_cpu_seconds_leave_out_checkpoint_saves_as_wall_time_does(tmp_path, monkeypatch):
    """A step checkpoint's CPU is not training's: cores_used must not grow with
    --checkpoint_every_steps. Each save here burns a fake 10 CPU-seconds."""
    cfg = dataclasses.replace(CFG, checkpoint_dir=str(tmp_path), checkpoint_every_steps=2)
    trainer = _trainer(cfg)
    meter = trainer.cpu = _FakeMeter()
    save = Checkpoints._save_now

    def costly_save(self):
        meter.extra += 10.0
        return save(self)
    monkeypatch.setattr(Checkpoints, "_save_now", costly_save)
    checkpoints = Checkpoints(str(tmp_path), trainer, True, "single", every_steps=2)
    stats = trainer.train_epoch(1, checkpoints=checkpoints)
    assert meter.extra == 30.0  # saves after steps 2, 4 and 6 (step 8 ends the epoch)
    assert stats.hooks_time_s > 0 and 0 < stats.cpu_s < 10.0
    assert stats.cpu_by_task_s["process"] == pytest.approx(stats.cpu_s)


def test_gpu_peak_is_the_training_steps_not_building_evaluation_or_the_probe(monkeypatch):
    """A fake GPU: building the model left a peak of 999 bytes, the steps reach 100, evaluation
    5000. The record's GPU peak is 100: reset before each epoch's steps, read before evaluating."""
    from experiments.engine.record import _peak_memory

    trainer = _trainer()
    state = {"peak": 999, "resets": 0}
    devices = tf.config.list_physical_devices
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: ["fake"] if kind == "GPU" else devices(kind))
    monkeypatch.setattr(tf.config.experimental, "get_memory_info",
                        lambda device: {"peak": state["peak"], "current": 0})
    monkeypatch.setattr(tf.config.experimental, "reset_memory_stats",
                        lambda device: state.update(peak=0, resets=state["resets"] + 1))
    steps, evaluate = trainer._train_steps, trainer._evaluate

    def training(*args):
        state["peak"] = max(state["peak"], 100)
        return steps(*args)

    def evaluation(*args):
        state["peak"] = 5000
        return evaluate(*args)
    trainer._train_steps, trainer._evaluate = training, evaluation
    trainer.train_epoch(1)
    trainer.train_epoch(2)
    assert state["resets"] == 2 and trainer.allocator_peaks == {"gpu:0": 100}
    assert _peak_memory(trainer)["gpu:0"] == 100

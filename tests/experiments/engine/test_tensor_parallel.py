"""--tensor_parallel (models/tensor_parallel.py): a transformer whose blocks are split over T
devices trains the weights one device trains, with each shard's variables on its own device. In
a subprocess: the CPU is split into logical devices only before the runtime starts, which this
pytest process has done."""
import pytest

from tests.helpers import (TOLERANCE_FLOAT32_ONE_STEP, TOLERANCE_FLOAT64, max_diff, run_script,
                           update_error)

# Trains a model on one device and split, from the same seed on the same data with plain SGD,
# and prints the initial and final weights (the split model's gathered into the unsplit
# layout) and where each shard's variables live. Each configuration traces its own step: the
# runs are as few as the assertions allow, each serving several of them:
# - the GPT in float64, 4 steps: one device; 2 stages of 2 shards, 2 micro-batches (both axes
#   on 4 devices: a split inside each stage of a pipeline); and the control that the comparison
#   can fail, one device at half the batch (twice the updates);
# - the ViT in float32 (what users run), one step: one device; split in 2 alone (no pipeline
#   around it: its shards placed by the split alone).
# The ViT and the GPT share the blocks that are split (models/transformer.py; the GPT's
# attention is causal, the ViT's not): every split layer is checked over several steps in one
# and in float32 in the other. Data x tensor parallel is tests/integration/test_clusters.py's.
# The trainers are workers' (is_chief=False): they do not evaluate, which is not compared here.
_SCRIPT = r"""
import dataclasses, json
import tensorflow as tf
from experiments.config import RunConfig
from experiments.workload.datasets import get_info
from experiments.engine.build import build
from experiments.engine.training import Trainer
from models import registry, tensor_parallel
from strategies.factory import get_strategy

split_strategy = get_strategy("model_parallel", model_devices=4)  # splits the CPU: first
one_device = tf.distribute.OneDeviceStrategy("/cpu:0")
out = {}
runs = [("gpt", "float64", 128, "one_device", {}),
        ("gpt", "float64", 128, "s2t2", dict(strategy="model_parallel", num_stages=2,
                                             tensor_parallel=2, microbatches=2)),
        ("gpt", "float64", 128, "small_batch", dict(batch_size_per_replica=16)),
        ("vit", "float32", 32, "one_device", {}),
        ("vit", "float32", 32, "t2", dict(strategy="model_parallel", tensor_parallel=2))]
for model, dtype, examples, name, changes in runs:
    dataset = "synthetic_sequences" if model == "gpt" else "synthetic"
    base = RunConfig(model=model, dataset=dataset, eval_examples=32, optimizer="sgd",
                     learning_rate=0.1, batch_size_per_replica=32, results_dir="/tmp/unused",
                     comm_probe=False, compute_probe=False, float_dtype=dtype, epochs=1,
                     train_examples=examples)
    c = dataclasses.replace(base, **changes)
    strategy = one_device if c.strategy == "one_device" else split_strategy
    info = get_info(c.dataset)
    trainer = Trainer(c, info, strategy, build(c, info, strategy, is_chief=False),
                      is_chief=False)
    plain = registry.build(model, info.feature_shape, info.num_classes)  # the layout
    def weights():
        if c.tensor_parallel == 1:
            return [v.numpy().tolist() for v in trainer.model.weights]
        return [w.tolist() for w in tensor_parallel.full_weights(trainer.model, plain)]
    initial = weights()
    stats = trainer.train_epoch(1)
    run = {"initial": initial, "weights": weights(), "loss": stats.train_loss,
           "steps": stats.steps}
    if c.tensor_parallel > 1:
        run["shards"] = [[[v.value.device for v in shard] for shard in layer.shard_variables()]
                         for layer in tensor_parallel.split_layers(trainer.model)]
        # where the backward's matrix products are placed, traced as a step traces them
        m = trainer.model

        @tf.function
        def backward(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(m(x, training=True))
            return tape.gradient(loss, m.trainable_variables)
        graph = backward.get_concrete_function(tf.TensorSpec(
            [2, *info.feature_shape], m.inputs[0].dtype)).graph
        run["backward_devices"] = sorted({
            op.device.rsplit("device:", 1)[-1] for op in graph.get_operations()
            if "gradient" in op.name and op.type in ("MatMul", "BatchMatMulV2", "Einsum")})
    out[f"{model}/{dtype}/{name}"] = run
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def trained():
    return run_script(_SCRIPT)


def test_split_blocks_reach_the_weights_of_one_device(trained):
    """Same seed, data and order, plain SGD: the GPT's blocks split over 2 devices in each of 2
    stages compute one device's updates within TOLERANCE_FLOAT64 over 4 steps in float64; at
    half the batch (twice the updates) one device is far from them (the test can fail)."""
    one, split = trained["gpt/float64/one_device"], trained["gpt/float64/s2t2"]
    assert max_diff(trained["gpt/float64/small_batch"]["weights"], one["weights"]) > 1e-3
    assert split["steps"] == one["steps"] == 4
    assert max_diff(split["initial"], one["initial"]) == 0.0  # the same start
    assert max_diff(split["weights"], one["weights"]) < TOLERANCE_FLOAT64
    assert split["loss"] == pytest.approx(one["loss"], rel=1e-5)


def test_a_split_step_in_float32_is_one_devices_step(trained):
    """The ViT split in 2, one step in float32: one device's update within
    TOLERANCE_FLOAT32_ONE_STEP (a split that lost or doubled a shard's part would be off by
    about the whole update)."""
    one, split = trained["vit/float32/one_device"], trained["vit/float32/t2"]
    assert split["steps"] == one["steps"] == 1
    assert max_diff(split["initial"], one["initial"]) == 0.0
    assert update_error(split, one) < TOLERANCE_FLOAT32_ONE_STEP


def test_each_shard_lives_on_its_stages_own_device(trained):
    """T=2 alone: shard t on CPU:t, its forward and its backward (a gradient op is placed by
    the device scope in force when the gradient is taken, not with its forward op: without
    on_device's scope the split layers' backward products would have none). 2 stages x 2 shards: the
    first stage's blocks on CPU:0-1, the second's on CPU:2-3."""
    # (the unsplit layers' products are placed by the pipeline's stage scope, not traced here)
    assert {"CPU:0", "CPU:1"} <= set(trained["vit/float32/t2"]["backward_devices"])
    assert {"CPU:0", "CPU:1", "CPU:2", "CPU:3"} <= set(
        trained["gpt/float64/s2t2"]["backward_devices"])
    for layer in trained["vit/float32/t2"]["shards"]:
        for t, devices in enumerate(layer):
            assert devices and all(d.endswith(f"CPU:{t}") for d in devices), layer
    stages = set()
    for layer in trained["gpt/float64/s2t2"]["shards"]:
        first = int(layer[0][0].rsplit(":", 1)[1])
        assert first in (0, 2)
        stages.add(first)
        for t, devices in enumerate(layer):
            assert all(d.endswith(f"CPU:{first + t}") for d in devices), layer
    assert stages == {0, 2}

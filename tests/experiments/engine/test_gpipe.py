"""--strategy=model_parallel: the GPipe step (experiments/engine/gpipe.py) trains the weights one device
trains, places each stage on its device, and measures its bubble. In a subprocess: the CPU is
split into logical devices only before the runtime starts, which this pytest process has done."""
import numpy as np
import pytest

from experiments.engine.gpipe import bubble_formula
from models.schedules import BACKWARD, FORWARD, in_flight, schedule
from tests.helpers import (NO_PROBES, TINY, TOLERANCE_FLOAT32_ONE_STEP, TOLERANCE_FLOAT64,
                           max_diff, records_in, run_module, run_script, update_error)

# Trains the CNN on one device and as 2 stages x 4 micro-batches, from the same seed on the same
# data with plain SGD: 4 steps in float64 under the GPipe and the 1F1B schedules, one step in
# float32 (what users run) under GPipe; prints the initial and final weights, the loss and the
# pipeline's measurements. Each configuration traces its own step, so they are as few as the
# assertions allow: one micro-batch (M = 1) runs the same blocks as M = 4 (gpipe.Pipeline has no
# path of its own for it), and the schedules differ only in the order of those blocks, which
# float64 checks. The trainers are workers' (is_chief=False): they do not evaluate, which is not
# compared here.
_SCRIPT = r"""
import dataclasses, json
import tensorflow as tf
from experiments.config import RunConfig
from experiments.workload.datasets import get_info
from experiments.engine.build import build
from experiments.engine.training import Trainer
from strategies.factory import get_strategy

base = RunConfig(model="cnn", eval_examples=32, optimizer="sgd", learning_rate=0.1,
                 batch_size_per_replica=32, results_dir="/tmp/unused", comm_probe=False,
                 epochs=1)
pipeline = get_strategy("model_parallel", model_devices=2)  # splits the CPU: first
one_device = tf.distribute.OneDeviceStrategy("/cpu:0")
out = {}
for dtype, examples in (("float64", 128), ("float32", 32)):
    cfg = dataclasses.replace(base, float_dtype=dtype, train_examples=examples)
    m4 = dataclasses.replace(cfg, strategy="model_parallel", num_stages=2, microbatches=4)
    runs = [("one_device", cfg), ("m4", m4)]
    if dtype == "float64":
        runs += [("1f1b", dataclasses.replace(m4, pipeline_schedule="1f1b")),
                 # the control: twice the updates of half the batch
                 ("small_batch", dataclasses.replace(cfg, batch_size_per_replica=16))]
    for name, c in runs:
        strategy = one_device if c.strategy == "one_device" else pipeline
        info = get_info(c.dataset)
        trainer = Trainer(c, info, strategy, build(c, info, strategy, is_chief=False),
                          is_chief=False)
        initial = [v.numpy().tolist() for v in trainer.model.weights]
        stats = trainer.train_epoch(1)
        out[f"{dtype}/{name}"] = {
            "initial": initial, "weights": [v.numpy().tolist() for v in trainer.model.weights],
            "dtypes": sorted({v.dtype for v in trainer.model.weights}),
            "loss": stats.train_loss, "steps": stats.steps,
            "idle": stats.pipeline_idle_share, "busy": stats.stage_busy_share}
        if trainer.stages:
            out[f"{dtype}/{name}"]["devices"] = [[v.value.device for v in st.model.weights]
                                                 for st in trainer.stages]
print("RESULT " + json.dumps(out))
"""


def _train():
    return run_script(_SCRIPT, timeout=300)


def test_two_stages_reach_the_weights_of_one_device():
    """Same seed, data and order, plain SGD: 2 stages x M = 4 micro-batches, under the GPipe and
    the 1F1B schedules, compute one device's updates: in float64 over 4 steps, in float32
    (GPipe) over one; half the batch (twice the updates) does not (the test can fail). Holds
    with oneDNN on and off (docs/parallelism.md)."""
    out = _train()
    one = out["float64/one_device"]
    assert one["dtypes"] == ["float64"] and out["float32/one_device"]["dtypes"] == ["float32"]
    assert max_diff(out["float64/small_batch"]["weights"], one["weights"]) > 1e-3
    assert update_error(out["float64/small_batch"], one) > 0.5
    assert one["idle"] is None
    for dtype, steps, pipelines in (("float64", 128 // 32, ("m4", "1f1b")),
                                    ("float32", 1, ("m4",))):
        one = out[f"{dtype}/one_device"]
        for m in pipelines:
            staged = out[f"{dtype}/{m}"]
            assert staged["steps"] == one["steps"] == steps
            # The reported loss sums float32 accumulators: a few float32 eps apart at most.
            assert staged["loss"] == pytest.approx(one["loss"], rel=1e-5)
            if dtype == "float64":
                assert max_diff(staged["weights"], one["weights"]) < TOLERANCE_FLOAT64
            else:
                assert update_error(staged, one) < TOLERANCE_FLOAT32_ONE_STEP
            # Each stage's variables live on its own device.
            for i, devices in enumerate(staged["devices"]):
                assert devices and all(d.endswith(f"CPU:{i}") for d in devices), devices
            # The bubble was measured: an idle share in [0, 1), both stages busy some time.
            assert 0.0 <= staged["idle"] < 1.0 and all(0.0 < b <= 1.0 for b in staged["busy"])


def test_schedules_run_every_block_once_in_dependency_order():
    """GPipe holds all M micro-batches on every stage; 1F1B holds S - s on stage s (at most M),
    and each stage's backwards run in micro-batch order."""
    for S, M in ((2, 8), (4, 8), (4, 2), (3, 1)):
        gpipe, f1b = schedule("gpipe", S, M), schedule("1f1b", S, M)
        for orders in (gpipe, f1b):
            for order in orders:
                assert sorted(order) == sorted([(FORWARD, m) for m in range(M)] +
                                               [(BACKWARD, m) for m in range(M)])
                # a micro-batch's backward comes after its forward on the same stage
                assert all(order.index((FORWARD, m)) < order.index((BACKWARD, m))
                           for m in range(M))
        assert [in_flight(o) for o in gpipe] == [M] * S
        assert [in_flight(o) for o in f1b] == [min(S - s, M) for s in range(S)]
    assert schedule("1f1b", 2, 4)[0] == [(FORWARD, 0), (FORWARD, 1), (BACKWARD, 0),
                                         (FORWARD, 2), (BACKWARD, 1), (FORWARD, 3),
                                         (BACKWARD, 2), (BACKWARD, 3)]
    with pytest.raises(ValueError, match="unknown pipeline schedule 'zigzag'; valid: gpipe, "
                                         "1f1b"):
        schedule("zigzag", 2, 2)


# models/vit.py's ViT with 2 of its 4 blocks, one a stage. What 1F1B saves shows where
# activations outweigh weights and optimizer state, as a transformer's do; the step traces each
# stage's 8 forward and 8 backward blocks one by one, at a cost that grows with the layers a
# stage holds (hence 2 blocks, not the zoo ViT's 4).
_TWO_BLOCK_VIT = """
import keras

from models.transformer import PositionEmbedding, block, size_of


def build_model(input_shape, num_classes):
    width, _, heads, mlp = size_of("vit")
    inputs = keras.Input(shape=tuple(input_shape))
    x = keras.layers.Conv2D(width, 4, strides=4, name="patches")(inputs)
    x = keras.layers.Reshape((-1, width), name="tokens")(x)
    x = PositionEmbedding(name="positions")(x)
    for i in range(2):
        x = block(x, heads, mlp, name=f"block{i}")
    x = keras.layers.LayerNormalization(epsilon=1e-6, name="norm")(x)
    x = keras.layers.GlobalAveragePooling1D(name="pool")(x)
    return keras.Model(inputs, keras.layers.Dense(num_classes, name="head")(x))
"""


def test_1f1b_holds_fewer_activations_than_gpipe_at_8_microbatches(tmp_path):
    """A ViT of 2 blocks, 2 stages x M = 8 micro-batches of 16: GPipe holds 8 micro-batches'
    activations on each stage, 1F1B 2 and 1 (16 against 3 in all). The process's TF allocator
    peak over the training steps (measured: the stages share one CPU allocator) must fall by
    more than half (weights and optimizer state are the rest). Two steps: the peak is a
    step's."""
    (tmp_path / "two_block_vit.py").write_text(_TWO_BLOCK_VIT)
    peaks = {}
    for name in ("gpipe", "1f1b"):
        proc = run_module("experiments.run", "--strategy=model_parallel", "--num_stages=2",
                          "--microbatches=8", f"--pipeline_schedule={name}",
                          "--model=two_block_vit:build_model", "--epochs=1",
                          "--train_examples=256", "--eval_examples=64",
                          "--batch_size_per_replica=128", *NO_PROBES,
                          f"--results_dir={tmp_path / name}", env={"PYTHONPATH": str(tmp_path)},
                          timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        (record,) = records_in(tmp_path / name)
        pipe = record["pipeline"]
        assert pipe["schedule"] == name
        assert [s["microbatches_held"] for s in pipe["stages"]] == \
            ([8, 8] if name == "gpipe" else [2, 1])
        if "cpu_allocator" not in record["peak_memory_bytes"]:
            pytest.skip("this TF's CPU allocator keeps no statistics (oneDNN off?)")
        peaks[name] = record["peak_memory_bytes"]["cpu_allocator"]
    assert peaks["1f1b"] < 0.5 * peaks["gpipe"], peaks


def test_bubble_formula():
    assert bubble_formula(2, 1) == pytest.approx(0.5)
    assert bubble_formula(2, 4) == pytest.approx(0.2)
    assert bubble_formula(4, 8) == pytest.approx(3 / 11)


# Runs that check what a pipeline records more than how well it trains: one epoch.
SMALL = ["--epochs=1", "--eval_examples=128", "--batch_size_per_replica=32"]


def test_model_parallel_run_records_stages_bubble_and_transfers(tmp_path):
    # with the communication probe (the transfers), without the compute probe (not checked)
    proc = run_module("experiments.run", "--strategy=model_parallel", "--num_stages=2",
                      "--microbatches=4", "--model=cnn", *SMALL, "--train_examples=256",
                      "--nocompute_probe", f"--results_dir={tmp_path}", timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (record,) = records_in(tmp_path)
    pipe = record["pipeline"]
    assert record["strategy"] == "model_parallel" and record["num_replicas_in_sync"] == 1
    assert pipe["num_stages"] == 2 and pipe["microbatches"] == 4 and pipe["micro_batch"] == 8
    assert pipe["bubble"]["formula"] == pytest.approx(0.2)
    assert 0.0 <= pipe["bubble"]["measured"] < 1.0
    first, second = pipe["stages"]
    # The split covers the model: every parameter in exactly one stage.
    assert first["parameters"] + second["parameters"] == sum(
        int(np.prod(s)) for s in _cnn_weight_shapes())
    # The CNN's first stage hands on a (batch, H, W, C) activation every micro-batch.
    assert first["activation_bytes_sent_per_step"]["forward"] > 0
    assert second["activation_bytes_sent_per_step"] is None
    assert pipe["activation_bytes_per_step"] == 2 * first["activation_bytes_sent_per_step"][
        "forward"]
    assert all(s["peak_memory_kind"].startswith("estimate") for s in pipe["stages"])
    comm = record["communication"]
    assert comm["activation_bytes"] == pipe["activation_bytes_per_step"]
    assert comm["activation_probe_s"]["n"] > 0 and comm["fraction"] is not None


def _cnn_weight_shapes():
    import keras

    from models.registry import build
    keras.utils.set_random_seed(0)
    return [tuple(w.shape) for w in build("cnn", (28, 28, 1), 10).weights]


_SUBCLASSED = """
import keras


class Net(keras.Model):
    def __init__(self, num_classes):
        super().__init__()
        self.flat = keras.layers.Flatten()
        self.out = keras.layers.Dense(num_classes)

    def call(self, x):
        return self.out(self.flat(x))


def build_model(input_shape, num_classes):
    return Net(num_classes)
"""


def test_a_subclassed_model_is_refused_with_one_line(tmp_path):
    (tmp_path / "subclassed_net.py").write_text(_SUBCLASSED)
    results = tmp_path / "results"
    proc = run_module("experiments.run", "--strategy=model_parallel", "--num_stages=2",
                      "--model=subclassed_net:build_model", *TINY[:-1],
                      f"--results_dir={results}", env={"PYTHONPATH": str(tmp_path)},
                      timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "subclassed" in proc.stderr and "Traceback" not in proc.stderr
    assert not records_in(results)


@pytest.mark.parametrize("args, stages", [
    # An embedding's gradient is IndexedSlices: summed over micro-batches by concatenation.
    (["--model=embedding", "--dataset=synthetic_tokens", "--num_stages=2"], 2),
    # 4 stages of the MLP: the first (Flatten) has no weights, its backward block nothing to do.
    (["--model=mlp", "--num_stages=4"], 4),
])
def test_pipelines_of_sparse_gradients_and_weightless_stages(tmp_path, args, stages):
    proc = run_module("experiments.run", "--strategy=model_parallel", "--microbatches=2", *args,
                      *SMALL, "--train_examples=512", *NO_PROBES,
                      f"--results_dir={tmp_path}", timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (record,) = records_in(tmp_path)
    pipe = record["pipeline"]
    assert len(pipe["stages"]) == stages and len(record["memory_per_device"]) == stages
    assert 0.0 <= pipe["bubble"]["measured"] < 1.0
    assert all(0.0 <= s["busy_share"] <= 1.0 for s in pipe["stages"])
    assert record["final_eval_accuracy"] > 0.15  # trained: 10 classes, chance 0.1

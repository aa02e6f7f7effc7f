"""Splitting a model into pipeline stages (models/stages.py): where it may be cut, how the split
is balanced, and that the stages chained compute the model."""
import keras
import numpy as np
import pytest

from models import stages
from models.registry import build


def _chain(parts, x):
    for part in parts:
        x = part.model(x, training=False)
    return np.asarray(x)


@pytest.mark.parametrize("name, shape", [("cnn", (28, 28, 1)), ("resnet", (32, 32, 3)),
                                         ("wide_mlp", (28, 28, 1))])
@pytest.mark.parametrize("num_stages", [2, 3])
def test_stages_chained_compute_the_model_and_share_its_weights(name, shape, num_stages):
    model = build(name, shape, 10)
    parts = stages.split(model, num_stages)
    assert len(parts) == num_stages
    x = np.random.default_rng(0).random((3, *shape), dtype=np.float32)
    # One forward pass of the same layers on the same batch: no training amplifies rounding,
    # and a reordered float32 sum of k terms (k <= a few thousand here) differs by
    # ~sqrt(k) x eps ~ 1e-5 x the sum of magnitudes at worst: holds on any CPU.
    np.testing.assert_allclose(_chain(parts, x), np.asarray(model(x, training=False)),
                               rtol=1e-5, atol=1e-5)
    # Every weight of the model in exactly one stage, the very same variables.
    ids = [id(w) for p in parts for w in p.model.weights]
    assert sorted(ids) == sorted(id(w) for w in model.weights)
    assert sum(p.parameters for p in parts) == model.count_params()


def test_resnet_is_cut_between_residual_blocks_never_inside_one():
    model = build("resnet", (32, 32, 3), 10)
    parts = stages.split(model, 3)
    for part in parts[:-1]:
        # A cut inside a block would leave the shortcut crossing it: every stage but the last
        # ends where the shortcut has been merged (the Add, or the activation after it).
        assert part.layers[-1].startswith(("add", "activation")), part.layers
    assert parts[-1].layers[-1].startswith("dense")


def test_params_split_balances_parameters():
    model = build("wide_mlp", (28, 28, 1), 10)
    parts = stages.split(model, 2, cost="params")
    costs = [p.cost for p in parts]
    assert costs == [float(p.parameters) for p in parts]
    # The best contiguous split of the segments: no other cut has a smaller largest stage.
    segments = [float(sum(int(np.prod(w.shape)) for w in stages._weights(nodes)))
                for nodes, _, _ in stages._segments(stages._functional(model))]
    best = min(max(sum(segments[:i]), sum(segments[i:])) for i in range(1, len(segments)))
    assert max(costs) == best


def test_partition_minimizes_the_largest_group():
    assert stages._partition([1, 1, 1, 1], 2) == [0, 2]
    assert stages._partition([5, 1, 1, 1, 1, 1], 2) == [0, 1]
    assert stages._partition([1, 2, 3, 4], 3) == [0, 2, 3]


def test_time_split_needs_a_sample_and_measures_seconds():
    model = build("mlp", (28, 28, 1), 10)
    with pytest.raises(stages.StageError, match="sample"):
        stages.split(model, 2, cost="time")
    parts = stages.split(model, 2, cost="time", sample=np.zeros((8, 28, 28, 1), np.float32))
    assert all(0 < p.cost < 10 for p in parts)


def test_sequential_models_split_and_subclassed_ones_are_refused():
    seq = keras.Sequential([keras.Input((6,)), keras.layers.Dense(4), keras.layers.Dense(3),
                            keras.layers.Dense(2)])
    parts = stages.split(seq, 3)
    assert [p.layers for p in parts] == [[seq.layers[0].name], [seq.layers[1].name],
                                         [seq.layers[2].name]]
    assert parts[0].output_shape == (4,) and parts[0].output_bytes_per_example == 16

    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(2)

        def call(self, x):
            return self.dense(x)

    net = Net()
    net(np.zeros((1, 3), np.float32))
    with pytest.raises(stages.StageError, match="subclassed"):
        stages.split(net, 2)


def test_more_stages_than_cuts_is_refused_with_the_limit():
    with pytest.raises(stages.StageError, match="at most 4 stage"):
        stages.split(build("mlp", (28, 28, 1), 10), 5)

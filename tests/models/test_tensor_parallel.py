"""models/tensor_parallel.py without running a step (the training equal-weights test is
tests/experiments/engine/test_tensor_parallel.py): the weights' round trip, what a split
all-reduces, and the refusals."""
import keras
import numpy as np
import pytest

from models import registry, tensor_parallel


def _pair(name="vit", shape=(28, 28, 1), classes=10, shards=2):
    keras.utils.set_random_seed(3)
    plain = registry.build(name, shape, classes)
    split = registry.build(name, shape, classes, tensor_parallel=shards)
    return plain, split


@pytest.mark.parametrize("shards", [2, 4])
def test_a_split_model_holds_the_unsplit_weights_in_shards(shards):
    plain, split = _pair(shards=shards)
    assert split.count_params() == plain.count_params()
    before = tensor_parallel.full_weights(split, plain)
    assert any(not np.array_equal(a, np.asarray(b)) for a, b in zip(before, plain.weights))
    tensor_parallel.load_from(split, plain)
    after = tensor_parallel.full_weights(split, plain)
    assert all(np.array_equal(a, np.asarray(b)) for a, b in zip(after, plain.weights))
    # each shard holds 1/T of every split layer's heads (or hidden units)
    attention = split.get_layer("block0_attention")
    assert len(attention.shard_variables()) == shards
    assert attention.shard_variables()[0][0].shape == (64, 4 // shards, 16)


def test_what_a_split_reduces_is_the_same_split_or_not():
    """vit: 4 blocks of (49 tokens x 64) outputs, attention and MLP each summed forward and
    backward: 16 reductions; 4 heads and 128 hidden units divide by 2 and 4."""
    plain, split = _pair()
    expected = {"reduced_bytes_per_example": 8 * 2 * 49 * 64 * 4, "reductions": 16,
                "shards": [2, 4]}
    assert tensor_parallel.describe(plain) == expected == tensor_parallel.describe(split)
    keras.utils.set_random_seed(3)
    assert tensor_parallel.describe(registry.build("cnn", (28, 28, 1), 10)) is None


def test_splits_that_cannot_be_made_are_refused():
    with pytest.raises(ValueError, match="--tensor_parallel=3 does not divide the 4 attention "
                                         "heads of layer 'block0_attention'"):
        registry.build("vit", (28, 28, 1), 10, tensor_parallel=3)
    with pytest.raises(ValueError, match="--tensor_parallel=2 splits transformer blocks; model "
                                         "'mlp' has none"):
        registry.build("mlp", (28, 28, 1), 10, tensor_parallel=2)


def test_each_shard_is_estimated_with_what_it_holds():
    """A ViT split in 2 (one stage, 32 examples, SGD): the second device holds its shard's
    weights and gradients, and per example each split layer's partial output and input copy
    plus an MLP's half of the hidden units; under hybrid's mirrored variables the first device
    holds every weight instead."""
    from experiments.measure import memory
    from models import stages

    _, split = _pair()
    for layer in tensor_parallel.split_layers(split):
        layer.devices = ["/device:CPU:0", "/device:CPU:1"]
    (stage,) = stages.split(split, 1)
    layers = tensor_parallel.split_layers(split)
    out = 49 * 64 * 4
    assert tensor_parallel.shard_bytes_per_example(layers[0]) == out  # attention
    assert tensor_parallel.shard_bytes_per_example(layers[1]) == out + 49 * 64 * 4  # 128 / 2
    weights = sum(int(np.prod(v.shape)) * 4 for layer in layers
                  for v in layer.shard_variables()[1])
    per_example = 4 * (out + out) + 4 * (out + out + 49 * 64 * 4)  # 4 blocks: attention, MLP
    first, second = memory.per_tensor_device([stage], [32], "sgd")
    assert (first["shard"], second["shard"]) == (0, 1)
    assert second["bytes"] == 2 * weights + 32 * per_example
    mirrored = memory.per_tensor_device([stage], [32], "sgd", weights_on_first=True)
    assert mirrored[1]["bytes"] == 32 * per_example
    assert mirrored[0]["bytes"] == first["bytes"] + 2 * weights

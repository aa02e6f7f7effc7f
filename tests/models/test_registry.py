import numpy as np
import pytest

from experiments.workload.datasets import DATASETS
from models import MODELS, TOKEN_MODELS
from models.registry import build

IMAGE_MODELS = [m for m in MODELS if m not in TOKEN_MODELS]


@pytest.mark.parametrize("name", IMAGE_MODELS)
@pytest.mark.parametrize("shape", [(28, 28, 1), (32, 32, 3)])
def test_logits_shape_follows_input_and_classes(name, shape):
    model = build(name, shape, num_classes=7)
    out = model(np.zeros((3, *shape), np.float32), training=False)
    assert tuple(out.shape) == (3, 7)


def test_embedding_maps_token_ids_to_logits():
    info = DATASETS["synthetic_tokens"]
    model = build("embedding", info.feature_shape, num_classes=info.num_classes)
    ids = np.full((3, *info.feature_shape), info.vocab_size - 1, np.int32)  # the last row exists
    assert tuple(model(ids).shape) == (3, info.num_classes)
    table = model.get_layer("embedding").embeddings
    assert tuple(table.shape) == (info.vocab_size, 64)


@pytest.mark.parametrize("name, params, gradient_mb", [
    ("resnet", (0.25e6, 0.3e6), (1.0, 1.2)),   # ResNet-20: 0.27 M
    ("wide_mlp", (9.9e6, 10.1e6), (39, 41)),   # tens of MB of gradients per step
])
def test_zoo_sizes(name, params, gradient_mb):
    model = build(name, (28, 28, 1) if name == "wide_mlp" else (32, 32, 3), 10)
    count = model.count_params()
    assert params[0] < count < params[1]
    assert gradient_mb[0] < count * 4 / 1e6 < gradient_mb[1]


def test_resnet20_has_batchnorm_after_every_convolution():
    model = build("resnet", (32, 32, 3), 10, sync_batchnorm=True)
    kinds = [layer.__class__.__name__ for layer in model.layers]
    assert kinds.count("Conv2D") == kinds.count("BatchNormalization") == 21  # 19 + 2 projections
    assert all(l.synchronized for l in model.layers if l.__class__.__name__ == "BatchNormalization")


def test_sync_batchnorm_layers_are_synchronized():
    model = build("cnn", (28, 28, 1), 10, sync_batchnorm=True)
    bns = [l for l in model.layers if l.__class__.__name__ == "BatchNormalization"]
    assert bns and all(l.synchronized for l in bns)
    plain = build("cnn", (28, 28, 1), 10)
    assert not any(l.__class__.__name__ == "BatchNormalization" for l in plain.layers)


def test_unknown_model_lists_valid_names():
    with pytest.raises(ValueError, match="valid models: mlp, cnn, resnet, wide_mlp, embedding"):
        build("vgg", (28, 28, 1), 10)


def test_row_embedding_gathers_on_its_tables_device_from_a_read():
    """keras.layers.Embedding gathers wherever its caller runs (under PSS: the whole table pulled
    from the ps every step); RowEmbedding gathers on the table's device, and from a read of the
    table, not with a ResourceGather: that op puts the variable in TF's copy-on-read mode, where
    every dense read or write (the momentum update's, every step) copies the whole table first."""
    import keras
    import tensorflow as tf

    from models.embedding import RowEmbedding

    def traced(layer):
        layer.build((None, 4))
        ops = tf.function(layer).get_concrete_function(
            tf.TensorSpec([2, 4], tf.int32)).graph.get_operations()
        return {op.type: op for op in ops}, layer.weights[0].value.device

    rows, table_device = traced(RowEmbedding(1000, 8))
    assert "ResourceGather" not in rows
    assert rows["GatherV2"].device == table_device != ""
    keras_ops, _ = traced(keras.layers.Embedding(1000, 8))
    assert keras_ops["GatherV2"].device == ""  # placed by the caller: the whole table moves


def test_gpt_predicts_a_token_from_token_ids():
    info = DATASETS["synthetic_sequences"]
    model = build("gpt", info.feature_shape, num_classes=info.num_classes)
    ids = np.full((3, *info.feature_shape), info.vocab_size - 1, np.int32)
    assert tuple(model(ids).shape) == (3, info.vocab_size)


def test_gpt_attention_is_causal():
    """No position sees a later token: changing the tokens from position 5 on leaves the blocks'
    outputs at positions 0-4 as they were, and moves the later ones."""
    import keras

    info = DATASETS["synthetic_sequences"]
    model = build("gpt", info.feature_shape, num_classes=info.num_classes)
    blocks = keras.Model(model.inputs[0], model.get_layer("norm").output)
    ids = np.arange(32, dtype=np.int32)[None] % info.vocab_size
    later = ids.copy()
    later[0, 5:] = (later[0, 5:] + 1) % info.vocab_size
    a, b = blocks(ids).numpy(), blocks(later).numpy()
    np.testing.assert_allclose(a[0, :5], b[0, :5], rtol=1e-5, atol=1e-6)  # blind to the future
    assert np.abs(a[0, 5:] - b[0, 5:]).max() > 1e-3


@pytest.mark.parametrize("name, params", [("vit", (0.1e6, 0.2e6)), ("vit_small", (0.7e6, 0.9e6)),
                                          ("gpt", (0.1e6, 0.2e6))])
def test_transformer_sizes(name, params):
    info = DATASETS["synthetic_sequences" if name.startswith("gpt") else "synthetic"]
    count = build(name, info.feature_shape, info.num_classes).count_params()
    assert params[0] < count < params[1]


@pytest.mark.parametrize("name", ["vit", "gpt"])
def test_transformers_cut_between_blocks(name):
    """A pipeline cuts a transformer only where one tensor crosses: after a residual sum (between
    blocks, or between a block's attention and its MLP), never where the residual's other branch
    crosses too."""
    from models import stages

    info = DATASETS["synthetic_sequences" if name == "gpt" else "synthetic"]
    model = build(name, info.feature_shape, info.num_classes)
    two = stages.split(model, 2)
    assert two[0].layers[-1].startswith("block") and two[0].layers[-1][-5:] in ("_add1", "_add2")
    assert two[1].layers[0][-6:] in ("_norm1", "_norm2")

import numpy as np
import pytest

from models import MODELS
from models.registry import build


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("shape", [(28, 28, 1), (32, 32, 3)])
def test_logits_shape_follows_input_and_classes(name, shape):
    model = build(name, shape, num_classes=7)
    out = model(np.zeros((3, *shape), np.float32), training=False)
    assert tuple(out.shape) == (3, 7)


def test_sync_batchnorm_layers_are_synchronized():
    model = build("cnn", (28, 28, 1), 10, sync_batchnorm=True)
    bns = [l for l in model.layers if l.__class__.__name__ == "BatchNormalization"]
    assert bns and all(l.synchronized for l in bns)
    plain = build("cnn", (28, 28, 1), 10)
    assert not any(l.__class__.__name__ == "BatchNormalization" for l in plain.layers)


def test_unknown_model_lists_valid_names():
    with pytest.raises(ValueError, match="valid models: mlp, cnn"):
        build("resnet", (28, 28, 1), 10)

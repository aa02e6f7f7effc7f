"""Model by name. Call inside `strategy.scope()` so variables are created the strategy's way:

    with strategy.scope():
        model = build("cnn", input_shape=(28, 28, 1), num_classes=10)
"""
from models import MODELS, TENSOR_PARALLEL_MODELS
from models.cnn import build_cnn
from models.embedding import build_embedding
from models.gpt import build_gpt
from models.mlp import build_mlp
from models.resnet import build_resnet
from models.vit import build_vit
from models.wide_mlp import build_wide_mlp


def build(name, input_shape, num_classes, batchnorm=False, sync_batchnorm=False,
          tensor_parallel=1):
    """Returns an uncompiled keras.Model producing logits of shape (batch, num_classes);
    tensor_parallel: the transformers' blocks split over that many devices
    (models/tensor_parallel.py)."""
    if tensor_parallel > 1 and name not in TENSOR_PARALLEL_MODELS:
        raise ValueError(f"--tensor_parallel={tensor_parallel} splits transformer blocks; "
                         f"model {name!r} has none (choose one of: "
                         f"{', '.join(TENSOR_PARALLEL_MODELS)})")
    if name == "mlp":
        return build_mlp(input_shape, num_classes)
    if name == "cnn":
        return build_cnn(input_shape, num_classes, batchnorm=batchnorm or sync_batchnorm,
                         sync_batchnorm=sync_batchnorm)
    if name == "resnet":
        return build_resnet(input_shape, num_classes, sync_batchnorm=sync_batchnorm)
    if name == "wide_mlp":
        return build_wide_mlp(input_shape, num_classes)
    if name == "embedding":
        return build_embedding(input_shape, num_classes)
    if name in ("vit", "vit_small"):
        return build_vit(input_shape, num_classes, name=name,
                         tensor_parallel=tensor_parallel)
    if name in ("gpt", "gpt_small"):
        return build_gpt(input_shape, num_classes, name=name,
                         tensor_parallel=tensor_parallel)
    raise ValueError(f"unknown model {name!r}; valid models: {', '.join(MODELS)}")

"""Keras 3 model builders. Names live here (no Keras import); build with
`models.registry.build(name, input_shape, num_classes)` inside `strategy.scope()`.

    mlp, cnn     the small pair of the default comparison
    resnet       ResNet-20, BatchNorm, 32x32x3: compute-heavy
    wide_mlp     3 x 2048 units: tens of MB of gradients per step, communication-bound
    embedding    100,000-word embedding on token ids (--dataset=synthetic_tokens): sparse
    vit          a Vision Transformer on image patches (vit_small: wider, deeper)
    gpt          a decoder-only transformer predicting the next token
                 (--dataset=synthetic_sequences; gpt_small: wider, deeper)
"""
MODELS = ("mlp", "cnn", "resnet", "wide_mlp", "embedding", "vit", "vit_small", "gpt",
          "gpt_small")
# The dataset each model runs on unless --dataset says otherwise (experiments.run and a
# comparison alike, so that a run reproduces its comparison's cell); every other model, and
# your own, runs on synthetic 28x28 images.
MODEL_DATASETS = {"resnet": "synthetic_cifar", "embedding": "synthetic_tokens",
                  "gpt": "synthetic_sequences", "gpt_small": "synthetic_sequences"}
DEFAULT_DATASET = "synthetic"


def default_dataset(model):
    """The dataset `model` runs on when none is named."""
    return MODEL_DATASETS.get(model, DEFAULT_DATASET)


# Models whose input is token ids rather than images, and the datasets that provide them.
TOKEN_MODELS = ("embedding", "gpt", "gpt_small")
# Token models whose classes are the tokens themselves (next-token prediction): their dataset's
# vocabulary must equal its classes.
NEXT_TOKEN_MODELS = ("gpt", "gpt_small")
# Models whose transformer blocks --tensor_parallel splits over devices
# (models/tensor_parallel.py).
TENSOR_PARALLEL_MODELS = ("vit", "vit_small", "gpt", "gpt_small")
# How models/stages.py balances pipeline stages: parameter count, or measured time.
STAGE_COSTS = ("params", "time")
# The order a pipeline stage runs its micro-batches' forwards and backwards in
# (experiments/engine/gpipe.py): all forwards first, or one forward one backward.
PIPELINE_SCHEDULES = ("gpipe", "1f1b")

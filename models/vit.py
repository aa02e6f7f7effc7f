"""A small Vision Transformer (Dosovitskiy et al. 2021): the image cut into P x P patches, each
a token (a strided convolution), a learned position per patch, pre-norm transformer blocks,
the tokens averaged (no class token: equal at this size, and one tensor less to carry through a
pipeline), a dense head.

    python -m experiments.run --model=vit --dataset=synthetic --strategy=mirrored --num_replicas=2

Sizes (models/transformer.py): `vit` 64 wide, 4 blocks of 4 heads (0.14 M parameters);
`vit_small` 128 wide, 6 blocks (0.8 M). Patches of 4 x 4 pixels (7 x 7 tokens of a 28 x 28
image, 8 x 8 of a 32 x 32 one); a side that 4 does not divide falls back to the largest of 7, 2, 1
that divides both.
"""
import keras

from models.transformer import PositionEmbedding, block, size_of

PATCHES = (4, 7, 2, 1)


def build_vit(input_shape, num_classes, name="vit", tensor_parallel=1):
    width, blocks, heads, mlp = size_of(name)
    if len(input_shape) != 3:
        raise ValueError(f"model {name!r} reads images (height, width, channels), not features "
                         f"of shape {tuple(input_shape)}")
    height, side = input_shape[0], input_shape[1]
    patch = next(p for p in PATCHES if height % p == 0 and side % p == 0)
    inputs = keras.Input(shape=tuple(input_shape))
    x = keras.layers.Conv2D(width, patch, strides=patch, name="patches")(inputs)
    x = keras.layers.Reshape(((height // patch) * (side // patch), width), name="tokens")(x)
    x = PositionEmbedding(name="positions")(x)
    for i in range(blocks):
        x = block(x, heads, mlp, name=f"block{i}", tensor_parallel=tensor_parallel)
    x = keras.layers.LayerNormalization(epsilon=1e-6, name="norm")(x)
    x = keras.layers.GlobalAveragePooling1D(name="pool")(x)
    outputs = keras.layers.Dense(num_classes, name="head")(x)
    return keras.Model(inputs, outputs, name=name)

"""The pre-norm transformer block both attention models of the zoo share (models/vit.py,
models/gpt.py), and their sizes.

    x + MultiHeadAttention(LayerNorm(x))        (causal for the GPT)
    x + Dense(dim)(gelu(Dense(mlp)(LayerNorm(x))))

One tensor flows past each residual sum, so a pipeline (models/stages.py) can cut after either
sum of a block: between blocks, or between a block's attention and its MLP. With
`tensor_parallel=T` the attention and the MLP are split over T devices (models/tensor_parallel.py):
the same function, weights in shards.
"""
import keras

from models.tensor_parallel import TensorParallelAttention, TensorParallelMLP

# name suffix -> (width, blocks, heads, MLP width)
SIZES = {"": (64, 4, 4, 128), "_small": (128, 6, 4, 256)}


def size_of(name):
    """(width, blocks, heads, MLP width) of e.g. 'vit' or 'gpt_small'."""
    for suffix, size in sorted(SIZES.items(), key=lambda kv: -len(kv[0])):
        if suffix and name.endswith(suffix):
            return size
    return SIZES[""]


def block(x, heads, mlp, causal=False, name="", tensor_parallel=1):
    width = x.shape[-1]
    h = keras.layers.LayerNormalization(epsilon=1e-6, name=f"{name}_norm1")(x)
    if tensor_parallel > 1:
        h = TensorParallelAttention(heads, tensor_parallel, causal, name=f"{name}_attention")(h)
    else:
        h = keras.layers.MultiHeadAttention(heads, width // heads, name=f"{name}_attention")(
            h, h, use_causal_mask=causal)
    x = keras.layers.Add(name=f"{name}_add1")([x, h])
    h = keras.layers.LayerNormalization(epsilon=1e-6, name=f"{name}_norm2")(x)
    if tensor_parallel > 1:  # the layer names tensor_parallel.load_from maps from
        h = TensorParallelMLP(mlp, tensor_parallel, name=f"{name}_mlp")(h)
    else:
        h = keras.layers.Dense(mlp, activation="gelu", name=f"{name}_mlp1")(h)
        h = keras.layers.Dense(width, name=f"{name}_mlp2")(h)
    return keras.layers.Add(name=f"{name}_add2")([x, h])


class PositionEmbedding(keras.layers.Layer):
    """Adds a learned vector per position (length x width) to its input."""

    def build(self, input_shape):
        self.positions = self.add_weight(shape=tuple(input_shape[1:]), name="positions",
                                         initializer=keras.initializers.RandomNormal(
                                             stddev=0.02))

    def call(self, x):
        return x + self.positions

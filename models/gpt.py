"""A small decoder-only transformer (GPT): token and position embeddings, pre-norm blocks with
causal self-attention, and the next token predicted from the last position. It reads token ids
and its classes are the tokens (vocabulary = number of classes): on `--dataset=synthetic_sequences`
it learns which token follows a sequence.

    python -m experiments.run --model=gpt --dataset=synthetic_sequences --strategy=one_device

Sizes (models/transformer.py): `gpt` 64 wide, 4 blocks of 4 heads; `gpt_small` 128 wide, 6
blocks. The logits are the last position's only: the toolkit's loop trains (batch, classes)
logits against one label per example, so every strategy and the pipeline run it unchanged;
causal attention keeps each position blind to the ones after it, as in a language model.
"""
import keras

from models.transformer import PositionEmbedding, block, size_of


class LastPosition(keras.layers.Layer):
    """The last position of a sequence: (batch, length, width) -> (batch, width)."""

    def call(self, x):
        return x[:, -1, :]

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[-1])


def build_gpt(input_shape, num_classes, name="gpt", tensor_parallel=1):
    width, blocks, heads, mlp = size_of(name)
    (length,) = input_shape
    inputs = keras.Input(shape=(length,), dtype="int32")
    x = keras.layers.Embedding(num_classes, width, name="tokens")(inputs)
    x = PositionEmbedding(name="positions")(x)
    for i in range(blocks):
        x = block(x, heads, mlp, causal=True, name=f"block{i}",
                  tensor_parallel=tensor_parallel)
    x = keras.layers.LayerNormalization(epsilon=1e-6, name="norm")(x)
    x = LastPosition(name="last")(x)
    outputs = keras.layers.Dense(num_classes, name="head")(x)
    return keras.Model(inputs, outputs, name=name)

"""A text classifier with a large-vocabulary embedding: the sparse case, where parameter servers
were invented to win. Token ids (batch, length) -> a 100,000 x 64 embedding (6.4 M parameters,
25.6 MB) -> mean over the sequence -> dense head. A step touches only the rows of its tokens, so
its embedding gradient is a tf.IndexedSlices of batch x length rows (64 x 64 ids: 1 MB), not a
dense 25.6 MB tensor; the dense head's gradients are dense (a few KB).

The lookup gathers where the table lives (RowEmbedding below): keras.layers.Embedding reads its
whole table and gathers on the caller's device (keras.ops.take), so under ParameterServerStrategy
every step of every worker would pull the entire table from its parameter server; gathering on
the table's device sends only the rows a batch uses. The gradient is IndexedSlices either way.

It reads the table and gathers from the read (GatherV2), not from the variable
(tf.nn.embedding_lookup's ResourceGather): a ResourceGather puts the variable in TF's
copy-on-read mode (for good: training runs no DisableCopyOnRead), after which every dense read
or write copies the whole table first, and the optimizer's momentum update writes the whole table
every step (Keras's SGD applies an IndexedSlices gradient densely). One thread, batch 64: a
median 176 us CPU per example with ResourceGather, 127 without (`python -m
experiments.bench.table_read`; docs/benchmarks.md, "The embedding's copy-on-read table").
"""
import keras
import tensorflow as tf

VOCAB_SIZE = 100_000
EMBEDDING_DIM = 64


class RowEmbedding(keras.layers.Layer):
    """Embedding lookup that gathers on its table's device (see module doc)."""

    SPARSE_GRADIENTS = True  # its table's gradient is IndexedSlices (gradient compression
    # keeps no residual for it: experiments/engine/training.py)

    def __init__(self, input_dim, output_dim, **kwargs):
        super().__init__(**kwargs)
        self.input_dim, self.output_dim = input_dim, output_dim

    def build(self, input_shape):
        # Unit-scale rows (Keras's Embedding draws them from +-0.05): averaged over a sequence,
        # +-0.05 rows give the head features too small to learn from in a short run.
        self.embeddings = self.add_weight(
            shape=(self.input_dim, self.output_dim), name="embeddings",
            initializer=keras.initializers.RandomUniform(-1.0, 1.0))

    def call(self, ids):
        # .value is the backing tf.Variable (a distributed one under a strategy); on its device
        # the read aliases the table's buffer (no copy) and only the gathered rows leave it.
        table = self.embeddings.value
        with tf.device(table.device):
            return tf.gather(tf.convert_to_tensor(table), tf.cast(ids, tf.int32))

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.output_dim)

    def get_config(self):
        return {**super().get_config(), "input_dim": self.input_dim,
                "output_dim": self.output_dim}


def build_embedding(input_shape, num_classes, vocab_size=VOCAB_SIZE, dim=EMBEDDING_DIM):
    inputs = keras.Input(shape=tuple(input_shape), dtype="int32")
    x = RowEmbedding(vocab_size, dim, name="embedding")(inputs)
    x = keras.layers.GlobalAveragePooling1D()(x)
    x = keras.layers.Dense(64, activation="relu")(x)
    outputs = keras.layers.Dense(num_classes)(x)
    return keras.Model(inputs, outputs, name="embedding")

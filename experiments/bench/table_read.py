"""Benchmark (not a test): the embedding's lookup two ways in a plain TF loop, one thread, the
embedding model with Keras's momentum SGD (docs/benchmarks.md, "The embedding's copy-on-read
table"). `resource_gather` is tf.nn.embedding_lookup on the variable, which puts the table in
TF's copy-on-read mode; `read_gather` is models/embedding.py's lookup (a read, then GatherV2).

    python -m experiments.bench.table_read
"""
import time

import tensorflow as tf

from models import embedding

STEPS, BATCH, LENGTH = 400, 64, 64


def _resource_gather(self, ids):
    return tf.nn.embedding_lookup(self.embeddings.value, tf.cast(ids, tf.int32))


def time_lookup(call, repeats=3):
    """[(examples/s, CPU us per example)] of `repeats` timed blocks of STEPS steps, after one
    traced warm-up, with RowEmbedding.call replaced by `call` (None: the model's own)."""
    import keras
    own = embedding.RowEmbedding.call
    if call is not None:
        embedding.RowEmbedding.call = call
    try:
        model = embedding.build_embedding((LENGTH,), 2)
        optimizer = keras.optimizers.SGD(0.02, momentum=0.9)
        optimizer.build(model.trainable_variables)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        ids = tf.random.uniform((BATCH, LENGTH), 0, embedding.VOCAB_SIZE, tf.int32, seed=1)
        labels = tf.random.uniform((BATCH,), 0, 2, tf.int32, seed=2)

        @tf.function
        def steps(n):
            for _ in tf.range(n):
                with tf.GradientTape() as tape:
                    value = loss(labels, model(ids, training=True))
                grads = tape.gradient(value, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))

        steps(tf.constant(2))
        out = []
        for _ in range(repeats):
            wall, cpu = time.perf_counter(), time.process_time()
            steps(tf.constant(STEPS))
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            out.append((STEPS * BATCH / wall, cpu / (STEPS * BATCH) * 1e6))
        return out
    finally:
        embedding.RowEmbedding.call = own


def main():
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    for name, call in (("resource_gather", _resource_gather), ("read_gather", None)) * 2:
        for rate, us in time_lookup(call):
            print(f"{name:16s} {rate:8.0f} examples/s  {us:6.1f} us CPU per example")


if __name__ == "__main__":
    main()

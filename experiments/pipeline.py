"""tf.data pipelines for the datasets named in `experiments/datasets.py` (synthetic and TFDS).

The synthetic set is defined by TF ops (stateless random, keyed on the seed and the example index),
not by a NumPy array baked into the graph, so every task of a cluster, including parameter-server
workers that receive the pipeline as a serialized graph, builds the same examples cheaply.
"""
import tensorflow as tf
# TF's own dataset-testing transformation (public only as tf.raw_ops.SleepDataset): a sleep
# inside the graph, so it also slows a parameter-server worker that runs the pipeline remotely.
from tensorflow.python.data.experimental.ops.testing import sleep as _sleep_dataset

# How far apart the class prototypes are relative to the per-pixel noise. Tuned so that the CNN
# needs a couple of epochs to get near its ceiling: fast enough for tests, hard enough that
# accuracy differences between strategies are visible rather than everything at 100%.
_SYNTHETIC_NOISE = 3.0
_PROTOTYPE_CELL = 4  # prototypes are smooth: one random value per 4x4 pixel cell


def _prototypes(info, seed):
    """One smooth random image per class, the structure a model can learn."""
    h, w, c = info.image_shape
    cells = tf.random.stateless_normal(
        (info.num_classes, h // _PROTOTYPE_CELL, w // _PROTOTYPE_CELL, c), seed=[seed, 0])
    return tf.image.resize(cells, (h, w), method="bilinear")


def _synthetic_examples(info, seed, split_id, count):
    """Example i of a split is a pure function of (seed, split_id, i): deterministic and
    independent of sharding or batching."""
    protos = _prototypes(info, seed)

    def make(i):
        key = tf.stack([tf.cast(seed, tf.int64), split_id * (1 << 40) + i])
        label = tf.random.stateless_uniform([], key, 0, info.num_classes, dtype=tf.int32)
        amplitude = tf.random.stateless_uniform([], key + 1, 0.5, 1.5)
        noise = tf.random.stateless_normal(info.image_shape, key + 2)
        return protos[label] * amplitude + _SYNTHETIC_NOISE * noise, label

    return tf.data.Dataset.range(count).map(make, num_parallel_calls=tf.data.AUTOTUNE,
                                            deterministic=True)


def _tfds_examples(info, split, count, data_dir):
    import tensorflow_datasets as tfds  # imported here: slow, and synthetic runs never need it

    ds = tfds.load(info.tfds_name, split=f"{split}[:{count}]", data_dir=data_dir,
                   as_supervised=True, shuffle_files=False)
    return ds.map(lambda x, y: (tf.cast(x, tf.float32) / 255.0, tf.cast(y, tf.int32)),
                  num_parallel_calls=tf.data.AUTOTUNE)


def examples(info, split, count, seed, data_dir=None):
    """Unbatched (image float32, label int32) pairs of one split ('train' or 'eval')."""
    if info.tfds_name:
        tfds_split = info.train_split if split == "train" else info.eval_split
        return _tfds_examples(info, tfds_split, count, data_dir)
    return _synthetic_examples(info, seed, 1 if split == "train" else 2, count)


def _with_explicit_sharding_policy(ds, policy):
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = policy
    return ds.with_options(options)


def train_dataset(info, count, batch_size, seed, data_dir=None, num_shards=1, shard_index=0,
                  shuffle_seed=None, delay_us=None):
    """Endless shuffled batches of this input pipeline's shard of the training split.

    Sharding is done here, by example, and tf.data auto-sharding is switched OFF explicitly: with
    an in-memory or generated source FILE sharding does not apply, and the silent DATA fallback
    is what confuses users (tensorflow#42146). `repeat()` comes before `batch()` so every worker
    runs exactly the number of steps the loop asks for (MWMS hangs if workers disagree).

    shard_index and shuffle_seed may be scalar tensors (a PSS worker computes its own).
    delay_us (straggler injection): microseconds every batch waits, applied *after* prefetch so
    the consumer's step itself is delayed rather than hidden by the prefetch buffer. An int or a
    scalar tensor (a parameter-server worker computes its own from its worker index).
    """
    ds = examples(info, "train", count, seed, data_dir)
    if num_shards > 1:
        ds = ds.shard(num_shards, shard_index)
    # The largest shard's size: shard_index may be a tensor (a PSS worker's own index).
    shard_size = -(-count // num_shards)
    ds = ds.cache().shuffle(shard_size, seed=shuffle_seed, reshuffle_each_iteration=True)
    ds = ds.repeat().batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    if delay_us is not None:
        ds = ds.apply(_sleep_dataset(tf.cast(delay_us, tf.int64)))
    return _with_explicit_sharding_policy(ds, tf.data.experimental.AutoShardPolicy.OFF)


def eval_dataset(info, count, batch_size, seed, data_dir=None):
    """The held-out split, in order, evaluated on one task (the chief)."""
    ds = examples(info, "eval", count, seed, data_dir).cache()
    return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)

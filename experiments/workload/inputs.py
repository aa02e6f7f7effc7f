"""tf.data pipelines for the datasets of `experiments/workload/datasets.py`: synthetic images and tokens,
TFDS, and your own (.npz arrays, MODULE:FUNCTION); every one is sharded, cached, shuffled,
repeated, batched and prefetched the same way (train_dataset).

The synthetic sets are defined by TF ops (stateless random, keyed on the seed and the example
index), not by a NumPy array baked into the graph, so every task of a cluster, including
parameter-server workers that receive the pipeline as a serialized graph, builds the same
examples cheaply.
"""
import numpy as np
import tensorflow as tf

from experiments.workload import npz_data, text_corpus, user_data
from experiments.workload.datasets import (FUNCTION, NPZ, SEQUENCES, TEXT, TFDS, TOKENS,
                                           get_info, is_user_dataset)
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


# Synthetic tokens: each class has its own topic words, scattered over the vocabulary; half of a
# sequence's tokens are its class's topic words, the rest uniform over the whole vocabulary (so
# a batch touches thousands of distinct rows of a large embedding: sparse gradients).
_TOPIC_WORDS = 64
_TOPIC_SHARE = 0.5
_SCATTER = 7919  # a prime: topic word k of class c is (c * _TOPIC_WORDS + k) * 7919 mod vocab


def _token_examples(info, seed, split_id, count):
    (length,), vocab = info.feature_shape, info.vocab_size

    def make(i):
        key = tf.stack([tf.cast(seed, tf.int64), split_id * (1 << 40) + i])
        label = tf.random.stateless_uniform([], key, 0, info.num_classes, dtype=tf.int32)
        word = tf.random.stateless_uniform([length], key + 1, 0, _TOPIC_WORDS, dtype=tf.int64)
        topic = (tf.cast(label, tf.int64) * _TOPIC_WORDS + word) * _SCATTER % vocab
        background = tf.random.stateless_uniform([length], key + 2, 0, vocab, dtype=tf.int64)
        use_topic = tf.random.stateless_uniform([length], key + 3) < _TOPIC_SHARE
        return tf.cast(tf.where(use_topic, topic, background), tf.int32), label

    return tf.data.Dataset.range(count).map(make, num_parallel_calls=tf.data.AUTOTUNE,
                                            deterministic=True)


_RULE_SEED = 7  # the successor table: one task for every --seed (the seed draws the sequences)
_NOISE = 0.1  # share of tokens drawn at random instead of following the table


def _sequence_examples(info, seed, split_id, count):
    """Token sequences that follow a fixed successor table (a permutation of the vocabulary),
    each token replaced by a random one with probability _NOISE (the chain then goes on from it);
    the label is the last token's successor: the next token, learnable to 100%."""
    (length,), vocab = info.feature_shape, info.vocab_size
    successor = tf.constant(np.random.RandomState(_RULE_SEED).permutation(vocab), tf.int32)

    def make(i):
        key = tf.stack([tf.cast(seed, tf.int64), split_id * (1 << 40) + i])
        start = tf.random.stateless_uniform([], key, 0, vocab, dtype=tf.int32)
        noisy = tf.random.stateless_uniform([length - 1], key + 1) < _NOISE
        drawn = tf.random.stateless_uniform([length - 1], key + 2, 0, vocab, dtype=tf.int32)
        rest = tf.scan(lambda prev, t: tf.where(t[0], t[1], tf.gather(successor, prev)),
                       (noisy, drawn), initializer=start)
        tokens = tf.concat([[start], rest], 0)
        return tokens, tf.gather(successor, tokens[-1])

    return tf.data.Dataset.range(count).map(make, num_parallel_calls=tf.data.AUTOTUNE,
                                            deterministic=True)


def _npz_examples(info, split, count):
    arrays = npz_data.read(info.source)
    x, y = (arrays["x_train"], arrays["y_train"]) if split == "train" else \
        (arrays["x_test"], arrays["y_test"])
    return tf.data.Dataset.from_tensor_slices((x[:count], y[:count]))


def _tfds_examples(info, split, count, data_dir):
    import tensorflow_datasets as tfds  # imported here: slow, and synthetic runs never need it

    ds = tfds.load(info.tfds_name, split=f"{split}[:{count}]", data_dir=data_dir,
                   as_supervised=True, shuffle_files=False)
    return ds.map(lambda x, y: (tf.cast(x, tf.float32) / 255.0, tf.cast(y, tf.int32)),
                  num_parallel_calls=tf.data.AUTOTUNE)


def dataset_info(name, input_context=None):
    """The DatasetInfo of a built-in name, an .npz path or MODULE:FUNCTION (called once, with
    `input_context`). UserCodeError (one line) for bad user data."""
    if not is_user_dataset(name):
        return get_info(name)
    if name.endswith(".npz"):
        return npz_data.info(name)
    return user_data.info(name, input_context or tf.distribute.InputContext())


def examples(info, split, count, seed, data_dir=None, input_context=None):
    """Unbatched (features, label int32) pairs of one split ('train' or 'eval'): images float32,
    tokens int32, your data as user_data / npz_data say. input_context: given to a
    MODULE:FUNCTION dataset (default: one pipeline)."""
    split_id = 1 if split == "train" else 2
    if info.kind == TFDS:
        tfds_split = info.train_split if split == "train" else info.eval_split
        return _tfds_examples(info, tfds_split, count, data_dir)
    if info.kind == TOKENS:
        return _token_examples(info, seed, split_id, count)
    if info.kind == SEQUENCES:
        return _sequence_examples(info, seed, split_id, count)
    if info.kind == TEXT:
        return tf.data.Dataset.from_tensor_slices(text_corpus.windows(
            split, info.feature_shape[0], count, seed, split_id))
    if info.kind == NPZ:
        return _npz_examples(info, split, count)
    if info.kind == FUNCTION:
        return user_data.examples(info, split, count,
                                  input_context or tf.distribute.InputContext())
    return _synthetic_examples(info, seed, split_id, count)


def _with_explicit_sharding_policy(ds, policy):
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = policy
    return ds.with_options(options)


def train_dataset(info, count, batch_size, seed, data_dir=None, num_shards=1, shard_index=0,
                  shuffle_seed=None, delay_us=None, replicas_in_sync=1, start_example=0):
    """Endless shuffled batches of this input pipeline's shard of the training split.

    Sharding is done here, by example, and tf.data auto-sharding is switched OFF explicitly: with
    an in-memory or generated source FILE sharding does not apply, and the silent DATA fallback
    is what confuses users (tensorflow#42146). `repeat()` comes before `batch()` so every worker
    runs exactly the number of steps the loop asks for (MWMS hangs if workers disagree).

    shard_index and shuffle_seed may be scalar tensors (a PSS worker computes its own).
    With a shuffle_seed, pass k of the shard is a permutation of its own, keyed on (seed, k),
    and the stream of passes starts `start_example` examples in: a run resumed after S steps
    (S x its examples per step, per pipeline) meets the examples, in the order, that the
    uninterrupted run met from there.
    replicas_in_sync: for the InputContext a MODULE:FUNCTION dataset is given.
    delay_us (straggler injection): microseconds every batch waits, applied *after* prefetch so
    the consumer's step itself is delayed rather than hidden by the prefetch buffer. An int or a
    scalar tensor (a parameter-server worker computes its own from its worker index), or a
    function of the batch's index in this stream giving its delay (--straggler_schedule).
    """
    # A MODULE:FUNCTION dataset learns which pipeline it feeds; unless it shards by itself, the
    # shard is taken here like any other dataset's.
    context = tf.distribute.InputContext(num_shards, shard_index, replicas_in_sync)
    ds = examples(info, "train", count, seed, data_dir, input_context=context)
    if num_shards > 1 and not (info.kind == FUNCTION and info.sharded):
        ds = ds.shard(num_shards, shard_index)
    # The largest shard's size: shard_index may be a tensor (a PSS worker's own index).
    shard_size = -(-count // num_shards)
    if shuffle_seed is None:
        ds = ds.cache().shuffle(shard_size, reshuffle_each_iteration=True).repeat()
    else:
        cached = ds.cache()
        # this shard's own size (ds.shard takes every num_shards-th example from shard_index)
        size = (count - tf.cast(shard_index, tf.int64) + num_shards - 1) // num_shards
        start = tf.cast(start_example, tf.int64)
        seed64 = tf.cast(shuffle_seed, tf.int64)
        ds = tf.data.Dataset.counter(start // size).flat_map(
            lambda k: cached.shuffle(shard_size, seed=seed64 * 1_000_003 + k,
                                     reshuffle_each_iteration=False)).skip(start % size)
    ds = ds.batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    if callable(delay_us):  # a delay per batch (a schedule): batch i's from delay_us(i); the
        # take(1) ends each one-batch stream without a second sleep for its end
        ds = ds.enumerate().flat_map(lambda i, batch: tf.data.Dataset.from_tensors(batch).apply(
            _sleep_dataset(tf.cast(delay_us(i), tf.int64))).take(1))
        # and no prefetch after the flat_map (tf.data injects one after a pipeline's last
        # function): it would count batches, and sleep, ahead of the steps that take them
        options = tf.data.Options()
        options.experimental_optimization.inject_prefetch = False
        ds = ds.with_options(options)
    elif delay_us is not None:
        ds = ds.apply(_sleep_dataset(tf.cast(delay_us, tf.int64)))
    return _with_explicit_sharding_policy(ds, tf.data.experimental.AutoShardPolicy.OFF)


def eval_dataset(info, count, batch_size, seed, data_dir=None):
    """The held-out split, in order, evaluated on one task (the chief)."""
    ds = examples(info, "eval", count, seed, data_dir).cache()
    return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)

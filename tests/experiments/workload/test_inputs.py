import time

import numpy as np
import pytest
import tensorflow_datasets as tfds

from experiments.workload import inputs
from experiments.workload.datasets import get_info


def _arrays(ds):
    xs, ys = zip(*[(x.numpy(), y.numpy()) for x, y in ds])
    return np.stack(xs), np.array(ys)


@pytest.mark.parametrize("name, shape", [("synthetic", (28, 28, 1)), ("synthetic_cifar", (32, 32, 3))])
def test_synthetic_is_deterministic_and_seeded(name, shape):
    info = get_info(name)
    x1, y1 = _arrays(inputs.examples(info, "train", 64, seed=1))
    x2, y2 = _arrays(inputs.examples(info, "train", 64, seed=1))
    x3, _ = _arrays(inputs.examples(info, "train", 64, seed=2))
    assert x1.shape == (64, *shape) and np.array_equal(x1, x2) and np.array_equal(y1, y2)
    assert not np.allclose(x1, x3)
    xe, _ = _arrays(inputs.examples(info, "eval", 64, seed=1))
    assert not np.allclose(x1, xe)  # the eval split is held out, not a copy


def test_synthetic_is_learnable():
    """A nearest-class-mean classifier fitted on train beats chance (10 %) by far on eval."""
    info = get_info("synthetic")
    x, y = _arrays(inputs.examples(info, "train", 2000, seed=42))
    xe, ye = _arrays(inputs.examples(info, "eval", 500, seed=42))
    assert len(set(y.tolist())) == 10
    means = np.stack([x[y == c].reshape(-1, x[0].size).mean(0) for c in range(10)])
    flat = xe.reshape(len(xe), -1)
    predicted = np.argmin(((flat[:, None, :] - means[None]) ** 2).sum(-1), axis=1)
    assert (predicted == ye).mean() > 0.5


def test_shards_are_disjoint_and_cover_the_split():
    info = get_info("synthetic")
    seen = []
    for shard in range(2):
        ds = inputs.train_dataset(info, 64, 8, seed=3, num_shards=2, shard_index=shard,
                                    shuffle_seed=0)
        batches = [x.numpy().reshape(8, -1).sum(1) for x, _ in ds.take(4)]  # one pass: 32 ex
        seen.append(set(np.round(np.concatenate(batches), 3).tolist()))
    everything = set(np.round(_arrays(inputs.examples(info, "train", 64, 3))[0]
                              .reshape(64, -1).sum(1), 3).tolist())
    assert not seen[0] & seen[1] and seen[0] | seen[1] == everything


def _stream(ds, batches):
    return np.concatenate([x.numpy().reshape(x.shape[0], -1).sum(1) for x, _ in
                           ds.take(batches)])


def test_a_resumed_stream_continues_where_the_uninterrupted_one_was():
    """Shard 1 of 2 of 63 examples holds 31: passes of 31 in batches of 4 straddle passes. A
    pipeline resumed after 5 or 9 batches (20, 36 examples: inside pass 1 and pass 2) meets
    what the uninterrupted one met from there; each pass is a permutation of the shard, and
    passes differ."""
    info = get_info("synthetic")
    kw = dict(seed=3, num_shards=2, shard_index=1, shuffle_seed=4)
    whole = _stream(inputs.train_dataset(info, 63, 4, **kw), 24)  # 96 examples: 3+ passes
    for skipped in (5, 9):
        resumed = _stream(inputs.train_dataset(info, 63, 4, start_example=4 * skipped, **kw),
                          24 - skipped)
        assert np.array_equal(resumed, whole[4 * skipped:])
    first, second = whole[:31], whole[31:62]
    assert sorted(first.tolist()) == sorted(second.tolist()) and len(set(first.tolist())) == 31
    assert not np.array_equal(first, second)


def test_tfds_path_with_mock_data():
    info = get_info("mnist")
    # mock_data ignores split slicing ("train[:16]"), so it is asked for exactly 16 examples.
    with tfds.testing.mock_data(num_examples=16):
        x, y = _arrays(inputs.examples(info, "train", 16, seed=0, data_dir="/nonexistent"))
        batch = next(iter(inputs.train_dataset(info, 16, 8, seed=0)))
    assert x.shape == (16, 28, 28, 1) and x.dtype == np.float32 and 0.0 <= x.min() <= x.max() <= 1.0
    assert y.dtype == np.int32 and batch[0].shape == (8, 28, 28, 1)


def test_delay_slows_every_batch_of_the_consumer():
    """The straggler's delay sits after prefetch: each batch handed out waits for it."""
    info = get_info("synthetic")
    ds = inputs.train_dataset(info, 64, 8, seed=3, delay_us=100_000)
    start = time.perf_counter()
    batches = list(ds.take(4))
    assert len(batches) == 4 and time.perf_counter() - start >= 0.4
    plain = inputs.train_dataset(info, 64, 8, seed=3, delay_us=0)
    assert np.array_equal(next(iter(plain))[1].numpy().shape, (8,))  # 0: no delay, same batches


def test_synthetic_tokens_are_deterministic_ids_in_the_vocabulary():
    info = get_info("synthetic_tokens")
    x1, y1 = _arrays(inputs.examples(info, "train", 256, seed=1))
    x2, y2 = _arrays(inputs.examples(info, "train", 256, seed=1))
    assert x1.shape == (256, 64) and x1.dtype == np.int32 and np.array_equal(x1, x2)
    assert np.array_equal(y1, y2) and set(y1) == {0, 1, 2, 3}
    assert 0 <= x1.min() and x1.max() < info.vocab_size
    # A batch touches thousands of distinct rows of the table: a sparse gradient.
    assert len(np.unique(x1[:64])) > 2000
    # Learnable: each class's topic words (half of its tokens) recur within the class.
    counts = [np.bincount(x1[y1 == c].ravel(), minlength=info.vocab_size) for c in range(4)]
    top = [set(np.argsort(c)[-32:]) for c in counts]
    assert all(len(top[a] & top[b]) == 0 for a in range(4) for b in range(a + 1, 4))

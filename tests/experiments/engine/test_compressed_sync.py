"""Gradient compression (experiments/engine/compressed_sync.py) on one replica: what it sends and
what it keeps back (error feedback). The exchange between real replicas is tested on clusters
(tests/integration/test_compression.py)."""
import numpy as np
import pytest
import tensorflow as tf

from experiments.engine import compressed_sync
from strategies.compression import parse


def _run(spec, grads_per_step, shapes):
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        variables = [tf.Variable(tf.zeros(s, tf.float64)) for s in shapes]
    reducer = compressed_sync.Reducer(spec, strategy)
    reducer.build(variables)
    step = tf.function(lambda g: strategy.run(reducer, args=(g,)))
    sent = [[t.numpy() for t in step([tf.constant(g) for g in grads])]
            for grads in grads_per_step]
    residual = [r.values[0].numpy() if hasattr(r, "values") else r.numpy()
                for r in reducer._residual]
    return sent, residual


SHAPES = [(6, 5), (5,), (3, 4, 2)]


def _grads(steps=4, seed=0):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s) * 10 ** rng.uniform(-3, 1) for s in SHAPES]
            for _ in range(steps)]


@pytest.mark.parametrize("spec", ["int8", "topk:0.1", "powersgd:1"])
def test_error_feedback_loses_nothing_it_only_delays_it(spec):
    """Over any number of steps, what was sent plus what is kept back is what was computed."""
    grads = _grads()
    sent, residual = _run(parse(spec), grads, SHAPES)
    for t in range(len(SHAPES)):
        computed = sum(g[t] for g in grads)
        np.testing.assert_allclose(sum(s[t] for s in sent) + residual[t], computed,
                                   rtol=1e-9, atol=1e-9)


def test_each_method_sends_what_it_says():
    (int8,), _ = _run(parse("int8"), _grads(1), SHAPES)
    g = _grads(1)[0]
    for sent, grad in zip(int8, g):  # within half a quantization step of its tensor's scale
        assert np.max(np.abs(sent - grad)) <= np.max(np.abs(grad)) / 127 / 2 * (1 + 1e-6)
    (topk,), _ = _run(parse("topk:0.1"), _grads(1), SHAPES)
    assert [np.count_nonzero(s) for s in topk] == [3, 1, 3]  # ceil(0.1 x size), at least 1
    big = np.abs(g[0]).ravel() >= np.sort(np.abs(g[0]).ravel())[-3]
    np.testing.assert_array_equal(topk[0].ravel()[big], g[0].ravel()[big])
    (exact,), _ = _run(parse("topk:1"), _grads(1), SHAPES)
    for sent, grad in zip(exact, g):
        np.testing.assert_array_equal(sent, grad)
    (low,), _ = _run(parse("powersgd:1"), _grads(1), SHAPES)
    assert np.linalg.matrix_rank(low[0], tol=1e-9) == 1  # a rank-1 matrix
    np.testing.assert_array_equal(low[1], g[1])  # vectors go as they are


def test_an_embedding_table_keeps_no_residual_and_goes_as_it_is():
    """A table's IndexedSlices are all-reduced as they are; so is a dense gradient of a variable
    built as a table; only the other dense gradients are compressed, and only they hold state."""
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        table, kernel, other = (tf.Variable(tf.zeros(s, tf.float64))
                                for s in ((100, 4), (6, 5), (3,)))
    reducer = compressed_sync.Reducer(parse("int8"), strategy)
    reducer.build([table, kernel, other], sparse={id(table), id(other)})
    assert reducer._residual[0] is None and reducer._residual[2] is None
    rows = tf.IndexedSlices(tf.ones((2, 4), tf.float64), tf.constant([3, 7]),
                            tf.constant([100, 4]))
    dense = np.random.default_rng(1).standard_normal((6, 5))
    out = strategy.run(reducer, args=([rows, tf.constant(dense), tf.constant([1.0, 2, 3],
                                                                          tf.float64)],))
    out = [strategy.experimental_local_results(o)[0] for o in out]
    np.testing.assert_array_equal(tf.convert_to_tensor(out[0]).numpy()[[3, 7]], np.ones((2, 4)))
    assert np.max(np.abs(out[1].numpy() - dense)) <= np.max(np.abs(dense)) / 254 * (1 + 1e-6)
    np.testing.assert_array_equal(out[2].numpy(), [1.0, 2, 3])
    assert reducer.dense_shapes == [(6, 5)]

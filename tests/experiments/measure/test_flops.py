"""Achieved compute (experiments/measure/flops.py): FLOPs counted from a model's graph, the
matmul peak, and the record's summary."""
import keras
import pytest

from experiments.measure import flops


def test_forward_flops_of_dense_layers_are_their_multiply_adds_and_biases():
    inputs = keras.Input((10,))
    x = keras.layers.Dense(5, activation="relu")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(3)(x))
    # MatMul 2 x 10 x 5 and 2 x 5 x 3 (a multiply and an add each), BiasAdd 5 and 3
    assert flops.forward_flops_per_example(model) == 2 * 10 * 5 + 5 + 2 * 5 * 3 + 3


def test_a_conv_counts_per_output_position():
    inputs = keras.Input((8, 8, 1))
    model = keras.Model(inputs, keras.layers.Conv2D(4, 3, padding="same", use_bias=False)(inputs))
    assert flops.forward_flops_per_example(model) == 2 * 8 * 8 * 4 * 3 * 3 * 1


def test_a_model_without_a_fixed_input_counts_nothing():
    class Free(keras.Model):
        def call(self, x):
            return x

    assert flops.forward_flops_per_example(Free()) is None
    inputs = keras.Input((None, 3))
    assert flops.forward_flops_per_example(keras.Model(inputs, keras.layers.Dense(2)(inputs))) \
        is None


def test_matmul_peak_is_a_rate():
    small = flops.matmul_peak(n=128, repeats=3)
    assert 1e6 < small < 1e14  # FLOP/s: more than a megaflop, less than a hundred teraflops


def test_summary_is_training_flops_against_the_peak_of_the_processes():
    out = flops.summary(1000, examples_per_sec=2000.0, peak_per_process=1e7, processes=2)
    assert out["train_flops_per_example"] == 3000
    assert out["achieved_flops_per_sec"] == 6e6 and out["peak_flops_per_sec"] == 2e7
    assert out["share_of_peak"] == pytest.approx(0.3)
    assert flops.summary(None, 2000.0, 1e7, 1) is None


def test_attention_counts_its_einsums():
    """Keras's attention runs on Einsum, for which TensorFlow registers no FLOPs: counted here.
    T=8 tokens of width 16, 2 heads of 8: the Q, K and V projections 3 x 2 x 8 x 16 x 16, the
    scores and the weighted sum 2 x (2 x 8 x 8 x 8), the output projection 2 x 8 x 16 x 16."""
    inputs = keras.Input((8, 16))
    model = keras.Model(inputs, keras.layers.MultiHeadAttention(2, 8)(inputs, inputs))
    einsums = 3 * 2 * 8 * 16 * 16 + 2 * (2 * 2 * 8 * 8 * 8) + 2 * 8 * 16 * 16
    counted = flops.forward_flops_per_example(model)
    assert einsums <= counted <= 1.2 * einsums  # plus biases, scaling and the softmax

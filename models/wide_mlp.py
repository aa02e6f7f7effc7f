"""A wide MLP: the communication-bound case. Three hidden layers of 2048 units on flattened
images: 10.0 M parameters on 28x28x1 (40 MB of float32 gradients every step), 14.7 M on 32x32x3
(59 MB), for ~2 FLOPs per parameter per example forward: at small batches a step computes little
and synchronizes a lot, so all-reduce and parameter-server bandwidth decide.
"""
import keras


def build_wide_mlp(input_shape, num_classes, width=2048, depth=3):
    inputs = keras.Input(shape=tuple(input_shape))
    x = keras.layers.Flatten()(inputs)
    for _ in range(depth):
        x = keras.layers.Dense(width, activation="relu")(x)
    outputs = keras.layers.Dense(num_classes)(x)
    return keras.Model(inputs, outputs, name="wide_mlp")

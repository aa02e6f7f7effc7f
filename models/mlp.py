"""A two-hidden-layer MLP on flattened images: the cheap-compute, communication-heavy case."""
import keras


def build_mlp(input_shape, num_classes, hidden=(256, 128)):
    inputs = keras.Input(shape=tuple(input_shape))
    x = keras.layers.Flatten()(inputs)
    for width in hidden:
        x = keras.layers.Dense(width, activation="relu")(x)
    outputs = keras.layers.Dense(num_classes)(x)
    return keras.Model(inputs, outputs, name="mlp")

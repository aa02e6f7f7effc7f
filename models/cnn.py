"""A small LeNet-style CNN: the compute-heavy case (more FLOPs per parameter than the MLP)."""
import keras


def build_cnn(input_shape, num_classes, batchnorm=False, sync_batchnorm=False):
    """Two conv blocks and a dense head.

    With `batchnorm`, each conv is followed by BatchNormalization; `sync_batchnorm` makes its
    statistics global across replicas (otherwise each replica normalizes with its own batch,
    tensorflow#18222), at the cost of one extra all-reduce per BN layer per step.
    """
    inputs = keras.Input(shape=tuple(input_shape))
    x = inputs
    for filters in (32, 64):
        x = keras.layers.Conv2D(filters, 3, padding="same", use_bias=not batchnorm)(x)
        if batchnorm:
            x = keras.layers.BatchNormalization(synchronized=sync_batchnorm)(x)
        x = keras.layers.Activation("relu")(x)
        x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(128, activation="relu")(x)
    outputs = keras.layers.Dense(num_classes)(x)
    return keras.Model(inputs, outputs, name="cnn_bn" if batchnorm else "cnn")

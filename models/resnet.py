"""ResNet-20 for 32x32x3 images (He et al. 2016, section 4.2; the CIFAR ResNet of the TF Model
Garden and tf_cnn_benchmarks): the compute-heavy case. About 0.27 M parameters (1.1 MB of
gradients) but ~41 MFLOPs per image forward, so a step is long and its synchronization short.

Three stages of 3 basic blocks (16, 32, 64 filters; stride 2 at the start of stages 2 and 3,
projection shortcuts there), BatchNormalization after every convolution, global average pooling
and a dense head. `sync_batchnorm` synchronizes BN statistics across replicas (one extra
all-reduce per BN layer per step).
"""
import keras


def _conv_bn(x, filters, kernel, strides, sync_batchnorm):
    x = keras.layers.Conv2D(filters, kernel, strides=strides, padding="same", use_bias=False,
                            kernel_initializer="he_normal")(x)
    # momentum 0.9 (Keras: 0.99): the moving statistics evaluation uses settle within the few
    # hundred steps of a comparison run; at 0.99 a short run evaluates with near-initial ones.
    return keras.layers.BatchNormalization(momentum=0.9, synchronized=sync_batchnorm)(x)


def build_resnet(input_shape, num_classes, depth=20, sync_batchnorm=False):
    if (depth - 2) % 6:
        raise ValueError(f"ResNet depth {depth} is not 6n+2 (20, 32, 44, 56, 110)")
    blocks = (depth - 2) // 6
    inputs = keras.Input(shape=tuple(input_shape))
    x = keras.layers.Activation("relu")(_conv_bn(inputs, 16, 3, 1, sync_batchnorm))
    for stage, filters in enumerate((16, 32, 64)):
        for block in range(blocks):
            strides = 2 if stage > 0 and block == 0 else 1
            y = keras.layers.Activation("relu")(_conv_bn(x, filters, 3, strides, sync_batchnorm))
            y = _conv_bn(y, filters, 3, 1, sync_batchnorm)
            shortcut = x if strides == 1 else _conv_bn(x, filters, 1, strides, sync_batchnorm)
            x = keras.layers.Activation("relu")(keras.layers.Add()([y, shortcut]))
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(num_classes)(x)
    return keras.Model(inputs, outputs, name=f"resnet{depth}")

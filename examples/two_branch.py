"""A user's own model and data, the way the toolkit takes them: a functional Keras model with two
input branches merged, and a dataset function yielding a dict of two features.

    python -m experiments.run --model=examples.two_branch:build_model \
        --dataset=examples.two_branch:make_dataset --train_examples=1024 --eval_examples=256
    python -m experiments.run --strategy=parameter_server --num_workers=2 --num_ps=1 \
        --model=examples.two_branch:build_model --dataset=examples.two_branch:make_dataset \
        --train_examples=1024 --eval_examples=256

Run from the repository root (the module is imported from the current directory, in every task).
"""
import keras
import tensorflow as tf

NUM_CLASSES = 4
WIDTH = 16  # features per branch


def build_model(input_shape, num_classes):
    """input_shape is {"left": (16,), "right": (16,)}: the dataset's feature shapes."""
    left = keras.Input(shape=input_shape["left"], name="left")
    right = keras.Input(shape=input_shape["right"], name="right")
    merged = keras.layers.Concatenate()([keras.layers.Dense(32, activation="relu")(left),
                                         keras.layers.Dense(32, activation="relu")(right)])
    logits = keras.layers.Dense(num_classes)(keras.layers.Dense(32, activation="relu")(merged))
    return keras.Model({"left": left, "right": right}, logits, name="two_branch")


def make_dataset(split, input_context):
    """Example i: a class's prototype plus noise, its two halves as two features. Made by TF ops
    from (split, i) alone, so every task (and every parameter-server worker) makes the same."""
    prototypes = tf.random.stateless_normal((NUM_CLASSES, 2 * WIDTH), seed=[7, 0])
    split_id = 1 if split == "train" else 2

    def example(i):
        key = tf.stack([tf.constant(split_id, tf.int64), i])
        label = tf.random.stateless_uniform([], key, 0, NUM_CLASSES, dtype=tf.int32)
        x = tf.gather(prototypes, label) + tf.random.stateless_normal([2 * WIDTH], key + 1)
        return {"left": x[:WIDTH], "right": x[WIDTH:]}, label

    size = 65536 if split == "train" else 8192
    return {"dataset": tf.data.Dataset.range(size).map(example), "num_classes": NUM_CLASSES,
            "size": size}

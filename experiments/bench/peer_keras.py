"""A plain Keras training script, written the way the TensorFlow tutorials write one (`model.fit`),
on the same model, data and batch as the toolkit: the peer that `experiments.bench.peer` compares
the toolkit's own loop against.

    python -m experiments.bench.peer_keras --model=cnn --epochs=4 --train_examples=16384 --batch=128 [--mirrored=2]

Prints one JSON line: per-epoch times and examples/s (first epoch included, as in a record).
"""
import json
import time

from experiments.engine import tf_settings

tf_settings.apply()  # the toolkit's TensorFlow settings: only the training loop differs

from absl import app, flags  # noqa: E402

from models import MODELS  # noqa: E402

_MODEL = flags.DEFINE_enum("model", "cnn", list(MODELS), "Model.")
_EPOCHS = flags.DEFINE_integer("epochs", 4, "Epochs.", lower_bound=2)
_TRAIN = flags.DEFINE_integer("train_examples", 16384, "Examples per epoch.", lower_bound=1)
_BATCH = flags.DEFINE_integer("batch", 128, "Global batch size.", lower_bound=1)
_MIRRORED = flags.DEFINE_integer("mirrored", 0, "MirroredStrategy over N logical CPUs (0: off).")
_SEED = flags.DEFINE_integer("seed", 42, "Data seed.")


def main(argv):
    del argv
    import keras
    import tensorflow as tf

    from experiments.workload import inputs
    from experiments.workload.datasets import get_info
    from models import default_dataset
    from models.registry import build

    if _MIRRORED.value:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * _MIRRORED.value)
        strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(_MIRRORED.value)])
    else:
        strategy = tf.distribute.get_strategy()
    info = get_info(default_dataset(_MODEL.value))  # what experiments.run trains it on
    ds = (inputs.examples(info, "train", _TRAIN.value, _SEED.value).cache()
          .shuffle(_TRAIN.value).batch(_BATCH.value, drop_remainder=True)
          .prefetch(tf.data.AUTOTUNE))
    with strategy.scope():
        model = build(_MODEL.value, info.image_shape, info.num_classes)
        model.compile(optimizer=keras.optimizers.SGD(0.02, momentum=0.9),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])

    class EpochTimer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.times.append(time.perf_counter() - self.start)

    timer = EpochTimer()
    timer.times = []
    model.fit(ds, epochs=_EPOCHS.value, verbose=2, callbacks=[timer])
    examples = (_TRAIN.value // _BATCH.value) * _BATCH.value
    print(json.dumps({"epoch_times_s": timer.times,
                      "examples_per_sec": [examples / t for t in timer.times]}))


if __name__ == "__main__":
    app.run(main)

"""Your own model, and the check every model passes before training.

    python -m experiments.run --model=examples.two_branch:build_model \
        --dataset=examples.two_branch:make_dataset --train_examples=1024
    python -m experiments.run --model=path/to/model.keras --model_weights=fresh   # or saved

--model=MODULE:FUNCTION: called inside `strategy.scope()` as FUNCTION(input_shape, num_classes)
and returns an *uncompiled* keras.Model mapping features to logits of shape (batch,
num_classes). input_shape is the dataset's feature shape without the batch dimension: a tuple,
or, for structured features (a dict or tuple of tensors), the same structure of tuples. The
toolkit compiles nothing: loss (sparse categorical cross-entropy on logits), optimizer and
metrics are its own, as for the built-in models.

--model=PATH.keras: a model saved with `model.save("x.keras")`. Its architecture is used, and
its weights according to --model_weights: `fresh` (the default) re-initializes every weight from
--seed, so every strategy starts from the same point a built-in model would; `saved` starts from
the saved weights (fine-tuning). Custom layers must be registered (keras.saving) by a module the
command imports.

Every model, built-in or yours, is then called once on a batch of two eval examples: anything it
raises, or logits not shaped (2, num_classes), stops the run with one line and exit code 2
before any step (each task that builds the model checks; the chief writes nothing).
"""
import json
import zipfile

import keras
import tensorflow as tf

from experiments.workload import user_code
from experiments.workload.user_code import UserCodeError
from models import MODELS
from models.registry import build as build_builtin

WEIGHTS = ("fresh", "saved")


def _from_keras_file(path, weights):
    """The saved model's architecture, with fresh weights (built from its config.json, so no
    saved weight is ever read) or the saved ones."""
    try:
        if weights == "saved":
            return keras.saving.load_model(path, compile=False)
        with zipfile.ZipFile(path) as archive:
            config = json.loads(archive.read("config.json"))
        return keras.saving.deserialize_keras_object(config)
    except Exception as e:
        raise UserCodeError(f"--model={path} cannot be loaded: {type(e).__name__}: "
                            f"{user_code._first_line(e)}") from None


def build(name, input_shape, num_classes, batchnorm=False, sync_batchnorm=False,
          weights="fresh", tensor_parallel=1):
    """A built-in model by name, or the user's (MODULE:FUNCTION, PATH.keras). Call inside
    strategy.scope(). UserCodeError when the user's builder fails or returns no model, or
    when tensor_parallel cannot split it."""
    if name in MODELS:
        try:
            return build_builtin(name, input_shape, num_classes, batchnorm=batchnorm,
                                 sync_batchnorm=sync_batchnorm, tensor_parallel=tensor_parallel)
        except ValueError as e:  # a built-in model that cannot read these features
            raise UserCodeError(f"--model={name}: {e}") from None
    if name.endswith(".keras"):
        model = _from_keras_file(name, weights)
    else:
        builder = user_code.load_reference("model", name)
        model = user_code.call_user("model", name, builder, input_shape, num_classes)
    if not isinstance(model, keras.Model):
        raise UserCodeError(f"--model={name} returned an object of type "
                            f"{type(model).__name__}, not a keras.Model")
    return model


def check_logits(model, name, features, num_classes):
    """Calls `model` on a batch of `features`; UserCodeError unless logits are (batch,
    num_classes). Run before training, outside any replica context."""
    batch = int(tf.nest.flatten(features)[0].shape[0])
    try:
        logits = model(features, training=False)
    except Exception as e:
        raise UserCodeError(f"--model={name} fails on the dataset's features: "
                            f"{type(e).__name__}: {user_code._first_line(e)}") from None
    if isinstance(logits, (list, tuple, dict)) or not hasattr(logits, "shape"):
        raise UserCodeError(f"--model={name} returns {type(logits).__name__} outputs; expected "
                            f"one tensor of logits shaped (batch, {num_classes})")
    if tuple(logits.shape) != (batch, num_classes):
        raise UserCodeError(f"--model={name} returns logits of shape {tuple(logits.shape)} for a "
                            f"batch of {batch}; expected ({batch}, {num_classes}) = (batch, "
                            f"num_classes)")

"""Your own data: `--dataset=MODULE:FUNCTION`, the protocol and its checks.

    python -m experiments.run --dataset=examples.two_branch:make_dataset \
        --model=examples.two_branch:build_model --train_examples=1024 --eval_examples=256

FUNCTION(split, input_context) is called with split "train" or "eval" and a
tf.distribute.InputContext (num_input_pipelines, input_pipeline_id, num_replicas_in_sync), and
returns a dict (or an object with these attributes):

    dataset       an *unbatched* tf.data.Dataset of (features, label) pairs: features a tensor or
                  a dict/tuple of tensors of fixed shape, numbers (floats are cast to float32);
                  label a scalar integer class id in [0, num_classes)
    num_classes   int
    feature_shape optional: checked against the dataset (default: read from it)
    size          optional: examples in this split; --train_examples / --eval_examples may not
                  exceed it (without it, a smaller split is repeated to fill an epoch)
    sharded       optional, default False: the toolkit takes this pipeline's share by example
                  (ds.shard(num_input_pipelines, input_pipeline_id)); True: the dataset is
                  already this pipeline's share (e.g. its own files), taken as it is

The toolkit then does to it what it does to its own data (experiments/workload/inputs.py): take
--train_examples, shard, cache, shuffle, repeat, batch per replica, prefetch; the chief evaluates
on the first --eval_examples of the "eval" split. FUNCTION runs in every task that trains, so it
must give every task the same examples (seed it; read the same files). Under parameter_server
it is traced once on the chief and run as a graph on every worker: it must build the dataset
from TensorFlow ops (tf.data readers, from_tensor_slices of small arrays), and
input_context.input_pipeline_id is then a scalar int64 tensor (the worker's index), not an int.

Checked before the first step, each a one-line error and exit 2 with nothing written: FUNCTION
raising, a return without `dataset` / `num_classes`, a dataset that is not a tf.data.Dataset,
does not yield (features, label) pairs, has labels that are not scalar integers or features that
are not fixed-shape numbers, a wrong feature_shape, and (on the chief, over the examples a run
uses) labels outside [0, num_classes).
"""
import tensorflow as tf

from experiments.workload import user_code
from experiments.workload.datasets import FUNCTION, DatasetInfo
from experiments.workload.user_code import UserCodeError

FLAG = "dataset"


def _field(value, name):
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)


def _describe(spec):
    """A readable element spec: float32(28, 28, 1), {a: float32(3,)}, (int32(), int32())."""
    def one(s):
        if isinstance(s, tf.TensorSpec):
            return f"{s.dtype.name}{tuple(s.shape)}"
        return type(s).__name__
    if isinstance(spec, dict):
        return "{" + ", ".join(f"{k}: {_describe(v)}" for k, v in spec.items()) + "}"
    if isinstance(spec, (tuple, list)):
        return "(" + ", ".join(_describe(s) for s in spec) + ")"
    return one(spec)


def _shape_structure(value):
    """(28, 28, 1), [28, 28, 1] -> (28, 28, 1); dicts and tuples of shapes alike, recursively."""
    if isinstance(value, dict):
        return {k: _shape_structure(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)) and all(isinstance(v, int) for v in value):
        return tuple(value)
    if isinstance(value, (tuple, list)):
        return tuple(_shape_structure(v) for v in value)
    return value


def _check_spec(reference, split, spec):
    """(features spec, feature shape structure) of a valid element spec, else UserCodeError."""
    where = f"--dataset={reference} ({split} split)"
    if not isinstance(spec, (tuple, list)) or len(spec) != 2:
        raise UserCodeError(f"{where} yields {_describe(spec)}; expected (features, label) pairs")
    features, label = spec
    if not isinstance(label, tf.TensorSpec) or label.shape.rank not in (0, None) or not (
            label.dtype.is_integer):
        raise UserCodeError(f"{where} yields labels {_describe(label)}; expected a scalar "
                            f"integer class id (int32 or int64, shape ())")
    for leaf in tf.nest.flatten(features):
        if not isinstance(leaf, tf.TensorSpec):
            raise UserCodeError(f"{where} yields features {_describe(features)}; expected dense "
                                f"tensors (a {type(leaf).__name__} is not supported)")
        if not (leaf.dtype.is_floating or leaf.dtype.is_integer or leaf.dtype == tf.bool):
            raise UserCodeError(f"{where} yields features of dtype {leaf.dtype.name}; expected "
                                f"numbers (float or integer tensors)")
        if not leaf.shape.is_fully_defined():
            raise UserCodeError(f"{where} yields features of shape {tuple(leaf.shape)}; every "
                                f"example must have the same fixed shape (pad or resize)")
    return features, _shape_structure(tf.nest.map_structure(lambda s: s.shape.as_list(),
                                                            features))


def _standardized(ds):
    """Floats as float32 (Keras's default), labels as int32 (what the loss and metrics use)."""
    def cast(features, label):
        features = tf.nest.map_structure(
            lambda x: tf.cast(x, tf.float32) if x.dtype.is_floating or x.dtype == tf.bool
            else x, features)
        return features, tf.cast(tf.reshape(label, []), tf.int32)
    return ds.map(cast, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def _call(reference, split, input_context):
    """Calls FUNCTION and checks what it returned: (dataset, num_classes, shapes, size, sharded)."""
    function = user_code.load_reference(FLAG, reference)
    value = user_code.call_user(FLAG, reference, function, split, input_context)
    ds = _field(value, "dataset")
    num_classes = _field(value, "num_classes")
    if ds is None or num_classes is None:
        raise UserCodeError(f"--dataset={reference} returned {type(value).__name__} without "
                            f"{'dataset' if ds is None else 'num_classes'}; return "
                            f"{{'dataset': ..., 'num_classes': ...}} (experiments/workload/user_data.py)")
    if not isinstance(ds, tf.data.Dataset):
        raise UserCodeError(f"--dataset={reference}: 'dataset' is a {type(ds).__name__}, not a "
                            f"tf.data.Dataset")
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise UserCodeError(f"--dataset={reference}: num_classes={num_classes!r}; expected an "
                            f"int >= 2")
    _, shapes = _check_spec(reference, split, ds.element_spec)
    declared = _field(value, "feature_shape")
    if declared is not None:
        declared = tf.nest.map_structure(tuple, declared,
                                         check_types=False) if not isinstance(
            declared, tuple) else tuple(declared)
        if tf.nest.flatten(declared) != tf.nest.flatten(shapes) and declared != shapes:
            raise UserCodeError(f"--dataset={reference}: feature_shape={declared} but the "
                                f"dataset yields features of shape {shapes}")
    size = _field(value, "size")
    return ds, num_classes, shapes, int(size or 0), bool(_field(value, "sharded"))


def info(reference, input_context):
    """The DatasetInfo of FUNCTION's train split (it is called once here)."""
    _, num_classes, shapes, size, sharded = _call(reference, "train", input_context)
    return DatasetInfo(reference, shapes, num_classes, train_size=size, kind=FUNCTION,
                       source=reference, sharded=sharded)


def examples(info, split, count, input_context):
    """FUNCTION's split, checked and standardized, its first `count` examples (this pipeline's
    share of them when FUNCTION sharded by itself)."""
    ds, num_classes, shapes, size, _ = _call(info.source, split, input_context)
    if num_classes != info.num_classes or shapes != info.feature_shape:
        raise UserCodeError(f"--dataset={info.source}: the {split} split has {num_classes} "
                            f"classes and features {shapes}, the train split {info.num_classes} "
                            f"and {info.feature_shape}")
    flag = "train_examples" if split == "train" else "eval_examples"
    if size and count > size:
        raise UserCodeError(f"--{flag}={count} exceeds the {size} examples of --dataset="
                            f"{info.source}'s {split} split")
    return _standardized(ds).take(count)


def check_labels(ds, reference, split, num_classes):
    """One pass over the labels of `ds` (unbatched, standardized): UserCodeError when any is
    outside [0, num_classes). The chief runs it before training."""
    low_high = ds.map(lambda x, y: y).batch(4096).reduce(
        tf.constant([2 ** 31 - 1, -2 ** 31], tf.int32),
        lambda acc, y: tf.stack([tf.minimum(acc[0], tf.reduce_min(y)),
                                 tf.maximum(acc[1], tf.reduce_max(y))]))
    low, high = (int(v) for v in low_high.numpy())
    if low < 0 or high >= num_classes:
        raise UserCodeError(f"--dataset={reference} ({split} split) has labels from {low} to "
                            f"{high}; labels must be class ids in [0, num_classes={num_classes})")

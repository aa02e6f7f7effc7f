"""Arrays as a dataset: `--dataset=path/to/data.npz`.

    np.savez("data.npz", x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
    python -m experiments.run --dataset=data.npz --model=mlp --train_examples=1000 \
        --eval_examples=200

The file holds four arrays: x_train (N, ...features), y_train (N,), x_test (M, ...), y_test (M,).
Features are numbers: float, bool and uint8 (images) become float32, as given (no rescaling);
other integer types become int32 (token ids for an embedding). Labels are integer class ids
0..num_classes-1, and num_classes is the largest label + 1 (or an optional scalar `num_classes`
array in the file). --train_examples / --eval_examples may not exceed N / M. Everything is
checked here with NumPy, before TensorFlow starts, and a bad file stops the run with one line
(exit 2). Every task of a cluster reads the file itself: the
same path must work in each (same working directory locally; in the image for Vertex / TFJob).
The arrays become a tf.data pipeline in experiments/workload/inputs.py, embedded in the graph: keep the
file well below 2 GB (a larger one needs a MODULE:FUNCTION dataset reading files).
"""
import functools
import os
import zipfile

import numpy as np

from experiments.workload.datasets import NPZ, DatasetInfo
from experiments.workload.user_code import UserCodeError

KEYS = ("x_train", "y_train", "x_test", "y_test")


def _bad(path, why):
    return UserCodeError(f"--dataset={path}: {why}")


@functools.lru_cache(maxsize=4)
def read(path):
    """Returns {x_train, y_train, x_test, y_test, num_classes}, checked; UserCodeError (one line)
    for a missing or unreadable file, missing keys, mismatched lengths or shapes, non-numeric
    features, and labels that are not integers in [0, num_classes)."""
    if not os.path.isfile(path):
        raise _bad(path, "no such file")
    if not zipfile.is_zipfile(path):
        raise _bad(path, "not an .npz archive (write it with np.savez(path, x_train=..., "
                         "y_train=..., x_test=..., y_test=...))")
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = [k for k in KEYS if k not in data.files]
            if missing:
                raise _bad(path, f"missing array(s) {', '.join(missing)}; an .npz dataset holds "
                                 f"{', '.join(KEYS)}")
            arrays = {k: data[k] for k in KEYS}
            declared = data["num_classes"] if "num_classes" in data.files else None
    except UserCodeError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise _bad(path, f"cannot be read as an .npz file ({text}; write it with np.savez)") \
            from None
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if x.ndim < 1 or len(x) == 0:
            raise _bad(path, f"x_{split} is empty")
        if len(x) != len(y):
            raise _bad(path, f"x_{split} has {len(x)} examples but y_{split} has {len(y)} labels")
        if not (np.issubdtype(x.dtype, np.number) or x.dtype == bool):
            raise _bad(path, f"x_{split} has dtype {x.dtype}; features must be numbers")
        if y.ndim != 1 and not (y.ndim == 2 and y.shape[1] == 1):
            raise _bad(path, f"y_{split} has shape {y.shape}; labels are one class id per "
                             f"example, shape ({len(y)},)")
        if not np.issubdtype(y.dtype, np.integer):
            if not np.issubdtype(y.dtype, np.floating) or not np.all(np.mod(y, 1) == 0):
                raise _bad(path, f"y_{split} has dtype {y.dtype} and non-integer values; labels "
                                 f"are integer class ids (one-hot labels: use argmax)")
    if arrays["x_train"].shape[1:] != arrays["x_test"].shape[1:]:
        raise _bad(path, f"x_train examples are {arrays['x_train'].shape[1:]} but x_test "
                         f"examples are {arrays['x_test'].shape[1:]}")
    labels = np.concatenate([arrays["y_train"].ravel(), arrays["y_test"].ravel()])
    num_classes = int(declared) if declared is not None else int(labels.max()) + 1
    low, high = labels.min(), labels.max()
    if low < 0 or high >= num_classes or num_classes < 2:
        raise _bad(path, f"labels must be class ids in [0, num_classes={num_classes}) with at "
                         f"least 2 classes; found labels from {low:g} to {high:g}")
    for split in ("train", "test"):
        arrays[f"y_{split}"] = arrays[f"y_{split}"].reshape(-1).astype(np.int32)
        x = arrays[f"x_{split}"]
        ids = np.issubdtype(x.dtype, np.integer) and x.dtype != np.uint8
        arrays[f"x_{split}"] = x.astype(np.int32 if ids else np.float32)
    arrays["num_classes"] = num_classes
    return arrays


def info(path):
    """The DatasetInfo of an .npz file (read and checked)."""
    arrays = read(path)
    return DatasetInfo(path, tuple(arrays["x_train"].shape[1:]), arrays["num_classes"],
                       train_size=len(arrays["x_train"]), eval_size=len(arrays["x_test"]),
                       kind=NPZ, source=path)

"""The datasets the toolkit knows, by name: shapes, classes, where they come from.

No TensorFlow here, so names can be checked before TF starts; pipelines are in
`experiments/pipeline.py`.
"""
import dataclasses


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    name: str
    image_shape: tuple
    num_classes: int
    tfds_name: str = ""  # empty for built-in synthetic sets
    train_split: str = "train"
    eval_split: str = "test"
    train_size: int = 0  # examples available; 0 = unbounded (synthetic)
    eval_size: int = 0


DATASETS = {
    "synthetic": DatasetInfo("synthetic", (28, 28, 1), 10),
    "synthetic_cifar": DatasetInfo("synthetic_cifar", (32, 32, 3), 10),
    "mnist": DatasetInfo("mnist", (28, 28, 1), 10, "mnist", train_size=60000, eval_size=10000),
    "fashion_mnist": DatasetInfo("fashion_mnist", (28, 28, 1), 10, "fashion_mnist",
                                 train_size=60000, eval_size=10000),
    "cifar10": DatasetInfo("cifar10", (32, 32, 3), 10, "cifar10", train_size=50000,
                           eval_size=10000),
}


def get_info(name):
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; valid datasets: {', '.join(DATASETS)}")
    return DATASETS[name]

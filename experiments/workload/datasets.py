"""The datasets the toolkit knows, by name: shapes, classes, where they come from.

No TensorFlow here, so names can be checked before TF starts; pipelines are in
`experiments/workload/inputs.py`.

    synthetic, synthetic_cifar   images from TF ops, deterministic from --seed (28x28x1, 32x32x3)
    synthetic_tokens             token-id sequences (64 ids from a 100,000-word vocabulary, 4
                                 classes), deterministic from --seed: the embedding model's data
    synthetic_sequences          32 token ids from a 64-token vocabulary following a fixed
                                 successor table (with 10% noise); the label is the token after
                                 them: the GPT's next-token task
    python_text                  32 characters of the Python standard library's own source (real
                                 text, no download: experiments/workload/text_corpus.py); the
                                 label is the next character (128 ASCII codes)
    mnist, fashion_mnist, cifar10   through tfds.load (--data_dir)
    PATH.npz                     your arrays (experiments/workload/npz_data.py)
    MODULE:FUNCTION              your tf.data pipeline (experiments/workload/user_data.py)
"""
import dataclasses

# What a DatasetInfo's examples are made from (experiments/workload/inputs.py dispatches on it).
IMAGES, TOKENS, TFDS, NPZ, FUNCTION = "synthetic_images", "synthetic_tokens", "tfds", "npz", \
    "function"
SEQUENCES = "synthetic_sequences"
TEXT = "text"


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    name: str
    feature_shape: tuple  # one example's features without the batch dimension
    num_classes: int
    tfds_name: str = ""  # TFDS sets only
    train_split: str = "train"
    eval_split: str = "test"
    train_size: int = 0  # examples available; 0 = unbounded (synthetic) or unknown
    eval_size: int = 0
    kind: str = IMAGES
    vocab_size: int = 0  # synthetic tokens: ids are in [0, vocab_size)
    # Your data: the .npz path or MODULE:FUNCTION, and whether FUNCTION shards by itself.
    source: str = ""
    sharded: bool = False

    @property
    def image_shape(self):  # the name from when every dataset was a set of images
        return self.feature_shape


DATASETS = {
    "synthetic": DatasetInfo("synthetic", (28, 28, 1), 10),
    "synthetic_cifar": DatasetInfo("synthetic_cifar", (32, 32, 3), 10),
    "synthetic_tokens": DatasetInfo("synthetic_tokens", (64,), 4, kind=TOKENS,
                                    vocab_size=100_000),
    "synthetic_sequences": DatasetInfo("synthetic_sequences", (32,), 64, kind=SEQUENCES,
                                       vocab_size=64),
    "python_text": DatasetInfo("python_text", (32,), 128, kind=TEXT, vocab_size=128),
    "mnist": DatasetInfo("mnist", (28, 28, 1), 10, "mnist", train_size=60000, eval_size=10000,
                         kind=TFDS),
    "fashion_mnist": DatasetInfo("fashion_mnist", (28, 28, 1), 10, "fashion_mnist",
                                 train_size=60000, eval_size=10000, kind=TFDS),
    "cifar10": DatasetInfo("cifar10", (32, 32, 3), 10, "cifar10", train_size=50000,
                           eval_size=10000, kind=TFDS),
}


def is_user_dataset(name):
    """PATH.npz or MODULE:FUNCTION rather than a built-in name."""
    return name not in DATASETS and (name.endswith(".npz") or ":" in name)


def get_info(name):
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; valid datasets: {', '.join(DATASETS)}")
    return DATASETS[name]

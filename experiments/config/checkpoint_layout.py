"""How a --checkpoint_dir was written, read without TensorFlow, and the one line that refuses a
run which cannot resume it: --zero's optimizer shards (experiments/engine/zero.py writes them),
and the tensor split and dataset the chief notes in its state digest
(experiments/engine/checkpoints.py).

validation.py refuses such a run before anything starts, so a local cluster is not launched only
to be turned away; every task checks again with tf.io.gfile as it restores (a gs:// directory,
and a rank's shard of the model's step, whose number only TensorFlow reads).
"""
import json
import os
import re

from results.records.store import is_url

SHARD_DIR = "zero"  # --zero=1: <checkpoint_dir>/zero/rank<R>-of<N>/shard-<step>.*
DIGEST = "state_digest.json"  # the chief's digest of what it saved, with its tensor split
STATE = "checkpoint"  # tf.train.CheckpointManager's list of checkpoints: one exists


def rank_dir(directory, rank, workers):
    """Where rank `rank` of `workers` keeps its optimizer shards."""
    return os.path.join(directory, SHARD_DIR, f"rank{rank}-of{workers}")


def shardings(names):
    """The numbers of workers that shard directories named `names` (rankR-ofN) were written
    over, sorted; other names (a stray file) are not shards."""
    found = (re.fullmatch(r"rank\d+-of(\d+)", name.rstrip("/")) for name in names)
    return sorted({int(m.group(1)) for m in found if m})


def _latest(directory):
    """Whether the checkpoint the manager's state file names is there (as
    tf.train.latest_checkpoint would find it): its .index file."""
    try:
        with open(os.path.join(directory, STATE)) as f:
            found = re.search(r'^model_checkpoint_path:\s*"(.*)"', f.read(), re.M)
    except OSError:
        return False
    if not found:
        return False
    # an absolute path (older TF wrote them) replaces `directory` in the join
    return os.path.exists(os.path.join(directory, found.group(1)) + ".index")


def zero_refusal(directory, over, workers):
    """The line refusing to resume `directory`, whose optimizer state was sharded over each
    number of workers in `over` ([]: not sharded), with --zero=1 over `workers` (None: without
    --zero); None when the sharding matches."""
    if workers is None:
        return None if not over else (
            f"{directory} was written with --zero=1 over {over[-1]} workers, each holding part "
            f"of the optimizer state; resume with --zero=1 --num_workers={over[-1]}")
    if workers in over:
        return None
    return f"{directory} was written " + (
        f"with --zero=1 over {over[-1]} workers; resume with --num_workers={over[-1]}" if over
        else "without --zero (one optimizer state, not shards); resume without --zero") + \
        f", not --zero=1 over {workers}"


def split_refusal(directory, saved, tensor_parallel):
    """The line refusing to resume `directory`, whose weights were split over `saved` devices
    (None: a digest from before splits were noted, taken as it is), with --tensor_parallel=
    `tensor_parallel`; None when they match."""
    if saved is None or saved == tensor_parallel:
        return None
    return (f"{directory} was written with --tensor_parallel={saved} (its weights in {saved} "
            f"shard(s)); resume with --tensor_parallel={saved}, not {tensor_parallel}, or use "
            f"another --checkpoint_dir")


def data_refusal(directory, saved, dataset):
    """The line refusing to resume `directory`, whose run trained `saved` (None: a digest from
    before datasets were noted, taken as it is), with --dataset=`dataset` (None: not checked):
    its weights and epochs are another data's (a run without --dataset trains the model's own,
    e.g. resnet synthetic_cifar, where older versions trained synthetic); None when they
    match."""
    if saved is None or dataset is None or saved == dataset:
        return None
    return (f"{directory} was written training --dataset={saved}; resume with "
            f"--dataset={saved}, not {dataset}, or use another --checkpoint_dir")


def digest_refusal(directory, digest, tensor_parallel, dataset):
    """The first line refusing to resume `directory` whose chief's state digest is `digest`
    (the saved tensor split, then the saved dataset); None when both match."""
    return split_refusal(directory, digest.get("tensor_parallel"), tensor_parallel) or \
        data_refusal(directory, digest.get("dataset"), dataset)


def refusal(directory, zero_workers, tensor_parallel, dataset=None):
    """The first line refusing to resume a local `directory` as a run of --zero over
    `zero_workers` (None: no --zero), --tensor_parallel=`tensor_parallel` and --dataset=
    `dataset` (None: not checked) would; None when it holds no checkpoint yet, is a URL (the
    tasks read it), or nothing here refuses it. A digest that cannot be read is left to the
    tasks, which fail on it with the file named."""
    if not directory or is_url(directory) or not _latest(directory):
        return None
    root = os.path.join(directory, SHARD_DIR)
    over = shardings(os.listdir(root)) if os.path.isdir(root) else []
    line = zero_refusal(directory, over, zero_workers)
    if line:
        return line
    try:
        with open(os.path.join(directory, DIGEST)) as f:
            digest = dict(json.load(f))
    except (OSError, ValueError, TypeError):
        return None
    return digest_refusal(directory, digest, tensor_parallel, dataset)

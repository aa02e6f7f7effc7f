"""experiments/config/checkpoint_layout.py: a --checkpoint_dir written with another --zero
sharding or tensor split is refused by validate(), before any task starts and without
TensorFlow; the tasks' own checks (engine/zero.py, engine/checkpoints.py) give the same lines."""
import json
import subprocess
import sys

import pytest

from experiments.config import ConfigError, RunConfig, checkpoint_layout, validate
from tests.helpers import ROOT


def _written(tmp_path, over=(), tensor_parallel=None, dataset=None):
    """A checkpoint directory as the toolkit leaves it: the manager's state file, a shard
    directory per rank of each number of workers in `over`, the digest (with a tensor split and
    a dataset)."""
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / checkpoint_layout.STATE).write_text('model_checkpoint_path: "ckpt-1"\n'
                                             'all_model_checkpoint_paths: "ckpt-1"\n')
    (d / "ckpt-1.index").write_text("")
    for n in over:
        for r in range(n):
            (d / checkpoint_layout.SHARD_DIR / f"rank{r}-of{n}").mkdir(parents=True)
    digest = {"weights": 1.0}
    if tensor_parallel is not None:
        digest["tensor_parallel"] = tensor_parallel
    if dataset is not None:
        digest["dataset"] = dataset
    (d / checkpoint_layout.DIGEST).write_text(json.dumps(digest))
    return d


def _cfg(tmp_path, d, **changes):
    return RunConfig(results_dir=str(tmp_path / "r"), checkpoint_dir=str(d), **changes)


MWMS = dict(strategy="multi_worker_mirrored", optimizer="adam")


@pytest.mark.parametrize("over, changes, line", [
    ((2,), dict(num_workers=3, zero=1, **MWMS),
     "was written with --zero=1 over 2 workers; resume with --num_workers=2, not --zero=1 over "
     "3"),
    ((2,), dict(num_workers=2, **MWMS),
     "was written with --zero=1 over 2 workers, each holding part of the optimizer state; "
     "resume with --zero=1 --num_workers=2"),
    ((2,), dict(strategy="parameter_server", num_workers=2, num_ps=1),
     "was written with --zero=1 over 2 workers, each holding part"),
    ((), dict(num_workers=2, zero=1, **MWMS),
     "was written without --zero (one optimizer state, not shards); resume without --zero, "
     "not --zero=1 over 2"),
])
def test_another_zero_sharding_is_refused_before_the_launch(tmp_path, over, changes, line):
    d = _written(tmp_path, over)
    with pytest.raises(ConfigError) as e:
        validate(_cfg(tmp_path, d, **changes))
    assert str(e.value).startswith(f"{d} {line}")
    assert "\n" not in str(e.value)


def test_the_same_sharding_and_split_pass(tmp_path):
    d = _written(tmp_path, over=(3, 2), tensor_parallel=1)  # both Ns' shards are read
    validate(_cfg(tmp_path, d, num_workers=2, zero=1, **MWMS))
    validate(_cfg(tmp_path, d, num_workers=3, zero=1, **MWMS))
    assert checkpoint_layout.refusal(str(d), 3, 1) is None


def test_another_tensor_split_is_refused_and_an_old_digest_is_taken(tmp_path):
    d = _written(tmp_path, tensor_parallel=2)
    with pytest.raises(ConfigError, match=r"was written with --tensor_parallel=2 \(its weights "
                                          r"in 2 shard\(s\)\); resume with --tensor_parallel=2, "
                                          r"not 1"):
        validate(_cfg(tmp_path, d, model="vit", strategy="model_parallel", num_stages=2))
    assert checkpoint_layout.split_refusal("d", None, 4) is None  # before splits were noted


def test_a_checkpoint_of_other_data_is_refused_and_an_old_digest_is_taken(tmp_path):
    # a resnet checkpoint written before runs defaulted to the model's own dataset
    d = _written(tmp_path, tensor_parallel=1, dataset="synthetic")
    with pytest.raises(ConfigError) as e:
        validate(_cfg(tmp_path, d, model="resnet"))  # trains synthetic_cifar now
    assert str(e.value) == (f"{d} was written training --dataset=synthetic; resume with "
                            f"--dataset=synthetic, not synthetic_cifar, or use another "
                            f"--checkpoint_dir")
    validate(_cfg(tmp_path, d, model="resnet", dataset="synthetic"))  # as it was written
    (tmp_path / "old").mkdir()
    validate(_cfg(tmp_path, _written(tmp_path / "old", tensor_parallel=1), model="resnet"))
    assert checkpoint_layout.data_refusal("d", None, "synthetic_cifar") is None
    # the split is named first where both differ
    (tmp_path / "both").mkdir()
    assert "--tensor_parallel=2" in checkpoint_layout.refusal(
        str(_written(tmp_path / "both", tensor_parallel=2, dataset="synthetic")), None, 1,
        "synthetic_cifar")


def test_nothing_is_refused_without_a_checkpoint_or_on_a_url(tmp_path):
    d = _written(tmp_path, over=(2,))
    (d / checkpoint_layout.STATE).unlink()  # shards of a run that never saved its model
    assert checkpoint_layout.refusal(str(d), None, 1) is None
    assert checkpoint_layout.refusal("gs://bucket/ckpt", None, 1) is None
    # a state file whose checkpoint is gone: the tasks start fresh (latest_checkpoint: None)
    (d / checkpoint_layout.STATE).write_text('model_checkpoint_path: "ckpt-7"\n')
    assert checkpoint_layout.refusal(str(d), None, 1) is None
    (d / checkpoint_layout.STATE).write_text('model_checkpoint_path: "ckpt-1"\n')
    assert "--zero=1 over 2 workers" in checkpoint_layout.refusal(str(d), None, 1)
    (d / checkpoint_layout.SHARD_DIR / "notes.txt").write_text("")  # a stray file: no shard
    assert checkpoint_layout.shardings(["rank0-of2", "rank1-of2/", "notes.txt"]) == [2]
    (d / checkpoint_layout.DIGEST).write_text("{not json")  # left to the tasks to name
    assert checkpoint_layout.refusal(str(d), 2, 1) is None


def test_the_refusal_needs_no_tensorflow(tmp_path):
    d = _written(tmp_path, over=(2,))
    code = ("import sys; from experiments.config import checkpoint_layout as c; "
            f"print(c.refusal({str(d)!r}, 3, 1)); print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == [f"{d} was written with --zero=1 over 2 workers; resume with --num_workers=2, "
                   f"not --zero=1 over 3", "False"]

"""examples/: a user's two-branch functional model and dataset function through each of the
engine's input paths (local clusters included), and the .keras and .npz inputs.

Bad input: each kind is tested in tests/experiments/workload/test_user_input.py; a task that finds
it exits 2 as a task that finds any bad input does (experiments/engine/task.py), and a local
cluster's launcher passing that line on, stopping the cluster and leaving nothing behind is
tests/integration/test_zero.py's (a missing optimizer shard, found by the tasks once TensorFlow
runs)."""
import pytest

from tests.helpers import NO_PROBES, TINY, processes_mentioning, records_in, run_module

pytestmark = pytest.mark.integration

EXAMPLE = ["--model=examples.two_branch:build_model", "--dataset=examples.two_branch:make_dataset"]


# Each input path of experiments/engine/build.py's train_input: the strategy's distributed
# dataset (mirrored), one replica's plain iterator (an MWMS worker: one_device's path too, with
# your dataset function in tests/experiments/workload/test_user_input.py's control), and the
# coordinator's per-worker datasets (PSS: one worker traces the same dataset function as two).
@pytest.mark.parametrize("strategy", [
    ["--strategy=mirrored", "--num_replicas=2"],
    ["--strategy=multi_worker_mirrored", "--num_workers=2"],
    ["--strategy=parameter_server", "--num_workers=1", "--num_ps=1"],
])
def test_two_branch_example_trains_through_each_input_path(tmp_path, strategy):
    proc = run_module("experiments.run", *strategy, *EXAMPLE, *TINY, "--eval_examples=256",
                      *NO_PROBES, f"--results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (record,) = records_in(tmp_path)  # only the chief wrote
    assert record["model"] == "examples.two_branch:build_model"
    assert record["dataset"] == "examples.two_branch:make_dataset"
    assert record["final_eval_accuracy"] > 0.5  # 4 classes: chance is 0.25
    assert not processes_mentioning(str(tmp_path))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from examples.files import write_keras, write_npz

    out = tmp_path_factory.mktemp("files")
    return write_keras(str(out / "mlp.keras")), write_npz(str(out / "data.npz"))


@pytest.mark.parametrize("weights, strategy", [
    ("fresh", ["--strategy=one_device"]), ("saved", ["--strategy=mirrored", "--num_replicas=2"])])
def test_keras_file_and_npz_arrays(tmp_path, files, weights, strategy):
    model, data = files
    proc = run_module("experiments.run", *strategy,
                      f"--model={model}", f"--model_weights={weights}", f"--dataset={data}",
                      *TINY, *NO_PROBES, f"--results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (record,) = records_in(tmp_path)
    assert record["config"]["model_weights"] == weights and record["dataset"] == data
    assert record["final_eval_accuracy"] > 0.6  # 3 classes: chance is 0.33


def test_npz_examples_are_bounded_by_the_file(tmp_path, files):
    proc = run_module("experiments.run", f"--dataset={files[1]}", "--model=mlp",
                      "--train_examples=4096", f"--results_dir={tmp_path / 'out'}", timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"error: --train_examples=4096 exceeds the 2048 training "
                                   f"examples of {files[1]}")

"""examples/: a user's two-branch functional model and dataset function under every strategy
(local clusters included), the .keras and .npz inputs, and bad input through a launcher."""
import pytest

from tests.helpers import NO_PROBES, TINY, processes_mentioning, records_in, run_module

pytestmark = pytest.mark.integration

EXAMPLE = ["--model=examples.two_branch:build_model", "--dataset=examples.two_branch:make_dataset"]


@pytest.mark.parametrize("strategy", [
    ["--strategy=one_device"],
    ["--strategy=mirrored", "--num_replicas=2"],
    ["--strategy=multi_worker_mirrored", "--num_workers=2"],
    ["--strategy=parameter_server", "--num_workers=2", "--num_ps=1"],
])
def test_two_branch_example_trains_under_every_strategy(tmp_path, strategy):
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


def test_bad_input_in_a_local_cluster_exits_2(tmp_path):
    """A task that finds bad input exits 2 with one line; its launcher stops the cluster, says
    that line on stderr, exits 2 and leaves nothing behind (not even the task logs). Each kind
    of bad input is tested in tests/experiments/workload/test_user_input.py; the launcher is the same."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "bad_user_code.py").write_text(
        "import tensorflow as tf\n"
        "def build(input_shape, num_classes):\n"
        "    raise ValueError('unsupported input')\n")
    out = tmp_path / "out"
    proc = run_module("experiments.run", "--strategy=multi_worker_mirrored", "--num_workers=2",
                      "--model=bad_user_code:build", *TINY, f"--results_dir={out}",
                      env={"PYTHONPATH": str(code)})
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr[-3000:]
    assert "--model=bad_user_code:build raised ValueError: unsupported input" in errors[0]
    assert not out.exists()
    assert not processes_mentioning(str(out))

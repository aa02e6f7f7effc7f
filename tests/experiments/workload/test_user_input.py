"""Your own model and data: every bad input exits 2 with one line and writes nothing.

Checks that need no TensorFlow run through `python -m experiments.run` (they are fast); the ones
that do run `experiments.engine.task.run_task` in this process (one TensorFlow import for all), and
once through the command (below). A local cluster's launcher passes a task's bad input on as it
passes any (tests/integration/test_zero.py: a missing optimizer shard, found by the tasks)."""
import os
import textwrap

import numpy as np
import pytest

from experiments.config import ConfigError, RunConfig, validate
from tests.helpers import records_in, run_module

USER_MODULE = textwrap.dedent('''
    import keras
    import tensorflow as tf

    NOT_CALLABLE = [1, 2]

    def model_raises(input_shape, num_classes):
        raise RuntimeError("no GPU for this net")

    def model_wrong_output(input_shape, num_classes):
        inputs = keras.Input(shape=input_shape)
        return keras.Model(inputs, keras.layers.Dense(num_classes + 1)(
            keras.layers.Flatten()(inputs)))

    def model_not_a_model(input_shape, num_classes):
        return "a string"

    def _data(make, n=256, classes=3):
        return {"dataset": tf.data.Dataset.range(n).map(make), "num_classes": classes}

    def data_not_pairs(split, ctx):
        return _data(lambda i: tf.ones([4]))

    def data_float_labels(split, ctx):
        return _data(lambda i: (tf.ones([4]), tf.cast(i % 3, tf.float32)))

    def data_string_features(split, ctx):
        return _data(lambda i: (tf.strings.as_string(i), i % 3))

    def data_labels_out_of_range(split, ctx):
        return _data(lambda i: (tf.ones([4]), i % 5))

    def data_raises(split, ctx):
        raise OSError("bucket not found")

    def data_no_classes(split, ctx):
        return {"dataset": tf.data.Dataset.range(4).map(lambda i: (tf.ones([4]), i % 2))}

    def data_ok(split, ctx):
        return _data(lambda i: (tf.cast(tf.fill([4], i % 3), tf.float32), i % 3))
''')


@pytest.fixture(scope="module")
def user_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("user")
    (path / "my_user_code.py").write_text(USER_MODULE)
    (path / "broken_syntax.py").write_text("def build(:\n")
    (path / "not_an_archive.npz").write_text("plain text")
    np.savez(path / "missing_keys.npz", x_train=np.zeros((4, 2)), y_train=np.zeros(4))
    np.savez(path / "negative_labels.npz", x_train=np.zeros((4, 2)), y_train=[0, 1, -1, 0],
             x_test=np.zeros((2, 2)), y_test=[0, 1])
    np.savez(path / "lengths.npz", x_train=np.zeros((4, 2)), y_train=[0, 1, 1],
             x_test=np.zeros((2, 2)), y_test=[0, 1])
    (path / "not_keras.keras").write_text("not a zip")
    return path


@pytest.mark.parametrize("args, fragment", [
    (["--model=no_such_module:build"], "module 'no_such_module' not found"),
    (["--model=my_user_code:missing"], "has no attribute 'missing'"),
    (["--model=my_user_code:NOT_CALLABLE"], "is not callable"),
    (["--model=broken_syntax:build"], "SyntaxError"),
    (["--model=my_user_code"], "not valid; choose one of: mlp"),
    (["--model=my_user_code:bad-name"], "is not MODULE:FUNCTION"),
    (["--dataset=my_user_code:missing"], "has no attribute 'missing'"),
    (["--model=no_such.keras"], "no such file"),
    (["--model=USER/not_keras.keras"], "not a Keras model archive"),
    (["--model=mlp", "--model_weights=saved"], "--model_weights=saved needs --model=PATH.keras"),
    (["--model_weights=old"], "fresh, saved"),
    (["--dataset=USER/not_an_archive.npz"], "not an .npz archive"),
    (["--dataset=USER/missing_keys.npz"], "missing array(s) x_test, y_test"),
    (["--dataset=USER/negative_labels.npz"], "found labels from -1 to 1"),
    (["--dataset=USER/lengths.npz"], "has 4 examples but y_train has 3"),
    (["--dataset=USER/nothing.npz"], "no such file"),
])
def test_bad_input_before_tensorflow(tmp_path, user_dir, args, fragment):
    args = [a.replace("USER", str(user_dir)) for a in args]
    out = tmp_path / "out"
    proc = run_module("experiments.run", *args, "--epochs=1", "--train_examples=64",
                      "--batch_size_per_replica=32", f"--results_dir={out}", timeout=120,
                      env={"PYTHONPATH": str(user_dir)})
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and fragment in lines[0], proc.stderr
    assert not out.exists()


def test_static_check_runs_no_user_code(tmp_path, monkeypatch):
    """The module is read, not imported, before TensorFlow: its side effects do not happen."""
    (tmp_path / "side_effects.py").write_text(
        "open(__file__ + '.imported', 'w').close()\ndef build(shape, n):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    validate(RunConfig(model="side_effects:build", results_dir=str(tmp_path / "out")))
    assert not os.path.exists(tmp_path / "side_effects.py.imported")
    with pytest.raises(ConfigError, match="has no attribute 'nope'"):
        validate(RunConfig(model="side_effects:nope", results_dir=str(tmp_path / "out")))


@pytest.mark.parametrize("model, dataset, fragment", [
    ("my_user_code:model_raises", "synthetic", "raised RuntimeError: no GPU for this net"),
    ("my_user_code:model_wrong_output", "synthetic",
     "returns logits of shape (2, 11) for a batch of 2; expected (2, 10)"),
    ("my_user_code:model_not_a_model", "synthetic", "not a keras.Model"),
    ("mlp", "my_user_code:data_not_pairs", "expected (features, label) pairs"),
    ("mlp", "my_user_code:data_float_labels", "yields labels float32()"),
    ("mlp", "my_user_code:data_string_features", "features of dtype string"),
    ("mlp", "my_user_code:data_labels_out_of_range",
     "has labels from 0 to 4; labels must be class ids in [0, num_classes=3)"),
    ("mlp", "my_user_code:data_raises", "raised OSError: bucket not found"),
    ("mlp", "my_user_code:data_no_classes", "without num_classes"),
    ("my_user_code:model_wrong_output", "my_user_code:data_ok", "expected (2, 3)"),
    ("mlp", "my_user_code:data_ok", None),  # control: the same path trains
])
def test_bad_input_found_by_tensorflow(tmp_path, user_dir, monkeypatch, capsys, model, dataset,
                                       fragment):
    from experiments.engine.task import run_task

    monkeypatch.syspath_prepend(str(user_dir))
    out = tmp_path / "out"
    cfg = RunConfig(model=model, dataset=dataset, epochs=1, train_examples=96, eval_examples=32,
                    batch_size_per_replica=32, results_dir=str(out), comm_probe=False,
                    tensorboard=False)
    validate(cfg)
    code = run_task(cfg, None)
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    if fragment is None:
        assert code == 0 and not err and out.exists()
        return
    assert code == 2 and len(err) == 1 and fragment in err[0], err
    assert not out.exists()


@pytest.fixture(scope="module")
def npz(tmp_path_factory):
    """A user's .npz of 96 training and 40 held-out examples of 2 classes."""
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("npz") / "data.npz"
    np.savez(path, x_train=rng.random((96, 6), dtype=np.float32), y_train=rng.integers(0, 2, 96),
             x_test=rng.random((40, 6), dtype=np.float32), y_test=rng.integers(0, 2, 40))
    return path


def test_bad_input_through_the_command(tmp_path, user_dir, npz):
    """The same check, end to end: one line on stderr, exit 2, no results directory. Its data, an
    .npz without --train_examples/--eval_examples, is used whole (not the synthetic set's
    8192), and the command says so on its first line, before TensorFlow runs anything."""
    out = tmp_path / "out"
    proc = run_module("experiments.run", "--model=my_user_code:model_wrong_output",
                      f"--dataset={npz}", "--epochs=1", "--batch_size_per_replica=32",
                      f"--results_dir={out}", timeout=120, env={"PYTHONPATH": str(user_dir)})
    assert proc.returncode == 2
    assert proc.stdout.splitlines()[0].startswith(f"{npz}: training on 96 and evaluating on 40")
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "expected (2, 2)" in errors[0], proc.stderr[-2000:]
    assert not out.exists()


def test_an_npz_without_sizes_is_used_whole_and_an_explicit_size_must_fit(tmp_path, npz,
                                                                         capsys):
    """No --train_examples/--eval_examples: all of the user's arrays, said first (the command's
    own first line: the test above), and trained on, here in this process as the command does
    it (its flags read, the sizes taken from the file, then run_task); an explicit size beyond
    them is still refused by the command."""
    from absl import flags

    from experiments.config import flags as config_flags
    from experiments.engine.task import run_task

    out = tmp_path / "out"
    fv = flags.FlagValues()
    config_flags.define(RunConfig, fv)
    fv(["run", "--model=mlp", f"--dataset={npz}", "--epochs=1", "--batch_size_per_replica=32",
        "--nocomm_probe", "--nocompute_probe", "--notensorboard", f"--results_dir={out}"])
    cfg = config_flags.sizes_from_data(config_flags.read(RunConfig, fv), fv)
    assert capsys.readouterr().out.startswith(f"{npz}: training on 96 and evaluating on 40")
    validate(cfg)
    assert run_task(cfg, None) == 0
    (record,) = records_in(out)
    assert record["config"]["train_examples"] == 96 and record["config"]["eval_examples"] == 40
    assert record["steps_per_epoch"] == 3  # 96 examples at 32 a step
    refused = tmp_path / "refused"
    proc = run_module("experiments.run", "--model=mlp", f"--dataset={npz}",
                      "--train_examples=200", f"--results_dir={refused}", timeout=120)
    assert proc.returncode == 2 and "--train_examples=200 exceeds the 96" in proc.stderr
    assert not refused.exists()

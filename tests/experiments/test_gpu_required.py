"""A run whose job asked for GPUs (`--require_gpus`, put on GPU pools by experiments.vertex) stops
with exit 2 and one line when TensorFlow sees none, instead of training on the CPU."""
import pytest

from tests.helpers import TINY, run_module



@pytest.mark.parametrize("args", [
    ["--strategy=mirrored", "--num_replicas=2", "--require_gpus=2"],
    ["--strategy=one_device", "--require_gpus=1"],
])
def test_required_gpus_missing_exits_2_with_one_line_and_writes_nothing(tmp_path, args):
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this machine has GPUs: the refusal needs a machine without")
    out = tmp_path / "out"
    proc = run_module("experiments.run", "--model=mlp", *TINY, *args, f"--results_dir={out}",
                      timeout=180)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    # One line: TensorFlow's start-up chatter stays off the console (experiments/engine/tf_settings.py).
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    required = args[-1].split("=")[1]
    assert lines == [f"error: --require_gpus={required}: the job asked for {required} GPU(s) but "
                     f"TensorFlow sees none; refusing to train on the CPU (GPU image: docker build "
                     f"--build-arg VARIANT=gpu; the machine needs GPUs and their driver)"], \
        proc.stderr
    assert "epoch" not in proc.stdout.lower()
    assert not out.exists()


def test_require_gpus_is_validated_before_anything_starts(tmp_path):
    proc = run_module("experiments.run", "--require_gpus=-1", f"--results_dir={tmp_path / 'o'}",
                      timeout=120)
    assert proc.returncode == 2
    assert [l for l in proc.stderr.splitlines() if l.strip()] == [
        "error: --require_gpus=-1 must be >= 0"]

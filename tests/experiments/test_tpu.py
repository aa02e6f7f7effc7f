"""--strategy=tpu on a machine without a TPU: one line, exit 2, nothing written, and a bounded
wait even when the given address accepts connections but never answers (TPUClusterResolver and
initialize_tpu_system would block forever there)."""
import os
import socket
import subprocess
import sys
import time

import pytest

from tests.helpers import ROOT, TINY, run_module

# The resolver's own lookup: none of these may leak in from the machine running the tests.
_TPU_ENV = ("TPU_NAME", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "TPU_CONFIG", "TF_CONFIG")


def _error_lines(proc):
    """Every line on stderr: TensorFlow's start-up chatter is not among them (tf_settings)."""
    return [l for l in proc.stderr.splitlines() if l.strip()]


def _run(tmp_path, *args, timeout=180):
    env = {**{k: v for k, v in os.environ.items() if k not in _TPU_ENV},
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run([sys.executable, "-m", "experiments.run", "--model=mlp", *TINY,
                           *args, f"--results_dir={tmp_path / 'out'}"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_tpu_without_a_tpu_exits_2_with_one_line_and_writes_nothing(tmp_path):
    proc = _run(tmp_path, "--strategy=tpu")
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    (line,) = _error_lines(proc)
    assert line.startswith("error: --strategy=tpu: no TPU reachable (no --tpu, no "
                           "TPU_NAME/TPU_CONFIG): Please provide a TPU Name"), line
    assert "--tpu=grpc://HOST:8470" in line  # what to give instead
    assert "epoch" not in proc.stdout.lower()
    assert not (tmp_path / "out").exists()


def test_tpu_address_that_never_answers_gives_up_within_the_timeout(tmp_path):
    with socket.socket() as silent:  # accepts connections (the kernel's backlog), says nothing
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        start = time.monotonic()
        proc = _run(tmp_path, "--strategy=tpu", f"--tpu=grpc://127.0.0.1:{port}",
                    "--tpu_timeout_s=3", timeout=120)
        elapsed = time.monotonic() - start
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert _error_lines(proc) == [
        f"error: --strategy=tpu: no TPU answered within 3 s (--tpu=grpc://127.0.0.1:{port}); "
        f"give --tpu=NAME, --tpu=grpc://HOST:8470 or --tpu=local (a TPU VM), or set TPU_NAME; "
        f"without a TPU use another --strategy"]
    assert elapsed < 60  # TF's import and the 3 s, not a hang (measured ~8 s on 2 vCPUs)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args, fragment", [
    (["--strategy=mirrored", "--tpu=my-tpu"], "--tpu=my-tpu applies to --strategy=tpu only"),
    (["--strategy=tpu", "--tpu_timeout_s=0"], "--tpu_timeout_s=0.0 must be > 0"),
    (["--strategy=tpu", "--num_replicas=2"], "--num_replicas=2 applies to --strategy=mirrored"),
])
def test_tpu_flags_are_validated_before_anything_starts(tmp_path, args, fragment):
    proc = run_module("experiments.run", *args, f"--results_dir={tmp_path / 'o'}", timeout=120)
    assert proc.returncode == 2
    (line,) = [l for l in proc.stderr.splitlines() if l.strip()]
    assert fragment in line, line

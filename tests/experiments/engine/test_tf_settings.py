import os
import subprocess
import sys

import pytest

from experiments.engine import tf_settings
from tests.helpers import ROOT


def test_settings_fill_in_what_the_environment_lacks(monkeypatch):
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")  # the user's own choice
    tf_settings.apply()
    assert os.environ["TF_ENABLE_ONEDNN_OPTS"] == "1"
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0"


def test_a_user_can_opt_out_of_onednn(monkeypatch):
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")
    tf_settings.apply()
    assert os.environ["TF_ENABLE_ONEDNN_OPTS"] == "0"


@pytest.mark.skipif(os.environ.get("TF_ENABLE_ONEDNN_OPTS") == "0",
                    reason="the user turned oneDNN off for this session")
def test_this_session_runs_the_onednn_kernels():
    # conftest.py applied the settings before TensorFlow was imported.
    assert tf_settings.onednn_enabled() is True


_START = r"""
import os, sys
from experiments.engine import tf_settings
tf_settings.apply()
tf_settings.show_startup_messages(len(sys.argv) > 1)
import tensorflow as tf  # the wrapped import: its own chatter, and the lines below, captured
with tf_settings._stderr_without_startup_noise():
    os.write(2, b"I0000 00:00:1795574230.201563    2382 cudart_stub.cc:31] Could not find cuda\n")
    os.write(2, b"E0000 00:00:1795574232.515186    2382 cuda_platform.cc:52] failed call to "
                b"cuInit: INTERNAL: CUDA error\n")
    os.write(2, b"E0000 00:00:1795574232.515186    2382 some_op.cc:1] a real error\n")
    sys.stderr.write("a Python warning\n")
tf.constant(1.0) + 1  # the runtime starts after the probe: nothing more to say
print("ran", flush=True)
"""


@pytest.mark.parametrize("verbose", [False, True])
def test_tensorflow_start_up_chatter_is_hidden_and_real_errors_are_not(verbose):
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "TF_CPP_MIN_LOG_LEVEL")}
    proc = subprocess.run([sys.executable, "-c", _START] + (["verbose"] if verbose else []),
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout == "ran\n", proc.stderr
    lines = proc.stderr.splitlines()
    assert "E0000 00:00:1795574232.515186    2382 some_op.cc:1] a real error" in lines
    assert "a Python warning" in lines
    chatter = [line for line in lines if "absl::InitializeLog" in line or "cuda" in line]
    if verbose:  # absl's notice is printed by every TensorFlow import, GPU or not
        assert any("absl::InitializeLog" in line for line in chatter), proc.stderr
    else:
        assert len(lines) == 2 and not chatter, proc.stderr


def test_a_pinned_worker_pins_itself_before_tensorflow_starts():
    """tf_config.launch --pin_workers hands each worker its cores in TFDIST_PIN_CPUS; the task
    applies them in tf_settings.apply, before TensorFlow creates its thread pools."""
    first = min(os.sched_getaffinity(0))
    code = ("import os; from experiments.engine import tf_settings; tf_settings.apply(); "
            "print(sorted(os.sched_getaffinity(0)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "TFDIST_PIN_CPUS": str(first)}).stdout
    assert out.strip() == f"[{first}]"

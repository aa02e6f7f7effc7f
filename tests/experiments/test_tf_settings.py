import os
import time

import pytest

from experiments import comm_probe, tf_settings


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


def test_a_probe_call_of_k_synchronizations_is_divided_by_k():
    # The PSS probe schedules steps_per_execution pull+push rounds per call, as training does.
    calls = []

    def call():
        calls.append(1)
        time.sleep(0.02)
    spread = comm_probe._timed(call, repeats=3, per_call=4)
    assert len(calls) == 3 + comm_probe._WARMUP
    assert 0.004 <= spread["median"] < 0.02 and spread["n"] == 3

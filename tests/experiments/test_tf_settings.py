import os

import pytest

from experiments import tf_settings


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

"""The test session runs TensorFlow with the toolkit's own settings (experiments/engine/tf_settings.py),
so in-process tests use the same CPU kernels as the runs they check; and every process a test
starts keeps its temporary files under pytest's own temp directory."""
import os
import tempfile

import pytest

from experiments.engine import tf_settings

tf_settings.apply()


@pytest.fixture(scope="session", autouse=True)
def _temp_files_under_pytests_basetemp(tmp_path_factory):
    """TF's autograph writes a file per converted function to TMPDIR and removes it only at a
    normal exit. PSS workers and ps never exit on their own, and several tests kill tasks on
    purpose or start them by hand with TF_CONFIG (outside the launcher, which gives its tasks a
    temp dir of the launch's): their files were left in /tmp, ~46 per suite run. Here they go
    under pytest's basetemp, which pytest prunes (the last three sessions are kept)."""
    tmp = str(tmp_path_factory.mktemp("TMPDIR"))
    saved = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"] = tempfile.tempdir = tmp  # children inherit it; this process agrees
    yield
    tempfile.tempdir = saved[1]
    if saved[0] is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = saved[0]

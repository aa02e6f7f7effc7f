"""The Dockerfile, checked by reading it (no Docker here): its default command exits 0, GPU builds
are one build argument away, and the build context leaves out the virtualenv and results."""
import json
import os
import re
import subprocess
import sys

from tests.helpers import ROOT


def _dockerfile():
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        return f.read()


def test_default_command_exits_0():
    """absl exits 1 after --help; the entry points exit 0, so `docker run IMAGE` succeeds."""
    (cmd,) = re.findall(r"^CMD (\[.*\])$", _dockerfile(), re.M)
    argv = json.loads(cmd)
    assert argv[:3] == ["python", "-m", "experiments.run"]
    proc = subprocess.run([sys.executable, *argv[1:]], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--require_gpus" in proc.stdout and "--strategy" in proc.stdout


def test_gpu_variant_installs_the_gpu_extra_and_the_image_skips_vertex():
    text = _dockerfile()
    assert re.search(r"^ARG VARIANT=cpu$", text, re.M)
    assert 'gpu) target=".[gpu]"' in text and 'cpu) target="."' in text
    install = [line for line in text.splitlines() if "pip install" in line]
    assert install and not any("vertex" in line for line in install)
    with open(os.path.join(ROOT, "setup.py")) as f:
        assert '"gpu": ["tensorflow[and-cuda]==2.21.0"]' in f.read()


def test_build_context_leaves_out_venv_results_and_git():
    with open(os.path.join(ROOT, ".dockerignore")) as f:
        ignored = {line.strip() for line in f if line.strip() and not line.startswith("#")}
    assert {".venv", "runs", ".git", "**/__pycache__", "*.egg-info"} <= ignored
    copied = re.findall(r"^COPY (\S+)", _dockerfile(), re.M)
    assert not ignored & set(copied)  # nothing the image needs is left out

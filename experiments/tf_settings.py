"""Process-wide TensorFlow settings that only take effect if made before TensorFlow is imported.

Every entry point (`experiments.run` and so every task of a local or real cluster, the compare
driver, the benchmarks, the test session) calls `apply()` first. A value the user already set in
the environment wins.

- TF_CPP_MIN_LOG_LEVEL=2: keep TensorFlow's C++ INFO chatter out of the user's terminal.
- TF_ENABLE_ONEDNN_OPTS=1: the same CPU kernels on every machine. On Linux, TensorFlow 2.21
  turns its oneDNN kernels on by default only on CPUs with AVX512_VNNI, AVX512_BF16, AVX_VNNI or
  AMX (DefaultOneDnnPolicy, tensorflow/core/util/port.cc); elsewhere (e.g. an AVX2 AMD EPYC VM)
  the Eigen kernels run, and there the same CNN step fed from a strategy's distributed dataset ran
  at half the speed of a plain loop (perf: page faults zeroing fresh pages every step), while with
  oneDNN every input path ran alike, and faster. Measured figures: docs/benchmarks.md ("Engine
  overhead"). Opt out with TF_ENABLE_ONEDNN_OPTS=0.
"""
import os

SETTINGS = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "1"}


def apply():
    """Set each of SETTINGS unless the environment already has it (inherited by child tasks)."""
    for key, value in SETTINGS.items():
        os.environ.setdefault(key, value)


def onednn_enabled():
    """Whether this process's TensorFlow runs its oneDNN kernels (None if it cannot say)."""
    try:
        from tensorflow.python.util import _pywrap_util_port  # no public API tells
        return bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):
        return None

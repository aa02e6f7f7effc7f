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

`apply()` also keeps TensorFlow's start-up chatter off a command's own console: absl's "before
InitializeLog" notice, the oneDNN and CPU-feature notices and, on a machine with CUDA libraries
but no GPU, `cuda_platform.cc ... failed call to cuInit` (an "error" printed when the runtime
first probes its devices; the level-2 setting above cannot hide lines printed before absl's
logging starts). The first `import tensorflow` of the process runs with its stderr captured, up
to and including the device probe (`tf.config.list_physical_devices()`, which still leaves
logical devices and threads configurable); then every captured line that is not that chatter is
written out as it was. A command's --verbose shows it all (show_startup_messages), and so does
a task of a cluster (TF_CONFIG set): the launcher filters its console and keeps its log whole.
"""
import contextlib
import importlib.abc
import importlib.util
import os
import sys
import threading

from tf_config.events import PIN_CPUS_ENV
from tf_config.task_output import is_startup_noise

SETTINGS = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "1"}


_show_startup = False


def pin_cores(count):
    """Pins this process to the first `count` CPUs it may run on (0: no pinning). Called before
    TensorFlow starts its thread pools; a local cluster's tasks inherit the affinity."""
    if count:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:count])


def apply():
    """Set each of SETTINGS unless the environment already has it (inherited by child tasks),
    and quiet TensorFlow's start-up in this process (see the module docstring)."""
    for key, value in SETTINGS.items():
        os.environ.setdefault(key, value)
    pinned = os.environ.get(PIN_CPUS_ENV)  # a pinned local cluster's task (tf_config.cores)
    if pinned:
        os.sched_setaffinity(0, {int(c) for c in pinned.split(",")})
    if "tensorflow" not in sys.modules and not any(
            isinstance(f, _QuietStart) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietStart())


def show_startup_messages(show):
    """An entry point's --verbose: TensorFlow's start-up lines are shown as printed."""
    global _show_startup
    _show_startup = bool(show)


@contextlib.contextmanager
def _stderr_without_startup_noise():
    """Routes file descriptor 2 (C++ writes there too) through a pipe; a thread writes every line
    that is not chatter to the real stderr as it arrives, so a crash inside the import still
    shows what was said before it."""
    sys.stderr.flush()
    saved = os.dup(2)
    read_end, write_end = os.pipe()
    show_all = _show_startup or bool(os.environ.get("TF_CONFIG", "").strip())

    def forward():
        with os.fdopen(read_end, "rb") as pipe:
            for raw in pipe:
                if show_all or not is_startup_noise(raw.decode(errors="replace")):
                    os.write(saved, raw)

    thread = threading.Thread(target=forward, daemon=True)
    thread.start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # the pipe's last writer closes: the thread reads to its end
        thread.join(timeout=10)
        os.close(saved)


class _QuietStart(importlib.abc.MetaPathFinder):
    """Wraps the first import of the `tensorflow` package (then removes itself)."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "tensorflow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            with _stderr_without_startup_noise():
                load(module)
                module.config.list_physical_devices()  # the CUDA probe and its cuInit line
        spec.loader.exec_module = exec_module
        return spec


def onednn_enabled():
    """Whether this process's TensorFlow runs its oneDNN kernels (None if it cannot say)."""
    try:
        from tensorflow.python.util import _pywrap_util_port  # no public API tells
        return bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):
        return None

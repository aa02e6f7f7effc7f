"""What a run burns: CPU seconds of every process of the run, read by the chief around each epoch.

A PSS cluster's parameter servers and coordinating chief are processes too; a comparison that
counts only wall time hides the cores they use. The chief reads the CPU time of:
  - a single process run: itself (the whole run),
  - a local cluster (tasks started by `tf_config.launch`): the launcher and every task it started,
  - a task of a real cluster (TF_CONFIG from a platform): itself only, marked partial.
"""
import os

import psutil

from results.metrics import steady_epochs
from tf_config.events import LAUNCH_T0_ENV

ALL_TASKS = "all tasks"
PARTIAL = "this task only (partial: other hosts not measured)"


def _cpu_seconds(proc):
    times = proc.cpu_times()
    return times.user + times.system


class CpuMeter:
    def __init__(self, in_cluster):
        """in_cluster: this process is one task of a cluster (TF_CONFIG set)."""
        local_cluster = in_cluster and bool(os.environ.get(LAUNCH_T0_ENV))
        self._root = psutil.Process(os.getppid() if local_cluster else os.getpid())
        self._tree = local_cluster
        self.scope = ALL_TASKS if local_cluster or not in_cluster else PARTIAL

    def seconds(self):
        """CPU seconds (user + system) used so far by the processes in scope that are alive."""
        procs = [self._root] + (self._root.children(recursive=True) if self._tree else [])
        total = 0.0
        for proc in procs:
            try:
                total += _cpu_seconds(proc)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass  # a task that died (and was restarted) took its CPU time with it
        return total


def summarize(epochs, scope):
    """The record's `cpu`: CPU seconds over the steady-state epochs' timed spans, cores used
    (CPU seconds / wall seconds) and examples per CPU-second. None when nothing was measured."""
    kept = [e for e in steady_epochs(epochs) if e.get("cpu_s") is not None]
    seconds = sum(e["cpu_s"] for e in kept)
    wall = sum(e["time_s"] for e in kept)
    if not kept or seconds <= 0 or wall <= 0:
        return None
    examples = sum(e["examples_per_sec"] * e["time_s"] for e in kept)
    return {"seconds": seconds, "wall_s": wall, "cores_used": seconds / wall,
            "examples_per_cpu_second": examples / seconds, "scope": scope,
            "epochs_used": [e["epoch"] for e in kept]}

"""What a run burns: CPU seconds of every process of the run, read by the chief around each epoch.

A PSS cluster's parameter servers and coordinating chief are processes too; a comparison that
counts only wall time hides the cores they use. The chief reads the CPU time of:
  - a single process run: itself (the whole run),
  - a local cluster (tasks started by `tf_config.launch`): the launcher and every task it started,
  - a task of a real cluster (TF_CONFIG from a platform): itself only, marked partial.
"""
import os
import time

import psutil

from results.records.metrics import steady_epochs
from tf_config.events import LAUNCH_T0_ENV, task_name

ALL_TASKS = "all tasks"
PARTIAL = "this task only (partial: other hosts not measured)"
LAUNCHER = "launcher"  # the launcher's own process (and anything without a TF_CONFIG task)
PROCESS = "process"  # a single-process run
# The key of a reading that holds the CPU seconds of the root's children that have ended and been
# reaped (psutil's children_user + children_system): where a lost task's seconds go when it dies.
EXITED = "exited"


def _cpu_seconds(proc):
    """User + system seconds of every thread of `proc`. Another process's come from
    /proc/PID/stat in clock ticks (10 ms); this process's own from the kernel's per-process
    CPU clock, to the nanosecond: a single-process run's steady epoch can be shorter than a
    tick, and the ticks would read 0 CPU seconds for it."""
    if proc.pid == os.getpid():
        return time.process_time()
    times = proc.cpu_times()
    return times.user + times.system


class CpuMeter:
    def __init__(self, in_cluster):
        """in_cluster: this process is one task of a cluster (TF_CONFIG set)."""
        local_cluster = in_cluster and bool(os.environ.get(LAUNCH_T0_ENV))
        self._root = psutil.Process(os.getppid() if local_cluster else os.getpid())
        self._tree = local_cluster
        self.scope = ALL_TASKS if local_cluster or not in_cluster else PARTIAL
        self._names = {}  # pid -> task name: read once per process (a restarted task is new)

    def _name(self, proc):
        """The process's task (`chief:0`, `worker:1`, `ps:0`) from its TF_CONFIG."""
        if proc.pid not in self._names:
            if proc.pid == self._root.pid:
                self._names[proc.pid] = LAUNCHER if self._tree else (
                    task_name(proc.environ()) or PROCESS)
            else:  # a task's own helpers (none today) count with the launcher
                self._names[proc.pid] = task_name(proc.environ()) or LAUNCHER
        return self._names[proc.pid]

    def reading(self):
        """{pid: (task, CPU seconds (user + system) used so far)} of the processes in scope that
        are alive: every task of a local cluster, named from its TF_CONFIG, and the launcher;
        and under EXITED the seconds of the launcher's tasks that ended and were reaped (a lost
        task's, up to its death: the launcher reaps it before restarting it)."""
        procs = [self._root] + (self._root.children(recursive=True) if self._tree else [])
        out = {}
        for proc in procs:
            try:
                out[proc.pid] = (self._name(proc), _cpu_seconds(proc))
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass  # ended between the listing and the reading: counted once reaped
        if self._tree:
            try:
                times = self._root.cpu_times()
                out[EXITED] = (EXITED, times.children_user + times.children_system)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return out

    def seconds(self):
        """CPU seconds used so far by the processes in scope that are alive."""
        return sum(seconds for _, seconds in self.reading().values())


def by_task(after, before):
    """{task: CPU seconds} between two readings, process by process: a task restarted in
    between is a new process counted from 0, and its old process's seconds since `before` (the
    reaped children's seconds that appeared in between, less what `before` had already counted
    of the processes that ended) go to its task (to "exited" when several tasks ended)."""
    out = {}
    for pid, (task, seconds) in after.items():
        if pid == EXITED:
            continue
        previous = before.get(pid)
        out[task] = out.get(task, 0.0) + seconds - (previous[1] if previous else 0.0)
    ended = {pid: entry for pid, entry in before.items() if pid != EXITED and pid not in after}
    reaped = (after.get(EXITED, (EXITED, 0.0))[1] - before.get(EXITED, (EXITED, 0.0))[1])
    if ended and EXITED in after and EXITED in before:
        tasks = {task for task, _ in ended.values()}
        task = tasks.pop() if len(tasks) == 1 else EXITED
        out[task] = out.get(task, 0.0) + max(0.0, reaped - sum(s for _, s in ended.values()))
    return out


def summarize(epochs, scope):
    """The record's `cpu`: CPU seconds over the steady-state epochs' timed spans, cores used
    (CPU seconds / wall seconds), examples per CPU-second and, where measured, the cores each
    task used. None when nothing was measured."""
    kept = [e for e in steady_epochs(epochs) if e.get("cpu_s") is not None]
    seconds = sum(e["cpu_s"] for e in kept)
    wall = sum(e["time_s"] for e in kept)
    if not kept or seconds <= 0 or wall <= 0:
        return None
    examples = sum(e["examples_per_sec"] * e["time_s"] for e in kept)
    out = {"seconds": seconds, "wall_s": wall, "cores_used": seconds / wall,
           "examples_per_cpu_second": examples / seconds, "scope": scope,
           "epochs_used": [e["epoch"] for e in kept]}
    if all(e.get("cpu_by_task_s") for e in kept):
        tasks = sorted({t for e in kept for t in e["cpu_by_task_s"]})
        out["cores_by_task"] = {t: sum(e["cpu_by_task_s"].get(t, 0.0) for e in kept) / wall
                                for t in tasks}
    return out

"""The launcher's restart policy: one rule for a task that ends badly, whatever the phase (the
cluster forming, training, or finishing after the chief).

- A task that **exits with an error code** failed in its own program: restarting would repeat it.
  The run fails, naming the task and its last lines. Unless its last lines show it failed
  because a peer was lost or restarted (a PSS chief reading a result from a worker restarted
  under it): then it is lost like the peer, and handled as below.
- A task that is **lost** (killed by a signal: a lost machine, an OOM kill, a preemption without
  a handler) or **preempted** (an MWMS worker that saved and exited with PREEMPTED_EXIT_CODE):
  - a PSS worker is restarted alone: the coordinator reschedules its steps, nothing is lost;
  - any other task (MWMS worker, parameter server, chief) takes the cluster's state with it: with
    whole-cluster restarts on (experiments.run: --checkpoint_dir), every task is stopped and the
    cluster restarted with the same roles on fresh ports; the command resumes from its last
    checkpoint (the way torchrun --max-restarts recovers). Without, the run fails fast, named.
- Every restart, of one task or of the cluster, counts against one budget (--max_restarts); when
  it is spent the run fails, naming the task and the restarts so far.
- After the chief has finished successfully, a lost task has nothing left to redo: noted only.
"""
import collections
import dataclasses
import threading
import time

from tf_config.events import PREEMPTED_EXIT_CODE, write_launch_events

FAIL, RESTART_TASK, RESTART_CLUSTER, IGNORE = "fail", "restart_task", "restart_cluster", "ignore"


def how_it_ended(returncode):
    """(kind, words): kind is 'lost', 'preempted' or 'error'."""
    if returncode < 0:
        return "lost", f"was killed by signal {-returncode}"
    if returncode == PREEMPTED_EXIT_CODE:
        return "preempted", f"saved a checkpoint and exited with code {PREEMPTED_EXIT_CODE}"
    return "error", f"exited with code {returncode}"


@dataclasses.dataclass
class Decision:
    action: str
    reason: str  # one line, for the console and the failure message


@dataclasses.dataclass
class RestartPolicy:
    max_restarts: int = 3
    cluster_restarts: bool = False  # whole-cluster restarts (the command resumes from checkpoints)
    # How the user turns whole-cluster restarts on, for the failure message.
    cluster_restart_hint: str = "--restart_cluster turns on whole-cluster restarts for a command " \
                                "that resumes from its checkpoints"
    restarted: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    @property
    def spent(self):
        return sum(self.restarted.values())

    def decide(self, task_name, task_type, returncode, pss, at_step, chief_done=False,
               peer_lost=False):
        """What to do about `task_name` ending with `returncode` when the chief had reached
        `at_step`. pss: the cluster has a chief and parameter servers (its coordinator
        reschedules a lost worker's steps). peer_lost: its error was a lost or restarted peer's
        (tf_config.task_output.died_of_lost_peer), not its own: it counts as lost."""
        kind, words = how_it_ended(returncode)
        if kind == "error" and peer_lost:
            kind, words = "lost", f"{words} after losing a peer"
        if kind == "error":
            return Decision(FAIL, f"task {task_name} {words}")
        if chief_done:
            return Decision(IGNORE, f"{task_name} {words} after the chief finished; nothing to redo")
        alone = pss and task_type == "worker"
        when = f"at step {at_step}" if at_step else "before the first step"
        lost = f"{task_name} {'preempted' if kind == 'preempted' else 'lost'} {when} " \
               f"({words.removeprefix('was ')})"
        if not alone and not self.cluster_restarts:
            hint = "" if kind == "preempted" else f"; {self.cluster_restart_hint}"
            return Decision(FAIL, f"task {task_name} {words}{hint}")
        if self.spent >= self.max_restarts:
            so_far = ", ".join(f"{name} x{n}" for name, n in sorted(self.restarted.items()))
            return Decision(FAIL, f"task {task_name} {words}; the restart budget is spent "
                                  f"(--max_restarts={self.max_restarts}"
                                  f"{': restarted ' + so_far if so_far else ''})")
        self.restarted[task_name] += 1
        what = "the coordinator reschedules its steps; restarting it" if alone else \
            "restarting the whole cluster from the last checkpoint"
        return Decision(RESTART_TASK if alone else RESTART_CLUSTER,
                        f"{lost}; {what} (restart {self.spent}/{self.max_restarts})")


class Journal:
    """The launcher's record of injected faults and restarts, rewritten (atomically) at every
    change into the file the chief copies into its record (tf_config.events)."""

    _CLUSTER = None  # the pending key of a whole-cluster restart; a task restart's is its name

    def __init__(self, path):
        self.path = path
        self.faults, self.restarts = [], []
        # Waiting for recovery: key -> (entry, monotonic time of the loss, attempt it happened in)
        self._pending = {}
        self._lock = threading.Lock()
        self._write()

    def _write(self):
        write_launch_events(self.path, {"faults": self.faults, "restarts": self.restarts})

    def fault(self, mode, task, at_step):
        with self._lock:
            self.faults.append({"task": task, "at_step": at_step, "mode": mode})
            self._write()

    def restart(self, task, at_step, reason, action, attempt=0):
        """A restart of `task` alone (RESTART_TASK) or of the cluster, decided in `attempt`."""
        with self._lock:
            entry = {"task": task, "at_step": at_step, "reason": reason,
                     "action": "task" if action == RESTART_TASK else "cluster",
                     # A PSS coordinator reschedules the lost worker's steps: none are lost.
                     "steps_lost": 0 if action == RESTART_TASK else None,
                     "resumed_from_step": None, "recovery_s": None,
                     "at_time": round(time.time(), 3)}  # wall clock: the run's trace places it
            self.restarts.append(entry)
            key = task if action == RESTART_TASK else self._CLUSTER
            self._pending[key] = (entry, time.monotonic(), attempt)
            self._write()

    def _cluster_pending(self, attempt):
        """The pending cluster restart, if `attempt` is a later cluster than the one it left
        (a late marker of the stopped cluster's chief must not resolve it)."""
        pending = self._pending.get(self._CLUSTER)
        return pending if pending and attempt > pending[2] else None

    def resumed(self, step, attempt):
        """The restarted cluster's chief restored a checkpoint with `step` steps done."""
        with self._lock:
            pending = self._cluster_pending(attempt)
            if pending:
                entry = pending[0]
                entry["resumed_from_step"] = step
                entry["steps_lost"] = max(0, entry["at_step"] - step)

    def recovered(self, task=None, attempt=0):
        """Training goes on: (task None) the restarted cluster's first step, in `attempt`, or
        (task) that restarted PSS worker serving again. Returns the console line, or None when
        nothing of that kind was pending."""
        with self._lock:
            pending = self._cluster_pending(attempt) if task is None else \
                self._pending.get(task)
            if pending is None:
                return None
            entry, lost_at, _ = self._pending.pop(task if task is not None else self._CLUSTER)
            entry["recovery_s"] = round(time.monotonic() - lost_at, 2)
            if entry["steps_lost"] is None:  # no checkpoint restored: from the start
                entry["resumed_from_step"], entry["steps_lost"] = 0, entry["at_step"]
            self._write()
        if entry["action"] == "task":
            return f"{entry['task']} back after {entry['recovery_s']:.1f}s"
        return (f"recovered in {entry['recovery_s']:.1f}s: resumed from step "
                f"{entry['resumed_from_step']}, {entry['steps_lost']} step(s) lost")

"""One attempt of a launch (tf_config/launch.py): its tasks started with their TF_CONFIG and
environment, supervised until the cluster finishes, fails, is preempted or must restart whole
(tf_config/recovery.py decides which), and stopped. A whole-cluster restart is a new attempt;
what outlives attempts (the restart budget, the journal, the task logs) is the LaunchState."""
import dataclasses
import os
import signal
import subprocess
import time

import psutil

from tf_config import events, recovery, watchdog
from tf_config.events import (ATTEMPT_ENV, BAD_INPUT_EXIT_CODE, EVENTS_ENV, DONE_MARK, FAULT_MARK,
                              FAULT_SIGNALS, FINISHED_MARK, LAUNCH_T0_ENV, PHASE_MARK,
                              PREEMPTED_EXIT_CODE, RESUMED_MARK, RUN_TAG_ENV, STEP_MARK)
from tf_config.spec import tf_config_json
from tf_config.task_output import TaskLog, died_of_lost_peer
from tf_config.task_process import Task

_PORT_CLASH = ("Address already in use", "Could not start gRPC server", "Failed to add port")
_STOP_GRACE_S = 5.0
_SETTLE_S = 1.0  # after a task ends badly, how long the others may take to end too
_START_TIME = psutil.Process().create_time()  # this launcher process's start


@dataclasses.dataclass
class LaunchState:
    """What outlives one attempt: the restart budget, the journal, the task logs, the fault."""
    policy: recovery.RestartPolicy
    journal: recovery.Journal
    log_dir: str
    # every task's TMPDIR, removed when the launch ends: a task killed or stopped leaves its
    # temporary files behind (TF's autograph writes one per converted function, and removes
    # them only at a normal exit)
    tmp_dir: str
    logs: dict = dataclasses.field(default_factory=dict)
    injected: list = dataclasses.field(default_factory=list)  # one fault per launch


@dataclasses.dataclass
class Outcome:
    code: int
    message: str = ""
    restart_cluster: bool = False


class Cluster:
    """The running tasks of one launch attempt (a whole-cluster restart is a new attempt)."""

    def __init__(self, opts, cluster, out, state, attempt=0):
        self.opts, self.cluster, self.out = opts, cluster, out
        self.policy, self.journal, self.attempt = state.policy, state.journal, attempt
        self._state = state
        self.tasks = []
        self.last_step = 0  # the chief's, from its step markers
        self.watchdog = watchdog.Watchdog(opts.watchdog_s, opts.watchdog_factor)
        self.finished = set()  # tasks that said they did all their work (events.FINISHED_MARK)
        where = opts.placement  # launch.run's: every attempt places its tasks alike
        threads = self.threads = where.threads
        # Servers first, chief last: the chief is the one that waits for everyone else.
        for kind in ("ps", "worker", "chief"):
            for index, address in enumerate(cluster.get(kind, [])):
                env = dict(os.environ)
                env.update({"TF_CONFIG": tf_config_json(cluster, kind, index),
                            "TF_NUM_INTRAOP_THREADS": str(threads),
                            # >= 2: one inter-op thread deadlocks PSS servers
                            "TF_NUM_INTEROP_THREADS": str(max(2, threads)),
                            "OMP_NUM_THREADS": str(threads),
                            "PYTHONUNBUFFERED": "1",
                            RUN_TAG_ENV: opts.tag or env.get(RUN_TAG_ENV) or str(os.getpid()),
                            LAUNCH_T0_ENV: env.get(LAUNCH_T0_ENV) or repr(_START_TIME),
                            ATTEMPT_ENV: str(attempt), EVENTS_ENV: state.journal.path,
                            "TMPDIR": state.tmp_dir,
                            watchdog.STACKS_ENV: watchdog.stacks_path(state.log_dir, kind, index)})
                env.update(where.env(kind, index))
                name = f"{kind}:{index}"
                if name not in state.logs:
                    state.logs[name] = TaskLog(state.log_dir, name)
                self.tasks.append(Task(kind, index, address, opts.command(kind, index, threads),
                                        env, out, state.logs[name],
                                        self._on_line, verbose=opts.verbose))

    def _on_line(self, task, line):
        """Marker lines (tf_config.events); read on the task's output thread."""
        if line.startswith(FAULT_MARK):
            self._inject(line[len(FAULT_MARK):].strip())
        elif line.startswith(FINISHED_MARK):
            self.finished.add(task.name)
        elif task is self.chief and line.startswith(STEP_MARK):
            self.last_step = int(line[len(STEP_MARK):])
            if not self.pss:  # PSS schedules ahead: its calls' ends are the progress
                self.watchdog.progress()
            message = self.journal.recovered(attempt=self.attempt)
            if message:
                self.out(f"launch: {message}")
        elif task is self.chief and line.startswith(DONE_MARK):
            self.watchdog.progress()
        elif task is self.chief and line.startswith(PHASE_MARK):
            self.watchdog.phase(line[len(PHASE_MARK):].strip() == events.TRAIN_PHASE)
        elif task is self.chief and line.startswith(RESUMED_MARK):
            self.journal.resumed(int(line[len(RESUMED_MARK):]), self.attempt)

    def _inject(self, request):
        parsed = events.parse_fault(request)
        task = parsed and next((t for t in self.tasks if t.name == parsed[1]), None)
        if task is None:
            self.out(f"launch: fault injection {request!r} names no task or mode; ignored")
            return
        if self._state.injected:  # replayed steps after a whole-cluster restart: asked again
            return
        mode, name, at_step = parsed
        self._state.injected.append(name)
        self.journal.fault(mode, name, at_step)
        sig = FAULT_SIGNALS[mode]
        self.out(f"launch: injecting fault: {signal.Signals(sig).name} {name}")
        task.signal(sig)

    @property
    def pss(self):
        """PSS: the coordinator reschedules a lost worker's steps, so the run goes on."""
        return bool(self.cluster.get("ps")) and bool(self.cluster.get("chief"))

    @property
    def chief(self):
        kind = "chief" if self.cluster.get("chief") else "worker"
        return next(t for t in self.tasks if t.task_type == kind and t.index == 0)

    def stop(self):
        """SIGTERM every task's process group, SIGKILL what is left after a grace period."""
        for task in self.tasks:
            task.signal(signal.SIGTERM)
            task.signal(signal.SIGCONT)  # a stopped (hung) task takes its SIGTERM now
        deadline = time.monotonic() + _STOP_GRACE_S
        for task in self.tasks:
            try:
                task.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for task in self.tasks:
            task.signal(signal.SIGKILL)
            task.proc.wait()
            task.reader.join(timeout=2)

    def _ended_badly(self):
        """The task whose end explains the others', or None. A lost task (killed by a signal)
        or a preempted one comes first; then an error of a task's own; last an error that a
        lost peer caused (its peers fail within milliseconds of the culprit, so the others get
        a moment to end before the choice)."""
        if all(t.proc.poll() in (None, 0) for t in self.tasks):
            return None
        deadline = time.monotonic() + _SETTLE_S
        while time.monotonic() < deadline and any(t.proc.poll() is None for t in self.tasks):
            time.sleep(0.05)
        ended = [t for t in self.tasks if t.proc.poll() not in (None, 0)]
        for task in ended:
            task.reader.join(timeout=2)  # its last lines tell whether a lost peer killed it

        def rank(task):
            kind = recovery.how_it_ended(task.proc.returncode)[0]
            return 0 if kind != "error" else 2 if died_of_lost_peer(task.tail) else 1
        ended.sort(key=rank)
        return ended[0]

    def _failure(self, task, reason=None):
        lines = "\n".join(f"    {line}" for line in list(task.tail)[-10:])
        return f"{reason or self._how(task)}; its last lines:\n{lines}"

    @staticmethod
    def _bad_input(task):
        """The task's own one-line "error: ..." (bad input), naming the task; None when it
        exited 2 without one (then it is an ordinary failure, logs kept)."""
        task.reader.join(timeout=2)  # its last lines may still be on their way
        said = [line for line in task.tail if line.startswith("error: ")]
        return f"{said[-1][len('error: '):]} ({task.name})" if said else None

    @staticmethod
    def _how(task):
        return f"task {task.name} {recovery.how_it_ended(task.proc.returncode)[1]}"

    def _all_saved(self, first):
        """An MWMS worker was preempted: every worker is saving the same step and will exit with
        PREEMPTED_EXIT_CODE; waits for that instead of killing them mid-save. Returns None, or
        what went wrong."""
        deadline = time.monotonic() + self.opts.done_grace_s
        for task in self.tasks:
            try:
                task.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return f"{first.name} exited as preempted, but {task.name} did not save " \
                       f"and exit within {self.opts.done_grace_s:g}s"
        codes = {t.name: t.proc.returncode for t in self.tasks}
        if set(codes.values()) != {PREEMPTED_EXIT_CODE}:
            return f"{first.name} exited as preempted, but not every task did: {codes}"
        return None

    def port_clash(self):
        return any(clash in line for t in self.tasks for line in t.tail for clash in _PORT_CLASH)

    def supervise(self):
        """Forms the cluster, watches it train, waits for the chief; applies tf_config.recovery's
        policy to a task that ends badly, in every phase. Success = the chief exits 0."""
        deadline = time.monotonic() + self.opts.cluster_timeout_s
        forming, back = True, {}  # back: restarted PSS workers not serving yet -> deadline
        while True:
            if self.chief.proc.poll() == 0:  # done: whatever ends now has nothing left to redo
                return self._finish()
            bad = self._ended_badly()
            if bad is not None:
                decision = self.policy.decide(bad.name, bad.task_type, bad.proc.returncode,
                                              self.pss, self.last_step,
                                              peer_lost=died_of_lost_peer(bad.tail))
                preempted = bad.proc.returncode == PREEMPTED_EXIT_CODE
                if preempted:  # the others are saving the same step: let them finish
                    problem = self._all_saved(bad)
                    if problem:
                        return Outcome(1, problem)
                if decision.action == recovery.RESTART_TASK:
                    self.out(f"launch: {decision.reason}")
                    self.journal.restart(bad.name, self.last_step, decision.reason,
                                         decision.action, self.attempt)
                    bad.start()
                    back[bad] = time.monotonic() + self.opts.cluster_timeout_s
                    continue
                if decision.action == recovery.RESTART_CLUSTER:
                    self.out(f"launch: {decision.reason}")
                    self.journal.restart(bad.name, self.last_step, decision.reason,
                                         decision.action, self.attempt)
                    return Outcome(1, decision.reason, restart_cluster=True)
                if preempted:
                    return Outcome(PREEMPTED_EXIT_CODE, (
                        f"{decision.reason}: every worker saved a checkpoint at the same step and "
                        f"exited with code {PREEMPTED_EXIT_CODE}; rerun the same command to "
                        "resume"))
                if bad.proc.returncode == BAD_INPUT_EXIT_CODE and self._bad_input(bad):
                    return Outcome(BAD_INPUT_EXIT_CODE, self._bad_input(bad))
                return Outcome(1, self._failure(bad, decision.reason))
            overdue = self.watchdog.overdue()
            if overdue is not None:
                return Outcome(1, self._hung(*overdue))
            for task, task_deadline in list(back.items()):
                if task.answers():
                    del back[task]
                    message = self.journal.recovered(task.name)
                    if message:
                        self.out(f"launch: {message}")
                elif time.monotonic() > task_deadline:
                    return Outcome(1, f"restarted {task.name} did not answer at {task.address} "
                                      f"within {self.opts.cluster_timeout_s:g}s "
                                      "(--cluster_timeout)")
            if forming:
                pending = [t for t in self.tasks if t.proc.poll() is None and not t.answers()]
                forming = bool(pending)
                if forming and time.monotonic() > deadline:
                    names = ", ".join(f"{t.name} ({t.address})" for t in pending)
                    return Outcome(1, f"cluster did not form within "
                                      f"{self.opts.cluster_timeout_s:g}s (--cluster_timeout): "
                                      f"no answer from {names}")
            time.sleep(0.1)

    def _hung(self, waited, limit, median):
        """The watchdog fired: every task's stacks into its log, and the one line saying who is
        stuck and what the others wait for."""
        said = watchdog.explain_hang(self.tasks, self._state.log_dir)
        return (f"hung: no training step completed for {waited:.0f}s after step "
                f"{self.last_step} (the watchdog's limit: max(--watchdog_s="
                f"{self.opts.watchdog_s:g}, {self.opts.watchdog_factor:g} x the median "
                f"{median * 1e3:.1f} ms between steps) = {limit:.0f}s); {said}; their Python "
                f"stacks are in their logs")

    def _finish(self):
        """MWMS workers finish with the chief; PSS workers and parameter servers never exit on
        their own (they serve until stopped), so they are stopped by the caller."""
        deadline = time.monotonic() + self.opts.done_grace_s
        others = [t for t in self.tasks if t.task_type == "worker" and t is not self.chief
                  and "ps" not in self.cluster]
        for task in others:
            try:
                task.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                if task.name in self.finished:
                    # Its work is done (the chief's record too): what hangs is the process's
                    # exit, TensorFlow's shutdown after the chief (the coordination service's
                    # leader) has gone. Stopped with the cluster; the run stands.
                    self.out(f"launch: {task.name} did all its work but had not exited "
                             f"{self.opts.done_grace_s:g}s after the chief (TensorFlow's "
                             f"shutdown); stopped")
                    continue
                return Outcome(1, f"task {task.name} did not finish within "
                                  f"{self.opts.done_grace_s:g}s of the chief")
            if task.proc.returncode != 0:
                decision = self.policy.decide(task.name, task.task_type, task.proc.returncode,
                                              self.pss, self.last_step, chief_done=True)
                if decision.action != recovery.IGNORE:
                    return Outcome(1, self._failure(task, decision.reason))
                self.out(f"launch: {decision.reason}")
        return Outcome(0)

"""Launch a local cluster: one process per task, each with its own TF_CONFIG.

    python -m tf_config.launch --workers=2 -- python my_mwms_script.py
    python -m tf_config.launch --workers=2 --ps=1 --chief -- python my_pss_script.py

Each task's output is prefixed with its role. If a task fails, the others are stopped within
seconds and the failed task is named with its last log lines; the cluster must form (every task's
port answering) within --cluster_timeout; Ctrl-C, SIGTERM and the end of the run stop every task.
Tasks also die with the launcher (PR_SET_PDEATHSIG), even if it is killed with -9.
"""
import collections
import ctypes
import dataclasses
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import psutil

from tf_config import netns
from tf_config.spec import local_cluster, tf_config_json

# A task that prints this line followed by "kill NAME" or "preempt NAME" makes the launcher SIGKILL
# that task, or SIGTERM it (a platform's preemption notice): fault injection for experiments and
# tests (`experiments.run --fail_task=worker:1 --fail_at_step=S [--fail_mode=preempt]`).
FAULT_MARK = "tfdist-fault: "
FAULT_SIGNALS = {"kill": signal.SIGKILL, "preempt": signal.SIGTERM}
# A preempted MWMS worker exits with this after its checkpoint (EX_TEMPFAIL: try again later).
PREEMPTED_EXIT_CODE = 75
RUN_TAG_ENV = "TFDIST_LAUNCH_TAG"  # every task carries it, so tests can find leftovers
# Wall-clock start (epoch seconds) of the launching command: tasks measure launch-to-first-step.
LAUNCH_T0_ENV = "TFDIST_LAUNCH_T0"
_PORT_CLASH = ("Address already in use", "Could not start gRPC server", "Failed to add port")
_STOP_GRACE_S = 5.0
# TensorFlow's start-up chatter, printed by every task (absl before InitializeLog, oneDNN and CUDA
# probing, cuInit's "error" on a machine without a GPU): alarming, and four times per cluster.
# Hidden from the console unless --verbose; kept in the task's tail for failure reports.
_STARTUP_NOISE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\)"
    r"|[IW]\d{4} [\d:. ]+\d+ \S+\.cc:\d+\]"
    r"|E\d{4} [\d:. ]+\d+ cuda_\w+\.cc:\d+\] failed call to cuInit)")
_START_TIME = psutil.Process().create_time()  # this launcher process's start


class LaunchError(RuntimeError):
    pass


@dataclasses.dataclass
class LaunchOptions:
    num_workers: int
    num_ps: int = 0
    chief: bool = False
    threads_per_task: int = 0  # 0: cores // tasks, at least 1
    cluster_timeout_s: float = 60.0
    isolate_network: bool = True
    port_retries: int = 2
    done_grace_s: float = 30.0  # after the chief succeeds, how long other workers may finish
    max_restarts: int = 3  # PSS: lost workers restarted (as a platform would) at most this often
    verbose: bool = False  # show TensorFlow's start-up chatter of every task
    tag: str = ""
    # Called with (task_type, index, threads) -> argv of that task.
    command: object = None


def default_threads(num_tasks, cores=None):
    """Threads per task so the tasks together use each core once."""
    cores = cores or os.cpu_count() or 1
    return max(1, cores // max(1, num_tasks))


def is_startup_noise(line):
    return bool(_STARTUP_NOISE.match(line))


def _die_with_parent():
    """Runs in the child before exec: SIGKILL it if the launcher dies, however it dies."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class _Task:
    def __init__(self, task_type, index, address, argv, env, out, on_fault=None, verbose=False):
        self.task_type, self.index, self.address = task_type, index, address
        self._verbose = verbose
        self.name = f"{task_type}:{index}"
        self.tail = collections.deque(maxlen=20)
        self._out, self._argv, self._env, self._on_fault = out, argv, env, on_fault
        self.start()

    def start(self):
        """Starts (or restarts) the task's process with its original command and TF_CONFIG."""
        self.proc = subprocess.Popen(self._argv, env=self._env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=_die_with_parent)
        self.reader = threading.Thread(target=self._pump, args=(self.proc,), daemon=True)
        self.reader.start()

    def _pump(self, proc):
        for raw in iter(proc.stdout.readline, b""):
            line = raw.decode(errors="replace").rstrip("\n")
            self.tail.append(line)
            if self._verbose or not is_startup_noise(line):
                self._out(f"[{self.name}] {line}")
            if line.startswith(FAULT_MARK) and self._on_fault is not None:
                self._on_fault(line[len(FAULT_MARK):].strip())

    def answers(self):
        host, port = self.address.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=0.5):
                return True
        except OSError:
            return False

    def signal(self, sig):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass


class Cluster:
    """The running tasks of one launch attempt."""

    def __init__(self, opts, cluster, out):
        self.opts, self.cluster, self.out = opts, cluster, out
        self.tasks = []
        threads = opts.threads_per_task or default_threads(
            sum(len(v) for v in cluster.values()))
        self.threads = threads
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
                            RUN_TAG_ENV: opts.tag or str(os.getpid()),
                            LAUNCH_T0_ENV: env.get(LAUNCH_T0_ENV) or repr(_START_TIME)})
                self.tasks.append(_Task(kind, index, address,
                                        opts.command(kind, index, threads), env, out,
                                        on_fault=self._inject, verbose=opts.verbose))
        self.restarts = []

    def _inject(self, request):
        mode, _, name = request.partition(" ")
        task = next((t for t in self.tasks if t.name == name), None)
        if task is None or mode not in FAULT_SIGNALS:
            self.out(f"launch: fault injection {request!r} names no task or mode; ignored")
            return
        sig = FAULT_SIGNALS[mode]
        self.out(f"launch: injecting fault: {signal.Signals(sig).name} {name}")
        task.signal(sig)

    @property
    def tolerates_lost_workers(self):
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

    def failed(self):
        return next((t for t in self.tasks if t.proc.poll() not in (None, 0)), None)

    def wait_formed(self):
        """Waits until every task's port answers. Returns None, or an error message."""
        deadline = time.monotonic() + self.opts.cluster_timeout_s
        pending = list(self.tasks)
        while pending:
            bad = self.failed()
            if bad is not None:
                return self._failure(bad)
            pending = [t for t in pending if t.proc.poll() is None and not t.answers()]
            if not pending:
                return None
            if time.monotonic() > deadline:
                names = ", ".join(f"{t.name} ({t.address})" for t in pending)
                return (f"cluster did not form within {self.opts.cluster_timeout_s:g}s "
                        f"(--cluster_timeout): no answer from {names}")
            time.sleep(0.2)
        return None

    @staticmethod
    def _how(task):
        code = task.proc.returncode
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return f"task {task.name} {how}"

    def _failure(self, task):
        lines = "\n".join(f"    {line}" for line in list(task.tail)[-10:])
        return f"{self._how(task)}; its last lines:\n{lines}"

    def _preempted(self, first):
        """An MWMS worker was preempted: every worker is saving the same step and will exit with
        PREEMPTED_EXIT_CODE; wait for that instead of killing them mid-save."""
        deadline = time.monotonic() + self.opts.done_grace_s
        for task in self.tasks:
            try:
                task.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return 1, f"{first.name} exited as preempted, but {task.name} did not save " \
                          f"and exit within {self.opts.done_grace_s:g}s"
        codes = {t.name: t.proc.returncode for t in self.tasks}
        if set(codes.values()) != {PREEMPTED_EXIT_CODE}:
            return 1, f"{first.name} exited as preempted, but not every task did: {codes}"
        return PREEMPTED_EXIT_CODE, ("preempted: every worker saved a checkpoint at the same step "
                                     f"and exited with code {PREEMPTED_EXIT_CODE}; rerun the same "
                                     "command to resume")

    def port_clash(self):
        return any(clash in line for t in self.tasks for line in t.tail for clash in _PORT_CLASH)

    def wait_done(self):
        """Returns (exit code, message). Success = the chief exits 0."""
        chief = self.chief
        while True:
            bad = self.failed()
            if bad is not None and bad.task_type == "worker" and self.tolerates_lost_workers \
                    and len(self.restarts) < self.opts.max_restarts:
                self.out(f"launch: {self._how(bad)}; restarting it (PSS tolerates lost "
                         f"workers; restart {len(self.restarts) + 1}/{self.opts.max_restarts})")
                self.restarts.append(bad.name)
                bad.start()
                continue
            if bad is not None and bad.proc.returncode == PREEMPTED_EXIT_CODE:
                return self._preempted(bad)
            if bad is not None:
                return 1, self._failure(bad)
            if chief.proc.poll() == 0:
                break
            time.sleep(0.1)
        # MWMS workers finish with the chief; PSS workers and parameter servers never exit on
        # their own (they serve until stopped), so they are stopped here.
        deadline = time.monotonic() + self.opts.done_grace_s
        others = [t for t in self.tasks if t.task_type == "worker" and t is not chief
                  and "ps" not in self.cluster]
        for task in others:
            try:
                task.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return 1, f"task {task.name} did not finish within {self.opts.done_grace_s:g}s " \
                          f"of the chief"
            if task.proc.returncode != 0:
                return 1, self._failure(task)
        return 0, ""


def _print(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def run(opts, out=_print):
    """Launches the cluster, waits for it, stops it. Returns the exit code for the launcher."""
    stop_requested = []

    def on_signal(signum, _frame):
        stop_requested.append(signum)
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for attempt in range(opts.port_retries + 1):
            cluster_spec = local_cluster(opts.num_workers, opts.num_ps, opts.chief)
            cluster = Cluster(opts, cluster_spec, out)
            try:
                message = cluster.wait_formed()
                code = 1 if message else None
                if code is None:
                    code, message = cluster.wait_done()
                clash = code != 0 and cluster.port_clash()
            finally:
                cluster.stop()
            if clash and attempt < opts.port_retries:
                out(f"launch: port clash, retrying with fresh ports ({attempt + 1}/"
                    f"{opts.port_retries})")
                continue
            if code:
                out(f"launch: FAILED: {message}")
            return code
    except KeyboardInterrupt:
        signum = stop_requested[0] if stop_requested else signal.SIGINT
        out(f"launch: stopped by {signal.Signals(signum).name}; all tasks stopped")
        return 128 + signum
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 1


def maybe_isolate(module_argv, isolate):
    """Re-executes this launcher inside a private network namespace when asked and possible.

    Returns only when no re-exec happened (already isolated, turned off, or not possible: then a
    loud warning says the cluster's ports are reachable from the network)."""
    if not isolate or netns.in_private_namespace():
        return
    if netns.isolation_available():
        sys.stdout.flush()
        command = netns.isolated_command(module_argv)
        os.execvp(command[0], command)
    sys.stderr.write(
        "WARNING: cannot create a private network namespace here (unshare --net failed); the "
        "local cluster's gRPC ports listen on ALL interfaces without authentication. Pass "
        "--noisolate_network to silence this warning.\n")


def main():
    from absl import app, flags

    workers = flags.DEFINE_integer("workers", 2, "Worker tasks.", lower_bound=1)
    ps = flags.DEFINE_integer("ps", 0, "Parameter-server tasks.", lower_bound=0)
    chief = flags.DEFINE_bool("chief", False, "Add a chief task (needed for PSS).")
    threads = flags.DEFINE_integer("threads_per_task", 0,
                                   "Intra/inter-op threads per task (0: cores / tasks).",
                                   lower_bound=0)
    timeout = flags.DEFINE_float("cluster_timeout", 60.0,
                                 "Seconds for every task's port to answer.", lower_bound=1.0)
    isolate = flags.DEFINE_bool("isolate_network", True,
                                "Run the cluster in a private network namespace (loopback only).")

    def launch(argv):
        command = argv[1:]
        if not command:
            sys.stderr.write("error: give the command after --, e.g. "
                             "python -m tf_config.launch --workers=2 -- python train.py\n")
            sys.exit(2)
        maybe_isolate([sys.executable, "-m", "tf_config.launch"] + sys.argv[1:], isolate.value)
        sys.exit(run(LaunchOptions(num_workers=workers.value, num_ps=ps.value, chief=chief.value,
                                   threads_per_task=threads.value,
                                   cluster_timeout_s=timeout.value,
                                   command=lambda kind, index, n: command)))

    app.run(launch)


if __name__ == "__main__":
    main()

"""The hang watchdog of a local cluster: when no training step completes for too long, every
task writes its Python stacks into its log and the launcher fails in one line naming the stuck
task and what the others wait for, instead of waiting silently for a collective's timeout
(tensorflow#35878, #34638).

    python -m experiments.run --strategy=multi_worker_mirrored --num_workers=2 \
        --fail_task=worker:1 --fail_mode=hang --fail_at_step=20 --watchdog_s=10

The clock: the chief's step markers (tf_config.events). The watchdog arms at the first one (the
first step traces and may take minutes), and fires when the next one is later than
max(--watchdog_s, --watchdog_factor x the median time between markers so far); under PSS the
markers of its calls' ends (scheduling runs ahead). The end of an epoch's steps, evaluation,
checkpoints and traces stop the clock (they may legitimately take long: a hang inside them is not
caught) and the return to training steps restarts it. Each task registers faulthandler for SIGUSR1 at start (`enable_dumps`);
the launcher signals only tasks that did, since SIGUSR1 kills a process that did not.
"""
import collections
import faulthandler
import os
import re
import signal
import statistics
import time

STACKS_ENV = "TFDIST_STACKS_FILE"  # where a task's faulthandler writes its stacks
DUMP_SIGNAL = signal.SIGUSR1
DUMP_WAIT_S = 3.0  # how long the launcher waits for the stacks of every signalled task
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')
_THREAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-f]+")


def enable_dumps():
    """In a task: write every thread's Python stack to $TFDIST_STACKS_FILE on SIGUSR1 (nothing
    without a launcher). The file is created now: the launcher signals only tasks that have one."""
    path = os.environ.get(STACKS_ENV)
    if not path:
        return
    stacks = open(path, "w")  # kept open for the process's life: faulthandler writes to its fd
    faulthandler.register(DUMP_SIGNAL, file=stacks, all_threads=True)
    enable_dumps.file = stacks  # referenced, so it is never closed by the collector


class Watchdog:
    """When a run counts as hung: `progress` at each step marker, `phase(False)` when the chief
    leaves the steps (evaluation, a checkpoint), `phase(True)` when it returns to them;
    `overdue(now)` -> (seconds since the clock last started, the limit, the median interval)
    once past the limit. The launcher's reader threads call the first two while its supervising
    loop calls `overdue`: each reads the shared state once."""

    WINDOW = 1000  # the median is over the last WINDOW intervals between steps

    def __init__(self, timeout_s, factor):
        self.timeout_s, self.factor = timeout_s, factor
        self._last = None  # when the clock last started; None: not armed, or stopped
        self._stepped = False  # a step has completed (the first one traces: never timed)
        self._intervals = collections.deque(maxlen=self.WINDOW)
        self._median = 0.0  # of _intervals, updated with each step

    def progress(self, now=None):
        now = time.monotonic() if now is None else now
        last = self._last
        if last is not None:
            self._intervals.append(now - last)
            self._median = statistics.median(self._intervals)
        self._last, self._stepped = now, True

    def phase(self, training, now=None):
        now = time.monotonic() if now is None else now
        # back to steps: the clock starts again once the first step is done (the time away
        # from the steps is no interval: the next step's counts from here)
        self._last = now if training and self._stepped else None

    def limit(self):
        median = self._median
        return max(self.timeout_s, self.factor * median), median

    def overdue(self, now=None):
        last = self._last
        if not self.timeout_s or last is None:
            return None
        now = time.monotonic() if now is None else now
        limit, median = self.limit()
        waited = now - last
        return (waited, limit, median) if waited > limit else None


def threads(text):
    """[[(file, line, function), ...innermost first], ...] of a faulthandler dump."""
    out = []
    for line in text.splitlines():
        if _THREAD.match(line):
            out.append([])
        else:
            m = _FRAME.match(line)
            if m and out:
                out[-1].append((m["file"], int(m["line"]), m["func"]))
    return [t for t in out if t]


def main_thread(text):
    """The frames of the thread that runs the program (its outermost frame is a module's top
    level, or runpy's), or None."""
    for frames in threads(text):
        if frames[-1][2] in ("<module>", "_run_module_as_main"):
            return frames
    return None


def _short(path, root):
    """A frame's file as a reader finds it: relative to the project, or to site-packages."""
    if "site-packages" + os.sep in path:  # a library, even in a virtualenv inside the project
        return path.split("site-packages" + os.sep, 1)[1]
    if path.startswith(root + os.sep):
        return os.path.relpath(path, root)
    return "/".join(path.split(os.sep)[-2:])


def where(text, root):
    """(where the main thread is, in_tensorflow): its innermost frame of the project under `root`
    (the caller of what it waits in) and the innermost frame of what it called: TensorFlow's
    (or Keras's) when the call went through it (a step, the coordinator's join), else the
    innermost frame overall."""
    frames = main_thread(text)
    if not frames:
        return None, False
    at = next((i for i, f in enumerate(frames) if f[0].startswith(root + os.sep) and
               "site-packages" + os.sep not in f[0]), len(frames))
    called = frames[:at]
    library = [f for f in called if "/tensorflow/" in f[0] or "/keras/" in f[0]]
    inner = library[0] if library else frames[0]
    said = f"{_short(inner[0], root)}:{inner[1]} in {inner[2]}"
    if at < len(frames) and frames[at] != inner:
        ours = frames[at]
        said = f"{_short(ours[0], root)}:{ours[1]} in {ours[2]}, inside {said}"
    return said, bool(library)


def diagnose(tasks, root):
    """One clause per task: tasks = [(name, state, stacks text or None)], state a psutil status
    ("stopped", "zombie", ...). The stuck ones first: a stopped process, one whose main thread
    is in Python code of its own rather than waiting inside TensorFlow, one that did not answer."""
    stuck, waiting = [], []
    for name, state, text in tasks:
        if state in ("stopped", "tracing-stop"):
            stuck.append(f"{name} is stopped (process state {state}: it runs no code)")
            continue
        if state in ("zombie", "dead"):
            stuck.append(f"{name} has exited")
            continue
        if not text:
            stuck.append(f"{name} did not write its stacks within {DUMP_WAIT_S:g}s (it had not "
                         "registered for them yet, or it is not this toolkit's command)")
            continue
        said, in_tf = where(text, root)
        if said is None:
            stuck.append(f"{name}: no main thread in its stacks")
        elif in_tf:
            waiting.append(f"{name} waits inside TensorFlow at {said}")
        else:
            stuck.append(f"{name} is stuck at {said}")
    if not stuck:
        stuck.append("no task is stopped or outside TensorFlow: every one waits in a step "
                     "(a collective or a parameter server that never answers)")
    return "; ".join(stuck + waiting)


def stacks_path(log_dir, task_type, index):
    return os.path.join(log_dir, f"{task_type}-{index}.stacks")


def _state(pid):
    import psutil

    try:
        return psutil.Process(pid).status()
    except psutil.Error:
        return "dead"


def explain_hang(tasks, log_dir, root=None):
    """Signals every live, running task that registered for stack dumps, waits at most
    DUMP_WAIT_S for their stacks, appends them to each task's log and returns `diagnose`'s
    clause. tasks: tf_config.task_process.Task objects."""
    root = root or os.getcwd()
    states = {t.name: _state(t.proc.pid) if t.proc.poll() is None else "dead" for t in tasks}
    signalled = {}
    for t in tasks:
        path = stacks_path(log_dir, t.task_type, t.index)
        if states[t.name] not in ("stopped", "tracing-stop", "zombie", "dead") and \
                os.path.exists(path):
            try:
                os.kill(t.proc.pid, DUMP_SIGNAL)
                signalled[t.name] = path
            except ProcessLookupError:
                states[t.name] = "dead"
    deadline = time.monotonic() + DUMP_WAIT_S
    while time.monotonic() < deadline and any(
            not os.path.getsize(p) for p in signalled.values() if os.path.exists(p)):
        time.sleep(0.1)
    if signalled:
        time.sleep(0.2)  # a dump is written thread by thread: let the last one finish
    found = []
    for t in tasks:
        text = None
        if t.name in signalled and os.path.exists(signalled[t.name]):
            with open(signalled[t.name]) as f:
                text = f.read() or None
        t.note(f"--- watchdog: {t.name} is {states[t.name]}; its Python stacks:" if text else
               f"--- watchdog: {t.name} is {states[t.name]}; no Python stacks ---")
        for line in (text or "").splitlines():
            t.note(line)
        if text:
            t.note("--- watchdog: end of stacks ---")
        found.append((t.name, states[t.name], text))
    return diagnose(found, root)


def remove_stack_files(log_dir):
    """The tasks' stack files (their content, if any, was copied into the task logs)."""
    try:
        names = os.listdir(log_dir)
    except OSError:
        return
    for name in names:
        if name.endswith(".stacks"):
            try:
                os.remove(os.path.join(log_dir, name))
            except OSError:
                pass

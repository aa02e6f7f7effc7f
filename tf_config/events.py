"""What a local cluster's launcher and its tasks tell each other.

Tasks -> launcher, as marker lines on their output (the launcher reads them and never shows them):
    tfdist-fault: kill worker:1 12   the chief asks for a fault (--fail_task, --fail_at_step)
    tfdist-step: 212                 the chief finished (MWMS) or scheduled (PSS) global step 212
    tfdist-done: 212                 PSS: the scheduled call ending at global step 212 finished
    tfdist-resumed: 200              the chief restored a checkpoint with 200 steps done
    tfdist-finished: worker:1        a task did all its work (what is left is its process's exit)
    tfdist-phase: evaluate           the chief leaves the training steps for a while (evaluate,
                                     checkpoint) or returns to them (train): the hang watchdog
                                     (tf_config/watchdog.py) stops and restarts its clock
Launcher -> tasks, in their environment: the run tag, the launch time, which attempt this cluster
is (0, then 1.. after whole-cluster restarts) and a JSON file, rewritten atomically, with the
faults injected and the restarts so far; the chief copies it into the record.
The launcher reads the chief's markers (and every task's `finished`); without a launcher (Vertex, a TFJob) nothing is printed.
"""
import json
import os
import signal
import tempfile

FAULT_MARK = "tfdist-fault: "
STEP_MARK = "tfdist-step: "
DONE_MARK = "tfdist-done: "
FINISHED_MARK = "tfdist-finished: "
RESUMED_MARK = "tfdist-resumed: "
PHASE_MARK = "tfdist-phase: "
TRAIN_PHASE = "train"
# kill: a lost machine; preempt: a preemption notice; hang: a frozen process (SIGSTOP: it holds
# its connections and answers nothing, the hang watchdog's case)
FAULT_SIGNALS = {"kill": signal.SIGKILL, "preempt": signal.SIGTERM, "hang": signal.SIGSTOP}
# A preempted MWMS worker exits with this after its checkpoint (EX_TEMPFAIL: try again later).
PREEMPTED_EXIT_CODE = 75
# A task that found bad input (a flag, the user's model or data) printed one "error: ..." line and
# exited with this; the launcher exits with it too, after that line, and writes nothing.
BAD_INPUT_EXIT_CODE = 2
RUN_TAG_ENV = "TFDIST_LAUNCH_TAG"  # every task carries it, so tests can find leftovers
# Wall-clock start (epoch seconds) of the launching command: tasks measure launch-to-first-step.
LAUNCH_T0_ENV = "TFDIST_LAUNCH_T0"
ATTEMPT_ENV = "TFDIST_LAUNCH_ATTEMPT"
EVENTS_ENV = "TFDIST_LAUNCH_EVENTS"
# The cores a task pins itself to at start ("0" or "2,3"), set by the launcher with pin_workers
# and applied by experiments.engine.tf_settings.apply before TensorFlow starts its threads.
PIN_CPUS_ENV = "TFDIST_PIN_CPUS"
# With it, how many CPUs the whole run may use (the launcher's): a pinned task's own affinity is
# its share, not the machine the cluster shared (experiments/measure/environment.py).
RUN_CPUS_ENV = "TFDIST_RUN_CPUS"


def under_launcher():
    return bool(os.environ.get(EVENTS_ENV))


def _mark(prefix, text):
    if under_launcher():
        print(f"{prefix}{text}", flush=True)


def report_step(step):
    _mark(STEP_MARK, step)


def report_phase(name):
    """TRAIN_PHASE when the chief returns to training steps; anything else when it leaves them."""
    _mark(PHASE_MARK, name)


def report_done(step):
    _mark(DONE_MARK, step)


def report_finished(task):
    _mark(FINISHED_MARK, task)


def report_resumed(step):
    _mark(RESUMED_MARK, step)


def request_fault(mode, task, at_step):
    """Asks the launcher to kill (or preempt) `task`. A whole-cluster restart replays the steps
    since the last checkpoint; the launcher injects a run's fault once, so it is not asked again."""
    if int(os.environ.get(ATTEMPT_ENV) or 0) == 0:
        _mark(FAULT_MARK, f"{mode} {task} {at_step}")


def parse_fault(request):
    """'kill worker:1 12' -> ('kill', 'worker:1', 12), or None when malformed."""
    parts = request.split()
    if len(parts) != 3 or parts[0] not in FAULT_SIGNALS or not parts[2].isdigit():
        return None
    return parts[0], parts[1], int(parts[2])


def read_launch_events():
    """The launcher's journal ({"faults": [...], "restarts": [...]}), or None without a launcher."""
    path = os.environ.get(EVENTS_ENV)
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def write_launch_events(path, journal):
    """Atomically (temp file + rename): a task may read it at any moment."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".events-")
    with os.fdopen(fd, "w") as f:
        json.dump(journal, f, indent=1)
    os.replace(tmp, path)


def task_name(env):
    """`worker:1`: the task in an environment's TF_CONFIG; None without one (or malformed)."""
    try:
        task = json.loads(env.get("TF_CONFIG") or "{}")["task"]
        return f"{task['type']}:{task['index']}"
    except (ValueError, KeyError, TypeError):
        return None


def running_tasks(tag):
    """{task name: psutil.Process} of a launch's live tasks (found by RUN_TAG_ENV = `tag`): for
    faults injected from outside (the chaos benchmark, tests) and for leftover checks."""
    import psutil  # the tasks never call this; the launcher's side has psutil anyway

    found = {}
    for proc in psutil.process_iter(["pid"]):
        try:
            env = proc.environ()
            name = task_name(env)
            if env.get(RUN_TAG_ENV) != tag or name is None:
                continue
            # unshare / netns wrappers carry the same environment; the task is the innermost.
            if name not in found or proc.ppid() == found[name].pid:
                found[name] = proc
        except (psutil.Error, ValueError, KeyError):
            continue
    return found

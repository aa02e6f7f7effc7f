"""Launch a local cluster: one process per task, each with its own TF_CONFIG.

    python -m tf_config.launch --workers=2 -- python my_mwms_script.py
    python -m tf_config.launch --workers=2 --ps=1 --chief -- python my_pss_script.py

    python -m tf_config.launch --workers=2 --restart_cluster --max_restarts=2 -- \
        python my_mwms_script_that_resumes_from_its_checkpoints.py

Each task's output is prefixed with its role (all of it, TensorFlow's chatter included, also goes
to `--task_log_dir`/<task>.log). A task that ends badly is handled by one policy in every phase
(tf_config/recovery.py): an error fails the run within seconds, naming the task with its last log
lines; a lost PSS worker is restarted; any other lost task restarts the whole cluster when the
command resumes from checkpoints (--restart_cluster), up to --max_restarts restarts in all. A
command that prints step markers (tf_config.events) is watched for hangs (tf_config/watchdog.py).
The cluster must form (every task's port answering) within --cluster_timeout; Ctrl-C, SIGTERM
and the end of the run stop every task. Tasks also die with the launcher (PR_SET_PDEATHSIG), even
if it is killed with -9.
"""
import dataclasses
import os
import shutil
import signal
import sys
import tempfile

from tf_config import netns, recovery, watchdog
from tf_config.attempt import Cluster, LaunchState
from tf_config.cores import Placement, default_threads
from tf_config.events import BAD_INPUT_EXIT_CODE
from tf_config.spec import local_cluster


@dataclasses.dataclass
class LaunchOptions:
    num_workers: int
    num_ps: int = 0
    chief: bool = False
    # Each task's threads, and where pinned workers go, the chief and ps on the CPUs they leave
    # (tf_config.cores.placement, made where the cluster was planned); None: not pinned,
    # cores // tasks threads each (at least 1)
    placement: object = None
    cluster_timeout_s: float = 60.0
    isolate_network: bool = True
    port_retries: int = 2
    done_grace_s: float = 30.0  # after the chief succeeds, how long other workers may finish
    max_restarts: int = 3  # restarts of lost tasks or of the whole cluster (tf_config.recovery)
    cluster_restarts: bool = False  # the command resumes from its checkpoints: restart it whole
    # How the user turns cluster_restarts on (tf_config.launch: --restart_cluster), for messages.
    cluster_restart_hint: str = recovery.RestartPolicy.cluster_restart_hint
    log_dir: str = ""  # each task's full output; "": a temporary directory, kept on failure
    verbose: bool = False  # show TensorFlow's start-up chatter and gRPC errors of every task
    tag: str = ""
    # The hang watchdog (tf_config/watchdog.py): fail when no step completes for
    # max(watchdog_s, watchdog_factor x the median time between steps); 0: off
    watchdog_s: float = 300.0
    watchdog_factor: float = 20.0
    # Called with (task_type, index, threads) -> argv of that task.
    command: object = None


def _print(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def run(opts, out=_print):
    """Launches the cluster, supervises it (restarting as tf_config.recovery says), stops it.
    Returns the exit code for the launcher."""
    stop_requested = []

    def on_signal(signum, _frame):
        stop_requested.append(signum)
        raise KeyboardInterrupt

    if opts.placement is None:
        tasks = opts.num_workers + opts.num_ps + (1 if opts.chief else 0)
        opts = dataclasses.replace(opts, placement=Placement(default_threads(tasks)))
    log_dir = opts.log_dir or tempfile.mkdtemp(prefix="tfdist-launch-")
    created = _missing_dirs(log_dir)  # removed again after bad input: nothing written
    os.makedirs(log_dir, exist_ok=True)
    state = LaunchState(recovery.RestartPolicy(opts.max_restarts, opts.cluster_restarts,
                                                opts.cluster_restart_hint),
                         recovery.Journal(os.path.join(log_dir, "launch-events.json")), log_dir,
                         tempfile.mkdtemp(prefix="tfdist-tmp-"))
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    code = 1
    try:
        attempt = clashes = 0
        while True:
            cluster_spec = local_cluster(opts.num_workers, opts.num_ps, opts.chief)
            cluster = Cluster(opts, cluster_spec, out, state, attempt)
            try:
                outcome = cluster.supervise()
                clash = outcome.code != 0 and not outcome.restart_cluster and \
                    cluster.port_clash()
            finally:
                cluster.stop()
            if clash and clashes < opts.port_retries:
                clashes += 1
                out(f"launch: port clash, retrying with fresh ports ({clashes}/"
                    f"{opts.port_retries})")
                continue
            if outcome.restart_cluster:
                attempt += 1
                continue
            code = outcome.code
            if code == BAD_INPUT_EXIT_CODE:  # one line, as the task's own bad input would be
                sys.stderr.write(f"error: {outcome.message}\n")
                sys.stderr.flush()
            elif code:
                out(f"launch: FAILED: {outcome.message}")
            return code
    except KeyboardInterrupt:
        signum = stop_requested[0] if stop_requested else signal.SIGINT
        out(f"launch: stopped by {signal.Signals(signum).name}; all tasks stopped")
        code = 128 + signum
        return code
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for log in state.logs.values():
            log.close()
        watchdog.remove_stack_files(log_dir)
        shutil.rmtree(state.tmp_dir, ignore_errors=True)  # every task is stopped by now
        if code == 0 and not opts.log_dir:
            shutil.rmtree(log_dir, ignore_errors=True)
        elif code == BAD_INPUT_EXIT_CODE:
            shutil.rmtree(log_dir, ignore_errors=True)
            for path in reversed(created[:-1]):  # the log dir's new parents, if left empty
                try:
                    os.rmdir(path)
                except OSError:
                    break
        elif code:
            out(f"launch: every task's full output is in {log_dir}")


def _missing_dirs(path):
    """`path` and its ancestors that do not exist yet, outermost first."""
    missing, probe = [], os.path.abspath(path)
    while not os.path.exists(probe):
        missing.insert(0, probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    return missing


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
    max_restarts = flags.DEFINE_integer("max_restarts", 3, "Restarts of lost tasks (or of the "
                                        "whole cluster) before the launch fails.", lower_bound=0)
    restart_cluster = flags.DEFINE_bool("restart_cluster", False, "The command resumes from its "
                                        "own checkpoints: restart the whole cluster when a task "
                                        "other than a PSS worker is lost.")
    watchdog_s = flags.DEFINE_float("watchdog_s", 300.0, "Fail when the chief's step markers "
                                    "(tf_config.events.report_step) stop for max(this, "
                                    "--watchdog_factor x their median interval); 0: off.",
                                    lower_bound=0.0)
    watchdog_factor = flags.DEFINE_float("watchdog_factor", 20.0, "See --watchdog_s.",
                                         lower_bound=1e-3)
    grace = flags.DEFINE_float("done_grace_s", 30.0, "After the chief succeeds, seconds the "
                               "other tasks get to finish and exit before they are stopped.",
                               lower_bound=0.0)
    log_dir = flags.DEFINE_string("task_log_dir", "", "Each task's full output goes to "
                                  "TASK_LOG_DIR/<task>.log (default: a temporary directory, kept when "
                                  "the launch fails).")

    def launch(argv):
        command = argv[1:]
        if not command:
            sys.stderr.write("error: give the command after --, e.g. "
                             "python -m tf_config.launch --workers=2 -- python train.py\n")
            sys.exit(2)
        if shutil.which(command[0]) is None:
            sys.stderr.write(f"error: command {command[0]!r} not found (after --)\n")
            sys.exit(2)
        maybe_isolate([sys.executable, "-m", "tf_config.launch"] + sys.argv[1:], isolate.value)
        sys.exit(run(LaunchOptions(num_workers=workers.value, num_ps=ps.value, chief=chief.value,
                                   placement=Placement(threads.value) if threads.value
                                   else None,
                                   cluster_timeout_s=timeout.value,
                                   max_restarts=max_restarts.value,
                                   cluster_restarts=restart_cluster.value, log_dir=log_dir.value,
                                   watchdog_s=watchdog_s.value,
                                   watchdog_factor=watchdog_factor.value,
                                   done_grace_s=grace.value,
                                   command=lambda kind, index, n: command)))

    app.run(launch)


if __name__ == "__main__":
    main()

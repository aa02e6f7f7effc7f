"""--adapt: one training run as a chain of segments, each an `experiments.run` of one
configuration, resumed from the last one's checkpoint when the chief asks for a switch.

    python -m experiments.run --strategy=auto --adapt --plan_profile=PROFILE.json \
        --plan_cluster=CLUSTER.json --model=cnn --epochs=8 \
        --emulate_bandwidth_schedule=0:10,3:0.05      # the network slows after 3 epochs
        --straggler_schedule=0:0,5:60                  # the last worker +60 ms/step after 5

The global batch is fixed at the plan's choice's global batch (or --global_batch_size) for
the whole run, and the first configuration is the fastest at it: every configuration trains the
same updates, so the checkpoint's step count, the learning-rate schedule and the epochs' data
stay consistent across switches; switches happen only between epochs. The checkpoint
directory holds the journal (segment.JOURNAL): with --checkpoint_dir, rerunning the same command
resumes the run in the configuration it was in (without it, each run gets a new directory under
--results_dir).
"""
import datetime
import json
import os
import signal
import subprocess
import sys
import time

from experiments.adaptive import decide, segment
from experiments.config import auto
from experiments.config.run_config import AUTO, ConfigError
from experiments.config import planned_run
from results.model import planner, specs
from results.records.store import write_json_atomic
from strategies import needs_cluster
from tf_config import task_process

# A single process has no network to shape and no second host to slow: its segment (and a
# profiling run) goes without the emulation flags.
UNSHAPED = ["--emulate_bandwidth_schedule=", "--emulate_bandwidth_gbps=0",
            "--emulate_latency_ms=0", "--straggler_schedule="]


def check(cfg, in_cluster):
    """ConfigError (one line) when --adapt cannot run as asked."""
    if cfg.strategy != AUTO:
        raise ConfigError(f"--adapt switches between the plan's configurations: it needs "
                          f"--strategy=auto (got "
                          f"--strategy={cfg.strategy})")
    if in_cluster:
        raise ConfigError("--adapt relaunches the cluster it trains on: TF_CONFIG already fixes "
                          "one (run it without TF_CONFIG, on one machine)")
    if cfg.accumulation_steps != 1:
        raise ConfigError(f"--adapt holds one global batch across configurations: "
                          f"--accumulation_steps={cfg.accumulation_steps} is not supported")
    for flag in ("straggler_task", "fail_task"):  # they name a task a switch may not have
        if getattr(cfg, flag):
            raise ConfigError(f"--{flag}={getattr(cfg, flag)} names a task of one "
                              f"configuration; --adapt switches between configurations (a "
                              f"--straggler_schedule slows the last worker of each)")
    if cfg.straggler_delay_ms:
        raise ConfigError(f"--straggler_delay_ms={cfg.straggler_delay_ms:g} needs a "
                          f"--straggler_task; under --adapt give --straggler_schedule")


def checkpoint_dir(cfg):
    if cfg.checkpoint_dir:
        return cfg.checkpoint_dir
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
    return os.path.join(cfg.results_dir, "checkpoints", f"adapt-{stamp}")


def _segment_flags(config, global_batch, directory, cpus, threads_per_worker=0):
    """The flags a segment in `config` runs with after the user's: the configuration, pinned
    as a comparison pins it on `cpus` (ids, or how many: auto.pin_flag), the run's global batch
    and checkpoints, and no emulated network for one process."""
    values = planned_run.settings(config)
    flags = [f"--{key}={value}" for key, value in values.items()]
    flags += [auto.pin_flag(values, cpus, threads_per_worker),
              f"--global_batch_size={global_batch}", f"--checkpoint_dir={directory}"]
    strategy, workers = values["strategy"], values["num_workers"]
    return flags + ([] if needs_cluster(strategy, workers) else UNSHAPED)


def run_child(command, env=None, **popen):
    """Runs a child command (a segment, a profiling run) in a session of its own that dies with
    this process; SIGINT/SIGTERM reach it once, from here (its launcher then stops its tasks).
    Returns (exit code, 128 + the signal when one stopped it, else None)."""
    stop, proc = [], []

    def forward(signum, _frame):
        stop.append(signum)
        if proc:
            proc[0].send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        proc.append(subprocess.Popen(command, env=env, start_new_session=True,
                                     preexec_fn=task_process.die_with_parent, **popen))
        if stop:  # asked to stop while it started
            proc[0].send_signal(stop[0])
        out = proc[0].communicate()
        code = proc[0].returncode
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return code, (128 + stop[0] if stop else None), out


def first_configuration(cfg, plan):
    """(the configuration the chain starts in, the global batch the whole run keeps): the
    fastest at that batch of those --adapt switches between (decide.candidates). ConfigError
    (one line) when none fits: the plan's best is then one a switch could not leave (a tensor
    split's or ZeRO's checkpoints resume only under the same split)."""
    chosen = planner.Config(**plan["chosen"]["config"])
    global_batch = cfg.global_batch_size or \
        cfg.batch_size_per_replica * chosen.replicas
    profile = specs.load_profile(cfg.plan_profile, "plan_profile")
    cluster = specs.load_cluster(cfg.plan_cluster, "plan_cluster")
    first = decide.best(profile, cluster, global_batch)
    if first is None:
        raise ConfigError(f"--adapt: none of the configurations it switches between fits "
                          f"{cfg.plan_cluster} at a global batch of {global_batch} (the plan's "
                          f"best, {plan['chosen']['configuration']}, is one a switch could not "
                          f"leave); run --strategy=auto without --adapt")
    return first[0], global_batch


def inferred(journal, key):
    """The last switch's verdict's `key` among those that inferred it, else None."""
    return next((s["verdict"][key] for s in reversed(journal["switches"])
                 if s["verdict"].get(key) is not None), None)


def supervise(cfg, argv, cpus, schedule="", threads_per_worker=0):
    """Runs the chain; returns the exit code of the command (the last segment's). cpus: the
    CPUs its local clusters may use (tf_config.cores.usable_cpus); schedule:
    --emulate_bandwidth_schedule, noted in the journal (a one-device segment's record has no
    network to say it); threads_per_worker: the launcher's (0: its default)."""
    _, plan = auto.choose(cfg.plan_profile, cfg.plan_cluster)
    directory = checkpoint_dir(cfg)
    journal_path = os.path.join(directory, segment.JOURNAL)
    request_path = os.path.join(directory, segment.REQUEST)
    if os.path.exists(journal_path):  # a rerun: go on in the configuration the run was in
        with open(journal_path) as f:
            journal = json.load(f)
        print(f"adapt: resuming {journal_path} in {journal['segments'][-1]['configuration']}",
              flush=True)
    else:
        first, global_batch = first_configuration(cfg, plan)
        journal = {"global_batch": global_batch, "profile": cfg.plan_profile,
                   "cluster": cfg.plan_cluster, "threshold": cfg.adapt_threshold,
                   "started_at": time.time(), "segments": [], "switches": [],
                   "schedule": schedule, "straggler_schedule": cfg.straggler_schedule,
                   "initial": decide.config_json(first)}
    while True:
        if os.path.exists(request_path):  # the last segment asked for a switch
            with open(request_path) as f:
                journal["switches"].append(json.load(f))
            os.remove(request_path)
        current = decide.config_from(journal["switches"][-1]["to"] if journal["switches"]
                                     else journal["initial"])
        journal["segments"].append({"configuration": current.name,
                                    "config": decide.config_json(current),
                                    "started_at": time.time()})
        os.makedirs(directory, exist_ok=True)
        write_json_atomic(journal_path, journal)
        flags = _segment_flags(current, journal["global_batch"], directory, cpus,
                               threads_per_worker)
        print(f"adapt: segment {len(journal['segments'])}: {current.name} ({' '.join(flags)})",
              flush=True)
        env = dict(os.environ)
        env[auto.PLAN_ENV] = json.dumps(plan)
        env[segment.ADAPT_ENV] = json.dumps({
            "checkpoint_dir": directory, "profile": journal["profile"],
            "cluster": journal["cluster"], "global_batch": journal["global_batch"],
            "threshold": journal["threshold"], "current": decide.config_json(current),
            "left": [[s["from"], s["verdict"]["inferred_gbps"]] for s in journal["switches"]],
            # the network and the straggler the switches inferred: this segment's predictions
            # start from them
            "network_gbps": inferred(journal, "inferred_gbps"),
            "straggler_s": inferred(journal, "straggler_s"),
            "started_at": journal["segments"][-1]["started_at"],
            "run_started_at": journal["started_at"]})
        code, stopped, _ = run_child([sys.executable, "-m", "experiments.run", *argv[1:],
                                      *flags], env)
        if stopped or code != 0 or not os.path.exists(request_path):
            return stopped or code

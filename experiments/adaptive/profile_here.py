"""--strategy=auto without --plan_profile: the workload profile measured here first, briefly.

    python -m experiments.run --strategy=auto --plan_cluster=CLUSTER.json --model=cnn

Three short runs of the same model, data and batch, one thread each: one device and one MWMS
worker (the compute of a replica's step on one core: the median of the two, the MWMS step less
its probe; results/model/workload_profile.py), and one PSS worker (with its ps and chief; the worker
pinned to one core where one is left for them, as in a comparison: tf_config.cores)
with their communication probes (gradient and pull bytes, each strategy's own overhead: a PSS
step's dispatch through the coordinator costs more than a small model's compute; the CPU an
example costs over all tasks). For a cluster on this one machine (the spec's machine_cores, K
cores) also: a brief sharing calibration at each worker count the planner may use
(experiments/comparison/sharing.py: plain loops in lockstep, 2 rounds of 8 steps; pinned where
a comparison's are: K one-thread loops on K cores; the cluster auto then runs follows
tf_config.cores.placement with the launcher's threads, which agree where one-thread
workers fill the machine), the profile's `sharing`; and one device at K threads and the batch
it will train (the fixed --global_batch_size, else the per-replica batch), the profile's
`one_process`. The profile
is built from their records as a comparison builds its own (results/model/workload_profile.py) and
written to --results_dir as
profile-<model>-b<batch>-<hash of the dataset, optimizer, learning rate and dtypes, whether
the PSS worker was pinned, and of the process counts, cores and loops' pinning a cluster on
this machine asks for>-here.json;
a later run that trains the same reuses it (delete it to measure again).
"""
import glob
import hashlib
import json
import os
import subprocess
import sys
import tempfile

from experiments.adaptive import supervisor
from experiments.config.cli import bool_flag
from experiments.config.run_config import ConfigError
from experiments.config import planned_run
from results.model import planner
from results.model.workload_profile import profile_of, step_batch_of, step_time_of
from results.records import store as records_io
from results.records.cells import setting_of
from tf_config.cores import placement, usable_cpus
from tf_config.events import BAD_INPUT_EXIT_CODE

STEPS = 16  # per epoch: two steady epochs of 16 steps each, after the tracing one
EPOCHS = 3


class ProfilingFailed(RuntimeError):
    """A profiling run failed for another reason than bad input (one line; its output shown)."""


SHARING_ROUNDS, SHARING_STEPS = 2, 8


def sharing_processes(cluster):
    """The process counts a profile for `cluster` calibrates sharing at: each worker count >= 2
    the planner tries, where the whole cluster is on this machine (machine_cores); none
    otherwise."""
    return planner.device_counts(cluster) if cluster and cluster.machine_cores else []


def one_process_batch(cfg):
    """The batch one device trains in this run: the fixed global batch, else the profile's
    (the planner's one device then trains a replica's batch)."""
    return cfg.global_batch_size or cfg.batch_size_per_replica


def path_for(cfg, cluster=None):
    """profile-<model>-b<batch>-<what else it trains, and this machine's figures a cluster on
    its cores asks for: a short hash>-here.json"""
    return _path(cfg, cluster, _placements(cfg, cluster))


def _path(cfg, cluster, where):
    """path_for, with the profiling runs' placements (_placements) made already."""
    # sharing calibrated with pinned loops (since the calibration pins as the comparison's does)
    # is not a profile of unpinned ones
    local = [sharing_processes(cluster), cluster.machine_cores, one_process_batch(cfg),
             ["pinned" if where[f"sharing-{k}"].pinned else "unpinned"
              for k in sharing_processes(cluster)]] \
        if cluster and cluster.machine_cores else []
    # a profile whose PSS worker had a second core is not this one
    what = json.dumps([cfg.dataset, cfg.optimizer, cfg.learning_rate, cfg.float_dtype,
                       cfg.gradient_sync_dtype, cfg.model_weights, cfg.steps_per_execution,
                       "pss-worker-pinned" if where["parameter_server"].pinned
                       else "pss-unpinned"] + ([local] if local else []))
    return os.path.join(cfg.results_dir,
                        f"profile-{cfg.model.replace(':', '_').replace('/', '_')}"
                        f"-b{cfg.batch_size_per_replica}-"
                        f"{hashlib.sha1(what.encode()).hexdigest()[:8]}-here.json")


def _placements(cfg, cluster):
    """{run: Placement} of the profiling runs that start clusters, on the CPUs this run may use
    (--pin_cores), each as a comparison places the same cluster (tf_config.cores.placement):
    the PSS run's one worker (on a core of its own where one is left for its ps and chief, as
    --strategy=auto's own PSS run with one worker) and the sharing calibration's K loops at
    each K (pinned where K one-thread workers would be)."""
    cpus = usable_cpus(cfg.pin_cores)
    return {"parameter_server": placement("parameter_server", 1, 1, 1, cpus),
            **{f"sharing-{k}": placement("multi_worker_mirrored", k, 0, 1, cpus)
               for k in sharing_processes(cluster)}}


def _runs(cfg, cores, sharing, where):
    """{name: [module, flags...]} of the profiling runs (see the module doc). Each says its
    own strategy after the user's --strategy=auto (absl keeps a flag's last value): the
    sharing calibration's plain loops are one device each."""
    runs = {"one_device": ["experiments.run", "--strategy=one_device"],
            "multi_worker_mirrored": ["experiments.run", "--strategy=multi_worker_mirrored",
                                      "--num_workers=1"],
            "parameter_server": ["experiments.run", "--strategy=parameter_server",
                                 "--num_workers=1", "--num_ps=1",
                                 # its worker on one core, as the comparison's (tf_config.cores)
                                 bool_flag("pin_workers", where["parameter_server"].pinned)]}
    if cores:  # one process with the machine's cores, at the batch it will train
        batch = one_process_batch(cfg)
        runs["one_process"] = ["experiments.run", "--strategy=one_device", f"--threads={cores}",
                               f"--batch_size_per_replica={batch}",
                               f"--train_examples={STEPS * batch}"]
    for k in sharing:
        runs[f"sharing-{k}"] = ["experiments.comparison.sharing", "--strategy=one_device",
                                f"--processes={k}", f"--rounds={SHARING_ROUNDS}",
                                f"--steps_per_round={SHARING_STEPS}",
                                bool_flag("pin_loops", where[f"sharing-{k}"].pinned)]
    return runs


def measure(cfg, argv, out=print, cluster=None):
    """The path of the profile of cfg's model at its per-replica batch: reused, or measured
    now. argv: the command's own flags (the model's and data's settings ride along); cluster:
    the ClusterSpec planned for (machine_cores: this machine's figures are measured too)."""
    where = _placements(cfg, cluster)
    path = _path(cfg, cluster, where)
    sharing = sharing_processes(cluster)
    cores = cluster.machine_cores if cluster else 0
    if os.path.exists(path):
        out(f"auto: using the profile measured here before: {path}")
        return path
    out(f"auto: measuring the workload profile here first (3 short runs, 1 thread each"
        f"{f'; one device at {cores} threads, batch {one_process_batch(cfg)}' if cores else ''}"
        f"{'; sharing at ' + ','.join(map(str, sharing)) + ' processes' if sharing else ''})"
        f" -> {path}")
    # the user's model, data, batch, optimizer and dtypes ride along; what would make a run of
    # another kind (topology, pipeline, reducers, faults, emulation) goes back to its default
    brief = ["--noadapt", "--plan_profile=", "--plan_cluster=", *supervisor.UNSHAPED,
             "--checkpoint_dir=", "--global_batch_size=0", "--threads=1",
             "--threads_per_worker=1", "--notensorboard", "--nocompute_probe", "--comm_probe",
             "--straggler_task=", "--straggler_delay_ms=0", "--fail_task=",
             *[f"--{k}={v}" for k, v in planned_run.TRAINING.items()
               if k != "gradient_sync_dtype"],
             f"--epochs={EPOCHS}", f"--train_examples={STEPS * cfg.batch_size_per_replica}"]
    records = {}
    # Each profiling run is a process (or local cluster) of this machine's own, even on a task
    # of a platform's cluster (experiments/adaptive/on_workers.py): not that cluster's
    # TF_CONFIG, nor the platform's output directories.
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG" and not k.startswith("AIP_")}
    with tempfile.TemporaryDirectory(prefix="tfdist-profile-") as tmp:
        for name, (module, *what) in _runs(cfg, cores, sharing, where).items():
            code, stopped, (stdout, stderr) = supervisor.run_child(
                [sys.executable, "-m", module, *argv[1:], *brief, *what,
                 f"--results_dir={os.path.join(tmp, name)}"], env=env, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True)
            if stopped:
                sys.exit(stopped)
            if code == BAD_INPUT_EXIT_CODE:  # the run's own one-line error
                said = [line for line in stderr.splitlines() if line.startswith("error: ")]
                raise ConfigError(said[-1][len("error: "):] if said else stderr[-300:])
            if code:
                sys.stderr.write(stdout[-2000:] + stderr[-2000:])
                raise ProfilingFailed(f"auto: the profiling run {' '.join(what)} failed "
                                      f"(exit {code}; its output is above)")
            (found,) = glob.glob(os.path.join(tmp, name, "records", "*.json"))
            with open(found) as f:
                records[name] = json.load(f)
    one, mwms, pss = (records[s] for s in ("one_device", "multi_worker_mirrored",
                                           "parameter_server"))
    profile, _ = profile_of(setting_of(one), [one],
                            {"multi_worker_mirrored": [mwms], "parameter_server": [pss]},
                            [mwms, pss], [r["sharing"] for name, r in records.items()
                                          if name.startswith("sharing-")])
    if cores:
        run = records["one_process"]
        profile.one_process = {str(cores): {"batch": step_batch_of(run),
                                            "step_s": step_time_of(run)}}
    profile.source = f"measured here by experiments.run --strategy=auto ({profile.source})"
    os.makedirs(cfg.results_dir, exist_ok=True)
    records_io.write_text_atomic(path, profile.to_json())
    return path

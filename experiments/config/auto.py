"""--strategy=auto: the planner (results/model/planner.py) chooses the configuration from a workload
profile on a cluster spec, and the run trains with it; the record keeps the choice, the
runners-up and their predicted figures (record: config.plan).

    python -m experiments.run --strategy=auto --plan_profile=runs/compare/profile-cnn-...json \
        --plan_cluster=my_cluster.json --model=cnn --epochs=3

Without --plan_cluster it plans for this machine (this_machine: its GPUs as one host's devices;
without GPUs its cores as one-core workers sharing its loopback and its cores). Without
--plan_profile the profile is measured here first (experiments/adaptive/profile_here.py:
three short one-thread runs: one device, one MWMS and one PSS worker), and reused by later runs.

The choice is the plan's best (the fastest configuration that fits and trains what the profile
trained: experiments.plan's "Best"). A local run launches the chosen cluster; under a platform's
TF_CONFIG the cluster is already fixed: its tasks meet, the chief profiles and measures its
links to them, and the plan is chosen among what those tasks can run
(experiments/adaptive/on_workers.py).
"""
import dataclasses
import os
import shutil
import subprocess

from experiments.config.cli import bool_flag
from experiments.config.run_config import AUTO, ConfigError
from experiments.config import planned_run
from results.model import planner, specs
from tf_config.cores import placement

PLAN_ENV = "TFDIST_AUTO_PLAN"  # the launcher's tasks: the plan the chief records


def choose(profile_path, cluster_path, cluster=None, runnable=None):
    """(planned_run.settings of the best configuration, planned_run.summary of the plan);
    ConfigError (one line) for a missing or unusable profile or cluster spec, or when nothing fits.
    cluster: the ClusterSpec itself (cluster_path then only names it); runnable: config -> "" when
    this cluster's tasks can run it, else why not (a platform's fixed TF_CONFIG)."""
    if not cluster_path and cluster is None:
        raise ConfigError("--strategy=auto needs a cluster to plan for: --plan_cluster="
                          "CLUSTER.json, or nothing (this machine)")
    try:
        profile = specs.load_profile(profile_path, "plan_profile")
        if cluster is None:
            cluster = specs.load_cluster(cluster_path, "plan_cluster")
        planned = planner.plan(profile, cluster)
    except specs.SpecError as e:
        raise ConfigError(str(e)) from None
    if runnable is not None:
        planned = [p if p.dropped or not runnable(p.config) else
                   dataclasses.replace(p, dropped=runnable(p.config)) for p in planned]
    best = planner.best(planned)
    if best is None:
        raise ConfigError(f"--strategy=auto: no configuration of {profile.model!r} fits "
                          f"{cluster.memory_per_device_mb:g} MB per device"
                          + (" and this cluster's tasks" if runnable else "")
                          + f" on {cluster_path}")
    summary = {**planned_run.summary(planned), "profile": profile_path, "cluster": cluster_path,
               "profile_model": profile.model, "profile_batch": profile.batch}
    return planned_run.settings(best.config), summary


# A machine without GPUs is planned as at most this many one-core workers: each is a TensorFlow
# process, and the profile measures how that many share the cores (profile_here).
MAX_CPU_WORKERS = 8


def visible_gpus():
    """(GPUs this process may use, the smallest one's memory in MB or 0), without importing
    TensorFlow: from `nvidia-smi` (none without the driver's tool), at most as many as
    CUDA_VISIBLE_DEVICES lists when it is set."""
    if not shutil.which("nvidia-smi"):
        return 0, 0.0
    try:
        listed = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30).stdout
        memory = [float(line) for line in listed.split() if line.strip()]
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return 0, 0.0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        memory = memory[:len([d for d in visible.split(",") if d.strip() not in ("", "-1")])]
    return len(memory), min(memory, default=0.0)


def this_machine(cpus, gpus=0, gpu_memory_mb=0.0):
    """The cluster spec of this machine (--strategy=auto and --adapt without --plan_cluster):
    its `gpus` as the devices of one host, each with `gpu_memory_mb`; without GPUs, its `cpus`
    (how many; at most MAX_CPU_WORKERS) as one-core workers on one loopback that every link
    shares (the emulated network's 10 Gbit/s: a loopback is no slower) and on its cores
    (machine_cores: the cost model counts the cores they share)."""
    if gpus:
        return specs.ClusterSpec(name=f"this machine: {gpus} GPU(s) in one host", hosts=1,
                                 devices_per_host=gpus, memory_per_device_mb=gpu_memory_mb)
    workers = min(cpus, MAX_CPU_WORKERS)
    return specs.ClusterSpec(
        name=f"this machine: {workers} of its {cpus} cores as one-core workers on its loopback",
        hosts=workers, devices_per_host=1, inter_host_gbps=10.0, intra_host_gbps=10.0,
        shared_medium=True, machine_cores=cpus)


def resolve(cfg, cpus, threads_per_worker=0):
    """(cfg with the plan's choice in place of auto, the plan's summary, the flags that say the
    choice, --[no]pin_workers last, and the local cluster's Placement): what
    `experiments.run --strategy=auto` trains without TF_CONFIG (with it:
    experiments/adaptive/on_workers.py) on a local cluster of `cpus` (placement_of)."""
    values, plan = choose(cfg.plan_profile, cfg.plan_cluster)
    where = placement_of(values, cpus, threads_per_worker)
    return apply(cfg, values), plan, [f"--{k}={v}" for k, v in values.items()] + \
        [bool_flag("pin_workers", where.pinned)], where


def pin_flag(values, cpus, threads_per_worker=0):
    """--pin_workers or --nopin_workers for a local cluster of the planned_run.settings `values`
    on `cpus` (placement_of)."""
    return bool_flag("pin_workers", placement_of(values, cpus, threads_per_worker).pinned)


def placement_of(values, cpus, threads_per_worker=0, machine_cores=None):
    """Where a local cluster of the planned_run.settings `values` goes on `cpus` (ids, or how
    many; tf_config.cores.placement), pinned as a comparison pins the same cluster, so the run
    is the kind the profile measured: its PSS worker and its sharing calibration pinned where a
    comparison's are (experiments/adaptive/profile_here.py); pinned and unpinned clusters run at
    different speeds (docs/benchmarks.md, "Workers on cores of their own"). machine_cores: the
    machine the launcher will count its default threads on (None: this one)."""
    return placement(values["strategy"], values["num_workers"], values["num_ps"],
                     threads_per_worker, cpus, machine_cores=machine_cores)


def apply(cfg, values):
    """cfg with the plan's settings (planned_run.settings) in place of auto's."""
    assert cfg.strategy == AUTO
    return dataclasses.replace(cfg, **values)

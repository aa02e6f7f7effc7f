"""Which cores a local cluster's tasks get: threads per task so they use each core once, whether
its workers are pinned, a pinned worker's own cores (the launcher's --pin_workers, the sharing
calibration's pinned loops alike, experiments/comparison/sharing.py) and the cores they leave
its other tasks."""
import os

from strategies import kind, needs_cluster
from tf_config.events import PIN_CPUS_ENV, RUN_CPUS_ENV


def pinned_workers(n, threads, available, parameter_servers=False):
    """Whether N workers of `threads` threads each get cores of their own (--pin_workers): two
    or more, and no more than the `available` cores (0/None: unknown, not pinned). Unpinned,
    the workers of a local cluster and their helper threads migrate between the cores they
    share; pinned, each keeps its own, as on hosts of their own (docs/benchmarks.md, "Workers
    on cores of their own"). One PSS worker is pinned too where a core is left for its ps and
    chief (the launcher pins them there): a PSS server runs two inter-op threads (one deadlocks
    it), and unpinned they run independent kernels on a second core, a worker faster than it
    would be on a host of its own (docs/benchmarks.md, "A PSS worker on one core"). Not
    pinned: one all-reduce worker (one process, one inter-op thread), and workers that
    outnumber the cores (round robin would give some a core to themselves)."""
    if not available or n * threads > available:
        return False
    return n >= 2 or (parameter_servers and n * threads < available)


def available_cores(pin_cores=0):
    """The cores a local cluster may use: the user's --pin_cores (0: all), at most this
    process's."""
    usable = len(os.sched_getaffinity(0))
    return min(pin_cores or usable, usable)


def pinned_cluster(strategy, num_workers, num_ps, available, threads=0, cores=None):
    """Whether a local cluster of `strategy` with these workers and ps gets --pin_workers: the
    one rule for every local cluster the toolkit starts itself (the comparison's cells,
    --strategy=auto's choice and its profile, --adapt's segments, the plan's command for this
    machine), so a run is pinned as the runs its prediction came from were. pinned_workers on
    `available` cores, with `threads` per task (0: the launcher's default for its tasks on
    `cores` cores, this machine's where None, as the launcher counts them);
    never for one process (one device, local replicas, one all-reduce worker) nor for a
    pipeline's stages (their own placement)."""
    k = kind(strategy)
    if not needs_cluster(strategy, num_workers) or k.pipelined:
        return False
    tasks = num_workers + (num_ps + 1 if k.parameter_servers else 0)
    return pinned_workers(num_workers, threads or default_threads(tasks, cores), available,
                          k.parameter_servers)


def worker_cpus(index, threads, cpus=None):
    """The cores of worker `index` with `threads` threads: the next `threads` of the usable
    cores, round robin (with more workers than cores, workers share them evenly)."""
    cpus = sorted(cpus or os.sched_getaffinity(0))
    return sorted({cpus[(index * threads + j) % len(cpus)] for j in range(threads)})


def pinned_env(index, threads):
    """The environment that pins worker `index` to its cores (worker_cpus) at start-up
    (experiments.engine.tf_settings.apply reads it) and keeps the run's CPU count for its record:
    the launcher's pinned workers and the sharing calibration's pinned loops alike."""
    return {PIN_CPUS_ENV: ",".join(map(str, worker_cpus(index, threads))),
            RUN_CPUS_ENV: str(len(os.sched_getaffinity(0)))}


def spare_env(workers, threads):
    """The environment that pins a pinned cluster's other tasks (chief, ps) to the usable cores
    its `workers` pinned workers leave, so they do not take turns on a worker's core; empty
    when the workers take every core (the others then run where the scheduler puts them)."""
    cpus = set(os.sched_getaffinity(0))
    spare = cpus.difference(*(worker_cpus(i, threads, cpus) for i in range(workers)))
    if not spare:
        return {}
    return {PIN_CPUS_ENV: ",".join(map(str, sorted(spare))), RUN_CPUS_ENV: str(len(cpus))}


def default_threads(num_tasks, cores=None):
    """Threads per task so the tasks together use each core once."""
    cores = cores or os.cpu_count() or 1
    return max(1, cores // max(1, num_tasks))

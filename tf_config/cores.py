"""Which cores a local cluster's tasks get: threads per task so they use each core once, and a
pinned worker's own cores (the launcher's --pin_workers, the sharing calibration's pinned loops
alike, experiments/comparison/sharing.py)."""
import os

from tf_config.events import PIN_CPUS_ENV, RUN_CPUS_ENV


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


def default_threads(num_tasks, cores=None):
    """Threads per task so the tasks together use each core once."""
    cores = cores or os.cpu_count() or 1
    return max(1, cores // max(1, num_tasks))

"""Where a local cluster's tasks run: one Placement per cluster (threads per task, whether its
workers are pinned, each pinned worker's CPUs and the CPUs they leave its other tasks), made by
placement() where the cluster is planned (a comparison's cell, --strategy=auto's choice and its
profiling runs, an --adapt segment, the plan's command for this machine, the launcher of a run
told its flags) and handed down as data: the launcher gives each task its share of it
(Placement.env), so a run is pinned as the runs its prediction came from were."""
import dataclasses
import os

from strategies import kind, needs_cluster
from tf_config.events import PIN_CPUS_ENV, RUN_CPUS_ENV


@dataclasses.dataclass(frozen=True)
class Placement:
    threads: int  # intra-op threads of every task
    pinned: bool = False  # workers on cores of their own (--pin_workers)
    worker_cpus: tuple = ()  # pinned: worker i's CPUs at [i]
    spare_cpus: tuple = ()  # pinned: the CPUs its workers leave the chief and ps; (): none
    usable_cpus: int = 0  # the CPUs the whole cluster may use (a pinned task's record says so)

    def env(self, task_type, index):
        """The environment that pins task `task_type`:`index` at start-up (applied by
        experiments.engine.tf_settings.apply before TensorFlow starts its threads), with the
        run's CPU count for its record; empty when it runs where the scheduler puts it (not
        pinned, or a chief or ps when the workers take every CPU)."""
        cpus = () if not self.pinned else \
            self.worker_cpus[index] if task_type == "worker" else self.spare_cpus
        if not cpus:
            return {}
        return {PIN_CPUS_ENV: ",".join(map(str, cpus)), RUN_CPUS_ENV: str(self.usable_cpus)}


def placement(strategy, num_workers, num_ps=0, threads=0, cpus=None, *, pin=None,
              machine_cores=None):
    """The Placement of a local cluster of `strategy` with these workers and ps (and a chief
    where it has parameter servers) on `cpus`: CPU ids, or how many (numbered from 0: a plan
    for a machine it does not run on); None: this process's. threads: per task (0: the
    launcher's default, machine_cores // tasks; machine_cores None: this machine's, as the
    launcher counts them). pin: as the run was told (--pin_workers); None: the one rule
    (_own_cores), never for one process (one device, local replicas, one all-reduce worker)
    nor for a pipeline's stages (they place themselves)."""
    k = kind(strategy)
    tasks = num_workers + (num_ps + 1 if k.parameter_servers else 0)
    threads = threads or default_threads(tasks, machine_cores)
    cpus = sorted(range(cpus) if isinstance(cpus, int) else
                  os.sched_getaffinity(0) if cpus is None else cpus)
    if pin is None:
        pin = needs_cluster(strategy, num_workers) and not k.pipelined and \
            _own_cores(num_workers, threads, len(cpus), k.parameter_servers)
    if not pin or not cpus:
        return Placement(threads, usable_cpus=len(cpus))
    workers = tuple(tuple(worker_cpus(i, threads, cpus)) for i in range(num_workers))
    spare = tuple(sorted(set(cpus).difference(*workers)))
    return Placement(threads, True, workers, spare, len(cpus))


def _own_cores(n, threads, available, parameter_servers):
    """Whether N workers of `threads` threads each get cores of their own: two or more, and no
    more than the `available` cores (0: unknown, not pinned). Unpinned, the workers of a local
    cluster and their helper threads migrate between the cores they share; pinned, each keeps
    its own, as on hosts of their own (docs/benchmarks.md, "Workers on cores of their own").
    One PSS worker is pinned too where a core is left for its ps and chief (the launcher pins
    them there): a PSS server runs two inter-op threads (one deadlocks it), and unpinned they
    run independent kernels on a second core, a worker faster than it would be on a host of
    its own (docs/benchmarks.md, "A PSS worker on one core"). Not pinned: one all-reduce worker
    (one process, one inter-op thread), and workers that outnumber the cores (round robin would
    give some a core to themselves)."""
    if not available or n * threads > available:
        return False
    return n >= 2 or (parameter_servers and n * threads < available)


def usable_cpus(pin_cores=0):
    """The CPUs a local cluster started from this process may use: the first --pin_cores of
    this process's (0: all of them), those experiments.engine.tf_settings.pin_cores keeps."""
    cpus = sorted(os.sched_getaffinity(0))
    return tuple(cpus[:pin_cores] if pin_cores > 0 else cpus)


def worker_cpus(index, threads, cpus):
    """The cores of worker `index` with `threads` threads: the next `threads` of `cpus`, round
    robin (with more workers than cores, workers share them evenly)."""
    cpus = sorted(cpus)
    return sorted({cpus[(index * threads + j) % len(cpus)] for j in range(threads)})


def default_threads(num_tasks, cores=None):
    """Threads per task so the tasks together use each core once."""
    cores = cores or os.cpu_count() or 1
    return max(1, cores // max(1, num_tasks))

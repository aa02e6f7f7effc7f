"""What a task does once training ends, as an ordered list of steps (`STEPS`), and the record
fields they give the chief. run_task (task.py) calls them:

    after = AfterTraining(cfg, role, trainer, strategy, coordinator, is_chief)
    after.run()                      # every step in STEPS, in order, on every task that trains
    record.update(after.fields(record))   # the chief: communication, compute, compression, zero
"""
import dataclasses
import os

import tensorflow as tf

from experiments.engine import compressed_sync, gpipe
from experiments.measure import comm_probe, flops, tensor_probe
from results.records import metrics
from strategies import kind
from tf_config import events


def _compute(cfg, trainer):
    """(forward FLOPs per example, one process's matmul FLOP/s or None, processes training at
    once), or None without a FLOP count. The peak is left out where one matmul here is not what
    the run's devices do at once: pipelines (each stage's device has a pool of its own) and
    TPUs. GPUs: a matmul per local replica's GPU. A local cluster's workers share this machine's
    cores (at most the launcher's usable cores / threads of them run at once, pinned or not); a
    platform's each have their own host."""
    forward = flops.forward_flops_per_example(trainer.model)
    if forward is None:
        return None
    strategy_kind = kind(cfg.strategy)
    if strategy_kind.accelerator or strategy_kind.pipelined:
        return forward, None, 0
    processes = 1
    if strategy_kind.local_replicas and tf.config.list_physical_devices("GPU"):
        processes = cfg.num_replicas
    if strategy_kind.multi_worker:
        processes = cfg.num_workers
        if events.under_launcher():
            import psutil

            cores = len(psutil.Process(os.getppid()).cpu_affinity())  # the launcher's: unpinned
            threads = cfg.threads or cores
            processes = min(processes, max(1, cores // threads))
    return forward, flops.matmul_peak(), processes


@dataclasses.dataclass
class AfterTraining:
    cfg: object
    role: object
    trainer: object
    strategy: object
    coordinator: object
    is_chief: bool
    compute: tuple = None  # _compute's, on the chief with --compute_probe
    checksum: float = None
    probe: dict = None  # the communication probe's, with --comm_probe

    def compute_probe(self):
        if self.is_chief and self.cfg.compute_probe:
            self.compute = _compute(self.cfg, self.trainer)

    def weights_checksum(self):
        """Every synchronous replica must end with the same weights; printed by each task so a
        cluster's output can be checked (tests do), and recorded by the chief."""
        self.checksum = self.trainer.weights_checksum()

    def communication_probe(self):
        cfg, trainer = self.cfg, self.trainer
        if not cfg.comm_probe:
            return
        # as training's calls, which never run past their epoch (training.py)
        steps_per_call = min(cfg.steps_per_execution, trainer.steps_per_epoch)
        probe = comm_probe.measure(
            self.strategy, [v.value for v in trainer.model.trainable_variables],
            self.coordinator, dtype=trainer.sync_dtype, gradients=trainer.gradients,
            steps_per_call=steps_per_call)
        self.probe = probe

    def model_parallel_probes(self):
        """Model parallelism's own traffic: each pipeline boundary's activations and their
        gradients, and each tensor-split layer's sums over its shards."""
        cfg, trainer = self.cfg, self.trainer
        if self.probe is None or trainer.pipeline is None:
            return
        micro = trainer.per_replica_batch // cfg.microbatches
        self.probe["activation_bytes"] = gpipe.total_activation_bytes(
            trainer.stages, micro, cfg.microbatches)
        self.probe["activation_probe_s"] = gpipe.transfer_probe(
            trainer.stages, trainer.stage_devices, micro, cfg.microbatches)
        self.probe["tensor_probe_s"] = tensor_probe.measure(
            trainer.stages, micro, cfg.microbatches, cfg.float_dtype)

    def run(self):
        for step in STEPS:
            step(self)
        name = self.role.name if self.role else "single"
        print(f"{name} weights checksum {self.checksum:.9e}", flush=True)

    def fields(self, record):
        """The chief's record fields from the steps, given the record build_record made."""
        cfg, trainer = self.cfg, self.trainer
        out = {"compression": compressed_sync.summary(trainer,
                                                      self.strategy.num_replicas_in_sync),
               "zero": trainer.zero.summary() if trainer.zero is not None else None}
        if self.probe is not None:
            step = metrics.per_worker_step_time(
                record["steady_state"]["epoch_time_s"]["median"], trainer.steps_per_epoch,
                cfg.strategy, cfg.num_workers)
            share = comm_probe.fraction(self.probe, step)
            out["communication"] = {**self.probe, "step_time_s": step, "fraction": share}
            out["communication_fraction"] = share
        if cfg.compute_probe:
            rate = (record["steady_state"].get("examples_per_sec") or {}).get("median")
            out["compute"] = flops.summary(self.compute[0], rate, *self.compute[1:]) \
                if self.compute is not None else None
        return out


# In this order, each for a reason:
STEPS = (
    # the chief's matmul first: the other workers wait idle in the communication probe's first
    # collective meanwhile, rather than exit beside it
    AfterTraining.compute_probe,
    # before any probe runs a step of its own
    AfterTraining.weights_checksum,
    # on every task that trains: the all-reduce probe is collective under MWMS
    AfterTraining.communication_probe,
    # adds to the communication probe's figures
    AfterTraining.model_parallel_probes,
)

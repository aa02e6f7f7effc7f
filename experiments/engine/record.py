"""A run's record (docs/records.md): what the chief writes once training ends, from the
Trainer (or anything with its attributes: the engine floor's plain loop), the strategy, the
epochs and the measurements; and its file name.

    record = build_record(cfg, role, trainer, strategy, run_id, epochs, checksum, extra_config)
    write(cfg, record)   # atomically, under <results_dir>/records/ (the chief only)
"""
import dataclasses
import datetime
import os
import re
import resource
import time
import uuid

import psutil

from experiments.engine import gpipe
from experiments.measure import cpu_usage, environment, memory
from experiments.workload import text_corpus
from experiments.workload.datasets import DATASETS, TEXT
from models import TENSOR_PARALLEL_MODELS, tensor_parallel
from models import stages as model_stages
from results.records import metrics, store as records
from strategies import all_reduce_workers, kind
from tf_config import events, netshape
from tf_config.events import LAUNCH_T0_ENV


def _cuts(trainer):
    """{S: the model's stages} of the toolkit's parameter-balanced split into S = 2 and 4 stages
    (what --num_stages runs by default): only the S the model can be cut into; {} where it
    cannot be cut (one segment, subclassed, a size known only at run time)."""
    model = getattr(trainer, "model", None)
    out = {}
    for count in (2, 4) if model is not None else ():
        try:
            out[count] = model_stages.split(model, count, "params")
        except model_stages.StageError:
            break
        except Exception as e:  # noqa: BLE001 - figures for the planner, never worth the record
            print(f"stage split: the model could not be split ({type(e).__name__}: {e}); "
                  f"recorded as null", flush=True)
            break
    return out


def _boundary_bytes(trainer, pipe, cuts):
    """Bytes per example that would cross a pipeline stage boundary of this model: a pipelined
    run's largest boundary; else the cut of a two-stage split balanced by parameters (what the
    planner's pipelines move, results/model/planner.py); None where the model cannot be cut."""
    if pipe is not None and len(trainer.stages) > 1:
        sizes = [st.output_bytes_per_example for st in trainer.stages[:-1]]
        return max(sizes) if None not in sizes else None
    return cuts[2][0].output_bytes_per_example if 2 in cuts else None


def _stage_weight_shares(cuts):
    """{"S": the largest stage's share of the parameters} of those splits: the planner's memory
    per device of a pipeline (a model's layers rarely divide evenly)."""
    out = {}
    for count, stages in cuts.items():
        sizes = [st.parameters for st in stages]
        if sum(sizes):
            out[str(count)] = max(sizes) / sum(sizes)
    return out


def _peak_memory(trainer):
    """This task's resident-set high-water mark, and each GPU's peak allocation (without GPUs
    TensorFlow's CPU allocator's, where it keeps one) over the training steps (the Trainer's,
    read before each evaluation and the probe; a plain loop without its own reading: now)."""
    peaks = trainer.allocator_peaks if hasattr(trainer, "allocator_peaks") else \
        memory.peaks()
    return {"host_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,  # Linux: KiB
            **peaks}


def _memory_per_device(cfg, trainer, pipe):
    """experiments/measure/memory.py: every device of a tensor-parallel run, each pipeline
    stage's device (`pipe`: the record's pipeline section), or the one replica's (under PSS
    the estimate counts the optimizer's slots, which live on the ps)."""
    if cfg.tensor_parallel > 1:
        return memory.per_tensor_device(trainer.stages, gpipe.held_per_stage(
            cfg.pipeline_schedule, cfg.num_stages, trainer.per_replica_batch // cfg.microbatches,
            cfg.microbatches), cfg.optimizer, weights_on_first=kind(cfg.strategy).all_reduce)
    if pipe is not None:
        return [{"stage": s["stage"], "device": s["device"], "bytes": s["peak_memory_bytes"],
                 "kind": s["peak_memory_kind"]} for s in pipe["stages"]]
    zero = getattr(trainer, "zero", None)  # the engine floor's plain loop has none
    return memory.of_replica(trainer.model, trainer.per_replica_batch, cfg.optimizer,
                             zero.n if zero is not None else 1)


def _startup(trainer):
    """Seconds from the command's start (the launcher's, for a local cluster) until this process's
    first training step finished: imports, cluster forming, model building, tracing, one step."""
    t0 = float(os.environ.get(LAUNCH_T0_ENV) or psutil.Process().create_time())
    done = trainer.first_step_done_at
    return {"launch_to_first_step_s": done - t0 if done else None,
            "from": "launcher start" if os.environ.get(LAUNCH_T0_ENV) else "process start"}


def _launch_events(wait_s=10.0):
    """Faults a local launcher injected and the restarts it made (tf_config.recovery): each
    restart's task, the chief's step when it was lost, why, steps lost and seconds to recover.
    A fault's restart is journaled when the launcher sees the task gone, which can come after a
    short PSS run's last step: the chief waits (at most wait_s) until every faulted task has its
    restart, so the record does not miss it."""
    deadline = time.monotonic() + wait_s
    while True:
        journal = events.read_launch_events() or {}
        restarted = {r.get("task") for r in journal.get("restarts", [])}
        if all(f.get("task") in restarted for f in journal.get("faults", [])) or \
                time.monotonic() > deadline:
            return {"faults_injected": journal.get("faults", []),
                    "restarts": journal.get("restarts", [])}
        time.sleep(0.2)


def new_run_id(cfg):
    """A file name: your model's MODULE:FUNCTION or PATH.keras becomes FUNCTION or the file's
    base name (no ':' or '/' in a record's or a TensorBoard directory's name)."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
    model = os.path.basename(cfg.model).split(":")[-1]
    model = re.sub(r"[^\w.-]", "_", model)
    return f"{stamp}-{cfg.strategy}-{model}-{uuid.uuid4().hex[:6]}"


def write(cfg, record):
    """Writes the record (the chief only calls this) and prints where and its headline."""
    path = records.write_record(cfg.results_dir, record)
    steady = record["steady_state"]
    print(f"record: {path}\nsteady state: {steady['epoch_time_s']['median']:.3f} s/epoch, "
          f"{steady['examples_per_sec']['median']:.1f} examples/s; final eval accuracy "
          f"{record['final_eval_accuracy']:.4f}", flush=True)


def _pipeline(cfg, trainer, epochs):
    """The record's pipeline section (model_parallel, hybrid), else None."""
    return (gpipe.summary(trainer.stages, trainer.stage_devices,
                          trainer.per_replica_batch // cfg.microbatches, cfg.microbatches,
                          cfg.optimizer, cfg.stage_cost, epochs, cfg.pipeline_schedule)
            if getattr(trainer, "pipeline", None) is not None else None)


def _tensor_parallel(cfg, trainer, split):
    """The record's tensor_parallel section (--tensor_parallel >= 2), else None: what one
    replica's step moves between each stage's shards (models/tensor_parallel.py); `split`:
    tensor_parallel.describe of the model."""
    if cfg.tensor_parallel < 2:
        return None
    shards = cfg.tensor_parallel
    per_step = split["reduced_bytes_per_example"] * trainer.per_replica_batch  # every micro-batch
    layers = [tensor_parallel.split_layers(stage.model) for stage in trainer.stages]
    return {
        "shards": shards,
        "split_layers": sum(len(found) for found in layers),
        "devices": [found[0].devices if found else None for found in layers],
        "reduced_bytes_per_example": split["reduced_bytes_per_example"],
        "reduced_bytes_per_step": per_step,
        # this implementation: each sum gathered on the stage's first device, and each
        # layer's input (forward) or output gradient (backward) handed out from it first
        "hub_bytes_per_step": 2 * (shards - 1) * per_step,
        # Megatron on NCCL for comparison: a ring all-reduce, 2 (T-1)/T of it per device
        "ring_bytes_sent_per_device_per_step": int(2 * (shards - 1) * per_step / shards),
        "how": "each split layer's output summed over the shards forward and its input's "
               "gradient summed backward, per example x the replica's examples per step; "
               "the sums and the hand-outs go through the stage's first device"}


def peak_memory_per_device(cfg, trainer, epochs):
    """The largest of the record's memory_per_device figures, in bytes, or None (what --adapt
    notes of a configuration it leaves: its record is never written)."""
    return max((d["bytes"] for d in _memory_per_device(cfg, trainer, _pipeline(cfg, trainer,
                                                                                  epochs))),
               default=None)  # none for a subclassed model


def _straggler(cfg):
    """The record's straggler: {task, delay_ms (null under a schedule), schedule}, or None."""
    worker = cfg.straggler_worker()
    if worker is None:
        return None
    return {"task": f"worker:{worker}", "delay_ms": cfg.straggler_delay_ms or None,
            "schedule": cfg.straggler_schedule or None}


def build_record(cfg, role, trainer, strategy, run_id, epochs, checksum, extra_config):
    """The run's record (docs/records.md). `trainer`: the Trainer, or anything with its
    attributes (the engine floor's plain loop)."""
    pipe = _pipeline(cfg, trainer, epochs)
    cuts = _cuts(trainer)
    split = tensor_parallel.describe(trainer.model) if cfg.model in TENSOR_PARALLEL_MODELS \
        and getattr(trainer, "model", None) is not None else None
    return {
        "schema_version": records.SCHEMA_VERSION,
        "run_id": run_id,
        "run_name": cfg.run_name,
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "strategy": cfg.strategy,
        "model": cfg.model,
        "dataset": cfg.dataset,
        # a text corpus read from this machine (--dataset=python_text): which one
        "corpus": text_corpus.describe() if getattr(DATASETS.get(cfg.dataset), "kind",
                                                    None) == TEXT else None,
        "num_workers": cfg.num_workers,
        "num_ps": role.num_ps if role else 0,
        "num_replicas_in_sync": strategy.num_replicas_in_sync,
        "batch_size_per_replica": trainer.per_replica_batch,  # one micro-batch of one replica
        "global_batch_size": trainer.global_batch,  # a step's: x accumulation_steps
        "accumulation_steps": getattr(trainer, "accumulation", 1),
        "train_examples": trainer.examples_per_epoch,
        "steps_per_epoch": trainer.steps_per_epoch,
        "learning_rate": trainer.learning_rate,
        "threads_per_task": cfg.threads or os.cpu_count(),  # 0: TF default = all cores
        "epochs": epochs,
        "steady_state": metrics.steady_state(epochs),
        "cpu": cpu_usage.summarize(epochs, trainer.cpu.scope),
        "total_train_time_s": sum(e["time_s"] for e in epochs),
        "final_eval_accuracy": epochs[-1]["eval_accuracy"],
        "final_eval_loss": epochs[-1]["eval_loss"],
        "final_train_loss": epochs[-1]["train_loss"],
        "weights_checksum": checksum,
        "peak_memory_bytes": _peak_memory(trainer),
        "memory_per_device": _memory_per_device(cfg, trainer, pipe),
        "startup": _startup(trainer),
        **_launch_events(),
        "network": netshape.recorded(),  # an emulated network (tf_config/netshape.py), or None
        "straggler": _straggler(cfg),
        "steps_by_worker": dict(sorted(trainer.steps_by_worker.items())) or None,
        # every stamp of the last epoch's first steps (the epochs carry the per-worker medians):
        # the report's timeline PNG and trace (results/report/timeline.py)
        "timeline": ({"stamps": trainer.trace_stamps, "epoch": epochs[-1]["epoch"],
                      **({"stage_blocks": trainer.trace_blocks, "stages": cfg.num_stages,
                          "microbatches": cfg.microbatches} if trainer.trace_blocks else {})}
                     if getattr(trainer, "trace_stamps", None) else None),
        "pipeline": pipe,
        "tensor_parallel": _tensor_parallel(cfg, trainer, split),
        "boundary_activation_bytes": _boundary_bytes(trainer, pipe, cuts),
        "stage_weight_shares": _stage_weight_shares(cuts),
        # what a tensor-parallel split of this model's blocks all-reduces (split or not)
        "tensor_split": split,
        "resumed_epochs": [e["epoch"] for e in epochs if e.get("resumed")],
        # The epochs this process timed itself (a resumed run's others came from its checkpoint).
        "epochs_timed_here": [e["epoch"] for e in epochs if not e.get("resumed")],
        # the global step a checkpoint gave this run: set by the task (checkpoints.py), which
        # knows it even when it fell on an epoch's boundary (no epoch is then partly restored)
        "resumed_from_step": None,
        "cluster": {"roles": role.tf_cluster() if role else {}, "this_task": role.name if role
                    else "single", "collective": cfg.collective if all_reduce_workers(
                    cfg.strategy) else None,
                    "ps_shards": cfg.ps_shards if kind(cfg.strategy).parameter_servers else None},
        "config": {**dataclasses.asdict(cfg), **extra_config},
        "environment": environment.describe(),
    }

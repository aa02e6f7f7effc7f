"""One process's part of a run: single process, or one task of a cluster (TF_CONFIG set).

    chief / single process: train, evaluate, write the record and TensorBoard scalars
    MWMS non-chief worker:  train in lockstep, write nothing
    PSS worker / ps:        serve the coordinator until stopped
"""
import dataclasses
import datetime
import os
import re
import resource
import sys
import uuid

import psutil
import tensorflow as tf

from experiments import comm_probe, cpu_usage, environment, gpipe, memory
from experiments.checkpoints import Checkpoints
from experiments.pipeline import dataset_info
from experiments.profiling import StepProfiler
from experiments.training import Trainer, input_context
from experiments.user_code import UserCodeError
from results import metrics, records
from strategies import PIPELINED, all_reduce_workers
from strategies.factory import MissingGPUs, TPUUnavailable, check_gpus, get_strategy
from tf_config import events, netshape
from tf_config.events import LAUNCH_T0_ENV


# A PSS server runs functions whose ops block (iterator reads, variable reads from a ps); with
# one inter-op thread those wait on each other forever. Compute stays bounded by intra-op threads.
_MIN_SERVER_INTEROP = 2


def set_threads(threads, min_inter_op=1):
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(max(threads, min_inter_op))


def set_stage_threads(threads, num_stages):
    """A pipeline on a CPU host: each of the S logical devices gets a thread pool of its own
    with threads / S threads (all cores when threads is 0), as S accelerators would each have
    their own compute. By default every logical CPU device shares one pool, and a stage's ops
    then take the cores another stage's ops are using (docs/parallelism.md). Before the
    runtime starts: TensorFlow reads TF_OVERRIDE_GLOBAL_THREADPOOL once, creating devices."""
    cores = threads or len(os.sched_getaffinity(0))
    if len(tf.config.list_physical_devices("GPU")) < num_stages:
        os.environ["TF_OVERRIDE_GLOBAL_THREADPOOL"] = "1"
        tf.config.threading.set_intra_op_parallelism_threads(max(1, cores // num_stages))
    else:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
    # S stages' blocks in flight at once, plus the input pipeline's.
    tf.config.threading.set_inter_op_parallelism_threads(max(cores, num_stages))


def _resolver(role):
    if role is None:
        return None
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(role.tf_cluster()), task_type=role.tf_task_type,
        task_id=role.task_index, rpc_layer="grpc")


def _serve(role, threads):
    """A PSS worker or parameter server: a gRPC server the coordinator drives until stopped."""
    config = tf.compat.v1.ConfigProto()
    if threads:
        config.intra_op_parallelism_threads = threads
        config.inter_op_parallelism_threads = max(threads, _MIN_SERVER_INTEROP)
    server = tf.distribute.Server(tf.train.ClusterSpec(role.tf_cluster()),
                                  job_name=role.tf_task_type, task_index=role.task_index,
                                  protocol="grpc", config=config, start=True)
    print(f"{role.name} serving at {role.cluster[role.task_type][role.task_index]}", flush=True)
    server.join()
    return 0


def _peak_memory():
    """This task's resident-set high-water mark, and each GPU's peak allocation if there are GPUs."""
    out = {"host_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}  # Linux: KiB
    for i, _ in enumerate(tf.config.list_physical_devices("GPU")):
        out[f"gpu:{i}"] = tf.config.experimental.get_memory_info(f"GPU:{i}")["peak"]
    return out


def _memory_per_device(cfg, trainer, pipe):
    """experiments/memory.py: each pipeline stage's device (`pipe`: the record's pipeline
    section), or the one replica's (under PSS the estimate counts the optimizer's slots, which
    live on the ps)."""
    if pipe is not None:
        return [{"stage": s["stage"], "device": s["device"], "bytes": s["peak_memory_bytes"],
                 "kind": s["peak_memory_kind"]} for s in pipe["stages"]]
    return memory.of_replica(trainer.model, trainer.per_replica_batch, cfg.optimizer)


def _startup(trainer):
    """Seconds from the command's start (the launcher's, for a local cluster) until this process's
    first training step finished: imports, cluster forming, model building, tracing, one step."""
    t0 = float(os.environ.get(LAUNCH_T0_ENV) or psutil.Process().create_time())
    done = trainer.first_step_done_at
    return {"launch_to_first_step_s": done - t0 if done else None,
            "from": "launcher start" if os.environ.get(LAUNCH_T0_ENV) else "process start"}


def _launch_events():
    """Faults a local launcher injected and the restarts it made (tf_config.recovery): each
    restart's task, the chief's step when it was lost, why, steps lost and seconds to recover."""
    journal = events.read_launch_events() or {}
    return {"faults_injected": journal.get("faults", []), "restarts": journal.get("restarts", [])}


def new_run_id(cfg):
    """A file name: your model's MODULE:FUNCTION or PATH.keras becomes FUNCTION or the file's
    base name (no ':' or '/' in a record's or a TensorBoard directory's name)."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
    model = os.path.basename(cfg.model).split(":")[-1]
    model = re.sub(r"[^\w.-]", "_", model)
    return f"{stamp}-{cfg.strategy}-{model}-{uuid.uuid4().hex[:6]}"


def run_task(cfg, role, extra_config=None):
    """Plays this process's role. Returns the process exit code."""
    if cfg.strategy in PIPELINED:
        set_stage_threads(cfg.threads, cfg.num_stages)
    else:
        set_threads(cfg.threads, _MIN_SERVER_INTEROP if cfg.strategy == "parameter_server"
                    else 1)
    try:  # before serving or training: a GPU pool's task without GPUs must not run on the CPU
        check_gpus(cfg.require_gpus)
    except MissingGPUs as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    if role is not None and cfg.strategy == "parameter_server" and role.task_type in ("worker",
                                                                                        "ps"):
        return _serve(role, cfg.threads)
    if role is not None and role.task_type == "evaluator":
        print("evaluator: this toolkit evaluates on the chief; nothing to do", flush=True)
        return 0
    # Created before any other TF op: MWMS configures collectives at program start.
    try:
        strategy = get_strategy(cfg.strategy, num_replicas=cfg.num_replicas,
                                cluster_resolver=_resolver(role), collective=cfg.collective,
                                ps_shards=cfg.ps_shards, tpu=cfg.tpu,
                                tpu_timeout_s=cfg.tpu_timeout_s, num_stages=cfg.num_stages)
    except TPUUnavailable as e:  # before any file: exit 2 (a blocked connect thread is a daemon)
        sys.stderr.write(f"error: {e}\n")
        sys.stderr.flush()
        return 2
    coordinator = None
    if cfg.strategy == "parameter_server":
        coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    is_chief = role is None or role.is_chief
    cpu = cpu_usage.CpuMeter(in_cluster=role is not None) if is_chief else None
    try:  # the user's model and data: what needs TensorFlow to check (config.py did the rest)
        info = dataset_info(cfg.dataset, input_context(strategy))
        trainer = Trainer(cfg, info, strategy, coordinator=coordinator, is_chief=is_chief,
                          cpu=cpu)
    except UserCodeError as e:  # before any step and any file: bad input, exit 2
        sys.stderr.write(f"error: {e}\n")
        sys.stderr.flush()
        return 2
    run_id = new_run_id(cfg)
    writer = profiler = None
    logdir = os.path.join(cfg.tensorboard_dir or os.path.join(cfg.results_dir, "tensorboard"),
                          run_id)
    if is_chief and cfg.tensorboard:
        writer = tf.summary.create_file_writer(logdir)
    if is_chief and cfg.profile_steps:
        profiler = StepProfiler(logdir, *cfg.profile_range(), coordinator=coordinator)
    checkpoints = None
    epochs, steps_done = [], 0
    if cfg.checkpoint_dir:
        mwms_cluster = role is not None and all_reduce_workers(cfg.strategy)
        checkpoints = Checkpoints(cfg.checkpoint_dir, trainer, is_chief,
                                  role.name if role else "single", cfg.checkpoint_every_steps,
                                  resolver=strategy.cluster_resolver if mwms_cluster else None)
        epochs, steps_done = checkpoints.restore()
    trainer.global_step = steps_done
    first = len(epochs) + 1
    first_step = steps_done % trainer.steps_per_epoch  # > 0: resuming inside an epoch
    for epoch in range(first, cfg.epochs + 1):
        stats = trainer.train_epoch(epoch, first_step if epoch == first else 0, checkpoints,
                                    profiler)
        # The first epoch a process runs traces the step function: not steady state.
        epochs.append({**dataclasses.asdict(stats), "includes_tracing": epoch == first})
        if epoch == first and first_step:
            epochs[-1]["resumed_at_step"] = first_step
        if checkpoints is not None:
            checkpoints.save(epochs)
        if writer is not None:
            with writer.as_default(step=epoch):
                for key in ("time_s", "examples_per_sec", "train_loss", "train_accuracy",
                            "eval_loss", "eval_accuracy", "learning_rate"):
                    tf.summary.scalar(key, epochs[-1][key])
            writer.flush()
    if profiler is not None:
        profiler.close()
    # After training, on every task that trains (the all-reduce probe is collective under MWMS).
    probe = comm_probe.measure(strategy, [v.value for v in trainer.model.trainable_variables],
                               coordinator, dtype=cfg.gradient_sync_dtype,
                               gradients=trainer.gradients,
                               # a call never runs past its epoch (training.py)
                               steps_per_call=min(cfg.steps_per_execution,
                                                  trainer.steps_per_epoch)) \
        if cfg.comm_probe else None
    if probe is not None and trainer.pipeline is not None:
        # Model parallelism's own traffic: each boundary's activations and their gradients.
        probe["activation_bytes"] = gpipe.total_activation_bytes(
            trainer.stages, trainer.per_replica_batch // cfg.microbatches, cfg.microbatches)
        probe["activation_probe_s"] = gpipe.transfer_probe(
            trainer.stages, trainer.stage_devices, trainer.per_replica_batch // cfg.microbatches,
            cfg.microbatches)
    # Every synchronous replica must end with the same weights; printed by each task so a
    # cluster's output can be checked (tests do), and recorded by the chief.
    checksum = trainer.weights_checksum()
    print(f"{role.name if role else 'single'} weights checksum {checksum:.9e}", flush=True)
    if not is_chief:
        return 0
    record = build_record(cfg, role, trainer, strategy, run_id, epochs, checksum, extra_config or {})
    if probe is not None:
        step = metrics.per_worker_step_time(record["steady_state"]["epoch_time_s"]["median"],
                                            trainer.steps_per_epoch, cfg.strategy,
                                            cfg.num_workers)
        share = comm_probe.fraction(probe, step)
        record["communication"] = {**probe, "step_time_s": step, "fraction": share}
        record["communication_fraction"] = share
    write(cfg, record)
    return 0


def write(cfg, record):
    """Writes the record (the chief only calls this) and prints where and its headline."""
    path = records.write_record(cfg.results_dir, record)
    steady = record["steady_state"]
    print(f"record: {path}\nsteady state: {steady['epoch_time_s']['median']:.3f} s/epoch, "
          f"{steady['examples_per_sec']['median']:.1f} examples/s; final eval accuracy "
          f"{record['final_eval_accuracy']:.4f}", flush=True)


def build_record(cfg, role, trainer, strategy, run_id, epochs, checksum, extra_config):
    """The run's record (docs/records.md). `trainer`: the Trainer, or anything with its
    attributes (the engine floor's plain loop)."""
    pipe = (gpipe.summary(trainer.stages, trainer.stage_devices,
                          trainer.per_replica_batch // cfg.microbatches, cfg.microbatches,
                          cfg.optimizer, cfg.stage_cost, epochs)
            if getattr(trainer, "pipeline", None) is not None else None)
    return {
        "schema_version": records.SCHEMA_VERSION,
        "run_id": run_id,
        "run_name": cfg.run_name,
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "strategy": cfg.strategy,
        "model": cfg.model,
        "dataset": cfg.dataset,
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
        "peak_memory_bytes": _peak_memory(),
        "memory_per_device": _memory_per_device(cfg, trainer, pipe),
        "startup": _startup(trainer),
        **_launch_events(),
        "network": netshape.recorded(),  # an emulated network (tf_config/netshape.py), or None
        "straggler": ({"task": cfg.straggler_task, "delay_ms": cfg.straggler_delay_ms}
                      if cfg.straggler_task else None),
        "steps_by_worker": dict(sorted(trainer.steps_by_worker.items())) or None,
        "pipeline": pipe,
        "resumed_epochs": [e["epoch"] for e in epochs if e.get("resumed")],
        "resumed_from_step": next(((e["epoch"] - 1) * trainer.steps_per_epoch + e[
            "resumed_at_step"] for e in epochs if "resumed_at_step" in e), None),
        "cluster": {"roles": role.tf_cluster() if role else {}, "this_task": role.name if role
                    else "single", "collective": cfg.collective if all_reduce_workers(
                    cfg.strategy) else None,
                    "ps_shards": cfg.ps_shards if cfg.strategy == "parameter_server" else None},
        "config": {**dataclasses.asdict(cfg), **extra_config},
        "environment": environment.describe(),
    }

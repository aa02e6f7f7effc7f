"""One process's part of a run: single process, or one task of a cluster (TF_CONFIG set).

    chief / single process: train, evaluate, write the record and TensorBoard scalars
    MWMS non-chief worker:  train in lockstep, write nothing
    PSS worker / ps:        serve the coordinator until stopped
"""
import dataclasses
import os
import sys

import tensorflow as tf

from experiments.adaptive import segment
from experiments.engine import zero
from experiments.engine.after_training import AfterTraining
from experiments.engine.checkpoints import (Checkpoints, ResumeError, check_digest,
                                            saved_step)
from experiments.engine.record import build_record, new_run_id, peak_memory_per_device, write
from experiments.engine.build import build, input_context
from experiments.engine.training import Trainer
from experiments.measure import cpu_usage
from experiments.measure.profiling import StepProfiler
from experiments.workload.inputs import dataset_info
from experiments.workload.user_code import UserCodeError
from strategies import all_reduce_workers, kind
from strategies.factory import MissingGPUs, TPUUnavailable, check_gpus, get_strategy
from tf_config import events, netshape, schedules, watchdog


# A PSS server runs functions whose ops block (iterator reads, variable reads from a ps); with
# one inter-op thread those wait on each other forever. Two run two independent kernels at once:
# a lone local PSS worker is pinned to its cores (comparison plan, --pin_workers) to keep its
# compute on them.
_MIN_SERVER_INTEROP = 2


def set_threads(threads, min_inter_op=1):
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(max(threads, min_inter_op))


def set_stage_threads(threads, devices):
    """A model spread over logical devices of a CPU host (pipeline stages x tensor shards): each
    of the D devices gets a thread pool of its own with threads / D threads (all cores when
    threads is 0), as D accelerators would each have their own compute. By default every
    logical CPU device shares one pool, and a stage's ops then take the cores another stage's
    ops are using (docs/parallelism.md). Before the runtime starts: TensorFlow reads
    TF_OVERRIDE_GLOBAL_THREADPOOL once, creating devices."""
    cores = threads or len(os.sched_getaffinity(0))
    if len(tf.config.list_physical_devices("GPU")) < devices:
        os.environ["TF_OVERRIDE_GLOBAL_THREADPOOL"] = "1"
        tf.config.threading.set_intra_op_parallelism_threads(max(1, cores // devices))
    else:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
    # D devices' blocks in flight at once, plus the input pipeline's.
    tf.config.threading.set_inter_op_parallelism_threads(max(cores, devices))


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


def _bad_input(error):
    """One line on stderr and exit code 2 (the launcher passes the line on)."""
    sys.stderr.write(f"error: {error}\n")
    sys.stderr.flush()
    return 2


def run_task(cfg, role, extra_config=None):
    """Plays this process's role. Returns the process exit code."""
    watchdog.enable_dumps()  # under a local launcher: Python stacks to the log when hung
    strategy_kind = kind(cfg.strategy)
    if strategy_kind.pipelined:
        set_stage_threads(cfg.threads, cfg.model_devices())
    else:
        set_threads(cfg.threads, _MIN_SERVER_INTEROP if strategy_kind.parameter_servers else 1)
    try:  # before serving or training: a GPU pool's task without GPUs must not run on the CPU
        check_gpus(cfg.require_gpus)
    except MissingGPUs as e:
        return _bad_input(e)
    if role is not None and strategy_kind.parameter_servers and role.task_type in ("worker",
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
                                tpu_timeout_s=cfg.tpu_timeout_s,
                                model_devices=cfg.model_devices(),
                                bytes_per_pack=cfg.bytes_per_pack,
                                cross_device_ops=cfg.cross_device_ops)
    except (TPUUnavailable, MissingGPUs) as e:
        return _bad_input(e)  # before any file (a blocked connect thread is a daemon)
    coordinator = None
    if strategy_kind.parameter_servers:
        coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    is_chief = role is None or role.is_chief
    cpu = cpu_usage.CpuMeter(in_cluster=role is not None) if is_chief else None
    # A resumed run's input starts where the checkpoint's steps left it (inputs.train_dataset)
    latest = tf.train.latest_checkpoint(cfg.checkpoint_dir) if cfg.checkpoint_dir else None
    start_step = saved_step(latest) if latest else 0
    try:  # the user's model and data: what needs TensorFlow to check (config/validation.py did
        # the rest)
        info = dataset_info(cfg.dataset, input_context(strategy))
        workload = build(cfg, info, strategy, coordinator, is_chief, start_step)
    except UserCodeError as e:  # before any step and any file: bad input, exit 2
        return _bad_input(e)
    try:
        trainer = Trainer(cfg, info, strategy, workload, coordinator=coordinator,
                          is_chief=is_chief, cpu=cpu)
        if latest:  # before anything is written or restored (the shapes would not match)
            zero.check_resumable(cfg.checkpoint_dir, trainer.zero, start_step)
            check_digest(cfg.checkpoint_dir, cfg.tensor_parallel, cfg.dataset)
    except (zero.ZeroError, ResumeError) as e:  # a worker, model or checkpoint that cannot
        return _bad_input(e)  # serve (--zero, another tensor split or dataset): bad input
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
                                  resolver=strategy.cluster_resolver if mwms_cluster else None,
                                  tensor_parallel=cfg.tensor_parallel, dataset=cfg.dataset)
        epochs, steps_done = checkpoints.restore()
        written = checkpoints.record_written()
        if steps_done >= cfg.epochs * trainer.steps_per_epoch and written:
            # Its record was written when it finished: a second one would be a phantom repeat
            # of the same epochs (summary.csv would count runs=2 and narrow the spread). One
            # that finished training but died before its record (a lost peer in the probe)
            # goes on below: no epoch left to train, the probe and the record still to do.
            if is_chief:
                print(f"{cfg.checkpoint_dir}: this run finished its {cfg.epochs} epoch(s) "
                      f"already (record {written}); nothing to add (no record written; a new "
                      f"--checkpoint_dir trains afresh)", flush=True)
            return 0
    trainer.global_step = steps_done
    adapter = segment.from_env(is_chief, role is not None and all_reduce_workers(cfg.strategy),
                               trainer.steps_per_epoch * trainer.global_batch)
    first = len(epochs) + 1
    first_step = steps_done % trainer.steps_per_epoch  # > 0: resuming inside an epoch
    for epoch in range(first, cfg.epochs + 1):
        # --emulate_bandwidth_schedule: the chief sets this epoch's rate before its first step
        gbps = netshape.follow_schedule(epoch - 1) if is_chief else None
        stats = trainer.train_epoch(epoch, first_step if epoch == first else 0, checkpoints,
                                    profiler)
        # The first epoch a process runs traces the step function: not steady state.
        epochs.append({**dataclasses.asdict(stats), "includes_tracing": epoch == first})
        if gbps is not None:
            epochs[-1]["emulated_gbps"] = gbps
        if cfg.straggler_schedule:  # what the straggler's steps waited in this epoch
            epochs[-1]["straggler_ms"] = schedules.value_at(cfg.straggler_delays(), epoch - 1)
        if epoch == first and first_step:
            epochs[-1]["resumed_at_step"] = first_step
        # --adapt: decided before the save, so the epoch's verdict is in the checkpoint's stats
        switch = adapter is not None and adapter.after_epoch(epochs, cfg.epochs - epoch, strategy)
        if checkpoints is not None:
            checkpoints.save(epochs)
        if writer is not None:
            with writer.as_default(step=epoch):
                for key in ("time_s", "examples_per_sec", "train_loss", "train_accuracy",
                            "eval_loss", "eval_accuracy", "learning_rate"):
                    tf.summary.scalar(key, epochs[-1][key])
                # where each worker's step went (--step_timeline): medians over the epoch, in ms
                for name, part in ((epochs[-1].get("timeline") or {}).get("per_worker")
                                   or {}).items():
                    for key in ("compute_s", "wait_s", "sync_s"):
                        if part.get(key) is not None:
                            tf.summary.scalar(f"step_ms/{key[:-2]}/{name.replace(':', '_')}",
                                              part[key] * 1e3)
            writer.flush()
        if switch:  # the next configuration goes on from this checkpoint (adaptive/supervisor)
            adapter.request(epoch, lambda: peak_memory_per_device(cfg, trainer, epochs))
            if profiler is not None:
                profiler.close()
            if not is_chief:
                events.report_finished(role.name)
            return 0
    if profiler is not None:
        profiler.close()
    after = AfterTraining(cfg, role, trainer, strategy, coordinator, is_chief)
    after.run()
    if not is_chief:
        events.report_finished(role.name if role else "single")
        return 0
    record = build_record(cfg, role, trainer, strategy, run_id, epochs, after.checksum,
                          extra_config or {})
    if checkpoints is not None:
        record["checkpoint_saves"] = checkpoints.saves
        record["restored_state"] = checkpoints.restored_digest
        record["resumed_from_step"] = checkpoints.resumed_from_step
    if adapter is not None:
        record["adapt"] = adapter.record(epochs)
    record.update(after.fields(record))
    write(cfg, record)
    if checkpoints is not None:
        checkpoints.mark_record_written(run_id)
    return 0



"""Train one Keras model under one tf.distribute strategy and write its record.

    python -m experiments.run --strategy=one_device --model=cnn --epochs=2 --results_dir=runs/demo
    python -m experiments.run --strategy=mirrored --num_replicas=2 --model=cnn --epochs=2
    python -m experiments.run --strategy=central_storage --num_replicas=2 --model=cnn --epochs=2
    python -m experiments.run --strategy=multi_worker_mirrored --num_workers=2 --model=mlp
    python -m experiments.run --strategy=parameter_server --num_workers=2 --num_ps=1 --model=mlp
    python -m experiments.run --model=examples.two_branch:build_model \
        --dataset=examples.two_branch:make_dataset --train_examples=1024 --eval_examples=256
    python -m experiments.run --model=my_model.keras --model_weights=saved --dataset=data.npz
    python -m experiments.run --strategy=tpu --tpu=my-tpu     # or TPU_NAME; exit 2 without a TPU

Your own model and data (experiments/user_model.py, experiments/user_data.py,
experiments/npz_data.py): --model=MODULE:FUNCTION or PATH.keras, --dataset=MODULE:FUNCTION or
PATH.npz. MODULE is imported from the current directory and PYTHONPATH, in every task.

Multi-worker strategies without TF_CONFIG start a local cluster of this same command (one process
per task, each with its own TF_CONFIG); with TF_CONFIG set (Vertex AI, a TFJob, by hand) the
command plays only its own task. Bad input exits 2 with one line, before anything starts.
"""
import dataclasses
import datetime
import json
import os
import sys

from experiments import tf_settings  # noqa: E402

tf_settings.apply()  # before TensorFlow is imported anywhere: quiet, and the same CPU kernels

from absl import app, flags, logging  # noqa: E402

from experiments.cli import bad_input, parse_flags  # noqa: E402
from experiments.config import (FAIL_MODES, FLOAT_DTYPES, LR_SCALING,  # noqa: E402
                                MODEL_WEIGHTS, OPTIMIZERS, SYNC_DTYPES, ConfigError, RunConfig,
                                validate)
from experiments import npz_data  # noqa: E402
from experiments.datasets import DATASETS  # noqa: E402
from experiments.user_code import UserCodeError  # noqa: E402
from models import MODELS, STAGE_COSTS  # noqa: E402
from strategies import (COLLECTIVES, MULTI_WORKER, STRATEGIES,  # noqa: E402
                        all_reduce_workers)
from tf_config import TFConfigError, check_strategy_fits, role_from_env  # noqa: E402
from tf_config import launch, netns, netshape  # noqa: E402

_D = RunConfig()
_STRATEGY = flags.DEFINE_string("strategy", _D.strategy, f"One of: {', '.join(STRATEGIES)}.")
_MODEL = flags.DEFINE_string("model", _D.model, f"One of: {', '.join(MODELS)}; or your own: "
                             f"MODULE:FUNCTION (FUNCTION(input_shape, num_classes) -> uncompiled "
                             f"keras.Model giving logits) or PATH.keras (see --model_weights).")
_MODEL_WEIGHTS = flags.DEFINE_string("model_weights", _D.model_weights,
                                     f"--model=PATH.keras: {' or '.join(MODEL_WEIGHTS)} (fresh: "
                                     f"the saved architecture re-initialized from --seed; saved: "
                                     f"start from the saved weights).")
_DATASET = flags.DEFINE_string("dataset", _D.dataset, f"One of: {', '.join(DATASETS)}; or your "
                               f"own: PATH.npz (x_train, y_train, x_test, y_test) or "
                               f"MODULE:FUNCTION (FUNCTION(split, input_context) -> "
                               f"{{'dataset': unbatched (features, label), 'num_classes': N}}).")
_DATA_DIR = flags.DEFINE_string("data_dir", _D.data_dir, "TFDS data directory.")
_EPOCHS = flags.DEFINE_integer("epochs", _D.epochs, "Training epochs.")
_TRAIN_EXAMPLES = flags.DEFINE_integer("train_examples", _D.train_examples,
                                       "Training examples per epoch.")
_EVAL_EXAMPLES = flags.DEFINE_integer("eval_examples", _D.eval_examples, "Held-out examples.")
_BATCH = flags.DEFINE_integer("batch_size_per_replica", _D.batch_size_per_replica,
                              "Examples per replica per step; global = this x replicas in sync.")
_GLOBAL_BATCH = flags.DEFINE_integer("global_batch_size", _D.global_batch_size,
                                     "If > 0, the global batch held fixed (strong scaling); "
                                     "overrides --batch_size_per_replica.")
_NUM_REPLICAS = flags.DEFINE_integer("num_replicas", _D.num_replicas,
                                     "Local replicas for --strategy=mirrored or central_storage "
                                     "(GPUs, or logical CPU devices on a CPU host).")
_NUM_WORKERS = flags.DEFINE_integer("num_workers", _D.num_workers,
                                    "Workers of a local cluster (ignored when TF_CONFIG is set).")
_NUM_PS = flags.DEFINE_integer("num_ps", _D.num_ps, "Parameter servers (parameter_server).")
_NUM_STAGES = flags.DEFINE_integer("num_stages", _D.num_stages,
                                   "model_parallel / hybrid: pipeline stages (>= 2), each on its "
                                   "own device (GPUs, or the CPU split into logical devices).")
_MICROBATCHES = flags.DEFINE_integer("microbatches", _D.microbatches,
                                     "model_parallel / hybrid: micro-batches per step pipelined "
                                     "through the stages (GPipe); divides the per-replica batch.")
_STAGE_COST = flags.DEFINE_string("stage_cost", _D.stage_cost,
                                  f"model_parallel / hybrid: balance stages by {' or '.join(STAGE_COSTS)} "
                                  f"(parameter count, or measured forward+backward seconds).")
_PS_SHARDS = flags.DEFINE_integer("ps_shards", _D.ps_shards,
                                  "0 or 1: variables placed round-robin on the parameter servers. "
                                  "Sharding a variable across them (>1) is refused: Keras 3 "
                                  "variables cannot wrap a ShardedVariable (TF 2.21).")
_COLLECTIVE = flags.DEFINE_string("collective", _D.collective,
                                  f"MWMS all-reduce: {', '.join(COLLECTIVES)}.")
_LR = flags.DEFINE_float("learning_rate", _D.learning_rate, "Base learning rate.")
_LR_SCALING = flags.DEFINE_string("lr_scaling", _D.lr_scaling,
                                  f"Scale the LR by replicas: {', '.join(LR_SCALING)}.")
_WARMUP = flags.DEFINE_float("warmup_epochs", _D.warmup_epochs, "Linear LR warm-up epochs.")
_OPTIMIZER = flags.DEFINE_string("optimizer", _D.optimizer, f"One of: {', '.join(OPTIMIZERS)}.")
_BATCHNORM = flags.DEFINE_bool("batchnorm", _D.batchnorm, "BatchNormalization in the CNN.")
_SYNC_BN = flags.DEFINE_bool("sync_batchnorm", _D.sync_batchnorm,
                             "Synchronize BatchNormalization statistics across replicas.")
_SEED = flags.DEFINE_integer("seed", _D.seed, "Seed for data, shuffling and initialization.")
_RESULTS_DIR = flags.DEFINE_string("results_dir", _D.results_dir, "Where records go.")
_RUN_NAME = flags.DEFINE_string("run_name", _D.run_name, "Optional label stored in the record.")
_THREADS = flags.DEFINE_integer("threads", _D.threads,
                                "Intra/inter-op threads of this process (0: TF default).")
_TENSORBOARD = flags.DEFINE_bool("tensorboard", _D.tensorboard, "Write TensorBoard scalars.")
_CHECKPOINT_DIR = flags.DEFINE_string("checkpoint_dir", "", "Save every epoch here (MWMS: also on "
                                      "preemption, SIGTERM); rerunning "
                                      "with the same directory resumes (Vertex: "
                                      "$AIP_CHECKPOINT_DIR).")
_FAIL_TASK = flags.DEFINE_string("fail_task", "", "Fault injection in a local cluster: the task to "
                                 "signal (e.g. worker:1) at --fail_at_step: SIGKILL, or SIGTERM "
                                 "with --fail_mode=preempt.")
_FAIL_AT_STEP = flags.DEFINE_integer("fail_at_step", 0, "Global step (1-based) of the fault.")
_FAIL_MODE = flags.DEFINE_string("fail_mode", _D.fail_mode, f"One of: {', '.join(FAIL_MODES)} "
                                 "(SIGKILL: a lost machine; SIGTERM: a preemption notice).")
_CKPT_EVERY = flags.DEFINE_integer("checkpoint_every_steps", 0, "Also checkpoint every N global "
                                   "steps (0: at the end of each epoch only).")
_STRAGGLER_TASK = flags.DEFINE_string("straggler_task", "", "Straggler injection: the worker to "
                                      "slow down (e.g. worker:1) by --straggler_delay_ms.")
_STRAGGLER_DELAY = flags.DEFINE_float("straggler_delay_ms", 0.0, "Milliseconds added to every "
                                      "step of --straggler_task (a sleep in its input pipeline).")
_STEPS_PER_EXECUTION = flags.DEFINE_integer("steps_per_execution", _D.steps_per_execution,
                                            "Training steps per tf.function call (fewer "
                                            "dispatches; hooks fire per call).")
_ACCUMULATION = flags.DEFINE_integer("accumulation_steps", _D.accumulation_steps,
                                     "Gradient accumulation: K micro-batches (each the per-replica "
                                     "batch) per optimizer update and per gradient "
                                     "synchronization; a step then trains K x the global batch "
                                     "and --lr_scaling scales with that.")
_SYNC_DTYPE = flags.DEFINE_string("gradient_sync_dtype", _D.gradient_sync_dtype,
                                  f"dtype gradients are synchronized in (all-reduce, ps push): "
                                  f"{', '.join(SYNC_DTYPES)}; 16-bit halves the bytes.")
_FLOAT_DTYPE = flags.DEFINE_string("float_dtype", _D.float_dtype,
                                   f"Keras floatx of the model: {', '.join(FLOAT_DTYPES)}. float64 "
                                   f"(slower) makes strategies comparable to ~1e-12: the "
                                   f"equivalence tests use it.")
_PROFILE_STEPS = flags.DEFINE_string("profile_steps", "", "FIRST,LAST: TF profiler trace of these "
                                     "global steps on the chief (TensorBoard Profile tab).")
_COMM_PROBE = flags.DEFINE_bool("comm_probe", True, "After training, time one step's gradient "
                                "synchronization in isolation (record: communication_fraction).")
_THREADS_PER_WORKER = flags.DEFINE_integer("threads_per_worker", 0,
                                           "Threads per task of a local cluster "
                                           "(0: cores / tasks, at least 1).")
_CLUSTER_TIMEOUT = flags.DEFINE_float("cluster_timeout", 60.0,
                                      "Seconds for every local task to come up.")
_ISOLATE = flags.DEFINE_bool("isolate_network", True,
                             "Run a local cluster in a private network namespace.")
_PIN_CORES = flags.DEFINE_integer("pin_cores", 0, "Pin every process of the run (a local "
                                  "cluster's tasks, ps and chief included) to the first K CPUs, "
                                  "so N workers on N cores means what it says (0: no pinning).")
_REQUIRE_GPUS = flags.DEFINE_integer("require_gpus", _D.require_gpus, "Exit 2 unless TensorFlow "
                                    "sees at least this many GPUs (set by experiments.vertex on "
                                    "GPU pools; 0: no check, CPU fallback allowed).")
_TPU = flags.DEFINE_string("tpu", _D.tpu, "--strategy=tpu: the TPU (a Cloud TPU name, "
                           "grpc://HOST:8470, or local on a TPU VM); empty: TensorFlow's lookup "
                           "(KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS, TPU_NAME, TPU_CONFIG).")
_TPU_TIMEOUT = flags.DEFINE_float("tpu_timeout_s", _D.tpu_timeout_s, "--strategy=tpu: seconds "
                                  "connecting to the TPU may take before the run exits 2.")
_VERBOSE = flags.DEFINE_bool("verbose", False, "Show every line of every task of a local cluster: "
                             "TensorFlow's start-up messages (CUDA probing, oneDNN, absl) and "
                             "gRPC errors about lost peers (always in the task logs).")
_EMULATE_GBPS = flags.DEFINE_float("emulate_bandwidth_gbps", 0.0, "Local cluster: shape its "
                                   "private loopback to this many Gbit/s, shared by all links "
                                   "(tc tbf; 0: the real loopback). See tf_config/netshape.py.")
_EMULATE_LATENCY = flags.DEFINE_float("emulate_latency_ms", 0.0, "Local cluster: delay every "
                                      "packet by this much (needs the kernel's netem qdisc).")
_EMULATE_MODE = flags.DEFINE_string("emulate_network", "strict", "strict: exit 2 when the network "
                                    "cannot be emulated here; best_effort: warn and run on the "
                                    "real one (the record says so).")
_MAX_RESTARTS = flags.DEFINE_integer("max_restarts", 3, "Local cluster: restarts of lost tasks "
                                     "before the run fails. A lost PSS worker is restarted alone; "
                                     "with --checkpoint_dir, any other lost task restarts the "
                                     "whole cluster from the last checkpoint.")


def _config():
    return RunConfig(
        strategy=_STRATEGY.value, model=_MODEL.value, model_weights=_MODEL_WEIGHTS.value,
        dataset=_DATASET.value,
        data_dir=_DATA_DIR.value, epochs=_EPOCHS.value, train_examples=_TRAIN_EXAMPLES.value,
        eval_examples=_EVAL_EXAMPLES.value, batch_size_per_replica=_BATCH.value,
        global_batch_size=_GLOBAL_BATCH.value, num_replicas=_NUM_REPLICAS.value,
        num_workers=_NUM_WORKERS.value, num_ps=_NUM_PS.value, ps_shards=_PS_SHARDS.value,
        collective=_COLLECTIVE.value, learning_rate=_LR.value, lr_scaling=_LR_SCALING.value,
        warmup_epochs=_WARMUP.value, optimizer=_OPTIMIZER.value, batchnorm=_BATCHNORM.value,
        sync_batchnorm=_SYNC_BN.value, seed=_SEED.value, results_dir=_RESULTS_DIR.value,
        run_name=_RUN_NAME.value, threads=_THREADS.value, tensorboard=_TENSORBOARD.value,
        fail_task=_FAIL_TASK.value, fail_at_step=_FAIL_AT_STEP.value, fail_mode=_FAIL_MODE.value,
        checkpoint_every_steps=_CKPT_EVERY.value, comm_probe=_COMM_PROBE.value,
        profile_steps=_PROFILE_STEPS.value, steps_per_execution=_STEPS_PER_EXECUTION.value,
        accumulation_steps=_ACCUMULATION.value,
        num_stages=_NUM_STAGES.value, microbatches=_MICROBATCHES.value,
        stage_cost=_STAGE_COST.value,
        gradient_sync_dtype=_SYNC_DTYPE.value, float_dtype=_FLOAT_DTYPE.value,
        straggler_task=_STRAGGLER_TASK.value, straggler_delay_ms=_STRAGGLER_DELAY.value,
        checkpoint_dir=_CHECKPOINT_DIR.value, pin_cores=_PIN_CORES.value,
        require_gpus=_REQUIRE_GPUS.value, tpu=_TPU.value, tpu_timeout_s=_TPU_TIMEOUT.value)


def _sizes_from_data(cfg):
    """--dataset=PATH.npz without --train_examples / --eval_examples: all of its splits (the
    synthetic set's default sizes are not the user's). Says so once, before the run starts."""
    given = _TRAIN_EXAMPLES.present, _EVAL_EXAMPLES.present
    if not cfg.dataset.endswith(".npz") or all(given):
        return cfg
    try:
        info = npz_data.info(cfg.dataset)
    except UserCodeError:
        return cfg  # validate() reports it
    cfg = dataclasses.replace(cfg, train_examples=cfg.train_examples if given[0] else
                              info.train_size, eval_examples=cfg.eval_examples if given[1]
                              else info.eval_size)
    if not os.environ.get("TF_CONFIG"):  # the launcher says it, not every task again
        print(f"{cfg.dataset}: training on {cfg.train_examples} and evaluating on "
              f"{cfg.eval_examples} examples (all of a split unless --train_examples / "
              f"--eval_examples say otherwise)", flush=True)
    return cfg


def pin_cores(count):
    """Pins this process to the first `count` CPUs it may run on (0: no pinning). Called before
    TensorFlow starts its thread pools; a local cluster's tasks inherit the affinity."""
    if count:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:count])


_EMULATE_MODES = ("strict", "best_effort")


def _emulation(cfg, role):
    """(gbps, latency_ms, best_effort) when an emulated network is asked for, else None; raises
    ConfigError for bad values or a run without a local cluster. When the machine cannot shape
    (no namespace, no tc, no netem), strict mode refuses and best effort runs unshaped."""
    gbps, latency, mode = _EMULATE_GBPS.value, _EMULATE_LATENCY.value, _EMULATE_MODE.value
    if mode not in _EMULATE_MODES:
        raise ConfigError(f"--emulate_network={mode!r}; choose from {', '.join(_EMULATE_MODES)}")
    if not gbps and not latency:
        return None
    if os.environ.get(netshape.APPLIED_ENV):  # a task, or the launcher inside its namespace
        return None
    if not 0 <= gbps <= 1000:
        raise ConfigError(f"--emulate_bandwidth_gbps={gbps:g} must be in (0, 1000] (0: off)")
    if not 0 <= latency <= 10000:
        raise ConfigError(f"--emulate_latency_ms={latency:g} must be in (0, 10000] (0: off)")
    local = role is None and cfg.strategy in MULTI_WORKER and (
        cfg.strategy == "parameter_server" or cfg.num_workers > 1)
    if not local:
        raise ConfigError("--emulate_bandwidth_gbps/--emulate_latency_ms shape a local cluster's "
                          "private network: use multi_worker_mirrored with --num_workers > 1 or "
                          f"parameter_server, without TF_CONFIG (got --strategy={cfg.strategy})")
    best_effort = mode == "best_effort"
    try:
        if not _ISOLATE.value:
            raise netshape.ShapingUnavailable("--noisolate_network: the shaper lives in the "
                                              "cluster's private network namespace")
        netns.check_shaping(gbps, latency)
    except netshape.ShapingUnavailable as e:
        if not best_effort:
            raise ConfigError(f"cannot emulate the network here: {e}; pass "
                              "--emulate_network=best_effort to run on the real one")
        sys.stderr.write(f"WARNING: cannot emulate the network ({e}); running unshaped\n")
        os.environ[netshape.APPLIED_ENV] = json.dumps(netshape.unshaped(str(e)))
        return None
    return gbps, latency, best_effort


def task_log_dir(cfg):
    """Where a local cluster's task logs go: beside the records when they are local."""
    if "://" in cfg.results_dir:
        return ""  # the launcher's temporary directory
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")  # as run ids
    return os.path.join(cfg.results_dir, "logs", f"{stamp}-{cfg.strategy}-{os.getpid()}")


def main(argv):
    if not flags.FLAGS["verbosity"].present:
        logging.set_verbosity(logging.WARNING)  # TF's Python INFO lines drown the progress bars
    if len(argv) > 1:
        bad_input(f"unexpected arguments {argv[1:]}; all options are --flags")
    tf_settings.show_startup_messages(_VERBOSE.value)
    cfg = _sizes_from_data(_config())
    # Vertex AI tells a job where its outputs go; an explicit --results_dir still wins.
    if os.environ.get("AIP_MODEL_DIR") and not _RESULTS_DIR.present:
        cfg = dataclasses.replace(cfg, results_dir=os.environ["AIP_MODEL_DIR"])
    if os.environ.get("AIP_CHECKPOINT_DIR") and not _CHECKPOINT_DIR.present:
        cfg = dataclasses.replace(cfg, checkpoint_dir=os.environ["AIP_CHECKPOINT_DIR"])
    if os.environ.get("AIP_TENSORBOARD_LOG_DIR"):
        cfg = dataclasses.replace(cfg, tensorboard_dir=os.environ["AIP_TENSORBOARD_LOG_DIR"])
    try:
        role = role_from_env()
        if role is not None:  # the platform's cluster wins over --num_workers / --num_ps
            # MWMS counts a chief (Vertex pool 0) as a worker; PSS's chief only coordinates.
            chief = 1 if all_reduce_workers(cfg.strategy) and role.chief_type != "worker" \
                else 0
            cfg = dataclasses.replace(cfg, num_workers=max(role.num_workers + chief, 1),
                                      num_ps=role.num_ps)
        # First: when the cluster is the cause, say so rather than blame a flag.
        check_strategy_fits(cfg.strategy, role, bool(os.environ.get("TF_CONFIG", "").strip()))
        validate(cfg)
        if _THREADS_PER_WORKER.value < 0 or _CLUSTER_TIMEOUT.value <= 0:
            raise ConfigError("--threads_per_worker must be >= 0 and --cluster_timeout > 0")
        if _MAX_RESTARTS.value < 0:
            raise ConfigError(f"--max_restarts={_MAX_RESTARTS.value} must be >= 0")
        shaping = _emulation(cfg, role)
    except (ConfigError, TFConfigError) as e:
        bad_input(e)
    # No cluster given: launch one locally. A one-worker MWMS needs no cluster (it runs like a
    # single worker), and a task that already has TF_CONFIG never launches another cluster.
    pin_cores(cfg.pin_cores)
    needs_cluster = cfg.strategy == "parameter_server" or cfg.num_workers > 1
    if role is None and cfg.strategy in MULTI_WORKER and needs_cluster and \
            not os.environ.get("TF_CONFIG"):
        this_command = [sys.executable, "-m", "experiments.run"] + sys.argv[1:]
        if shaping is not None:  # applied by tf_config.netns inside the private namespace
            os.environ.update(netshape.request_env(*shaping))
        launch.maybe_isolate(this_command, _ISOLATE.value)
        pss = cfg.strategy == "parameter_server"
        sys.exit(launch.run(launch.LaunchOptions(
            num_workers=cfg.num_workers, num_ps=cfg.num_ps, chief=pss,
            threads_per_task=_THREADS_PER_WORKER.value, cluster_timeout_s=_CLUSTER_TIMEOUT.value,
            verbose=_VERBOSE.value, max_restarts=_MAX_RESTARTS.value,
            cluster_restarts=bool(cfg.checkpoint_dir), log_dir=task_log_dir(cfg),
            cluster_restart_hint="--checkpoint_dir turns on whole-cluster restarts from the last "
                                 "checkpoint",
            command=lambda kind, index, threads: this_command + [f"--threads={threads}"])))
    # Imported only now: TensorFlow is slow to import and the launcher never needs it.
    from experiments.task import run_task
    sys.exit(run_task(cfg, role, extra_config={
        "threads_per_worker": _THREADS_PER_WORKER.value, "max_restarts": _MAX_RESTARTS.value,
        "cluster_timeout": _CLUSTER_TIMEOUT.value, "isolate_network": _ISOLATE.value}))


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)

"""RunConfig: everything one training run needs, as a plain dataclass; and LaunchConfig, what a
local cluster's launcher needs besides.

Each field is declared once, here: its default, its `--help` line, its choices and its lower
bound. The flags of `experiments.run` (and of the plain loops in experiments/comparison/) are
made from these fields (experiments/config/flags.py), and validation reads the same choices and
bounds (experiments/config/validation.py). A new setting is one field here.
"""
import dataclasses

from experiments.workload.datasets import DATASETS
from models import (DEFAULT_DATASET, MODEL_DATASETS, MODELS, PIPELINE_SCHEDULES, STAGE_COSTS,
                    default_dataset)
from strategies import COLLECTIVES, CROSS_DEVICE_OPS, PIPELINED, STRATEGIES, replicas_in_sync
from tf_config import schedules

OPTIMIZERS = ("sgd", "momentum", "adam")
FAIL_MODES = ("kill", "preempt", "hang")
SYNC_DTYPES = ("float32", "float16", "bfloat16")
FLOAT_DTYPES = ("float32", "float64")
LR_SCALING = ("none", "linear", "sqrt")
MODEL_WEIGHTS = ("fresh", "saved")  # --model=PATH.keras: re-initialized from --seed, or as saved
EMULATE_MODES = ("strict", "best_effort")
AUTO = "auto"  # --strategy=auto: the planner chooses (experiments/config/auto.py)


class ConfigError(ValueError):
    """A user-facing, one-line description of bad input (exit code 2)."""


def setting(default, help, choices=None, bound=None, flag=True):  # noqa: A002 - absl's word
    """A field with what its flag and its validation need: `help` (the --help line; the choices
    are appended), `choices` (the valid values), `bound` ("> 0" or ">= 0"), `flag` (False: set
    by the program, e.g. from the platform's environment)."""
    return dataclasses.field(default=default, metadata={
        "help": help, "choices": choices, "bound": bound, "flag": flag})


@dataclasses.dataclass
class RunConfig:
    strategy: str = setting("one_device", "The tf.distribute strategy; auto: the planner chooses "
                            "the configuration from --plan_profile (default: measured here) on "
                            "--plan_cluster (default: this machine).",
                            (*STRATEGIES, AUTO))
    plan_profile: str = setting("", "--strategy=auto: the workload profile (JSON: a "
                                "comparison's profile-*.json, or your own; '': measured here "
                                "first).")
    plan_cluster: str = setting("", "--strategy=auto: the cluster spec (JSON) to plan for ('': "
                                "this machine, written to <results_dir>/cluster_this_machine.json)"
                                ".")
    adapt: bool = setting(False, "--strategy=auto: after each epoch compare the run with the "
                          "plan and, when the network drifts and another configuration pays "
                          "for its switch, checkpoint and go on under it "
                          "(experiments/adaptive/).")
    adapt_threshold: float = setting(0.15, "--adapt: the change of an epoch's examples/s from "
                                     "the configuration's first steady epoch that counts as "
                                     "drift.", bound="> 0")
    model: str = setting("cnn", f"One of: {', '.join(MODELS)}; or your own: MODULE:FUNCTION "
                         "(FUNCTION(input_shape, num_classes) -> uncompiled keras.Model giving "
                         "logits) or PATH.keras (see --model_weights).")
    model_weights: str = setting("fresh", "--model=PATH.keras: fresh (the saved architecture "
                                 "re-initialized from --seed) or saved (start from the saved "
                                 "weights).", MODEL_WEIGHTS)
    dataset: str = setting("", f"One of: {', '.join(DATASETS)}; or your own: PATH.npz "
                           "(x_train, y_train, x_test, y_test) or MODULE:FUNCTION "
                           "(FUNCTION(split, input_context) -> {'dataset': unbatched (features, "
                           "label), 'num_classes': N}). Empty: the model's own, as in a "
                           "comparison (" + ", ".join(f"{m}: {d}" for m, d in
                                                     MODEL_DATASETS.items()) +
                           f"; any other model: {DEFAULT_DATASET}).")
    data_dir: str = setting("", "TFDS data directory.")
    epochs: int = setting(3, "Training epochs.", bound="> 0")
    train_examples: int = setting(8192, "Training examples per epoch (your .npz without it: all "
                                  "of it).", bound="> 0")
    eval_examples: int = setting(2048, "Held-out examples (your .npz without it: all of it).",
                                 bound="> 0")
    batch_size_per_replica: int = setting(64, "Examples per replica per step; global = this x "
                                          "replicas in sync.", bound="> 0")
    global_batch_size: int = setting(0, "If > 0, the global batch held fixed (strong scaling); "
                                     "overrides --batch_size_per_replica.", bound=">= 0")
    num_replicas: int = setting(1, "Local replicas for --strategy=mirrored or central_storage "
                                "(GPUs, or logical CPU devices on a CPU host).", bound="> 0")
    num_workers: int = setting(1, "Workers of a local cluster (ignored when TF_CONFIG is set).",
                               bound="> 0")
    num_ps: int = setting(0, "Parameter servers (parameter_server).", bound=">= 0")
    ps_shards: int = setting(0, "0 or 1: variables placed round-robin on the parameter servers. "
                             "Sharding a variable across them (>1) is refused: Keras 3 variables "
                             "cannot wrap a ShardedVariable (TF 2.21).", bound=">= 0")
    collective: str = setting("auto", "MWMS / hybrid all-reduce implementation (nccl: between "
                              "GPUs only; refused on a CPU host).", COLLECTIVES)
    cross_device_ops: str = setting("auto", "mirrored's reduction between its replicas "
                                    "(hierarchical_copy, nccl: between GPUs only; refused on a "
                                    "CPU host).", CROSS_DEVICE_OPS)
    learning_rate: float = setting(0.02, "Base learning rate.", bound="> 0")
    lr_scaling: str = setting("none", "Scale the LR with the global batch.", LR_SCALING)
    warmup_epochs: float = setting(0.0, "Linear LR warm-up epochs.", bound=">= 0")
    optimizer: str = setting("momentum", "The optimizer.", OPTIMIZERS)
    batchnorm: bool = setting(False, "BatchNormalization in the CNN.")
    sync_batchnorm: bool = setting(False, "Synchronize BatchNormalization statistics across "
                                   "replicas.")
    seed: int = setting(42, "Seed for data, shuffling and initialization.", bound=">= 0")
    results_dir: str = setting("runs", "Where records go.")
    run_name: str = setting("", "Optional label stored in the record (a comparison's cell).")
    threads: int = setting(0, "Intra/inter-op threads of this process (0: TF default).",
                           bound=">= 0")
    tensorboard: bool = setting(True, "Write TensorBoard scalars.")
    step_timeline: bool = setting(True, "Timestamps inside every step (input ready, gradients "
                                  "ready, update done): per worker compute, waiting for peers and "
                                  "synchronization, and who arrived last, in the record's "
                                  "`timeline` (results/records/step_stamps.py).")
    fail_task: str = setting("", "Fault injection in a local cluster: the task to signal (e.g. "
                             "worker:1) at --fail_at_step: SIGKILL, or SIGTERM with "
                             "--fail_mode=preempt.")
    fail_at_step: int = setting(0, "Global step (1-based) of the fault.", bound=">= 0")
    fail_mode: str = setting("kill", "SIGKILL (kill: a lost machine), SIGTERM (preempt: a "
                             "preemption notice) or SIGSTOP (hang: a frozen task, for the "
                             "--watchdog_s).", FAIL_MODES)
    straggler_task: str = setting("", "Straggler injection: the worker to slow down (e.g. "
                                  "worker:1) by --straggler_delay_ms.")
    straggler_delay_ms: float = setting(0.0, "Milliseconds added to every step of "
                                        "--straggler_task (a sleep in its input pipeline).")
    straggler_schedule: str = setting("", "Straggler injection over the run, EPOCH:MS,... "
                                      "(0:0,3:60: from after 3 epochs, 60 ms before each batch) "
                                      "of --straggler_task, else of the last worker; in place "
                                      "of --straggler_delay_ms.")
    checkpoint_dir: str = setting("", "Save every epoch here (MWMS: also on preemption, "
                                  "SIGTERM); rerunning with the same directory resumes (Vertex: "
                                  "$AIP_CHECKPOINT_DIR).")
    checkpoint_every_steps: int = setting(0, "Also checkpoint every N global steps (0: at the end "
                                          "of each epoch only).", bound=">= 0")
    gradient_sync_dtype: str = setting("float32", "dtype gradients are synchronized in "
                                       "(all-reduce, ps push); 16-bit halves the bytes.",
                                       SYNC_DTYPES)
    compression: str = setting("none", "Gradient compression with error feedback under "
                               "all-reduce (mirrored, MWMS, hybrid): int8, topk:RATIO (the "
                               "largest RATIO of each gradient's values), powersgd:RANK, or bf16 "
                               "(the cast of --gradient_sync_dtype=bfloat16; PSS takes this one "
                               "only). experiments/engine/compressed_sync.py.")
    zero: int = setting(0, "ZeRO stage under MWMS: 1 keeps each worker's optimizer state for "
                        "1/N of the parameters (gradients reduce-scattered, the shard updated, "
                        "parameters all-gathered; experiments/engine/zero.py); 0: off.", (0, 1))
    bytes_per_pack: int = setting(0, "MWMS / hybrid: all-reduce the gradients in packs of about "
                                  "this many bytes, each as soon as its gradients are ready "
                                  "(overlapping the rest of the backward); 0: one pack after "
                                  "the whole backward.", bound=">= 0")
    float_dtype: str = setting("float32", "Keras floatx of the model. float64 (slower) makes "
                               "strategies comparable to ~1e-12: the equivalence tests use it.",
                               FLOAT_DTYPES)
    steps_per_execution: int = setting(1, "Training steps per tf.function call (fewer "
                                       "dispatches; hooks fire per call).", bound="> 0")
    accumulation_steps: int = setting(1, "Gradient accumulation: K micro-batches (each the "
                                      "per-replica batch) per optimizer update and per gradient "
                                      "synchronization; a step then trains K x the global batch "
                                      "and --lr_scaling scales with that.", bound="> 0")
    num_stages: int = setting(1, f"{' / '.join(PIPELINED)}: pipeline stages (>= 2), each on its "
                              "own device (GPUs, or the CPU split into logical devices).",
                              bound="> 0")
    microbatches: int = setting(1, f"{' / '.join(PIPELINED)}: micro-batches per step pipelined "
                                "through the stages (GPipe); divides the per-replica batch.",
                                bound="> 0")
    pipeline_schedule: str = setting("gpipe", f"{' / '.join(PIPELINED)}: each stage runs every "
                                     "micro-batch's forward before its backwards (gpipe), or "
                                     "one forward one backward (1f1b: at most S - s "
                                     "micro-batches' activations held; the same bubble).",
                                     PIPELINE_SCHEDULES)
    tensor_parallel: int = setting(1, f"{' / '.join(PIPELINED)}: split each transformer block's "
                                   "attention (by heads) and MLP (by hidden units) over this "
                                   "many devices per stage (Megatron-style; with "
                                   "--num_stages=1: no pipeline).", bound="> 0")
    stage_cost: str = setting("params", f"{' / '.join(PIPELINED)}: balance stages by parameter "
                              "count, or by measured forward+backward seconds.", STAGE_COSTS)
    profile_steps: str = setting("", "FIRST,LAST: TF profiler trace of these global steps on the "
                                 "chief (TensorBoard Profile tab).")
    compute_probe: bool = setting(True, "After training, on the chief: count the model's FLOPs "
                                  "per example and time a matmul, for the achieved share of this "
                                  "machine's compute (the record's `compute`).")
    comm_probe: bool = setting(True, "After training, time one step's gradient synchronization "
                               "in isolation (record: communication_fraction).")
    tensorboard_dir: str = setting("", "TensorBoard directory ('': <results_dir>/tensorboard; "
                                   "Vertex: $AIP_TENSORBOARD_LOG_DIR).", flag=False)
    pin_cores: int = setting(0, "Pin every process of the run (a local cluster's tasks, ps and "
                             "chief included) to the first K CPUs, so N workers on N cores means "
                             "what it says (0: no pinning).", bound=">= 0")
    require_gpus: int = setting(0, "Exit 2 unless TensorFlow sees at least this many GPUs (set "
                                "by experiments.vertex on GPU pools; 0: no check, CPU fallback "
                                "allowed).", bound=">= 0")
    tpu: str = setting("", "--strategy=tpu: the TPU (a Cloud TPU name, grpc://HOST:8470, or "
                       "local on a TPU VM); empty: TensorFlow's lookup "
                       "(KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS, TPU_NAME, TPU_CONFIG).")
    tpu_timeout_s: float = setting(180.0, "--strategy=tpu: seconds connecting to the TPU may "
                                   "take before the run exits 2.", bound="> 0")

    def __post_init__(self):
        # one name in the record, the tasks' configs and the report: the resolved dataset
        if not self.dataset:
            self.dataset = default_dataset(self.model)

    def replicas_in_sync(self):
        return replicas_in_sync(self.strategy, self.num_replicas, self.num_workers)

    def model_devices(self):
        """Devices one replica's model is spread over: pipeline stages x tensor shards."""
        return self.num_stages * self.tensor_parallel

    def straggler_worker(self):
        """The worker --straggler_task or --straggler_schedule slows (a schedule without a
        task: the last worker), or None."""
        if self.straggler_task:
            return int(self.straggler_task.split(":")[1])
        return max(1, self.num_workers) - 1 if self.straggler_schedule else None

    def straggler_delays(self):
        """--straggler_schedule as [(epoch, ms)] ([] without one); ConfigError for a bad one."""
        if not self.straggler_schedule:
            return []
        try:
            return schedules.parse(self.straggler_schedule, "straggler_schedule", "MS", 0,
                                   60_000, "0:0,3:60", zero=True)
        except ValueError as e:
            raise ConfigError(str(e)) from None

    def resolved_global_batch(self):
        return self.global_batch_size or self.batch_size_per_replica * self.replicas_in_sync()

    def resolved_per_replica_batch(self):
        return self.resolved_global_batch() // self.replicas_in_sync()

    def step_batch(self):
        """Examples per step (one optimizer update): K micro-batches of the global batch."""
        return self.resolved_global_batch() * self.accumulation_steps

    def steps_per_epoch(self):
        return self.train_examples // self.step_batch()

    def profile_range(self):
        first, last = (int(v) for v in self.profile_steps.split(","))
        return first, last


@dataclasses.dataclass
class LaunchConfig:
    """How `experiments.run` starts a local cluster (tf_config.launch) and shows its output. The
    first five are stored in every record's `config` beside the RunConfig (RECORDED)."""
    threads_per_worker: int = setting(0, "Threads per task of a local cluster (0: cores / tasks, "
                                      "at least 1).", bound=">= 0")
    max_restarts: int = setting(3, "Local cluster: restarts of lost tasks before the run fails. "
                                "A lost PSS worker is restarted alone; with --checkpoint_dir, any "
                                "other lost task restarts the whole cluster from the last "
                                "checkpoint.", bound=">= 0")
    pin_workers: bool = setting(False, "Local cluster: pin worker i to its own "
                                "--threads_per_worker cores (round robin over the usable cores), "
                                "so no worker borrows a core for its extra threads; the chief and "
                                "ps on the cores the workers leave (unpinned where they take "
                                "every core).")
    cluster_timeout: float = setting(60.0, "Seconds for every local task to come up.", bound="> 0")
    isolate_network: bool = setting(True, "Run a local cluster in a private network namespace.")
    watchdog_s: float = setting(300.0, "Local cluster: fail when no training step completes "
                                "for max(this, --watchdog_factor x the median time between "
                                "steps), after every task wrote its Python stacks to its log "
                                "(0: off). Off until the first step; paused between epochs.",
                                bound=">= 0")
    watchdog_factor: float = setting(20.0, "See --watchdog_s.", bound="> 0")
    verbose: bool = setting(False, "Show every line: TensorFlow's start-up messages (CUDA "
                            "probing, oneDNN, absl) and, of every task of a local cluster, "
                            "gRPC errors about lost peers (always in the task logs).")
    emulate_bandwidth_gbps: float = setting(0.0, "Local cluster: shape its private loopback to "
                                            "this many Gbit/s, shared by all links (tc tbf; 0: "
                                            "the real loopback). See tf_config/netshape.py.")
    emulate_bandwidth_schedule: str = setting("", "Local cluster: the shaper's rate over the "
                                              "run, EPOCH:GBPS,... (0:1,2:0.05: 1 Gbit/s, then "
                                              "0.05 after 2 epochs), changed by the chief "
                                              "between epochs; in place of "
                                              "--emulate_bandwidth_gbps.")
    emulate_latency_ms: float = setting(0.0, "Local cluster: delay every packet by this much "
                                        "(needs the kernel's netem qdisc).")
    emulate_network: str = setting("strict", "strict: exit 2 when the network cannot be "
                                   "emulated here; best_effort: warn and run on the real one "
                                   "(the record says so).", EMULATE_MODES)

    RECORDED = ("threads_per_worker", "max_restarts", "pin_workers", "cluster_timeout",
                "isolate_network")

    def recorded(self):
        return {name: getattr(self, name) for name in self.RECORDED}

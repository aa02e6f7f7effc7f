"""Validation of a RunConfig (or LaunchConfig): pure Python (no TensorFlow import), so bad input
exits 2 in well under a second, before any cluster is started or any file is written.

    validate(cfg)          # raises ConfigError naming the first bad value and what is allowed
"""
import dataclasses
import os
import re

from experiments.config import checkpoint_layout
from experiments.config.run_config import AUTO, ConfigError
from experiments.workload import npz_data, text_corpus, user_code
from experiments.workload.datasets import DATASETS, TEXT, is_user_dataset
from models import MODELS, NEXT_TOKEN_MODELS, TENSOR_PARALLEL_MODELS, TOKEN_MODELS
from results.records.store import is_url
from strategies import (ALL_REDUCE, COMPRESSIBLE, LOCAL_REPLICAS, MIRRORED, MULTI_WORKER,
                        PARAMETER_SERVERS, PIPELINED, compression, kind)


def check_fields(cfg):
    """Each field's own rule, as declared with it: one of its choices, within its bound."""
    for f in dataclasses.fields(cfg):
        value, choices, bound = getattr(cfg, f.name), f.metadata.get("choices"), \
            f.metadata.get("bound")
        if choices is not None and value not in choices:
            raise ConfigError(f"--{f.name}={value!r} is not valid; choose one of: "
                              f"{', '.join(map(str, choices))}")
        if bound is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or (value <= 0 if bound == "> 0" else value < 0)):
            raise ConfigError(f"--{f.name}={value!r} must be {bound}")


def check_writable_dir(flag, path):
    """The nearest existing ancestor must be a writable directory; nothing is created here."""
    if not path:
        raise ConfigError(f"--{flag} is empty; give a directory to write results into")
    if is_url(path):
        return  # gs:// and other tf.io.gfile URLs: checked by the platform's permissions
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe) or not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"--{flag}={path!r} is not writable ({probe!r} is not a writable "
                          f"directory)")


def check_model(model):
    """A built-in name, or the user's MODULE:FUNCTION / PATH.keras, checked without running it."""
    try:
        if model.endswith(".keras"):
            user_code.check_keras_file("model", model)
        elif ":" in model:
            user_code.check_reference("model", model)
        elif model not in MODELS:
            raise ConfigError(f"--model={model!r} is not valid; choose one of: "
                              f"{', '.join(MODELS)}, or MODULE:FUNCTION, or PATH.keras")
    except user_code.UserCodeError as e:
        raise ConfigError(str(e)) from None


def check_dataset(dataset):
    """A built-in name (a text corpus: found), or the user's PATH.npz (read and checked) /
    MODULE:FUNCTION (found)."""
    try:
        if not is_user_dataset(dataset):
            if dataset not in DATASETS:
                raise ConfigError(f"--dataset={dataset!r} is not valid; choose one of: "
                                  f"{', '.join(DATASETS)}, or PATH.npz, or MODULE:FUNCTION")
            if DATASETS[dataset].kind == TEXT:
                try:
                    text_corpus.characters()
                except ValueError as e:
                    raise ConfigError(str(e)) from None
        elif dataset.endswith(".npz"):
            npz_data.read(dataset)
        else:
            user_code.check_reference("dataset", dataset)
    except user_code.UserCodeError as e:
        raise ConfigError(str(e)) from None


def _check_pipeline(cfg):
    if cfg.strategy not in PIPELINED:
        given = [f"--{name}={getattr(cfg, name)}" for name, default in (
            ("num_stages", 1), ("microbatches", 1), ("tensor_parallel", 1),
            ("pipeline_schedule", "gpipe")) if getattr(cfg, name) != default]
        if given:
            raise ConfigError(f"{' and '.join(given)} "
                              f"{'applies' if len(given) == 1 else 'apply'} to --strategy="
                              f"{' or '.join(PIPELINED)} only (got --strategy={cfg.strategy})")
        return
    if cfg.tensor_parallel > 1 and cfg.model not in TENSOR_PARALLEL_MODELS:
        raise ConfigError(f"--tensor_parallel={cfg.tensor_parallel} splits transformer blocks; "
                          f"--model={cfg.model} has none (choose one of: "
                          f"{', '.join(TENSOR_PARALLEL_MODELS)})")
    if cfg.model_devices() < 2:
        raise ConfigError(f"--num_stages={cfg.num_stages}: --strategy={cfg.strategy} splits the "
                          f"model over 2 or more devices; give --num_stages >= 2 or "
                          f"--tensor_parallel >= 2")
    if cfg.accumulation_steps != 1:
        raise ConfigError(f"--accumulation_steps={cfg.accumulation_steps} does not combine with "
                          f"--strategy={cfg.strategy}: its --microbatches already split each "
                          f"step's batch; use --accumulation_steps=1")
    per_replica = cfg.resolved_per_replica_batch()
    if per_replica % cfg.microbatches:
        raise ConfigError(f"--microbatches={cfg.microbatches} does not divide the per-replica "
                          f"batch of {per_replica}; choose a divisor of it")


def _check_compression(cfg):
    try:
        spec = compression.parse(cfg.compression)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if spec.method == "none":
        return
    if cfg.gradient_sync_dtype != "float32":
        raise ConfigError(f"--compression={cfg.compression} and --gradient_sync_dtype="
                          f"{cfg.gradient_sync_dtype} both compress the gradients; give one")
    if kind(cfg.strategy).parameter_servers:
        if spec.method == "bf16":  # the cast before each push
            return
        raise ConfigError(f"--compression={cfg.compression} needs replicas that all-reduce; "
                          f"--strategy={cfg.strategy} pushes gradients to its parameter "
                          f"servers and takes --compression=bf16 only")
    if cfg.strategy not in COMPRESSIBLE:
        raise ConfigError(f"--compression={cfg.compression} applies to --strategy="
                          f"{' or '.join(COMPRESSIBLE)} (replicas that all-reduce), not "
                          f"--strategy={cfg.strategy}")
    if cfg.replicas_in_sync() < 2:
        raise ConfigError(f"--compression={cfg.compression} needs 2 or more replicas in sync; "
                          f"--strategy={cfg.strategy} has one here")


def _check_straggler_schedule(cfg):
    if not cfg.straggler_schedule:
        return
    cfg.straggler_delays()  # parsed, or one line
    if cfg.straggler_delay_ms:
        raise ConfigError(f"--straggler_schedule={cfg.straggler_schedule} already gives the "
                          f"delay: drop --straggler_delay_ms={cfg.straggler_delay_ms:g}")
    # --strategy=auto: checked again once the plan chose (--adapt drops it from a choice of
    # one process: the slow host is not in it)
    if cfg.strategy not in (*MULTI_WORKER, AUTO):
        raise ConfigError(f"--straggler_schedule={cfg.straggler_schedule} slows a worker of a "
                          f"cluster (--strategy={' or '.join(MULTI_WORKER)}), not --strategy="
                          f"{cfg.strategy}")


def _check_zero(cfg):
    if not cfg.zero:
        return
    if cfg.strategy != "multi_worker_mirrored":
        raise ConfigError(f"--zero={cfg.zero} shards the optimizer over MWMS workers; use "
                          f"--strategy=multi_worker_mirrored, not --strategy={cfg.strategy}")
    if cfg.num_workers < 2:
        raise ConfigError(f"--zero={cfg.zero} needs 2 or more workers to shard over; "
                          f"--num_workers={cfg.num_workers}")
    for name, plain in (("compression", "none"), ("gradient_sync_dtype", "float32"),
                        ("bytes_per_pack", 0)):
        given = getattr(cfg, name)
        if given != plain:
            raise ConfigError(f"--zero={cfg.zero} reduce-scatters the gradients itself, in "
                              f"the model's dtype; --{name}={given} cannot go with it (use "
                              f"--{name}={plain})")


def validate(cfg):
    """Raises ConfigError for the first bad value, naming it and what is allowed: first each
    field's own rule (its choices and bound, declared with it in run_config.py), then the rules
    that tie fields together, each an `if` below."""
    check_fields(cfg)
    check_model(cfg.model)
    check_dataset(cfg.dataset)
    if cfg.model_weights == "saved" and not cfg.model.endswith(".keras"):
        raise ConfigError(f"--model_weights=saved needs --model=PATH.keras (got --model="
                          f"{cfg.model})")
    _check_pipeline(cfg)
    if bool(cfg.fail_task) != bool(cfg.fail_at_step):
        raise ConfigError(f"--fail_task={cfg.fail_task!r} and --fail_at_step={cfg.fail_at_step} "
                          f"go together: give both or neither")
    if cfg.fail_task and not re.fullmatch(r"(chief|worker|ps):\d+", cfg.fail_task):
        raise ConfigError(f"--fail_task={cfg.fail_task!r} is not a task name; expected "
                          f"worker:N, ps:N or chief:0")
    if cfg.fail_task and cfg.strategy not in MULTI_WORKER:
        raise ConfigError(f"--fail_task={cfg.fail_task} needs a cluster (--strategy="
                          f"{' or '.join(MULTI_WORKER)}), not --strategy={cfg.strategy}")
    _check_straggler_schedule(cfg)
    if bool(cfg.straggler_delay_ms) != bool(cfg.straggler_task and not cfg.straggler_schedule):
        raise ConfigError(f"--straggler_task={cfg.straggler_task!r} and --straggler_delay_ms="
                          f"{cfg.straggler_delay_ms:g} go together: give both or neither (or "
                          f"--straggler_schedule, whose straggler is the last worker)")
    if cfg.straggler_task:
        match = re.fullmatch(r"worker:(\d+)", cfg.straggler_task)
        if not match:
            raise ConfigError(f"--straggler_task={cfg.straggler_task!r} is not a worker; expected "
                              f"worker:N with N < --num_workers")
        if cfg.strategy not in MULTI_WORKER:
            raise ConfigError(f"--straggler_task={cfg.straggler_task} needs a cluster (--strategy="
                              f"{' or '.join(MULTI_WORKER)}), not --strategy={cfg.strategy}")
        if int(match.group(1)) >= cfg.num_workers:
            raise ConfigError(f"--straggler_task={cfg.straggler_task} is not in the cluster: "
                              f"workers are worker:0..worker:{cfg.num_workers - 1}")
        if not cfg.straggler_schedule and not 0 < cfg.straggler_delay_ms <= 60_000:
            raise ConfigError(f"--straggler_delay_ms={cfg.straggler_delay_ms:g} must be in "
                              f"(0, 60000]")
    _check_compression(cfg)
    _check_zero(cfg)
    if cfg.collective != "auto" and not kind(cfg.strategy).all_reduce:
        raise ConfigError(f"--collective={cfg.collective} applies to --strategy="
                          f"{' or '.join(ALL_REDUCE)}, not --strategy={cfg.strategy}")
    if cfg.cross_device_ops != "auto" and cfg.strategy not in MIRRORED:
        raise ConfigError(f"--cross_device_ops={cfg.cross_device_ops} applies to --strategy="
                          f"{' or '.join(MIRRORED)}, not --strategy={cfg.strategy}")
    if cfg.bytes_per_pack and not kind(cfg.strategy).all_reduce:
        raise ConfigError(f"--bytes_per_pack={cfg.bytes_per_pack} applies to the all-reduce "
                          f"workers of --strategy={' or '.join(ALL_REDUCE)}, not --strategy="
                          f"{cfg.strategy}")
    if cfg.bytes_per_pack and compression.parse(cfg.compression).reduces:
        raise ConfigError(f"--bytes_per_pack={cfg.bytes_per_pack} packs the plain all-reduce; "
                          f"--compression={cfg.compression} exchanges its own forms: give one")
    if cfg.ps_shards > 1:
        # Checked on TF 2.21 + Keras 3.15: a Keras 3 variable wrapping a tf ShardedVariable has
        # no `.handle`, so tf.GradientTape fails inside the train step. Refuse it up front.
        raise ConfigError(f"--ps_shards={cfg.ps_shards} is not supported with Keras 3 models "
                          f"(Keras variables cannot wrap a sharded variable); use --ps_shards=0")
    if cfg.strategy not in LOCAL_REPLICAS and cfg.num_replicas != 1:
        raise ConfigError(f"--num_replicas={cfg.num_replicas} applies to --strategy="
                          f"{' or '.join(LOCAL_REPLICAS)} only (got --strategy={cfg.strategy})")
    if cfg.tpu and kind(cfg.strategy).accelerator != "tpu":
        raise ConfigError(f"--tpu={cfg.tpu} applies to --strategy=tpu only (got --strategy="
                          f"{cfg.strategy})")
    if cfg.strategy not in MULTI_WORKER and cfg.num_workers != 1:
        raise ConfigError(f"--num_workers={cfg.num_workers} needs a multi-worker strategy "
                          f"({', '.join(MULTI_WORKER)}), not --strategy={cfg.strategy}")
    if cfg.strategy in PARAMETER_SERVERS and cfg.num_ps < 1:
        raise ConfigError(f"--num_ps={cfg.num_ps}: --strategy={cfg.strategy} needs --num_ps >= 1")
    if cfg.strategy not in PARAMETER_SERVERS and (cfg.num_ps or cfg.ps_shards):
        raise ConfigError(f"--num_ps/--ps_shards apply to --strategy="
                          f"{' or '.join(PARAMETER_SERVERS)} only (got --strategy={cfg.strategy})")
    if cfg.ps_shards > max(cfg.num_ps, 1):
        raise ConfigError(f"--ps_shards={cfg.ps_shards} exceeds --num_ps={cfg.num_ps}")
    replicas = cfg.replicas_in_sync()
    if cfg.global_batch_size and cfg.global_batch_size % replicas:
        raise ConfigError(f"--global_batch_size={cfg.global_batch_size} is not divisible by the "
                          f"{replicas} replicas in sync")
    # MODULE:FUNCTION datasets say their sizes when called (checked in the task).
    info = npz_data.info(cfg.dataset) if cfg.dataset.endswith(".npz") else \
        DATASETS.get(cfg.dataset)
    if cfg.steps_per_epoch() < 1:
        raise ConfigError(f"--train_examples={cfg.train_examples} is smaller than one step's batch "
                          f"({cfg.step_batch()}: global batch {cfg.resolved_global_batch()} x "
                          f"--accumulation_steps={cfg.accumulation_steps})")
    if info and info.train_size and cfg.train_examples > info.train_size:
        raise ConfigError(f"--train_examples={cfg.train_examples} exceeds the {info.train_size} "
                          f"training examples of {cfg.dataset}")
    if info and info.eval_size and cfg.eval_examples > info.eval_size:
        raise ConfigError(f"--eval_examples={cfg.eval_examples} exceeds the {info.eval_size} "
                          f"eval examples of {cfg.dataset}")
    tokens = DATASETS.get(cfg.dataset) is not None and DATASETS[cfg.dataset].vocab_size > 0
    if cfg.model in TOKEN_MODELS and cfg.dataset in DATASETS and not tokens:
        token_sets = [name for name, i in DATASETS.items() if i.vocab_size]
        raise ConfigError(f"--model={cfg.model} reads token ids: use --dataset="
                          f"{' or '.join(token_sets)} (or your own integer features), not "
                          f"--dataset={cfg.dataset}")
    if cfg.model in NEXT_TOKEN_MODELS and tokens and \
            DATASETS[cfg.dataset].vocab_size != DATASETS[cfg.dataset].num_classes:
        next_token = [n for n, i in DATASETS.items() if i.vocab_size and
                      i.vocab_size == i.num_classes]
        raise ConfigError(f"--model={cfg.model} predicts the next token (its classes are the "
                          f"vocabulary): use --dataset={' or '.join(next_token)}, not --dataset="
                          f"{cfg.dataset} ({DATASETS[cfg.dataset].num_classes} classes, "
                          f"{DATASETS[cfg.dataset].vocab_size} tokens)")
    if tokens and cfg.model in MODELS and cfg.model not in TOKEN_MODELS:
        raise ConfigError(f"--dataset={cfg.dataset} is token ids: use --model="
                          f"{' or '.join(TOKEN_MODELS)} (or your own model), not --model="
                          f"{cfg.model}")
    if cfg.warmup_epochs > cfg.epochs:
        raise ConfigError(f"--warmup_epochs={cfg.warmup_epochs} exceeds --epochs={cfg.epochs}")
    if cfg.sync_batchnorm and cfg.model not in ("cnn", "resnet"):
        raise ConfigError(f"--sync_batchnorm needs --model=cnn or resnet (got --model="
                          f"{cfg.model})")
    check_writable_dir("results_dir", cfg.results_dir)
    if cfg.profile_steps:
        if not re.fullmatch(r"\d+,\d+", cfg.profile_steps):
            raise ConfigError(f"--profile_steps={cfg.profile_steps!r} must be FIRST,LAST (global "
                              f"steps, e.g. 20,30)")
        first, last = cfg.profile_range()
        total = cfg.steps_per_epoch() * cfg.epochs
        if not 1 <= first <= last <= total:
            raise ConfigError(f"--profile_steps={cfg.profile_steps} must satisfy 1 <= FIRST <= "
                              f"LAST <= {total} (the run's steps)")
    usable = len(os.sched_getaffinity(0))
    if cfg.pin_cores > usable:
        raise ConfigError(f"--pin_cores={cfg.pin_cores} exceeds the {usable} CPUs this process may "
                          f"use; choose 1..{usable} (or 0: no pinning)")
    if cfg.checkpoint_every_steps and not cfg.checkpoint_dir:
        raise ConfigError(f"--checkpoint_every_steps={cfg.checkpoint_every_steps} needs "
                          f"--checkpoint_dir")
    if cfg.checkpoint_dir:
        check_writable_dir("checkpoint_dir", cfg.checkpoint_dir)
        # a checkpoint written otherwise (--zero, the tensor split, the dataset): before any
        # task starts
        line = checkpoint_layout.refusal(cfg.checkpoint_dir,
                                         cfg.num_workers if cfg.zero else None,
                                         cfg.tensor_parallel, cfg.dataset)
        if line:
            raise ConfigError(line)

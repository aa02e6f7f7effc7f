"""What a record is in a comparison: its setting, its role, its N, whether it ran in one process
and whether a straggler was injected. Summary rows, the straggler table, the scaling model and
the plots all group records through these functions, so they cannot disagree on what is the
"same setting".

A setting is the *requested* flags from `record["config"]`, not the counts the trainer derived
from them: `--train_examples=5000` trains 4992 examples per epoch on one device (78 batches of
64) but 4608 on 8 replicas (9 batches of 512), and `--global_batch_size=256` gives 256 per
replica on one device but 32 on 8. Keyed on the derived counts, those runs would lose their
baseline; the derived counts stay in the rows as data.
"""
from strategies import PIPELINED, kind

SETTING_KEYS = ("model", "dataset", "train_examples", "batch_size_per_replica",
                "global_batch_size", "epochs", "steps_per_execution", "optimizer", "learning_rate",
                "lr_scaling", "warmup_epochs", "gradient_sync_dtype", "accumulation_steps")

BASELINE_RUN = "baseline"  # one_device, 1 thread per task: one worker's share of the machine
REFERENCE_RUN = "hardware_reference"  # one_device using every core
ENGINE_FLOOR = "engine_floor"  # a plain TF loop without the toolkit: engine_floor/ (1 thread),
# engine_floor_all/ (every core), engine_floor_shared/ (K loops at once: experiments.comparison.sharing)
ENGINE_FLOOR_RUNS = ("engine_floor", "engine_floor_all", "engine_floor_shared")
STRAGGLER_PREFIX = "straggler-"
REDUCERS_PREFIX = "reducers-"
ADAPTIVE_PREFIX = "adaptive-"  # the adaptive experiment's cells (results/report/adaptive.py)

# Records whose config lacks a flag (old records, hand-made ones) fall back to the top level only
# where it holds the requested value or the same thing: train_examples is rounded but is the
# best there is; the top-level global_batch_size and learning_rate are derived per N (replicas x
# batch, scaled LR), so they would split a sweep and are left unknown instead.
_TOP_LEVEL = {"model": "model", "dataset": "dataset", "train_examples": "train_examples",
              "batch_size_per_replica": "batch_size_per_replica"}
# Flags that did not exist in older records: those runs behaved as the flag's default.
_BEFORE_FLAG = {"steps_per_execution": 1, "gradient_sync_dtype": "float32", "accumulation_steps": 1}


def setting_of(record):
    """The record's setting as a tuple in SETTING_KEYS order (None where unknown)."""
    config = record.get("config") or {}
    out = []
    for key in SETTING_KEYS:
        if config.get(key) is not None:
            out.append(config[key])
        elif key in _TOP_LEVEL:
            out.append(record.get(_TOP_LEVEL[key]))
        elif key == "epochs":
            out.append(len(record["epochs"]))
        elif config:
            out.append(_BEFORE_FLAG.get(key))
        else:
            out.append(None)
    return tuple(out)


def setting_of_row(row):
    """The setting of a summary / straggler / projection row (they carry SETTING_KEYS)."""
    return tuple(row[k] for k in SETTING_KEYS)


def sort_key(setting):
    """Sorts settings that may hold None next to numbers or strings."""
    return tuple((v is None, v if v is not None else 0) for v in setting)


def setting_title(setting):
    """'cnn, synthetic, 1024 training examples, 64 per replica' (or 'global batch 256'; and
    ', K micro-batches per update' when accumulating)."""
    s = dict(zip(SETTING_KEYS, setting))
    batch = f"global batch {s['global_batch_size']}" if s["global_batch_size"] else \
        f"{s['batch_size_per_replica']} per replica"
    # K > 1 is named here too: a K sweep has one section per K, and they must not read alike.
    accumulation = f", {s['accumulation_steps']} micro-batches per update" \
        if (s.get("accumulation_steps") or 1) > 1 else ""
    return (f"{s['model']}, {s['dataset']}, {s['train_examples']} training examples, {batch}"
            f"{accumulation}")


def setting_details(setting):
    """The rest of the setting, for a line under the title."""
    s = dict(zip(SETTING_KEYS, setting))
    parts = [f"{s['epochs']} epochs" if s["epochs"] is not None else None,
             f"{s['steps_per_execution']} step(s) per call" if s["steps_per_execution"] else None,
             f"optimizer {s['optimizer']}" if s["optimizer"] else None,
             f"learning rate {s['learning_rate']:g}" if s["learning_rate"] is not None else None,
             f"LR scaling {s['lr_scaling']}" if s["lr_scaling"] else None,
             f"{s['warmup_epochs']:g} warm-up epochs" if s["warmup_epochs"] else None,
             f"gradients synchronized in {s['gradient_sync_dtype']}"
             if s["gradient_sync_dtype"] else None,
             f"{s['accumulation_steps']} micro-batches per update"
             if (s["accumulation_steps"] or 1) > 1 else None]
    return ", ".join(p for p in parts if p)


def workers_of(record):
    """N: local replicas of a one-process strategy, workers of a cluster, the plain loops run at
    once by the sharing calibration, else 1."""
    strategy_kind = kind(record["strategy"])
    if strategy_kind.local_replicas:
        return record["num_replicas_in_sync"]
    if strategy_kind.multi_worker:
        return record["num_workers"]
    if record["strategy"] == ENGINE_FLOOR and record.get("sharing"):
        return record["sharing"].get("processes") or 1
    return 1


def delay_of(record):
    """The straggler delay injected into a record's run, in ms per step (0: none)."""
    return float((record.get("straggler") or {}).get("delay_ms") or 0.0)


def is_straggler_run(record):
    """A run of the straggler experiment, including its undisturbed (delay 0) runs: they belong
    to straggler.csv, not to the summary's medians."""
    return ((record.get("run_name") or "").startswith(STRAGGLER_PREFIX)
            or bool(record.get("straggler"))
            or bool((record.get("config") or {}).get("straggler_task")))


def bandwidth_of(record):
    """The emulated bandwidth a run's cluster had, Gbit/s (0: the real loopback)."""
    return float((record.get("network") or {}).get("emulated_gbps") or 0.0)


def is_network_run(record):
    """A run on an emulated network (or one that asked for it): network.py's, not the
    summary's nor the scaling fit's (their network is the machine's own)."""
    return bool(record.get("network"))


def reducer_of(record):
    """How the run synchronized its gradients besides plain: its --compression form,
    "packs:BYTES" for a packed all-reduce (--bytes_per_pack), "zero:STAGE" for a sharded
    optimizer (--zero), else "none" (records from before any of them too)."""
    config = record.get("config") or {}
    if config.get("zero"):
        return f"zero:{config['zero']}"
    if (config.get("compression") or "none") != "none":
        return config["compression"]
    return f"packs:{config['bytes_per_pack']}" if config.get("bytes_per_pack") else "none"


def is_reducer_run(record):
    """A cell of the reducers experiment, plain ones too, or any run whose gradients went
    through a compressed exchange or in packs (reducer_of): reducers.py's table, not the
    summary's nor any fit's (their synchronization is not the plain one)."""
    return (record.get("run_name") or "").startswith(REDUCERS_PREFIX) or \
        reducer_of(record) != "none"


def is_adaptive_run(record):
    """A cell of the adaptive experiment, or any --adapt run: results/report/adaptive.py's table
    only (its epochs ran under several configurations and networks)."""
    return (record.get("run_name") or "").startswith(ADAPTIVE_PREFIX) or \
        bool(record.get("adapt"))


def unsized(setting):
    """The setting without its train_examples: a collectives cell trains a token epoch of its
    own size on the setting's model and batch."""
    return tuple(None if k == "train_examples" else v for k, v in zip(SETTING_KEYS, setting))


COLLECTIVES_CELL = "collectives-"


def is_collectives_run(record):
    """A collectives cell (run name `collectives-...`; older records: `--comm_sweep`): the
    network experiment's calibration of its synchronization under a shaper, a token epoch of
    training; not a row of the summary."""
    return (record.get("run_name") or "").startswith(COLLECTIVES_CELL) or \
        bool((record.get("config") or {}).get("comm_sweep"))


def is_parallelism_run(record):
    """A pipeline run, or a cell of the parallelism experiment (compare's 'parallel-' cells):
    parallelism.py's table, not the summary's."""
    return record.get("strategy") in PIPELINED or \
        (record.get("run_name") or "").startswith("parallel-")


def repeat_of(record):
    """'r0', 'r1', ... from the comparison cell's run name (experiments/comparison/plan.py names
    each repeat's runs so); None outside a comparison."""
    tail = (record.get("run_name") or "").rsplit("/", 1)[-1]
    return tail if tail.startswith("r") and tail[1:].isdigit() else None


def role_of(record):
    """`engine_floor`, `baseline`, `hardware_reference` or `strategy`, from the comparison cell
    in run_name. An unnamed one_device run at 1 thread (outside a comparison) is what the
    baseline is; other one_device runs are compared like any strategy."""
    cell = (record.get("run_name") or "").split("/")[0]
    if record["strategy"] == ENGINE_FLOOR or cell in ENGINE_FLOOR_RUNS:
        return ENGINE_FLOOR
    if cell == REFERENCE_RUN:
        return REFERENCE_RUN
    if cell == BASELINE_RUN or (kind(record["strategy"]).single_device and not cell
                                and record.get("threads_per_task") == 1):
        return BASELINE_RUN
    return "strategy"


def single_process(strategy, n):
    """Runs in one process: every single-device run, mirrored and central_storage at any N; MWMS
    and the plain loop only at N=1 (PSS always has a coordinator and a parameter server besides
    its workers; N plain loops are N processes; pipelines are compared apart, in
    results/report/parallelism.py)."""
    strategy_kind = kind(strategy)
    if strategy_kind.local_replicas or strategy_kind.single_device:
        return True
    if strategy_kind.all_reduce and not strategy_kind.pipelined or strategy == ENGINE_FLOOR:
        return n == 1
    return False  # PSS, pipelines, and what runs only elsewhere (tpu)


def is_machine_limit(row):
    """A summary row of the sharing calibration: N plain TF loops at once, the machine's limit
    for N workers. A reference, not a setup: no accuracy, step time or superlinear flag."""
    return row["role"] == ENGINE_FLOOR and row["n"] > 1


def label(row):
    """How a summary row is named in the report."""
    threads = row.get("threads_per_task")
    if is_machine_limit(row):
        return (f"engine_floor ({row['n']} plain TF loops at once, {threads} "
                f"thread{'s' * (threads != 1)} each)")
    if row["role"] == ENGINE_FLOOR:
        return f"engine_floor (plain TF loop, {threads} thread{'s' * (threads != 1)})"
    if row["role"] == BASELINE_RUN:
        return "one_device (baseline, 1 thread)" if threads == 1 else \
            f"one_device (baseline, {threads} threads)"
    if row["role"] == REFERENCE_RUN:
        return "one_device (all cores)"
    return f"{row['strategy']} N={row['n']}"

"""The comparison: a single-device baseline, a hardware reference and every strategy, for the same
model, data, per-replica batch and epochs; then the report (summary.csv, report.md, plots).

    python -m experiments.compare                          # default: about 5 minutes on 2 CPUs
    python -m experiments.compare --preset=full            # sweep for real hardware
    python -m experiments.compare --workers=1,2 --models=mlp,cnn --train_examples=4096,16384 \
        --repeats=3 --resume --results_dir=runs/compare
    python -m experiments.compare --experiments=straggler --models=mlp --straggler_delays=0,20,50
    python -m experiments.compare --experiments=network --models=cnn --bandwidths=0.02,0.1,0.5,0
    python -m experiments.compare --preset=zoo --results_dir=runs/zoo   # ~10 min on 2 vCPUs
    python -m experiments.compare --preset=zoo --dry_run                 # the runs it would make
    python -m experiments.compare --strategies=multi_worker_mirrored --workers=2 \
        --accumulation_steps=1,2,4 --models=cnn --train_examples=4096   # communication share vs K
    python -m experiments.compare --preset=parallelism --results_dir=runs/parallelism  # ~6-7 min
    python -m experiments.compare --models=examples.two_branch:build_model \
        --dataset=examples.two_branch:make_dataset --train_examples=4096   # your model and data

The zoo preset compares the strategies at N=2 on three models that pull the answer different
ways: resnet (ResNet-20 on synthetic_cifar: compute-bound), wide_mlp (40 MB of gradients per
step on synthetic: communication-bound) and embedding (a 100,000-row table on synthetic_tokens:
sparse gradients), each against one process on 1 thread (the baseline) and on every core (the
reference). Its report adds a per-model table and plot (zoo.png): which strategy wins and by how
much, gradient bytes sent per step and the communication share of each strategy.

The parallelism preset runs, per model (the CNN and wide_mlp from the zoo) and at one global batch
(2 x --batch_size_per_replica): one device, data parallel (MWMS, 2 workers), the model split into
2 pipeline stages with 1 and with 4 micro-batches (model_parallel), and 2 MWMS workers each
running that 4-micro-batch pipeline (hybrid), every configuration on the same 2 x
--threads_per_worker cores. Its report adds a table and parallelism.png (results/parallelism.py):
time, accuracy, peak memory per device, communication share and the pipeline bubble measured
against the GPipe formula.

Every run is an ordinary `python -m experiments.run` record tagged with its cell (`--run_name`), so
an interrupted comparison continues with `--resume` (cells already recorded are skipped).
"""
import os
import subprocess
import sys
import threading
import time

from experiments import tf_settings

tf_settings.apply()  # before anything imports TensorFlow; every run it starts inherits these

from absl import app, flags  # noqa: E402

from experiments import network_flags  # noqa: E402
from experiments.cli import bad_input, parse_flags  # noqa: E402
from experiments.config import ConfigError, check_dataset, check_model  # noqa: E402

from models import MODELS  # noqa: E402
from results.records import load_records  # noqa: E402
from strategies import COMPARED, LOCAL_REPLICAS  # noqa: E402
from tf_config.task_output import is_startup_noise  # noqa: E402

PRESETS = {
    # ~3-5 min on 2 vCPUs: 10 runs of the CNN, 4 epochs (3 steady); examples per epoch (at most
    # 16384) sized to --time_budget_min.
    "default": dict(models="cnn", workers="1,2", train_examples="16384", repeats=1, epochs=4),
    "full": dict(models="mlp,cnn", workers="1,2,4,8", train_examples="5000,10000,20000,40000",
                 repeats=3, epochs=5),
    # ~10 min on 2 vCPUs: 15 runs (5 per model), 3 epochs (2 steady) sized per model below.
    "zoo": dict(models="resnet,wide_mlp,embedding", workers="2", train_examples="", repeats=1,
                epochs=3, floors=False),
    # ~6-7 min on 2 vCPUs (measured 6m11s-6m19s): 10 runs (5 per model), 3 epochs (2 steady).
    "parallelism": dict(models="cnn,wide_mlp", workers="2", train_examples="", repeats=1,
                        epochs=3, floors=False, experiments="parallelism"),
}
# The zoo's examples per epoch: a few seconds per steady epoch of each model on 2 vCPUs.
ZOO_SIZES = {"resnet": 1536, "wide_mlp": 3072, "embedding": 8192}
# The dataset each model runs on unless --dataset says otherwise.
MODEL_DATASETS = {"resnet": "synthetic_cifar", "embedding": "synthetic_tokens"}

_PRESET = flags.DEFINE_enum("preset", "default", list(PRESETS), "Sweep size; lists below override.")
_MODELS = flags.DEFINE_list("models", None, f"Models to compare ({', '.join(MODELS)}).")
_WORKERS = flags.DEFINE_list("workers", None, "Worker / replica counts N, e.g. 1,2,4.")
_SIZES = flags.DEFINE_list("train_examples", None, "Training examples per epoch (size sweep).")
_REPEATS = flags.DEFINE_integer("repeats", None, "Runs per configuration.", lower_bound=1)
_EPOCHS = flags.DEFINE_integer("epochs", None, "Epochs per run (>= 2: the first is warm-up).",
                               lower_bound=2)
_STRATEGIES = flags.DEFINE_list("strategies", "mirrored,multi_worker_mirrored,parameter_server",
                                "Strategies to compare against the baseline.")
_NUM_PS = flags.DEFINE_integer("num_ps", 1, "Parameter servers for parameter_server.",
                               lower_bound=1)
_BATCH = flags.DEFINE_integer("batch_size_per_replica", 64, "Per-replica batch.", lower_bound=1)
_DATASET = flags.DEFINE_string("dataset", "synthetic", "Dataset name (see experiments.run); "
                               "when not given, resnet runs on synthetic_cifar and embedding on "
                               "synthetic_tokens.")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "Print the runs the comparison would make and exit.")
_RESULTS_DIR = flags.DEFINE_string("results_dir", "runs/compare", "Records, report and plots "
                                   "(--preset=zoo / parallelism: runs/zoo / runs/parallelism "
                                   "unless given).")
_RESUME = flags.DEFINE_bool("resume", True, "Skip configurations already recorded.")
_TARGET = flags.DEFINE_float("target_accuracy", 0.9, "Eval accuracy for time-to-accuracy.")
_EXPERIMENTS = flags.DEFINE_list("experiments", "scaling",
                                 "scaling: baseline, reference and every strategy per N; "
                                 "straggler: MWMS and PSS with one worker slowed by each delay; "
                                 "network: MWMS and PSS at N=2 under each --bandwidths; "
                                 "parallelism: one device, data, model and hybrid parallelism.")
_EXPERIMENT_NAMES = ("scaling", "straggler", "network", "parallelism")
_BANDWIDTHS = flags.DEFINE_list("bandwidths", "0.02,0.1,0.5,0", "Network experiment: emulated "
                                "bandwidths (Gbit/s, shared by the cluster's links; 0: the real "
                                "loopback, which the model is fitted to).")
_DELAYS = flags.DEFINE_list("straggler_delays", "0,25,50,100",
                            "Straggler experiment: per-step delays (ms) of the last worker.")
_STRAGGLER_WORKERS = flags.DEFINE_integer("straggler_workers", 2,
                                          "Straggler experiment: workers per cluster.",
                                          lower_bound=2)
_STEPS_PER_EXECUTION = flags.DEFINE_integer(
    "steps_per_execution", 8, "Training steps per tf.function call in every run (same for "
    "every strategy; 8 measured 5-10% faster than 1 here).", lower_bound=1)
_RUN_TIMEOUT = flags.DEFINE_float("run_timeout", 1800, "Seconds before one run is abandoned.")
_THREADS = flags.DEFINE_integer("threads_per_worker", 1, "Intra-op threads of every worker of every "
                                "strategy at every N, and of the baseline (mirrored: N x this in "
                                "its one process). The hardware reference and engine_floor_all "
                                "use all cores.", lower_bound=1)
_VERBOSE = flags.DEFINE_bool("verbose", False, "Show TensorFlow's start-up messages of every run.")
_BUDGET = flags.DEFINE_float("time_budget_min", 5.0, "Default preset without --train_examples: "
                              "size the epochs from a short calibration run (the plain loop, 1 "
                              "thread) so the whole comparison takes about this long (0: off).",
                              lower_bound=0.0)
_ACCUMULATION = flags.DEFINE_list("accumulation_steps", "1", "Sweep of experiments.run's "
                                  "--accumulation_steps (K micro-batches per update and per "
                                  "synchronization) over every cell but the engine floors; each K "
                                  "is a setting of its own in the report.")
_PIN = flags.DEFINE_bool("pin_cores", False, "Pin each configuration to the cores its workers "
                         "get (N workers x threads; ps and chief inside that set): N workers on "
                         "N cores, even on a bigger machine.")


def _ints(name, values, minimum=1):
    try:
        out = [int(v) for v in values]
    except ValueError:
        raise ValueError(f"--{name}={','.join(values)} must be a comma-separated list of integers")
    if not out or min(out) < minimum:
        raise ValueError(f"--{name}={','.join(values)} must list integers >= {minimum}")
    return out


def _strategy_flags(strategy, n, num_ps, threads):
    """Every strategy at N gets `threads` per worker (N workers = N x threads cores of work)."""
    if strategy in LOCAL_REPLICAS:  # one process feeding N replicas: the cores of N workers
        return [f"--strategy={strategy}", f"--num_replicas={n}", f"--threads={n * threads}"]
    if strategy == "multi_worker_mirrored":
        return [f"--strategy={strategy}", f"--num_workers={n}", f"--threads={threads}",
                f"--threads_per_worker={threads}"]
    return [f"--strategy={strategy}", f"--num_workers={n}", f"--num_ps={num_ps}",
            f"--threads_per_worker={threads}"]


def _parallelism_cells(threads, batch):
    """One device, data parallel, model parallel (S=2, M=1 and 4) and hybrid at one global batch
    (2 x batch) on the same 2 x threads cores; stages balanced by measured time (the GPipe
    bubble formula assumes equal stages). (name, flags, cores) each."""
    same = [f"--global_batch_size={2 * batch}"]
    pipe = ["--num_stages=2", "--stage_cost=time"]
    return [
        ("parallel-one_device", ["--strategy=one_device", f"--threads={2 * threads}", *same]),
        ("parallel-mwms-n2", [*_strategy_flags("multi_worker_mirrored", 2, 0, threads), *same]),
        ("parallel-model_parallel-s2-m1", ["--strategy=model_parallel", *pipe,
                                           "--microbatches=1", f"--threads={2 * threads}",
                                           *same]),
        ("parallel-model_parallel-s2-m4", ["--strategy=model_parallel", *pipe,
                                           "--microbatches=4", f"--threads={2 * threads}",
                                           *same]),
        ("parallel-hybrid-n2-s2-m4", ["--strategy=hybrid", "--num_workers=2", *pipe,
                                      "--microbatches=4", f"--threads={threads}",
                                      f"--threads_per_worker={threads}", *same]),
    ]


def _pinned(run_flags, cores, available):
    """--pin_cores for a cell that should use `cores` cores (0: all of them)."""
    return [*run_flags, f"--pin_cores={min(cores or available, available)}"]


def plan(models, workers, sizes, strategies, num_ps, repeats, experiments=("scaling",),
         delays=(), straggler_workers=2, threads=1, pin_cores=False, available_cores=None,
         bandwidths=(), floors=True, datasets=None, accumulation=(1,), batch=64):
    """[(run_name, [module, flags...])] in execution order. `threads`: intra-op threads of every
    worker (and of the baseline); pin_cores: each cell pinned to the cores its workers get.
    accumulation: --accumulation_steps values, every cell run at each (K=1 keeps the names
    without a K, so older results directories resume; the plain-loop floors run at K=1 only).
    sizes: a list for every model, or {model: list}; floors: the engine-floor cells;
    datasets: {model: dataset} (each run gets --dataset=...; None: the runs' common flags say);
    batch: the per-replica batch (the parallelism cells hold 2 x batch as the global batch)."""
    available = available_cores or len(os.sched_getaffinity(0))
    run, floor, sharing = "experiments.run", "experiments.bench.floor", \
        "experiments.bench.sharing"
    runs = []
    for model in models:
        data = [f"--dataset={datasets[model]}"] if datasets else []
        for size in (sizes[model] if isinstance(sizes, dict) else sizes):
            cells = []  # (name, module, flags, cores the cell should use: 0 = all)
            if "scaling" in experiments:
                if floors:
                    cells += [("engine_floor", floor, [f"--threads={threads}"], threads),
                              ("engine_floor_all", floor, ["--threads=0"], 0)]
                cells += [("baseline", run, ["--strategy=one_device", f"--threads={threads}"],
                           threads),
                          ("hardware_reference", run, ["--strategy=one_device", "--threads=0"], 0)]
                for n in workers:
                    if floors and n == 2 and threads and any(
                            s not in LOCAL_REPLICAS for s in strategies):
                        # Right before the 2-worker clusters: how this machine shares its cores
                        # between two such workers, for the scaling model's N=2 prediction.
                        cells.append(("engine_floor_shared", sharing,
                                      [f"--threads={threads}", "--processes=2"], 2 * threads))
                    cells += [(f"{s}-n{n}", run, _strategy_flags(s, n, num_ps, threads),
                               n * threads) for s in strategies]
            if "straggler" in experiments:
                n = straggler_workers
                for s in (s for s in strategies if s not in LOCAL_REPLICAS):
                    for d in delays:
                        slow = [f"--straggler_task=worker:{n - 1}",
                                f"--straggler_delay_ms={d}"] if d else []
                        cells.append((f"straggler-{s}-n{n}-d{d}", run,
                                      _strategy_flags(s, n, num_ps, threads) + slow,
                                      n * threads))
            if "network" in experiments:
                # N=1 and the real loopback (b=0) give the model its t_comp and t_sync; the
                # shaped N=2 runs are what it must predict (results/network.py).
                for s in (s for s in strategies if s not in LOCAL_REPLICAS):
                    cells.append((f"network-{s}-n1", run, _strategy_flags(s, 1, num_ps, threads),
                                  threads))
                    for b in bandwidths:
                        shaped = [f"--emulate_bandwidth_gbps={b:g}"] if b else []
                        cells.append((f"network-{s}-n2-b{b:g}", run,
                                      _strategy_flags(s, 2, num_ps, threads) + shaped,
                                      2 * threads))
            if "parallelism" in experiments:
                cells += [(name, run, extra, 2 * threads)
                          for name, extra in _parallelism_cells(threads, batch)]
            for k in accumulation:
                for repeat in range(repeats):
                    for cell, module, extra, cores in cells:
                        if k != 1 and module in (floor, sharing):  # plain loops: K=1 only
                            continue
                        name = f"{cell}/{model}/{size}/" + (f"k{k}/" if k != 1 else "") + \
                            f"r{repeat}"
                        extra = _pinned(extra, cores, available) if pin_cores else extra
                        extra = [*extra, f"--accumulation_steps={k}"] if k != 1 else extra
                        runs.append((name, [module, f"--model={model}", f"--train_examples={size}",
                                            *data, *extra]))
    return runs


# Per-run cost beyond the epochs (start-up, tracing, evaluation, probe), as a share of the
# calibration run's own overhead: a local cluster starts several processes.
_CLUSTER_STARTUP_FACTOR = 1.5
_SIZE_QUANTUM = 1024  # the default global batches (64 x N, N <= 2) x 8 steps per call


def calibrated_size(budget_s, runs, epochs, rate, overhead_s, largest):
    """Examples per epoch so that `runs` runs of `epochs` epochs fit in `budget_s`, each run
    costing `overhead_s` plus its epochs at `rate` examples/s (the plain loop at 1 thread: the
    slowest any cell computes). Rounded down to _SIZE_QUANTUM, within [_SIZE_QUANTUM, largest]."""
    per_epoch_s = (budget_s - runs * overhead_s * _CLUSTER_STARTUP_FACTOR) / (runs * epochs)
    size = int(per_epoch_s * rate) // _SIZE_QUANTUM * _SIZE_QUANTUM
    return max(_SIZE_QUANTUM, min(largest, size))


def _calibrate(model, epochs_planned, runs, budget_s, largest, threads):
    """Times the plain loop briefly on this machine; returns the sized examples per epoch."""
    from experiments.bench.runs import run_record

    record, wall = run_record([f"--model={model}", "--epochs=2",
                               f"--train_examples={_SIZE_QUANTUM * 2}", f"--threads={threads}"],
                              "experiments.bench.floor")
    rate = record["steady_state"]["examples_per_sec"]["median"]
    overhead = max(0.0, wall - sum(e["time_s"] for e in record["epochs"][1:]))
    size = calibrated_size(budget_s, runs, epochs_planned, rate, overhead, largest)
    print(f"compare: calibration: the plain loop runs {model} at {rate:.0f} examples/s on "
          f"{threads} thread(s), {overhead:.1f} s per run besides epochs -> {size} examples per "
          f"epoch for {runs} runs in about {budget_s / 60:g} min (--time_budget_min; "
          f"--train_examples to choose)", flush=True)
    return size


def _run(command, timeout, verbose):
    """Runs one cell, passing its output on without TensorFlow's start-up chatter (unless
    verbose). Returns its exit code, or "timeout"."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace")

    def pump():
        for line in proc.stdout:
            if verbose or not is_startup_noise(line):
                sys.stdout.write(line)
                sys.stdout.flush()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:  # the child's launcher stops its own cluster on SIGKILL
        proc.kill()
        proc.wait()
        code = "timeout"
    reader.join(timeout=5)
    return code


def _bandwidths(values):
    out = []
    for v in values:
        try:
            b = float(v)
        except ValueError:
            b = -1.0
        if not 0 <= b <= 1000:
            raise ValueError(f"--bandwidths: {v!r} is not a bandwidth in Gbit/s (0..1000; 0: the "
                             "real loopback)")
        out.append(b)
    if out and 0.0 not in out:
        raise ValueError("--bandwidths needs 0 (the real loopback): the model is fitted to it")
    return out


def size_started(records, model):
    """The examples per epoch the comparison in `records` started with for `model` (the latest
    record's), or None."""
    sizes = [r["config"]["train_examples"] for r in records if r["model"] == model]
    return sizes[-1] if sizes else None


def same_run(record, name, run_flags):
    """A cell counts as done only if recorded under its name with every flag it would be run
    with (threads, pinning, epochs, batch, ...), not just the same name."""
    if record.get("run_name") != name:
        return False
    # The same TensorFlow settings too: a record from before they were set (or under another
    # TF_ENABLE_ONEDNN_OPTS) ran other CPU kernels, and its figures are not this run's.
    if (record.get("environment") or {}).get("onednn_opts", "unrecorded") != \
            os.environ.get("TF_ENABLE_ONEDNN_OPTS"):
        return False
    config = record.get("config") or {}
    for flag in run_flags:
        key, _, value = flag[2:].partition("=")
        recorded = config.get(key)
        if isinstance(recorded, float):  # "--straggler_delay_ms=50" was recorded as 50.0
            recorded, value = recorded, float(value)
        if recorded is None or str(recorded) != str(value):
            return False
    return True


def main(argv):
    if len(argv) > 1:
        bad_input(f"unexpected arguments {argv[1:]}; all options are --flags")
    tf_settings.show_startup_messages(_VERBOSE.value)
    preset = PRESETS[_PRESET.value]
    try:
        models = _MODELS.value or preset["models"].split(",")
        for model in models:  # built-in names, or your MODULE:FUNCTION / PATH.keras
            if model not in MODELS and not (":" in model or model.endswith(".keras")):
                raise ValueError(f"--models={','.join(models)}: {model!r} is not valid; choose "
                                 f"from {', '.join(MODELS)}, or MODULE:FUNCTION, or PATH.keras")
            check_model(model)
        if _DATASET.present:
            check_dataset(_DATASET.value)
        strategies = _STRATEGIES.value
        bad = [s for s in strategies if s not in COMPARED]
        if bad:
            raise ValueError(f"--strategies: {bad[0]!r} is not valid; choose from "
                             f"{', '.join(COMPARED)}")
        experiments = _EXPERIMENTS.value if _EXPERIMENTS.present else \
            preset.get("experiments", ",".join(_EXPERIMENTS.value)).split(",")
        bad = [e for e in experiments if e not in _EXPERIMENT_NAMES]
        if bad or not experiments:
            raise ValueError(f"--experiments={','.join(experiments)}: choose from "
                             f"{', '.join(_EXPERIMENT_NAMES)}")
        for experiment in ("straggler", "network"):
            if experiment in experiments and set(strategies) <= set(LOCAL_REPLICAS):
                raise ValueError(f"--experiments={experiment} needs multi_worker_mirrored or "
                                 "parameter_server in --strategies")
        bandwidths = _bandwidths(_BANDWIDTHS.value)
        delays = _ints("straggler_delays", _DELAYS.value, minimum=0)
        workers = _ints("workers", _WORKERS.value or preset["workers"].split(","))
        accumulation = _ints("accumulation_steps", _ACCUMULATION.value)
        if _SIZES.value or preset["train_examples"]:
            sizes = _ints("train_examples", _SIZES.value or preset["train_examples"].split(","))
        else:  # the zoo: each model its own examples per epoch
            sizes = {m: [ZOO_SIZES.get(m, 4096)] for m in models}
    except (ValueError, ConfigError) as e:
        bad_input(e)
    datasets = {m: _DATASET.value if _DATASET.present else MODEL_DATASETS.get(m, _DATASET.value)
                for m in models}
    repeats = _REPEATS.value or preset["repeats"]
    epochs = _EPOCHS.value or preset["epochs"]
    results_dir = _RESULTS_DIR.value if _RESULTS_DIR.present or _PRESET.value in (
        "default", "full") else f"runs/{_PRESET.value}"
    recorded = load_records(results_dir)[0] if _RESUME.value and not _DRY_RUN.value else []
    if _PRESET.value == "default" and not _SIZES.value and _BUDGET.value and len(models) == 1 \
            and not _DRY_RUN.value:  # a dry run prints the preset's sizes, uncalibrated
        # Resuming keeps the size the comparison started with: a new calibration could pick
        # another, and then no cell would match and the report would mix two settings.
        started = size_started(recorded, models[0])
        if started:
            sizes = [started]
            print(f"compare: resuming with the recorded size {sizes[0]} (no calibration; "
                  f"remove {results_dir} to start afresh)", flush=True)
        else:
            count = len(plan(models, workers, sizes, strategies, _NUM_PS.value, repeats,
                             experiments, delays, _STRAGGLER_WORKERS.value,
                             bandwidths=bandwidths, accumulation=accumulation))
            sizes = [_calibrate(models[0], epochs, count, _BUDGET.value * 60, max(sizes),
                                _THREADS.value)]
    runs = plan(models, workers, sizes, strategies, _NUM_PS.value, repeats, experiments,
                delays, _STRAGGLER_WORKERS.value, _THREADS.value, _PIN.value,
                bandwidths=bandwidths, floors=preset.get("floors", True), datasets=datasets,
                accumulation=accumulation, batch=_BATCH.value)
    common = [f"--epochs={epochs}", f"--batch_size_per_replica={_BATCH.value}",
              f"--steps_per_execution={_STEPS_PER_EXECUTION.value}"]
    runs = [(name, [*argv, *common]) for name, argv in runs]
    if _DRY_RUN.value:
        for name, argv in runs:
            print(f"{name}: python -m {' '.join(argv)} --results_dir={results_dir}")
        print(f"compare: {len(runs)} runs planned (--dry_run: none made)")
        return
    todo = [(name, argv) for name, argv in runs
            if not any(same_run(r, name, argv[1:]) for r in recorded)]
    print(f"compare: {len(runs)} runs planned, {len(runs) - len(todo)} already recorded, "
          f"{len(todo)} to go -> {results_dir}", flush=True)
    failures, durations = [], []
    for i, (name, argv) in enumerate(todo, 1):
        eta = ""
        if durations:
            left = sum(durations) / len(durations) * (len(todo) - i + 1)
            eta = f", about {left / 60:.1f} min left"
        print(f"\n=== run {i}/{len(todo)}: {name}{eta}", flush=True)
        start = time.monotonic()
        command = [sys.executable, "-m", *argv, f"--results_dir={results_dir}",
                   f"--run_name={name}"]
        if _VERBOSE.value:
            command.append("--verbose")
        code = _run(command, _RUN_TIMEOUT.value, _VERBOSE.value)
        durations.append(time.monotonic() - start)
        if code != 0:
            failures.append(f"{name} (exit {code})")
            print(f"compare: run {name} FAILED (exit {code}); continuing", flush=True)
    from results.report import build

    paths, problems, notes = build(results_dir, _TARGET.value or None,
                                   network_flags.network())
    for name, why in problems:
        print(f"skipped record {name}: {why}")
    for line in notes:
        print(f"scaling model: {line}")
    print("\n".join(f"wrote {p}" for p in paths))
    if failures:
        print(f"compare: {len(failures)} run(s) failed: {', '.join(failures)}")
        sys.exit(1)


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)

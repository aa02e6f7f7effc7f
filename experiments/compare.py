"""The comparison: a single-device baseline, a hardware reference and every strategy, for the same
model, data, per-replica batch and epochs; then the report (summary.csv, report.md, plots).

    python -m experiments.compare                          # default: about 5 minutes on 2 CPUs
    python -m experiments.compare --preset=full            # sweep for real hardware
    python -m experiments.compare --workers=1,2 --models=mlp,cnn --train_examples=4096,16384 \
        --repeats=3 --resume --results_dir=runs/compare
    python -m experiments.compare --experiments=straggler --models=mlp --straggler_delays=0,20,50
    python -m experiments.compare --experiments=network --models=cnn --bandwidths=0.02,0.1,0.5,0
    python -m experiments.compare --preset=zoo --results_dir=runs/zoo
    python -m experiments.compare --preset=zoo --dry_run                 # the runs it would make
    python -m experiments.compare --strategies=multi_worker_mirrored --workers=2 \
        --accumulation_steps=1,2,4 --models=cnn --train_examples=4096   # communication share vs K
    python -m experiments.compare --preset=parallelism --results_dir=runs/parallelism
    python -m experiments.compare --models=examples.two_branch:build_model \
        --dataset=examples.two_branch:make_dataset --train_examples=4096   # your model and data

The zoo preset compares the strategies at N=2 on three models that pull the answer different
ways: resnet (ResNet-20 on synthetic_cifar: compute-bound), wide_mlp (40 MB of gradients per
step on synthetic: communication-bound) and embedding (a 100,000-row table on synthetic_tokens:
sparse gradients), each against one process on 1 thread (the baseline) and on every core (the
reference). Its report adds a per-model table and plot (zoo.png): which strategy wins and by how
much, gradient bytes sent per step and the communication share of each strategy.

The parallelism preset runs, per model (the CNN and wide_mlp from the zoo) and at one global batch
(2 x --batch_size_per_replica): one device, data parallel (MWMS, 2 workers), the model split into 2
pipeline stages with 1 and with 4 micro-batches (model_parallel), and 2 MWMS workers each running
that 4-micro-batch pipeline (hybrid), every configuration on the same 2 x --threads_per_worker
cores. Its report adds a table and parallelism.png (results/report/parallelism.py): time, accuracy,
peak memory per device, communication share and the pipeline bubble measured against the GPipe
formula.

Every run is an ordinary `python -m experiments.run` record tagged with its cell (`--run_name`), so
an interrupted comparison continues with `--resume` (cells already recorded are skipped).
"""
import dataclasses
import signal
import sys

from experiments.engine import tf_settings

tf_settings.apply()  # before anything imports TensorFlow; every run it starts inherits these

from absl import app, flags  # noqa: E402

from experiments.config import network_flags  # noqa: E402
from experiments.config.cli import bad_input, parse_flags  # noqa: E402
from experiments.config import ConfigError  # noqa: E402
from experiments.comparison import options, runner  # noqa: E402
from experiments.comparison.config import FLAG_FIELDS, Comparison  # noqa: E402
from experiments.comparison.plan import plan, same_run, size_started  # noqa: E402
from experiments.comparison.presets import PRESETS  # noqa: E402

from models import MODELS  # noqa: E402
from results.records.store import load_records  # noqa: E402

# The flags' defaults are the default preset's (a list flag's as its strings): a flag given
# replaces the preset's value (options.resolve), one not given leaves it.
DEFAULT = Comparison()


def _strings(values):
    return [f"{v:g}" if isinstance(v, float) else str(v) for v in values]


_PRESET = flags.DEFINE_enum("preset", "default", list(PRESETS), "Sweep size; lists below override.")
flags.DEFINE_list("models", None, f"Models to compare ({', '.join(MODELS)}).")
flags.DEFINE_list("workers", None, "Worker / replica counts N, e.g. 1,2,4.")
flags.DEFINE_list("train_examples", None, "Training examples per epoch (size sweep).")
flags.DEFINE_integer("repeats", None, "Runs per configuration.", lower_bound=1)
flags.DEFINE_integer("epochs", None, "Epochs per run (>= 2: the first is warm-up).", lower_bound=2)
flags.DEFINE_list("strategies", _strings(DEFAULT.strategies),
                  "Strategies to compare against the baseline.")
flags.DEFINE_integer("num_ps", DEFAULT.num_ps, "Parameter servers for parameter_server.",
                     lower_bound=1)
flags.DEFINE_integer("batch_size_per_replica", DEFAULT.batch_size_per_replica,
                     "Per-replica batch.", lower_bound=1)
flags.DEFINE_string("dataset", DEFAULT.dataset, "Dataset name (see experiments.run); "
                    "when not given, each model trains its own dataset, as "
                    "experiments.run does (models.MODEL_DATASETS: resnet "
                    "synthetic_cifar, embedding synthetic_tokens, gpt and gpt_small "
                    "synthetic_sequences, any other model synthetic).")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "Print the runs the comparison would make and exit.")
flags.DEFINE_string("results_dir", DEFAULT.results_dir, "Records, report and plots "
                    "(--preset=zoo / parallelism: runs/zoo / runs/parallelism "
                    "unless given).")
_RESUME = flags.DEFINE_bool("resume", True, "Skip configurations already recorded.")
flags.DEFINE_float("target_accuracy", DEFAULT.target_accuracy,
                   "Eval accuracy for time-to-accuracy.")
flags.DEFINE_list("experiments", _strings(DEFAULT.experiments),
                  "scaling: baseline, reference and every strategy per N; "
                  "straggler: MWMS and PSS with one worker slowed by each delay; "
                  "network: MWMS and PSS at N=2 under each --bandwidths; "
                  "parallelism: one device, data, model and hybrid parallelism; "
                  "reducers: MWMS N=2 plain and under each --reducers at each "
                  "--bandwidths.")
flags.DEFINE_list("bandwidths", _strings(DEFAULT.bandwidths), "Network and reducers "
                  "experiments: emulated bandwidths (Gbit/s, shared by the "
                  "cluster's links; 0: the real loopback, which the model is fitted "
                  "to; --preset=reducers: 0.1,1,0).")
flags.DEFINE_list("reducers", _strings(DEFAULT.reducers), "Reducers experiment: the "
                  "--compression forms run against plain MWMS, packs:BYTES (the "
                  "plain all-reduce in packs, --bytes_per_pack) and zero:1 (the "
                  "sharded optimizer, --zero=1).")
flags.DEFINE_list("straggler_delays", _strings(DEFAULT.straggler_delays),
                  "Straggler experiment: per-step delays (ms) of the last worker.")
flags.DEFINE_integer("straggler_workers", DEFAULT.straggler_workers,
                     "Straggler experiment: workers per cluster.", lower_bound=2)
flags.DEFINE_integer(
    "steps_per_execution", DEFAULT.steps_per_execution, "Training steps per tf.function call "
    "in every run (same for every strategy; docs/benchmarks.md: 8 against 1).", lower_bound=1)
flags.DEFINE_float("run_timeout", DEFAULT.run_timeout, "Seconds before one run is abandoned.")
flags.DEFINE_integer("threads_per_worker", DEFAULT.threads_per_worker, "Intra-op threads of "
                     "every worker of every strategy at every N, and of the baseline (mirrored: "
                     "N x this in its one process). The hardware reference and engine_floor_all "
                     "use all cores.", lower_bound=1)
_VERBOSE = flags.DEFINE_bool("verbose", False, "Show TensorFlow's start-up messages of every run.")
flags.DEFINE_float("time_budget_min", DEFAULT.time_budget_min, "Default preset without "
                   "--train_examples: size the epochs from a short calibration run (the plain "
                   "loop, 1 thread) so the whole comparison takes about this long (0: off).",
                   lower_bound=0.0)
flags.DEFINE_list("accumulation_steps", _strings(DEFAULT.accumulation_steps), "Sweep of "
                  "experiments.run's --accumulation_steps (K micro-batches per update and per "
                  "synchronization) over every cell but the engine floors; each K "
                  "is a setting of its own in the report.")
flags.DEFINE_bool("pin_cores", DEFAULT.pin_cores, "Pin each configuration to the cores its "
                  "workers get (N workers x threads; ps and chief inside that set): N workers "
                  "on N cores, even on a bigger machine.")


def _calibrated(config, recorded):
    """config with the examples per epoch its one model runs at: the size the comparison in
    `recorded` started with, else one sized to its time budget by a calibration run."""
    model = config.models[0]
    # Resuming keeps the size the comparison started with: a new calibration could pick
    # another, and then no cell would match and the report would mix two settings.
    size = size_started(recorded, model)
    if size:
        print(f"compare: resuming with the recorded size {size} (no calibration; "
              f"remove {config.results_dir} to start afresh)", flush=True)
    else:
        size = runner.calibrate(model, config.epochs, len(plan(config)),
                                config.time_budget_min * 60, max(config.train_examples_of(model)),
                                config.threads_per_worker, config.dataset_of(model))
    return dataclasses.replace(config, train_examples=(size,))


def main(argv):
    # A SIGTERM (kill, a pod's stop) exits through the runner, which stops the running cell
    # and its cluster first; a Ctrl-C does the same through KeyboardInterrupt.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    if len(argv) > 1:
        bad_input(f"unexpected arguments {argv[1:]}; all options are --flags")
    tf_settings.show_startup_messages(_VERBOSE.value)
    try:
        config = options.resolve(_PRESET.value, **{
            name: flags.FLAGS[name].value for name in FLAG_FIELDS if flags.FLAGS[name].present})
    except (ValueError, ConfigError) as e:
        bad_input(e)
    results_dir = config.results_dir
    recorded = load_records(results_dir)[0] if _RESUME.value and not _DRY_RUN.value else []
    if config.calibrate and config.time_budget_min and len(config.models) == 1 \
            and not _DRY_RUN.value:  # a dry run prints the preset's sizes, uncalibrated
        config = _calibrated(config, recorded)
    common = [f"--epochs={config.epochs}",
              f"--batch_size_per_replica={config.batch_size_per_replica}",
              f"--steps_per_execution={config.steps_per_execution}"]
    runs = [(name, [*argv, *common]) for name, argv in plan(config)]
    if _DRY_RUN.value:
        for name, argv in runs:
            print(f"{name}: python -m {' '.join(argv)} --results_dir={results_dir}")
        print(f"compare: {len(runs)} runs planned (--dry_run: none made)")
        return
    todo = [(name, argv) for name, argv in runs
            if not any(same_run(r, name, argv[1:]) for r in recorded)]
    print(f"compare: {len(runs)} runs planned, {len(runs) - len(todo)} already recorded, "
          f"{len(todo)} to go -> {results_dir}", flush=True)
    failures = runner.run_cells(todo, results_dir, config.run_timeout, _VERBOSE.value)
    from results.report.build import build_and_say

    build_and_say(results_dir, config.target_accuracy or None, network_flags.network())
    if failures:
        print(f"compare: {len(failures)} run(s) failed: {', '.join(failures)}")
        sys.exit(1)


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)

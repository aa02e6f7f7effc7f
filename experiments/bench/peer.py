"""Benchmark (not a test): the toolkit's loop against a plain `model.fit` script, same model, data
and batch, single device and MirroredStrategy, run side by side in one invocation.

    python -m experiments.bench.peer                 # CNN, 16384 examples, batch 128, 4 epochs, 2 rounds

Each configuration runs in its own process (alternating toolkit / peer, `--rounds` times) and the
figure is the median steady-state throughput (first epoch excluded). Prints both and the ratio,
then the launch-to-first-step time of a local 2-worker MWMS and PSS cluster.
"""
import json
import statistics

from absl import app, flags

from experiments.comparison.runner import run_module, run_record, steady_rates
from experiments.config.cli import parse_flags
from models import MODELS

_MODEL = flags.DEFINE_enum("model", "cnn", list(MODELS), "Model.")
_EPOCHS = flags.DEFINE_integer("epochs", 4, "Epochs per run (first excluded).", lower_bound=2)
_TRAIN = flags.DEFINE_integer("train_examples", 16384, "Examples per epoch.", lower_bound=1)
_BATCH = flags.DEFINE_integer("batch", 128, "Global batch size.", lower_bound=2)
_ROUNDS = flags.DEFINE_integer("rounds", 2, "Alternating runs of each side.", lower_bound=1)


def _toolkit(replicas, module="experiments.run"):
    strategy = ["--strategy=mirrored", f"--num_replicas={replicas}"] if replicas > 1 else \
        ["--strategy=one_device"]
    record, _ = run_record([*strategy, f"--model={_MODEL.value}", f"--epochs={_EPOCHS.value}",
                            f"--train_examples={_TRAIN.value}",
                            f"--global_batch_size={_BATCH.value}"], module)
    return steady_rates(record)


def _peer(replicas):
    out = run_module(["experiments.bench.peer_keras", f"--model={_MODEL.value}",
                      f"--epochs={_EPOCHS.value}", f"--train_examples={_TRAIN.value}",
                      f"--batch={_BATCH.value}", f"--mirrored={replicas if replicas > 1 else 0}"])
    line = [l for l in out.splitlines() if l.startswith("{")][-1]
    return json.loads(line)["examples_per_sec"][1:]


def _launch_to_first_step(strategy_flags):
    """Seconds from `python -m experiments.run` starting a local 2-worker cluster until the
    chief's first training step finished (the record's `startup`), and the whole command's."""
    record, wall = run_record([*strategy_flags, f"--model={_MODEL.value}", "--epochs=1",
                               "--train_examples=1024", "--nocomm_probe"])
    return record["startup"]["launch_to_first_step_s"], wall


def main(argv):
    del argv
    print(f"peer benchmark: {_MODEL.value}, {_TRAIN.value} examples/epoch, global batch "
          f"{_BATCH.value}, {_EPOCHS.value} epochs (first excluded), {_ROUNDS.value} rounds")
    for replicas, name in ((1, "single device"), (2, "MirroredStrategy x2 (logical CPUs)")):
        ours, theirs, floor = [], [], []
        for _ in range(_ROUNDS.value):
            ours += _toolkit(replicas)
            theirs += _peer(replicas)
            if replicas == 1:  # the plain TF loop: what TensorFlow does with this step here
                floor += _toolkit(1, "experiments.comparison.floor")
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"{name:36s} toolkit {a:8.0f} ex/s [{min(ours):.0f}-{max(ours):.0f}]   "
              f"model.fit {b:8.0f} ex/s [{min(theirs):.0f}-{max(theirs):.0f}]   "
              f"ratio toolkit/model.fit {a / b:.3f}", flush=True)
        if floor:
            c = statistics.median(floor)
            print(f"{'plain TF loop (engine floor)':36s} {c:8.0f} ex/s [{min(floor):.0f}-"
                  f"{max(floor):.0f}]   ratio toolkit/plain loop {a / c:.3f}", flush=True)
    for name, strategy_flags in (
            ("MWMS 2 workers", ["--strategy=multi_worker_mirrored", "--num_workers=2"]),
            ("PSS 2 workers + 1 ps", ["--strategy=parameter_server", "--num_workers=2",
                                      "--num_ps=1"])):
        firsts, walls = zip(*(_launch_to_first_step(strategy_flags)
                              for _ in range(_ROUNDS.value)))
        print(f"{name:36s} launch-to-first-step {statistics.median(firsts):.2f} s "
              f"[{min(firsts):.2f}-{max(firsts):.2f}]   whole 1-epoch command "
              f"{statistics.median(walls):.2f} s", flush=True)


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)

"""What `experiments.compare` runs when told only a preset: each preset a Comparison
(config.py) registered by name; the command line lays its flags over one (options.resolve).
docs/comparison.md, "Presets". Below them, the constants the presets' experiments plan with."""
import os

from experiments.comparison.config import Comparison

PRESETS = {}


def register(name, comparison):
    """Makes `comparison` the preset `name` (--preset=NAME)."""
    if name in PRESETS:
        raise ValueError(f"preset {name!r} is registered already")
    PRESETS[name] = comparison
    return comparison


# The zoo's examples per epoch: a few seconds per steady epoch of each model on 2 cores.
ZOO_SIZES = {"resnet": 1536, "wide_mlp": 3072, "embedding": 8192, "vit": 2048, "gpt": 2048}
# The reducers preset's bandwidths (Gbit/s) per model where the preset's own do not suit it:
# wide_mlp's plain step moves ~40 MB through the shaper, 7 s a step at 0.1 Gbit/s.
REDUCER_BANDWIDTHS = {"wide_mlp": (1.0, 5.0, 0.0)}


def _per_model(models, epochs, **settings):
    """A preset of one worker count (N=2), one repeat and the zoo's examples per epoch, without
    the engine floors or a size calibration."""
    return Comparison(models=models, workers=(2,), train_examples=(), model_examples=ZOO_SIZES,
                      repeats=1, epochs=epochs, floors=False, calibrate=False, **settings)


# The CNN at N = 1 and 2, 4 epochs (3 steady); examples per epoch (at most 16384) sized to
# --time_budget_min.
register("default", Comparison())
register("full", Comparison(models=("mlp", "cnn"), workers=(1, 2, 4, 8),
                            train_examples=(5000, 10000, 20000, 40000), repeats=3, epochs=5,
                            calibrate=False))
# 5 runs per model, 3 epochs (2 steady) sized per model.
register("zoo", _per_model(("resnet", "wide_mlp", "embedding"), 3, results_dir="runs/zoo"))
# 5 runs per model, 3 epochs (2 steady).
register("parallelism", _per_model(("cnn", "wide_mlp"), 3, experiments=("parallelism",),
                                   results_dir="runs/parallelism"))
# MWMS N=2 plain and under each --reducers at each of the model's bandwidths (the real
# loopback and 2 shaped ones: REDUCER_BANDWIDTHS): 15 runs per model, 3 epochs (2 steady).
register("reducers", _per_model(("cnn", "wide_mlp", "embedding"), 3, experiments=("reducers",),
                                bandwidths=(0.1, 1.0, 0.0), model_bandwidths=REDUCER_BANDWIDTHS,
                                results_dir="runs/reducers"))
# The seed's Table I here: one device, data parallel, model parallel, hybrid and --adapt,
# steady, with the network slowed after 2 epochs (ADAPTIVE_SCHEDULES), and with a
# straggler after 2 epochs (ADAPTIVE_STRAGGLERS): 14 runs per model, 6 epochs (the slowed
# network dominates its time).
register("adaptive", _per_model(("cnn", "resnet"), 6, experiments=("adaptive",),
                                results_dir="runs/adaptive"))
# The seed's Table I for a transformer: the ViT and the GPT on one device, data parallel,
# pipelined (GPipe and 1F1B), tensor parallel, data x tensor parallel and the planner's
# choice for this machine as one host of 2 devices: 8 runs per model, 3 epochs (2 steady).
register("transformers", _per_model(("vit", "gpt"), 3, experiments=("transformers",),
                                    results_dir="runs/transformers"))
# What the transformers preset's planner's choice plans for: this machine as one host whose
# 2 cores are 2 devices sharing its memory
THIS_HOST_CLUSTER = os.path.normpath(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "examples",
    "cluster_this_machine_1x2.json"))
# The adaptive experiment's scenarios per model: (steady, changing) --emulate_bandwidth_schedule.
# The drop is deep enough that one device beats two workers on it (it does not pay for resnet
# at 0.05: its step computes ~5x the cnn's for 2/3 of the gradient bytes).
ADAPTIVE_SCHEDULES = {"cnn": ("0:10", "0:10,2:0.05"), "resnet": ("0:10", "0:10,2:0.02")}
DEFAULT_ADAPTIVE_SCHEDULES = ("0:10", "0:10,2:0.05")
# Its third scenario per model: the steady network, and after 2 epochs the last worker's input
# delayed (--straggler_schedule, epoch:ms) beyond every configuration's step: under MWMS the
# delay is a floor under the straggler's step (its input buffer hides a shorter one), and a PSS
# worker's step holds the whole global batch (a resnet step is several times a cnn step).
ADAPTIVE_STRAGGLERS = {"cnn": "0:0,2:200", "resnet": "0:0,2:1200"}
DEFAULT_ADAPTIVE_STRAGGLER = "0:0,2:200"
# What --adapt plans for: this machine as 2 one-core workers on one shaped loopback, at the
# scenarios' first rate
ADAPTIVE_CLUSTER = os.path.normpath(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "examples",
    "cluster_this_machine_2_workers_10g.json"))
# The experiments a comparison can run (--experiments); each adds its cells to the plan
# (plan.py) and its section to the report (results/report/build.py).
EXPERIMENT_NAMES = ("scaling", "straggler", "network", "parallelism", "reducers", "adaptive",
                    "transformers")

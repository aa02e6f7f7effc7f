"""What a comparison is asked to run: the preset (presets.py) with the command line's lists laid
over it, each list checked (bad input: a ValueError or ConfigError naming the bad value and the
valid choices, which `experiments.compare` turns into one line and exit 2).

    opts = options.resolve("default", models=["cnn"], workers=["1", "2"])
"""
import dataclasses

from experiments.comparison.plan import PACKS, REDUCERS_STRATEGY, ZERO
from experiments.comparison.presets import (EXPERIMENT_NAMES, PRESETS,
                                            REDUCER_BANDWIDTHS, REDUCERS, ZOO_SIZES)
from experiments.config import check_dataset, check_model
from models import MODELS, default_dataset
from strategies import COMPARED, LOCAL_REPLICAS, compression


@dataclasses.dataclass(frozen=True)
class Options:
    models: list
    datasets: dict  # model -> dataset
    strategies: list
    experiments: list
    bandwidths: object  # Gbit/s, 0 the real loopback: a list, or {model: list} (--preset=reducers)
    reducers: list  # the reducers experiment's --compression forms
    delays: list  # straggler ms
    workers: list
    accumulation: list
    sizes: object  # [examples per epoch], or {model: [examples]} (the zoo)
    repeats: int
    epochs: int
    results_dir: str


def ints(name, values, minimum=1):
    try:
        out = [int(v) for v in values]
    except ValueError:
        raise ValueError(f"--{name}={','.join(values)} must be a comma-separated list of integers")
    if not out or min(out) < minimum:
        raise ValueError(f"--{name}={','.join(values)} must list integers >= {minimum}")
    return out


def bandwidths(values):
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


def resolve(preset_name, *, models=None, dataset=None, strategies, experiments=None,
            bandwidth_list=None, delays=(), workers=None, reducers=REDUCERS, accumulation=("1",), sizes=None,
            repeats=None, epochs=None, results_dir="runs/compare", results_dir_given=False,
            default_experiments="scaling", default_bandwidths=""):
    """Options of preset `preset_name` with the given lists over it (None: the preset's);
    dataset / experiments / bandwidth_list None: not given on the command line. The zoo and parallelism presets
    write to runs/<preset> unless results_dir was given."""
    preset = PRESETS[preset_name]
    models = models or preset["models"].split(",")
    for model in models:  # built-in names, or your MODULE:FUNCTION / PATH.keras
        if model not in MODELS and not (":" in model or model.endswith(".keras")):
            raise ValueError(f"--models={','.join(models)}: {model!r} is not valid; choose "
                             f"from {', '.join(MODELS)}, or MODULE:FUNCTION, or PATH.keras")
        check_model(model)
    if dataset is not None:
        check_dataset(dataset)
    bad = [s for s in strategies if s not in COMPARED]
    if bad:
        raise ValueError(f"--strategies: {bad[0]!r} is not valid; choose from "
                         f"{', '.join(COMPARED)}")
    experiments = experiments if experiments is not None else \
        preset.get("experiments", default_experiments).split(",")
    bad = [e for e in experiments if e not in EXPERIMENT_NAMES]
    if bad or not experiments:
        raise ValueError(f"--experiments={','.join(experiments)}: choose from "
                         f"{', '.join(EXPERIMENT_NAMES)}")
    if "reducers" in experiments and REDUCERS_STRATEGY not in strategies:
        raise ValueError(f"--experiments=reducers needs {REDUCERS_STRATEGY} in --strategies")
    for experiment in ("straggler", "network"):
        if experiment in experiments and set(strategies) <= set(LOCAL_REPLICAS):
            raise ValueError(f"--experiments={experiment} needs multi_worker_mirrored or "
                             "parameter_server in --strategies")
    # checked in the order compare always checked them: the first bad one is the one named
    if bandwidth_list is not None or "bandwidths" not in preset:
        bandwidth_list = bandwidths(bandwidth_list if bandwidth_list is not None else
                                    [b for b in default_bandwidths.split(",") if b])
    else:  # the preset's, per model
        bandwidth_list = {m: bandwidths(REDUCER_BANDWIDTHS.get(m, preset["bandwidths"]).split(","))
                          for m in models}
    for form in reducers:
        if form.startswith(PACKS):  # a packed plain all-reduce: --bytes_per_pack
            if not form[len(PACKS):].isdigit() or int(form[len(PACKS):]) < 1:
                raise ValueError(f"--reducers: {form!r} is not valid; packs:BYTES takes a "
                                 f"positive number of bytes (e.g. packs:262144)")
            continue
        if form.startswith(ZERO):  # the sharded optimizer: --zero
            if form != f"{ZERO}1":
                raise ValueError(f"--reducers: {form!r} is not valid; the sharded optimizer is "
                                 f"zero:1 (ZeRO stage 1)")
            continue
        try:
            compression.parse(form)
        except ValueError as e:
            raise ValueError(f"--reducers: {e} (or packs:BYTES, zero:1)") from None
        if form in ("none", "bf16"):
            raise ValueError(f"--reducers: {form!r} is not a reducer; the experiment runs plain "
                             f"MWMS (none) itself and bf16 is --gradient_sync_dtype's cast; "
                             f"choose int8, topk:RATIO or powersgd:RANK")
    delays = ints("straggler_delays", delays, minimum=0)
    workers = ints("workers", workers or preset["workers"].split(","))
    accumulation = ints("accumulation_steps", accumulation)
    if sizes or preset["train_examples"]:
        sizes = ints("train_examples", sizes or preset["train_examples"].split(","))
    else:  # the zoo: each model its own examples per epoch
        sizes = {m: [ZOO_SIZES.get(m, 4096)] for m in models}
    return Options(
        models=models,
        datasets={m: dataset if dataset is not None else default_dataset(m) for m in models},
        strategies=list(strategies), experiments=experiments, bandwidths=bandwidth_list,
        reducers=list(reducers),
        delays=delays, workers=workers, accumulation=accumulation, sizes=sizes,
        repeats=repeats or preset["repeats"], epochs=epochs or preset["epochs"],
        results_dir=results_dir if results_dir_given or preset_name in ("default", "full")
        else f"runs/{preset_name}")

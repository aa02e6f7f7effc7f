"""The command line laid over a preset: each value `experiments.compare` was given checked and
typed, then put in place of the preset's (a Comparison, config.py) with dataclasses.replace. Bad
input is a ValueError or ConfigError naming the bad value and the valid choices, which
`experiments.compare` turns into one line and exit 2.

    config = options.resolve("default", models=["cnn"], workers=["1", "2"])
"""
import dataclasses

from experiments.comparison.config import FLAG_FIELDS
from experiments.comparison.plan import PACKS, REDUCERS_STRATEGY, ZERO
from experiments.comparison.presets import EXPERIMENT_NAMES, PRESETS
from experiments.config import check_dataset, check_model
from models import MODELS
from strategies import COMPARED, LOCAL_REPLICAS, compression


def ints(name, values, minimum=1):
    try:
        out = [int(v) for v in values]
    except ValueError:
        raise ValueError(f"--{name}={','.join(values)} must be a comma-separated list of integers")
    if not out or min(out) < minimum:
        raise ValueError(f"--{name}={','.join(values)} must list integers >= {minimum}")
    return tuple(out)


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
    return tuple(out)


_CHECKED_HERE = ("models", "dataset", "strategies", "experiments", "bandwidths", "reducers",
                 "straggler_delays", "workers", "accumulation_steps", "train_examples")


def _check_reducers(forms):
    for form in forms:
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
    return tuple(forms)


def resolve(preset_name, **given):
    """Preset `preset_name` with the command line's values over it: `given` holds what the
    command line said, by Comparison field (config.FLAG_FIELDS), a list field as its strings.
    An empty --models, --workers, --train_examples or --dataset keeps the preset's; given
    --train_examples are every model's, and end the size calibration; given --bandwidths every
    model's too. The values are checked in one order (the first bad one is the one named) and
    the cross-checks on what the comparison then is."""
    preset = PRESETS[preset_name]
    unknown = set(given) - set(FLAG_FIELDS)
    if unknown:
        raise TypeError(f"not settings of the command line: {sorted(unknown)}")
    # the numbers and paths as absl read them (it checked their bounds); the rest below
    over = {key: value for key, value in given.items() if key not in _CHECKED_HERE}
    if given.get("models"):
        over["models"] = tuple(given["models"])
    models = over.get("models", preset.models)
    for model in models:  # built-in names, or your MODULE:FUNCTION / PATH.keras
        if model not in MODELS and not (":" in model or model.endswith(".keras")):
            raise ValueError(f"--models={','.join(models)}: {model!r} is not valid; choose "
                             f"from {', '.join(MODELS)}, or MODULE:FUNCTION, or PATH.keras")
        check_model(model)
    if given.get("dataset"):
        check_dataset(given["dataset"])
        over["dataset"] = given["dataset"]
    strategies = tuple(given.get("strategies", preset.strategies))
    bad = [s for s in strategies if s not in COMPARED]
    if bad:
        raise ValueError(f"--strategies: {bad[0]!r} is not valid; choose from "
                         f"{', '.join(COMPARED)}")
    experiments = tuple(given.get("experiments", preset.experiments))
    bad = [e for e in experiments if e not in EXPERIMENT_NAMES]
    if bad or not experiments:
        raise ValueError(f"--experiments={','.join(experiments)}: choose from "
                         f"{', '.join(EXPERIMENT_NAMES)}")
    over.update(strategies=strategies, experiments=experiments)
    if "reducers" in experiments and REDUCERS_STRATEGY not in strategies:
        raise ValueError(f"--experiments=reducers needs {REDUCERS_STRATEGY} in --strategies")
    for experiment in ("straggler", "network"):
        if experiment in experiments and set(strategies) <= set(LOCAL_REPLICAS):
            raise ValueError(f"--experiments={experiment} needs multi_worker_mirrored or "
                             "parameter_server in --strategies")
    if "bandwidths" in given:  # every model's: the preset's per-model ones go
        over.update(bandwidths=bandwidths(given["bandwidths"]), model_bandwidths={})
    if "reducers" in given:
        over["reducers"] = _check_reducers(given["reducers"])
    if "straggler_delays" in given:
        over["straggler_delays"] = ints("straggler_delays", given["straggler_delays"], minimum=0)
    if given.get("workers"):
        over["workers"] = ints("workers", given["workers"])
    if "accumulation_steps" in given:
        over["accumulation_steps"] = ints("accumulation_steps", given["accumulation_steps"])
    if given.get("train_examples"):
        over.update(train_examples=ints("train_examples", given["train_examples"]),
                    calibrate=False)
    return dataclasses.replace(preset, **over)

"""Command-line flags made from a config dataclass's fields (run_config.py), so that each
setting's name, default, help and choices are written once.

    config_flags.define(RunConfig)       # at import of an entry point: one absl flag per field
    cfg = config_flags.read(RunConfig)   # in main(): the parsed values as a RunConfig
"""
import dataclasses
import os

from absl import flags

from experiments.workload import npz_data
from experiments.workload.user_code import UserCodeError

_DEFINE = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer, float: flags.DEFINE_float,
           str: flags.DEFINE_string}


def _flag_fields(config_class):
    return [f for f in dataclasses.fields(config_class) if f.metadata.get("flag", True)]


def define(config_class, flag_values=flags.FLAGS):
    """Defines a flag per field of `config_class` (the fields declared flag=False excepted)."""
    for f in _flag_fields(config_class):
        text, choices = f.metadata["help"], f.metadata.get("choices")
        if choices:
            text = f"{text} One of: {', '.join(map(str, choices))}."
        _DEFINE[f.type](f.name, f.default, text, flag_values=flag_values)


def read(config_class, flag_values=flags.FLAGS):
    """The parsed flags of `config_class`'s fields, as an instance of it."""
    return config_class(**{f.name: flag_values[f.name].value
                           for f in _flag_fields(config_class)})


def given(name, flag_values=flags.FLAGS):
    """Whether the command line set flag `name` (not just its default)."""
    return flag_values[name].present


def sizes_from_data(cfg, flag_values=flags.FLAGS):
    """--dataset=PATH.npz without --train_examples / --eval_examples: all of its splits (the
    synthetic set's default sizes are not the user's). Says so once, before the run starts."""
    present = given("train_examples", flag_values), given("eval_examples", flag_values)
    if not cfg.dataset.endswith(".npz") or all(present):
        return cfg
    try:
        info = npz_data.info(cfg.dataset)
    except UserCodeError:
        return cfg  # validate() reports it
    cfg = dataclasses.replace(cfg, train_examples=cfg.train_examples if present[0] else
                              info.train_size, eval_examples=cfg.eval_examples if present[1]
                              else info.eval_size)
    if not os.environ.get("TF_CONFIG"):  # the launcher says it, not every task again
        print(f"{cfg.dataset}: training on {cfg.train_examples} and evaluating on "
              f"{cfg.eval_examples} examples (all of a split unless --train_examples / "
              f"--eval_examples say otherwise)", flush=True)
    return cfg


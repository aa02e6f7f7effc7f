"""Command-line flags made from a config dataclass's fields (run_config.py), so that each
setting's name, default, help and choices are written once.

    config_flags.define(RunConfig)       # at import of an entry point: one absl flag per field
    cfg = config_flags.read(RunConfig)   # in main(): the parsed values as a RunConfig
"""
import dataclasses

from absl import flags

_DEFINE = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer, float: flags.DEFINE_float,
           str: flags.DEFINE_string}


def _flag_fields(config_class):
    return [f for f in dataclasses.fields(config_class) if f.metadata.get("flag", True)]


def define(config_class, flag_values=flags.FLAGS):
    """Defines a flag per field of `config_class` (the fields declared flag=False excepted)."""
    for f in _flag_fields(config_class):
        text, choices = f.metadata["help"], f.metadata.get("choices")
        if choices:
            text = f"{text} One of: {', '.join(choices)}."
        _DEFINE[f.type](f.name, f.default, text, flag_values=flag_values)


def read(config_class, flag_values=flags.FLAGS):
    """The parsed flags of `config_class`'s fields, as an instance of it."""
    return config_class(**{f.name: flag_values[f.name].value
                           for f in _flag_fields(config_class)})


def given(name, flag_values=flags.FLAGS):
    """Whether the command line set flag `name` (not just its default)."""
    return flag_values[name].present

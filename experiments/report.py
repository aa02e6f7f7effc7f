"""Rebuilds summary.csv, report.md and the plots of a comparison from its records (no training).

    python -m experiments.report --results_dir=runs/compare [--target_accuracy=0.9]
"""
from experiments.engine import tf_settings

tf_settings.apply()  # before TensorFlow loads: quiet start-up, the toolkit's kernels

from absl import app, flags  # noqa: E402

from experiments.config import network_flags  # noqa: E402
from experiments.config.cli import bad_input, parse_flags  # noqa: E402

_RESULTS_DIR = flags.DEFINE_string("results_dir", "runs/compare", "Directory holding records/.")
_TARGET = flags.DEFINE_float("target_accuracy", 0.9, "Eval accuracy for time-to-accuracy (0: off).")


def main(argv):
    del argv
    # no records here: build says so in one line before anything imports TensorFlow (a local
    # directory is read without it, results/records/store.py)
    from results.report.build import build_and_say

    try:
        build_and_say(_RESULTS_DIR.value, _TARGET.value or None, network_flags.network())
    except ValueError as e:
        bad_input(e)


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)

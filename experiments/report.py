"""Rebuilds summary.csv, report.md and the plots of a comparison from its records (no training).

    python -m experiments.report --results_dir=runs/compare [--target_accuracy=0.9]
"""
import sys

from absl import app, flags

_RESULTS_DIR = flags.DEFINE_string("results_dir", "runs/compare", "Directory holding records/.")
_TARGET = flags.DEFINE_float("target_accuracy", 0.9, "Eval accuracy for time-to-accuracy (0: off).")


def main(argv):
    del argv
    from results.report import build

    try:
        paths, problems = build(_RESULTS_DIR.value, _TARGET.value or None)
    except ValueError as e:
        sys.stderr.write(f"error: {e}\n")
        sys.exit(2)
    for name, why in problems:
        print(f"skipped record {name}: {why}")
    for p in paths:
        print(f"wrote {p}")


if __name__ == "__main__":
    app.run(main)

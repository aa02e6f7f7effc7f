"""Benchmark (not a test): the scaling model's out-of-sample errors on this machine's runs, per
repeat, pooled and the report's prediction against each repeat, from a comparison's records
(docs/benchmarks.md, issue 28's validation; the arithmetic: results/validation.py), then the
host checks the comparison made before and after its runs.

    python -m experiments.compare --workers=1,2,3,4 --models=cnn,mlp,embedding \
        --strategies=multi_worker_mirrored,parameter_server --repeats=3 --results_dir=/tmp/v1
    python -m experiments.bench.validate_local --results_dir=/tmp/v1
"""
import sys

from absl import app, flags

from experiments.config.cli import parse_flags
from results import host_check
from results.records import load_records
from results.tables import PREDICTION_TARGET
from results.validation import table

_DIR = flags.DEFINE_string("results_dir", "runs/compare", "A comparison's results directory.")
_TARGET = flags.DEFINE_float("target", PREDICTION_TARGET, "The error bound to count against.")


def main(argv):
    del argv
    records, problems = load_records(_DIR.value)
    for p in problems:
        print(f"skipped: {p}", file=sys.stderr)
    print(table(records, _TARGET.value))
    # the host checks around the runs: an N-worker run in an episode of cores taken away is
    # slow, and nothing the model is fitted on sees it (docs/benchmarks.md, the host's cores)
    try:
        checks = host_check.load(_DIR.value)
    except ValueError as e:
        print(f"host checks not read: {e}")
        return
    for check in checks:
        print(f"host check {check['phase']} ({check['when']}): {host_check.line(check)}")


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)

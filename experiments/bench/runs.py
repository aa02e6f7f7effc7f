"""How the benchmarks run the toolkit: `python -m experiments.run` in a subprocess with a
throw-away results directory, returning its record; a failed run stops the benchmark."""
import os
import subprocess
import sys
import tempfile
import time

from results.metrics import steady_epochs
from results.records import load_records


def run_module(argv):
    """Runs `python -m <argv>`; returns its stdout, or exits naming the failed command."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, env=env)
    if proc.returncode:
        sys.exit(f"benchmark run failed: {' '.join(argv)}\n{proc.stderr[-2000:]}")
    return proc.stdout


def run_record(run_flags, module="experiments.run"):
    """One `experiments.run` (or the engine floor, `experiments.bench.floor`) with these flags.
    Returns (its record, wall seconds)."""
    with tempfile.TemporaryDirectory() as d:
        start = time.monotonic()
        run_module([module, *run_flags, "--notensorboard", f"--results_dir={d}"])
        wall = time.monotonic() - start
        (record,), _ = load_records(d)
        return record, wall


def steady_rates(record):
    """Examples/s of the record's steady epochs (tracing epochs left out)."""
    return [e["examples_per_sec"] for e in steady_epochs(record["epochs"])]

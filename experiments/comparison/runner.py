"""Running the toolkit's commands in subprocesses: a comparison's cells (their output passed on
without TensorFlow's start-up chatter), the size calibration of the default comparison, and the
benchmarks' throw-away runs (`run_record`; a failed run stops the benchmark)."""
import os
import subprocess
import sys
import tempfile
import threading
import time

from experiments.comparison.plan import SIZE_QUANTUM, calibrated_size
from results.records.metrics import steady_epochs
from results.records.store import load_records
from tf_config.task_output import is_startup_noise


def run_module(argv):
    """Runs `python -m <argv>`; returns its stdout, or exits naming the failed command."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, env=env)
    if proc.returncode:
        sys.exit(f"benchmark run failed: {' '.join(argv)}\n{proc.stderr[-2000:]}")
    return proc.stdout


def run_record(run_flags, module="experiments.run"):
    """One `experiments.run` (or the engine floor, `experiments.comparison.floor`) with these flags.
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


def run_cell(command, timeout, verbose):
    """Runs one cell, passing its output on without TensorFlow's start-up chatter (unless
    verbose). Returns its exit code, or "timeout"."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace")

    def pump():
        for line in proc.stdout:
            if verbose or not is_startup_noise(line):
                sys.stdout.write(line)
                sys.stdout.flush()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:  # the child's launcher stops its own cluster on SIGKILL
        proc.kill()
        proc.wait()
        code = "timeout"
    except BaseException:  # Ctrl-C, or SIGTERM (compare exits on it): the cell stops too
        stop(proc)
        raise
    reader.join(timeout=5)
    return code


def stop(proc, grace_s=30.0):
    """SIGTERM (a local cluster's launcher then stops every task), SIGKILL after grace_s."""
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_cells(cells, results_dir, timeout, verbose):
    """Runs each (name, argv) cell as `python -m argv` into results_dir, one after the other,
    saying which is running and about how long is left; a failed cell is said and the rest go
    on. Returns the failures' descriptions."""
    failures, durations = [], []
    for i, (name, argv) in enumerate(cells, 1):
        eta = ""
        if durations:
            left = sum(durations) / len(durations) * (len(cells) - i + 1)
            eta = f", about {left / 60:.1f} min left"
        print(f"\n=== run {i}/{len(cells)}: {name}{eta}", flush=True)
        start = time.monotonic()
        command = [sys.executable, "-m", *argv, f"--results_dir={results_dir}",
                   f"--run_name={name}"]
        if verbose:
            command.append("--verbose")
        code = run_cell(command, timeout, verbose)
        durations.append(time.monotonic() - start)
        if code != 0:
            failures.append(f"{name} (exit {code})")
            print(f"compare: run {name} FAILED (exit {code}); continuing", flush=True)
    return failures


def calibrate(model, epochs_planned, runs, budget_s, largest, threads, dataset=""):
    """Times the plain loop briefly on this machine on the comparison's dataset for `model`
    (empty: the model's own); returns the sized examples per epoch."""
    data = [f"--dataset={dataset}"] if dataset else []
    record, wall = run_record([f"--model={model}", *data, "--epochs=2",
                               f"--train_examples={SIZE_QUANTUM * 2}", f"--threads={threads}"],
                              "experiments.comparison.floor")
    rate = record["steady_state"]["examples_per_sec"]["median"]
    overhead = max(0.0, wall - sum(e["time_s"] for e in record["epochs"][1:]))
    size = calibrated_size(budget_s, runs, epochs_planned, rate, overhead, largest)
    print(f"compare: {model} runs at {rate:.0f} examples/s on {threads} thread(s), "
          f"{overhead:.1f} s per run besides epochs: {size} examples per epoch for {runs} runs "
          f"in about {budget_s / 60:g} min", flush=True)
    print("  (--time_budget_min sets the time, --train_examples the size)", flush=True)
    return size

"""Whether the host gives this machine's K usable cores to K busy processes at once: one pinned
process per core multiplying float32 matrices (single-threaded numpy), its work counted in short
windows, against the same loop alone on one core.

    python -m experiments.bench.host_check --seconds=60        # by hand
    python -m experiments.compare ...                          # checks before and after its runs

Why: a VM's vCPUs are threads of its host. On the 2-vCPU VM this toolkit is measured on, two such
processes at once ran at about half speed each in 6 of 68 half-second samples while one alone
held its speed in all but one (docs/benchmarks.md, "The host's cores under load": a hypothesis
is that the host ran both vCPUs on one core's hardware at times; the guest's steal counter
moved far less than the time lost). A local cluster's N workers are such processes (so are a
PSS N=1 run's worker, ps and chief, and one process on every core); one-core runs (the 1-thread
baseline, MWMS N=1) are not, and no calibration measured at another moment sees an episode
between its own seconds. The check says whether, and how often, it happened around a comparison.

A window's capacity = the K processes' summed work / (K x the alone rate): 1 when the host gave
every core, 0.5 when K vCPUs did the work of K/2 cores. No TensorFlow: the children import numpy
only, with one BLAS thread each.
"""
import os
import statistics
import subprocess
import sys
import time

from results.host_check import LOW

_SIZE = 256  # matrix side: ~0.3 ms a product on one AVX-512 core, dense FMA work as TF's kernels
_CHILD = "from experiments.measure.host_cores import busy_main; busy_main()"
SECONDS, WINDOW_S = 5.0, 0.25  # the comparison's check; the bench's defaults too


def busy_main():
    """A child: `-c _CHILD core seconds window_s`. Pinned to `core`, ready (numpy loaded, one
    product made) it prints "ready", reads the common start (time.monotonic(), system-wide on
    Linux) from stdin, then prints the products it completed in each window, one per line."""
    from tf_config.task_process import die_with_parent

    die_with_parent()  # a killed parent (Ctrl-C, SIGKILL) leaves no busy child behind
    core, seconds, window = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    os.sched_setaffinity(0, {core})
    import numpy as np

    a = np.random.default_rng(core).random((_SIZE, _SIZE), dtype=np.float32)
    b = a.T.copy()
    a @ b  # the first product outside the windows (page-in, BLAS start-up)
    print("ready", flush=True)
    start = float(sys.stdin.readline())
    counts = [0] * max(1, round(seconds / window))
    end = start + len(counts) * window
    while time.monotonic() < start:
        time.sleep(min(0.005, max(0.0, start - time.monotonic())))
    now = time.monotonic()
    while now < end:
        a @ b
        now = time.monotonic()
        i = int((now - start) / window)
        if i < len(counts):
            counts[i] += 1
    print("\n".join(map(str, counts)), flush=True)


def _run(cores, seconds, window_s):
    """One busy child per core, started together once every one is ready; returns each one's
    rates per window (products per second)."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1"}
    procs = []
    try:
        for c in cores:
            procs.append(subprocess.Popen(
                [sys.executable, "-c", _CHILD, str(c), repr(seconds), repr(window_s)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env))
        for p in procs:
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"host check: a busy process did not start (exit code "
                                   f"{p.wait()})")
        start = time.monotonic() + 0.05
        for p in procs:
            p.stdin.write(f"{start!r}\n")
            p.stdin.flush()
        outs = [p.communicate(timeout=seconds + 60)[0] for p in procs]
    finally:  # on a failure, a timeout or Ctrl-C no child is left running
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if any(p.returncode for p in procs):
        raise RuntimeError(f"host check: a busy process failed (exit codes "
                           f"{[p.returncode for p in procs]})")
    return [[int(x) / window_s for x in out.split()] for out in outs]


def summarize(alone, windows, window_s):
    """alone: rates of one process alone (a list per core measured); windows: each at-once
    process's rates per window. Returns the check's figures (docs/records.md, host_check.json)."""
    solo = statistics.median(r for rates in alone for r in rates)
    if solo <= 0:
        raise RuntimeError("host check: one process alone completed no product in a window")
    k = len(windows)
    capacity = [sum(rates) / (k * solo) for rates in zip(*windows)]
    longest = run = 0
    for c in capacity:
        run = run + 1 if c < LOW else 0
        longest = max(longest, run)
    ordered = sorted(capacity)
    return {"processes": k, "window_s": window_s, "seconds": len(capacity) * window_s,
            "alone_per_second": solo,
            "capacity": {"median": statistics.median(capacity), "min": ordered[0],
                         "p10": ordered[int(0.1 * (len(ordered) - 1))]},
            "low_share": sum(c < LOW for c in capacity) / len(capacity),
            "longest_low_s": longest * window_s,
            "windows": [round(c, 3) for c in capacity]}


def measure(seconds=SECONDS, window_s=WINDOW_S, cores=None):
    """The check: one process alone on each of (at most) two of the cores, then one on every
    core at once for `seconds`. cores: the usable ones (this process's affinity) by default;
    at least two (with one, the check would compare a core with itself)."""
    cores = sorted(cores or os.sched_getaffinity(0))
    if len(cores) < 2:
        raise ValueError(f"the host check needs 2 or more usable cores; this process has "
                         f"{len(cores)} ({cores})")
    alone_s = min(1.0, max(window_s, seconds / 4))
    alone = [_run([c], alone_s, window_s)[0] for c in cores[:2]]
    return summarize(alone, _run(cores, seconds, window_s), window_s)

"""Whether the host gives this machine's K usable cores to K busy processes at once: one pinned
process per core multiplying float32 matrices (single-threaded numpy), its rate counted in short
windows, against the same loop alone on one core.

    python -m experiments.bench.host_check --seconds=60        # by hand, with a verdict
    python -m experiments.compare ...                          # checks before and after its runs

Why: a VM's vCPUs are threads on its host. On the 2-vCPU VM this toolkit is measured on, one
process alone always ran at full speed, while two at once ran, for episodes of a minute or two,
at half speed each every other second (the host's steal counter all but still): the two vCPUs
then did one core's work (docs/benchmarks.md, "The host's cores under load"). A local cluster's
N workers are such processes, so their figures can fall by up to half while single-process
figures (the baseline, N=1) do not; no calibration measured at another moment predicts that.
The check says whether, and how often, it happened around a comparison.

A window's capacity = the K processes' summed rate / (K x the alone rate): 1 when the host gave
every core, 0.5 when K vCPUs did the work of K/2 cores. No TensorFlow: the children import
numpy only, with one BLAS thread each.
"""
import os
import statistics
import subprocess
import sys
import time

from results.host_check import LOW  # a window below it lost more than a quarter of the cores
_SIZE = 256  # matrix side: ~0.3 ms a product on one AVX-512 core, dense FMA work as TF's kernels
_CHILD = "from experiments.measure.host_cores import busy_main; busy_main()"


def busy_main():
    """A child: `-c _CHILD core start seconds window_s`; pinned to `core`, waits for wall time
    `start`, then prints the products it completed in each window (one count per line)."""
    core, start, seconds, window = int(sys.argv[1]), *map(float, sys.argv[2:5])
    os.sched_setaffinity(0, {core})
    import numpy as np

    a = np.random.default_rng(core).random((_SIZE, _SIZE), dtype=np.float32)
    b = a.T.copy()
    a @ b  # first call outside the windows (page-in, BLAS start-up)
    counts = [0] * max(1, round(seconds / window))
    while time.time() < start:
        time.sleep(min(0.01, max(0.0, start - time.time())))
    end = start + len(counts) * window
    now = time.time()
    while now < end:
        a @ b
        now = time.time()
        i = int((now - start) / window)
        if i < len(counts):
            counts[i] += 1
    print("\n".join(map(str, counts)), flush=True)


def _run(cores, seconds, window_s):
    """Runs one busy child per core, all starting together; returns each one's rates per window
    (products per second)."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1"}
    start = time.time() + 0.6  # the children's numpy import happens before it
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, str(c), repr(start), repr(seconds),
                               repr(window_s)], stdout=subprocess.PIPE, text=True, env=env)
             for c in cores]
    try:
        outs = [p.communicate(timeout=seconds + 60)[0] for p in procs]
    finally:
        for p in procs:  # on a timeout or Ctrl-C no child is left running
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


def measure(seconds=5.0, window_s=0.25, cores=None):
    """The check: one process alone on each of (at most) two of the cores, then one on every
    core at once for `seconds`. cores: the usable ones (this process's affinity) by default."""
    cores = sorted(cores or os.sched_getaffinity(0))
    alone_s = min(1.0, max(window_s, seconds / 4))
    alone = [_run([c], alone_s, window_s)[0] for c in cores[:2]]
    return summarize(alone, _run(cores, seconds, window_s), window_s)


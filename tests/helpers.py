"""Running the toolkit's entry points as users do: in a subprocess, from the repository root."""
import glob
import json
import os
import subprocess
import sys

import numpy as np
import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--epochs=2", "--train_examples=512", "--eval_examples=512", "--batch_size_per_replica=32",
        "--cluster_timeout=120"]
# For tests that check neither the communication probe nor the compute probe: they add ~9 s to
# a 2-worker run of a small transformer (35.6 against 27.0 s, 2026-11-26)
NO_PROBES = ["--nocomm_probe", "--nocompute_probe"]
FAST = [*TINY, *NO_PROBES]

# Tolerances of the tests that compare training across strategies, batch shapes, devices or
# processes, from the dtype, not from one machine. Two ways of computing a step (a pipeline, K
# accumulated micro-batches, another worker count) compute the same sums in another order, with
# other kernels (oneDNN or Eigen, AVX2 or AVX-512, chosen by batch shape and thread pool): they
# differ by rounding, ~eps per operation, and training amplifies that. 16 float32 SGD steps
# turned it into 9.7e-3 on an AVX-512 CPU (~1.6e5 x eps). Such tests therefore train in float64
# (--float_dtype=float64), where the same amplification leaves < 4e-11: 1e7 x eps (2.2e-9)
# keeps a 50x margin and sits orders of magnitude below each test's control. One float32 step
# has no amplification: a reordered sum of k terms differs by a few eps x sqrt(k) (measured: 12
# eps); sqrt(eps) (3.5e-4) leaves room for a rare ReLU input within rounding of 0.
TOLERANCE_FLOAT64 = 1e7 * float(np.finfo(np.float64).eps)
TOLERANCE_FLOAT32_ONE_STEP = float(np.sqrt(np.finfo(np.float32).eps))


def run_module(module, *args, env=None, timeout=600):
    full_env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    if env is None or "TF_CONFIG" not in env:
        full_env.pop("TF_CONFIG", None)
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def can_shape():
    """Whether this machine can emulate a network (a private namespace and tc tbf): the tests
    that shape one skip without."""
    from tf_config import netns, netshape

    try:
        netns.check_shaping(0.1, 0)
        return True
    except netshape.ShapingUnavailable:
        return False


def records_in(results_dir):
    paths = sorted(glob.glob(os.path.join(str(results_dir), "records", "*.json")))
    out = []
    for p in paths:
        with open(p) as f:
            out.append(json.load(f))
    return out


def processes_mentioning(text):
    """Live processes whose command line contains `text` (e.g. a test's unique results dir)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if any(text in part for part in (proc.info["cmdline"] or [])):
                found.append(proc.info["pid"])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return [p for p in found if p != os.getpid()]


def run_script(script, timeout=600):
    """The JSON a `python -c script` prints on its `RESULT ` line, run in the test session's
    environment (conftest: the entry points' TF settings, oneDNN on unless the user turned it
    off), as a user's run has it: for tests that split the CPU into logical devices, which only
    a fresh process can."""
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def max_diff(a, b):
    """The largest |a - b| over two lists of weight tensors."""
    return max(float(np.max(np.abs(np.array(x) - np.array(y)))) for x, y in zip(a, b))


def update_error(run, reference):
    """The largest, over weight tensors, of |update - reference update| / |reference update|
    (runs: {"initial": weights, "weights": weights}). Left out: tensors whose reference update
    is rounding noise (below TOLERANCE_FLOAT32_ONE_STEP x the largest update), e.g. attention's
    key biases, whose gradient is 0 in exact arithmetic (softmax ignores what a key bias adds
    to every score of a query)."""
    updates = [(np.array(w) - np.array(w0), np.array(r) - np.array(r0))
               for w, w0, r, r0 in zip(run["weights"], run["initial"], reference["weights"],
                                       reference["initial"])]
    largest = max(np.linalg.norm(r) for _, r in updates)
    return max(float(np.linalg.norm(u - r) / np.linalg.norm(r)) for u, r in updates
               if np.linalg.norm(r) > TOLERANCE_FLOAT32_ONE_STEP * largest)

"""Running the toolkit's entry points as users do: in a subprocess, from the repository root."""
import glob
import json
import os
import subprocess
import sys

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--epochs=2", "--train_examples=512", "--eval_examples=512", "--batch_size_per_replica=32",
        "--cluster_timeout=120"]


def run_module(module, *args, env=None, timeout=600):
    full_env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    if env is None or "TF_CONFIG" not in env:
        full_env.pop("TF_CONFIG", None)
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


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

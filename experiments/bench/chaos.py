"""Chaos benchmark (not a test): short PSS and MWMS runs, each with one task killed from outside
at a random moment (start-up included), as a lost machine (SIGKILL) or a preemption (SIGTERM).

    python -m experiments.bench.chaos --runs=20 --seed=1        # ~6 minutes on 2 vCPUs

First one clean run per strategy measures how long a run takes (W); each chaos run then picks a
strategy, a task (worker, ps or chief), a moment uniform in [0, W] after the command started, a
signal (SIGKILL 70 %, SIGTERM 30 %) and whether it checkpoints (--checkpoint_dir, 75 %). Per run it
prints what happened under tf_config/recovery.py's policy:
    survived    a PSS worker was restarted alone, the run completed
    recovered   the whole cluster restarted from the last checkpoint, the run completed
    unaffected  the signal found no running task, or came after the chief finished
    failed      as designed: a task the policy does not restart without checkpoints was lost
    UNEXPECTED  anything else (a failure the policy should have recovered from, a hang, a leftover)
with steps lost, the recovery time (loss to the next step) and processes left (must be 0).
Writes the table to --results_dir/chaos.csv.
"""
import csv
import glob
import io
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import psutil
from absl import app, flags

from experiments.config.cli import parse_flags
from results.records.store import write_text_atomic
from tf_config.events import RUN_TAG_ENV, running_tasks

_RUNS = flags.DEFINE_integer("runs", 20, "Chaos runs.", lower_bound=1)
_SEED = flags.DEFINE_integer("seed", 1, "Seed of the random choices.")
_RESULTS_DIR = flags.DEFINE_string("results_dir", "runs/chaos", "Where each run and chaos.csv go.")
_MAX_RESTARTS = flags.DEFINE_integer("max_restarts", 3, "Passed to every run.", lower_bound=0)
_TIMEOUT = flags.DEFINE_float("timeout", 300.0, "Seconds before a run counts as hung.")

# Long enough that a random moment often falls into training, short enough for 20 runs.
_JOB = ["--model=mlp", "--epochs=3", "--train_examples=4096", "--eval_examples=512",
        "--batch_size_per_replica=32", "--notensorboard", "--nocomm_probe"]
_STRATEGIES = {
    "parameter_server": (["--strategy=parameter_server", "--num_workers=2", "--num_ps=1"],
                         ["worker:0", "worker:1", "ps:0", "chief:0"]),
    "multi_worker_mirrored": (["--strategy=multi_worker_mirrored", "--num_workers=2"],
                              ["worker:0", "worker:1"]),
}
_COLUMNS = ["run", "strategy", "task", "signal", "at_s", "checkpoints", "outcome", "restarts",
            "steps_lost", "recovery_s", "extra_wall_s", "left", "note"]


def _launch(strategy, run_dir, tag, checkpoints):
    argv = [sys.executable, "-m", "experiments.run", *_STRATEGIES[strategy][0], *_JOB,
            f"--results_dir={run_dir}", f"--max_restarts={_MAX_RESTARTS.value}"]
    if checkpoints:
        argv += [f"--checkpoint_dir={run_dir}/ckpt", "--checkpoint_every_steps=20"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", RUN_TAG_ENV: tag}
    env.pop("TF_CONFIG", None)
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def _wait(proc):
    try:
        out, _ = proc.communicate(timeout=_TIMEOUT.value)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out


def _leftovers(tag, run_dir):
    left = set(p.pid for p in running_tasks(tag).values())
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if any(run_dir in part for part in (proc.info["cmdline"] or [])):
                left.add(proc.info["pid"])
        except psutil.Error:
            pass
    return len(left)


def _strike(tag, task, delay, sig, struck):
    """After `delay` seconds, sends `sig` to `task` of the launch tagged `tag` if it is running."""
    time.sleep(delay)
    victim = running_tasks(tag).get(task)
    if victim is not None:
        try:
            victim.send_signal(sig)
            struck.append(True)
        except psutil.Error:
            pass


def _classify(code, out, record, checkpoints, struck):
    """(outcome, note)."""
    restarts = (record or {}).get("restarts") or []
    if code is None:
        return "UNEXPECTED", "hung: killed after --timeout"
    if code == 0:
        if any(r["action"] == "cluster" for r in restarts):
            return "recovered", ""
        if restarts:
            return "survived", ""
        return "unaffected", "no task running" if not struck else "after the chief finished"
    failed = re.search(r"launch: FAILED: (.*)", out)
    message = failed.group(1) if failed else out.strip().splitlines()[-1:] or ["?"]
    if not checkpoints and failed and "--checkpoint_dir turns on" in message:
        return "failed", message.split(";")[0]
    return "UNEXPECTED", f"exit {code}: {message if failed else message[0]}"[:120]


def _row(index, strategy, task, sig, at_s, checkpoints, base_wall, run_dir):
    tag = f"chaos-{os.getpid()}-{index}"
    struck = []
    start = time.monotonic()
    proc = _launch(strategy, run_dir, tag, checkpoints)
    striker = threading.Thread(target=_strike, args=(tag, task, at_s, sig, struck), daemon=True)
    striker.start()
    code, out = _wait(proc)
    wall = time.monotonic() - start
    striker.join()
    time.sleep(1.0)  # the launcher's SIGKILLs of a stopped cluster land asynchronously
    left = _leftovers(tag, run_dir)
    record = None
    for path in glob.glob(os.path.join(run_dir, "records", "*.json")):  # at most one: the chief's
        with open(path) as f:
            record = json.load(f)
    outcome, note = _classify(code, out, record, checkpoints, struck)
    if left:
        outcome, note = "UNEXPECTED", f"{left} process(es) left; {note}"
    restarts = (record or {}).get("restarts") or []
    recovery = [r["recovery_s"] for r in restarts if r.get("recovery_s") is not None]
    with open(os.path.join(run_dir, "output.txt"), "w") as f:
        f.write(out)
    return {"run": index, "strategy": strategy, "task": task, "signal": sig.name,
            "at_s": round(at_s, 1), "checkpoints": checkpoints, "outcome": outcome,
            "restarts": len(restarts),
            "steps_lost": sum(r["steps_lost"] or 0 for r in restarts) if restarts else "",
            "recovery_s": round(max(recovery), 1) if recovery else "",
            "extra_wall_s": round(wall - base_wall, 1) if code == 0 else "",
            "left": left, "note": note}


def _print_row(row):
    print("  ".join(f"{row[c]!s:>{w}}" for c, w in zip(_COLUMNS, (3, 21, 8, 7, 5, 5, 10, 2, 4,
                                                                  5, 5, 2, 0))), flush=True)


def main(argv):
    del argv
    rng = random.Random(_SEED.value)
    root = os.path.abspath(_RESULTS_DIR.value)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    base = {}
    for strategy in _STRATEGIES:  # how long a clean run takes: the window a fault can hit
        run_dir = os.path.join(root, f"clean-{strategy}")
        start = time.monotonic()
        code, out = _wait(_launch(strategy, run_dir, f"chaos-{os.getpid()}-clean", True))
        if code != 0:
            sys.exit(f"clean {strategy} run failed:\n{out[-2000:]}")
        base[strategy] = time.monotonic() - start
        print(f"clean {strategy}: {base[strategy]:.1f}s", flush=True)
    print("  ".join(f"{c:>{w}}" for c, w in zip(_COLUMNS, (3, 21, 8, 7, 5, 5, 10, 2, 4, 5, 5, 2,
                                                           0))), flush=True)
    rows = []
    for index in range(1, _RUNS.value + 1):
        strategy = rng.choice(sorted(_STRATEGIES))
        task = rng.choice(_STRATEGIES[strategy][1])
        sig = signal.SIGKILL if rng.random() < 0.7 else signal.SIGTERM
        at_s = rng.uniform(0.0, base[strategy])
        checkpoints = rng.random() < 0.75
        row = _row(index, strategy, task, sig, at_s, checkpoints, base[strategy],
                   os.path.join(root, f"run-{index:02d}"))
        rows.append(row)
        _print_row(row)
    counts = {}
    for row in rows:
        counts[row["outcome"]] = counts.get(row["outcome"], 0) + 1
    print("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(f"processes left after all runs: {sum(r['left'] for r in rows)}")
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=_COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(os.path.join(root, "chaos.csv"), text.getvalue())
    with open(os.path.join(root, "clean_runs.json"), "w") as f:
        json.dump(base, f)
    return 1 if counts.get("UNEXPECTED") else 0


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)

"""A tiny end-to-end comparison: records, summary.csv, report.md, plots; rebuilt from records."""
import csv
import json
import os

import pytest

from results.records import metrics
from tests.helpers import processes_mentioning, records_in, run_module

pytestmark = pytest.mark.integration


def test_tiny_comparison_and_rebuild(tmp_path):
    args = ["--models=mlp", "--workers=2", "--strategies=mirrored,multi_worker_mirrored",
            "--train_examples=1024", "--epochs=2", f"--results_dir={tmp_path}"]
    proc = run_module("experiments.compare", *args, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "run 7/7" in proc.stdout and "left" in proc.stdout  # progress with an estimate
    assert "cuInit" not in proc.stdout  # start-up chatter stays out of the console
    # the terminal ends with the decision (the report's first lines), then where the files are
    lines = proc.stdout.splitlines()
    # the toolkit's wording within the limit; the paths in it are the user's (pytest's are long)
    shown = [line.replace(str(tmp_path), "runs/compare") for line in lines]
    assert max(len(line) for line in shown) <= 160, max(shown, key=len)
    assert lines[-1].startswith("wrote ") and lines[-1].endswith(f"read {tmp_path}/report.md")
    decision = [line.strip() for line in lines[-9:-1] if line.startswith("  ")]
    assert decision[0].startswith("Use ") and 2 <= len(decision) <= 6
    recs = records_in(tmp_path)
    assert sorted(r["run_name"].split("/")[0] for r in recs) == [
        "baseline", "engine_floor", "engine_floor_all", "engine_floor_shared",
        "hardware_reference", "mirrored-n2", "multi_worker_mirrored-n2"]
    # every strategy's workers at N=2 got the same explicit threads; the baseline too
    threads = {r["run_name"].split("/")[0]: r["threads_per_task"] for r in recs}
    assert threads["baseline"] == threads["engine_floor"] == threads["engine_floor_shared"] == 1
    assert threads["multi_worker_mirrored-n2"] == 1 and threads["mirrored-n2"] == 2
    assert all(r["cpu"]["cores_used"] > 0 for r in recs)
    for name in ("summary.csv", "report.md", "epoch_time.png", "throughput_vs_workers.png",
                 "efficiency_vs_workers.png", "curves.png"):
        assert os.path.getsize(tmp_path / name) > 500, name
    # summary.csv agrees with the definitions recomputed from the records themselves
    steady = {r["run_name"].split("/")[0]: metrics.steady_state(r["epochs"])["epoch_time_s"]["median"]
              for r in recs}
    with open(tmp_path / "summary.csv") as f:
        rows = {r["strategy"] + r["role"]: r for r in csv.DictReader(f)}
    t1, t2 = steady["baseline"], steady["multi_worker_mirrored-n2"]
    mw = rows["multi_worker_mirroredstrategy"]
    assert float(mw["speedup"]) == pytest.approx(t1 / t2)
    assert float(mw["scaling_percent"]) == pytest.approx(t1 / (2 * t2) * 100)
    assert float(mw["efficiency"]) == pytest.approx(t1 / t2 / 2)
    # the sharing calibration, right before the 2-worker cluster, is the machine's limit row
    # and the measured profile's slowdown at K=2
    report = (tmp_path / "report.md").read_text()
    assert "engine_floor (2 plain TF loops at once, 1 thread each)" in report
    assert "The machine's limit for 2 workers" in report
    (profile,) = tmp_path.glob("profile-mlp-1024-*.json")
    assert json.loads(profile.read_text())["sharing"]["2"]["slowdown"] > 0

    # resume: nothing left to run
    again = run_module("experiments.compare", *args, timeout=300)
    assert again.returncode == 0 and "7 already recorded, 0 to go" in again.stdout
    # (other settings are other runs even with the same cell names: test_plan.py's
    # test_a_cell_is_done_only_with_the_same_flags)
    # the report alone rebuilds everything from the records
    os.remove(tmp_path / "summary.csv")
    os.remove(tmp_path / "curves.png")
    rebuilt = run_module("experiments.report", f"--results_dir={tmp_path}", timeout=300)
    assert rebuilt.returncode == 0, rebuilt.stderr[-2000:]
    assert (tmp_path / "summary.csv").exists() and (tmp_path / "curves.png").exists()
    assert not processes_mentioning(str(tmp_path))


@pytest.mark.parametrize("args, fragment", [
    (["--workers=1,x"], "--workers=1,x"),
    (["--experiments=speed"], "choose from scaling, straggler"),
    (["--repeats=0"], "--repeats=0"),
    (["--network_gbps=0"], "--network_gbps=0"),
    (["--experiments=straggler", "--straggler_delays=0,-5"], "--straggler_delays=0,-5"),
    (["--experiments=straggler", "--strategies=mirrored"], "needs multi_worker_mirrored"),
])
def test_compare_bad_input_exits_2(tmp_path, args, fragment):
    proc = run_module("experiments.compare", *args, f"--results_dir={tmp_path}/o", timeout=120)
    assert proc.returncode == 2 and fragment in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "o").exists()


def test_report_bad_input_exits_2(tmp_path):
    for args, fragment in ((["--network_latency_us=-1"], "--network_latency_us=-1"),
                           ([], "no readable records")):
        proc = run_module("experiments.report", *args, f"--results_dir={tmp_path}", timeout=120)
        lines = [l for l in proc.stderr.splitlines() if l.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and fragment in lines[0], proc.stderr
    assert not list(tmp_path.iterdir())


def test_a_terminated_comparison_stops_its_running_cell_and_cluster(tmp_path):
    """SIGTERM to experiments.compare (kill, a pod's stop) while an MWMS cell trains: the cell's
    launcher and both workers are stopped too, and nothing is recorded for the cell."""
    import signal
    import subprocess
    import sys
    import time

    from tests.helpers import ROOT

    proc = subprocess.Popen(
        [sys.executable, "-m", "experiments.compare", "--models=mlp", "--workers=2",
         "--strategies=multi_worker_mirrored", "--experiments=straggler",
         "--straggler_delays=0", "--train_examples=65536", "--epochs=5",
         f"--results_dir={tmp_path}"], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(processes_mentioning(str(tmp_path))) < 4:
            time.sleep(0.5)  # compare, the cell's launcher, its 2 workers
        assert len(processes_mentioning(str(tmp_path))) >= 4
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and processes_mentioning(str(tmp_path)):
            time.sleep(0.5)
        assert not processes_mentioning(str(tmp_path))
        assert not records_in(tmp_path)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)

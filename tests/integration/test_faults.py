"""Fault injection on real local clusters: PSS survives a lost worker, MWMS fails fast."""
import time

import pytest

from tests.helpers import TINY, processes_mentioning, records_in, run_module

pytestmark = pytest.mark.integration


def test_pss_run_survives_a_killed_worker(tmp_path):
    proc = run_module("experiments.run", "--strategy=parameter_server", "--num_workers=2",
                      "--num_ps=1", "--model=mlp", *TINY, "--fail_task=worker:1",
                      "--fail_at_step=10", f"--results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "launch: injecting fault: SIGKILL worker:1" in proc.stdout
    assert "task worker:1 was killed by signal 9; restarting it" in proc.stdout
    (record,) = records_in(tmp_path)
    assert record["faults_injected"] == [{"task": "worker:1", "at_step": 10}]
    assert [e["epoch"] for e in record["epochs"]] == [1, 2]  # every epoch, every step
    assert record["steps_per_epoch"] * record["global_batch_size"] == 512
    assert record["final_eval_accuracy"] > 0.3
    assert not processes_mentioning(str(tmp_path))


def test_mwms_fails_fast_when_a_worker_is_killed(tmp_path):
    start = time.monotonic()
    proc = run_module("experiments.run", "--strategy=multi_worker_mirrored", "--num_workers=2",
                      "--model=mlp", *TINY, "--epochs=50", "--fail_task=worker:1",
                      "--fail_at_step=5", f"--results_dir={tmp_path}")
    elapsed = time.monotonic() - start
    assert proc.returncode == 1
    assert "launch: FAILED: task worker:1 was killed by signal 9" in proc.stdout
    assert elapsed < 120, f"{elapsed:.0f}s: it did not stop within seconds of the fault"
    assert records_in(tmp_path) == []
    assert not processes_mentioning(str(tmp_path))


@pytest.mark.parametrize("args, fragment", [
    (["--fail_task=gpu:1", "--fail_at_step=3"], "not a task name"),
    (["--fail_task=worker:1"], "go together"),
    (["--fail_at_step=-1", "--fail_task=worker:0"], "--fail_at_step=-1"),
])
def test_bad_fault_flags(tmp_path, args, fragment):
    proc = run_module("experiments.run", "--strategy=multi_worker_mirrored", *args,
                      f"--results_dir={tmp_path / 'o'}", timeout=120)
    assert proc.returncode == 2 and fragment in proc.stderr
    assert not (tmp_path / "o").exists()

"""Fault injection on real local clusters: PSS survives a lost worker, MWMS fails fast."""
import re
import time

import pytest
import tensorflow as tf

from tests.helpers import TINY, processes_mentioning, records_in, run_module

pytestmark = pytest.mark.integration


def test_pss_run_survives_a_killed_worker(tmp_path):
    proc = run_module("experiments.run", "--strategy=parameter_server", "--num_workers=2",
                      "--num_ps=1", "--model=mlp", *TINY, "--fail_task=worker:1",
                      "--fail_at_step=10", f"--checkpoint_dir={tmp_path / 'ckpt'}",
                      "--checkpoint_every_steps=4", f"--results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "launch: injecting fault: SIGKILL worker:1" in proc.stdout
    assert "task worker:1 was killed by signal 9; restarting it" in proc.stdout
    (record,) = records_in(tmp_path)
    assert record["faults_injected"] == [{"task": "worker:1", "at_step": 10, "mode": "kill"}]
    # A checkpoint every 4 steps (the chief joins the scheduled steps first), epoch ends falling
    # on the same steps: 2 epochs x 16 steps -> 8 saves, the last one after all 32 steps.
    latest = tf.train.latest_checkpoint(str(tmp_path / "ckpt"))
    assert latest.endswith("ckpt-8")
    assert tf.train.load_variable(latest, "steps_done/.ATTRIBUTES/VARIABLE_VALUE") == 32
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
    (["--strategy=one_device", "--fail_task=worker:0", "--fail_at_step=3"], "needs a cluster"),
    (["--fail_task=worker:1", "--fail_at_step=3", "--fail_mode=reboot"], "kill, preempt"),
    (["--checkpoint_every_steps=5"], "needs --checkpoint_dir"),
    (["--checkpoint_every_steps=-1", "--checkpoint_dir=/tmp/x"], "--checkpoint_every_steps=-1"),
    (["--straggler_task=worker:1"], "go together"),
    (["--straggler_task=ps:0", "--straggler_delay_ms=10", "--num_workers=2"], "is not a worker"),
    (["--straggler_task=worker:2", "--straggler_delay_ms=10", "--num_workers=2"],
     "worker:0..worker:1"),
    (["--straggler_task=worker:0", "--straggler_delay_ms=-5", "--num_workers=2"], "(0, 60000]"),
    (["--strategy=mirrored", "--straggler_task=worker:0", "--straggler_delay_ms=5"],
     "needs a cluster"),
])
def test_bad_fault_flags(tmp_path, args, fragment):
    proc = run_module("experiments.run", "--strategy=multi_worker_mirrored", *args,
                      f"--results_dir={tmp_path / 'o'}", timeout=120)
    assert proc.returncode == 2 and fragment in proc.stderr
    assert not (tmp_path / "o").exists()


def test_mwms_lost_worker_then_resume_from_checkpoint(tmp_path):
    """8 steps per epoch (512 examples, global batch 64), a checkpoint every 5 steps: the worker
    killed at step 12 (epoch 2) loses the steps after the last 5-step checkpoint, no more."""
    common = ["--strategy=multi_worker_mirrored", "--num_workers=2", "--model=mlp", *TINY,
              "--epochs=3", f"--checkpoint_dir={tmp_path / 'ckpt'}", "--checkpoint_every_steps=5",
              f"--results_dir={tmp_path}"]
    failed = run_module("experiments.run", *common, "--fail_task=worker:1", "--fail_at_step=12")
    assert failed.returncode == 1 and "task worker:1 was killed by signal 9" in failed.stdout
    assert records_in(tmp_path) == [] and not processes_mentioning(str(tmp_path))
    resumed = run_module("experiments.run", *common)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "resumed from" in resumed.stdout
    (record,) = records_in(tmp_path)
    # The chief may have reached the step-15 save before the kill landed; never further.
    assert record["resumed_from_step"] in (10, 15)
    assert [e["epoch"] for e in record["epochs"]] == [1, 2, 3]
    assert record["resumed_epochs"] == [1]
    assert record["epochs"][1]["resumed_at_step"] == record["resumed_from_step"] - 8
    assert record["epochs"][1]["steps"] == 16 - record["resumed_from_step"]
    assert record["steady_state"]["epochs_used"] == [3]  # 1 is from the lost run, 2 traced
    assert record["final_eval_accuracy"] > 0.3
    assert not processes_mentioning(str(tmp_path))


def test_mwms_preempted_worker_saves_then_resumes_without_losing_a_step(tmp_path):
    """SIGTERM (a preemption notice) to worker:1: PreemptionCheckpointHandler makes both workers
    save at the same step and exit 75; the rerun continues from exactly that step."""
    common = ["--strategy=multi_worker_mirrored", "--num_workers=2", "--model=mlp", *TINY,
              "--epochs=3", f"--checkpoint_dir={tmp_path / 'ckpt'}", f"--results_dir={tmp_path}"]
    preempted = run_module("experiments.run", *common, "--fail_task=worker:1",
                           "--fail_at_step=12", "--fail_mode=preempt")
    assert preempted.returncode == 75, preempted.stdout[-3000:] + preempted.stderr[-3000:]
    assert "launch: injecting fault: SIGTERM worker:1" in preempted.stdout
    saved = re.findall(r"\[(worker:\d)\] preempted: checkpoint saved after step (\d+)",
                       preempted.stdout)
    assert sorted(w for w, _ in saved) == ["worker:0", "worker:1"]
    (step,) = {int(s) for _, s in saved}  # both at the same step
    assert 12 <= step <= 14  # the handler saves within a step or two of the notice
    assert records_in(tmp_path) == [] and not processes_mentioning(str(tmp_path))
    resumed = run_module("experiments.run", *common)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    (record,) = records_in(tmp_path)
    assert record["resumed_from_step"] == step  # no step lost
    assert [e["steps"] for e in record["epochs"]] == [8, 16 - step, 8]
    checksums = set(re.findall(r"weights checksum (\S+)", resumed.stdout))
    assert len(checksums) == 1  # both workers resumed the same state
    assert not processes_mentioning(str(tmp_path))


def test_resume_single_device_keeps_every_epoch(tmp_path):
    common = ["--strategy=one_device", "--model=mlp", *TINY, f"--checkpoint_dir={tmp_path / 'c'}"]
    first = run_module("experiments.run", *common, "--epochs=1", f"--results_dir={tmp_path / 'a'}")
    assert first.returncode == 0
    second = run_module("experiments.run", *common, "--epochs=3", f"--results_dir={tmp_path / 'b'}")
    assert second.returncode == 0, second.stderr[-2000:]
    (record,) = records_in(tmp_path / "b")
    assert [(e["epoch"], bool(e.get("resumed"))) for e in record["epochs"]] == [
        (1, True), (2, False), (3, False)]


def test_straggler_paces_mwms_but_not_pss(tmp_path):
    """worker:1 sleeps 150 ms before each of its batches. MWMS waits for it at every all-reduce,
    so its epoch takes at least ~(steps - 2) x 150 ms; PSS gives most steps to worker:0."""
    delay = ["--straggler_task=worker:1", "--straggler_delay_ms=150"]
    mwms = run_module("experiments.run", "--strategy=multi_worker_mirrored", "--num_workers=2",
                      "--model=mlp", *TINY, *delay, f"--results_dir={tmp_path / 'mwms'}")
    assert mwms.returncode == 0, mwms.stdout[-3000:] + mwms.stderr[-3000:]
    (record,) = records_in(tmp_path / "mwms")
    assert record["straggler"] == {"task": "worker:1", "delay_ms": 150.0}
    steps = record["steps_per_epoch"]  # 8: 512 examples, global batch 64
    # MWMS's distributed iterator buffers batches between epochs (measured: 2 per epoch arrive
    # already slept), so (steps - 2) sleeps are the lower bound of a steady epoch.
    assert record["epochs"][-1]["time_s"] >= (steps - 2) * 0.150
    pss = run_module("experiments.run", "--strategy=parameter_server", "--num_workers=2",
                     "--num_ps=1", "--model=mlp", *TINY, *delay,
                     f"--results_dir={tmp_path / 'pss'}")
    assert pss.returncode == 0, pss.stdout[-3000:] + pss.stderr[-3000:]
    (record,) = records_in(tmp_path / "pss")
    by_worker = record["steps_by_worker"]
    assert sum(by_worker.values()) == 2 * record["steps_per_epoch"]  # every step ran, once
    assert by_worker["worker:1"] < by_worker["worker:0"]
    assert not processes_mentioning(str(tmp_path))

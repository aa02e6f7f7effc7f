"""Fault injection on real local clusters: the launcher's restart policy (tf_config.recovery) in
every phase. PSS survives a lost worker; with --checkpoint_dir a lost MWMS worker, parameter server
or a preemption restarts the whole cluster from the last checkpoint; without, MWMS fails fast."""
import os
import re
import threading
import time

import pytest
import tensorflow as tf

from tests.helpers import FAST, processes_mentioning, records_in, run_module
from tf_config.events import RUN_TAG_ENV, running_tasks

pytestmark = pytest.mark.integration


def test_pss_run_survives_a_killed_worker(tmp_path):
    """worker:1 killed while the chief has steps scheduled ahead: the coordinator reschedules its
    step, the launcher restarts it alone, no step is lost.
    Each of worker:1's steps waits 2 s for its input (a straggler schedule of one delay: inside
    the step, nothing buffered ahead), so the kill, asked for at step 10, lands inside the step
    worker:1 took after the step-8 checkpoint fetched every result so far, however late the
    launcher delivers it. Landing after worker:1 finished a step whose result the chief had not
    fetched yet, it would fail the chief's fetch of that result (the result lives on the lost
    worker) and restart the whole cluster: the chief's fetching does not survive that yet, and
    this test is about the coordinator's rescheduling."""
    proc = run_module("experiments.run", "--strategy=parameter_server", "--num_workers=2",
                      "--num_ps=1", "--model=mlp", *FAST, "--fail_task=worker:1",
                      "--fail_at_step=10", f"--checkpoint_dir={tmp_path / 'ckpt'}",
                      "--checkpoint_every_steps=8", "--straggler_schedule=0:2000",
                      f"--results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "launch: injecting fault: SIGKILL worker:1" in proc.stdout
    assert re.search(r"launch: worker:1 lost at step \d+ \(killed by signal 9\); the coordinator "
                     r"reschedules its steps; restarting it \(restart 1/3\)", proc.stdout)
    # One line per event on the console; the coordinator's gRPC errors stay in the chief's log.
    assert "Connection refused" not in proc.stdout and "GRPC" not in proc.stdout
    (record,) = records_in(tmp_path)
    assert record["faults_injected"] == [{"task": "worker:1", "at_step": 10, "mode": "kill"}]
    (restart,) = record["restarts"]
    assert restart["task"] == "worker:1" and restart["action"] == "task"
    assert restart["steps_lost"] == 0 and restart["at_step"] >= 9  # PSS schedules ahead
    # A checkpoint every 8 steps (the chief joins the scheduled steps first), epoch ends falling
    # on the same steps: 2 epochs x 16 steps -> 4 saves, the last one after all 32 steps.
    latest = tf.train.latest_checkpoint(str(tmp_path / "ckpt"))
    assert latest.endswith("ckpt-4")
    assert tf.train.load_variable(latest, "steps_done/.ATTRIBUTES/VARIABLE_VALUE") == 32
    assert [e["epoch"] for e in record["epochs"]] == [1, 2]  # every epoch, every step
    assert record["steps_per_epoch"] * record["global_batch_size"] == 512
    assert record["final_eval_accuracy"] > 0.3
    assert not processes_mentioning(str(tmp_path))


def _kill_when_started(tag, name, found):
    """Kills task `name` of the launch tagged `tag` as soon as its process exists: before its
    port answers, while the cluster forms."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        task = running_tasks(tag).get(name)
        if task is not None:
            task.kill()
            found.append(time.monotonic())
            return
        time.sleep(0.05)


def test_pss_worker_killed_while_the_cluster_forms(tmp_path):
    tag = f"forming-{os.getpid()}"
    found = []
    killer = threading.Thread(target=_kill_when_started, args=(tag, "worker:0", found))
    killer.start()
    proc = run_module("experiments.run", "--strategy=parameter_server", "--num_workers=2",
                      "--num_ps=1", "--model=mlp", *FAST, f"--results_dir={tmp_path}",
                      env={RUN_TAG_ENV: tag})
    killer.join()
    assert found, "worker:0 never started"
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "launch: worker:0 lost before the first step (killed by signal 9)" in proc.stdout
    (record,) = records_in(tmp_path)
    (restart,) = record["restarts"]
    assert (restart["task"], restart["at_step"], restart["steps_lost"]) == ("worker:0", 0, 0)
    assert sum(record["steps_by_worker"].values()) == 2 * record["steps_per_epoch"]
    assert not running_tasks(tag) and not processes_mentioning(str(tmp_path))


def test_mwms_fails_fast_when_a_worker_is_killed(tmp_path):
    start = time.monotonic()
    proc = run_module("experiments.run", "--strategy=multi_worker_mirrored", "--num_workers=2",
                      "--model=mlp", *FAST, "--epochs=50", "--fail_task=worker:1",
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
    (["--fail_task=worker:1", "--fail_at_step=3", "--fail_mode=hang", "--watchdog_s=0"],
     "needs the watchdog on (--watchdog_s > 0, got 0)"),
    (["--watchdog_s=-1"], "--watchdog_s=-1"),
    (["--fail_task=worker:1", "--fail_at_step=2", "--fail_mode=hang", "--steps_per_execution=4"],
     "inside the first training call (steps 1..4), before the watchdog arms"),
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


# The fault lands where the test expects it however late the launcher delivers it: epoch 2's
# steps (9-16, where the fault is asked for before step 12) wait a second each for worker:1's
# input (a straggler schedule), the others run at full speed.
_SLOW_EPOCH_2 = "--straggler_schedule=0:0,1:1000,2:0"


def test_mwms_lost_worker_restarts_the_cluster_from_the_last_checkpoint(tmp_path):
    """8 steps per epoch (512 examples, global batch 64), a checkpoint every 5 steps: worker:1
    killed at step 12 (epoch 2); the launcher restarts both workers, which resume from the last
    5-step checkpoint and lose only the steps after it."""
    proc = run_module("experiments.run", "--strategy=multi_worker_mirrored", "--num_workers=2",
                      "--model=mlp", *FAST, "--epochs=3", f"--checkpoint_dir={tmp_path / 'ckpt'}",
                      "--checkpoint_every_steps=5", "--max_restarts=2", "--fail_task=worker:1",
                      "--fail_at_step=12", _SLOW_EPOCH_2, f"--results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert re.search(r"launch: worker:1 lost at step 1[12] \(killed by signal 9\); restarting the "
                     r"whole cluster from the last checkpoint \(restart 1/2\)", proc.stdout)
    assert re.search(r"launch: recovered in [\d.]+s: resumed from step 1[05]", proc.stdout)
    assert "Traceback" not in proc.stdout  # worker:0's all-reduce error: one line, not 60
    (record,) = records_in(tmp_path)
    (restart,) = record["restarts"]
    # The chief may have reached the step-15 save before the kill landed; never further.
    assert record["resumed_from_step"] in (10, 15)
    assert restart["resumed_from_step"] == record["resumed_from_step"]
    assert restart["steps_lost"] == restart["at_step"] - restart["resumed_from_step"] >= 0
    assert restart["task"] == "worker:1" and restart["action"] == "cluster"
    assert restart["recovery_s"] > 0
    assert record["faults_injected"] == [{"task": "worker:1", "at_step": 12, "mode": "kill"}]
    assert [e["epoch"] for e in record["epochs"]] == [1, 2, 3]
    assert record["resumed_epochs"] == [1]
    assert record["epochs"][1]["steps"] == 16 - record["resumed_from_step"]
    assert record["final_eval_accuracy"] > 0.3
    # Workers apply the same all-reduced updates with the same kernels (one machine, binary and
    # environment): equal to the bit on any CPU.
    assert len(set(re.findall(r"weights checksum (\S+)", proc.stdout))) == 1
    assert not processes_mentioning(str(tmp_path))


def test_lost_parameter_server_restarts_the_cluster_from_the_last_checkpoint(tmp_path):
    proc = run_module("experiments.run", "--strategy=parameter_server", "--num_workers=2",
                      "--num_ps=1", "--model=mlp", *FAST, "--epochs=3",
                      f"--checkpoint_dir={tmp_path / 'ckpt'}", "--checkpoint_every_steps=4",
                      "--max_restarts=2", "--fail_task=ps:0", "--fail_at_step=20",
                      f"--results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "launch: ps:0 lost at step " in proc.stdout
    (record,) = records_in(tmp_path)
    (restart,) = record["restarts"]
    assert restart["task"] == "ps:0" and restart["action"] == "cluster"
    # Checkpoints at multiples of 4 (the chief joins the scheduled steps first): at most the
    # steps scheduled since the last one are lost.
    assert restart["resumed_from_step"] % 4 == 0 and 0 <= restart["steps_lost"] <= 4 + 1
    assert [e["epoch"] for e in record["epochs"]] == [1, 2, 3]
    assert record["final_eval_accuracy"] > 0.3
    assert not processes_mentioning(str(tmp_path))


def test_mwms_preemption_restarts_the_cluster_without_losing_a_step(tmp_path):
    """SIGTERM (a preemption notice) to worker:1: PreemptionCheckpointHandler makes both workers
    save at the same step and exit 75; the launcher restarts them and they continue from exactly
    that step."""
    proc = run_module("experiments.run", "--strategy=multi_worker_mirrored", "--num_workers=2",
                      "--model=mlp", *FAST, "--epochs=3", f"--checkpoint_dir={tmp_path / 'ckpt'}",
                      "--fail_task=worker:1", "--fail_at_step=12", "--fail_mode=preempt",
                      _SLOW_EPOCH_2, f"--results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "launch: injecting fault: SIGTERM worker:1" in proc.stdout
    saved = re.findall(r"\[(worker:\d)\] preempted: checkpoint saved after step (\d+)",
                       proc.stdout)
    assert sorted(w for w, _ in saved) == ["worker:0", "worker:1"]
    (step,) = {int(s) for _, s in saved}  # both at the same step
    assert 12 <= step <= 14  # the handler saves within a step or two of the notice
    (record,) = records_in(tmp_path)
    (restart,) = record["restarts"]
    assert (restart["resumed_from_step"], restart["steps_lost"]) == (step, 0)
    assert record["resumed_from_step"] == step
    assert [e["steps"] for e in record["epochs"]] == [8, 16 - step, 8]
    assert not processes_mentioning(str(tmp_path))


def test_preemption_without_restarts_left_exits_75_and_a_rerun_resumes(tmp_path):
    common = ["--strategy=multi_worker_mirrored", "--num_workers=2", "--model=mlp", *FAST,
              "--epochs=3", f"--checkpoint_dir={tmp_path / 'ckpt'}", f"--results_dir={tmp_path}"]
    preempted = run_module("experiments.run", *common, "--fail_task=worker:1",
                           "--fail_at_step=12", "--fail_mode=preempt", "--max_restarts=0")
    assert preempted.returncode == 75, preempted.stdout[-3000:] + preempted.stderr[-3000:]
    assert "rerun the same command to resume" in preempted.stdout
    step = int(re.search(r"checkpoint saved after step (\d+)", preempted.stdout).group(1))
    assert records_in(tmp_path) == [] and not processes_mentioning(str(tmp_path))
    resumed = run_module("experiments.run", *common)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    (record,) = records_in(tmp_path)
    assert record["resumed_from_step"] == step  # no step lost
    assert record["restarts"] == []  # rerun by hand: a new launch
    checksums = set(re.findall(r"weights checksum (\S+)", resumed.stdout))
    assert len(checksums) == 1  # both workers resumed the same state
    assert not processes_mentioning(str(tmp_path))
    # The finished run, rerun: nothing to add, said in one line, and no second record (a
    # phantom repeat of the same epochs).
    again = run_module("experiments.run", *common)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "finished its 3 epoch(s) already (record " in again.stdout
    assert "nothing to add" in again.stdout
    assert "Epoch" not in again.stdout and len(records_in(tmp_path)) == 1
    assert not processes_mentioning(str(tmp_path))


def test_resume_single_device_keeps_every_epoch(tmp_path):
    common = ["--strategy=one_device", "--model=mlp", *FAST, f"--checkpoint_dir={tmp_path / 'c'}"]
    first = run_module("experiments.run", *common, "--epochs=1", f"--results_dir={tmp_path / 'a'}")
    assert first.returncode == 0
    second = run_module("experiments.run", *common, "--epochs=3", f"--results_dir={tmp_path / 'b'}")
    assert second.returncode == 0, second.stderr[-2000:]
    (record,) = records_in(tmp_path / "b")
    assert [(e["epoch"], bool(e.get("resumed"))) for e in record["epochs"]] == [
        (1, True), (2, False), (3, False)]
    assert record["resumed_epochs"] == [1] and record["epochs_timed_here"] == [2, 3]
    # Resumed on an epoch's boundary (no epoch partly restored): the record still says from
    # which step, as it does for a preemption whose checkpoint lands on a boundary.
    assert record["resumed_from_step"] == record["steps_per_epoch"]
    # A run that finished training but died before its record (e.g. a peer lost during the
    # probe) still writes it when rerun: no epoch trained again, none claimed as timed here.
    (tmp_path / "c" / "record_written.json").unlink()
    (tmp_path / "b" / "records").rename(tmp_path / "b" / "first")
    third = run_module("experiments.run", *common, "--epochs=3", f"--results_dir={tmp_path / 'b'}")
    assert third.returncode == 0, third.stderr[-2000:]
    assert "Epoch" not in third.stdout
    (late,) = records_in(tmp_path / "b")
    assert late["resumed_epochs"] == [1, 2, 3] and late["epochs_timed_here"] == []
    assert late["resumed_from_step"] == 3 * late["steps_per_epoch"]


def _log_dir(stdout):
    (path,) = re.findall(r"launch: every task's full output is in (\S+)", stdout)
    return path


@pytest.mark.parametrize("strategy, extra, waiting", [
    ("multi_worker_mirrored", [], "worker:0 waits inside TensorFlow at experiments/engine/"),
    ("parameter_server", ["--num_ps=1"],
     "chief:0 waits inside TensorFlow at experiments/engine/")])
def test_hung_worker_is_named_by_the_watchdog(tmp_path, strategy, extra, waiting):
    """worker:1 frozen (SIGSTOP) at step 2: no step completes; after max(--watchdog_s, k x the
    median step) every task writes its stacks to its log and the launcher fails in one line
    naming the frozen task and where the others wait; nothing is left running. Step 2 is the
    first step the watchdog times (step 1 traces and arms it): with no healthy step timed before
    the frozen one, a busy machine leaves the 4 s nothing else to catch."""
    proc = run_module("experiments.run", f"--strategy={strategy}", "--num_workers=2", *extra,
                      "--model=mlp", *FAST, "--fail_task=worker:1", "--fail_mode=hang",
                      "--fail_at_step=2", "--watchdog_s=4", f"--results_dir={tmp_path}")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "launch: injecting fault: SIGSTOP worker:1" in proc.stdout
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("launch: FAILED: hung: ")]
    assert re.search(r"no training step completed for \d+s after step \d+ \(the watchdog's "
                     r"limit: max\(--watchdog_s=4, 20 x the median [\d.]+ ms between steps\) = "
                     r"\d+s\); worker:1 is stopped \(process state stopped", line)
    assert waiting in line and line.endswith("their Python stacks are in their logs")
    log = open(os.path.join(_log_dir(proc.stdout), "worker-0.log" if strategy.startswith(
        "multi") else "chief-0.log")).read()
    assert "--- watchdog: " in log and "(most recent call first):" in log
    assert 'experiments/engine/training.py", line' in log
    assert not [n for n in os.listdir(_log_dir(proc.stdout)) if n.endswith(".stacks")]
    assert records_in(tmp_path) == []
    assert not processes_mentioning(str(tmp_path))

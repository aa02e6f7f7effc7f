"""The timestamps inside every worker's step on real local clusters (experiments/engine/
step_clock.py, results/records/step_stamps.py): a worker slowed on purpose is the one named, under
MWMS (last to have its gradients ready) and under PSS (its steps the slowest), and paces MWMS but
not PSS. An unslowed MWMS run's stamps: test_clusters' hybrid test, on its MWMS reference run."""
import pytest

from tests.helpers import FAST, processes_mentioning, records_in, run_module

pytestmark = pytest.mark.integration


# The delays are tenths of a second, far above the unslowed worker's step of a few ms, so that
# a machine busy with other work, which slows that step, leaves the slowed worker the one named.
# PSS's is longer: a PSS worker's step is paced by the coordinator's dispatch too.
@pytest.mark.parametrize("strategy, extra, delay_ms, named", [
    ("multi_worker_mirrored", [], 300,
     r"worker:1 last in (\d+)% of steps, median ([\d.]+) ms late"),
    ("parameter_server", ["--num_ps=1"], 400, r"worker:1 slowest: median step ([\d.]+) ms")])
def test_the_slowed_worker_is_named(tmp_path, strategy, extra, delay_ms, named):
    import re

    proc = run_module("experiments.run", f"--strategy={strategy}", "--num_workers=2", *extra,
                      "--model=mlp", *FAST, "--train_examples=1024", "--straggler_task=worker:1",
                      f"--straggler_delay_ms={delay_ms}", f"--results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (record,) = records_in(tmp_path)
    assert record["straggler"] == {"task": "worker:1", "delay_ms": float(delay_ms),
                                   "schedule": None}
    last = record["epochs"][-1]["timeline"]
    assert set(last["per_worker"]) == {"worker:0", "worker:1"}
    found = re.match(named, last["straggler"])
    assert found, last["straggler"]
    if strategy == "multi_worker_mirrored":
        # the input pipeline sleeps before each of worker:1's batches, a floor under its step (its
        # distributed iterator fetches the next batch during the step): it is last in most steps
        # (a buffered batch hides the sleep now and then) and late by the sleep less worker:0's
        # own step: by at least half of it. worker:0 waits that long; worker:1, last, not at all
        assert int(found[1]) >= 70 and float(found[2]) > delay_ms / 2
        assert last["per_worker"]["worker:0"]["wait_s"] > delay_ms / 2 / 1e3
        assert last["per_worker"]["worker:1"]["wait_s"] < 0.01
        # MWMS waits for the slowed worker at every all-reduce: its distributed iterator buffers
        # batches between epochs (measured: 2 per epoch arrive already slept), so (steps - 2)
        # sleeps are the lower bound of a steady epoch
        assert record["epochs"][-1]["time_s"] >= (record["steps_per_epoch"] - 2) * delay_ms / 1e3
    else:
        # its input pipeline prefetches, so the sleep runs beside its steps and paces them: its
        # median step is about the sleep, at least (a busy machine only adds to it)
        assert float(found[1]) > 0.9 * delay_ms
        # PSS gives most steps to the other worker, and every step runs once
        by_worker = record["steps_by_worker"]
        assert sum(by_worker.values()) == record["epochs"][-1]["epoch"] * \
            record["steps_per_epoch"]
        assert by_worker["worker:1"] < by_worker["worker:0"]
    steps = len(record["timeline"]["stamps"]["worker:0"])
    assert steps > 0 and all(len(s) == 3 and s[0] <= s[1] for s in
                             record["timeline"]["stamps"]["worker:1"])
    assert not processes_mentioning(str(tmp_path))


def test_a_pipelines_stages_and_checkpoints_are_in_its_trace(tmp_path):
    """model_parallel: each stage's forward and backward blocks are stamped inside the step
    (GPipe's order: the M forwards, then the backwards from the last micro-batch), and the
    checkpoints the run saved are in the record, so the trace can place them."""
    proc = run_module("experiments.run", "--strategy=model_parallel", "--num_stages=2",
                      "--microbatches=2", "--model=mlp", *FAST, "--epochs=2",
                      f"--checkpoint_dir={tmp_path / 'ckpt'}", "--checkpoint_every_steps=5",
                      f"--results_dir={tmp_path / 'out'}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (record,) = records_in(tmp_path / "out")
    trace = record["timeline"]
    assert (trace["stages"], trace["microbatches"]) == (2, 2)
    (rows,) = trace["stage_blocks"].values()
    steps = trace["stamps"]["replica:0"]
    assert len(rows) == len(steps) > 0
    for (t0, t1, _), flat in zip(steps, rows):
        assert len(flat) == 2 * 2 * 2 * 2  # stages x 2M blocks x (start, end)
        for s in range(2):
            mine = [flat[s * 8 + 2 * j: s * 8 + 2 * j + 2] for j in range(4)]
            assert all(a <= b for a, b in mine)  # each block ends after it starts...
            assert all(a[1] <= b[0] for a, b in zip(mine, mine[1:]))  # ...before the next
            assert t0 <= mine[0][0] and mine[-1][1] <= t1 + 1e-6  # inside compute
        assert flat[0] < flat[8]  # stage 1's first forward waits for stage 0's
    saves = record["checkpoint_saves"]
    assert saves and all(s["s"] >= 0 and s["at_time"] > 0 for s in saves)
    assert [s["step"] for s in saves] == sorted(s["step"] for s in saves)
    assert not processes_mentioning(str(tmp_path))

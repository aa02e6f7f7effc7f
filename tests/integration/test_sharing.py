"""The sharing calibration (experiments.comparison.sharing): two real plain-loop processes timed
alone, at once and in lockstep, one record written by process 0, nothing left running."""
import os

import pytest

from tests.helpers import TINY, processes_mentioning, records_in, run_module

pytestmark = pytest.mark.integration


def test_two_plain_loops_write_one_sharing_record(tmp_path):
    out = tmp_path / "sharing-out"
    proc = run_module("experiments.comparison.sharing", "--model=mlp", *TINY, "--threads=1",
                      "--rounds=2", "--steps_per_round=4", f"--results_dir={out}",
                      "--run_name=engine_floor_shared/mlp/512/r0", "--pin_loops")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "sharing: 2 plain loops at 1 thread(s) each" in proc.stdout
    (record,) = records_in(out)
    sharing = record["sharing"]
    assert record["strategy"] == "engine_floor" and record["num_workers"] == 2
    assert record["run_name"] == "engine_floor_shared/mlp/512/r0"
    assert record["config"]["processes"] == 2 and record["threads_per_task"] == 1
    assert sharing["processes"] == 2 and sharing["rounds"] == 2 and sharing["steps_per_round"] == 4
    rounds = sharing["rounds_examples_per_sec"]
    assert set(rounds) == {"0", "1"} and len(rounds["0"]["solo"]) == 2 and not rounds["1"]["solo"]
    for name in ("free", "lockstep"):
        # process 0's solo rate over the phase's per-process rate, round by round, the median
        ratios = [rounds["0"]["solo"][i] / ((rounds["0"][name][i] + rounds["1"][name][i]) / 2)
                  for i in range(2)]
        assert sharing["slowdown"][name] == pytest.approx(sum(ratios) / 2)
    # the record's epochs: the free rounds, both processes' examples/s summed
    assert [e["examples_per_sec"] for e in record["epochs"]] == [
        rounds["0"]["free"][i] + rounds["1"]["free"][i] for i in range(2)]
    # each loop's cores per phase, pinned to one core: more than none, at most that core (what
    # else the machine runs can only take from it); a loop waiting at the barrier leaves its
    # core idle
    assert 0 < sharing["cores_per_process"]["lockstep"] <= 1.2
    assert 0 < sharing["cores_per_process"]["free"] <= 1.2
    # both loops' CPU over the free rounds: the row's cores used, by loop, adding up
    by_loop = record["cpu"]["cores_by_task"]
    assert set(by_loop) == {"loop:0", "loop:1"} and all(v > 0 for v in by_loop.values())
    assert sum(by_loop.values()) == pytest.approx(record["cpu"]["cores_used"])
    assert 0 < record["cpu"]["cores_used"] <= 2.2
    assert record["final_eval_accuracy"] > 0 and record["epochs"][0]["eval_accuracy"] is None
    # --pin_loops: each loop ran on the core worker k of a --pin_workers cluster gets, as the
    # loop itself read its affinity (round robin: one core each where there are two)
    cpus = sorted(os.sched_getaffinity(0))
    assert sharing["pinned"] and record["config"]["pin_loops"] and sharing["cpus"] == {
        str(k): [cpus[k % len(cpus)]] for k in (0, 1)}
    assert not processes_mentioning(str(out))


def test_sharing_needs_a_fixed_thread_count(tmp_path):
    out = tmp_path / "bad"
    proc = run_module("experiments.comparison.sharing", "--threads=0", f"--results_dir={out}",
                      timeout=120)
    assert proc.returncode == 2 and "--threads=0" in proc.stderr.strip().splitlines()[-1]
    assert not out.exists()

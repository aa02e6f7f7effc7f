"""Where a step's time goes, from the stamps inside every worker's step
(results/records/step_stamps.py, results/report/timeline.py): the breakdown, the straggler's name,
the trace and the PNG."""
import json

import matplotlib.image as mpimg
import pytest

from results.records import step_stamps
from results.report import timeline


def _lockstep(steps=20, slow="worker:1", late=0.012):
    """Two workers meeting every step: each computes 10 ms, `slow` 12 ms more in 3 steps of 4;
    the synchronization takes 2 ms after the last one's gradients are ready."""
    stamps = {"worker:0": [], "worker:1": []}
    t = 100.0
    for i in range(steps):
        ready = {}
        for w in stamps:
            ready[w] = t + 0.010 + (late if w == slow and i % 4 else 0.0)
        end = max(ready.values()) + 0.002
        for w in stamps:
            stamps[w].append([t, ready[w], end])
        t = end
    return stamps


def test_breakdown_under_lockstep_names_who_waits_and_who_is_last():
    parts = step_stamps.breakdown(_lockstep(), lockstep=True)
    slow, fast = parts["worker:1"], parts["worker:0"]
    assert slow["compute_s"] == pytest.approx(0.022) and fast["compute_s"] == pytest.approx(0.010)
    assert fast["wait_s"] == pytest.approx(0.012) and slow["wait_s"] == pytest.approx(0.0)
    assert slow["sync_s"] == pytest.approx(0.002) == fast["sync_s"]
    assert slow["last_share"] == pytest.approx(15 / 20) and slow["late_s"] == pytest.approx(0.012)
    assert step_stamps.straggler_line(parts, True) == \
        "worker:1 last in 75% of steps, median 12.0 ms late"
    assert step_stamps.clear_straggler(parts, True) == "worker:1"  # 75% >= 70%
    even = step_stamps.breakdown(_lockstep(late=0.0), lockstep=True)  # ties: nobody is last
    assert step_stamps.clear_straggler(even, True) is None


def test_without_lockstep_the_straggler_is_the_slowest_step():
    stamps = {"worker:0": [[0, 0.01, 0.012]] * 5, "worker:1": [[0, 0.03, 0.036]] * 5,
              "worker:2": [[0, 0.01, 0.014]] * 5}
    parts = step_stamps.breakdown(stamps, lockstep=False)
    assert parts["worker:1"]["wait_s"] is None and parts["worker:1"]["step_s"] == 0.036
    assert step_stamps.straggler_line(parts, False) == ("worker:1 slowest: median step 36.0 ms, "
                                                     "2.77x the others' median (13.0 ms)")
    assert step_stamps.straggler_line({"worker:0": parts["worker:0"]}, False) is None
    assert step_stamps.clear_straggler(parts, False) == "worker:1"
    close = {w: dict(p, step_s=0.0130 if w == "worker:1" else 0.0125) for w, p in parts.items()}
    assert step_stamps.clear_straggler(close, False) is None  # 1.04x: noise


def test_trace_has_a_track_per_worker_and_every_phase(tmp_path):
    stamps = _lockstep(steps=4)
    trace = json.loads(timeline.trace_json(stamps, True, extra=[
        {"name": "evaluation", "worker": "worker:0", "start_s": 101.0, "end_s": 101.5}]))
    events = trace["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert names == {"worker:0", "worker:1", "run (chief)"}
    phases = [e for e in events if e["ph"] == "X" and e["pid"] == 1]
    assert {e["name"] for e in phases} == {timeline.COMPUTE, timeline.WAIT, timeline.SYNC}
    first = [e for e in phases if e["args"].get("step") == 0]
    # step 0's compute, waiting and synchronization cover it from its start to its update
    assert sum(e["dur"] for e in first) == pytest.approx((stamps["worker:1"][0][2] - 100.0) * 1e6)
    assert any(e["name"] == "evaluation" and e["dur"] == pytest.approx(5e5) for e in events)


def test_plot_draws_a_row_per_worker(tmp_path):
    path = timeline.plot(_lockstep(steps=8), True, str(tmp_path / "t.png"), "two workers")
    assert mpimg.imread(path).shape[1] > 600


def test_section_reads_records_and_skips_runs_without_stamps(tmp_path):
    stamps = _lockstep(steps=8)
    parts = step_stamps.breakdown(stamps, True)
    record = {"strategy": "multi_worker_mirrored", "model": "cnn", "num_workers": 2,
              "train_examples": 512,
              "num_replicas_in_sync": 2, "run_name": "multi_worker_mirrored-n2/cnn/512/r0",
              "config": {"model": "cnn"}, "straggler": None,
              "epochs": [{"epoch": 1}, {"epoch": 2, "timeline": {
                  "lockstep": True, "per_worker": parts,
                  "straggler": step_stamps.straggler_line(parts, True)}}],
              "timeline": {"stamps": stamps, "epoch": 2}}
    path = lambda name: str(tmp_path / name)  # noqa: E731
    section = timeline.section([record, dict(record, run_name="x/cnn/512/r1")], path)
    assert "worker:1 last in 75% of steps" in section.markdown
    assert section.markdown.count("| worker:1 |") == 1  # the first repeat only
    assert [p.rsplit("/", 1)[-1] for p in section.plots] == [
        "timeline-cnn-512-multi_worker_mirrored-n2.png"]
    assert json.load(open(section.files[0]))["traceEvents"]
    assert timeline.section([dict(record, epochs=[{"epoch": 1}])], path) is None


def test_the_runs_trace_places_epochs_evaluations_and_restarts():
    record = {"epochs": [{"epoch": 1, "started_at": 90.0, "eval_started_at": 95.0,
                          "ended_at": 96.0}, {"epoch": 2}],  # an epoch without wall clocks
              "restarts": [{"task": "worker:1", "action": "task", "at_time": 93.0,
                            "recovery_s": 2.5}]}
    extra = timeline.run_events(record)
    assert [e["name"] for e in extra] == ["epoch 1: training", "epoch 1: evaluation and its end",
                                          "restart of worker:1 (task)"]
    events = json.loads(timeline.trace_json(_lockstep(steps=2), True, extra))["traceEvents"]
    run = [e for e in events if e["pid"] == 2]  # the run's own track, after the two workers'
    assert run[0]["args"]["name"] == "run (chief)"
    assert min(e["ts"] for e in events if e["ph"] == "X") == 0.0  # the first epoch's start
    restart = next(e for e in run if e["name"].startswith("restart"))
    assert restart["ts"] == pytest.approx(3e6) and restart["dur"] == pytest.approx(2.5e6)


def _pipelined(steps=3, stages=2, micro=2, block=0.004):
    """One replica's pipeline: stage s runs micro-batch m's forward in slot m + s and the
    backwards in reverse (GPipe), each block `block` seconds."""
    stamps, blocks = {"replica:0": []}, {"replica:0": []}
    t = 50.0
    for _ in range(steps):
        flat = []
        for s in range(stages):
            slots = [m + s for m in range(micro)] + [
                micro + stages - 1 + (micro - 1 - m) + (stages - 1 - s) for m in
                reversed(range(micro))]
            for slot in slots:
                flat += [t + slot * block, t + (slot + 1) * block]
        span = 2 * (micro + stages - 1) * block
        stamps["replica:0"].append([t, t + span, t + span + 0.001])
        blocks["replica:0"].append(flat)
        t += span + 0.001
    return stamps, blocks


def test_a_pipelines_trace_has_a_thread_per_stage_and_its_blocks(tmp_path):
    stamps, blocks = _pipelined()
    events = json.loads(timeline.trace_json(stamps, False, (), blocks, 2))["traceEvents"]
    threads = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert threads == {1: "stage 0", 2: "stage 1"}
    stage1 = [e for e in events if e["ph"] == "X" and e["tid"] == 2 and e["args"]["step"] == 0]
    assert [e["name"] for e in stage1] == [timeline.FORWARD] * 2 + [timeline.BACKWARD] * 2
    assert [e["args"]["microbatch"] for e in stage1] == [0, 1, 1, 0]
    # stage 1 starts one block after stage 0 (GPipe's fill) and its blocks do not overlap
    assert stage1[0]["ts"] == pytest.approx(4e3)
    assert all(a["ts"] + a["dur"] <= b["ts"] + 1e-6 for a, b in zip(stage1, stage1[1:]))
    path = timeline.plot(stamps, False, str(tmp_path / "p.png"), "pipeline", blocks, 2)
    assert mpimg.imread(path).shape[0] > 150  # three rows: the replica and two stages


def test_the_runs_trace_places_checkpoints():
    extra = timeline.run_events({"checkpoint_saves": [{"step": 8, "at_time": 10.0, "s": 0.25}]})
    assert extra == [{"name": "checkpoint after step 8", "start_s": 10.0, "end_s": 10.25}]
